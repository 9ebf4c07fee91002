package testbed

import (
	"math"
	"testing"
	"time"

	"github.com/inabox/inabox/emu"
	"github.com/inabox/inabox/host"
)

// baselineKinds are the baselines the tests run: PS-only (not a scenario
// policy) and every registered baseline ("none" is the ring).
var baselineKinds = append([]string{"ps"}, Baselines()...)

// newBaseline returns the baseline policy kind.
func newBaseline(kind string) Policy {
	if kind == "ps" {
		return PSOnly()
	}
	e, _ := Lookup(kind)
	return e.New()
}

type bscenario struct {
	name     string
	kind     string
	jobs     []int
	elems    int
	ars      int
	impair   emu.Impairments
	reboot   time.Duration // crash the switch at this time (0: never)
	slots    int
	prio     []uint8
	start    []time.Duration
	seed     uint64
	deadline time.Duration
}

// reference computes the exact int32 sum of job's all-reduce a the way the
// protocol must: each value rounded half-to-even at 2^-16, clipped to
// ±⌊(2³¹−1)/N⌋, summed in int64 (never beyond int32 because of the clip).
func reference(inputs [][]float32) []int32 {
	n := len(inputs)
	lim := float64(math.MaxInt32 / int64(n))
	out := make([]int32, len(inputs[0]))
	for i := range out {
		var s int64
		for _, in := range inputs {
			v := math.RoundToEven(float64(in[i]) * 65536)
			v = math.Min(math.Max(v, -lim), lim)
			s += int64(v)
		}
		if s > math.MaxInt32 || s < math.MinInt32 {
			panic("reference overflow")
		}
		out[i] = int32(s)
	}
	return out
}

// run builds and runs sc and checks every worker's results exactly and,
// dequantized, against N·2^-17.
func run(t testing.TB, sc bscenario) (*Testbed, time.Duration) {
	t.Helper()
	if sc.ars == 0 {
		sc.ars = 1
	}
	if sc.deadline == 0 {
		sc.deadline = time.Second
	}
	inputs := map[[3]int][]float32{}
	cfg := Spec{Seed: sc.seed + 3, Jobs: jobSpecs(sc.jobs), Impairments: sc.impair, Aggregators: sc.slots}
	for j := range cfg.Jobs {
		if j < len(sc.prio) {
			cfg.Jobs[j].Priority = sc.prio[j]
		}
		if j < len(sc.start) {
			cfg.Jobs[j].Arrival = sc.start[j]
		}
	}
	c, err := BuildWith(cfg, newBaseline(sc.kind), tensors(inputs, sc.ars, sc.elems, func(job uint16, rank, a int) []float32 {
		return genBaselineTensor(job, rank, sc.elems, uint64(a)+sc.seed*100)
	}))
	if err != nil {
		t.Fatal(err)
	}
	reboot(t, c, sc.reboot, 5*time.Microsecond)
	end, err := c.Run(sc.deadline, 50*time.Microsecond)
	if err != nil {
		t.Fatalf("%s/%s: %v (totals %+v; %s)", sc.kind, sc.name, err, c.Totals(0), netSummary(c))
	}
	if sc.reboot > 0 && c.Reboots() != 1 {
		t.Fatalf("reboots = %d", c.Reboots())
	}
	for ji, n := range sc.jobs {
		job := uint16(ji + 1)
		for a := 0; a < sc.ars; a++ {
			ins := make([][]float32, n)
			for r := range ins {
				ins[r] = inputs[[3]int{int(job), r, a}]
			}
			want := reference(ins)
			q := host.Quantizer{Workers: n}
			bound := q.Bound(0)
			for r := 0; r < n; r++ {
				got := c.Worker(ji, r).Endpoint.Result(a)
				for i := range want {
					if got[i] != want[i] {
						t.Fatalf("%s/%s: job %d rank %d ar %d value %d = %d, want %d", sc.kind, sc.name, job, r, a, i, got[i], want[i])
					}
				}
				deq := c.Worker(ji, r).Endpoint.Dequantized(a)
				for i := range deq {
					var x float64
					for _, in := range ins {
						x += float64(in[i])
					}
					if d := math.Abs(deq[i] - x); d > bound {
						t.Fatalf("%s/%s: dequantized value %d off by %g > bound %g", sc.kind, sc.name, i, d, bound)
					}
				}
			}
		}
	}
	return c, end
}

func acceptanceElems() int {
	if raceEnabled {
		return 4096
	}
	return 32768
}

// TestBaselineAcceptance: for every baseline, 8 workers + switch + PS at 100 Gb/s
// all-reduce a tensor (twice) exactly, clean, with 1 % and 5 % loss,
// duplication, reordering, and the switch rebooted in the middle of an
// all-reduce (at half the clean run's duration).
func TestBaselineAcceptance(t *testing.T) {
	t.Parallel() // a long test: it shares the cores with the others (make test)
	elems := acceptanceElems()
	for _, kind := range baselineKinds {
		t.Run(kind, func(t *testing.T) {
			base := bscenario{kind: kind, jobs: []int{8}, elems: elems, ars: 2}
			clean := base
			clean.name = "clean"
			c, cleanEnd := run(t, clean)
			tot := c.Totals(0)
			t.Logf("%-8s clean   %9v  %+v", kind, cleanEnd, tot)
			if kind != "ps" && kind != "none" && (tot.Retransmits != 0 || tot.PSResends != 0) {
				t.Errorf("clean run retransmitted: %+v", tot)
			}
			cases := []bscenario{
				{name: "loss1", impair: emu.Impairments{Loss: 0.01}},
				{name: "loss5", impair: emu.Impairments{Loss: 0.05}},
				{name: "dup", impair: emu.Impairments{Duplicate: 0.02}},
				{name: "reorder", impair: emu.Impairments{Reorder: 0.02, ReorderDelay: 3 * time.Microsecond}},
				{name: "reboot", reboot: max(cleanEnd/2, time.Microsecond)},
				// A reboot while losses leave the workers at different
				// points (some hold results others lack).
				{name: "reboot+loss1", reboot: max(cleanEnd/3, time.Microsecond), impair: emu.Impairments{Loss: 0.01}},
			}
			for _, cs := range cases {
				sc := base
				sc.name, sc.impair, sc.reboot = cs.name, cs.impair, cs.reboot
				t.Run(cs.name, func(t *testing.T) {
					c, end := run(t, sc)
					t.Logf("%-8s %-7s %9v  %+v", kind, cs.name, end, c.Totals(0))
					if ps := c.ATPPS(0); ps != nil {
						t.Logf("         ps %+v", ps.Stats())
					}
					if sc.reboot > 0 && (kind == "switchml" || kind == "atp" || kind == "esa") && c.Totals(0).Retransmits == 0 {
						t.Errorf("the reboot cost no retransmission: did it hit the all-reduce?")
					}
				})
			}
		})
	}
}
