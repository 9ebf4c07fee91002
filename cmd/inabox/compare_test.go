package main

import (
	"bytes"
	"encoding/csv"
	"encoding/json"
	"encoding/xml"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/inabox/inabox/harness/report"
	"github.com/inabox/inabox/harness/scenario"
	"github.com/inabox/inabox/harness/testbed"
)

// smallContention is testdata/scenarios/dynaina-contention.yaml (six jobs)
// at a fiftieth of its scale and two iterations a job, through the scenario
// override mechanism: every policy runs in a fraction of a second.
func smallContention(t *testing.T) string {
	t.Helper()
	b, err := os.ReadFile("../../testdata/scenarios/dynaina-contention.yaml")
	if err != nil {
		t.Fatal(err)
	}
	sets := [][2]string{{"scaling.tensor_scale", "0.0002"}, {"scaling.rate_scale", "0.0002"}}
	for i := range 6 {
		sets = append(sets, [2]string{fmt.Sprintf("jobs[%d].iterations", i), "2"})
	}
	for _, s := range sets {
		if b, err = scenario.Override(b, s[0], s[1]); err != nil {
			t.Fatal(err)
		}
	}
	f := filepath.Join(t.TempDir(), "dynaina-contention.yaml")
	if err := os.WriteFile(f, b, 0o644); err != nil {
		t.Fatal(err)
	}
	return f
}

// seriesGroups parses an SVG (failing if it is not well-formed XML with an
// <svg> root) and counts its series groups (<g class=…>) by class.
func seriesGroups(t *testing.T, name string, b []byte) map[string]int {
	t.Helper()
	d := xml.NewDecoder(bytes.NewReader(b))
	out := map[string]int{}
	root := ""
	for {
		tok, err := d.Token()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatalf("%s: not well-formed XML: %v", name, err)
		}
		if se, ok := tok.(xml.StartElement); ok {
			if root == "" {
				root = se.Name.Local
			}
			if se.Name.Local == "g" {
				for _, a := range se.Attr {
					if a.Name.Local == "class" {
						out[a.Value]++
					}
				}
			}
		}
	}
	if root != "svg" {
		t.Fatalf("%s: root element %q", name, root)
	}
	return out
}

// TestCompareOut: `compare --out DIR` without --seeds writes compare.json,
// compare.csv, compare_jobs.csv and every side-by-side plot, each valid
// SVG with one series per job (per panel) or per policy; stdout is the
// table alone.
func TestCompareOut(t *testing.T) {
	f := smallContention(t)
	dir := filepath.Join(t.TempDir(), "out")
	var out, errb bytes.Buffer
	if err := runCLI([]string{"compare", "--out", dir, f}, &out, &errb); err != nil {
		t.Fatalf("%v\n%s", err, errb.String())
	}
	if strings.Contains(out.String(), "wrote") || !strings.Contains(out.String(), "JCT mean") {
		t.Errorf("stdout is not the table alone:\n%s", out.String())
	}
	pols := testbed.Names()
	np, nj := len(pols), 6
	withMem, withPS := 0, 0
	for _, p := range pols {
		e, _ := testbed.Lookup(p)
		if !e.NoINA {
			withMem++
		}
		if e.PSPath {
			withPS++
		}
	}
	want := map[string]map[string]int{
		report.CompareJCTJobsFile:    {"job": nj},
		report.CompareJCTCDFFile:     {"policy": np},
		report.CompareIterationsFile: {"job": nj * np},
		report.CompareMemoryFile:     {"job": nj * 2 * withMem, "event": nj * 2 * withMem},
		report.CompareTputFile:       {"job": nj * np, "line-rate": np, "event": nj * np},
		report.ComparePSPathFile:     {"policy": withPS},
		report.CompareCollisionsFile: {"policy": np},
	}
	for file, classes := range want {
		b, err := os.ReadFile(filepath.Join(dir, file))
		if err != nil {
			t.Error(err)
			continue
		}
		got := seriesGroups(t, file, b)
		for class, n := range classes {
			if got[class] != n {
				t.Errorf("%s: %d %q series, want %d", file, got[class], class, n)
			}
		}
	}
	var c report.Comparison
	if b, err := os.ReadFile(filepath.Join(dir, report.CompareJSONFile)); err != nil || json.Unmarshal(b, &c) != nil || len(c.Policies) != np {
		t.Errorf("compare.json: %v, %d policies", err, len(c.Policies))
	}
	for file, rows := range map[string]int{report.CompareCSVFile: 1 + len(report.CompareMetrics)*np, report.CompareJobsCSVFile: 1 + nj*np} {
		fh, err := os.Open(filepath.Join(dir, file))
		if err != nil {
			t.Fatal(err)
		}
		recs, err := csv.NewReader(fh).ReadAll()
		fh.Close()
		if err != nil || len(recs) != rows {
			t.Errorf("%s: %d rows (want %d), %v", file, len(recs), rows, err)
		}
	}
}

