package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/inabox/inabox/harness/report"
	"github.com/inabox/inabox/harness/run"
	"github.com/inabox/inabox/harness/scenario"
	"github.com/inabox/inabox/harness/testbed"
	"github.com/inabox/inabox/internal/rusage"
	"github.com/inabox/inabox/rdma"
	"github.com/inabox/inabox/switch/inahdr"
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

// progressEnabled: a bar on stderr when it is a terminal, or when forced.
func progressEnabled(stderr io.Writer, force bool) bool {
	if force {
		return true
	}
	f, ok := stderr.(*os.File)
	return ok && report.IsTerminal(f)
}

// printCost writes what emulating a run cost (docs/emulator.md, "What a
// run cost, printed"): its packet-hops and events, the wall and CPU time
// (every thread's: the gradients made and the results checked on other
// cores too), and the rates a larger run of the same kind can be sized by.
func printCost(w io.Writer, m run.Measures, virtual, wall, cpu time.Duration) {
	if virtual <= 0 || wall <= 0 || cpu <= 0 {
		return
	}
	si := func(x float64) string { return report.FormatSI(report.Num(x), "") }
	sec := func(d time.Duration) string { return report.FormatSeconds(report.Num(d.Seconds())) }
	fmt.Fprintf(w, "emulation: %s packet-hops (%s events) in %s wall, %s CPU: %s packet-hops per CPU-second; wall %.3g× the %s of virtual time\n",
		si(float64(m.PacketHops)), si(float64(m.Events)), sec(wall), sec(cpu), si(float64(m.PacketHops)/cpu.Seconds()),
		float64(wall)/float64(virtual), sec(virtual))
}

// runOpts are the flags of `inabox run`.
type runOpts struct {
	out, pcap, policy string
	cpuProfile        string
	seed              uint64
	seedSet, force    bool
}

// runFlags are the flags of `inabox run`, bound to o.
func runFlags(o *runOpts) *flag.FlagSet {
	fs := flag.NewFlagSet("run", flag.ContinueOnError)
	fs.StringVar(&o.out, "out", "", "write results.json, CSV and SVG plots into `DIR`")
	fs.StringVar(&o.pcap, "pcap", "", "write one pcap per link into `DIR`, captured at the host or PS end and named by that end and the switch port "+
		"(h0-w1.0-sw2.pcap: host h0's worker w1.0 on switch port 2; ps0-sw0.pcap); the estimated size goes to stderr first")
	fs.Func("seed", "replace the scenario's seed with `N` (≥ 1)", func(v string) error {
		n, err := strconv.ParseUint(v, 0, 64)
		o.seed, o.seedSet = n, true
		return err
	})
	fs.StringVar(&o.policy, "policy", "", "replace the scenario's policy with `NAME`: "+strings.Join(testbed.Names(), ", ")+" (variants: "+strings.Join(testbed.Variants(), ", ")+")")
	fs.BoolVar(&o.force, "progress", false, "draw the progress bar even when stderr is not a terminal")
	fs.StringVar(&o.cpuProfile, "cpuprofile", "", "write a CPU profile of the run to `FILE` (read it with go tool pprof)")
	return fs
}

