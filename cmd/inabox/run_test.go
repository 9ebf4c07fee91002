package main

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/inabox/inabox/harness/report"
)

const tinyYAML = `name: tiny
seed: 2
policy: dynaina
time_limit: 20s
scaling: {tensor_scale: 0.0002, rate_scale: 0.002}
topology:
  link_gbps: 100
  link_delay: 1ms
  switch: {slots: 200}
jobs:
  - {name: vgg, model: vgg11, workers: 2, iterations: 2, comm_ratio: 0.5}
  - {name: resnet, model: resnet50, workers: 2, iterations: 2, arrival: 10ms}
`

func tinyFile(t *testing.T) string {
	t.Helper()
	return scenarioFile(t, "tiny.yaml", tinyYAML)
}

// scenarioFile writes src as file name in a test directory and returns its
// path.
func scenarioFile(t *testing.T, name, src string) string {
	t.Helper()
	f := filepath.Join(t.TempDir(), name)
	if err := os.WriteFile(f, []byte(src), 0o644); err != nil {
		t.Fatal(err)
	}
	return f
}

// TestRunScenario: `inabox run FILE --out DIR --pcap DIR --seed N --policy
// P` prints the summary and writes results.json, CSVs, plots and pcaps;
// the same seed writes the same results.json; stderr ends with what the
// emulation cost.
func TestRunScenario(t *testing.T) {
	f := tinyFile(t)
	dir := t.TempDir()
	var out, errb bytes.Buffer
	args := []string{"run", f, "--out", filepath.Join(dir, "a"), "--pcap", filepath.Join(dir, "pcap"), "--seed", "5", "--policy", "freeina", "--progress"}
	if err := runCLI(args, &out, &errb); err != nil {
		t.Fatalf("%v\n%s", err, errb.String())
	}
	for _, want := range []string{"scenario tiny, policy freeina, seed 5: 2/2 jobs finished", "resnet", "switch memory reserved", "wrote"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("output lacks %q:\n%s", want, out.String())
		}
	}
	if !strings.Contains(errb.String(), "100%") {
		t.Errorf("no progress bar on stderr: %q", errb.String())
	}
	if !regexp.MustCompile(`\nemulation: [0-9.]+k packet-hops \([0-9.]+k events\) in [0-9.]+ [mµ]?s wall, [0-9.]+ [mµ]?s CPU: [0-9.]+[kM]? packet-hops per CPU-second; wall [0-9.e+-]+× the [0-9.]+ m?s of virtual time\n`).MatchString(errb.String()) {
		t.Errorf("no line of the emulation's cost on stderr: %q", errb.String())
	}
	for _, name := range []string{"a/results.json", "a/jobs.csv", "a/job-vgg.csv", "a/memory.svg", "pcap/h0-w1.0-sw2.pcap", "pcap/ps0-sw0.pcap"} {
		if st, err := os.Stat(filepath.Join(dir, name)); err != nil || st.Size() == 0 {
			t.Errorf("%s: %v", name, err)
		}
	}
	out.Reset()
	if err := runCLI([]string{"run", "--seed", "5", "--policy", "freeina", "--out", filepath.Join(dir, "b"), f}, &out, &errb); err != nil {
		t.Fatal(err)
	}
	a, _ := os.ReadFile(filepath.Join(dir, "a/results.json"))
	b, _ := os.ReadFile(filepath.Join(dir, "b/results.json"))
	if !bytes.Equal(a, b) {
		t.Error("same scenario and seed wrote different results.json")
	}
	// decode reads the pcap
	out.Reset()
	if err := runCLI([]string{"decode", filepath.Join(dir, "pcap/h0-w1.0-sw2.pcap")}, &out, &errb); err != nil || !strings.Contains(out.String(), "INA job=1") {
		t.Errorf("decode: %v\n%.400s", err, out.String())
	}
}

// TestRunDefaultScenario: `inabox run` with no file runs the embedded
// default scenario through the runner.
func TestRunDefaultScenario(t *testing.T) {
	if testing.Short() {
		t.Skip("runs the default scenario")
	}
	var out, errb bytes.Buffer
	if err := runCLI([]string{"run"}, &out, &errb); err != nil {
		t.Fatalf("%v\n%s", err, errb.String())
	}
	if !strings.Contains(out.String(), "scenario default, policy dynaina") || !strings.Contains(out.String(), "2/2 jobs finished") {
		t.Errorf("output:\n%s", out.String())
	}
}

func TestRunErrors(t *testing.T) {
	f := tinyFile(t)
	bad := filepath.Join(t.TempDir(), "bad.yaml")
	os.WriteFile(bad, []byte(strings.Replace(tinyYAML, "workers: 2, iterations: 2, comm", "workers: 0, iterations: 2, comm", 1)), 0o644)
	cases := map[string][]string{
		"--policy \"magic\"":      {"run", f, "--policy", "magic"},
		"one scenario file":       {"run", f, f},
		"jobs[0].workers":         {"run", bad},
		"no such file":            {"run", "/nonexistent.yaml"},
		"--seed 0":                {"run", f, "--seed", "0"},
		"jobs[0].workers: 0":      {"compare", bad},
		"flag provided but not d": {"compare", "--bogus"},
		"--seeds 0":               {"compare", "--seeds", "0", f},
	}
	for want, args := range cases {
		var out, errb bytes.Buffer
		err := runCLI(args, &out, &errb)
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%v: error %v, want %q", args, err, want)
		}
	}
}

