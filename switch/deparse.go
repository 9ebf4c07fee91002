package sw

import (
	"encoding/binary"

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
			if rw := s.t.rewrites[m.from.rid]; rw != nil {
				applyRewrite(f.Data, rw)
			}
		} else if port < 0 { // a preempted partial sum whose job is gone
			f.Action = ActDrop
			return
		}
		f.Action, f.OutPort = ActForward, port
		_ = rdma.SetICRC(f.Data)
		s.countTx(port, len(f.Data))
	case ActForwardMulticast:
		f.Action, f.OutPort, f.Group = ActForwardMulticast, v.port, m.from.job.Group
		_ = rdma.SetICRC(f.Data)
		s.countTx(v.port, len(f.Data))
	case ActMulticast:
		f.Action, f.Group = ActMulticast, m.from.job.Group
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
	d[offBTH+1] &^= 0x30 // pad count 0 (the INA header is 4-byte aligned)
	binary.BigEndian.PutUint16(d[offIP+2:], uint16(n-offIP))
	binary.BigEndian.PutUint16(d[offUDP+4:], uint16(n-offUDP))
	ipChecksum(d[offIP : offIP+20])
	return d
}

func applyRewrite(d []byte, rw *Rewrite) {
	if len(d) < minRoCE {
		return
	}
	copy(d[0:6], rw.DstMAC[:])
	copy(d[6:12], rw.SrcMAC[:])
	if rw.SrcIP.Is4() {
		a := rw.SrcIP.As4()
		copy(d[offIP+12:], a[:])
	}
	if rw.DstIP.Is4() {
		a := rw.DstIP.As4()
		copy(d[offIP+16:], a[:])
	}
	d[offBTH+5], d[offBTH+6], d[offBTH+7] = byte(rw.DstQP>>16), byte(rw.DstQP>>8), byte(rw.DstQP)
	ipChecksum(d[offIP : offIP+20])
}

// ipChecksum recomputes the IPv4 header checksum in place.
func ipChecksum(ip []byte) {
	ip[10], ip[11] = 0, 0
	var sum uint32
	for i := 0; i < 20; i += 2 {
		sum += uint32(ip[i])<<8 | uint32(ip[i+1])
	}
	for sum > 0xFFFF {
		sum = sum&0xFFFF + sum>>16
	}
	binary.BigEndian.PutUint16(ip[10:], ^uint16(sum))
}
