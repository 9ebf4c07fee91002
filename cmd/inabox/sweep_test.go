package main

import (
	"bytes"
	"encoding/csv"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// TestSweep: sweeping ATP's host stack on the default scenario slows ATP
// and leaves FreeINA (RDMA hosts, no stack) alone; the CSV has a row per
// value and policy, and the plot is written.
func TestSweep(t *testing.T) {
	dir := t.TempDir()
	var out, errb bytes.Buffer
	if err := runCLI([]string{"sweep", "--set", "topology.software_stack.gbps=100,30", "--out", dir}, &out, &errb); err != nil {
		t.Fatalf("%v\n%s", err, errb.String())
	}
	if !strings.Contains(out.String(), "freeina vs atp") {
		t.Errorf("no gain column:\n%s", out.String())
	}
	f, err := os.Open(filepath.Join(dir, "sweep.csv"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	rows, err := csv.NewReader(f).ReadAll()
	if err != nil || len(rows) != 5 || rows[0][2] != "jct_mean_s" {
		t.Fatalf("sweep.csv: %v, %d rows, want a header and 4", err, len(rows))
	}
	jct := map[string]float64{}
	for _, r := range rows[1:] {
		v, err := strconv.ParseFloat(r[2], 64)
		if err != nil {
			t.Fatalf("row %v: %v", r, err)
		}
		jct[r[0]+"/"+r[1]] = v
	}
	if jct["30/atp"] <= jct["100/atp"]*1.05 {
		t.Errorf("ATP at a 30 Gb/s stack %.4f s, at 100 %.4f s: want it slower", jct["30/atp"], jct["100/atp"])
	}
	if jct["30/freeina"] != jct["100/freeina"] {
		t.Errorf("FreeINA changed with the baselines' stack: %.6f vs %.6f s", jct["30/freeina"], jct["100/freeina"])
	}
	if b, err := os.ReadFile(filepath.Join(dir, "sweep.svg")); err != nil || !bytes.Contains(b, []byte(`<g class="policy" id="policy-atp">`)) || !bytes.Contains(b, []byte(`<g class="policy" id="policy-freeina">`)) {
		t.Errorf("sweep.svg: %v", err)
	}
}

// TestSweepFailedPoint: a value whose run fails (here: not finished by its
// time limit) gives no point; the other values still run, the failure is
// listed and the command fails.
func TestSweepFailedPoint(t *testing.T) {
	dir := t.TempDir()
	var out, errb bytes.Buffer
	err := runCLI([]string{"sweep", "--set", "time_limit=200ms,60s", "--policies", "freeina", "--out", dir}, &out, &errb)
	if err == nil || !strings.Contains(err.Error(), "1 of 2 runs failed") {
		t.Fatalf("error %v, want one of two runs failed", err)
	}
	if !strings.Contains(out.String(), "FAILED (no point): time_limit=200ms: freeina") {
		t.Errorf("the failure is not listed:\n%s", out.String())
	}
	if _, why, _ := strings.Cut(out.String(), "FAILED (no point): time_limit=200ms: freeina: "); strings.Contains(err.Error(), strings.TrimSpace(why)) {
		t.Errorf("the error repeats the FAILED line: %v", err)
	}
	b, err := os.ReadFile(filepath.Join(dir, "sweep.csv"))
	if err != nil || strings.Count(string(b), "\n") != 2 || !strings.Contains(string(b), "60s,freeina,") {
		t.Errorf("sweep.csv (%v):\n%s\nwant the header and the 60s row", err, b)
	}
}

// TestSweepWarns checks that sweep says, on stderr and before its table,
// what `inabox validate` warns of for its scenarios: once for a warning
// every value draws, with the values for one that only some draw.
func TestSweepWarns(t *testing.T) {
	f := coarseFile(t) // compare_test.go
	for _, tc := range []struct {
		set  string
		want []string
	}{
		{"topology.switch.slots=8,21", []string{
			"sweep: warning (topology.switch.slots=8): topology.switch.slots: 8: a window is 7 aggregators",
			"sweep: warning (topology.switch.slots=21): topology.switch.slots: 21: if all 3 jobs are present at once"}},
		{"jobs[0].iterations=1,2", []string{"sweep: warning: topology.switch.slots: 8: a window is 7 aggregators"}},
	} {
		var out, errb bytes.Buffer
		if err := runCLI([]string{"sweep", "--set", tc.set, "--policies", "freeina", f}, &out, &errb); err != nil {
			t.Fatal(err)
		}
		for _, w := range tc.want {
			if !strings.Contains(errb.String(), w) {
				t.Errorf("--set %s: stderr lacks %q:\n%s", tc.set, w, errb.String())
			}
		}
		if n := strings.Count(errb.String(), "warning"); n != len(tc.want) {
			t.Errorf("--set %s: %d warnings, want %d:\n%s", tc.set, n, len(tc.want), errb.String())
		}
		if strings.Contains(out.String(), "warning") {
			t.Errorf("--set %s: stdout has a warning:\n%s", tc.set, out.String())
		}
	}
}
