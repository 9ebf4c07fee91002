package sw

import (
	"time"

	"github.com/inabox/inabox/rdma"
	"github.com/inabox/inabox/switch/inahdr"
)

// Pipeline stages, in two passes over the batch (Process):
//
//	parse     frame → INA header, value count, passes
//	classify  ina_worker / ina_job / ina_pool, or l2_fwd / ipv4_lpm (forward.go)
//	          (a worker's common contribution takes both at once: express.go)
//	slot      the job's SlotStage: one RMW of each per-aggregator array
//	          (stage.go, aggregator.go, stage_*.go)
//	---
//	values    per pass: one RMW of each value lane of one slot (values.go)
//	deparse   header fields, IPv4 checksum, ICRC, verdict (deparse.go)

// pmeta is one frame's metadata on its way through the pipeline, grouped
// by the stage that fills it in.
type pmeta struct {
	pkt  parsed  // parse
	from sender  // classify
	agg  aggOp   // slot stage, for the value stages
	out  verdict // classify or slot stage, for deparse
}

// parsed is what parse found in a frame.
type parsed struct {
	hdr    inahdr.Header // INA header and values; nil: not an INA packet
	ina    int           // offset of hdr in the frame
	uc     bool          // a UC SEND Only (FreeINA's best-effort INA path)
	rc     bool          // on an RC connection: whatever the switch refuses must still reach the PS (every PSN)
	count  int           // values carried
	passes int           // pipeline passes the values need
}

// sender is what classify found: whose packet it is.
type sender struct {
	job    *Job   // nil: not an INA packet of an installed job
	tag    Tag    // the packet's (job, all-reduce, chunk)
	worker uint8  // worker id
	rid    uint16 // replication id of the sender's egress rewrite
	ps     bool   // sent by the job's parameter server
}

// aggOp is the slot stage's order to the value stages.
type aggOp struct {
	op   valueOp  // opNone: the value stages skip the packet
	head int      // the aggregator's first slot; pass k uses slot head+k
	regs *aggRegs // its registers, &Switch.r.agg[head]
}

// verdict is what happens to the frame and what deparse writes into it.
type verdict struct {
	act      Action
	port     int // output port of ActForward and ActForwardMulticast; < 0: dropped
	reason   Reason
	toSender bool    // ActForward back out of the ingress port, through the sender's egress rewrite
	trim     bool    // cut the values off (FreeINA's absorbed notice)
	flags    uint8   // INA flags to add
	carry    carried // the aggregate the packet carries out, if any
}

// carried is an aggregate a packet carries out: a result, a resent result
// or a preempted partial sum. The value stages put its values in the
// packet.
type carried struct {
	tag    Tag // its owner; 0: the packet carries none
	bitmap uint32
	exp    int8
	ovf    bool // an add saturated
}

// Process runs a batch of frames through the pipeline and sets each frame's
// verdict. It allocates nothing once the switch has seen a batch of this
// size.
//
// The first pass takes each frame through parse, classify and its slot
// stage; the second through the value stages and deparse. The result is
// that of running each stage over the whole batch before the next: no
// stage of the first pass reads what a later first-pass stage of an
// earlier frame writes, and the same holds within the second pass. The
// passes stay apart because a slot stage (resend) reads the overflow flag
// that the value stages write.
func (s *Switch) Process(batch []Frame) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.process(batch)
}

// processAt is SetNow(now) and Process(batch) under one hold of the lock.
func (s *Switch) processAt(now time.Duration, batch []Frame) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.now = max(s.now, now)
	s.process(batch)
}

