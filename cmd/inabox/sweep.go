package main

import (
	"encoding/csv"
	"errors"
	"flag"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"text/tabwriter"

	"github.com/inabox/inabox/harness/report"
	"github.com/inabox/inabox/harness/run"
	"github.com/inabox/inabox/harness/scenario"
	"github.com/inabox/inabox/harness/testbed"
)

// sweepPoint is one value of the swept field under one policy.
type sweepPoint struct {
	value  string
	policy string
	r      *report.Results
}

// sweepOpts are the flags of `inabox sweep`.
type sweepOpts struct {
	sets                 []string
	only, out, metricKey string
	seed                 uint64
	parallel             int
}

// sweepFlags are the flags of `inabox sweep`, bound to o.
func sweepFlags(o *sweepOpts) *flag.FlagSet {
	fs := flag.NewFlagSet("sweep", flag.ContinueOnError)
	fs.Func("set", "the scenario field to sweep and its values as `PATH=V1,V2,...`; repeat with PATH=V to fix other fields", func(v string) error {
		o.sets = append(o.sets, v)
		return nil
	})
	fs.StringVar(&o.only, "policies", "atp,freeina", "run the comma-separated policies `P,Q,...` at each value")
	fs.StringVar(&o.out, "out", "", "write sweep.csv and sweep.svg into `DIR`")
	fs.Uint64Var(&o.seed, "seed", 0, "replace the scenario's seed with `N`")
	fs.StringVar(&o.metricKey, "metric", "jct_mean_s", "tabulate and plot the compare metric `KEY`, a results.json summary key (e.g. agg_throughput_eps)")
	fs.IntVar(&o.parallel, "parallel", 0, parallelUsage)
	return fs
}

