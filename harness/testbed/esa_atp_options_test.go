package testbed

import (
	"strings"
	"testing"
	"time"

	"github.com/inabox/inabox/emu"
	"github.com/inabox/inabox/host"
)

// TestESAReclaimHeld: two jobs of different priority on a 16-aggregator
// shared pool. ESA with Spec.ESAReclaimHeld reclaims held aggregators
// (PoolStats.ReclaimsHeld > 0) and both jobs' every result is exact (the
// evicted chunks' workers get them from their PS's ACK); without the
// option, and under ATP, nothing held is reclaimed.
func TestESAReclaimHeld(t *testing.T) {
	elems := 8192
	if raceEnabled {
		elems = 2048
	}
	spec := Spec{Seed: 1, Aggregators: 16, Jobs: []JobSpec{{Workers: 4, Priority: 1}, {Workers: 4, Priority: 3, Arrival: 2 * time.Microsecond}}}
	for _, c := range []struct {
		name, policy string
		reclaim      bool
	}{{"atp", "atp", false}, {"esa", "esa", false}, {"esa+reclaim_held", "esa", true}} {
		sp := spec
		sp.ESAReclaimHeld = c.reclaim
		tb, end := runExact(t, c.policy, sp, 2, elems, time.Second, nil)
		ps := poolStats(tb)
		t.Logf("%s: end %v, job ends %v (prio 1) %v (prio 3); pool %+v", c.name, end, tb.JobEnd(0), tb.JobEnd(1), ps)
		if c.reclaim != (ps.ReclaimsHeld > 0) {
			t.Errorf("%s: %d held aggregators reclaimed", c.name, ps.ReclaimsHeld)
		}
		if !c.reclaim && ps.CollisionsOnHeld == 0 {
			t.Errorf("%s: no collision on a held aggregator: the pool is not contended", c.name)
		}
	}
	// Under 1 % loss and 1 % duplication on every link (results and ACKs
	// lost, switch-path resends finding their aggregator reclaimed) both
	// jobs still finish exact.
	sp := spec
	sp.ESAReclaimHeld, sp.Impairments = true, emu.Impairments{Loss: 0.01, Duplicate: 0.01}
	for seed := uint64(1); seed <= 3; seed++ {
		sp.Seed = seed
		tb, end := runExact(t, "esa", sp, 2, elems, time.Second, nil)
		t.Logf("esa+reclaim_held, loss, seed %d: end %v; pool %+v", seed, end, poolStats(tb))
	}
	// Any policy but ESA ignores the option.
	sp = spec
	sp.ESAReclaimHeld = true
	if tb, _ := runExact(t, "atp", sp, 1, elems, time.Second, nil); poolStats(tb).ReclaimsHeld != 0 {
		t.Errorf("atp reclaimed held aggregators: %+v", poolStats(tb))
	}
}

// TestATPBudget: with Spec.ATPBudget 8 an ATP or ESA job touches at most 8
// aggregators of the pool (an aggregator never claimed keeps zero values)
// and its workers keep at most 8 chunks in flight; without a budget the
// same job touches more. Every result is exact.
func TestATPBudget(t *testing.T) {
	elems := 8192
	if raceEnabled {
		elems = 2048
	}
	for _, pol := range []string{"atp", "esa"} {
		for _, budget := range []int{0, 8} {
			spec := Spec{Seed: 2, Aggregators: 256, ATPBudget: budget, Jobs: []JobSpec{{Workers: 4}}}
			tb, end := runExact(t, pol, spec, 2, elems, time.Second, nil)
			touched := 0
			for i := 0; i < tb.aggregators()*tb.Stride; i += tb.Stride {
				for _, v := range tb.Switch.Values(nil, i) {
					if v != 0 {
						touched++
						break
					}
				}
			}
			win := windowOf(tb)
			t.Logf("%s budget %d: end %v, %d aggregators touched, window %d, pool %+v", pol, budget, end, touched, win, poolStats(tb))
			switch {
			case budget > 0 && (touched > budget || touched == 0 || win != budget):
				t.Errorf("%s budget %d: %d aggregators touched, window %d", pol, budget, touched, win)
			case budget == 0 && touched <= 8:
				t.Errorf("%s without a budget: only %d aggregators touched (the check cannot tell)", pol, touched)
			}
		}
	}
	_, err := Build(Spec{Seed: 1, Aggregators: 64, ATPBudget: 65, Jobs: []JobSpec{{Workers: 2}}}, "atp",
		func(job, rank int) []host.Tensor { return nil })
	if err == nil || !strings.Contains(err.Error(), "budget 65") {
		t.Errorf("budget 65 of 64 aggregators: %v", err)
	}
}
