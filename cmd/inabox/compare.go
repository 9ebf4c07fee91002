package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"strings"

	"github.com/inabox/inabox/harness/report"
	"github.com/inabox/inabox/harness/run"
	"github.com/inabox/inabox/harness/scenario"
	"github.com/inabox/inabox/harness/testbed"
)

// compareOpts are the flags of `inabox compare`.
type compareOpts struct {
	asJSON, force bool
	seed          uint64
	only, outDir  string
	cpuProfile    string
	nSeeds        int
	parallel      int
}

// compareFlags are the flags of `inabox compare`, bound to o.
func compareFlags(o *compareOpts) *flag.FlagSet {
	fs := flag.NewFlagSet("compare", flag.ContinueOnError)
	fs.BoolVar(&o.asJSON, "json", false, "print the comparison as JSON")
	fs.Uint64Var(&o.seed, "seed", 0, "replace the scenario's seed with `N`")
	fs.StringVar(&o.only, "policies", "", "run only the comma-separated policies `P,Q,...` (default: all)")
	fs.BoolVar(&o.force, "progress", false, "draw the progress bar even when stderr is not a terminal")
	fs.StringVar(&o.outDir, "out", "", "write into `DIR` compare.json, compare.csv and side-by-side plots (JCT per job and CDF, iteration times, memory, throughput, PS path, collisions per policy); with --seeds also jct.svg (JCT mean and p95, 95% CIs), the plots from the first seed")
	fs.IntVar(&o.nSeeds, "seeds", 1, "run every policy for `N` seeds (the scenario's or --seed's, then the next ones) and print means with 95% confidence intervals")
	fs.IntVar(&o.parallel, "parallel", 0, parallelUsage)
	fs.StringVar(&o.cpuProfile, "cpuprofile", "", "write a CPU profile of the runs to `FILE` (read it with go tool pprof)")
	return fs
}

// cmdCompare runs `inabox compare [FILE]`: the scenario under every policy
// (or those --policies names), one side-by-side table (or JSON), and a line
// naming each policy whose run failed (never a made-up number).
func cmdCompare(o *compareOpts, args []string, stdout, stderr io.Writer) (err error) {
	file, err := oneFile("compare", args)
	if err != nil {
		return err
	}
	if o.nSeeds < 1 || o.nSeeds > 1000 {
		return usageError{msg: fmt.Sprintf("compare: --seeds %d: must be between 1 and 1000", o.nSeeds)}
	}
	if err := writableDir(o.outDir); err != nil {
		return fmt.Errorf("compare: --out %s: %w", o.outDir, err) // before the runs, not after them
	}
	s, err := loadScenario(file)
	if err != nil {
		return err
	}
	want := testbed.Names()
	if o.only != "" {
		want = strings.Split(o.only, ",")
		for _, p := range want {
			if _, ok := testbed.Lookup(p); !ok {
				return usageError{msg: fmt.Sprintf("compare: --policies: %q is not a policy (policies: %s; variants: %s)", p, strings.Join(testbed.Names(), ", "), strings.Join(testbed.Variants(), ", "))}
			}
		}
	}
	if o.parallel < 0 {
		return usageError{msg: fmt.Sprintf("compare: --parallel %d: must be ≥ 0 (0: as many as the CPUs and memory allow)", o.parallel)}
	}
	// What makes this comparison suspect though the file is valid
	// (`inabox validate` says the same): before the runs, not after them.
	for _, w := range s.Warnings(scenario.DefaultModels()) {
		fmt.Fprintf(stderr, "compare: warning: %s\n", w)
	}
	// Ctrl-C stops the runs going on now; the table has the ones done.
	ctx, stop := interruptContext()
	defer stop()
	stopProfile, err := startCPUProfile("compare", o.cpuProfile)
	if err != nil {
		return err
	}
	defer func() {
		if perr := stopProfile(); err == nil {
			err = perr
		}
	}()
	if o.nSeeds > 1 {
		base := s.Seed
		if o.seed != 0 {
			base = o.seed
		}
		return compareSeeds(ctx, s, file, base, o.nSeeds, want, o, stdout, stderr)
	}
	tasks := make([]*runTask, len(want))
	for i, p := range want {
		tasks[i] = &runTask{label: fmt.Sprintf("%s/%s", s.Name, p), load: func() (*scenario.Scenario, error) { return loadScenario(file) },
			opts: run.Options{Seed: o.seed, Policy: p}}
	}
	par, why := parallelRuns(o.parallel, len(tasks), runMemory(s, want))
	if par > 1 {
		fmt.Fprintf(stderr, "compare: %d runs, %d at a time (%s)\n", len(tasks), par, why)
	}
	runTasks(ctx, tasks, par, stderr, progressEnabled(stderr, o.force))
	var results []*report.Results
	var failed, failedNames []string
	for i, t := range tasks {
		switch {
		case !t.started:
		case t.err != nil:
			// A run that failed (wrong sum, unfinished, unsupported
			// topology) gives no column: its numbers would mislead.
			failed = append(failed, fmt.Sprintf("%s: %v", want[i], t.err))
			failedNames = append(failedNames, want[i])
		default:
			results = append(results, t.r)
		}
	}
	if len(results) == 0 {
		return fmt.Errorf("compare: %w (failed: %s)", errNoPolicy, strings.Join(failed, "; "))
	}
	c := report.Compare(results)
	if o.asJSON {
		if err := c.WriteJSON(stdout); err != nil {
			return err
		}
	} else {
		if err := c.WriteText(stdout); err != nil {
			return err
		}
		for _, f := range failed {
			fmt.Fprintf(stdout, "FAILED (no column): %s\n", f)
		}
	}
	if o.outDir != "" {
		// the policies that ran: a failed one has no column here either
		files, err := report.WriteCompareOutputs(o.outDir, c, results)
		if err != nil {
			return fmt.Errorf("compare: --out %s: %w", o.outDir, err)
		}
		fmt.Fprintf(stderr, "compare: wrote %d files to %s\n", len(files), o.outDir)
	}
	if len(failed) > 0 {
		if !o.asJSON {
			// the table's FAILED lines say why; the error does not repeat them
			return fmt.Errorf("compare: %d of %d policies failed: %s (the FAILED lines on stdout say why)", len(failed), len(failed)+len(results), strings.Join(failedNames, ", "))
		}
		return fmt.Errorf("compare: %d of %d policies failed: %s", len(failed), len(failed)+len(results), strings.Join(failed, "; "))
	}
	return nil
}