// cmdSweep runs `inabox sweep --set PATH=V1,V2,... [FILE]`.
func cmdSweep(o *sweepOpts, args []string, stdout, stderr io.Writer) error {
	file, err := oneFile("sweep", args)
	if err != nil {
		return err
	}
	var m report.Metric
	var keys []string
	for _, cm := range report.CompareMetrics {
		keys = append(keys, cm.Key)
		if cm.Key == o.metricKey {
			m = cm
		}
	}
	if m.Get == nil || m.Better == "" {
		return usageError{msg: fmt.Sprintf("sweep: --metric %q: not a compare metric with a better direction (%s)", o.metricKey, strings.Join(keys, ", "))}
	}
	var field string
	var values []string
	var fixed [][2]string
	for _, set := range o.sets {
		f, list, ok := strings.Cut(set, "=")
		if !ok || f == "" || list == "" {
			return usageError{msg: fmt.Sprintf("sweep: --set %q: want PATH=V1,V2,... (e.g. topology.software_stack.gbps=100,46,30)", set)}
		}
		vs := strings.Split(list, ",")
		if len(vs) == 1 {
			fixed = append(fixed, [2]string{f, list})
			continue
		}
		if field != "" {
			return usageError{msg: fmt.Sprintf("sweep: --set %s and %s both have several values: sweep one field", field, f)}
		}
		field, values = f, vs
	}
	if field == "" {
		if len(fixed) == 0 {
			return usageError{msg: "sweep: --set PATH=V1,V2,... is required (e.g. topology.software_stack.gbps=100,46,30)"}
		}
		// One value only: a sweep of one point.
		field, values, fixed = fixed[len(fixed)-1][0], []string{fixed[len(fixed)-1][1]}, fixed[:len(fixed)-1]
	}
	policies := strings.Split(o.only, ",")
	for _, p := range policies {
		if _, ok := testbed.Lookup(p); !ok {
			return usageError{msg: fmt.Sprintf("sweep: --policies: %q is not a policy (policies: %s; variants: %s)", p, strings.Join(testbed.Names(), ", "), strings.Join(testbed.Variants(), ", "))}
		}
	}
	if err := writableDir(o.out); err != nil {
		return fmt.Errorf("sweep: --out: %w", err)
	}
	src, err := scenario.Source(file)
	if err != nil {
		return err
	}
	for _, f := range fixed {
		if src, err = scenario.Override(src, f[0], f[1]); err != nil {
			return usageError{msg: "sweep: --" + err.Error()}
		}
	}
	name := file
	if name == "" {
		name = scenario.DefaultName
	}
	if o.parallel < 0 {
		return usageError{msg: fmt.Sprintf("sweep: --parallel %d: must be ≥ 0 (0: as many as the CPUs and memory allow)", o.parallel)}
	}
	// Every value must give a valid scenario before anything runs.
	var scens []*scenario.Scenario
	var datas [][]byte
	var per int64
	for _, v := range values {
		data, err := scenario.Override(src, field, v)
		if err != nil {
			return usageError{msg: "sweep: --" + err.Error()}
		}
		s, err := scenario.Parse(name, data, scenario.DefaultModels())
		if err != nil {
			return fmt.Errorf("sweep: %s=%s: %w", field, v, err)
		}
		scens, datas = append(scens, s), append(datas, data)
		per = max(per, runMemory(s, policies))
	}
	writeSweepWarnings(stderr, field, values, scens)
	ctx, stop := interruptContext()
	defer stop()
	var tasks []*runTask
	for i := range scens {
		for _, p := range policies {
			tasks = append(tasks, &runTask{label: fmt.Sprintf("%s=%s/%s", field, values[i], p),
				load: func() (*scenario.Scenario, error) { return scenario.Parse(name, datas[i], scenario.DefaultModels()) },
				opts: run.Options{Seed: o.seed, Policy: p}})
		}
	}
	par, why := parallelRuns(o.parallel, len(tasks), per)
	if par > 1 {
		fmt.Fprintf(stderr, "sweep: %d runs, %d at a time (%s)\n", len(tasks), par, why)
	}
	runTasks(ctx, tasks, par, stderr, progressEnabled(stderr, false))
	var pts []sweepPoint
	var failed, failedNames []string
	for k, t := range tasks {
		i, p := k/len(policies), policies[k%len(policies)]
		switch {
		case !t.started: // interrupted before it began
			return fmt.Errorf("sweep: %s=%s: %s: %w", field, values[i], p, run.ErrInterrupted)
		case errors.Is(t.err, run.ErrInterrupted):
			return fmt.Errorf("sweep: %s=%s: %s: %w", field, values[i], p, t.err)
		case t.err != nil:
			// A run that failed (unfinished, a wrong sum) gives no
			// point: its numbers would mislead. The others go on.
			failed = append(failed, fmt.Sprintf("%s=%s: %s: %v", field, values[i], p, t.err))
			failedNames = append(failedNames, fmt.Sprintf("%s=%s: %s", field, values[i], p))
		default:
			pts = append(pts, sweepPoint{value: values[i], policy: p, r: t.r})
		}
	}
	ref := report.ReferencePolicy
	hasRef := false
	for _, p := range policies {
		hasRef = hasRef || p == ref
	}
	writeSweepText(stdout, m, scens[0].Name, field, values, policies, pts, ref, hasRef)
	for _, f := range failed {
		fmt.Fprintf(stdout, "FAILED (no point): %s\n", f)
	}
	if o.out != "" {
		if err := writeSweepCSV(filepath.Join(o.out, "sweep.csv"), m, field, pts, ref, hasRef); err != nil {
			return err
		}
		if err := writeSweepSVG(filepath.Join(o.out, "sweep.svg"), m, scens[0].Name, field, values, policies, pts, ref, hasRef); err != nil {
			return err
		}
	}
	if len(failed) > 0 {
		// the FAILED lines of the output say why; the error does not
		// repeat them
		return fmt.Errorf("sweep: %d of %d runs failed: %s (the FAILED lines on stdout say why)", len(failed), len(values)*len(policies), strings.Join(failedNames, ", "))
	}
	return nil
}

// writeSweepWarnings prints on stderr what `inabox validate` warns of for
// the sweep's scenarios (scens[i] is field=values[i]), before the runs: a
// warning given for every value once, another with the values it is given
// for.
func writeSweepWarnings(stderr io.Writer, field string, values []string, scens []*scenario.Scenario) {
	var order []string
	at := map[string][]string{}
	for i, s := range scens {
		for _, w := range s.Warnings(scenario.DefaultModels()) {
			if _, ok := at[w]; !ok {
				order = append(order, w)
			}
			at[w] = append(at[w], values[i])
		}
	}
	for _, w := range order {
		if len(at[w]) == len(values) {
			fmt.Fprintf(stderr, "sweep: warning: %s\n", w)
			continue
		}
		fmt.Fprintf(stderr, "sweep: warning (%s=%s): %s\n", field, strings.Join(at[w], ","), w)
	}
}

