package main

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/inabox/inabox/harness/scenario"
)

func TestValidate(t *testing.T) {
	t.Setenv(scenario.RunMemoryEnv, "") // the default bound, whatever the environment says
	dir := t.TempDir()
	good := filepath.Join(dir, "good.yaml")
	bad := filepath.Join(dir, "bad.yaml")
	os.WriteFile(good, []byte("jobs:\n  - {name: a, model: vgg16, workers: 4, iterations: 2}\n"), 0o644)
	big := filepath.Join(dir, "big.yaml") // fits a run in virtual time, not inabox up's processes
	os.WriteFile(big, []byte("jobs:\n  - {name: a, model: vgg16, workers: 16, iterations: 1}\n"), 0o644)
	os.WriteFile(bad, []byte("policy: nope\njobs:\n  - {name: a, model: vgg16, workers: 0, iterations: 2, gpus: 1}\n"), 0o644)
	cases := []struct {
		name       string
		args       []string
		ok         bool
		out, errs  []string
		usageError bool
	}{
		{"shipped scenarios", []string{"../../testdata/scenarios/dynaina-contention.yaml", "../../testdata/scenarios/freeina-single.yaml",
			"../../testdata/scenarios/freeina-multi.yaml", "../../testdata/scenarios/default.yaml"}, true,
			[]string{"dynaina-contention.yaml: ok: dynaina-contention, policy dynaina, 6 jobs, 24 workers", "freeina-single.yaml: ok", "M worker packets"},
			// the scaled default stretches 2 µs links to 1 ms
			[]string{"default.yaml: warning: topology.link_delay: 1ms: 8 link traversals (8ms) are 75 % of job resnet50's ideal all-reduce", "0.15 % there"}, false},
		{"defaults printed", []string{"--print", good}, true, []string{"good.yaml: ok: good, policy dynaina", "seed: 1", "link_delay: 1µs", "slots: 16384", "time_limit: 1h0m0s"}, nil, false},
		{"too large for inabox up", []string{big}, true, []string{"big.yaml: ok: big", "holds ≤ 1.55 GiB (at most 8.00 GiB)"},
			[]string{`big.yaml:2: warning: jobs[0]: "vgg16 × 16 workers": inabox up's processes would hold 9.80 GiB`}, false},
		{"invalid", []string{good, bad}, false, []string{"good.yaml: ok"}, []string{"bad.yaml:3: jobs[0].gpus: unknown field"}, false},
		{"invalid fields", []string{bad + "x"}, false, nil, []string{"no such file"}, false},
		{"shipped invalid", []string{"../../testdata/scenarios/invalid/bad-workers.yaml"}, false, nil, []string{"bad-workers.yaml:7: jobs[1].workers: 0: must be between 1 and 32"}, false},
		{"no file", nil, false, nil, []string{"validate: no scenario file given"}, true},
		{"bad flag", []string{"--bogus"}, false, nil, []string{"flag provided but not defined"}, true},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			var out, errb bytes.Buffer
			err := runCLI(append([]string{"validate"}, c.args...), &out, &errb)
			if (err == nil) != c.ok {
				t.Fatalf("error %v, want ok=%v\nstderr: %s", err, c.ok, errb.String())
			}
			var ue usageError
			if isUsage := err != nil && errors.As(err, &ue); isUsage != c.usageError {
				t.Errorf("usage error: %v, want %v", isUsage, c.usageError)
			}
			for _, w := range c.out {
				if !strings.Contains(out.String(), w) {
					t.Errorf("stdout lacks %q:\n%s", w, out.String())
				}
			}
			stderr := errb.String()
			if err != nil {
				stderr += "inabox: " + err.Error() + "\n" // as cli prints it
			}
			for _, w := range c.errs {
				if !strings.Contains(stderr, w) {
					t.Errorf("stderr lacks %q:\n%s", w, stderr)
				}
			}
		})
	}
	// A bad file reports every problem.
	var out, errb bytes.Buffer
	runCLI([]string{"validate", bad}, &out, &errb)
	if n := strings.Count(errb.String(), "bad.yaml:"); n != 1 {
		// Unknown keys stop decoding: one error. Fix it and the rest show.
		t.Errorf("%d errors:\n%s", n, errb.String())
	}
	os.WriteFile(bad, []byte("policy: nope\njobs:\n  - {name: a, model: vgg16, workers: 0, iterations: 2}\n"), 0o644)
	errb.Reset()
	runCLI([]string{"validate", bad}, &out, &errb)
	if !strings.Contains(errb.String(), `bad.yaml:1: policy: "nope": must be one of`) || !strings.Contains(errb.String(), "bad.yaml:3: jobs[0].workers: 0: must be between 1 and 32") {
		t.Errorf("stderr:\n%s", errb.String())
	}
}

// TestHelpFlag: -h prints a usage and succeeds for every command.
func TestHelpFlag(t *testing.T) {
	for _, c := range []string{"run", "compare", "validate", "demo", "decode", "up"} {
		var out, errb bytes.Buffer
		if err := runCLI([]string{c, "-h"}, &out, &errb); err != nil {
			t.Errorf("%s -h: %v", c, err)
		}
		if !strings.Contains(out.String()+errb.String(), "usage") && !strings.Contains(out.String()+errb.String(), "Usage") {
			t.Errorf("%s -h printed no usage:\n%s%s", c, out.String(), errb.String())
		}
	}
}

// TestBadArgsBeforeRun: an unknown --policies name and an --out or --pcap
// directory that cannot be made fail at once, before any run.
func TestBadArgsBeforeRun(t *testing.T) {
	file := filepath.Join(t.TempDir(), "file")
	if err := os.WriteFile(file, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"compare", "--policies", "atp,bogus"}, `--policies: "bogus" is not a policy`},
		{[]string{"run", "--out", filepath.Join(file, "sub")}, "run: --out " + filepath.Join(file, "sub")},
		{[]string{"run", "--pcap", filepath.Join(file, "sub")}, "run: --pcap " + filepath.Join(file, "sub")},
		{[]string{"sweep", "--set", "topology.link_gbps"}, "want PATH=V1,V2"},
		{[]string{"sweep"}, "--set PATH=V1,V2,... is required"},
		{[]string{"sweep", "--set", "seed=1", "--metric", "mem_util_peak"}, "not a compare metric with a better direction"},
		{[]string{"sweep", "--set", "seed=1,2", "--set", "topology.link_gbps=1,2"}, "sweep one field"},
		{[]string{"sweep", "--set", "topology.link_gbps=10,-1"}, "topology.link_gbps=-1"},
		{[]string{"sweep", "--set", "jobs[9].workers=2"}, "jobs has no item 9"},
		{[]string{"sweep", "--set", "seed=1", "--policies", "bogus"}, `--policies: "bogus" is not a policy`},
	} {
		var out, errb bytes.Buffer
		err := runCLI(c.args, &out, &errb)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%v: %v, want an error containing %q", c.args, err, c.want)
		}
		if strings.Contains(out.String(), "scenario ") {
			t.Errorf("%v ran before failing:\n%s", c.args, out.String())
		}
	}
}

// TestVersion: --version prints the build's version and succeeds.
func TestVersion(t *testing.T) {
	var out, errb bytes.Buffer
	if err := runCLI([]string{"--version"}, &out, &errb); err != nil || !strings.HasPrefix(out.String(), "inabox ") {
		t.Errorf("--version: %v, %q", err, out.String())
	}
}
