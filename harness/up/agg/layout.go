package agg

import (
	sw "inabox/switch"

	"inabox/harness/up/swctl"
)

// Layout is how a job is wired on the switch: worker w on switch port w,
// the PS on port Workers.
type Layout struct {
	Job       uint16
	Workers   int
	PerPacket int
	Window    int
	Policy    int // sw.PolicyStatic, ...
	// Slots is the switch memory (sw.Config.Slots); 0 means sw.DefaultSlots.
	Slots int
}

// PSPort returns the switch port of the PS.
func (l Layout) PSPort() int { return l.Workers }

// Ports returns the number of switch ports used.
func (l Layout) Ports() int { return l.Workers + 1 }

// Stride returns the slots of one aggregator: passes of a full chunk.
func (l Layout) Stride() int {
	return (l.PerPacket + sw.DefaultValuesPerPass - 1) / sw.DefaultValuesPerPass
}

// SwitchConfig returns the control-plane entries for the job: one pool over
// the whole memory, the job (group = job id), one ina_worker entry per
// worker and for the PS, an egress rewrite per worker and the multicast group.
func (l Layout) SwitchConfig() swctl.Config {
	slots := l.Slots
	if slots == 0 {
		slots = sw.DefaultSlots
	}
	stride := l.Stride()
	slots -= slots % stride
	c := swctl.Config{Pools: []swctl.Pool{{ID: 1, Base: 0, Slots: slots, Stride: stride}}}
	mask := uint32(1)<<l.Workers - 1
	if l.Workers == 32 {
		mask = 0xFFFFFFFF
	}
	c.Jobs = []sw.JobSpec{{ID: l.Job, Mask: mask, Group: l.Job, PSPort: l.PSPort(), PolicyID: l.Policy, PoolID: 1}}
	g := swctl.Group{ID: l.Job}
	for w := 0; w < l.Workers; w++ {
		rid := l.Job*100 + uint16(w)
		c.Workers = append(c.Workers, sw.WorkerEntry{Port: w, QP: QP(l.Job, uint8(w)), Job: l.Job, Worker: uint8(w), RID: rid})
		c.Rewrites = append(c.Rewrites, swctl.Rewrite{RID: rid, SrcMAC: swctl.FormatMAC(MAC(SwitchID)), DstMAC: swctl.FormatMAC(MAC(uint8(w))),
			SrcIP: IP(SwitchID).String(), DstIP: IP(uint8(w)).String(), DstQP: QP(l.Job, uint8(w))})
		g.Members = append(g.Members, sw.McastMember{RID: rid, Port: w})
	}
	c.Workers = append(c.Workers, sw.WorkerEntry{Port: l.PSPort(), QP: QP(l.Job, PSID), Job: l.Job, PS: true})
	c.Groups = []swctl.Group{g}
	return c
}

// Aggregators returns how many aggregators the job's pool has.
func (l Layout) Aggregators() int {
	slots := l.Slots
	if slots == 0 {
		slots = sw.DefaultSlots
	}
	return slots / l.Stride()
}
