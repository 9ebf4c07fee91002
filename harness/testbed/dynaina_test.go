package testbed

import (
	"testing"
	"time"

	"github.com/inabox/inabox/host"
)

// TestDynaINACluster runs three jobs on a switch whose memory holds two
// pools, on both INA paths: the workers and PS are FreeINA's, unchanged;
// the DynaINA scheduler decides every ALLOC. Every result is exact, every
// grant lies in the job's pool, every job registers and unregisters, and
// memory is all free at the end.
func TestDynaINACluster(t *testing.T) {
	t.Parallel() // a long test: it shares the cores with the others (make test)
	for _, path := range []host.INAPath{host.PathUC, host.PathTrim} {
		t.Run(path.String(), func(t *testing.T) {
			const elems, ars = 64 * 600, 3
			jobs := []int{4, 3, 2}
			gaps := []time.Duration{20 * time.Microsecond, 200 * time.Microsecond, 50 * time.Microsecond}
			inputs := map[[3]int][]float32{}
			cfg := Spec{Seed: 5, Aggregators: 700, PSPlacement: PSShared, PSCount: 2, INAPath: path}
			for i, n := range jobs {
				cfg.Jobs = append(cfg.Jobs, JobSpec{Workers: n, Arrival: time.Duration(i) * 30 * time.Microsecond, Compute: gaps[i],
					AllReduces: ars, GradientBytes: 4 * elems})
			}
			// Each job's first all-reduce at its arrival (no compute first):
			// its first forward pass "began" one compute time earlier.
			cfg.FreeINA = &FreeINAOptions{Worker: func(j, _ int, wc *host.WorkerConfig) {
				wc.Timeline.Start = cfg.Jobs[j].Arrival - cfg.Jobs[j].Compute
			}}
			c, err := Build(cfg, "dynaina", tensors(inputs, ars, elems, func(job uint16, rank, a int) []float32 {
				return genTensor(job, rank, elems, uint64(a))
			}))
			if err != nil {
				t.Fatal(err)
			}
			node := c.DynaINA()
			if _, err := c.Run(2*time.Second, 0); err != nil {
				t.Fatal(err)
			}
			// Let the last FREEs arrive.
			if _, err := c.Net.RunUntil(c.Net.Now() + 100*time.Microsecond); err != nil {
				t.Fatal(err)
			}
			for ji, ws := range c.Workers {
				q := host.Quantizer{Workers: jobs[ji]}
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
						got := w.Endpoint.Result(a)
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
			if l := c.FreeINA().Leases(); len(l) != 0 || node.Scheduler().FreeSlots() != 700 {
				t.Errorf("leases left %v, free %d", l, node.Scheduler().FreeSlots())
			}
			t.Logf("%+v", st)
		})
	}
}

// TestDynaINARegistersAtArrival: the switch learns of a DynaINA job only
// by the cluster manager's registration, an Event at the job's arrival on
// the switch node; before it the scheduler knows nothing of the job.
func TestDynaINARegistersAtArrival(t *testing.T) {
	ms := time.Millisecond
	cfg := Spec{Seed: 1, Aggregators: 200}
	for i := range 2 {
		cfg.Jobs = append(cfg.Jobs, JobSpec{Workers: 2, Arrival: time.Duration(i) * ms, Compute: ms, AllReduces: 1, GradientBytes: 4 * 64 * 100})
	}
	c, err := Build(cfg, "dynaina", func(j, rank int) []host.Tensor {
		return []host.Tensor{{AllReduce: 1, Data: genTensor(JobID(j), rank, 64*100, 0)}}
	})
	if err != nil {
		t.Fatal(err)
	}
	ev := c.Events()
	if len(ev) != 2 || ev[0].At != 0 || ev[1].At != ms || ev[0].Node != SwitchNode || ev[1].Node != SwitchNode {
		t.Fatalf("events %+v", ev)
	}
	d := c.DynaINA()
	for _, step := range []struct {
		at   time.Duration
		regs uint64
	}{{ms / 2, 1}, {ms - 1, 1}, {ms, 2}} {
		if _, err := c.Net.RunUntil(step.at); err != nil {
			t.Fatal(err)
		}
		if st := d.Stats(); st.Registered != step.regs || (step.regs == 1) != (d.JobPool(JobID(1)) == -1) {
			t.Fatalf("at %v: %+v, job 2's pool %d", step.at, st, d.JobPool(JobID(1)))
		}
	}
	if _, err := c.Run(time.Second, 0); err != nil {
		t.Fatal(err)
	}
	if err := c.Check(); err != nil {
		t.Fatal(err)
	}
}
