package sw

import "net/netip"

// forwardPlain sets the verdict of plain traffic (non-INA frames, and PS
// packets that carry no result): l2_fwd, then ipv4_lpm, then the default.
func (s *Switch) forwardPlain(f *Frame, m *pmeta) {
	d := f.Data
	m.out.act, m.out.reason = ActDrop, ReasonNoRoute
	if len(d) < 14 {
		return
	}
	if len(s.t.l2) > 0 {
		var mac [6]byte
		copy(mac[:], d[:6])
		if p, ok := s.t.l2[mac]; ok {
			m.out.act, m.out.port, m.out.reason = ActForward, p, ReasonForward
			return
		}
	}
	if len(d) >= offUDP && d[12] == 0x08 && d[13] == 0 && d[offIP]>>4 == 4 {
		dst := netip.AddrFrom4([4]byte(d[offIP+16 : offIP+20]))
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
