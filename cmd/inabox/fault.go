package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"strconv"
	"strings"
	"time"

	"github.com/inabox/inabox/harness/up/faultctl"
)

// faultDoc is `inabox fault`'s description in help.
const faultDoc = "Changes the links of a running inabox up at run time, through the fault API of the processes that model them " +
	"(docs/processes.md), and prints the link directions it touched. " +
	"COMMAND is one of: list (every direction: state, rate, delay, MTU, impairments, open windows, counters); " +
	"set LINK DIR key=value... (loss, duplicate, reorder, reorder_delay, corrupt, corrupt_undetected, jitter, " +
	"gilbert_elliott.p_good_to_bad, .p_bad_to_good, .loss_good, .loss_bad, ge. for short; probabilities in [0, 1], durations as 500us); " +
	"clear LINK DIR (no impairment); down LINK [DIR] [for=DURATION] (dropping what it holds; for: up again after it); up LINK [DIR]; " +
	"rate LINK DIR GBPS (0: unlimited); delay LINK DIR DURATION; mtu LINK DIR BYTES; " +
	"burst LINK DIR KIND VALUE DURATION (a window that reverts by itself: loss, duplicate, reorder, corrupt or corrupt_undetected " +
	"with a probability, delay or jitter with a duration, rate in Gb/s or mtu in bytes); reset LINK [DIR] (the scenario's configuration). " +
	"LINK is a scenario link (h0, ps0, ...) or all; DIR is up (host→switch), down (switch→host) or both (the default). " +
	"The run is --run DIR or the one inabox up running."

// faultFlags is `inabox fault`'s flag set.
func faultFlags() *flag.FlagSet {
	fs := flag.NewFlagSet("inabox fault", flag.ContinueOnError)
	fs.String("run", "", "the `DIR` the run of inabox up works in (default: the one running)")
	fs.Bool("json", false, "print the link directions as JSON")
	fs.Duration("timeout", 10*time.Second, "bound on the calls to the processes")
	return fs
}

// cmdFault is `inabox fault`.
func cmdFault(args []string, stdout, stderr io.Writer) error {
	fs := faultFlags()
	rest, err := parseArgs("fault", fs, args)
	if err != nil {
		return err
	}
	get := func(name string) string { return fs.Lookup(name).Value.String() }
	if len(rest) == 0 {
		return faultUsage("fault: no command given (list, set, clear, down, up, rate, delay, mtu, burst, reset)")
	}
	timeout, _ := time.ParseDuration(get("timeout"))
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	ix, err := faultctl.FindRun(get("run"))
	if err != nil {
		return fmt.Errorf("fault: %w", err)
	}
	st, err := faultDo(ctx, ix, rest[0], rest[1:])
	if err != nil && st == nil {
		var ue usageError
		if errors.As(err, &ue) {
			return err
		}
		return fmt.Errorf("fault %s: %w", rest[0], err)
	}
	if get("json") == "true" {
		b, jerr := json.MarshalIndent(st, "", "  ")
		if jerr != nil {
			return jerr
		}
		fmt.Fprintf(stdout, "%s\n", b)
	} else if werr := faultctl.WriteTable(stdout, st); werr != nil {
		return werr
	}
	if err != nil {
		return fmt.Errorf("fault %s: %w", rest[0], err)
	}
	return nil
}

// faultUsage is a usage error of `inabox fault`.
func faultUsage(msg string) error { return usageError{msg: msg, cmd: "fault"} }

