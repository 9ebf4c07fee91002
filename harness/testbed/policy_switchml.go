package testbed

import (
	"fmt"
	"time"

	"github.com/inabox/inabox/host"
	"github.com/inabox/inabox/host/baseline"
	sw "github.com/inabox/inabox/switch"
)

// switchml: SwitchML's static partition. Each job owns a pool of 2 ×
// window aggregators for its whole run (the static slot stage: chunk
// sequence mod pool, the two halves acting as shadow copies); workers keep
// a self-clocked window and retransmit per chunk (backing off until they
// hold a result of the all-reduce: a late peer is not a loss). The job's PS is the
// fallback for a contribution whose aggregator another chunk holds (it
// happens only after a reboot or under loss).

func newSwitchML() Policy {
	p := &baselinePolicy{name: "switchml"}
	p.program = func(t *Testbed, j int, _ []sw.McastMember) error {
		win := switchMLWindow(t)
		job := JobID(j)
		if err := t.Switch.SetPool(job, j*2*win*t.Stride, 2*win*t.Stride, t.Stride); err != nil {
			return err
		}
		// A contribution that finds its aggregator claimed by another
		// chunk (after a reboot, under loss) goes to the job's PS, which
		// sums it and sends the result back through the switch, as ATP's:
		// the PS's results must be the job's.
		psPort := t.PSs[t.PSOf(j)].Port
		if err := t.Switch.AddWorker(sw.WorkerEntry{Port: psPort, QP: PSAckQPN(job), Job: job, PS: true, RID: PSRID(job)}); err != nil {
			return err
		}
		return t.Switch.SetJob(sw.JobSpec{ID: job, Mask: uint32(1)<<t.Spec.Jobs[j].Workers - 1, Group: job,
			PSPort: psPort, PolicyID: sw.StageStatic, PoolID: job})
	}
	p.slots = func(t *Testbed) (int, error) {
		if need := len(t.Spec.Jobs) * 2 * switchMLWindow(t) * t.Stride; need > sw.DefaultSlots {
			return 0, fmt.Errorf("switchml: %d jobs × 2 × window %d × stride %d exceed the switch's %d slots",
				len(t.Spec.Jobs), switchMLWindow(t), t.Stride, sw.DefaultSlots)
		}
		return sw.DefaultSlots, nil
	}
	p.worker = func(t *Testbed, j, r int, ts []host.Tensor) (Worker, error) {
		rto := t.Spec.Timers.SwitchMLRTO
		if rto == 0 {
			rto = 50 * time.Microsecond
		}
		return baseline.NewINAWorker(inaConfig(t, baseline.SwitchML, j, r, switchMLWindow(t), rto), ts), nil
	}
	p.occupancy = func(t *Testbed) []Occupied {
		// Each job holds its pool from arrival to finish.
		now := t.Net.Now()
		var out []Occupied
		for j, js := range t.Spec.Jobs {
			if js.Arrival > now {
				continue
			}
			done := true
			for _, w := range t.Workers[j] {
				done = done && w.Endpoint.Done()
			}
			if !done {
				out = append(out, Occupied{Pool: fmt.Sprintf("static%d", j+1), Job: j, Slots: 2 * switchMLWindow(t) * t.Stride})
			}
		}
		return out
	}
	return p
}

// switchMLWindow is SwitchML's window: Spec.Window, or the pipe
// (PipeSlots), at most half of the job's equal share of Spec.Aggregators
// when that is set (at least 1).
func switchMLWindow(t *Testbed) int {
	if t.Spec.Window > 0 {
		return t.Spec.Window
	}
	win := t.PipeSlots()
	if t.Spec.Aggregators > 0 {
		if per := t.Spec.Aggregators / (2 * len(t.Spec.Jobs)); per < win {
			win = max(per, 1)
		}
	}
	return win
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
