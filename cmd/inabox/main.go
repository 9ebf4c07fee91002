// Command inabox runs in-network aggregation scenarios on the emulator.
//
//	inabox run [FILE] [--out DIR] [--pcap DIR] [--seed N] [--policy NAME]   run a scenario (default: the embedded one)
//	inabox compare [FILE] [--json]                    run a scenario under every policy, one table
//	inabox demo [--seed N] [--pcap DIR] [--messages N]  the RC demo over a learning switch
//	inabox decode FILE.pcap                           RoCEv2 layers, ICRC verdict, INA header per frame
//	inabox up [--seed N] [--policy NAME] [--pcap DIR] [FILE]  the scenario as processes over TAP in namespaces (root)
//	inabox help                                       this text
//	inabox version                                    the build's module version and VCS revision
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"runtime/debug"
	"strings"
	"syscall"

	"github.com/inabox/inabox/harness/testbed"
	"github.com/inabox/inabox/harness/up"
)

// usage is the help text; the policy names come from the registry.
var usage = strings.ReplaceAll(usageText, "{policies}", strings.Join(testbed.Names(), ", "))

const usageText = `inabox: in-network aggregation in a box

usage:
  inabox run [flags] [FILE]
                          run a scenario (default: the embedded default.yaml) and
                          print its summary table
  inabox compare [--json] [FILE]
                          run a scenario under every policy; one table with ratios
                          to ATP and to the best baseline
  inabox sweep --set PATH=V1,V2,... [--set PATH=V] [--policies P,Q] [--out DIR] [FILE]
                          run the scenario at each value of one field under each
                          policy (default atp,freeina), other --set fields fixed;
                          a --metric (default jct_mean_s) and each gain over ATP;
                          --out writes sweep.csv and sweep.svg
  inabox demo [flags]     the RC demo: two hosts over a lossy learning switch
  inabox decode FILE      print each frame of a pcap: RoCEv2 layers, ICRC verdict, INA header
  inabox validate [--print] FILE...
                          check scenario files; every error names the file, line and field
  inabox up [flags] [FILE]
                          run a scenario (default: up-multijob.yaml, embedded) in real
                          time as processes: inaswitch, inaps and one inahost per worker
                          over TAP and veth in network namespaces (root; needs the three
                          beside inabox: make bin); removes everything it made, also on
                          failure
  inabox fault CMD ...    change a running inabox up's links at run time (inabox fault -h)
  inabox help             show this text
  inabox version          the module version and VCS revision of this build

run flags:
  --out DIR      write results.json, jobs.csv, job-<name>.csv and SVG plots into DIR
  --pcap DIR     write one pcap file per link into DIR
  --seed N       replace the scenario's seed
  --policy NAME  replace the scenario's policy ({policies})
  --progress     draw the progress bar even when stderr is not a terminal

up flags:
  --seed N, --policy NAME   as for run
  --pcap DIR     one pcap per switch TAP (swK.pcap) into DIR
  --json FILE    the result (jobs, workers, per-iteration checks, counters) as JSON
  --timeout D    bound on the whole run (default 2m)
  --batch N      backend batch of every process
  --keep         keep the work directory (reports, sockets)
  --clean        only remove namespaces of runs whose orchestrator was killed

demo flags:
  --seed N       seed of every random source (default 1)
  --pcap DIR     write one pcap file per node port into DIR
  --messages N   RC messages each host sends (default 20000)
`

func main() {
	if err := runCLI(os.Args[1:], os.Stdout, os.Stderr); err != nil {
		fmt.Fprintln(os.Stderr, "inabox:", err)
		var ue usageError
		if errors.As(err, &ue) {
			os.Exit(2)
		}
		os.Exit(1)
	}
}

type usageError struct{ msg string }

// errHelp is returned by a command whose flags asked for its usage (-h):
// the usage was printed and the command succeeds.
var errHelp = errors.New("help requested")

func (e usageError) Error() string { return e.msg }

// runCLI runs the command line args (without the program name), writing to
// stdout and stderr; main and the tests call it.
func runCLI(args []string, stdout, stderr io.Writer) error {
	if err := dispatch(args, stdout, stderr); !errors.Is(err, errHelp) {
		return err
	}
	return nil
}

func dispatch(args []string, stdout, stderr io.Writer) error {
	if len(args) == 0 {
		fmt.Fprint(stderr, usage)
		return usageError{"no command given"}
	}
	switch args[0] {
	case "run":
		return cmdRun(args[1:], stdout, stderr)
	case "compare":
		return cmdCompare(args[1:], stdout, stderr)
	case "sweep":
		return cmdSweep(args[1:], stdout, stderr)
	case "demo":
		return cmdDemo(args[1:], stdout, stderr)
	case "decode":
		return cmdDecode(args[1:], stdout, stderr)
	case "up":
		ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
		defer stop()
		return up.Command(ctx, args[1:], stdout, stderr)
	case "validate":
		return cmdValidate(args[1:], stdout, stderr)
	case "fault":
		return cmdFault(args[1:], stdout, stderr)
	case "help", "-h", "--help":
		fmt.Fprint(stdout, usage)
		return nil
	case "version", "--version":
		fmt.Fprintln(stdout, "inabox", version())
		return nil
	}
	fmt.Fprint(stderr, usage)
	return usageError{fmt.Sprintf("unknown command %q", args[0])}
}

func cmdDemo(args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("demo", flag.ContinueOnError)
	fs.SetOutput(stderr)
	cfg := defaultDemo
	fs.Uint64Var(&cfg.Seed, "seed", cfg.Seed, "seed of every random source")
	fs.StringVar(&cfg.PcapDir, "pcap", "", "write one pcap per node port into `DIR`")
	fs.IntVar(&cfg.Messages, "messages", cfg.Messages, "RC messages each host sends")
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return nil // -h: the usage was printed
		}
		return usageError{err.Error()}
	}
	if fs.NArg() > 0 {
		return usageError{fmt.Sprintf("demo: takes no arguments (got %q)", fs.Arg(0))}
	}
	if cfg.Messages < 1 {
		return usageError{fmt.Sprintf("demo: --messages = %d: must be ≥ 1", cfg.Messages)}
	}
	res, err := runDemo(cfg)
	if err != nil {
		return err
	}
	res.Print(stdout)
	if cfg.PcapDir != "" {
		fmt.Fprintf(stdout, "\npcap files written to %s\n", cfg.PcapDir)
	}
	return nil
}

// version is the module version and VCS revision the binary was built from
// (runtime/debug build info), or "(devel)".
func version() string {
	bi, ok := debug.ReadBuildInfo()
	if !ok {
		return "(unknown)"
	}
	v := bi.Main.Version
	for _, s := range bi.Settings {
		switch s.Key {
		case "vcs.revision":
			v += " " + s.Value
		case "vcs.modified":
			if s.Value == "true" {
				v += " (modified)"
			}
		}
	}
	return v
}
