package sw

import "github.com/inabox/inabox/switch/inahdr"

// valueOp is what the value stages do with a packet's values at its
// aggregator.
type valueOp uint8

const (
	opNone    valueOp = iota
	opWrite           // first contribution: registers = packet
	opAdd             // registers += packet
	opAddRead         // completing contribution: registers += packet, packet = registers
	opRead            // resend: packet = registers
	opSwap            // preemption: registers = packet, packet = old registers
)

// valueStages runs the value lanes for each pass of the packet: pass k
// touches slot head+k once per lane, and the overflow flag at the head.
func (s *Switch) valueStages(m *pmeta) {
	V := s.cfg.ValuesPerPass
	vals := m.pkt.hdr[inahdr.Len:]
	op, head, passes := m.agg.op, m.agg.head, m.pkt.passes
	var ovf uint8
	for k := 0; k < passes; k++ {
		lo := k * V
		n := min(m.pkt.count-lo, V)
		slot := head + k
		reg := s.r.values[slot*V : slot*V+n]
		pkt := vals[4*lo : 4*(lo+n)]
		var o bool
		switch op {
		case opWrite:
			writeBlock(reg, pkt)
		case opAdd:
			o = addBlock(reg, pkt)
		case opAddRead:
			o = addReadBlock(reg, pkt)
		case opRead:
			readBlock(reg, pkt)
		case opSwap:
			swapBlock(reg, pkt)
		}
		// ovf register at the head: one RMW per pass.
		switch op {
		case opWrite:
			if k == 0 {
				s.r.ovf[head] = 0
			}
		case opSwap:
			if k == 0 {
				ovf = s.r.ovf[head]
				s.r.ovf[head] = 0
			}
		case opAdd, opAddRead:
			if o {
				s.r.ovf[head] = 1
			}
			if k == passes-1 {
				ovf = s.r.ovf[head]
			}
		case opRead:
			ovf = s.r.ovf[head]
		}
	}
	if ovf != 0 {
		m.out.carry.ovf = true
	}
	s.stats.Passes += uint64(passes)
	s.stats.Recirculations += uint64(passes - 1)
	s.stats.Values += uint64(m.pkt.count)
	j := m.from.job
	if op == opWrite || op == opAdd || op == opAddRead {
		j.stats.ValuesAdded += uint64(m.pkt.count)
	}
	if m.out.reason == ReasonResult && m.out.carry.ovf {
		j.stats.Overflows++
	}
}