// TestCompareSeeds: --seeds N runs every policy N times and prints means
// with confidence intervals; --json parses with N samples per value.
func TestCompareSeeds(t *testing.T) {
	f := tinyFile(t)
	var out, errb bytes.Buffer
	if err := runCLI([]string{"compare", "--seeds", "2", "--seed", "5", "--policies", "atp,freeina", f}, &out, &errb); err != nil {
		t.Fatalf("%v\n%s", err, errb.String())
	}
	for _, want := range []string{"2 seeds (5 6)", "±", "vs atp"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("table lacks %q:\n%s", want, out.String())
		}
	}
	out.Reset()
	if err := runCLI([]string{"compare", "--json", "--seeds", "2", "--policies", "freeina", f}, &out, &errb); err != nil {
		t.Fatal(err)
	}
	var rp report.Repeated
	if err := json.Unmarshal(out.Bytes(), &rp); err != nil {
		t.Fatalf("%v\n%s", err, out.String())
	}
	if len(rp.Seeds) != 2 || len(rp.Rows) == 0 || len(rp.Rows[0].Values["freeina"].Samples) != 2 {
		t.Errorf("repeated comparison %+v", rp)
	}
}

// TestCompare: one table with the policies asked for and ratio rows; --json
// parses; a policy that fails gets no column, is named, and makes the
// command fail.
func TestCompare(t *testing.T) {
	f := tinyFile(t)
	var out, errb bytes.Buffer
	if err := runCLI([]string{"compare", "--policies", "switchml,atp,freeina,dynaina", f}, &out, &errb); err != nil {
		t.Fatalf("%v\n%s", err, errb.String())
	}
	s := out.String()
	for _, want := range []string{"switchml", "atp", "freeina", "dynaina", "JCT mean", "vs atp", "vs best baseline", "aggregation throughput", "switch memory reserved"} {
		if !strings.Contains(s, want) {
			t.Errorf("table lacks %q:\n%s", want, s)
		}
	}
	out.Reset()
	if err := runCLI([]string{"compare", "--json", "--policies", "freeina,dynaina", f}, &out, &errb); err != nil {
		t.Fatal(err)
	}
	var c report.Comparison
	if err := json.Unmarshal(out.Bytes(), &c); err != nil {
		t.Fatalf("%v\n%s", err, out.String())
	}
	if len(c.Policies) != 2 || c.Scenario != "tiny" || len(c.Rows) == 0 {
		t.Errorf("comparison %+v", c)
	}
	// a worker restarting with its state lost: ATP takes it back, FreeINA
	// stops and says why
	lost := filepath.Join(t.TempDir(), "lost.yaml")
	os.WriteFile(lost, []byte(tinyYAML+"faults:\n  - {at: 5ms, kind: node_crash, target: h0, duration: 1ms, lose_state: true}\n"), 0o644)
	out.Reset()
	err := runCLI([]string{"compare", "--policies", "atp,freeina", lost}, &out, &errb)
	if err == nil || !strings.Contains(err.Error(), "1 of 2 policies failed") ||
		!strings.Contains(out.String(), "FAILED (no column): freeina") || !strings.Contains(out.String(), "atp") {
		t.Errorf("error %v\n%s", err, out.String())
	}
	// the error names the policy; the reason is printed once, in the table
	if _, why, _ := strings.Cut(out.String(), "FAILED (no column): freeina: "); err != nil && strings.Contains(err.Error(), strings.TrimSpace(why)) {
		t.Errorf("the error repeats the FAILED line: %v", err)
	}
}

// TestRunPcapEstimate: `run --pcap` tells stderr, before the run, about how
// much it writes, close to what it wrote, and stdout does not mention it;
// a scenario estimated above 1 GiB gets a warning.
func TestRunPcapEstimate(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "pcap")
	var out, errb bytes.Buffer
	if err := runCLI([]string{"run", "--pcap", dir, tinyFile(t)}, &out, &errb); err != nil {
		t.Fatalf("%v\n%s", err, errb.String())
	}
	if strings.Contains(out.String(), "about") {
		t.Errorf("stdout has the estimate:\n%s", out.String())
	}
	s, err := loadScenario(tinyFile(t))
	if err != nil {
		t.Fatal(err)
	}
	est := pcapEstimate(s)
	var total int64
	files, _ := filepath.Glob(filepath.Join(dir, "*.pcap"))
	for _, f := range files {
		st, err := os.Stat(f)
		if err != nil {
			t.Fatal(err)
		}
		total += st.Size()
	}
	if est < total*2/3 || est > total*3/2 {
		t.Errorf("estimate %d B, wrote %d B", est, total)
	}
	line := strings.SplitN(errb.String(), "\n", 2)[0]
	if !strings.HasPrefix(line, "pcap: about ") || !strings.HasSuffix(line, " MB into "+dir) {
		t.Errorf("stderr starts %q", line)
	}
	if strings.Contains(errb.String(), "1 GiB") {
		t.Errorf("a small run warned: %q", errb.String())
	}
	// A large one is warned about before it starts: the size goes to stderr
	// ahead of any run output (checked here without running it).
	big, err := loadScenario("../../testdata/scenarios/freeina-single.yaml")
	if err != nil {
		t.Fatal(err)
	}
	var w bytes.Buffer
	writePcapEstimate(&w, big, "DIR")
	if !strings.Contains(w.String(), "GB into DIR\npcap: that is more than 1 GiB") {
		t.Errorf("freeina-single (%d B): %q", pcapEstimate(big), w.String())
	}
}
