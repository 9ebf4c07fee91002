// Command inabox runs in-network aggregation scenarios on the emulator.
//
//	inabox COMMAND [flags] [arguments]
//
// `inabox help` lists every command with its arguments, what it does and
// its flags; `inabox help COMMAND` (or `inabox COMMAND -h`) shows one.
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

// command is one inabox command: its name, the synopsis of its arguments,
// what it does, its flags and how it runs.
type command struct {
	name string
	args string // the positional arguments, e.g. "[FILE]"
	doc  string // one paragraph
	// flags returns a new set of the command's flags; help lists them and
	// run parses the command line with a set from the same constructor.
	flags func() *flag.FlagSet
	// run runs the command on its command line (the arguments after its
	// name). An -h in it returns errHelp.
	run func(args []string, stdout, stderr io.Writer) error
}

// commands is every inabox command, in the order help lists them. A new
// command is one row here and a file with its flags and its run function.
var commands []command

func init() {
	commands = []command{
		newCommand("run", "[FILE]", "Runs a scenario (default: the embedded default.yaml) in virtual time and prints a summary per job. "+
			"Every all-reduce result is checked exactly; Ctrl-C stops the run and prints and writes what was measured, marked incomplete. "+
			"Stderr ends with what the run cost to emulate: packet-hops, wall and CPU time, wall ÷ virtual time.",
			runFlags, cmdRun),
		newCommand("compare", "[FILE]", "Runs a scenario under every policy (or --policies) and prints one table with ratios to ATP and to the best baseline; "+
			"a policy whose run fails gets no column and is named. --seeds N repeats every run over N seeds and prints means with 95 % confidence intervals.",
			compareFlags, cmdCompare),
		newCommand("sweep", "--set PATH=V1,V2,... [FILE]", "Runs a scenario at each value of one field under each of --policies, other --set fields fixed, "+
			"and prints a --metric and each policy's gain over ATP; --out writes sweep.csv and sweep.svg.",
			sweepFlags, cmdSweep),
		newCommand("validate", "FILE...", "Checks each scenario file: unknown keys, types, ranges, model names, fault targets. "+
			`Prints "FILE: ok" with the scenario's size and cost estimate, or every problem as FILE:LINE: PATH: VALUE: RULE. `+
			`A valid scenario whose comparisons are suspect (fixed latencies a large share of an all-reduce) gets "FILE: warning: ..." lines.`,
			validateFlags, cmdValidate),
		newCommand("rescale", "--rate-scale R FILE", rescaleDoc, rescaleFlags, cmdRescale),
		newCommand("demo", "", "The RC demo: two RDMA RC hosts through a learning switch over impaired links (loss, duplication, reordering, "+
			"corruption, a link flap, a switch crash); prints every link, port and queue-pair counter.",
			demoFlags, cmdDemo),
		newCommand("decode", "FILE.pcap", "Prints each frame of an Ethernet pcap: its RoCEv2 layers (RC and UC), ICRC verdict and INA header "+
			"(data, control messages by name with their fields, the switch's absorbed markers), then counts. "+
			"Frame numbers are the capture's (Wireshark's); a capture of another link type is refused.",
			decodeFlags, cmdDecode),
		{name: "up", args: "[FILE]", flags: up.FlagSet, run: cmdUp,
			doc: "Runs a scenario (default: the embedded up-multijob.yaml) in real time as processes: inabox switch, inabox ps and one inabox host per worker " +
				"(or the inaswitch, inaps, inahost of make bin beside inabox) over TAP and veth in network namespaces (root). " +
				"Removes everything it made, also on failure (with --hold only at Ctrl-C). --emit k8s DIR writes Kubernetes manifests instead and runs nothing."},
		{name: "fault", args: "COMMAND [ARGS]", flags: faultFlags, run: cmdFault, doc: faultDoc},
		{name: "exec", args: "NODE -- CMD [ARGS]", flags: func() *flag.FlagSet { return execFlags(new(execOptions)) }, run: cmdExec, doc: execDoc},
		roleCommand("switch", "the scenario's switch (data plane and the policy's control plane) over one TAP per port, with its control and fault API", up.SwitchFlagSet, up.SwitchMain),
		roleCommand("host", "one worker of the scenario (--node w1.0) on an interface, with its fault API", up.HostFlagSet, up.HostMain),
		roleCommand("ps", "one parameter server of the scenario (--node ps0) on an interface, with its fault API", up.PSFlagSet, up.PSMain),
		newCommand("help", "[COMMAND]", "Shows every command with its flags, or one command's.", noFlags("help"), cmdHelp),
		newCommand("version", "", "Prints the module version and VCS revision of this build.", noFlags("version"), cmdVersion),
	}
}

