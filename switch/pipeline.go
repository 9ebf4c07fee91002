package sw

import (
	"encoding/binary"
	"net/netip"

	"github.com/inabox/inabox/rdma"
	"github.com/inabox/inabox/switch/inahdr"
)

// Pipeline stages (run over the whole batch, one after the other):
//
//	parse     frame → headers, INA offset, value count, passes
//	classify  ina_worker / ina_job / ina_pool, or l2_fwd / ipv4_lpm
//	slotmeta  policy Locate + one RMW of each per-aggregator array
//	values    per pass: one RMW of each value lane of one slot
//	deparse   header fields, IPv4 checksum, ICRC, verdict

// Action is a frame's verdict.
type Action uint8

const (
	// ActDrop: the frame is consumed (absorbed or dropped).
	ActDrop Action = iota
	// ActForward: send the frame on OutPort.
	ActForward
	// ActMulticast: replicate the frame to every member of Group; call
	// Egress on each replica before sending it.
	ActMulticast
	// ActForwardMulticast (FreeINA): send the frame on OutPort (to the PS,
	// over its RC connection) and also replicate it to every member of
	// Group; call EgressUC on each replica (it becomes a UC SEND Only).
	ActForwardMulticast
)

// Frame is one packet handed to Process: Data and InPort are inputs, the
// rest is the verdict. Data is rewritten in place (same length).
type Frame struct {
	Data   []byte
	InPort int

	Action  Action
	OutPort int
	Group   uint16
	Reason  Reason
	// Passes is how many pipeline passes the frame used (1 + its
	// recirculations); the emulator adapter charges pipeline time for each.
	Passes int
	// Len, if not zero, is the frame's new length: a FreeINA frame trimmed
	// to its INA header (Data is then Data[:Len]).
	Len int
}

// Offsets of the fixed headers.
const (
	offIP   = 14
	offUDP  = offIP + 20
	offBTH  = offUDP + 8
	minRoCE = offBTH + rdma.BTHLen
)

// value-stage operations
const (
	opNone uint8 = iota
	opWrite
	opAdd
	opRead
	opSwap
)

// emit targets
const (
	emDrop     uint8 = iota
	emPort           // unicast to m.port, header changed
	emMcast          // multicast to job group
	emBack           // unicast back to the ingress port with egress rewrite rid
	emFwd            // non-INA forward, untouched
	emFwdMcast       // FreeINA: unicast to m.port and multicast to the job group
)

type pmeta struct {
	isINA   bool
	ina     int // offset of the INA header
	count   int
	passes  int
	job     *Job
	rid     uint16
	worker  uint8
	ps      bool
	tag     Tag
	head    int
	op      uint8
	readout bool // write the register result into the packet (completion)
	emit    uint8
	port    int
	reason  Reason
	setFl   uint8 // flags to add
	bitmap  uint32
	outTag  Tag // header tag to write (preemption)
	ovf     bool
	exp     int8
	touched bool // header or values changed: fix ICRC
	trim    bool // FreeINA: forward with the values trimmed off
}

// Process runs a batch of frames through the pipeline and sets each frame's
// verdict. It allocates nothing once the switch has seen a batch of this
// size.
func (s *Switch) Process(batch []Frame) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if cap(s.meta) < len(batch) {
		s.meta = make([]pmeta, len(batch))
	}
	meta := s.meta[:len(batch)]
	s.stats.Batches++
	s.stats.Packets += uint64(len(batch))
	for i := range batch {
		s.parse(&batch[i], &meta[i])
	}
	for i := range batch {
		s.classify(&batch[i], &meta[i])
	}
	for i := range batch {
		if m := &meta[i]; m.isINA && m.job != nil {
			s.slotMeta(&batch[i], m)
		}
	}
	for i := range batch {
		if m := &meta[i]; m.op != opNone {
			s.valueStages(&batch[i], m)
		}
	}
	for i := range batch {
		s.deparse(&batch[i], &meta[i])
	}
}

