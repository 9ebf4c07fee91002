package testbed

import (
	"testing"
	"time"

	"github.com/inabox/inabox/emu"
	"github.com/inabox/inabox/host/baseline"
	sw "github.com/inabox/inabox/switch"
)

// TestBaselineMultiJob: three jobs (8, 4 and 6 workers) share one switch, each
// with its own PS; ATP and ESA share a small pool (contention: collisions, and for ESA
// preemption of the lower-priority jobs), SwitchML gives each job its own
// pool, the PS-only jobs use their PSs, the ring only the switch. Every
// result exact, and ATP and ESA leave no aggregator busy.
func TestBaselineMultiJob(t *testing.T) {
	elems := 8192
	if raceEnabled {
		elems = 2048
	}
	for _, kind := range baselineKinds {
		for _, im := range []struct {
			name string
			im   emu.Impairments
		}{{"clean", emu.Impairments{}}, {"loss1", emu.Impairments{Loss: 0.01}}} {
			t.Run(kind+"/"+im.name, func(t *testing.T) {
				sc := bscenario{name: im.name, kind: kind, jobs: []int{8, 4, 6}, elems: elems, ars: 2, impair: im.im, slots: 64,
					prio: []uint8{1, 3, 2}, start: []time.Duration{0, 3 * time.Microsecond, 7 * time.Microsecond}}
				c, end := run(t, sc)
				t.Logf("%s %s: %v", kind, im.name, end)
				for j := 0; j < 3; j++ {
					t.Logf("  job %d (prio %d): end %v %+v", j, sc.prio[j], c.JobEnd(j), c.Totals(j))
				}
				if c.ATPPS(0) != nil && kind != "none" {
					var st baseline.PSStats // the three jobs' PSs together
					for j := 0; j < 3; j++ {
						s := c.ATPPS(j).Stats()
						st.Collisions += s.Collisions
						st.Partials += s.Partials
					}
					t.Logf("  ps %+v; busy slots after the run %d; pool %+v", st, c.BusySlots(), poolStats(c))
					if (kind == "atp" || kind == "esa") && c.BusySlots() != 0 {
						// The PS's ACK frees its chunk's aggregator, partial
						// or not, and a retransmission forces a partial out:
						// nothing is left when the jobs are done (23 of 64
						// were, under loss, before both).
						t.Errorf("%d aggregators still busy after the run", c.BusySlots())
					}
					switch kind {
					case "atp":
						if st.Collisions == 0 {
							t.Errorf("no collisions on a 64-aggregator shared pool")
						}
					case "esa":
						// Partial aggregates live long only when a
						// contribution is lost (they wait for an RTO).
						if im.im.Loss > 0 && st.Partials == 0 {
							t.Errorf("no preemption on a 64-aggregator shared pool")
						}
					}
				}
			})
		}
	}
}

// TestBaselineDeterministic: the same scenario twice gives the same times and
// counters.
func TestBaselineDeterministic(t *testing.T) {
	for _, kind := range baselineKinds {
		sc := bscenario{name: "det", kind: kind, jobs: []int{8, 3}, elems: 4096, ars: 2, slots: 64, prio: []uint8{1, 2},
			impair: emu.Impairments{Loss: 0.02, Duplicate: 0.01}}
		c1, e1 := run(t, sc)
		c2, e2 := run(t, sc)
		if e1 != e2 || c1.Totals(0) != c2.Totals(0) || c1.Totals(1) != c2.Totals(1) {
			t.Errorf("%s: runs differ: %v %+v vs %v %+v", kind, e1, c1.Totals(0), e2, c2.Totals(0))
		}
	}
}

func poolStats(c *Testbed) sw.PoolStats {
	p, _ := c.Switch.PoolStats(1)
	return p
}