// newCommand is the command name whose flags bind to an O (flags makes a
// new set bound to the O it is given) and which run runs on the parsed O
// and positional arguments.
func newCommand[O any](name, args, doc string, flags func(*O) *flag.FlagSet, run func(o *O, args []string, stdout, stderr io.Writer) error) command {
	return command{name: name, args: args, doc: doc,
		flags: func() *flag.FlagSet { return flags(new(O)) },
		run: func(argv []string, stdout, stderr io.Writer) error {
			o := new(O)
			pos, err := parseArgs(name, flags(o), argv)
			if err != nil {
				return err
			}
			return run(o, pos, stdout, stderr)
		}}
}

// noFlags is the flag constructor of a command without flags.
func noFlags(name string) func(*struct{}) *flag.FlagSet {
	return func(*struct{}) *flag.FlagSet { return flag.NewFlagSet(name, flag.ContinueOnError) }
}

// lookup is the command called name, or nil.
func lookup(name string) *command {
	for i := range commands {
		if commands[i].name == name {
			return &commands[i]
		}
	}
	return nil
}

func main() { os.Exit(cli(os.Args[1:], os.Stdout, os.Stderr)) }

// cli runs the command line args (without the program name) and returns
// the exit code: 0, 2 for a usage error, 1 for any other. An error is
// printed once, on stderr, as "inabox: ERROR".
func cli(args []string, stdout, stderr io.Writer) int {
	err := runCLI(args, stdout, stderr)
	if err == nil {
		return 0
	}
	var code exitCode
	if errors.As(err, &code) {
		return int(code) // printed by the command
	}
	fmt.Fprintln(stderr, "inabox:", err)
	var ue usageError
	if errors.As(err, &ue) {
		if ue.cmd != "" {
			fmt.Fprintf(stderr, "(inabox help %s: its usage)\n", ue.cmd)
		} else {
			fmt.Fprintln(stderr, "(inabox help: every command and its flags)")
		}
		return 2
	}
	return 1
}

// usageError is a command line that is wrong (an unknown flag, a missing
// argument, a value out of range) rather than a run that failed.
type usageError struct {
	msg string
	cmd string // the command whose usage it is, or ""
}

func (e usageError) Error() string { return e.msg }

// errHelp is returned by a command whose flags asked for its usage (-h).
var errHelp = errors.New("help requested")

// runCLI runs the command line args (without the program name), writing to
// stdout and stderr; the returned error is not printed yet.
func runCLI(args []string, stdout, stderr io.Writer) error {
	if len(args) == 0 {
		writeHelp(stderr)
		return usageError{msg: "no command given"}
	}
	switch args[0] {
	case "-h", "-help", "--help":
		args = []string{"help"}
	case "--version":
		args = []string{"version"}
	}
	c := lookup(args[0])
	if c == nil {
		return usageError{msg: fmt.Sprintf("unknown command %q (commands: %s)", args[0], strings.Join(commandNames(), ", "))}
	}
	err := c.run(args[1:], stdout, stderr)
	if errors.Is(err, errHelp) {
		writeCommandHelp(stdout, c)
		return nil
	}
	var ue usageError
	if errors.As(err, &ue) && ue.cmd == "" {
		ue.cmd = c.name
		return ue
	}
	return err
}

func commandNames() []string {
	var out []string
	for _, c := range commands {
		out = append(out, c.name)
	}
	return out
}

// parseArgs parses argv with fs, flags and positional arguments in any
// order ("run x.yaml --seed 2" as well as "run --seed 2 x.yaml"; after
// "--" everything is positional), and returns the positional arguments.
// The flag package prints nothing: its error is returned as the usage
// error of command name, and -h as errHelp.
func parseArgs(name string, fs *flag.FlagSet, argv []string) ([]string, error) {
	fs.SetOutput(io.Discard)
	fs.Usage = func() {}
	var pos []string
	for {
		if err := fs.Parse(argv); err != nil {
			if errors.Is(err, flag.ErrHelp) {
				return nil, errHelp
			}
			return nil, usageError{msg: name + ": " + err.Error(), cmd: name}
		}
		rest := fs.Args()
		if len(rest) == 0 {
			return pos, nil
		}
		if n := len(argv) - len(rest); n > 0 && argv[n-1] == "--" {
			return append(pos, rest...), nil
		}
		pos = append(pos, rest[0])
		argv = rest[1:]
	}
}

