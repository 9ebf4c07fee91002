package sw

import (
	"github.com/inabox/inabox/emu"
	"github.com/inabox/inabox/rdma"
	"github.com/inabox/inabox/switch/inahdr"
)

// FreeINANode is a switch node with FreeINA's control plane: it handles
// ALLOC/FREE control frames addressed to the switch (destination QP
// FreeINAConfig.CtlQPN), answers ALLOC with a GRANT multicast to the job's
// group and sent to its PS, expires idle leases, and on a crash loses every
// register and lease (Reset = reboot). Everything else goes through the
// wrapped Node.
type FreeINANode struct {
	*Node
	F *FreeINA

	keep  []*emu.Packet
	armed bool
	mem   []McastMember
}

const leaseTimerKey = 2

var (
	_ emu.Node     = (*FreeINANode)(nil)
	_ emu.Resetter = (*FreeINANode)(nil)
)

// NewFreeINANode wraps n with the control plane of f.
func NewFreeINANode(n *Node, f *FreeINA) *FreeINANode { return &FreeINANode{Node: n, F: f} }

// Reset implements emu.Resetter: a reboot loses leases and registers.
func (n *FreeINANode) Reset() {
	n.Node.Reset()
	n.F.Reboot()
	n.armed = false
}

// Timer implements emu.Node.
func (n *FreeINANode) Timer(env *emu.Env, key uint64) {
	if key != leaseTimerKey {
		n.Node.Timer(env, key)
		return
	}
	n.armed = false
	n.F.Expire(env.Now())
	n.arm(env)
}

func (n *FreeINANode) arm(env *emu.Env) {
	if n.armed || len(n.F.Leases()) == 0 {
		return
	}
	env.SetTimer(env.Now()+n.F.cfg.LeaseIdle/2, leaseTimerKey)
	n.armed = true
}

// ctlHeader returns the INA header of a control frame for the switch, or nil.
func (n *FreeINANode) ctlHeader(b []byte) inahdr.Header {
	if len(b) < minRoCE+inahdr.Len+rdma.ICRCLen || b[12] != 0x08 || b[13] != 0 || b[offIP+9] != 17 ||
		b[offUDP+2] != 0x12 || b[offUDP+3] != 0xB7 {
		return nil
	}
	op := b[offBTH]
	if op != 0x04 && op != 0x24 {
		return nil
	}
	if rdma.BTH(b[offBTH:]).DestQP() != n.F.cfg.CtlQPN {
		return nil
	}
	h := inahdr.Header(b[offBTH+rdma.BTHLen:])
	if h[0] != inahdr.Version || h.Flags()&FlagCtl == 0 {
		return nil
	}
	return h
}

// Receive implements emu.Node.
func (n *FreeINANode) Receive(env *emu.Env, port int, pkts []*emu.Packet) {
	n.F.SetNow(env.Now())
	n.keep = n.keep[:0]
	for _, p := range pkts {
		h := n.ctlHeader(p.Bytes())
		if h == nil {
			n.keep = append(n.keep, p)
			continue
		}
		if !rdma.CheckICRC(p.Bytes()) {
			n.F.s.mu.Lock()
			n.F.stats.CtlBad++
			n.F.s.mu.Unlock()
			env.Free(p)
			continue
		}
		switch h.Worker() {
		case CtlAlloc:
			var l Lease
			if h.Exponent() == CtlExact {
				l = n.F.AllocExact(env.Now(), h.Job(), h.AllReduce(), h.Bitmap(), int(h.Slot()))
			} else {
				l = n.F.Alloc(env.Now(), h.Job(), h.AllReduce(), h.Bitmap(), int(h.Slot()))
			}
			n.grant(env, l)
			n.arm(env)
		case CtlFree:
			n.F.Free(h.Job(), h.AllReduce())
		}
		env.Free(p)
	}
	if len(n.keep) > 0 {
		n.Node.Receive(env, port, n.keep)
	}
	clear(n.keep)
}

// grant sends GRANT(l) to the job's group and its PS.
func (n *FreeINANode) grant(env *emu.Env, l Lease) {
	n.F.s.mu.Lock()
	fj, ok := n.F.jobs[l.Job]
	j := n.F.s.jobByID(l.Job)
	n.F.s.mu.Unlock()
	if !ok || j == nil {
		return
	}
	var hb [inahdr.Len]byte
	h := inahdr.Header(hb[:])
	h.Encode(inahdr.Meta{Flags: FlagCtl | inahdr.FlagBypass, Job: l.Job, AllReduce: l.AllReduce,
		Chunk: uint32(l.Base), Worker: CtlGrant, Slot: uint16(l.Slots), Bitmap: l.Chunks})
	fh := rdma.FrameHeader{Src: n.F.cfg.Addr, Dst: n.F.cfg.Addr, Opcode: rdma.OpSendOnly, DestQP: 2,
		SrcPort: rdma.SourcePort(n.F.cfg.CtlQPN)}
	proto := env.NewPacket()
	proto.SetLen(fh.Len(inahdr.Len))
	if _, err := fh.Encode(proto.Bytes(), hb[:]); err != nil {
		env.Free(proto)
		return
	}
	n.mem = n.S.AppendMembers(n.mem[:0], j.Group)
	n.mem = append(n.mem, McastMember{RID: fj.PSRID, Port: fj.PSPort})
	for _, m := range n.mem {
		c := env.Clone(proto)
		n.S.EgressUC(c.Bytes(), m)
		env.Send(m.Port, c)
	}
	env.Free(proto)
}