// parse fills m from f.Data.
func (s *Switch) parse(f *Frame, m *pmeta) {
	*m = pmeta{head: -1}
	d := f.Data
	if f.InPort >= 0 && f.InPort < len(s.ports) {
		ps := &s.ports[f.InPort]
		ps.RxPackets++
		ps.RxBytes += uint64(len(d))
	}
	if len(d) < minRoCE || d[12] != 0x08 || d[13] != 0x00 || d[offIP] != 0x45 || d[offIP+9] != 17 ||
		binary.BigEndian.Uint16(d[offUDP+2:]) != rdma.UDPPort {
		return
	}
	ulen := int(binary.BigEndian.Uint16(d[offUDP+4:]))
	end := offUDP + ulen
	if end > len(d) || ulen < 8+rdma.BTHLen+rdma.ICRCLen {
		return
	}
	ina := offBTH + inaExt(d[offBTH])
	if ina == offBTH-1 {
		return
	}
	pad := int(d[offBTH+1]>>4) & 3
	limit := end - rdma.ICRCLen - pad
	if ina+inahdr.Len > limit || d[ina] != inahdr.Version || d[ina+1]&inahdr.FlagBypass != 0 {
		return
	}
	m.isINA = true
	m.ina = ina
	s.stats.INAPackets++
	h := inahdr.Header(d[ina:limit])
	if h.Validate() != nil {
		m.reason = ReasonMalformed
		return
	}
	m.count = h.Count()
	m.passes = (m.count + s.cfg.ValuesPerPass - 1) / s.cfg.ValuesPerPass
	if m.passes > s.cfg.MaxPasses {
		m.reason = ReasonTooLong
	}
}

// inaExt returns the length of the extension headers between the BTH and
// the INA header for the opcodes that carry INA (RC/UC SEND/WRITE ONLY
// [with immediate]), or -1.
func inaExt(op byte) int {
	switch op {
	case 0x04, 0x24: // SEND ONLY
		return rdma.BTHLen
	case 0x05, 0x25: // SEND ONLY with immediate
		return rdma.BTHLen + rdma.ImmDtLen
	case 0x0A, 0x2A: // RDMA WRITE ONLY
		return rdma.BTHLen + rdma.RETHLen
	case 0x0B, 0x2B: // RDMA WRITE ONLY with immediate
		return rdma.BTHLen + rdma.RETHLen + rdma.ImmDtLen
	}
	return -1
}

// classify applies the INA tables or the forwarding tables.
func (s *Switch) classify(f *Frame, m *pmeta) {
	d := f.Data
	if !m.isINA {
		s.forwardPlain(f, m)
		return
	}
	if m.reason != ReasonNone { // malformed / too long
		return
	}
	qp := uint32(d[offBTH+5])<<16 | uint32(d[offBTH+6])<<8 | uint32(d[offBTH+7])
	var we WorkerEntry
	var hit bool
	if f.InPort >= 0 && f.InPort < maxCachePorts {
		c := &s.cache[f.InPort]
		if c.valid && c.qp == qp {
			we, hit = c.e, true
		}
	}
	if !hit {
		we, hit = s.t.workers[workerKey{f.InPort, qp}]
		if hit && f.InPort >= 0 && f.InPort < maxCachePorts {
			s.cache[f.InPort] = workerCache{valid: true, qp: qp, e: we}
		}
	}
	h := inahdr.Header(d[m.ina:])
	job := h.Job()
	if !hit {
		m.reason = ReasonForeign
		if j := s.jobByID(job); j != nil {
			j.stats.Foreign++
		}
		return
	}
	j := s.jobByID(we.Job)
	if j == nil {
		m.reason = ReasonNoJob
		return
	}
	fromPS := h.Has(inahdr.FlagFromPS)
	if job != we.Job || fromPS != we.PS || (!we.PS && (h.Worker() != we.Worker || j.Mask&(1<<we.Worker) == 0)) {
		m.reason = ReasonForeign
		j.stats.Foreign++
		return
	}
	j.stats.Packets++
	m.job, m.rid, m.worker, m.ps = j, we.RID, we.Worker, we.PS
	m.tag = MakeTag(job, h.AllReduce(), h.Chunk())
}

func (s *Switch) jobByID(id uint16) *Job {
	if int(id) < len(s.t.jobs) {
		return s.t.jobs[id]
	}
	return nil
}

