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
// Pass k's lanes are values [kV, (k+1)V) at registers (head+k)V + lane, so
// the packet's values and the registers of all its passes are two runs of
// the same length, and one lane kernel takes them all; the flag is read
// and written as the passes would (opAdd and opAddRead: set by any pass
// that saturated, then read by the last).
func (s *Switch) valueStages(m *pmeta) {
	op, head, passes, n := m.agg.op, m.agg.head, m.pkt.passes, m.pkt.count
	s.stats.Passes += uint64(passes)
	s.stats.Recirculations += uint64(passes - 1)
	s.stats.Values += uint64(n)
	if passes <= 0 {
		return
	}
	V := s.cfg.ValuesPerPass
	reg := s.r.values[head*V : head*V+n]
	pkt := m.pkt.hdr[inahdr.Len : inahdr.Len+4*n]
	a := m.agg.regs
	j := m.from.job
	switch op {
	case opWrite:
		writeBlock(reg, pkt)
		a.ovf = 0
		j.stats.ValuesAdded += uint64(n)
		return
	case opAdd:
		if wholeWide(len(reg)) { // addBlock, without its call
			if addWrapWide(reg, pkt) {
				saturate(reg, pkt)
				a.ovf = 1
			}
		} else if addBlock(reg, pkt) {
			a.ovf = 1
		}
		j.stats.ValuesAdded += uint64(n)
	case opAddRead:
		if addReadBlock(reg, pkt) {
			a.ovf = 1
		}
		j.stats.ValuesAdded += uint64(n)
	case opRead:
		readBlock(reg, pkt)
	case opSwap:
		swapBlock(reg, pkt)
		if a.ovf != 0 {
			m.out.carry.ovf = true
		}
		a.ovf = 0
		return
	}
	if a.ovf != 0 {
		m.out.carry.ovf = true
		if m.out.reason == ReasonResult {
			j.stats.Overflows++
		}
	}
}
