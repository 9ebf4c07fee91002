package testbed

import (
	"fmt"
	"time"

	"github.com/inabox/inabox/host"
	"github.com/inabox/inabox/host/baseline"
	sw "github.com/inabox/inabox/switch"
)

// switchml: SwitchML's static partition, divided among the jobs present.
// SwitchML's controller (sw.SwitchMLControl, the switch's control plane
// here) learns each job's arrival from the cluster manager (an event at
// the arrival) and admits the job when its workers JOIN, in arrival order:
// a pool of min(2 × window, memory ÷ jobs present (arrived and not gone),
// at least 2)
// aggregators, kept unchanged until every worker has left; a job that
// finds no memory waits for one to leave. Chunk sequence mod pool is the
// chunk's aggregator, the pool's two halves acting as shadow copies;
// workers keep a self-clocked window of half the pool and retransmit per
// chunk (backing off until they hold a result of the all-reduce: a late
// peer is not a loss). The job's PS is the fallback for a contribution
// whose aggregator another chunk holds (it happens only after a reboot or
// under loss).

func newSwitchML() Policy {
	p := &baselinePolicy{name: "switchml"}
	p.control = func(t *Testbed, s *sw.Switch) (sw.ControlPlane, error) {
		sc, err := sw.NewSwitchMLControl(s, sw.SwitchMLConfig{Slots: t.aggregators() * t.Stride, Stride: t.Stride})
		if err != nil {
			return nil, err
		}
		p.sml = sc
		return sc, nil
	}
	p.slots = func(t *Testbed) (int, error) { return max(sw.DefaultSlots, t.aggregators()*t.Stride), nil }
	p.program = func(t *Testbed, j int, _ []sw.McastMember) error {
		job := JobID(j)
		// A contribution that finds its aggregator claimed by another
		// chunk (after a reboot, under loss) goes to the job's PS, which
		// sums it and sends the result back through the switch, as ATP's:
		// the PS's results must be the job's.
		psPort := t.PSs[t.PSOf(j)].Port
		if err := t.Switch.AddWorker(sw.WorkerEntry{Port: psPort, QP: PSAckQPN(job), Job: job, PS: true, RID: PSRID(job)}); err != nil {
			return err
		}
		// The job entry and its pool are installed when the controller
		// admits the job; the cluster manager announces its arrival.
		if err := p.sml.AddJob(sw.SwitchMLJob{Workers: t.Spec.Jobs[j].Workers,
			Spec: sw.JobSpec{ID: job, Mask: uint32(1)<<t.Spec.Jobs[j].Workers - 1, Group: job, PSPort: psPort}}); err != nil {
			return err
		}
		sml := p.sml
		t.at(Event{At: t.Spec.Jobs[j].Arrival, Node: SwitchNode, Do: func(now time.Duration) { _ = sml.Arrive(now, job) }})
		return nil
	}
	p.worker = func(t *Testbed, j, r int, ts []host.Tensor) (Worker, error) {
		rto := t.Spec.Timers.SwitchMLRTO
		if rto == 0 {
			rto = 50 * time.Microsecond
		}
		cfg := inaConfig(t, baseline.SwitchML, j, r, switchMLWindow(t), rto)
		cfg.SwitchCtlQPN = SwitchCtlQPN
		return baseline.NewINAWorker(cfg, ts), nil
	}
	p.occupancy = func(t *Testbed) []Occupied {
		// Each job holds its pool from admission until every worker left.
		var out []Occupied
		for _, pl := range p.sml.Pools() {
			out = append(out, Occupied{Pool: fmt.Sprintf("static%d", pl.Job), Job: int(pl.Job) - 1, Slots: pl.Aggregators * t.Stride})
		}
		return out
	}
	return p
}

// switchMLWindow is the window a SwitchML job asks for (half the pool it
// JOINs with): Spec.Window, or the pipe (PipeSlots), at most half the
// memory (at least 1). The controller may grant less.
func switchMLWindow(t *Testbed) int {
	if t.Spec.Window > 0 {
		return t.Spec.Window
	}
	return max(min(t.PipeSlots(), t.aggregators()/2), 1)
}

// inaConfig is worker rank of job j's configuration for an INA baseline.
func inaConfig(t *Testbed, kind baseline.INAKind, j, r, window int, rto time.Duration) baseline.INAConfig {
	job, n := JobID(j), t.Spec.Jobs[j].Workers
	peers := make([]host.Peer, n)
	for k := range peers {
		peers[k] = host.Peer{Addr: WorkerAddr(job, k), QPN: WorkerUCQPN(job, k)}
	}
	return baseline.INAConfig{Kind: kind, Job: job, Rank: r, Workers: n, Values: t.Spec.ValuesPerPacket, Quant: t.quant(j),
		Addr: WorkerAddr(job, r), UCQPN: WorkerUCQPN(job, r), PS: PSAddr(t.PSOf(j)), PSQPN: PSQPN(job, r), Peers: peers, Switch: SwitchAddr,
		Window: window, RTO: rto, Timeline: t.Timeline(j, r)}
}

// SwitchML returns the switch's SwitchML controller of a switchml testbed,
// or nil.
func (t *Testbed) SwitchML() *sw.SwitchMLControl {
	if p, ok := t.policy.(*baselinePolicy); ok {
		return p.sml
	}
	return nil
}