// cmdRun runs `inabox run [FILE]`.
func cmdRun(o *runOpts, args []string, stdout, stderr io.Writer) error {
	file, err := oneFile("run", args)
	if err != nil {
		return err
	}
	if _, ok := testbed.Lookup(o.policy); o.policy != "" && !ok {
		return usageError{msg: fmt.Sprintf("run: --policy %q: must be one of %s (variants: %s)", o.policy, strings.Join(testbed.Names(), ", "), strings.Join(testbed.Variants(), ", "))}
	}
	if o.seed == 0 && o.seedSet {
		return usageError{msg: "run: --seed 0: must be ≥ 1"}
	}
	for _, d := range []struct{ flag, dir string }{{"--out", o.out}, {"--pcap", o.pcap}} {
		if err := writableDir(d.dir); err != nil {
			return fmt.Errorf("run: %s %s: %w", d.flag, d.dir, err) // before the run, not after it
		}
	}
	s, err := loadScenario(file)
	if err != nil {
		return err
	}
	p := s.Policy
	if o.policy != "" {
		p = o.policy
	}
	if o.pcap != "" {
		writePcapEstimate(stderr, s, o.pcap)
	}
	prog := report.NewProgress(stderr, fmt.Sprintf("%s/%s", s.Name, p), progressEnabled(stderr, o.force))
	// Ctrl-C stops the run: what was measured so far is printed and
	// written, marked incomplete.
	ctx, stop := interruptContext()
	defer stop()
	stopProfile, err := startCPUProfile("run", o.cpuProfile)
	if err != nil {
		return err
	}
	var m run.Measures
	u0, uerr := rusage.Self()
	w0 := time.Now()
	res, err := run.Run(s, run.Options{Seed: o.seed, Policy: o.policy, PcapDir: o.pcap, Progress: prog, Context: ctx, Measures: &m})
	wall := time.Since(w0)
	if perr := stopProfile(); err == nil {
		err = perr
	}
	if res == nil {
		return err
	}
	if u1, err1 := rusage.Self(); uerr == nil && err1 == nil && m.PacketHops > 0 {
		// last, after the summary and the files written
		defer printCost(stderr, m, time.Duration(float64(res.End)*float64(time.Second)), wall, u1.CPU-u0.CPU)
	}
	res.PrintSummary(stdout)
	defer func() {
		if err != nil {
			// (the error itself is printed once, by main, on stderr)
			fmt.Fprintln(stdout, "\nINCOMPLETE: the results above are partial")
		}
	}()
	if o.out != "" {
		files, werr := report.WriteOutputs(o.out, res)
		if werr != nil {
			return werr
		}
		fmt.Fprintf(stdout, "\nwrote %d files to %s\n", len(files), o.out)
	}
	if o.pcap != "" {
		fmt.Fprintf(stdout, "pcap files written to %s\n", o.pcap)
	}
	return err
}

// pcapLarge is the estimated pcap size from which `run --pcap` says that
// it is large.
const pcapLarge = 1 << 30

// pcapEstimate is a rough size of the pcaps `run --pcap` writes for s, in
// bytes: each worker packet is captured twice on its worker's link (sent,
// and its result received), every frame with its pcap record header. PS
// traffic, ACKs and control messages are left out: a policy that sends
// much through the PS (ATP and ESA about 1.5×) writes more, one without
// INA (none) less.
func pcapEstimate(s *scenario.Scenario) int64 {
	const perFrame = 16 + rdma.HeadersLen + rdma.BTHLen + inahdr.Len + rdma.ICRCLen // record header, headers, ICRC
	vpp := int64(s.Topology.Switch.ValuesPerPacket)
	return s.Estimate(scenario.DefaultModels()).WorkerPackets * 2 * (perFrame + 4*vpp)
}

// writePcapEstimate tells stderr how much `run --pcap DIR` is about to
// write, and that it is a lot when it is more than pcapLarge.
func writePcapEstimate(stderr io.Writer, s *scenario.Scenario, dir string) {
	n := pcapEstimate(s)
	size := fmt.Sprintf("%.0f MB", float64(n)/1e6)
	if n < 1e6 {
		size = fmt.Sprintf("%.0f kB", float64(n)/1e3)
	} else if n >= 1e9 {
		size = fmt.Sprintf("%.1f GB", float64(n)/1e9)
	}
	fmt.Fprintf(stderr, "pcap: about %s into %s\n", size, dir)
	if n > pcapLarge {
		fmt.Fprintf(stderr, "pcap: that is more than 1 GiB: a smaller scaling.tensor_scale or fewer iterations write less\n")
	}
}

var errNoPolicy = errors.New("no policy of the scenario can run")
