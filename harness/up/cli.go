package up

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"

	"github.com/inabox/inabox/harness/up/k8s"
)

// Command is the `inabox up` command line:
//
//	inabox up [flags] [scenario.yaml]
//
// The scenario is in `inabox run`'s format (default: DefaultScenario,
// up-multijob.yaml). Flags: --seed and --policy (override the scenario's), --batch,
// --pcap DIR (one pcap per switch port), --json FILE (the Result),
// --timeout, --keep (keep the work directory), --transport tap|udp
// (udp: the multi-host path, namespaces as machines), --clean (only remove what
// runs killed with SIGKILL left behind). It prints a summary on stdout.
func Command(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	var f cliFlags
	fs := newFlagSet(&f)
	fs.SetOutput(stderr)
	fs.Usage = func() {
		fmt.Fprintln(stderr, "usage: inabox up [flags] [scenario.yaml]")
		fs.PrintDefaults()
	}
	var positional []string
	for {
		if err := fs.Parse(args); err != nil {
			if errors.Is(err, flag.ErrHelp) {
				return nil // the usage was printed
			}
			return err
		}
		if fs.NArg() == 0 {
			break
		}
		positional = append(positional, fs.Arg(0))
		args = fs.Args()[1:]
	}
	if f.clean {
		removed, err := CleanStale()
		for _, n := range removed {
			fmt.Fprintln(stdout, "removed", n)
		}
		return err
	}
	if f.emit != "" {
		return f.emitCommand(positional, stdout)
	}
	if len(positional) > 1 {
		return fmt.Errorf("inabox up: at most one scenario file, got %d: %s", len(positional), strings.Join(positional, " "))
	}
	cfg := f.cfg
	if len(positional) == 1 {
		cfg.Scenario = positional[0]
	}
	if cfg.Command == nil {
		cfg.Command = SelfCommand
	}
	written := false
	writeResult := func(res Result) error {
		if f.json == "" || written {
			return nil
		}
		written = true
		b, err := json.MarshalIndent(res, "", "  ")
		if err == nil {
			err = os.WriteFile(f.json, b, 0o644)
		}
		return err
	}
	var holdErr error
	cfg.OnHold = func(res Result, _ error) { holdErr = writeResult(res) } // written before the hold
	res, err := Up(ctx, cfg, stdout, stderr)
	return errors.Join(err, holdErr, writeResult(res))
}

// SelfCommand builds the command for a role from the inabox binary itself
// (`inabox switch|host|ps ARGS`), so that `go install …/cmd/inabox` is all
// `inabox up` needs; inaswitch, inahost or inaps beside the executable (make
// bin) are used instead where they are.
func SelfCommand(role string, args []string) *exec.Cmd {
	exe, err := os.Executable()
	if err != nil {
		return defaultCommand(role, args)
	}
	if p := filepath.Join(filepath.Dir(exe), "ina"+role); fileExists(p) {
		return exec.Command(p, args...)
	}
	return exec.Command(exe, append([]string{role}, args...)...)
}

// cliFlags are the values of Command's flags.
type cliFlags struct {
	cfg   Config
	json  string
	clean bool
	emit  string // --emit FORMAT (emit.go)
	k8s   k8s.Options
}

// FlagSet returns the flags of `inabox up`, the set Command parses its
// arguments with (its values are bound to nothing).
func FlagSet() *flag.FlagSet { return newFlagSet(new(cliFlags)) }

func newFlagSet(f *cliFlags) *flag.FlagSet {
	fs := flag.NewFlagSet("inabox up", flag.ContinueOnError)
	fs.Uint64Var(&f.cfg.Seed, "seed", 0, "seed (0 = the scenario's)")
	fs.StringVar(&f.cfg.Policy, "policy", "", "policy (default: the scenario's)")
	fs.IntVar(&f.cfg.Batch, "batch", 0, "backend batch of every process (0 = defaults)")
	fs.StringVar(&f.cfg.PcapDir, "pcap", "", "directory for one pcap per switch port, captured at the switch and named by the port and the node on it (sw2-h0-w1.0.pcap, sw0-ps0.pcap)")
	fs.StringVar(&f.cfg.Backend, "backend", "", "tap (default: TAPs bridged to the veths), or packet, ring or xdp: the switch and peers on the veth ends with that backend")
	fs.StringVar(&f.cfg.XDPMode, "xdp-mode", "", "with --backend xdp: auto (native, else generic), native or generic")
	fs.StringVar(&f.cfg.XDPFallback, "xdp-fallback", "", "with --backend xdp: packet or ring where XDP is unavailable (default: fail)")
	fs.StringVar(&f.json, "json", "", "write the result as JSON to this file")
	fs.DurationVar(&f.cfg.Timeout, "timeout", 0, "bound on the whole run (default 2m)")
	fs.BoolVar(&f.cfg.KeepWorkDir, "keep", false, "keep the work directory (reports, sockets)")
	fs.StringVar(&f.cfg.Transport, "transport", TransportTAP, "how the processes exchange frames: tap (TAP, bridges, veths in namespaces) or udp (namespaces as machines on a routed network, every port a UDP socket, the network start barrier: the multi-host path)")
	fs.BoolVar(&f.cfg.VsVirtual, "vs-virtual", false, "also run the scenario in virtual time and report each job's JCT ÷ its virtual JCT")
	fs.StringVar(&f.cfg.ProfileDir, "profile", "", "directory for a CPU profile of the switch and of every PS and worker process")
	fs.BoolVar(&f.clean, "clean", false, "remove namespaces left by runs whose orchestrator was killed, then exit")
	emitFlags(fs, f)
	fs.BoolVar(&f.cfg.Hold, "hold", false, "once the run ends, keep its namespaces (and processes still running) until Ctrl-C, for inabox exec NODE -- CMD")
	return fs
}

// ownerFile is written into a run's work directory: the orchestrator's pid
// and the namespaces it created, so CleanStale can remove what a killed
// orchestrator (SIGKILL, no chance to clean up) left.
const ownerFile = "owner"

func (r *session) writeOwner() error {
	s := strconv.Itoa(os.Getpid()) + "\n" + strings.Join(r.nsNames, "\n") + "\n"
	return os.WriteFile(filepath.Join(r.dir, ownerFile), []byte(s), 0o644)
}

// CleanStale removes the namespaces (and work directories) of runs whose
// orchestrator process no longer exists. Runs still alive are left alone.
func CleanStale() (removed []string, err error) {
	dirs, _ := filepath.Glob(filepath.Join(os.TempDir(), "inabox-up-*"))
	var errs []error
	for _, d := range dirs {
		b, rerr := os.ReadFile(filepath.Join(d, ownerFile))
		if rerr != nil {
			continue
		}
		lines := strings.Fields(string(b))
		if len(lines) == 0 {
			continue
		}
		pid, perr := strconv.Atoi(lines[0])
		if perr != nil || syscall.Kill(pid, 0) != syscall.ESRCH {
			continue // alive (or not ours to judge)
		}
		for _, ns := range lines[1:] {
			if !strings.HasPrefix(ns, NamePrefix) {
				continue
			}
			if derr := deleteNetns(ns); derr != nil {
				errs = append(errs, derr)
			} else {
				removed = append(removed, ns)
			}
		}
		os.RemoveAll(d)
	}
	more, serrs := cleanSessions() // held sessions' files (and namespaces, if their work directory went)
	return append(removed, more...), errors.Join(append(errs, serrs...)...)
}
