package testbed

import (
	"testing"
	"time"

	"github.com/inabox/inabox/host/baseline"
)

// TestSwitchMLAdmission: SwitchML's memory is divided among the jobs
// present, not among every job of the testbed. With 64 aggregators and two
// jobs, the first, alone, gets the whole memory (a window of 32, where a
// partition among both jobs would give it 16); the second arrives while
// the first runs, finds nothing free, and begins only after every worker
// of the first has finished, then with the whole memory too. Both sum
// exactly (run checks every value). Under loss the JOINs, GRANTs, LEAVEs
// and LEFTs are repeated until answered and both jobs still finish.
func TestSwitchMLAdmission(t *testing.T) {
	for _, loss := range []float64{0, 0.05} {
		sc := bscenario{name: "admission", kind: "switchml", jobs: []int{4, 4}, elems: 64 * 400, ars: 2, slots: 64,
			start: []time.Duration{0, 10 * time.Microsecond}}
		sc.impair.Loss = loss
		c, _ := run(t, sc)
		var end1 time.Duration
		for _, w := range c.Workers[0] {
			reps := w.Endpoint.Reports()
			end1 = max(end1, reps[len(reps)-1].End)
		}
		for j := range c.Workers {
			for r, w := range c.Workers[j] {
				if win := w.Endpoint.(*baseline.INAWorker).Window(); win != 32 {
					t.Errorf("loss %v: job %d rank %d: window %d, want 32 (the whole memory's half)", loss, j, r, win)
				}
			}
		}
		for r, w := range c.Workers[1] {
			if st := w.Endpoint.Reports()[0].Start; st < end1 {
				t.Errorf("loss %v: job 2 rank %d began at %v, before job 1 finished (%v)", loss, r, st, end1)
			}
		}
		st := c.SwitchML().Stats()
		if st.Admitted != 2 || st.Waited != 1 {
			t.Errorf("loss %v: controller %+v", loss, st)
		}
		if st.Joins < 8 || st.Leaves < 8 || st.Released != 2 {
			t.Errorf("loss %v: controller %+v: want a JOIN and a LEAVE from every worker, both jobs released", loss, st)
		}
		t.Logf("loss %v: job 1 ends %v, job 2 begins %v; %+v", loss, end1, c.Workers[1][0].Endpoint.Reports()[0].Start, st)
	}
}
