package sw

import "github.com/inabox/inabox/switch/inahdr"

// FreeINA's slot stage (docs/freeina.md §3, §11). Workers send every
// contribution to the parameter server; the switch sits on the path.
//
// A contribution that arrives as an RC SEND Only (the trim path) keeps its
// RC connection whole, so the PS sees every PSN:
//
//   - a new contribution is added into the leased aggregator and goes on to
//     the PS trimmed (same RC headers and PSN, payload = the INA header with
//     Count 0 and FlagCtl: "absorbed by the switch");
//   - the completing one goes to the PS with the full sum (FlagResult) and
//     is multicast to the job's group as UC SEND Only frames (EgressUC),
//     PSN = chunk & 0xFFFFFF;
//   - a retransmission of a counted contribution goes on trimmed, or, if
//     the aggregator holds that chunk's completed result, with the result.
//
// A contribution that arrives as a UC SEND Only (the hosts' "uc" path) is
// a best-effort datagram with no PSN to keep: what is absorbed is dropped
// (so is a retransmission of a counted, incomplete contribution), the
// completing one is multicast to the group only, and a retransmission that
// finds its chunk complete gets the result back.
//
// On either path a contribution without an aggregator (no lease, or the
// aggregator belongs to a newer chunk or another job) goes raw to the PS,
// marked FlagCollision, which finishes the chunk.

// Name implements SlotStage.
func (f *FreeINA) Name() string { return "freeina" }

// Locate implements SlotStage: chunk c of an all-reduce holding a lease
// maps to aggregator c mod the lease's size; without a lease ok is false.
func (f *FreeINA) Locate(j *Job, tag Tag) (int, bool) {
	l := f.lease(tag)
	if l == nil || l.Slots == 0 {
		return 0, false
	}
	l.LastUse = max(f.now, f.s.now) // the batch's time (SetNow: callers without a Node)
	return l.Base + int(tag.Chunk()%uint32(l.Slots))*f.pool.Stride, true
}

func (f *FreeINA) contribute(c contribution) {
	m := c.m
	uc := m.pkt.uc
	if l := f.lease(m.from.tag); l != nil && m.from.tag.Chunk() >= l.Chunks {
		// Beyond the all-reduce: it would alias a real chunk's aggregator.
		m.from.job.stats.OutOfRange++
		if m.pkt.rc { // the PS must still see the PSN
			c.collide()
		} else {
			c.drop()
		}
		m.out.reason = ReasonOutOfRange
		return
	}
	if m.pkt.hdr.Has(inahdr.FlagOverflow) || !c.locate() {
		c.collide()
		return
	}
	occ := c.occupant()
	switch {
	case occ.Tag == m.from.tag && occ.State == StateClaimed:
		if c.counted() {
			c.duplicate()
			absorbed(c, uc)
			return
		}
		c.add()
	case occ.Tag == m.from.tag: // complete: the retransmission carries the result
		c.resend()
		if uc {
			c.toSender()
		} else {
			c.toPS()
		}
		return
	case occ.State == StateFree:
		c.claim(opWrite)
	case supersedes(m.from.tag, occ.Tag):
		// SwitchML-style reuse. If the old chunk was not complete, its
		// missing contributions now go raw to the PS, which finishes it
		// (pull); nothing is counted twice.
		c.claim(opWrite)
	default:
		c.collide()
		return
	}
	switch {
	case !c.complete(StateComplete):
		c.absorb()
		absorbed(c, uc)
	case uc: // the workers only; the PS never sees the chunk
		c.toGroup()
	default:
		c.toPSAndGroup()
	}
}

// absorbed sends on a contribution the switch has counted: to the PS
// trimmed to its INA header (FlagCtl), or, on the UC path, nowhere.
func absorbed(c contribution, uc bool) {
	if uc {
		c.drop()
		return
	}
	c.toPS()
	c.m.out.trim, c.m.out.flags = true, inahdr.FlagCtl
}

// supersedes reports whether a contribution to tag may take an aggregator
// owned by own: own is an older chunk of the same all-reduce, or a chunk of
// another all-reduce of the same job.
func supersedes(tag, own Tag) bool {
	return own.Job() == tag.Job() && (own.AllReduce() != tag.AllReduce() || own.Chunk() < tag.Chunk())
}
