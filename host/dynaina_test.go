package host

import (
	"testing"
	"time"

	sw "github.com/inabox/inabox/switch"
	"github.com/inabox/inabox/switch/dynaina"
)

// TestDynaINACluster runs three jobs on a switch whose memory holds two
// pools, on both INA paths: the workers and PS are FreeINA's, unchanged;
// the DynaINA scheduler decides every ALLOC. Every result is exact, every
// grant lies in the job's pool, every job registers and unregisters, and
// memory is all free at the end.
func TestDynaINACluster(t *testing.T) {
	for _, path := range []INAPath{PathUC, PathTrim} {
		t.Run(path.String(), func(t *testing.T) {
			const elems, ars = 64 * 600, 3
			jobs := []int{4, 3, 2}
			gaps := []time.Duration{20 * time.Microsecond, 200 * time.Microsecond, 50 * time.Microsecond}
			inputs := map[[3]int][]float32{}
			cfg := ClusterConfig{Seed: 5, Jobs: jobs, Slots: 700, PSCount: 2, INAPath: path}
			cfg.Tune = func(job uint16, rank int, wc *WorkerConfig) {
				wc.Gap = gaps[job-1]
				wc.Delay = time.Duration(job-1) * 30 * time.Microsecond
			}
			var dj []sw.DynaINAJob
			for i, n := range jobs {
				dj = append(dj, sw.DynaINAJob{Arrival: time.Duration(i) * 30 * time.Microsecond, AllReduces: ars,
					Profile: dynaina.JobProfile{Workers: n, GradientBytes: 4 * elems, Compute: gaps[i]}})
			}
			c, node, err := NewDynaINACluster(cfg, DynaINAConfig{Jobs: dj}, func(job uint16, rank int) []Tensor {
				var ts []Tensor
				for a := 0; a < ars; a++ {
					d := genTensor(job, rank, elems, uint64(a))
					inputs[[3]int{int(job), rank, a}] = d
					ts = append(ts, Tensor{AllReduce: uint16(a + 1), Data: d})
				}
				return ts
			})
			if err != nil {
				t.Fatal(err)
			}
			if _, err := c.Run(2*time.Second, 0); err != nil {
				t.Fatal(err)
			}
			// Let the last FREEs arrive.
			if _, err := c.Net.RunUntil(c.Net.Now() + 100*time.Microsecond); err != nil {
				t.Fatal(err)
			}
			for ji, ws := range c.Workers {
				q := Quantizer{Workers: jobs[ji]}
				for a := 0; a < ars; a++ {
					want := make([]int64, elems)
					buf := make([]int32, elems)
					for r := range ws {
						q.Quantize(buf, inputs[[3]int{ji + 1, r, a}], 0)
						for i, v := range buf {
							want[i] += int64(v)
						}
					}
					for r, w := range ws {
						got := w.Result(a)
						for i := range want {
							if int64(got[i]) != want[i] {
								t.Fatalf("job %d rank %d ar %d: [%d] = %d, want %d", ji+1, r, a, i, got[i], want[i])
							}
						}
					}
				}
			}
			st := node.Stats()
			if err := node.Err(); err != nil {
				t.Fatal(err)
			}
			if st.Outside != 0 || st.Registered != 3 || st.Unregistered != 3 || st.Grants == 0 {
				t.Errorf("stats %+v", st)
			}
			if l := c.FreeINA.Leases(); len(l) != 0 || node.Sched.FreeSlots() != 700 {
				t.Errorf("leases left %v, free %d", l, node.Sched.FreeSlots())
			}
			t.Logf("%+v", st)
		})
	}
}
