package sw

import "github.com/inabox/inabox/switch/inahdr"

// Register access of the slot stage, shared by every SlotStage. A packet
// pass reads and writes each per-aggregator array (owner, state, bitmap,
// counter, priority, exponent) at most once, at the aggregator head. The
// value arrays and the overflow flag belong to the value stages, which the
// slot stage orders through m.agg.op (a resend also reads the flag here).

// locate finds the contribution's aggregator with the job's stage and
// reports whether there is one: the packet's passes fit the pool's stride,
// the stage has memory for the chunk, and the aggregator lies in the pool.
//
// A stage whose Locate is a function of the tag, the pool's geometry and
// the job's budget alone (Job.pure) is asked once for a run of the same
// tag: the chunk's other workers find the answer in Job.located.
func (c contribution) locate() bool {
	m, j := c.m, c.m.from.job
	p := j.Pool
	if m.pkt.passes > p.Stride {
		return false
	}
	tag := m.from.tag
	var head int
	if l := &j.located; j.pure && l.tag == tag && l.base == p.Base && l.slots == p.Slots && l.stride == p.Stride {
		head = l.head
	} else {
		var ok bool
		if head, ok = j.stage.Locate(j, tag); !ok {
			return false
		}
		if j.pure {
			j.located = located{tag: tag, base: p.Base, slots: p.Slots, stride: p.Stride, head: head}
		}
	}
	if head < p.Base || head+p.Stride > p.Base+p.Slots {
		return false
	}
	m.agg.head, m.agg.regs = head, &c.s.r.agg[head]
	return true
}

// located is the last tag a pure stage located, its head, and the pool
// geometry it was located in (SetPool changes that in place; SetJob, the
// only way to change a job's budget, starts the job with none).
type located struct {
	tag                 Tag // 0 (no job's tag): none
	base, slots, stride int
	head                int
}

// occupant reads the aggregator's owner.
func (c contribution) occupant() Occupant {
	a := c.m.agg.regs
	return Occupant{Tag: a.owner, State: a.state, Priority: a.prio, Bitmap: a.bitmap}
}

// counted reports whether the aggregator holds the sender's contribution.
func (c contribution) counted() bool {
	return c.m.agg.regs.bitmap&(1<<c.m.from.worker) != 0
}

// claim makes the contribution the first of its aggregator (free,
// reclaimed, or with opSwap preempted from its occupant) and counts it in
// the pool's stats; op is what the value stages do: opWrite, or opSwap to
// carry the old values out.
func (c contribution) claim(op valueOp) {
	s, m, j := c.s, c.m, c.m.from.job
	h, a := m.agg.head, m.agg.regs
	switch {
	case op == opSwap:
		j.Pool.stats.Preemptions++
	case a.state == StateFree:
		j.Pool.stats.Claims++
	default:
		j.Pool.stats.Reclaims++
		if a.state == StateHeld {
			j.Pool.stats.ReclaimsHeld++
		}
	}
	if a.state != StateFree {
		s.setState(h, StateFree)
	}
	a.span = uint8(j.Pool.Stride)
	a.owner = m.from.tag // before the state: the slots count for the owner's job
	s.setState(h, StateClaimed)
	a.bitmap = 1 << m.from.worker
	a.count = 1
	a.prio = j.Priority
	a.exp = m.pkt.hdr.Exponent()
	a.vals = uint16(m.pkt.count)
	m.agg.op = op
}

// add counts the contribution into its claimed aggregator; the value
// stages add its values.
func (c contribution) add() {
	a, m := c.m.agg.regs, c.m
	a.bitmap |= 1 << m.from.worker
	a.count++
	if e := m.pkt.hdr.Exponent(); e > a.exp {
		a.exp = e
	}
	m.agg.op = opAdd
}

// complete reports whether the contribution completed its aggregator. If
// it did, the packet carries the sum out (FlagResult) and the aggregator
// moves to st: StateComplete, or StateHeld until the PS's ACK.
func (c contribution) complete(st SlotState) bool {
	h, a, m, j := c.m.agg.head, c.m.agg.regs, c.m, c.m.from.job
	if a.bitmap != j.Mask {
		return false
	}
	if m.agg.op == opAdd {
		m.agg.op = opAddRead
	}
	m.out.reason, m.out.flags = ReasonResult, inahdr.FlagResult
	m.out.carry = carried{tag: m.from.tag, bitmap: a.bitmap, exp: a.exp}
	j.stats.Results++
	j.Pool.stats.Completions++
	c.s.setState(h, st)
	return true
}

// resend answers a retransmission that finds its chunk complete: the value
// stages read the stored sum into the packet, which carries FlagResult.
func (c contribution) resend() {
	a, m := c.m.agg.regs, c.m
	m.agg.op = opRead
	m.out.reason, m.out.flags = ReasonResent, inahdr.FlagResult
	m.out.carry = carried{tag: m.from.tag, bitmap: a.bitmap, exp: a.exp, ovf: a.ovf != 0}
	m.from.job.stats.Resent++
}

// absorb records a contribution added but not the last.
func (c contribution) absorb() {
	c.m.out.reason = ReasonAbsorbed
	c.m.from.job.stats.Absorbed++
}

// duplicate records a retransmission of a counted contribution: nothing is
// added.
func (c contribution) duplicate() {
	c.m.out.reason = ReasonDuplicate
	c.m.from.job.stats.Duplicates++
}

// collide leaves the aggregator alone: the packet goes to the job's PS,
// marked FlagCollision, which aggregates it in software.
func (c contribution) collide() {
	m, j := c.m, c.m.from.job
	m.out = verdict{act: ActForward, port: j.PSPort, reason: ReasonCollision, flags: inahdr.FlagCollision}
	m.agg.op = opNone
	j.stats.Collisions++
	j.Pool.stats.Collisions++
}

// Destinations of a contribution.

func (c contribution) drop()     { c.m.out.act = ActDrop }
func (c contribution) toGroup()  { c.m.out.act = ActMulticast }
func (c contribution) toSender() { c.m.out.act, c.m.out.toSender = ActForward, true }
func (c contribution) toPS()     { c.m.out.act, c.m.out.port = ActForward, c.m.from.job.PSPort }

// toPSAndGroup sends the packet to the job's PS and replicates it to the
// job's group (FreeINA's completion on the trim path).
func (c contribution) toPSAndGroup() {
	c.m.out.act, c.m.out.port = ActForwardMulticast, c.m.from.job.PSPort
}

// release frees the aggregator of tag when the PS has acknowledged tag: if
// it holds tag's completed result, or, with Job.ResultToPS (ATP), whatever
// it holds of tag, a partial sum too (the PS finished the chunk without
// it). ATP's switch frees it so (in-ATP/ATP p4src, clean_app_id_and_seq);
// a partial sum left in place would never complete.
func (s *Switch) release(j *Job, tag Tag) {
	p := j.Pool
	head, ok := j.stage.Locate(j, tag)
	if !ok || head < p.Base || head >= p.Base+p.Slots {
		return
	}
	if s.r.agg[head].owner != tag {
		return
	}
	if st := s.r.agg[head].state; st == StateHeld || st == StateComplete || st == StateClaimed && j.ResultToPS {
		s.free(p, head)
	}
}

// free empties aggregator h of pool p and counts the release.
func (s *Switch) free(p *Pool, h int) {
	s.setState(h, StateFree)
	a := &s.r.agg[h]
	a.owner, a.bitmap, a.count = 0, 0, 0
	p.stats.Releases++
}
