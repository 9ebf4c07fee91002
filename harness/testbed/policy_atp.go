package testbed

import (
	"time"

	"github.com/inabox/inabox/host"
	"github.com/inabox/inabox/host/baseline"
	sw "github.com/inabox/inabox/switch"
)

// atp: ATP's best-effort sharing. Every job hashes its chunks into one
// shared pool (the hashed slot stage); a completed aggregate goes to the
// job's PS, which ACKs it through the switch (releasing the aggregator,
// multicasting the result); a busy aggregator sends the contribution to
// the PS (collision). Workers retransmit on timeout, alternately through
// the switch and on the PS path. Spec.ATPBudget gives every job ATP's
// per-application set of aggregators (and caps its window there).

func newATP() Policy { return newHashedBaseline("atp", sw.StageHashed, baseline.ATP) }

// newHashedBaseline is ATP's testbed, with slot stage stage and client
// kind (ESA shares it, with preemption).
func newHashedBaseline(name string, stage int, kind baseline.INAKind) Policy {
	p := &baselinePolicy{name: name, reservedIsBusy: true}
	p.slots = func(t *Testbed) (int, error) { return t.aggregators() * t.Stride, nil }
	p.setup = func(t *Testbed) error {
		return t.Switch.SetPool(1, 0, t.aggregators()*t.Stride, t.Stride)
	}
	p.program = func(t *Testbed, j int, _ []sw.McastMember) error {
		job := JobID(j)
		js := t.Spec.Jobs[j]
		psPort := t.PSs[t.PSOf(j)].Port
		if err := t.Switch.AddWorker(sw.WorkerEntry{Port: psPort, QP: PSAckQPN(job), Job: job, PS: true, RID: PSRID(job)}); err != nil {
			return err
		}
		return t.Switch.SetJob(sw.JobSpec{ID: job, Mask: uint32(1)<<js.Workers - 1, Group: job, PSPort: psPort,
			PolicyID: stage, PoolID: 1, ResultToPS: true, Priority: js.Priority, Budget: t.Spec.ATPBudget,
			ReclaimHeld: stage == sw.StagePreemptive && t.Spec.ESAReclaimHeld})
	}
	p.worker = func(t *Testbed, j, r int, ts []host.Tensor) (Worker, error) {
		win := t.Spec.Window
		if win == 0 {
			// Results loop through the PS: twice SwitchML's window.
			win = 2 * t.PipeSlots()
		}
		if t.Spec.ATPWindow > 0 {
			win = min(win, t.Spec.ATPWindow)
		}
		if t.Spec.ATPBudget > 0 {
			// The job's chunks share ATPBudget aggregators: chunk c and
			// c + ATPBudget use the same one.
			win = min(win, t.Spec.ATPBudget)
		}
		rto := t.Spec.Timers.RTO
		if rto == 0 {
			rto = 100 * time.Microsecond
		}
		cfg := inaConfig(t, kind, j, r, win, rto)
		cfg.FirstWait = t.Spec.ATPFirstWait
		if cfg.FirstWait == 0 {
			cfg.FirstWait = DefaultATPFirstWait
		}
		cfg.FirstWait = max(cfg.FirstWait, 0)
		return baseline.NewINAWorker(cfg, ts), nil
	}
	p.occupancy = func(t *Testbed) []Occupied {
		// Each job's aggregators claimed, complete or held for the PS's
		// ACK in the shared pool.
		var out []Occupied
		for j := range t.Spec.Jobs {
			if _, busy := t.Switch.JobSlots(JobID(j)); busy > 0 {
				out = append(out, Occupied{Job: j, Slots: busy})
			}
		}
		return out
	}
	return p
}
