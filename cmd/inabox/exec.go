package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"os"

	"github.com/inabox/inabox/harness/up"
)

const execDoc = "Runs CMD in the network namespace of NODE of a running inabox up (see up --hold): switch, or a scenario node (ps, w1.0, ...), " +
	"e.g. tcpdump -i eth0, ping, ip -br link or a program of your own, with the terminal attached; exits with CMD's exit code. " +
	"Without --run there must be exactly one session running. Needs root."

type execOptions struct{ run string }

func execFlags(o *execOptions) *flag.FlagSet {
	fs := flag.NewFlagSet("exec", flag.ContinueOnError)
	fs.StringVar(&o.run, "run", "", "the session's `ID` (inabox up prints it; default: the only one running)")
	return fs
}

// cmdExec runs `inabox exec [--run ID] NODE -- CMD [ARGS]`. The flags end
// at NODE: everything after it (after an optional --) is CMD's.
func cmdExec(args []string, stdout, stderr io.Writer) error {
	var o execOptions
	fs := execFlags(&o)
	fs.SetOutput(io.Discard)
	fs.Usage = func() {}
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return errHelp
		}
		return usageError{msg: "exec: " + err.Error(), cmd: "exec"}
	}
	rest := fs.Args()
	if len(rest) > 0 && rest[0] == "--" {
		rest = rest[1:]
	}
	if len(rest) == 0 {
		return usageError{msg: "exec: want NODE -- CMD [ARGS]", cmd: "exec"}
	}
	node, argv := rest[0], rest[1:]
	if len(argv) > 0 && argv[0] == "--" {
		argv = argv[1:]
	}
	if len(argv) == 0 {
		return usageError{msg: fmt.Sprintf("exec: no command to run in %s (want NODE -- CMD [ARGS])", node), cmd: "exec"}
	}
	s, err := up.FindSession(o.run)
	if err != nil {
		return fmt.Errorf("exec: %w", err)
	}
	ns, err := s.Namespace(node)
	if err != nil {
		return fmt.Errorf("exec: %w", err)
	}
	code, err := up.Exec(ns, argv, os.Stdin, stdout, stderr)
	if err != nil {
		return fmt.Errorf("exec %s (%s): %w", node, ns, err)
	}
	if code != 0 {
		return exitCode(code)
	}
	return nil
}