// forwardPlain applies l2_fwd, then ipv4_lpm, then the default.
func (s *Switch) forwardPlain(f *Frame, m *pmeta) {
	d := f.Data
	m.emit = emDrop
	m.reason = ReasonNoRoute
	if len(d) < 14 {
		return
	}
	if len(s.t.l2) > 0 {
		var mac [6]byte
		copy(mac[:], d[:6])
		if p, ok := s.t.l2[mac]; ok {
			m.emit, m.port, m.reason = emFwd, p, ReasonForward
			return
		}
	}
	if len(d) >= offUDP && d[12] == 0x08 && d[13] == 0 && d[offIP]>>4 == 4 {
		dst := netip.AddrFrom4([4]byte(d[offIP+16 : offIP+20]))
		for _, r := range s.t.routes {
			if r.prefix.Contains(dst) {
				m.emit, m.port, m.reason = emFwd, r.port, ReasonForward
				return
			}
		}
		if s.t.l2Def >= 0 {
			m.emit, m.port, m.reason = emFwd, s.t.l2Def, ReasonForward
		}
	}
}

// slotMeta is the per-aggregator metadata stage: policy lookup and one
// read-modify-write of each metadata array at the aggregator head.
func (s *Switch) slotMeta(f *Frame, m *pmeta) {
	j := m.job
	h := inahdr.Header(f.Data[m.ina:])
	r := &s.r
	pool := j.Pool
	if m.ps {
		s.psPacket(f, m, h)
		return
	}
	if j.FreeINA {
		s.freeINASlotMeta(f, m, h)
		return
	}
	if h.Has(inahdr.FlagOverflow) { // ATP: host asks for PS aggregation
		m.emit, m.port, m.reason = emPort, j.PSPort, ReasonHostOverflow
		return
	}
	if m.passes > pool.Stride {
		s.collide(m, j)
		return
	}
	head, ok := j.policy.Locate(j, m.tag)
	if !ok || head < pool.Base || head+pool.Stride > pool.Base+pool.Slots {
		s.collide(m, j)
		return
	}
	m.head = head
	bit := uint32(1) << m.worker
	own := r.owner[head]
	st := r.state[head]
	switch {
	case own == m.tag && st == StateClaimed:
		if r.bitmap[head]&bit != 0 {
			m.emit, m.reason = emDrop, ReasonDuplicate
			j.stats.Duplicates++
			return
		}
		r.bitmap[head] |= bit
		r.count[head]++
		if e := h.Exponent(); e > r.exp[head] {
			r.exp[head] = e
		}
		m.op = opAdd
	case own == m.tag: // complete or held
		if r.bitmap[head]&bit == 0 {
			m.emit, m.reason = emDrop, ReasonDuplicate
			j.stats.Duplicates++
			return
		}
		m.op, m.readout = opRead, true
		m.emit, m.port, m.reason = emBack, f.InPort, ReasonResent
		m.setFl, m.bitmap, m.exp, m.ovf = inahdr.FlagResult, r.bitmap[head], r.exp[head], r.ovf[head] != 0
		m.outTag = m.tag
		j.stats.Resent++
		return
	case st == StateFree:
		s.claim(m, j, head, h, false)
		pool.stats.Claims++
	default:
		v := j.policy.Contend(j, Occupant{Tag: own, State: st, Priority: r.prio[head], Bitmap: r.bitmap[head]})
		switch v {
		case Reclaim:
			s.claim(m, j, head, h, false)
			pool.stats.Reclaims++
		case Preempt:
			victim := s.jobByID(own.Job())
			m.outTag, m.bitmap, m.exp = own, r.bitmap[head], r.exp[head]
			s.claim(m, j, head, h, true)
			pool.stats.Preemptions++
			m.emit, m.reason, m.setFl = emPort, ReasonPreempted, inahdr.FlagPartial
			m.port = -1
			if victim != nil {
				victim.stats.Preempted++
				m.port = victim.PSPort
			}
			return
		default:
			if st == StateHeld {
				pool.stats.CollisionsOnHeld++
			}
			s.collide(m, j)
			return
		}
	}
	if r.bitmap[head] == j.Mask { // complete
		m.readout = true
		m.bitmap, m.exp, m.outTag = r.bitmap[head], r.exp[head], m.tag
		m.setFl = inahdr.FlagResult
		m.reason = ReasonResult
		j.stats.Results++
		pool.stats.Completions++
		if j.ResultToPS {
			s.setState(head, StateHeld)
			m.emit, m.port = emPort, j.PSPort
		} else {
			s.setState(head, StateComplete)
			m.emit = emMcast
		}
		if o, ok := j.policy.(CompletionObserver); ok {
			o.Completed(j, m.tag, head)
		}
		return
	}
	m.emit, m.reason = emDrop, ReasonAbsorbed
	j.stats.Absorbed++
}

