package testbed

import (
	"runtime"
	"testing"
	"time"

	"github.com/inabox/inabox/host"
)

// TestSteadyStateAllocs: no policy allocates per packet. Under every
// policy, two 4-worker jobs each all-reduce three tensors back to back at
// 100 Gb/s, once with small and once with 4× larger tensors; counted from
// the end of every worker's first all-reduce (which grows the pools,
// windows and buffers the next ones reuse), the extra events of the
// larger run may cost at most one allocation per 200 (what grows with an
// all-reduce's size — a PS's chunk records, its result slabs, a map of
// chunks — comes in blocks). The difference cancels what every
// all-reduce pays whatever its size; a policy that allocated per packet
// would show about one allocation per event. (Measured: 0.0003–0.0024 per
// extra event.)
func TestSteadyStateAllocs(t *testing.T) {
	small := 1 << 15
	if raceEnabled {
		small = 1 << 14
	}
	type tcase struct {
		name, policy string
		aggregators  int // 0: the default (ample)
	}
	var cases []tcase
	for _, policy := range Names() {
		cases = append(cases, tcase{policy, policy, 0})
	}
	// Memory for a fraction of a window: ATP's and ESA's chunks collide and
	// take the PS path, whose pieces the PS sums.
	cases = append(cases, tcase{"atp/short-memory", "atp", 16}, tcase{"esa/short-memory", "esa", 16})
	for _, c := range cases {
		policy := c.policy
		t.Run(c.name, func(t *testing.T) {
			a1, e1 := runAllocs(t, policy, small, c.aggregators)
			a4, e4 := runAllocs(t, policy, 4*small, c.aggregators)
			per := (float64(a4) - float64(a1)) / (float64(e4) - float64(e1))
			t.Logf("%s: %d allocations over %d events, %d over %d with 4× the values: %.5f per extra event", policy, a1, e1, a4, e4, per)
			if e4-e1 < 5000 {
				t.Fatalf("only %d extra events", e4-e1)
			}
			if per > 0.005 {
				t.Errorf("%.4f allocations per extra event (want ≤ 0.005): %d → %d allocations, %d → %d events", per, a1, a4, e1, e4)
			}
		})
	}
}

// runAllocs runs the two-job testbed of TestSteadyStateAllocs with elems
// values per tensor (and aggregators aggregators, 0: the default) and returns the allocations and events of the run
// (not of building it).
func runAllocs(t *testing.T, policy string, elems, aggregators int) (allocs, events uint64) {
	inputs := [][]float32{}
	for r := 0; r < 4; r++ {
		inputs = append(inputs, genBaselineTensor(1, r, elems, 0))
	}
	tb, err := Build(Spec{Seed: 1, Jobs: jobSpecs([]int{4, 4}), ValuesPerPacket: 64, Aggregators: aggregators}, policy, func(job, rank int) []host.Tensor {
		return []host.Tensor{{AllReduce: 1, Data: inputs[rank]}, {AllReduce: 2, Data: inputs[rank]}, {AllReduce: 3, Data: inputs[rank]}}
	})
	if err != nil {
		t.Fatal(err)
	}
	for at := time.Microsecond; !firstDone(tb); at += time.Microsecond {
		if _, err := tb.Net.RunUntil(at); err != nil || at > time.Second {
			t.Fatalf("first all-reduce not done at %v (%v)", at, err)
		}
	}
	ev0 := tb.Net.Events
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	if _, err := tb.Run(time.Second, time.Millisecond); err != nil {
		t.Fatal(err)
	}
	runtime.ReadMemStats(&after)
	return after.Mallocs - before.Mallocs, tb.Net.Events - ev0
}

// firstDone reports whether every worker finished its first all-reduce.
func firstDone(tb *Testbed) bool {
	for _, ws := range tb.Workers {
		for _, w := range ws {
			if w.Endpoint.Finished() < 1 {
				return false
			}
		}
	}
	return true
}