// TestCompareOutStdout: --out changes nothing on stdout, with and without
// --seeds; with --seeds it writes the repeated compare.json and jct.svg and
// the plots of the first seed.
func TestCompareOutStdout(t *testing.T) {
	f := tinyFile(t)
	for _, extra := range [][]string{nil, {"--seeds", "2"}} {
		var plain, with, errb bytes.Buffer
		args := append([]string{"compare", "--policies", "atp,freeina"}, extra...)
		if err := runCLI(append(args, f), &plain, &errb); err != nil {
			t.Fatal(err)
		}
		dir := t.TempDir()
		if err := runCLI(append(args, "--out", dir, f), &with, &errb); err != nil {
			t.Fatal(err)
		}
		if plain.String() != with.String() {
			t.Errorf("%v: --out changes stdout:\n%s\n---\n%s", extra, plain.String(), with.String())
		}
		files := []string{report.CompareJSONFile, report.CompareCSVFile, report.CompareJCTJobsFile, report.CompareMemoryFile}
		if extra != nil {
			files = append(files, report.RepeatedJCTFile)
			var rp report.Repeated
			if b, err := os.ReadFile(filepath.Join(dir, report.CompareJSONFile)); err != nil || json.Unmarshal(b, &rp) != nil || len(rp.Seeds) != 2 {
				t.Errorf("--seeds: compare.json is not the repeated comparison: %v", err)
			}
			if b, _ := os.ReadFile(filepath.Join(dir, report.CompareMemoryFile)); !bytes.Contains(b, []byte("(the first of 2)")) {
				t.Error("--seeds: memory.svg does not say it is the first seed's")
			}
		}
		for _, name := range files {
			if _, err := os.Stat(filepath.Join(dir, name)); err != nil {
				t.Errorf("%v: %v", extra, err)
			}
		}
	}
}

// coarseFile writes a scenario that `inabox validate` warns of: three
// small jobs sharing a switch of 8 slots whose window is 7 aggregators at
// rate_scale 0.01. It runs in a fraction of a second.
func coarseFile(t *testing.T) string {
	t.Helper()
	src := "name: coarse\nscaling: {tensor_scale: 0.0002, rate_scale: 0.01}\ntopology: {link_delay: 1us, switch: {slots: 8}}\njobs:\n" +
		"  - {name: a, model: resnet50, workers: 2, iterations: 1}\n  - {name: b, model: resnet50, workers: 2, iterations: 1}\n" +
		"  - {name: c, model: resnet50, workers: 2, iterations: 1}\n"
	return scenarioFile(t, "coarse.yaml", src)
}

// TestCompareWarns checks that compare says, on stderr and before its
// table, what `inabox validate` warns of: here three jobs sharing a switch
// whose window is a few aggregators at a reduced rate_scale.
func TestCompareWarns(t *testing.T) {
	f := coarseFile(t)
	var out, errb, vout, verr bytes.Buffer
	if err := runCLI([]string{"compare", "--policies", "freeina", f}, &out, &errb); err != nil {
		t.Fatal(err)
	}
	if err := runCLI([]string{"validate", f}, &vout, &verr); err != nil {
		t.Fatal(err)
	}
	const want = "topology.switch.slots: 8: a window is 7 aggregators at rate_scale 0.01"
	if !strings.Contains(errb.String(), "compare: warning: "+want) {
		t.Errorf("compare's stderr lacks the warning %q:\n%s", want, errb.String())
	}
	if !strings.Contains(verr.String(), want) {
		t.Errorf("validate's stderr lacks the warning %q:\n%s", want, verr.String())
	}
	if strings.Contains(out.String(), "warning") {
		t.Errorf("compare's stdout has a warning:\n%s", out.String())
	}
}
