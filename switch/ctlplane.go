package sw

import (
	"time"

	"github.com/inabox/inabox/emu"
	"github.com/inabox/inabox/rdma"
	"github.com/inabox/inabox/switch/inahdr"
)

// ControlPlane is a switch's control plane: the program on the switch's
// CPU that answers the control messages addressed to the switch and keeps
// the data plane's leases. A Node calls it from its own callbacks, on the
// emulator's goroutine, never concurrently; c is valid only during the
// call. FreeINAControl and DynaINAControl implement it.
type ControlPlane interface {
	// Start is called when the switch starts, and again when it restarts
	// after a crash (after Reset).
	Start(c *CtlEnv)
	// Frames is called when a batch of frames arrives, before its control
	// messages go to Control and the rest runs through the pipeline.
	Frames(c *CtlEnv)
	// Control handles one control message for the switch (its ICRC
	// checked) that arrived on port.
	Control(c *CtlEnv, port int, m inahdr.Ctl)
	// Timer reports that the control plane's timer key (CtlEnv.SetTimer)
	// expired.
	Timer(c *CtlEnv, key uint64)
	// Settle is called at the end of every node callback (Start, Receive,
	// Timer), after the data plane's outputs: what the control plane
	// decided outside the node's callbacks is sent here.
	Settle(c *CtlEnv)
	// Reset reports a reboot: whatever the control plane keeps in the
	// data plane (leases) is lost; the node has reset every register.
	// Start follows.
	Reset()
}

// CtlEnv is a control plane's view of its switch during one node
// callback: the time, timers in the control plane's own key space, and
// the control messages it sends.
type CtlEnv struct {
	n   *Node
	env *emu.Env
}

func (n *Node) ctlEnv(env *emu.Env) *CtlEnv {
	n.ctl.env = env
	return &n.ctl
}

// Now returns the current run time.
func (c *CtlEnv) Now() time.Duration { return c.env.Now() }

// SetTimer arms the control plane's timer key (any key below 1<<63; its
// keys cannot collide with the node's) to expire at run time at; arming an
// armed key replaces its expiry. A crash cancels every timer.
func (c *CtlEnv) SetTimer(at time.Duration, key uint64) { c.env.SetTimer(at, key|ctlTimer) }

// SendJob sends m from the switch, as a UC SEND Only from the switch's
// address and control QP, to every member of job m.Job's multicast group
// and to ps, each replica through its member's egress rewrite (EgressUC:
// addresses, destination QP, PSN = the header's chunk field). Nothing is
// sent if the job is not installed.
func (c *CtlEnv) SendJob(m inahdr.Ctl, ps McastMember) {
	if group, ok := c.n.s.jobGroup(m.Job); ok {
		c.n.sendGroup(c.env, group, m, &ps)
	}
}

// SendGroup sends m as SendJob does, to the members of multicast group
// group only, whether or not a job entry names it.
func (c *CtlEnv) SendGroup(group uint16, m inahdr.Ctl) { c.n.sendGroup(c.env, group, m, nil) }

func (n *Node) sendGroup(env *emu.Env, group uint16, m inahdr.Ctl, ps *McastMember) {
	var hb [inahdr.Len]byte
	m.Encode(hb[:])
	// The destination QP is the receiver's: each replica's egress rewrite
	// sets it.
	fh := rdma.FrameHeader{Src: n.cfg.Addr, Dst: n.cfg.Addr, Opcode: rdma.OpUCSendOnly, SrcPort: rdma.SourcePort(n.ctlQPN)}
	proto := env.NewPacket()
	proto.SetLen(fh.Len(inahdr.Len))
	if _, err := fh.Encode(proto.Bytes(), hb[:]); err != nil {
		env.Free(proto)
		return
	}
	proto.Sealed = true
	n.members = n.s.ctlMembers(n.members[:0], group, ps)
	for _, mm := range n.members {
		r := env.Clone(proto)
		egressUC(r, n.s.replicaFor(mm, r.Len()))
		env.Send(mm.Port, r)
	}
	env.Free(proto)
}

// ctlMembers appends to dst where the control plane's message to group
// goes (sendGroup): the group's members, then ps if given. The P4 twin
// multicasts it to the job's ps_group, which holds the same members.
func (s *Switch) ctlMembers(dst []McastMember, group uint16, ps *McastMember) []McastMember {
	dst = s.AppendMembers(dst, group)
	if ps != nil {
		dst = append(dst, *ps)
	}
	return dst
}

// ctlDoor is what a frame gets at the door of the switch's control plane
// (Switch.admitCtl).
type ctlDoor uint8

const (
	ctlNotMine   ctlDoor = iota // not a control frame for the switch: the pipeline's
	ctlAdmitted                 // decoded, from where its opcode may come from
	ctlBadICRC                  // dropped: damaged
	ctlMalformed                // dropped: does not decode (inahdr.DecodeCtl)
	ctlForeign                  // dropped: not from where its opcode may come from (ctlSenderOK)
)

// admitCtl checks frame b (sealed: its ICRC is known right), arrived on
// port, at the door of the control plane listening on QP qpn: a control
// frame for the switch (ctlHeader) is admitted, decoded, if its ICRC is
// right, it decodes and it came from where its opcode may come from;
// otherwise it is dropped, or, if it is not a control frame for the
// switch, left to the pipeline. The P4 twin makes the same decision in its
// data plane (ina_ctl, ina_member, its ICRC check; switch/p4/README.md),
// less the decoding, which its control plane does.
func (s *Switch) admitCtl(b []byte, sealed bool, port int, qpn uint32) (inahdr.Ctl, ctlDoor) {
	h := ctlHeader(b, qpn)
	if h == nil {
		return inahdr.Ctl{}, ctlNotMine
	}
	m, err := inahdr.DecodeCtl(h)
	switch {
	case !rdma.CheckSealed(b, sealed):
		return m, ctlBadICRC
	case err != nil:
		return m, ctlMalformed
	case !s.ctlSenderOK(port, m):
		return m, ctlForeign
	}
	return m, ctlAdmitted
}

// ctlHeader returns the INA header of a control frame for the switch's
// control plane on QP qpn, or nil: an IPv4 UDP frame to the RoCEv2 port,
// an RC or UC SEND Only to qpn, whose payload starts with an INA header
// carrying FlagCtl. Only these fields are checked (its ICRC is checked
// next); the frame may be shorter than its headers claim.
func ctlHeader(b []byte, qpn uint32) inahdr.Header {
	const ina = rdma.HeadersLen + rdma.BTHLen
	if len(b) < ina+inahdr.Len+rdma.ICRCLen {
		return nil
	}
	r := rdma.RoCE(b)
	if r.Ethernet().EtherType() != rdma.EtherTypeIPv4 || r.IPv4().Protocol() != rdma.IPProtoUDP ||
		r.UDP().DstPort() != rdma.UDPPort {
		return nil
	}
	bth := r.BTH()
	if op := bth.Opcode(); op != rdma.OpSendOnly && op != rdma.OpUCSendOnly || bth.DestQP() != qpn {
		return nil
	}
	h := inahdr.Header(b[ina:])
	if h.Version() != inahdr.Version || !h.Has(inahdr.FlagCtl) {
		return nil
	}
	return h
}
