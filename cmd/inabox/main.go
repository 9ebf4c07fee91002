// Command inabox runs in-network aggregation scenarios on the emulator.
//
//	inabox run [--seed N] [--pcap DIR] [--messages N]   run the embedded default scenario
//	inabox decode FILE.pcap                           RoCEv2 layers, ICRC verdict, INA header per frame
//	inabox help                                       this text
package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"os"

	"inabox/harness"
)

const usage = `inabox: in-network aggregation in a box

usage:
  inabox run [flags]      run the embedded default scenario and print its counters
  inabox decode FILE      print each frame of a pcap: RoCEv2 layers, ICRC verdict, INA header
  inabox validate [--print] FILE...
                          check scenario files; every error names the file, line and field
  inabox help             show this text

run flags:
  --seed N       seed of every random source (default 1)
  --pcap DIR     write one pcap file per node port into DIR
  --messages N   RC messages each host sends (default 20000)
`

func main() {
	if err := run(os.Args[1:], os.Stdout, os.Stderr); err != nil {
		fmt.Fprintln(os.Stderr, "inabox:", err)
		var ue usageError
		if errors.As(err, &ue) {
			os.Exit(2)
		}
		os.Exit(1)
	}
}

type usageError struct{ msg string }

func (e usageError) Error() string { return e.msg }

func run(args []string, stdout, stderr io.Writer) error {
	if len(args) == 0 {
		fmt.Fprint(stderr, usage)
		return usageError{"no command given"}
	}
	switch args[0] {
	case "run":
		return cmdRun(args[1:], stdout, stderr)
	case "decode":
		return cmdDecode(args[1:], stdout, stderr)
	case "validate":
		return cmdValidate(args[1:], stdout, stderr)
	case "help", "-h", "--help":
		fmt.Fprint(stdout, usage)
		return nil
	}
	fmt.Fprint(stderr, usage)
	return usageError{fmt.Sprintf("unknown command %q", args[0])}
}

func cmdRun(args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("run", flag.ContinueOnError)
	fs.SetOutput(stderr)
	cfg := harness.DefaultDemo
	fs.Uint64Var(&cfg.Seed, "seed", cfg.Seed, "seed of every random source")
	fs.StringVar(&cfg.PcapDir, "pcap", "", "write one pcap per node port into `DIR`")
	fs.IntVar(&cfg.Messages, "messages", cfg.Messages, "RC messages each host sends")
	if err := fs.Parse(args); err != nil {
		return usageError{err.Error()}
	}
	if fs.NArg() > 0 {
		return usageError{fmt.Sprintf("run: scenario files are not supported yet (got %q); run without one for the embedded default", fs.Arg(0))}
	}
	if cfg.Messages < 1 {
		return usageError{fmt.Sprintf("run: --messages = %d: must be ≥ 1", cfg.Messages)}
	}
	res, err := harness.RunDemo(cfg)
	if err != nil {
		return err
	}
	res.Print(stdout)
	if cfg.PcapDir != "" {
		fmt.Fprintf(stdout, "\npcap files written to %s\n", cfg.PcapDir)
	}
	return nil
}
