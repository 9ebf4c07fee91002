package main

import (
	"bytes"
	"flag"
	"github.com/inabox/inabox/harness/scenario"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// helpSection is the part of the full help about command name: from its
// synopsis line to the next command's.
func helpSection(t *testing.T, help, name string) string {
	t.Helper()
	start := strings.Index(help, "\ninabox "+name+" ")
	if start < 0 {
		start = strings.Index(help, "\ninabox "+name+"\n")
	}
	if start < 0 {
		t.Fatalf("help has no section for %s:\n%s", name, help)
	}
	sec := help[start+1:]
	if end := strings.Index(sec, "\n\ninabox "); end >= 0 {
		sec = sec[:end]
	}
	return sec
}

// flagLine matches the line of flag name in a help text.
func flagLine(name string) *regexp.Regexp {
	return regexp.MustCompile(`(?m)^\s+--` + regexp.QuoteMeta(name) + `( \S+)?(\s|$)`)
}

// TestHelpListsEveryFlag: `inabox help` and `inabox help CMD` show every
// flag of every command's flag set, with its non-zero default; `CMD -h`
// prints the same as `help CMD`, on stdout, and succeeds.
func TestHelpListsEveryFlag(t *testing.T) {
	var all, errb bytes.Buffer
	if code := cli([]string{"help"}, &all, &errb); code != 0 || errb.Len() > 0 {
		t.Fatalf("help: exit %d, stderr %q", code, errb.String())
	}
	for _, h := range []string{"-h", "--help", "-help"} {
		var out bytes.Buffer
		if code := cli([]string{h}, &out, &errb); code != 0 || out.String() != all.String() {
			t.Errorf("%s: exit %d, output differs from help's", h, code)
		}
	}
	for _, c := range commands {
		t.Run(c.name, func(t *testing.T) {
			sec := helpSection(t, all.String(), c.name)
			var one, dashH, errb bytes.Buffer
			if err := runCLI([]string{"help", c.name}, &one, &errb); err != nil {
				t.Fatalf("help %s: %v", c.name, err)
			}
			if err := runCLI([]string{c.name, "-h"}, &dashH, &errb); err != nil {
				t.Fatalf("%s -h: %v", c.name, err)
			}
			if errb.Len() > 0 {
				t.Errorf("stderr: %q", errb.String())
			}
			if dashH.String() != one.String() {
				t.Errorf("%s -h:\n%s\nhelp %s:\n%s", c.name, dashH.String(), c.name, one.String())
			}
			if !strings.HasPrefix(one.String(), "usage: inabox "+c.name) || !strings.HasPrefix(sec, "inabox "+c.name) {
				t.Errorf("no synopsis:\n%s", one.String())
			}
			n := 0
			c.flags().VisitAll(func(f *flag.Flag) {
				n++
				for what, text := range map[string]string{"help": sec, "help " + c.name: one.String()} {
					line := flagLine(f.Name).FindString(text)
					if line == "" {
						t.Errorf("%s lacks --%s:\n%s", what, f.Name, text)
					}
				}
				if !isZeroDefault(f) && !strings.Contains(strings.Join(strings.Fields(one.String()), " "), "(default "+f.DefValue+")") {
					t.Errorf("help %s lacks --%s's default %q", c.name, f.Name, f.DefValue)
				}
			})
			if n > 0 != strings.Contains(one.String(), "\nflags:\n") {
				t.Errorf("%d flags, help:\n%s", n, one.String())
			}
		})
	}
}

// TestHelpWraps: no line of the help is wider than helpWidth.
func TestHelpWraps(t *testing.T) {
	var out bytes.Buffer
	writeHelp(&out)
	for _, l := range strings.Split(out.String(), "\n") {
		if n := len([]rune(l)); n > helpWidth && strings.Contains(strings.TrimSpace(l), " ") {
			t.Errorf("%d columns: %q", n, l)
		}
	}
}

// TestNoCommand: no command and an unknown one are usage errors (exit 2)
// that name the commands; help of an unknown command too.
func TestNoCommand(t *testing.T) {
	for _, args := range [][]string{nil, {"frobnicate"}, {"help", "frobnicate"}, {"help", "run", "compare"}, {"version", "x"}} {
		var out, errb bytes.Buffer
		if code := cli(args, &out, &errb); code != 2 {
			t.Errorf("%q: exit %d, want 2", args, code)
		}
		if n := strings.Count("\n"+errb.String(), "\ninabox:"); n != 1 {
			t.Errorf("%q: %d error lines:\n%s", args, n, errb.String())
		}
	}
	var out, errb bytes.Buffer
	cli(nil, &out, &errb)
	if !strings.Contains(errb.String(), "usage: inabox COMMAND") || out.Len() > 0 {
		t.Errorf("no command: stdout %q, stderr:\n%s", out.String(), errb.String())
	}
}

// TestErrorPrintedOnce: a bad invocation of any command prints exactly one
// "inabox:" line on stderr, and exits 2 for a usage error, 1 otherwise.
func TestErrorPrintedOnce(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "file")
	good := filepath.Join(dir, "good.yaml")
	bad := filepath.Join(dir, "bad.yaml")
	missing := filepath.Join(dir, "missing.yaml")
	for f, data := range map[string]string{
		file: "", good: "jobs:\n  - {name: a, model: vgg16, workers: 2, iterations: 1}\n",
		bad: "policy: nope\njobs:\n  - {name: a, model: vgg16, workers: 0, iterations: 2}\n",
	} {
		if err := os.WriteFile(f, []byte(data), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	onFile := filepath.Join(file, "sub")
	cases := []struct {
		code int
		args []string
		want string // in the error line
	}{
		{2, []string{"run", "--bogus"}, "run: flag provided but not defined: -bogus"},
		{2, []string{"run", "--seed", "x"}, `invalid value "x" for flag -seed`},
		{1, []string{"run", missing}, "missing.yaml"},
		{1, []string{"run", bad}, "bad.yaml:1: policy"},
		{2, []string{"run", "--policy", "bogus", good}, `--policy "bogus"`},
		{1, []string{"run", "--out", onFile, good}, "run: --out " + onFile},
		{1, []string{"run", "--pcap", onFile, good}, "run: --pcap " + onFile},
		{2, []string{"run", good, good}, "one scenario file at most"},
		{2, []string{"compare", "--bogus"}, "compare: flag provided but not defined"},
		{1, []string{"compare", missing}, "missing.yaml"},
		{1, []string{"compare", bad}, "bad.yaml:1: policy"},
		{2, []string{"compare", "--policies", "atp,bogus", good}, `"bogus" is not a policy`},
		{1, []string{"compare", "--seeds", "2", "--out", onFile, good}, "compare: --out " + onFile},
		{1, []string{"compare", "--out", onFile, good}, "compare: --out " + onFile},
		{2, []string{"sweep", "--bogus"}, "sweep: flag provided but not defined"},
		{1, []string{"sweep", "--set", "seed=1,2", missing}, "missing.yaml"},
		{1, []string{"sweep", "--set", "seed=1,2", bad}, "bad.yaml"},
		{2, []string{"sweep", "--set", "seed=1,2", "--policies", "bogus", good}, `"bogus" is not a policy`},
		{2, []string{"sweep", "--set", "topology.link_gbps", good}, "want PATH=V1,V2"},
		{1, []string{"sweep", "--set", "topology.link_gbps=10,-1", good}, "topology.link_gbps=-1"},
		{1, []string{"sweep", "--set", "seed=1,2", "--out", onFile, good}, "sweep: --out"},
		{2, []string{"validate", "--bogus"}, "validate: flag provided but not defined"},
		{2, []string{"validate"}, "no scenario file given"},
		{1, []string{"validate", missing}, "1 of 1 scenario files invalid"},
		{1, []string{"validate", good, bad}, "1 of 2 scenario files invalid"},
		{2, []string{"rescale", "--bogus"}, "rescale: flag provided but not defined"},
		{2, []string{"rescale", good}, "--rate-scale is required"},
		{2, []string{"rescale", "--rate-scale", "0.1"}, "give one scenario file"},
		{1, []string{"rescale", "--rate-scale", "2", good}, "rate scale 2: must be in (0, 1]"},
		{1, []string{"rescale", "--rate-scale", "0.1", missing}, "missing.yaml"},
		{1, []string{"rescale", "--rate-scale", "0.1", bad}, "bad.yaml:1: policy"},
		{2, []string{"demo", "--bogus"}, "demo: flag provided but not defined"},
		{2, []string{"demo", "x"}, "takes no arguments"},
		{2, []string{"demo", "--messages", "0"}, "--messages = 0"},
		{2, []string{"decode", "--bogus"}, "decode: flag provided but not defined"},
		{2, []string{"decode"}, "want exactly one pcap file"},
		{1, []string{"decode", missing}, "missing.yaml"},
		{1, []string{"decode", good}, "decode " + good},
		{2, []string{"up", "--bogus"}, "up: flag provided but not defined"},
		{1, []string{"up", missing}, "missing.yaml"},
		{1, []string{"up", bad}, "bad.yaml"},
		{2, []string{"up", "--policy", "bogus", good}, `--policy "bogus"`},
		{2, []string{"up", good, good}, "one scenario file at most"},
		{2, []string{"up", "--emit", "k8s"}, "up: --emit: want DIR [FILE], got 0 arguments"},
		{1, []string{"up", "--emit", "k8s", filepath.Join(dir, "k8s"), missing}, "missing.yaml"},
		{1, []string{"up", "--emit", "k8s", good, good}, "not a directory"},
		{2, []string{"exec", "--bogus"}, "exec: flag provided but not defined"},
		{2, []string{"exec", "w1.0"}, "no command to run in w1.0"},
		{2, []string{"help", "--bogus"}, "help: flag provided but not defined"},
		{2, []string{"version", "--bogus"}, "version: flag provided but not defined"},
	}
	for _, c := range cases {
		var out, errb bytes.Buffer
		code := cli(c.args, &out, &errb)
		if code != c.code {
			t.Errorf("%q: exit %d, want %d\nstderr: %s", c.args, code, c.code, errb.String())
		}
		var lines []string
		for _, l := range strings.Split(errb.String(), "\n") {
			if strings.HasPrefix(l, "inabox:") {
				lines = append(lines, l)
			}
		}
		if len(lines) != 1 || !strings.Contains(lines[0], c.want) {
			t.Errorf("%q: error lines %q, want one containing %q\nstderr: %s", c.args, lines, c.want, errb.String())
			continue
		}
		// Nothing else on stderr repeats the error.
		msg := strings.TrimPrefix(lines[0], "inabox: ")
		if rest := strings.Replace(errb.String(), lines[0], "", 1); strings.Contains(rest, msg) {
			t.Errorf("%q: the error is printed twice:\n%s", c.args, errb.String())
		}
		if strings.Contains(out.String(), "scenario ") {
			t.Errorf("%q ran before failing:\n%s", c.args, out.String())
		}
	}
}

// TestREADMEFlags: every `inabox CMD` the README names is a command, and
// every --flag in its code span (or, in the command table, its row) is one
// of that command's flags.
func TestREADMEFlags(t *testing.T) {
	b, err := os.ReadFile("../../README.md")
	if err != nil {
		t.Fatal(err)
	}
	span := regexp.MustCompile("`inabox ([a-z]+)([^`]*)`")
	flagRe := regexp.MustCompile(`(?:^|[\s\x60/(])--([a-z][a-z0-9-]*)`)
	checked := 0
	for i, line := range strings.Split(string(b), "\n") {
		for k, m := range span.FindAllStringSubmatch(line, -1) {
			c := lookup(m[1])
			if c == nil {
				t.Errorf("README.md:%d: `inabox %s`: no such command", i+1, m[1])
				continue
			}
			text := m[2]
			if k == 0 && strings.HasPrefix(line, "| `inabox ") {
				text = line // the command table's row describes its flags
			}
			fs := c.flags()
			for _, f := range flagRe.FindAllStringSubmatch(text, -1) {
				checked++
				if fs.Lookup(f[1]) == nil {
					t.Errorf("README.md:%d: inabox %s has no flag --%s", i+1, c.name, f[1])
				}
			}
		}
	}
	if checked < 10 {
		t.Errorf("only %d README flags found", checked)
	}
}

// TestREADMERunOutput: the output the README shows for `make run` is what
// the embedded default scenario prints, line for line up to its "...".
func TestREADMERunOutput(t *testing.T) {
	b, err := os.ReadFile("../../README.md")
	if err != nil {
		t.Fatal(err)
	}
	s := string(b)
	i := strings.Index(s, "`make run` prints")
	if i < 0 {
		t.Fatal("README.md: no \"`make run` prints\" paragraph")
	}
	j := strings.Index(s[i:], "```\n")
	if j < 0 {
		t.Fatal("README.md: no code block after \"`make run` prints\"")
	}
	block := s[i+j+4:]
	block = block[:strings.Index(block, "```")]
	var out, errb bytes.Buffer
	if err := runCLI([]string{"run"}, &out, &errb); err != nil {
		t.Fatalf("run: %v\n%s", err, errb.String())
	}
	got := strings.Split(out.String(), "\n")
	want := strings.Split(strings.TrimSuffix(block, "\n"), "\n")
	if len(want) < 3 {
		t.Fatalf("README.md shows %d lines of make run's output", len(want))
	}
	for k, w := range want {
		if w == "..." {
			return
		}
		if k >= len(got) || got[k] != w {
			g := ""
			if k < len(got) {
				g = got[k]
			}
			t.Fatalf("README.md's make run output, line %d:\nREADME %q\nrun    %q", k+1, w, g)
		}
	}
}

// TestRescaleCLI: `inabox rescale --rate-scale 1` writes the ablation's
// duty regime at true scale, memory grown with the window, and says so on
// stderr; what it writes is a valid scenario.
func TestRescaleCLI(t *testing.T) {
	var out, errb bytes.Buffer
	if code := cli([]string{"rescale", "--rate-scale", "1", "../../docs/results/ablation/duty.yaml"}, &out, &errb); code != 0 {
		t.Fatalf("exit %d: %s", code, errb.String())
	}
	s, err := scenario.Parse("out.yaml", out.Bytes(), scenario.DefaultModels())
	if err != nil {
		t.Fatal(err)
	}
	if s.Scaling.RateScale != 1 || s.Topology.Switch.Slots != 290 || s.DynaINA.MinSlots != 41 {
		t.Errorf("rescaled: %+v, %d slots, min_slots %d; want 1, 290, 41", s.Scaling, s.Topology.Switch.Slots, s.DynaINA.MinSlots)
	}
	if !strings.Contains(errb.String(), "a window 7 → 145 aggregators") || !strings.Contains(errb.String(), "topology.switch.slots: 14 → 290") {
		t.Errorf("stderr: %s", errb.String())
	}
}