// compareSeeds runs every policy in want for seeds base … base+n−1 and
// writes the repeated comparison (means with confidence intervals).
func compareSeeds(ctx context.Context, s *scenario.Scenario, file string, base uint64, n int, want []string, o *compareOpts, stdout, stderr io.Writer) error {
	name, asJSON, outDir := s.Name, o.asJSON, o.outDir
	seeds := make([]uint64, n)
	runs := make([][]*report.Results, n)
	var failed, failedNames []string
	var tasks []*runTask
	for i := range seeds {
		seeds[i] = base + uint64(i)
		runs[i] = make([]*report.Results, len(want))
		for _, pol := range want {
			tasks = append(tasks, &runTask{label: fmt.Sprintf("%s/%s seed %d", name, pol, seeds[i]),
				load: func() (*scenario.Scenario, error) { return loadScenario(file) },
				opts: run.Options{Seed: seeds[i], Policy: pol}})
		}
	}
	par, why := parallelRuns(o.parallel, len(tasks), runMemory(s, want))
	if par > 1 {
		fmt.Fprintf(stderr, "compare: %d runs, %d at a time (%s)\n", len(tasks), par, why)
	}
	runTasks(ctx, tasks, par, stderr, progressEnabled(stderr, o.force))
	total := 0
	for k, t := range tasks {
		i, p := k/len(want), k%len(want)
		switch {
		case !t.started:
		case t.err != nil:
			total++
			failed = append(failed, fmt.Sprintf("%s seed %d: %v", want[p], seeds[i], t.err))
			failedNames = append(failedNames, fmt.Sprintf("%s seed %d", want[p], seeds[i]))
		default:
			total++
			runs[i][p] = t.r
		}
	}
	rp := report.CompareSeeds(name, seeds, want, runs, failed)
	var err error
	if asJSON {
		err = rp.WriteJSON(stdout)
	} else {
		err = rp.WriteText(stdout)
	}
	if err != nil {
		return err
	}
	if outDir != "" {
		var first []*report.Results
		for _, r := range runs[0] {
			if r != nil {
				first = append(first, r)
			}
		}
		files, err := report.WriteRepeatedOutputs(outDir, rp, first)
		if err != nil {
			return fmt.Errorf("compare: --out %s: %w", outDir, err)
		}
		fmt.Fprintf(stderr, "compare: wrote %d files to %s\n", len(files), outDir)
	}
	if len(failed) > 0 {
		// the output lists why (FAILED lines, or JSON's failed); the error
		// does not repeat it
		return fmt.Errorf("compare: %d of %d runs failed: %s (the failed runs on stdout say why)", len(failed), total, strings.Join(failedNames, ", "))
	}
	return nil
}
