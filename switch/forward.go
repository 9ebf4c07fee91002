package sw

import "github.com/inabox/inabox/rdma"

// forwardPlain sets the verdict of plain traffic (non-INA frames, and PS
// packets that carry no result): l2_fwd, then ipv4_lpm, then the default.
func (s *Switch) forwardPlain(f *Frame, m *pmeta) {
	d := f.Data
	m.out.act, m.out.reason = ActDrop, ReasonNoRoute
	if len(d) < rdma.EthLen {
		return
	}
	if len(s.t.l2) > 0 {
		if p, ok := s.t.l2[rdma.Ethernet(d).Dst()]; ok {
			m.out.act, m.out.port, m.out.reason = ActForward, p, ReasonForward
			return
		}
	}
	if len(d) < rdma.EthLen+rdma.IPv4Len || rdma.Ethernet(d).EtherType() != rdma.EtherTypeIPv4 {
		return
	}
	if ip := rdma.RoCE(d).IPv4(); ip.Version() == 4 {
		dst := ip.Dst()
		for _, r := range s.t.routes {
			if r.prefix.Contains(dst) {
				m.out.act, m.out.port, m.out.reason = ActForward, r.port, ReasonForward
				return
			}
		}
		if s.t.l2Def >= 0 {
			m.out.act, m.out.port, m.out.reason = ActForward, s.t.l2Def, ReasonForward
		}
	}
}
