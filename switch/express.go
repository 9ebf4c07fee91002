package sw

import (
	"encoding/binary"

	"github.com/inabox/inabox/rdma"
	"github.com/inabox/inabox/switch/inahdr"
)

// express is parse and classify in one go for the common frame: a
// worker's contribution in an RC or UC SEND Only (its INA header right
// after the BTH), from the worker whose ina_worker entry the port's cache
// holds, with no flag set and nothing wrong in it. It reads each header
// field once, at its fixed offset, and checks what parse and classify
// check, in another order: where it reports true it has left f, m and
// the switch as they would; otherwise it has changed nothing and the
// frame takes parse and classify (FuzzExpress holds the two equal).
func (s *Switch) express(f *Frame, m *pmeta) bool {
	port := f.InPort
	if port < 0 || port >= maxCachePorts || port >= len(s.ports) {
		return false
	}
	c := &s.cache[port]
	d := f.Data
	const ina = rdma.HeadersLen + rdma.BTHLen
	if !c.valid || len(d) < ina+inahdr.Len+rdma.ICRCLen {
		return false
	}
	// The fields every contribution of the port's worker has, in eight
	// little-endian words at fixed offsets, masked (expressWords).
	le := binary.LittleEndian
	if (le.Uint64(d[0:])&c.mask[0]^c.want[0])|
		(le.Uint64(d[8:])&c.mask[1]^c.want[1])|
		(le.Uint64(d[16:])&c.mask[2]^c.want[2])|
		(le.Uint64(d[24:])&c.mask[3]^c.want[3])|
		(le.Uint64(d[36:])&c.mask[4]^c.want[4])|
		(le.Uint64(d[44:])&c.mask[5]^c.want[5])|
		(le.Uint64(d[54:])&c.mask[6]^c.want[6])|
		(le.Uint64(d[66:])&c.mask[7]^c.want[7]) != 0 {
		return false
	}
	r := rdma.RoCE(d)
	ip, udp, bth := r.IPv4(), r.UDP(), r.BTH()
	// Span: the UDP length within the frame; Payload: the pad.
	end := rdma.EthLen + rdma.IPv4Len + int(udp.Length())
	if end > len(d) {
		return false
	}
	op := bth.Opcode()
	limit := end - rdma.ICRCLen - bth.PadCount()
	if limit-ina < inahdr.Len {
		return false
	}
	h := inahdr.Header(d[ina:limit])
	we := &c.e
	n := h.Count()
	// The rest of Validate.
	if n == 0 || n > inahdr.MaxValues || len(h) < inahdr.Len+4*n {
		return false
	}
	j := c.job // the job's, with the worker in its mask
	if j == nil {
		return false
	}
	ar := h.AllReduce()
	if j.behind(ar) { // stale: parse and classify give the reason
		return false
	}
	passes := s.passesFor(n)
	if passes > s.cfg.MaxPasses || c.sources && !s.sourceOK(port, d) ||
		int(ip.TotalLength()) != end-rdma.EthLen || // CheckSealedSpan's IPv4 length, then its ICRC
		!f.Sealed && !r.CheckSealedSpan(end, false) {
		return false
	}
	// Committed: the effects of parse and classify.
	ps := &s.ports[port]
	ps.RxPackets++
	ps.RxBytes += uint64(len(d))
	s.stats.INAPackets++
	j.see(ar) // not behind (above)
	j.stats.Packets++
	*m = pmeta{}
	m.pkt.hdr, m.pkt.ina, m.pkt.count, m.pkt.passes = h, ina, n, passes
	m.pkt.uc, m.pkt.rc = op == rdma.OpUCSendOnly, op == rdma.OpSendOnly
	m.from.job, m.from.tag, m.from.worker, m.from.rid = j, MakeTag(we.Job, ar, h.Chunk()), we.Worker, we.RID
	return true
}

// expressWords returns the masks and values of express's eight words (8
// bytes from frame offsets 0, 8, 16, 24, 36, 44, 54 and 66, little-endian)
// in a contribution of worker entry e on QP qp, on a port whose security
// accepts src:
//
//	word  offset  bytes checked
//	0     0       source MAC (6–7), with one source
//	1     8       source MAC (8–11), with one source; EtherType (12–13),
//	              IPv4 version and IHL (14)
//	2     16      IPv4 protocol (23)
//	3     24      IPv4 source (26–29), with one IPv4 source
//	4     36      UDP destination port (36–37), BTH opcode but bit 5 (42:
//	              RC SEND Only 0x04 or UC SEND Only 0x24)
//	5     44      BTH destination QP (47–49)
//	6     54      INA version (54), flags (55), job (56–57)
//	7     66      INA worker (66), worker bitmap (70–73)
//
// With more than one source, sources is true and express asks sourceOK.
// An entry of the job's PS, or of job 0, matches no frame (a bit outside
// the mask).
func expressWords(qp uint32, e WorkerEntry, src []PortSource) (mask, want [8]uint64, sources bool) {
	var f, m [74]byte // the frame's expected bytes, and which bits are checked
	set := func(off int, bits byte, v ...byte) {
		for i, b := range v {
			f[off+i], m[off+i] = b&bits, bits
		}
	}
	switch {
	case len(src) == 1:
		set(6, 0xff, src[0].MAC[:]...)
		if src[0].IP.Is4() {
			ip := src[0].IP.As4()
			set(26, 0xff, ip[:]...)
		}
	case len(src) > 1:
		sources = true
	}
	set(12, 0xff, byte(rdma.EtherTypeIPv4>>8), byte(rdma.EtherTypeIPv4&0xff), 0x45)
	set(23, 0xff, rdma.IPProtoUDP)
	set(36, 0xff, byte(rdma.UDPPort>>8), byte(rdma.UDPPort&0xff))
	set(42, 0xdf, byte(rdma.OpSendOnly)) // and UC SEND Only: 0x24
	set(47, 0xff, byte(qp>>16), byte(qp>>8), byte(qp))
	set(54, 0xff, inahdr.Version, 0, byte(e.Job>>8), byte(e.Job))
	bm := uint32(1) << e.Worker
	set(66, 0xff, e.Worker)
	set(70, 0xff, byte(bm>>24), byte(bm>>16), byte(bm>>8), byte(bm))
	for k, off := range expressOffsets {
		mask[k] = binary.LittleEndian.Uint64(m[off:])
		want[k] = binary.LittleEndian.Uint64(f[off:])
	}
	if e.PS || e.Job == 0 {
		want[6] |= 1 << 63 // byte 61, unchecked
	}
	return mask, want, sources
}

// expressOffsets are the frame offsets of express's eight words.
var expressOffsets = [8]int{0, 8, 16, 24, 36, 44, 54, 66}