// process is Process with the lock held.
func (s *Switch) process(batch []Frame) {
	if cap(s.meta) < len(batch) {
		s.meta = make([]pmeta, len(batch))
	}
	meta := s.meta[:len(batch)]
	s.stats.Batches++
	s.stats.Packets += uint64(len(batch))
	fetched := -1 // the aggregator whose value registers were fetched last
	for i := range batch {
		f, m := &batch[i], &meta[i]
		if !s.express(f, m) {
			s.parse(f, m)
			s.classify(f, m)
		}
		switch { // slot stage: the job's SlotStage, or the PS's packet
		case m.from.job == nil: // plain traffic, or dropped by parse / classify
		case m.from.ps:
			s.fromPS(f, m)
		default:
			contribute(contribution{s, m})
			if m.agg.op != opNone && m.agg.head != fetched && m.pkt.passes > 0 && m.pkt.count > 0 {
				V := s.cfg.ValuesPerPass // valueStages' registers, for later (once for a chunk's run of contributions)
				prefetch(s.r.values[m.agg.head*V : m.agg.head*V+m.pkt.count])
				fetched = m.agg.head
			}
		}
	}
	for i := range batch {
		if m := &meta[i]; m.agg.op != opNone {
			s.valueStages(m)
		}
		s.deparse(&batch[i], &meta[i])
	}
}

// parse fills m.pkt from f.Data. An INA packet is a RoCEv2 frame (the
// header checks of rdma.RoCE.Payload) whose opcode is an RC or UC SEND or
// RDMA WRITE Only and whose payload starts with an INA header without
// FlagBypass; a malformed or too long one gets its drop reason, and so does
// one whose ICRC is wrong (damaged past the FCS: it never reaches a
// register). A frame from a port with port security must come from the
// port's source; a host-to-host INA message (FlagBypass) must not be a
// result the job's PS did not send, nor a GRANT (hostMessage).
func (s *Switch) parse(f *Frame, m *pmeta) {
	*m = pmeta{}
	d := f.Data
	if f.InPort >= 0 && f.InPort < len(s.ports) {
		ps := &s.ports[f.InPort]
		ps.RxPackets++
		ps.RxBytes += uint64(len(d))
	}
	if !s.sourceOK(f.InPort, d) {
		m.out.reason = ReasonSpoofed
		return
	}
	r := rdma.RoCE(d)
	ina, limit, ok := r.Payload()
	if !ok {
		return
	}
	op := r.BTH().Opcode()
	if !op.IsSendOrWriteOnly() || limit-ina < inahdr.Len { // INA rides SEND/WRITE Only, RC or UC
		return
	}
	h := inahdr.Header(d[ina:limit])
	if h.Version() != inahdr.Version {
		return
	}
	if h.Has(inahdr.FlagBypass) {
		s.hostMessage(f, m, h)
		return
	}
	m.pkt.hdr, m.pkt.ina, m.pkt.uc, m.pkt.rc = h, ina, op == rdma.OpUCSendOnly, op.Transport() == rdma.TransportRC
	s.stats.INAPackets++
	if !r.CheckSealedSpan(limit+r.BTH().PadCount()+rdma.ICRCLen, f.Sealed) { // Payload's end is the pad's start
		m.out.reason = ReasonBadICRC
		if j := s.jobByID(h.Job()); j != nil {
			j.stats.BadICRC++
		}
		return
	}
	if h.Validate() != nil {
		m.out.reason = ReasonMalformed
		return
	}
	m.pkt.count = h.Count()
	m.pkt.passes = s.passesFor(m.pkt.count)
	if m.pkt.passes > s.cfg.MaxPasses {
		m.out.reason = ReasonTooLong
	}
}