// faultDo runs one fault command on the run and returns the directions it
// touched (all of them for list).
func faultDo(ctx context.Context, ix *faultctl.Index, cmd string, args []string) ([]faultctl.DirState, error) {
	nargs := func(min, max int, form string) error {
		if len(args) < min || len(args) > max {
			return faultUsage(fmt.Sprintf("fault %s: usage: inabox fault %s %s", cmd, cmd, form))
		}
		return nil
	}
	// link and dir: LINK [DIR], DIR defaulting to both.
	link := func() (string, string) {
		if len(args) > 1 {
			return args[0], args[1]
		}
		return args[0], faultctl.Both
	}
	each := func(fn func(ctx context.Context, c *faultctl.Client, link, dir string) ([]faultctl.DirState, error)) ([]faultctl.DirState, error) {
		l, d := link()
		return ix.Each(ctx, l, d, fn)
	}
	number := func(what, s string) (float64, error) {
		f, err := strconv.ParseFloat(s, 64)
		if err != nil {
			return 0, faultUsage(fmt.Sprintf("fault %s: %s %q: not a number", cmd, what, s))
		}
		return f, nil
	}
	duration := func(what, s string) (time.Duration, error) {
		d, err := time.ParseDuration(s)
		if err != nil {
			return 0, faultUsage(fmt.Sprintf("fault %s: %s %q: not a duration (e.g. 500us)", cmd, what, s))
		}
		return d, nil
	}
	config := func(p faultctl.ConfigPatch) ([]faultctl.DirState, error) {
		return each(func(ctx context.Context, c *faultctl.Client, l, d string) ([]faultctl.DirState, error) {
			return c.SetConfig(ctx, l, d, p)
		})
	}
	switch cmd {
	case "list":
		if err := nargs(0, 0, ""); err != nil {
			return nil, err
		}
		return ix.List(ctx)
	case "set":
		if len(args) < 3 {
			return nil, nargs(3, 3, "LINK DIR key=value...")
		}
		p, err := faultctl.ParseImpairments(args[2:])
		if err != nil {
			return nil, faultUsage("fault set: " + err.Error())
		}
		return each(func(ctx context.Context, c *faultctl.Client, l, d string) ([]faultctl.DirState, error) {
			return c.SetImpairments(ctx, l, d, p)
		})
	case "clear":
		if err := nargs(1, 2, "LINK [DIR]"); err != nil {
			return nil, err
		}
		return each(func(ctx context.Context, c *faultctl.Client, l, d string) ([]faultctl.DirState, error) {
			return c.ClearImpairments(ctx, l, d)
		})
	case "down", "up":
		var dur time.Duration
		if n := len(args); n > 1 && strings.HasPrefix(args[n-1], "for=") && cmd == "down" {
			var err error
			if dur, err = duration("for", strings.TrimPrefix(args[n-1], "for=")); err != nil {
				return nil, err
			}
			args = args[:n-1]
		}
		form := "LINK [DIR]"
		if cmd == "down" {
			form += " [for=DURATION]"
		}
		if err := nargs(1, 2, form); err != nil {
			return nil, err
		}
		return each(func(ctx context.Context, c *faultctl.Client, l, d string) ([]faultctl.DirState, error) {
			return c.SetUp(ctx, l, d, cmd == "up", dur)
		})
	case "rate":
		if err := nargs(3, 3, "LINK DIR GBPS"); err != nil {
			return nil, err
		}
		g, err := number("rate", args[2])
		if err != nil {
			return nil, err
		}
		return config(faultctl.ConfigPatch{RateGbps: &g})
	case "delay":
		if err := nargs(3, 3, "LINK DIR DURATION"); err != nil {
			return nil, err
		}
		d, err := duration("delay", args[2])
		if err != nil {
			return nil, err
		}
		fd := faultctl.Duration(d)
		return config(faultctl.ConfigPatch{Delay: &fd})
	case "mtu":
		if err := nargs(3, 3, "LINK DIR BYTES"); err != nil {
			return nil, err
		}
		m, err := strconv.Atoi(args[2])
		if err != nil {
			return nil, faultUsage(fmt.Sprintf("fault mtu: %q: not a number of bytes", args[2]))
		}
		return config(faultctl.ConfigPatch{MTU: &m})
	case "burst":
		if err := nargs(5, 5, "LINK DIR KIND VALUE DURATION"); err != nil {
			return nil, err
		}
		w := faultctl.Window{Kind: args[2]}
		d, err := duration("duration", args[4])
		if err != nil {
			return nil, err
		}
		w.Duration = faultctl.Duration(d)
		if w.Kind == faultctl.WinDelay || w.Kind == faultctl.WinJitter {
			v, err := duration(w.Kind, args[3])
			if err != nil {
				return nil, err
			}
			w.Delay = faultctl.Duration(v)
		} else if w.Value, err = number("value", args[3]); err != nil {
			return nil, err
		}
		return each(func(ctx context.Context, c *faultctl.Client, l, d string) ([]faultctl.DirState, error) {
			return c.Open(ctx, l, d, w)
		})
	case "reset":
		if err := nargs(1, 2, "LINK [DIR]"); err != nil {
			return nil, err
		}
		return each(func(ctx context.Context, c *faultctl.Client, l, d string) ([]faultctl.DirState, error) {
			return c.Reset(ctx, l, d)
		})
	}
	return nil, faultUsage(fmt.Sprintf("fault: unknown command %q (list, set, clear, down, up, rate, delay, mtu, burst, reset)", cmd))
}
