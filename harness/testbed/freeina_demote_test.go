package testbed

import (
	"testing"
	"time"
)

// TestUCLeaseLostForGood: the switch reboots in the middle of an
// all-reduce and, before the PS's exact re-ALLOC, another lease takes all
// the memory (it does not idle out during the test). The re-ALLOC gets no
// aggregators, so the PS demotes the all-reduce: every worker sends what
// it has not sent yet raw over RC, and the PS stops pulling. The results
// are exact (runScenario), and the all-reduce ends before it would on the
// PS path alone. (Before the demotion existed every later INA chunk
// collided, the PS pulled it, the duplicates filled the workers' RC send
// queues and the run failed.)
func TestUCLeaseLostForGood(t *testing.T) {
	elems := 64 * 8000
	at := 100 * time.Microsecond
	if raceEnabled {
		elems, at = 64*1500, 25*time.Microsecond
	}
	longIdle := func(s *Spec) {
		s.Timers.LeaseIdle = 10 * time.Second
		for j := range s.Jobs { // DynaINA's scheduler registers the job from its profile
			s.Jobs[j].AllReduces, s.Jobs[j].GradientBytes = 1, 4*int64(elems)
		}
	}
	takeAll := func(c *Testbed) { // another job's lease on every aggregator
		if l := c.FreeINA().Alloc(c.Net.Now(), 99, 1, 1<<20, 0); l.Slots != c.FreeINA().Aggregators() {
			t.Fatalf("the other lease got %d of %d aggregators", l.Slots, c.FreeINA().Aggregators())
		}
	}
	for _, policy := range []string{"freeina", "dynaina"} {
		t.Run(policy, func(t *testing.T) {
			c, end := runScenario(t, scenario{name: "lost-for-good", policy: policy, jobs: []int{4}, elems: elems, reboot: at,
				tune: longIdle, hook: takeAll, hookAt: at + 21*time.Microsecond})
			st := c.FreeINAPS(0).Stats()
			demoted := 0
			for r := range c.Workers[0] {
				if c.FreeINAWorker(0, r).Reports()[0].Demoted {
					demoted++
				}
			}
			// The same all-reduce when the memory is taken from the start:
			// the PS path alone.
			_, psEnd := runScenario(t, scenario{name: "ps-path", policy: policy, jobs: []int{4}, elems: elems, tune: longIdle, hook: takeAll})
			t.Logf("lost for good at %v: the all-reduce ends at %v (PS path alone %v, ×%.2f); PS: %d re-ALLOCs, %d demotions, %d pulls, %d software sums, %d raw duplicates; %d of 4 workers demoted",
				at, end, psEnd, float64(end)/float64(psEnd), st.Reallocs, st.Demotions, st.Pulls, st.SoftResults, st.RawDup, demoted)
			if st.Demotions != 1 || demoted != 4 {
				t.Fatalf("%d demotions at the PS, %d of 4 workers demoted; want 1 and 4", st.Demotions, demoted)
			}
			if end > psEnd {
				t.Errorf("the demoted all-reduce took %v, longer than on the PS path alone (%v)", end, psEnd)
			}
		})
	}
}