// claim makes the packet the aggregator's first contribution. With swap the
// old values are read out into the packet (preemption).
func (s *Switch) claim(m *pmeta, j *Job, head int, h inahdr.Header, swap bool) {
	r := &s.r
	if r.state[head] != StateFree {
		s.setState(head, StateFree)
	}
	r.span[head] = uint8(j.Pool.Stride)
	s.setState(head, StateClaimed)
	r.owner[head] = m.tag
	r.bitmap[head] = 1 << m.worker
	r.count[head] = 1
	r.prio[head] = j.Priority
	r.exp[head] = h.Exponent()
	if swap {
		m.op = opSwap
	} else {
		m.op = opWrite
	}
}

func (s *Switch) collide(m *pmeta, j *Job) {
	m.emit, m.port, m.reason, m.setFl = emPort, j.PSPort, ReasonCollision, inahdr.FlagCollision
	m.op = opNone
	j.stats.Collisions++
	j.Pool.stats.Collisions++
}

// psPacket handles a packet from the job's PS: a result (ATP ACK) releases
// the aggregator it was computed in and is multicast to the job's workers.
func (s *Switch) psPacket(f *Frame, m *pmeta, h inahdr.Header) {
	j := m.job
	if !h.Has(inahdr.FlagResult) {
		s.forwardPlain(f, m)
		return
	}
	m.emit, m.reason = emMcast, ReasonAck
	j.stats.Acks++
	head, ok := j.policy.Locate(j, m.tag)
	if !ok || head < j.Pool.Base || head >= j.Pool.Base+j.Pool.Slots {
		return
	}
	r := &s.r
	if r.owner[head] == m.tag && (r.state[head] == StateHeld || r.state[head] == StateComplete) {
		s.setState(head, StateFree)
		r.owner[head], r.bitmap[head], r.count[head] = 0, 0, 0
		j.Pool.stats.Releases++
		if o, ok := j.policy.(CompletionObserver); ok {
			o.Released(j, m.tag, head)
		}
	}
}

// valueStages runs the value lanes for each pass of the packet: pass k
// touches slot head+k once per lane.
func (s *Switch) valueStages(f *Frame, m *pmeta) {
	V := s.cfg.ValuesPerPass
	vals := f.Data[m.ina+inahdr.Len:]
	head := m.head
	var ovf uint8
	for k := 0; k < m.passes; k++ {
		lo := k * V
		n := m.count - lo
		if n > V {
			n = V
		}
		slot := head + k
		reg := s.r.values[slot*V : slot*V+n]
		pkt := vals[4*lo : 4*(lo+n)]
		var o bool
		switch m.op {
		case opWrite:
			writeBlock(reg, pkt)
		case opAdd:
			if m.readout {
				o = addReadBlock(reg, pkt)
			} else {
				o = addBlock(reg, pkt)
			}
		case opRead:
			readBlock(reg, pkt)
		case opSwap:
			swapBlock(reg, pkt)
		}
		// ovf register at the head: one RMW per pass.
		switch m.op {
		case opWrite:
			if k == 0 {
				s.r.ovf[head] = 0
			}
		case opSwap:
			if k == 0 {
				ovf = s.r.ovf[head]
				s.r.ovf[head] = 0
			}
		case opAdd:
			if o {
				s.r.ovf[head] = 1
			}
			if k == m.passes-1 {
				ovf = s.r.ovf[head]
			}
		case opRead:
			ovf = s.r.ovf[head]
		}
	}
	if ovf != 0 {
		m.ovf = true
	}
	s.stats.Passes += uint64(m.passes)
	s.stats.Recirculations += uint64(m.passes - 1)
	s.stats.Values += uint64(m.count)
	if m.op == opAdd || m.op == opWrite {
		m.job.stats.ValuesAdded += uint64(m.count)
	}
	if m.readout && m.ovf && m.reason == ReasonResult {
		m.job.stats.Overflows++
	}
	if m.readout || m.op == opSwap {
		m.touched = true
	}
}

