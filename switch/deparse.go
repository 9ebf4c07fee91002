package sw

import (
	"github.com/inabox/inabox/rdma"
	"github.com/inabox/inabox/switch/inahdr"
)

// deparse writes m's verdict into f: the INA header changes, the IPv4
// checksum and ICRC of a unicast frame, and the action.
func (s *Switch) deparse(f *Frame, m *pmeta) {
	v := &m.out
	f.Reason = v.reason
	f.Passes = 1
	f.Len = 0
	if m.agg.op != opNone {
		f.Passes = m.pkt.passes
	}
	s.stats.ByReason[v.reason]++
	switch {
	case v.act == ActDrop:
		f.Action = ActDrop
		if f.InPort >= 0 && f.InPort < len(s.ports) {
			s.ports[f.InPort].Drops++
		}
		return
	case v.reason == ReasonForward: // by the forwarding tables: untouched
		f.Action, f.OutPort = ActForward, v.port
		s.countTx(v.port, len(f.Data))
		return
	}
	h := m.pkt.hdr
	f.Sealed = false // rewritten below: sealed again where its ICRC is
	if v.flags != 0 {
		h.AddFlags(v.flags)
	}
	if c := v.carry; c.tag != 0 {
		h.SetBitmap(c.bitmap)
		h.SetExponent(c.exp)
		h.SetJob(c.tag.Job())
		h.SetAllReduce(c.tag.AllReduce())
		h.SetChunk(c.tag.Chunk())
		if c.ovf {
			h.AddFlags(inahdr.FlagOverflow)
		}
	}
	if m.agg.op != opNone {
		h.SetSlot(uint16(m.agg.head))
	}
	if v.trim {
		f.Data = trimFrame(f.Data, m.pkt.ina)
		f.Len = len(f.Data)
	}
	switch v.act {
	case ActForward:
		port := v.port
		if v.toSender {
			port = f.InPort
			if rw := s.rewrite(m.from.rid); rw != nil {
				applyRewrite(f.Data, rw)
			}
		} else if port < 0 { // a preempted partial sum whose job is gone
			f.Action = ActDrop
			return
		}
		f.Action, f.OutPort = ActForward, port
		s.seal(f)
		s.countTx(port, len(f.Data))
	case ActForwardMulticast:
		f.Action, f.OutPort, f.Group = ActForwardMulticast, v.port, m.from.job.Group
		s.seal(f)
		s.countTx(v.port, len(f.Data))
	case ActMulticast:
		f.Action, f.Group = ActMulticast, m.from.job.Group
	}
}

// seal writes the ICRC of a rewritten frame, or leaves it to the caller
// (Frame.DeferICRC).
func (s *Switch) seal(f *Frame) {
	if f.Deferred = f.DeferICRC; !f.Deferred {
		f.Sealed = rdma.SetICRC(f.Data) == nil
	}
}

func (s *Switch) countTx(p, n int) {
	if p >= 0 && p < len(s.ports) {
		s.ports[p].TxPackets++
		s.ports[p].TxBytes += uint64(n)
	}
}

// trimFrame cuts a RoCEv2 frame after the INA header at offset ina: Count
// becomes 0, the pad 0, and the IPv4 total length, UDP length and IPv4
// checksum are fixed. The caller recomputes the ICRC.
func trimFrame(d []byte, ina int) []byte {
	n := ina + inahdr.Len + rdma.ICRCLen
	if n > len(d) {
		return d
	}
	d = d[:n]
	inahdr.Header(d[ina:]).SetCount(0)
	r := rdma.RoCE(d)
	r.BTH().SetPadCount(0) // the INA header is 4-byte aligned
	ip := r.IPv4()
	ip.SetTotalLength(uint16(n - rdma.EthLen))
	r.UDP().SetLength(uint16(n - rdma.EthLen - rdma.IPv4Len))
	ip.UpdateChecksum()
	return d
}

// applyRewrite applies an egress rewrite to a RoCEv2 frame: MAC addresses,
// IPv4 addresses (if set), destination QP, IPv4 checksum.
func applyRewrite(d []byte, rw *Rewrite) {
	if len(d) < minRoCE {
		return
	}
	r := rdma.RoCE(d)
	eth, ip := r.Ethernet(), r.IPv4()
	eth.SetDst(rw.DstMAC)
	eth.SetSrc(rw.SrcMAC)
	if rw.SrcIP.Is4() {
		ip.SetSrc(rw.SrcIP)
	}
	if rw.DstIP.Is4() {
		ip.SetDst(rw.DstIP)
	}
	r.BTH().SetDestQP(rw.DstQP)
	ip.UpdateChecksum()
}