// oneFile is the scenario file among pos ("" for none) of a command that
// takes at most one.
func oneFile(name string, pos []string) (string, error) {
	switch len(pos) {
	case 0:
		return "", nil
	case 1:
		return pos[0], nil
	}
	return "", usageError{msg: fmt.Sprintf("%s: one scenario file at most (got %s)", name, strings.Join(pos, ", "))}
}

// cmdUp runs `inabox up`: its command line is checked here against the same
// flags (so -h and flag errors behave as every command's), then run by
// harness/up.
func cmdUp(args []string, stdout, stderr io.Writer) error {
	fs := up.FlagSet()
	pos, err := parseArgs("up", fs, args)
	if err != nil {
		return err
	}
	clean := fs.Lookup("clean").Value.String() == "true"
	if fs.Lookup("emit").Value.String() != "" { // --emit FORMAT DIR [FILE]
		if len(pos) == 0 || len(pos) > 2 {
			return usageError{msg: fmt.Sprintf("up: --emit: want DIR [FILE], got %d arguments", len(pos))}
		}
	} else if len(pos) > 1 && !clean {
		return usageError{msg: fmt.Sprintf("up: one scenario file at most (got %s)", strings.Join(pos, ", "))}
	}
	if p := fs.Lookup("policy").Value.String(); p != "" {
		if _, ok := testbed.Lookup(p); !ok {
			return usageError{msg: fmt.Sprintf("up: --policy %q: must be one of %s (variants: %s)", p, strings.Join(testbed.Names(), ", "), strings.Join(testbed.Variants(), ", "))}
		}
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	return up.Command(ctx, args, stdout, stderr)
}

// interruptContext is done at the first Ctrl-C (or SIGTERM), for a run to
// stop and write what it measured; a second one kills the process at once
// (a run still building its testbed does not look at the context).
func interruptContext() (context.Context, context.CancelFunc) {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	go func() {
		<-ctx.Done()
		stop() // the default handling again: the next signal ends the process
	}()
	return ctx, stop
}

// roleCommand is a process role of `inabox up` (docs/processes.md): up
// starts `inabox ROLE …` (or the ina* binary of make bin beside inabox),
// and it runs by hand with its own flags (inabox ROLE -h). main is the
// role's entry point; it prints its own errors and returns the exit code.
func roleCommand(name, what string, flags func() *flag.FlagSet, main func(args []string, stderr io.Writer) int) command {
	return command{name: name, args: "[flags]",
		doc:   "A role of inabox up, started by it as a process (or run by hand): " + what + ".",
		flags: flags,
		run: func(args []string, _, stderr io.Writer) error {
			if _, err := parseArgs(name, flags(), args); err != nil {
				return err // -h, or a flag error: as every command's
			}
			if code := main(args, stderr); code != 0 {
				return exitCode(code)
			}
			return nil
		}}
}

// exitCode is the exit code of a command that printed its own error.
type exitCode int

func (e exitCode) Error() string { return fmt.Sprintf("exit status %d", int(e)) }

// cmdHelp runs `inabox help [COMMAND]`.
func cmdHelp(_ *struct{}, args []string, stdout, stderr io.Writer) error {
	switch len(args) {
	case 0:
		writeHelp(stdout)
		return nil
	case 1:
		c := lookup(args[0])
		if c == nil {
			return usageError{msg: fmt.Sprintf("help: unknown command %q (commands: %s)", args[0], strings.Join(commandNames(), ", "))}
		}
		writeCommandHelp(stdout, c)
		return nil
	}
	return usageError{msg: fmt.Sprintf("help: one command at most (got %s)", strings.Join(args, ", "))}
}

// cmdVersion runs `inabox version`.
func cmdVersion(_ *struct{}, args []string, stdout, stderr io.Writer) error {
	if len(args) > 0 {
		return usageError{msg: fmt.Sprintf("version: takes no arguments (got %q)", args[0])}
	}
	fmt.Fprintln(stdout, "inabox", version())
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