// deparse writes the header changes, fixes checksums and sets the verdict.
func (s *Switch) deparse(f *Frame, m *pmeta) {
	if m.isINA && m.job == nil && m.reason != ReasonNone {
		m.emit = emDrop
	}
	if m.isINA && m.emit == emDrop && m.reason == ReasonNone {
		m.reason = ReasonMalformed
	}
	f.Reason = m.reason
	f.Passes = 1
	f.Len = 0
	if m.op != opNone {
		f.Passes = m.passes
	}
	s.stats.ByReason[m.reason]++
	switch m.emit {
	case emDrop:
		f.Action = ActDrop
		if f.InPort >= 0 && f.InPort < len(s.ports) {
			s.ports[f.InPort].Drops++
		}
		return
	case emFwd:
		f.Action, f.OutPort = ActForward, m.port
		s.countTx(m.port, len(f.Data))
		return
	}
	h := inahdr.Header(f.Data[m.ina:])
	if m.setFl != 0 {
		h.AddFlags(m.setFl)
		m.touched = true
	}
	if m.readout || m.op == opSwap {
		h.SetBitmap(m.bitmap)
		h.SetExponent(m.exp)
		if m.outTag != 0 {
			h.SetJob(m.outTag.Job())
			h.SetAllReduce(m.outTag.AllReduce())
			h.SetChunk(m.outTag.Chunk())
		}
		if m.ovf {
			h.AddFlags(inahdr.FlagOverflow)
		}
	}
	if m.head >= 0 && m.op != opNone {
		h.SetSlot(uint16(m.head))
	}
	if m.trim {
		f.Data = trimFrame(f.Data, m.ina)
		f.Len = len(f.Data)
	}
	switch m.emit {
	case emFwdMcast:
		f.Action, f.OutPort, f.Group = ActForwardMulticast, m.port, m.job.Group
		_ = rdma.SetICRC(f.Data)
		s.countTx(m.port, len(f.Data))
	case emPort:
		if m.port < 0 {
			f.Action = ActDrop
			return
		}
		f.Action, f.OutPort = ActForward, m.port
		_ = rdma.SetICRC(f.Data)
		s.countTx(m.port, len(f.Data))
	case emBack:
		f.Action, f.OutPort = ActForward, m.port
		if rw := s.t.rewrites[m.rid]; rw != nil {
			applyRewrite(f.Data, rw)
		}
		_ = rdma.SetICRC(f.Data)
		s.countTx(m.port, len(f.Data))
	case emMcast:
		f.Action, f.Group = ActMulticast, m.job.Group
	}
}

func (s *Switch) countTx(p, n int) {
	if p >= 0 && p < len(s.ports) {
		s.ports[p].TxPackets++
		s.ports[p].TxBytes += uint64(n)
	}
}

// AppendMembers appends the members of multicast group g to dst.
func (s *Switch) AppendMembers(dst []McastMember, g uint16) []McastMember {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append(dst, s.t.members[g]...)
}

// Egress finishes one replica of a multicast frame for member m: it applies
// the egress rewrite of m.RID (table ina_egress), fixes the IPv4 checksum
// and recomputes the ICRC. It allocates nothing.
func (s *Switch) Egress(frame []byte, m McastMember) {
	s.mu.Lock()
	rw := s.t.rewrites[m.RID]
	s.countTx(m.Port, len(frame))
	s.mu.Unlock()
	if rw != nil {
		applyRewrite(frame, rw)
	}
	_ = rdma.SetICRC(frame)
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