// classify applies the INA tables (m.from) or the forwarding tables.
func (s *Switch) classify(f *Frame, m *pmeta) {
	d := f.Data
	h := m.pkt.hdr
	if m.out.reason != ReasonNone { // dropped by parse
		return
	}
	if h == nil {
		s.forwardPlain(f, m)
		return
	}
	qp := rdma.RoCE(d).BTH().DestQP()
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
			s.cache[f.InPort] = s.newWorkerCache(f.InPort, qp, we)
		}
	}
	job := h.Job()
	if !hit {
		m.out.reason = ReasonForeign
		if j := s.jobByID(job); j != nil {
			j.stats.Foreign++
		}
		return
	}
	j := s.jobByID(we.Job)
	if j == nil {
		m.out.reason = ReasonNoJob
		return
	}
	fromPS := h.Has(inahdr.FlagFromPS)
	if job != we.Job || fromPS != we.PS || (!we.PS && (h.Worker() != we.Worker || j.Mask&(1<<we.Worker) == 0)) {
		m.out.reason = ReasonForeign
		j.stats.Foreign++
		return
	}
	if !we.PS {
		switch {
		case h.Bitmap() != 1<<we.Worker:
			m.out.reason = ReasonBadBitmap
			j.stats.BadBitmap++
			return
		case j.stale(h.AllReduce()):
			j.stats.Stale++
			if m.pkt.rc { // keep the RC connection whole: on to the PS, unaggregated
				m.out = verdict{act: ActForward, port: j.PSPort, reason: ReasonStale, flags: inahdr.FlagCollision}
				return
			}
			m.out.reason = ReasonStale
			return
		}
	}
	j.stats.Packets++
	m.from.job, m.from.tag = j, MakeTag(job, h.AllReduce(), h.Chunk())
	m.from.worker, m.from.rid, m.from.ps = we.Worker, we.RID, we.PS
}

// stale reports whether a contribution to all-reduce ar is older than the
// job's window of all-reduces in flight, and moves the window to ar if ar
// is the newest yet (serial arithmetic: ids wrap).
func (j *Job) stale(ar uint16) bool {
	if j.behind(ar) {
		return true
	}
	j.see(ar)
	return false
}

// see moves the job's window to all-reduce ar if ar is the newest yet.
func (j *Job) see(ar uint16) {
	if !j.arSeen || int16(ar-j.arHigh) > 0 {
		j.arHigh, j.arSeen = ar, true
	}
}

// behind reports whether all-reduce ar is older than the job's window
// (stale's answer, without moving the window).
func (j *Job) behind(ar uint16) bool {
	if !j.arSeen {
		return false
	}
	d := int16(ar - j.arHigh)
	return d <= 0 && int(-d) >= int(j.Window)
}

// sourceOK reports whether frame d may arrive on port: any frame on a port
// without port security; else one from one of the port's sources: its MAC
// and, if the frame is IPv4, its IPv4 address.
func (s *Switch) sourceOK(port int, d []byte) bool {
	if port < 0 || port >= len(s.t.sources) || len(s.t.sources[port]) == 0 {
		return true
	}
	if len(d) < rdma.EthLen {
		return false
	}
	mac := rdma.Ethernet(d).Src()
	ipv4 := rdma.Ethernet(d).EtherType() == rdma.EtherTypeIPv4
	for i := range s.t.sources[port] {
		src := &s.t.sources[port][i]
		if mac != src.MAC {
			continue
		}
		if !ipv4 || !src.IP.Is4() {
			return true
		}
		if len(d) >= rdma.EthLen+rdma.IPv4Len && rdma.RoCE(d).IPv4().Src() == src.IP {
			return true
		}
	}
	return false
}

// hostMessage checks a host-to-host INA message (FlagBypass), which
// otherwise travels as plain traffic: a result comes only from the job's
// PS port (for a job the switch knows), and no GRANT or LEFT comes from a
// port at all (the switch sends its own).
func (s *Switch) hostMessage(f *Frame, m *pmeta, h inahdr.Header) {
	switch {
	case h.IsCtl():
		if op := inahdr.CtlOp(h.Worker()); op == inahdr.CtlGrant || op == inahdr.CtlLeft {
			m.out.reason = ReasonForgedControl
		}
	case h.Has(inahdr.FlagResult):
		if j := s.jobByID(h.Job()); j != nil && f.InPort != j.PSPort {
			m.out.reason = ReasonForgedResult
			j.stats.ForgedResult++
		}
	}
}
