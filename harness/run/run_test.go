package run

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"math"
	"os"
	"strings"
	"testing"

	"github.com/inabox/inabox/harness/report"
	"github.com/inabox/inabox/harness/scenario"
	"github.com/inabox/inabox/harness/testbed"
)

// tinyScenario: two small jobs (a communication-intensive and a
// compute-bound one) on a switch with memory for about one job's window,
// scaled so that a run takes well under a second of wall time.
const tinyScenario = `
name: tiny
seed: 3
policy: dynaina
time_limit: 20s
scaling: {tensor_scale: 0.0002, rate_scale: 0.002}
topology:
  link_gbps: 100
  link_delay: 1ms
  switch: {slots: 200, values_per_packet: 64}
  ps: {placement: shared, count: 2}
jobs:
  - {name: vgg, model: vgg11, workers: 3, iterations: 3, arrival: 0s, comm_ratio: 0.5}
  - {name: resnet, model: resnet50, workers: 2, iterations: 2, arrival: 20ms}
`

func tiny(t testing.TB, extra string) *scenario.Scenario {
	t.Helper()
	s, err := scenario.Parse("tiny.yaml", []byte(tinyScenario+extra), scenario.DefaultModels())
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func runJSON(t testing.TB, s *scenario.Scenario, o Options) (*report.Results, []byte) {
	t.Helper()
	r, err := Run(s, o)
	if err != nil {
		t.Fatal(err)
	}
	var b bytes.Buffer
	if err := report.WriteResultsJSON(&b, r); err != nil {
		t.Fatal(err)
	}
	return r, b.Bytes()
}

// TestRunDeterministic: same scenario and seed ⇒ byte-identical
// results.json, for both policies, with random loss on every link.
func TestRunDeterministic(t *testing.T) {
	s := tiny(t, "impairments:\n  - {link: all, loss: 0.002}\n")
	for _, p := range []string{"freeina", "dynaina"} {
		r1, a := runJSON(t, s, Options{Policy: p})
		_, b := runJSON(t, s, Options{Policy: p})
		if !bytes.Equal(a, b) {
			t.Fatalf("%s: results.json differs between two runs with seed %d", p, s.Seed)
		}
		if r1.Policy != p || r1.Summary.JobsFinished != 2 || r1.Summary.Retransmissions == 0 {
			t.Fatalf("%s: %+v", p, r1.Summary)
		}
		for _, j := range r1.Jobs {
			if len(j.Iters) != map[string]int{"vgg": 3, "resnet": 2}[j.Name] {
				t.Errorf("%s: job %s logged %d iterations", p, j.Name, len(j.Iters))
			}
		}
	}
	// another seed draws other losses
	_, c := runJSON(t, s, Options{Policy: "freeina", Seed: 99})
	_, a := runJSON(t, s, Options{Policy: "freeina"})
	if bytes.Equal(a, c) {
		t.Error("seed 99 gave the same results as seed 3")
	}
}

// TestRunShape: iterations are compute then all-reduce; memory is occupied
// only during all-reduces; every chunk is accounted for on one path.
func TestRunShape(t *testing.T) {
	s := tiny(t, "")
	plans := s.Plan(scenario.DefaultModels())
	for _, p := range []string{"freeina", "dynaina"} {
		r, _ := runJSON(t, s, Options{Policy: p})
		for i, j := range r.Jobs {
			if !j.Finished || j.Arrival != report.Num(plans[i].Arrival.Seconds()) {
				t.Fatalf("%s: job %+v", p, j)
			}
			for _, it := range j.Iters {
				compute := float64(it.AllReduceStart - it.Start)
				if want := plans[i].Compute.Seconds(); compute < want*0.99 { // ranks finish an all-reduce a few µs apart
					t.Errorf("%s: %s iteration %d computes %.6fs, want ≥ %.6fs", p, j.Name, it.Iteration, compute, want)
				}
				if it.AllReduceEnd <= it.AllReduceStart || it.Elements != plans[i].Elements {
					t.Errorf("%s: %s iteration %+v", p, j.Name, it)
				}
			}
			if j.SwitchChunks+j.PSChunks != int64(plans[i].Iterations)*plans[i].Packets {
				t.Errorf("%s: %s: %d + %d chunks, want %d", p, j.Name, j.SwitchChunks, j.PSChunks, int64(plans[i].Iterations)*plans[i].Packets)
			}
		}
		if r.Summary.MemUtilPeak <= 0 || r.Summary.MemUtilPeak > 1 || r.Memory.OccupiedSlotSeconds <= 0 {
			t.Errorf("%s: memory %+v", p, r.Memory)
		}
		if p == "dynaina" {
			for _, se := range r.Memory.Series {
				if !strings.HasPrefix(se.Pool, "pool") {
					t.Errorf("dynaina occupancy outside a pool: %+v", se)
				}
			}
		}
	}
}

// TestRunFaults: a switch reboot in the middle of an all-reduce, a loss
// burst and a link flap: every result still exact (the runner checks), every
// job finishes.
func TestRunFaults(t *testing.T) {
	s := tiny(t, `faults:
  - {at: 25ms, kind: switch_reboot, duration: 100us}
  - {at: 30ms, kind: loss_burst, target: h0, duration: 2ms, value: 0.3}
  - {at: 40ms, kind: link_down, target: h3, duration: 1ms}
  - {at: 45ms, kind: duplicate_burst, target: h1, duration: 2ms, value: 0.5}
  - {at: 50ms, kind: reorder_burst, target: h2, duration: 2ms, value: 0.5}
  - {at: 19s, kind: link_down, target: h2, duration: 1ms}
`)
	for _, p := range []string{"freeina", "dynaina"} {
		r, _ := runJSON(t, s, Options{Policy: p})
		if r.Summary.JobsFinished != 2 {
			t.Fatalf("%s: %+v", p, r.Summary)
		}
		// The three that fired are recorded in time order; the one after
		// the end of the run never fired.
		var got []string
		for _, f := range r.Faults {
			got = append(got, fmt.Sprintf("%s %s %v %v", f.Kind, f.Target, f.At, f.Duration))
		}
		want := "switch_reboot  0.025 0.0001|loss_burst h0 0.03 0.002|link_down h3 0.04 0.001|duplicate_burst h1 0.045 0.002|reorder_burst h2 0.05 0.002"
		if strings.Join(got, "|") != want {
			t.Errorf("%s: faults %q, want %q", p, strings.Join(got, "|"), want)
		}
	}
}

func TestRunBadPolicy(t *testing.T) {
	s := tiny(t, "")
	if _, err := Run(s, Options{Policy: "magic"}); err == nil || !strings.Contains(err.Error(), "magic") {
		t.Errorf("unknown policy: %v", err)
	}
}

// TestRunPolicyOverrideValidated: a file valid under its own policy but
// not under the one a run asks for (SwitchML's smallest pool is two
// aggregators) fails at once, naming the file's line and field, instead of
// waiting until its time limit with every job unadmitted; the same file
// runs under its own policy.
func TestRunPolicyOverrideValidated(t *testing.T) {
	src := strings.Replace(tinyScenario, "slots: 200", "slots: 1", 1)
	s, err := scenario.Parse("tiny.yaml", []byte(src), scenario.DefaultModels())
	if err != nil {
		t.Fatal(err)
	}
	_, err = Run(s, Options{Policy: "switchml"})
	if want := "tiny.yaml:10: topology.switch.slots: 1: must hold at least 2 aggregators"; err == nil || !strings.Contains(err.Error(), want) {
		t.Errorf("switchml with 1 slot: %v, want %q", err, want)
	}
	if errors.Is(err, ErrUnfinished) {
		t.Error("ran until the time limit")
	}
	if _, err := Run(s, Options{}); err != nil { // dynaina: the PS path
		t.Errorf("dynaina with 1 slot: %v", err)
	}
}

// TestRunJitter: jitter on the links (it was refused by every run) slows the
// run and keeps every all-reduce exact; a host's own entry overrides all.
func TestRunJitter(t *testing.T) {
	clean, _ := runJSON(t, tiny(t, ""), Options{Policy: "freeina"})
	jit, _ := runJSON(t, tiny(t, "impairments:\n  - {link: all, jitter: 500us}\n  - {link: h1, jitter: 2ms}\n"), Options{Policy: "freeina"})
	// the host's own entry wins wherever it is listed
	swapped, _ := runJSON(t, tiny(t, "impairments:\n  - {link: h1, jitter: 2ms}\n  - {link: all, jitter: 500us}\n"), Options{Policy: "freeina"})
	if swapped.Summary.Makespan != jit.Summary.Makespan {
		t.Errorf("listing order changed the run: makespan %v vs %v", swapped.Summary.Makespan, jit.Summary.Makespan)
	}
	if jit.Summary.JobsFinished != clean.Summary.JobsFinished || float64(jit.Summary.Makespan) <= float64(clean.Summary.Makespan) {
		t.Errorf("jitter: %d jobs in %v s, clean %d in %v s; want all, later", jit.Summary.JobsFinished, jit.Summary.Makespan,
			clean.Summary.JobsFinished, clean.Summary.Makespan)
	}
}

// fakeRank is a worker whose only result is res (the rest of testbed.Worker
// is not used by the check).
type fakeRank struct {
	testbed.Worker
	res []int32
}

func (f fakeRank) Result(int) []int32 { return f.res }
func (f fakeRank) DropResult(int)     {}

func ranks(rs ...fakeRank) []testbed.WorkerHandle {
	var out []testbed.WorkerHandle
	for _, r := range rs {
		out = append(out, testbed.WorkerHandle{Endpoint: r})
	}
	return out
}

// TestRunChecksSums: a wrong sum is an error, not a result, whether the
// reference sums are held or made as results are checked (lazy).
func TestRunChecksSums(t *testing.T) {
	t.Run("held", testRunChecksSums)
	t.Run("lazy", func(t *testing.T) {
		lazyGradients(t)
		testRunChecksSums(t)
	})
}

// lazyGradients makes every job lazy (LazyGradientBytes 0) until restore
// is called or the test ends.
func lazyGradients(t *testing.T) (restore func()) {
	old := LazyGradientBytes
	LazyGradientBytes = 0
	restore = func() { LazyGradientBytes = old }
	t.Cleanup(restore)
	return restore
}

func testRunChecksSums(t *testing.T) {
	s := tiny(t, "")
	plans := s.Plan(scenario.DefaultModels())
	held := newTensorGen(1, s, plans)
	r := &runner{s: s, plans: plans, gen: newTensorGen(1, s, plans)}
	ref := held.reference(1, 0)
	good := append([]int32(nil), ref...)
	if err := r.check(1, 0, ranks(fakeRank{res: good}, fakeRank{res: good})); err != nil {
		t.Fatal(err)
	}
	bad := append([]int32(nil), ref...)
	bad[len(bad)/2]++
	if err := r.check(1, 0, ranks(fakeRank{res: good}, fakeRank{res: bad})); err == nil || !strings.Contains(err.Error(), "wrong all-reduce sum") {
		t.Fatalf("wrong sum accepted: %v", err)
	}
	// the first wrong element of the first wrong worker is named
	bad[len(bad)-1]--
	bad2 := append([]int32(nil), ref...)
	bad2[3] += 7
	want := fmt.Sprintf("worker 1 iteration 0: element %d = %d, want %d", len(bad)/2, bad[len(bad)/2], ref[len(bad)/2])
	if err := r.check(1, 0, ranks(fakeRank{res: good}, fakeRank{res: bad}, fakeRank{res: bad2})); err == nil || !strings.Contains(err.Error(), want) {
		t.Fatalf("got %v, want an error with %q", err, want)
	}
	d := r.gen.compare(1, 0, [][]int32{good, bad, bad2, good[:3]})
	if d[0].bad != 0 || d[1].bad != 2 || d[1].first != len(bad)/2 || d[2].bad != 1 || d[2].first != 3 || d[2].want != ref[3] || d[3].bad != len(ref) {
		t.Fatalf("diffs %+v", d)
	}
	if err := r.check(1, 0, ranks(fakeRank{res: good[:3]}, fakeRank{res: good})); err == nil {
		t.Fatal("short result accepted")
	}
	// iterations alternate two inputs, so a stale result fails too
	if ref1 := held.reference(1, 1); ref1[0] == ref[0] && ref1[1] == ref[1] && ref1[2] == ref[2] {
		t.Fatal("iterations 0 and 1 have the same reference")
	}
}

// TestRunProgress: the progress bar gets virtual time and ends.
func TestRunProgress(t *testing.T) {
	var b bytes.Buffer
	s := tiny(t, "")
	if _, err := Run(s, Options{Policy: "freeina", Progress: report.NewProgress(&b, "tiny", true)}); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(b.String(), "100%") || !strings.HasSuffix(b.String(), "\n") {
		t.Errorf("progress output %q", b.String())
	}
}

// TestScenariosLong runs every embedded scenario under every runnable policy
// (INABOX_LONG=1; a few minutes): each must finish with exact sums, except
// policies known to stall at scaled delays (docs/results.md, point 10).
func TestScenariosLong(t *testing.T) {
	if os.Getenv("INABOX_LONG") != "1" {
		t.Skip("set INABOX_LONG=1")
	}
	for _, name := range scenario.EmbeddedNames() {
		s, err := scenario.Embedded(name)
		if err != nil {
			t.Fatal(err)
		}
		for _, p := range testbed.Names() {
			r, err := Run(s, Options{Policy: p})
			if errors.Is(err, ErrUnfinished) && p == "none" {
				continue
			}
			if err != nil {
				t.Fatalf("%s/%s: %v", name, p, err)
			}
			t.Logf("%s/%s: JCT mean %.4gs, agg %.4g el/s", name, p, float64(r.Summary.JCTMean), float64(r.Summary.AggThroughput))
		}
	}
}

// TestRunMemoryInUse: the memory in use by chunks (integrated by the
// switch) is a part of what each policy reserves — all of it, to the last
// bit of rounding, under ATP and ESA, which reserve only aggregators in use
// and whose reserved memory the switch integrates too — and the ring,
// which uses no switch memory, has neither reading.
func TestRunMemoryInUse(t *testing.T) {
	s := tiny(t, "")
	for _, p := range []string{"none", "switchml", "atp", "esa", "freeina", "dynaina"} {
		r, _ := runJSON(t, s, Options{Policy: p})
		sh := float64(r.Summary.MemInUseShare)
		exact := p == "atp" || p == "esa"
		switch {
		case p == "none":
			if !math.IsNaN(sh) || !math.IsNaN(float64(r.Summary.MemUtilMean)) {
				t.Errorf("none: in use %v of reserved %v, want null", sh, r.Summary.MemUtilMean)
			}
		case exact:
			if math.Abs(sh-1) > 1e-9 {
				t.Errorf("%s: %.12f of reserved memory in use, want 1", p, sh)
			}
		case sh <= 0 || sh > 1.0001:
			t.Errorf("%s: %.4f of reserved memory in use, want (0, 1]", p, sh)
		}
		for _, j := range r.Jobs {
			in, res := float64(j.InUseSlotSeconds), float64(j.SlotSeconds)
			switch {
			case exact && (res <= 0 || math.Abs(in-res) > 1e-9*res):
				t.Errorf("%s: job %s in use %v slot-s, reserved %v: want equal and > 0", p, j.Name, in, res)
			case !exact && in > res*1.02+1e-9:
				t.Errorf("%s: job %s in use %v slot-s > reserved %v", p, j.Name, in, res)
			}
		}
	}
}

// TestRunInterrupted: a run whose Context is done stops at the next step
// and returns what it measured, with ErrInterrupted.
func TestRunInterrupted(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	r, err := Run(tiny(t, ""), Options{Policy: "freeina", Context: ctx})
	if !errors.Is(err, ErrInterrupted) || r == nil {
		t.Fatalf("results %v, error %v; want results and ErrInterrupted", r != nil, err)
	}
	if r.Summary.JobsFinished != 0 || !strings.Contains(err.Error(), "interrupted at virtual time") {
		t.Errorf("%d jobs finished, error %v", r.Summary.JobsFinished, err)
	}
}

// TestSwitchMLStatsInResults: results.json carries SwitchML's admissions
// under switchml only. In the default scenario both jobs are admitted at
// once; with memory for one pool (16 slots) the second job, arriving while
// the first runs, waits for it to leave, and its JCT includes the wait.
func TestSwitchMLStatsInResults(t *testing.T) {
	for _, pol := range []string{"switchml", "atp"} {
		res, err := Run(loadEmbedded(t, "default.yaml"), Options{Policy: pol})
		if err != nil {
			t.Fatal(err)
		}
		if pol != "switchml" {
			if res.SwitchML != nil {
				t.Errorf("%s: switchml counts %+v, want none", pol, res.SwitchML)
			}
			continue
		}
		if s := res.SwitchML; s == nil || s.Admitted != 2 || s.Waited != 0 || s.WaitMaxS > 1e-4 {
			t.Errorf("default: switchml counts %+v, want both jobs admitted at once", s)
		}
	}
	s := loadEmbedded(t, "default.yaml")
	s.Topology.Switch.Slots = 16
	res, err := Run(s, Options{Policy: "switchml"})
	if err != nil {
		t.Fatal(err)
	}
	st := res.SwitchML
	if st == nil || st.Admitted != 2 || st.Waited != 1 || st.WaitMaxS < 0.1 || st.WaitS != st.WaitMaxS {
		t.Fatalf("16 slots: switchml counts %+v, want the second job to wait for the first", st)
	}
	first, second := res.Jobs[0], res.Jobs[1]
	if float64(second.Arrival)+float64(st.WaitMaxS) < float64(first.Finish)-1e-3 {
		t.Errorf("job %s admitted at %v + %v, before job %s finished at %v", second.Name, second.Arrival, st.WaitMaxS, first.Name, first.Finish)
	}
}

// TestDynaINAStatsInResults: results.json carries DynaINA's scheduler
// counts under the dynaina policies only, and they add up: in the default
// scenario (no collision, no reboot: one ALLOC per all-reduce) each of the
// six all-reduces is granted or runs on the PS path.
func TestDynaINAStatsInResults(t *testing.T) {
	s := loadEmbedded(t, "default.yaml")
	for _, pol := range []string{"dynaina", "dynaina-lend", "freeina", "atp"} {
		res, err := Run(s, Options{Policy: pol})
		if err != nil {
			t.Fatal(err)
		}
		d := res.DynaINA
		if !strings.HasPrefix(pol, "dynaina") {
			if d != nil {
				t.Errorf("%s: dynaina counts %+v, want none", pol, d)
			}
			continue
		}
		if d == nil || d.Allocs != 6 || d.Grants+d.PSPath != d.Allocs || d.Expired > d.PSPath || d.Loans > d.Grants || d.Outside != 0 {
			t.Errorf("%s: dynaina counts %+v, want 6 ALLOCs, each granted or on the PS path", pol, d)
		}
		// Lending's tries: each ends in a loan or one refusal; none
		// without lending.
		refused := d.LendNoIdle + d.LendTooSmall + d.LendUnpredicted + d.LendTooSoon
		if d.LendTried != d.Loans+refused || (pol == "dynaina" && d.LendTried != 0) {
			t.Errorf("%s: lending %+v: tries must be loans plus refusals, and 0 without lending", pol, d)
		}
	}
}

// TestRunHostCosts: topology.host_costs reaches the run: its figures are
// reported per node type (an RDMA policy's as its NIC's), and a slower
// NIC on FreeINA's workers slows its all-reduces.
func TestRunHostCosts(t *testing.T) {
	jct := func(topo, policy string) (float64, *report.HostCosts) {
		src := strings.Replace(tinyScenario, "topology:\n", "topology:\n"+topo, 1)
		s, err := scenario.Parse("tiny.yaml", []byte(src), scenario.DefaultModels())
		if err != nil {
			t.Fatal(err)
		}
		r, err := Run(s, Options{Policy: policy})
		if err != nil {
			t.Fatal(err)
		}
		return float64(r.Summary.JCTMean), r.Costs
	}
	base, h := jct("", "freeina")
	if h != nil {
		t.Errorf("freeina without host costs reports %v", h)
	}
	// The tiny scenario's PSs are shared, which every run says.
	if r, err := Run(tiny(t, ""), Options{Policy: "atp"}); err != nil || !strings.HasPrefix(r.PSLayout, "shared: 2 PSs serving every job (the old layout") {
		t.Errorf("shared PSs' layout %q (%v)", r.PSLayout, err)
	}
	slow, h := jct("  host_costs: {freeina: {workers: {gbps: 10, latency: 2ms}}}\n", "freeina")
	if h == nil || h.SoftwareStackGbps != 10 || h.SoftwareStackLatency != 2e-3 || !h.PSStackGiven || h.String() != "workers' NIC 10 Gb/s +2 ms/packet, PSs' NIC none" {
		t.Errorf("freeina's host costs %+v (%v)", h, h)
	}
	if !(slow > base) {
		t.Errorf("freeina's JCT mean %v s with 10 Gb/s NICs, %v s without: not slower", slow, base)
	}
	if _, h := jct("  host_costs: {atp: {ps: {gbps: 40}}}\n", "atp"); h == nil || h.String() != "workers' software stack 46 Gb/s, PSs' software stack 40 Gb/s" {
		t.Errorf("atp's host costs %v", h)
	}
}

// TestHostCostsAtTrueScale: the host costs a run reports are the
// scenario's true-scale figures, exact at any rate_scale (46 Gb/s scaled by
// 0.1 and back read 45.99999999999999 before).
func TestHostCostsAtTrueScale(t *testing.T) {
	for _, scale := range []float64{0.01, 0.1, 0.3, 1} {
		src := fmt.Sprintf(`name: costs
seed: 1
scaling: {tensor_scale: 0.0001, rate_scale: %g}
topology: {link_gbps: 100, ps: {cpu: {cores: 12, gbps_per_core: 3.83}}}
jobs:
  - {name: a, model: resnet50, workers: 2, iterations: 1}
`, scale)
		s, err := scenario.Parse("costs.yaml", []byte(src), scenario.DefaultModels())
		if err != nil {
			t.Fatal(err)
		}
		res, err := Run(s, Options{Policy: "atp"})
		if err != nil {
			t.Fatal(err)
		}
		if h := res.Costs; h == nil || h.SoftwareStackGbps != 46 || h.PSGbpsPerCore != 3.83 {
			t.Errorf("rate_scale %g: host costs %+v, want a 46 Gb/s stack and 3.83 Gb/s per PS core", scale, h)
		}
	}
}
