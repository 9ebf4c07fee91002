package up

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
)

// Command is the `inabox up` command line:
//
//	inabox up [flags] [scenario.yaml]
//
// Flags: --pcap DIR (one pcap per switch TAP), --json FILE (the Result),
// --timeout, --keep (keep the work directory), --clean (only remove what
// runs killed with SIGKILL left behind). It prints a summary on stdout.
func Command(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("inabox up", flag.ContinueOnError)
	fs.SetOutput(stderr)
	pcap := fs.String("pcap", "", "directory for one pcap per switch TAP")
	jsonOut := fs.String("json", "", "write the result as JSON to this file")
	timeout := fs.Duration("timeout", 0, "bound on the whole run (default from the scenario, else 2m)")
	keep := fs.Bool("keep", false, "keep the work directory (reports, sockets)")
	clean := fs.Bool("clean", false, "remove namespaces left by runs whose orchestrator was killed, then exit")
	fs.Usage = func() {
		fmt.Fprintln(stderr, "usage: inabox up [flags] [scenario.yaml]")
		fs.PrintDefaults()
	}
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *clean {
		removed, err := CleanStale()
		for _, n := range removed {
			fmt.Fprintln(stdout, "removed", n)
		}
		return err
	}
	cfg := DefaultConfig
	switch fs.NArg() {
	case 0:
	case 1:
		c, err := LoadConfig(fs.Arg(0))
		if err != nil {
			return err
		}
		cfg = c
	default:
		return errors.New("inabox up: at most one scenario file")
	}
	if *pcap != "" {
		cfg.PcapDir = *pcap
	}
	if *timeout > 0 {
		cfg.Timeout = *timeout
	}
	cfg.KeepWorkDir = cfg.KeepWorkDir || *keep
	res, err := Up(ctx, cfg, stdout, stderr)
	if *jsonOut != "" {
		b, jerr := json.MarshalIndent(res, "", "  ")
		if jerr == nil {
			jerr = os.WriteFile(*jsonOut, b, 0o644)
		}
		err = errors.Join(err, jerr)
	}
	return err
}

// ownerFile is written into a run's work directory: the orchestrator's pid
// and the namespaces it created, so CleanStale can remove what a killed
// orchestrator (SIGKILL, no chance to clean up) left.
const ownerFile = "owner"

func (r *run) writeOwner() error {
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
	return removed, errors.Join(errs...)
}
