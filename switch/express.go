package sw

import (
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
	r := rdma.RoCE(d)
	ip, udp, bth := r.IPv4(), r.UDP(), r.BTH()
	// Span: Ethernet, IPv4 without options, UDP to the RoCEv2 port, the
	// UDP length within the frame; Payload: the opcode and pad.
	end := rdma.EthLen + rdma.IPv4Len + int(udp.Length())
	if r.Ethernet().EtherType() != rdma.EtherTypeIPv4 || ip[0] != 0x45 || // version 4, IHL 5
		ip.Protocol() != rdma.IPProtoUDP || udp.DstPort() != rdma.UDPPort || end > len(d) {
		return false
	}
	op := bth.Opcode()
	if op != rdma.OpSendOnly && op != rdma.OpUCSendOnly || bth.DestQP() != c.qp {
		return false
	}
	limit := end - rdma.ICRCLen - bth.PadCount()
	if limit-ina < inahdr.Len {
		return false
	}
	h := inahdr.Header(d[ina:limit])
	we := &c.e
	n := h.Count()
	// Validate, and classify's checks of a worker's entry.
	if h.Version() != inahdr.Version || h.Flags() != 0 || we.PS || h.Job() != we.Job || h.Worker() != we.Worker ||
		h.Bitmap() != 1<<we.Worker || n == 0 || n > inahdr.MaxValues || len(h) < inahdr.Len+4*n || we.Job == 0 {
		return false
	}
	j := s.jobByID(we.Job)
	if j == nil || j.Mask&(1<<we.Worker) == 0 {
		return false
	}
	ar := h.AllReduce()
	if j.behind(ar) { // stale: parse and classify give the reason
		return false
	}
	var passes int
	if s.passShift >= 0 {
		passes = (n + s.cfg.ValuesPerPass - 1) >> s.passShift
	} else {
		passes = (n + s.cfg.ValuesPerPass - 1) / s.cfg.ValuesPerPass
	}
	if passes > s.cfg.MaxPasses || !s.sourceOK(port, d) ||
		int(ip.TotalLength()) != end-rdma.EthLen || // CheckSealedSpan's IPv4 length, then its ICRC
		!f.Sealed && !r.CheckSealedSpan(end, false) {
		return false
	}
	// Committed: the effects of parse and classify.
	ps := &s.ports[port]
	ps.RxPackets++
	ps.RxBytes += uint64(len(d))
	s.stats.INAPackets++
	j.stale(ar)
	j.stats.Packets++
	*m = pmeta{}
	m.pkt.hdr, m.pkt.ina, m.pkt.count, m.pkt.passes = h, ina, n, passes
	m.pkt.uc, m.pkt.rc = op == rdma.OpUCSendOnly, op == rdma.OpSendOnly
	m.from.job, m.from.tag, m.from.worker, m.from.rid = j, MakeTag(we.Job, ar, h.Chunk()), we.Worker, we.RID
	return true
}
