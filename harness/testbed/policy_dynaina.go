package testbed

import (
	"fmt"
	"time"

	"github.com/inabox/inabox/host"
	sw "github.com/inabox/inabox/switch"
	"github.com/inabox/inabox/switch/dynaina"
)

// DynaINA (docs/dynaina.md): FreeINA's workers and PSs, unchanged, with
// the DynaINA scheduler deciding every ALLOC in the switch's control
// plane (sw.DynaINAControl). The testbed is the cluster manager: each job
// registers with the scheduler at its arrival (an Event, run by
// emu.Network.At). The PS is the job's DynaINA client: its ALLOC at an
// all-reduce's first BEGIN is the all-reduce start, its FREE the end (sent
// for every all-reduce, also one the scheduler put on the PS path:
// PSConfig.FreeEvery); the PS keeps re-sending a queued ALLOC (every
// GrantTimeout) until the scheduler answers. A lost FREE is made good by
// the job's next ALLOC (or, for a lease, by its idle expiry).

type dynainaPolicy struct {
	freeinaPolicy
	dyn *sw.DynaINAControl
	// variant changes the scheduler's configuration (an ablation).
	variant func(*dynaina.Config)
}

// dynainaVariant returns the constructor of the DynaINA variant name,
// whose scheduler configuration variant changes.
func dynainaVariant(name string, variant func(*dynaina.Config)) func() Policy {
	return func() Policy {
		p := newDynaINA().(*dynainaPolicy)
		p.name, p.variant = name, variant
		return p
	}
}

func newDynaINA() Policy {
	p := &dynainaPolicy{}
	p.name = "dynaina"
	p.control = p.newControl
	p.psHook = p.hookPS
	return p
}

// newControl makes the DynaINA control plane over the lease table and
// schedules every job's registration at its arrival.
func (p *dynainaPolicy) newControl(t *Testbed) (leaseControl, error) {
	s := &t.Spec
	sc := s.Scheduler
	if p.variant != nil {
		p.variant(&sc)
	}
	if sc.LinkBitsPerSecond == 0 {
		sc.LinkBitsPerSecond = s.LinkBitsPerSecond
	}
	if sc.ValuesPerSlot == 0 {
		sc.ValuesPerSlot = s.ValuesPerPacket
	}
	if sc.RTT == 0 {
		sc.RTT = DemandRTT(s.LinkBitsPerSecond, s.LinkDelay, t.latency(), s.ValuesPerPacket)
	}
	var err error
	if p.dyn, err = sw.NewDynaINAControl(p.fi, sc); err != nil {
		return nil, err
	}
	for j, js := range s.Jobs {
		prof := dynaina.JobProfile{ID: JobID(j), Workers: js.Workers, GradientBytes: js.GradientBytes, Compute: js.Compute}
		ars := js.AllReduces
		// An error (a bad profile) is kept for Check (p.dyn.Err).
		t.at(Event{At: js.Arrival, Node: SwitchNode, Do: func(now time.Duration) { _ = p.dyn.Register(now, prof, ars) }})
	}
	return p.dyn, nil
}

func (p *dynainaPolicy) hookPS(t *Testbed, ps *host.PS, cfg *host.PSConfig) {
	if cfg == nil {
		return
	}
	if cfg.GrantRetries == 0 {
		cfg.GrantRetries = 1 << 30
	}
	cfg.FreeEvery = true
}

// Occupancy: the aggregators each lease holds, labelled with the pool they
// lie in.
func (p *dynainaPolicy) Occupancy(t *Testbed) []Occupied {
	var out []Occupied
	pools := p.dyn.Scheduler().Pools()
	for _, l := range p.fi.Leases() {
		o := Occupied{Job: int(l.Job) - 1, Slots: l.Slots * t.Stride}
		agg := l.Base / t.Stride // the FreeINA pool starts at slot 0
		for _, pl := range pools {
			if agg >= pl.Range.Base && agg < pl.Range.End() {
				o.Pool = fmt.Sprintf("pool%d", pl.ID)
			}
		}
		out = append(out, o)
	}
	return out
}

func (p *dynainaPolicy) Check(t *Testbed) error {
	if err := p.dyn.Err(); err != nil {
		return err
	}
	if st := p.dyn.Stats(); st.Outside != 0 {
		return fmt.Errorf("dynaina: %d grants outside the job's pool", st.Outside)
	}
	return nil
}

// DynaINA returns the switch's DynaINA control plane of a dynaina
// testbed, or nil.
func (t *Testbed) DynaINA() *sw.DynaINAControl {
	if p, ok := t.policy.(*dynainaPolicy); ok {
		return p.dyn
	}
	return nil
}
