package testbed

import (
	"fmt"
	"time"

	"github.com/inabox/inabox/emu"
	"github.com/inabox/inabox/host"
	"github.com/inabox/inabox/host/baseline"
	sw "github.com/inabox/inabox/switch"
)

// What the baselines (host/baseline) share: one parameter server on port
// 0, the switch a plain L2 switch for the no-INA ones (none, PS-only) and
// one of the switch's built-in slot stages for the INA ones (policy_*.go),
// no control plane; a switch crash + restart reboots the data plane
// (sw.Node.Reset: every register lost, the tables kept as the controller
// installed them).

type baselinePolicy struct {
	name string
	// program installs job j's INA entries (nil: no INA, plain L2).
	program func(t *Testbed, j int, members []sw.McastMember) error
	// slots is the switch's size (0: sw.DefaultSlots) and setup runs
	// before the jobs are programmed (pools).
	slots func(t *Testbed) (int, error)
	setup func(t *Testbed) error
	// worker makes worker rank of job.
	worker func(t *Testbed, j, r int, ts []host.Tensor) (Worker, error)
	// ps makes PS i (nil: the ATP/ESA PS, idle for the others).
	ps func(t *Testbed, i int) (emu.Node, error)
	// occupancy reports the memory held (nil: none).
	occupancy func(t *Testbed) []Occupied
	// reservedIsBusy marks a policy whose jobs reserve an aggregator
	// exactly while it is busy (claimed, complete or held for the PS's
	// ACK): ATP's and ESA's shared pool, which the switch integrates.
	reservedIsBusy bool
	// control makes the switch's control plane (nil: none).
	control func(t *Testbed, s *sw.Switch) (sw.ControlPlane, error)

	atp []*baseline.PS      // by PS index
	sml *sw.SwitchMLControl // switchml's controller
}

func (p *baselinePolicy) Name() string { return p.name }

func (p *baselinePolicy) Switch(t *Testbed) (emu.Node, error) {
	slots := sw.DefaultSlots
	if p.slots != nil {
		var err error
		if slots, err = p.slots(t); err != nil {
			return nil, err
		}
	}
	s, nc, err := t.newSwitch(slots)
	if err != nil {
		return nil, err
	}
	if p.control != nil {
		if nc.Control, err = p.control(t, s); err != nil {
			return nil, err
		}
		nc.CtlQPN, nc.Addr = SwitchCtlQPN, SwitchAddr
	}
	node := sw.NewTimedNode(s, nc)
	if p.setup != nil {
		if err := p.setup(t); err != nil {
			return nil, err
		}
	}
	if p.program == nil {
		return node, nil
	}
	for j, ws := range t.Workers {
		job := JobID(j)
		var members []sw.McastMember
		for _, w := range ws {
			rid, wa := WorkerRID(job, w.Rank), WorkerAddr(job, w.Rank)
			if err := s.AddWorker(sw.WorkerEntry{Port: w.Port, QP: PSQPN(job, w.Rank), Job: job, Worker: uint8(w.Rank), RID: rid}); err != nil {
				return nil, err
			}
			s.SetRewrite(rid, sw.Rewrite{SrcMAC: SwitchAddr.MAC, DstMAC: wa.MAC, SrcIP: SwitchAddr.IP, DstIP: wa.IP, DstQP: WorkerUCQPN(job, w.Rank)})
			members = append(members, sw.McastMember{RID: rid, Port: w.Port})
		}
		if err := s.AddMcastGroup(job, members...); err != nil {
			return nil, err
		}
		if err := p.program(t, j, members); err != nil {
			return nil, err
		}
	}
	return node, nil
}

func (p *baselinePolicy) PS(t *Testbed, i int) (emu.Node, error) {
	if p.ps != nil {
		return p.ps(t, i)
	}
	var jobs []baseline.PSJob
	for _, j := range t.jobsOf(i) {
		jobs = append(jobs, baseline.PSJob{Job: JobID(j), Workers: t.Spec.Jobs[j].Workers, AckQPN: PSAckQPN(JobID(j))})
	}
	ps := baseline.NewPS(PSAddr(i), SwitchAddr, jobs...)
	p.atp = append(p.atp, ps)
	return ps, nil
}

func (p *baselinePolicy) Worker(t *Testbed, j, r int, ts []host.Tensor) (Worker, error) {
	return p.worker(t, j, r, ts)
}

func (p *baselinePolicy) Occupancy(t *Testbed) []Occupied {
	if p.occupancy == nil {
		return nil
	}
	return p.occupancy(t)
}

