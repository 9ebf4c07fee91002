package sw

import "github.com/inabox/inabox/switch/inahdr"

// Verdict is a contention stage's decision for a contribution that finds
// its aggregator owned by another chunk.
type Verdict uint8

const (
	// Collide: leave the aggregator alone; the packet is marked
	// (FlagCollision) and forwarded to the job's PS (ATP fallback).
	Collide Verdict = iota
	// Reclaim: the owner is done with it; the packet claims it afresh. A
	// retransmission (FlagResend) never reclaims a held aggregator: its
	// chunk may be complete already (its own aggregator reclaimed or lost),
	// and a fresh claim would hold a partial that never completes; it
	// collides instead, and the PS answers it.
	Reclaim
	// Preempt: evict the owner's partial sum to the owner's PS (the packet
	// carries it out, FlagPartial) and claim the aggregator (ESA). Only a
	// chunk of the owner's size preempts (the sum leaves in the packet);
	// another collides.
	Preempt
	// Refuse: the contribution is older than the owner (a replay or a
	// stale retransmission): it is dropped, the aggregator left alone.
	Refuse
)

// contender is what sets the contention stages apart: who gets an
// aggregator owned by another chunk when a contribution of job j to tag
// finds it. cur.State is StateClaimed, StateComplete or StateHeld.
type contender interface {
	Contend(j *Job, tag Tag, cur Occupant) Verdict
}

// contend is the slot stage of SwitchML, ATP and ESA (Static, Hashed,
// Preemptive). The first contribution claims the aggregator, later ones
// are added and absorbed (dropped), a retransmission of a counted one is
// dropped, and the completing one carries the sum to the job's group, or
// with Job.ResultToPS to the PS, holding the aggregator until its ACK. A
// retransmission after completion gets the stored sum back; with
// Job.ResultToPS (ATP), one that finds its chunk partial forces the sum out
// to the PS. An aggregator owned by another chunk is settled by rule.
func (c contribution) contend(rule contender) {
	m, j := c.m, c.m.from.job
	if m.pkt.hdr.Has(inahdr.FlagOverflow) { // ATP: the host asks for PS aggregation
		m.out.reason = ReasonHostOverflow
		c.toPS()
		return
	}
	if !c.locate() {
		c.collide()
		return
	}
	occ := c.occupant()
	switch {
	case occ.Tag == m.from.tag && occ.State == StateClaimed && j.ResultToPS && m.pkt.hdr.Has(inahdr.FlagResend):
		if !c.counted() {
			c.add()
		}
		c.force()
		return
	case occ.Tag == m.from.tag && occ.State == StateClaimed:
		if c.counted() {
			c.duplicate()
			c.drop()
			return
		}
		c.add()
	case occ.Tag == m.from.tag: // complete or held
		if !c.counted() {
			c.duplicate()
			c.drop()
			return
		}
		c.resend()
		c.toSender()
		return
	case occ.State == StateFree:
		c.claim(opWrite)
	default:
		v := rule.Contend(j, m.from.tag, occ)
		if v == Reclaim && occ.State == StateHeld && m.pkt.hdr.Has(inahdr.FlagResend) {
			v = Collide
		}
		if v == Preempt && m.pkt.count != int(m.agg.regs.vals) {
			// The evicted sum leaves in this packet, which has room for
			// its own chunk's values only: a chunk of another size (a
			// tensor's last) collides instead.
			v = Collide
		}
		switch v {
		case Reclaim:
			c.claim(opWrite)
		case Preempt:
			c.preempt(occ)
			return
		case Refuse:
			m.out.reason = ReasonStale
			j.stats.Stale++
			c.drop()
			return
		default:
			if occ.State == StateHeld {
				j.Pool.stats.CollisionsOnHeld++
			}
			c.collide()
			return
		}
	}
	done := StateComplete
	if j.ResultToPS {
		done = StateHeld
	}
	switch {
	case !c.complete(done):
		c.absorb()
		c.drop()
	case j.ResultToPS:
		c.toPS()
	default:
		c.toGroup()
	}
}

// force (ATP, Job.ResultToPS) answers a retransmission that finds its
// chunk's aggregator still partial: the sum, with the retransmission's
// values added if they were missing, goes to the job's PS (FlagPartial, or
// FlagResult if now complete), and the aggregator is freed. The sender is
// waiting: the PS finishes the chunk from this sum and the other workers'
// PS-path retransmissions. It is ATP's own rule (in-ATP/ATP p4src,
// check_app_id_and_seq_resend: "force forward and clean").
func (c contribution) force() {
	s, m, j := c.s, c.m, c.m.from.job
	h := m.agg.head
	a := &s.r.agg[h]
	if m.agg.op == opAdd {
		m.agg.op = opAddRead
	} else {
		m.agg.op = opRead
	}
	flags := uint8(inahdr.FlagPartial)
	if a.bitmap == j.Mask {
		flags = inahdr.FlagResult
	}
	m.out = verdict{act: ActForward, port: j.PSPort, reason: ReasonForced, flags: flags,
		carry: carried{tag: m.from.tag, bitmap: a.bitmap, exp: a.exp}}
	j.stats.Forced++
	s.free(j.Pool, h)
}

// preempt evicts the occupant's partial sum to the occupant's PS (the
// packet carries it out, FlagPartial) and claims the aggregator; the value
// stages swap the packet's values for the old sum.
func (c contribution) preempt(occ Occupant) {
	m := c.m
	victim := c.s.jobByID(occ.Tag.Job())
	m.out.carry = carried{tag: occ.Tag, bitmap: occ.Bitmap, exp: m.agg.regs.exp}
	c.claim(opSwap)
	m.out.act, m.out.reason, m.out.flags = ActForward, ReasonPreempted, inahdr.FlagPartial
	m.out.port = -1 // the victim's job is gone: dropped
	if victim != nil {
		victim.stats.Preempted++
		m.out.port = victim.PSPort
	}
}
