package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strings"
	"syscall"

	"github.com/inabox/inabox/harness/report"
	"github.com/inabox/inabox/harness/run"
	"github.com/inabox/inabox/harness/scenario"
	"github.com/inabox/inabox/harness/testbed"
)

// loadScenario loads file, or the embedded default scenario when file is "".
func loadScenario(file string) (*scenario.Scenario, error) {
	if file == "" {
		return scenario.Embedded(scenario.DefaultName)
	}
	return scenario.Load(file)
}

// writableDir makes dir (if it is not "") and checks that files can be
// created in it.
func writableDir(dir string) error {
	if dir == "" {
		return nil
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	f, err := os.CreateTemp(dir, ".inabox-write-test-*")
	if err != nil {
		return err
	}
	f.Close()
	return os.Remove(f.Name())
}

// parseInterleaved parses flags and at most one positional argument, in any
// order ("run x.yaml --seed 2" as well as "run --seed 2 x.yaml").
func parseInterleaved(fs *flag.FlagSet, args []string) (string, error) {
	var pos []string
	for {
		if err := fs.Parse(args); err != nil {
			if errors.Is(err, flag.ErrHelp) {
				return "", errHelp
			}
			return "", usageError{err.Error()}
		}
		if fs.NArg() == 0 {
			break
		}
		pos = append(pos, fs.Arg(0))
		args = fs.Args()[1:]
	}
	if len(pos) > 1 {
		return "", usageError{fmt.Sprintf("%s: one scenario file at most (got %s)", fs.Name(), strings.Join(pos, ", "))}
	}
	if len(pos) == 1 {
		return pos[0], nil
	}
	return "", nil
}

// progressEnabled: a bar on stderr when it is a terminal, or when forced.
func progressEnabled(stderr io.Writer, force bool) bool {
	if force {
		return true
	}
	f, ok := stderr.(*os.File)
	return ok && report.IsTerminal(f)
}

// cmdRun implements `inabox run [FILE]`.
func cmdRun(args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("run", flag.ContinueOnError)
	fs.SetOutput(stderr)
	out := fs.String("out", "", "write results.json, CSV and SVG plots into `DIR`")
	pcap := fs.String("pcap", "", "write one pcap per link into `DIR`")
	seed := fs.Uint64("seed", 0, "replace the scenario's seed")
	policy := fs.String("policy", "", "replace the scenario's policy: "+strings.Join(testbed.Names(), ", ")+" (variants: "+strings.Join(testbed.Variants(), ", ")+")")
	force := fs.Bool("progress", false, "draw the progress bar even when stderr is not a terminal")
	file, err := parseInterleaved(fs, args)
	if err != nil {
		return err
	}
	if _, ok := testbed.Lookup(*policy); *policy != "" && !ok {
		return usageError{fmt.Sprintf("run: --policy %q: must be one of %s (variants: %s)", *policy, strings.Join(testbed.Names(), ", "), strings.Join(testbed.Variants(), ", "))}
	}
	if *seed == 0 && flagSet(fs, "seed") {
		return usageError{"run: --seed 0: must be ≥ 1"}
	}
	for _, d := range []struct{ flag, dir string }{{"--out", *out}, {"--pcap", *pcap}} {
		if err := writableDir(d.dir); err != nil {
			return fmt.Errorf("run: %s %s: %w", d.flag, d.dir, err) // before the run, not after it
		}
	}
	s, err := loadScenario(file)
	if err != nil {
		return err
	}
	p := s.Policy
	if *policy != "" {
		p = *policy
	}
	prog := report.NewProgress(stderr, fmt.Sprintf("%s/%s", s.Name, p), progressEnabled(stderr, *force))
	// Ctrl-C stops the run: what was measured so far is printed and
	// written, marked incomplete.
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	res, err := run.Run(s, run.Options{Seed: *seed, Policy: *policy, PcapDir: *pcap, Progress: prog, Context: ctx})
	if res == nil {
		return err
	}
	res.PrintSummary(stdout)
	defer func() {
		if err != nil {
			// (the error itself is printed once, by main, on stderr)
			fmt.Fprintln(stdout, "\nINCOMPLETE: the results above are partial")
		}
	}()
	if *out != "" {
		files, werr := report.WriteOutputs(*out, res)
		if werr != nil {
			return werr
		}
		fmt.Fprintf(stdout, "\nwrote %d files to %s\n", len(files), *out)
	}
	if *pcap != "" {
		fmt.Fprintf(stdout, "pcap files written to %s\n", *pcap)
	}
	return err
}

func flagSet(fs *flag.FlagSet, name string) bool {
	set := false
	fs.Visit(func(f *flag.Flag) {
		if f.Name == name {
			set = true
		}
	})
	return set
}

var errNoPolicy = errors.New("no policy of the scenario can run")