// value is p's metric at value v (NaN if it did not run).
func value(m report.Metric, pts []sweepPoint, v, p string) report.Num {
	for _, q := range pts {
		if q.value == v && q.policy == p {
			return m.Get(q.r)
		}
	}
	return report.Num(math.NaN())
}

// gain is p's gain over ref at value v, oriented so that > 1 is better;
// NaN when undefined (a zero or missing side).
func gain(m report.Metric, pts []sweepPoint, v, p, ref string) report.Num {
	a, b := float64(value(m, pts, v, p)), float64(value(m, pts, v, ref))
	if a == 0 || b == 0 || math.IsNaN(a) || math.IsNaN(b) {
		return report.Num(math.NaN())
	}
	if m.Better == "lower" {
		return report.Num(b / a)
	}
	return report.Num(a / b)
}

func writeSweepText(w io.Writer, m report.Metric, name, field string, values, policies []string, pts []sweepPoint, ref string, hasRef bool) {
	fmt.Fprintf(w, "scenario %s: %s by %s\n\n", name, m.Label, field)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintf(tw, "%s\t", field)
	for _, p := range policies {
		fmt.Fprintf(tw, "%s\t", p)
	}
	if hasRef {
		for _, p := range policies {
			if p != ref {
				fmt.Fprintf(tw, "%s vs %s\t", p, ref)
			}
		}
	}
	fmt.Fprintln(tw)
	for _, v := range values {
		fmt.Fprintf(tw, "%s\t", v)
		for _, p := range policies {
			fmt.Fprintf(tw, "%s\t", m.Format(value(m, pts, v, p)))
		}
		if hasRef {
			for _, p := range policies {
				if p != ref {
					fmt.Fprintf(tw, "%s\t", formatGain(gain(m, pts, v, p, ref)))
				}
			}
		}
		fmt.Fprintln(tw)
	}
	tw.Flush()
	if hasRef {
		fmt.Fprintf(w, "\n(%s: %s is better; \"p vs %s\" is p's gain, > 1× when p is better)\n", m.Label, m.Better, ref)
	}
}

func formatGain(g report.Num) string {
	if math.IsNaN(float64(g)) {
		return "n/a"
	}
	return fmt.Sprintf("%.3f×", float64(g))
}

func writeSweepCSV(file string, m report.Metric, field string, pts []sweepPoint, ref string, hasRef bool) error {
	f, err := os.Create(file)
	if err != nil {
		return err
	}
	cw := csv.NewWriter(f)
	cw.Write([]string{field, "policy", m.Key, "gain_vs_" + ref})
	for _, q := range pts {
		g := ""
		if hasRef {
			g = num(gain(m, pts, q.value, q.policy, ref))
		}
		cw.Write([]string{q.value, q.policy, num(m.Get(q.r)), g})
	}
	cw.Flush()
	return errors.Join(cw.Error(), f.Close())
}

func num(n report.Num) string {
	if f := float64(n); !math.IsNaN(f) {
		return strconv.FormatFloat(f, 'g', 9, 64)
	}
	return ""
}

// writeSweepSVG plots each policy's gain over the reference against the
// swept value (or, without the reference, each policy's metric).
func writeSweepSVG(file string, m report.Metric, name, field string, values, policies []string, pts []sweepPoint, ref string, hasRef bool) error {
	xs := make([]float64, len(values))
	numeric := true
	for i, v := range values {
		x, err := strconv.ParseFloat(strings.TrimRight(v, "abcdefghijklmnopqrstuvwxyzµ"), 64)
		numeric = numeric && err == nil
		xs[i] = x
	}
	c := report.Chart{Title: name + ": sweep of " + field, XLabel: field, YLabel: m.Label, Straight: true}
	if !numeric {
		for i := range xs {
			xs[i] = float64(i)
		}
		c.XLabel = field + " (value index: " + strings.Join(values, ", ") + ")"
	}
	if hasRef {
		c.YLabel = m.Label + ": gain over " + ref + " (×)"
	}
	for _, p := range policies {
		l := report.Line{Name: p, Policy: true}
		for i, v := range values {
			y := value(m, pts, v, p)
			if hasRef {
				y = gain(m, pts, v, p, ref)
			}
			l.Points = append(l.Points, report.Point{X: report.Num(xs[i]), Y: y})
		}
		c.Lines = append(c.Lines, l)
	}
	f, err := os.Create(file)
	if err != nil {
		return err
	}
	return errors.Join(c.WriteSVG(f), f.Close())
}