// reservedSlotTime is job's reserved slot-time up to now, integrated by the
// switch, where the policy's reserved memory is its busy memory.
func (p *baselinePolicy) reservedSlotTime(t *Testbed, job int) (time.Duration, bool) {
	if !p.reservedIsBusy {
		return 0, false
	}
	_, busy := t.Switch.JobSlotTime(JobID(job), t.Net.Now())
	return busy, true
}

func (p *baselinePolicy) Counters(t *Testbed, job int) Counters {
	c := t.switchJobCounters(job)
	tot := t.Totals(job)
	c.Retransmissions = int64(tot.Retransmits + tot.PSResends)
	return c
}

func (p *baselinePolicy) Check(t *Testbed) error { return nil }

// lostState says why a baseline's worker or PS that lost its state cannot
// rejoin the running job.
func (p *baselinePolicy) lostState(role string) string {
	switch {
	case role == "ps" && (p.name == "switchml" || p.name == "none"):
		return "" // the PS idles: nothing lost
	case role == "ps" && p.name == "ps":
		return "the PS-only server's RC connections and open chunks are gone; restart the jobs from a checkpoint"
	case role == "ps":
		return p.name + " keeps the state of every open chunk only in its parameter server; restart the jobs from a checkpoint"
	case p.name == "none":
		return "a ring worker's RC connections and its neighbours' partial sums are gone; restart the job from a checkpoint"
	case p.name == "ps":
		return "a PS-only worker's RC connection to the PS is gone and the PS keeps no results; restart the job from a checkpoint"
	case p.name == "switchml":
		return "SwitchML keeps results only in the switch's shadow slots, which the other workers reuse; restart the job from a checkpoint"
	}
	return p.name + " cannot re-admit a worker mid-job; restart the job from a checkpoint"
}

// Failed: the RC queue pairs of the no-INA baselines.
func (p *baselinePolicy) Failed(t *Testbed) error {
	if p.sml != nil && p.sml.Err() != nil {
		return fmt.Errorf("baseline %s: controller: %w", p.name, p.sml.Err())
	}
	for _, ps := range t.PSs {
		if f, ok := ps.Node.(interface{ Err() error }); ok {
			if err := f.Err(); err != nil {
				return fmt.Errorf("baseline %s: %w", p.name, err)
			}
		}
	}
	for _, ws := range t.Workers {
		for _, w := range ws {
			if f, ok := w.Endpoint.(interface{ Err() error }); ok {
				if err := f.Err(); err != nil {
					return fmt.Errorf("baseline %s: %w", p.name, err)
				}
			}
		}
	}
	return nil
}

// ATPPS returns the ATP/ESA parameter server of job j in a baseline
// testbed, or nil.
func (t *Testbed) ATPPS(j int) *baseline.PS {
	if p, ok := t.policy.(*baselinePolicy); ok && t.PSOf(j) < len(p.atp) {
		return p.atp[t.PSOf(j)]
	}
	return nil
}

// BusySlots returns the switch slots not free (claimed, complete or held).
// After an ATP/ESA run they are the aggregators leaked by loss or a
// reboot: a partial aggregate whose missing contribution went to the PS
// instead, or a stale retransmission's claim; the switch releases only
// held/complete aggregators on the PS's ACK, so these stay until a
// control-plane ResetSlots (later chunks that hash onto them collide and
// take the PS path, still exactly).
func (t *Testbed) BusySlots() int {
	return t.Switch.Config().Slots - t.Switch.Stats().SlotsFree
}

// Timeline is worker rank of job j's timeline: JobSpec.Timeline's, or one
// bucket per iteration after Compute, from Arrival.
func (t *Testbed) Timeline(j, rank int) host.Timeline {
	js := t.Spec.Jobs[j]
	if js.Timeline != nil {
		return js.Timeline(rank)
	}
	return host.Timeline{Start: js.Arrival, Forward: js.Compute}
}

// quant is the quantizer template for job j.
func (t *Testbed) quant(j int) host.Quantizer {
	q := t.Spec.Quant
	q.Workers = t.Spec.Jobs[j].Workers
	return q
}

// rcConfig is worker rank of job j's RC client configuration.
func (t *Testbed) rcConfig(j, r int) baseline.RCConfig {
	job := JobID(j)
	return baseline.RCConfig{Job: job, Rank: r, Workers: t.Spec.Jobs[j].Workers, Values: t.Spec.ValuesPerPacket,
		Quant: t.quant(j), Addr: WorkerAddr(job, r), QP: t.rcQP(), Timeline: t.Timeline(j, r)}
}
