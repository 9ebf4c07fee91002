package baseline

import (
	"time"

	"github.com/inabox/inabox/emu"
	"github.com/inabox/inabox/host"
	"github.com/inabox/inabox/rdma"
	"github.com/inabox/inabox/switch/inahdr"
)

// INAKind is the INA baseline an INAWorker speaks.
type INAKind uint8

// The INA baselines.
const (
	SwitchML INAKind = iota // static per-job slots, self-clocked window
	ATP                     // hashed shared aggregators, results through the PS
	ESA                     // ATP with priority preemption
)

// INAConfig configures an INAWorker: worker Rank of Workers in Job.
type INAConfig struct {
	Kind          INAKind
	Job           uint16
	Rank, Workers int
	// Values per chunk (= per packet; 0: 64); Quant is the quantizer
	// (Workers is set).
	Values int
	Quant  host.Quantizer
	// Addr and UCQPN are the worker's address and UC QP (the destination
	// of results); PS and PSQPN the destination of its contributions (the
	// switch's ina_worker entry for this worker is on PSQPN).
	Addr  rdma.Endpoint
	UCQPN uint32
	PS    rdma.Endpoint
	PSQPN uint32
	// Peers[r] is worker r's address and UC QP (SwitchML re-contribution
	// requests go to the others).
	Peers []host.Peer
	// Switch is the switch's address: results come from it only (zero:
	// from anywhere).
	Switch rdma.Endpoint
	// Window bounds chunks in flight; RTO is the per-chunk retransmission
	// timeout (backed off: INAWorker.backoff).
	Window int
	RTO    time.Duration
	// FirstWait (ATP, ESA) is how long a chunk sent before the worker
	// has any result of its all-reduce waits before it times out; the
	// first result brings every wait in to RTO. ATP's client waits 50 ms
	// for the first message of a tensor and 200 µs between later ones
	// (in-ATP/ATP client/p4ml_manager.cc: timeout_value = 0.05, then
	// 0.0002), so a late peer is not taken for a loss. 0: RTO from the
	// start.
	FirstWait time.Duration
	Timeline  host.Timeline
	// SwitchCtlQPN, if set (SwitchML only), is the QP of the switch's
	// controller, and the worker is admitted by it (sw.SwitchMLControl):
	// when its job starts it JOINs, asking for a pool of 2·Window
	// aggregators, and begins no all-reduce before the GRANT, whose pool
	// sets its window (half the pool, at most Window); when it has
	// finished it LEAVEs. JOIN and LEAVE are repeated, backing off from
	// RTO, until the GRANT or LEFT comes. 0: no admission (the pool is
	// installed beforehand for Window).
	SwitchCtlQPN uint32
}

// INAWorker is the client of the three INA baselines (SwitchML, ATP, ESA).
// Contributions are UC SEND Only frames addressed to the PS's per-worker QP
// (the switch's ina_worker entry); results come back as UC SEND Only frames
// to the worker's UC QP (switch multicast, a stored result unicast back, or
// the PS's ACK multicast by the switch). Reliability is the worker's own:
// per-chunk retransmission timers (see README.md).
type INAWorker struct {
	clientBase
	kind   INAKind
	addr   rdma.Endpoint
	ucQPN  uint32
	ps     rdma.Endpoint
	psQPN  uint32
	peers  []host.Peer
	sw     rdma.Endpoint
	window int
	rto    time.Duration
	first  time.Duration // INAConfig.FirstWait
	// bases[i] is the job-wide sequence number of tensor i's chunk 0
	// (SwitchML: slots are chunk sequence mod 2·window across all-reduces).
	bases []uint32
	st    inaState
	// psHdr is the header of the contributions to the PS (the PSN set
	// per frame), psTmpl its template for a whole chunk.
	psHdr  rdma.FrameHeader
	psTmpl rdma.Template
	armed  bool
	// nudges (ATP/ESA): chunks whose result came from a held aggregator;
	// our raw contribution goes to the PS every RTO until the PS's ACK for
	// the chunk is seen (the PS may need it: its copy of the result was
	// lost).
	nd     []nudge
	ndHead int
	ndDone map[uint64]bool
	// adm is SwitchML's admission (INAConfig.SwitchCtlQPN).
	adm admission
}

// admission is a SwitchML worker's state towards the switch's controller.
type admission struct {
	ctlQPN  uint32 // 0: no admission
	granted bool   // GRANT received: the window is set
	left    bool   // LEFT received: nothing more to send
	leaving bool   // LEAVE sent at least once
	armed   bool   // the JOIN/LEAVE timer is armed
	tries   uint8
}

type nudge struct {
	at    time.Duration
	idx   int
	c     uint32
	tries uint8
}

// maxBackoff bounds the retransmission backoff: a chunk's k-th timeout
// waits at most RTO·2^maxBackoff. ATP's code retries at a fixed interval;
// with it, a PS slower than the window drains livelocks (the repeats keep
// its queue full: measured, a 0.3 s job unfinished after 8 s).
const maxBackoff = host.MaxBackoff

// backoff is the wait after a chunk's tries-th timeout: for ATP/ESA
// RTO·2^min(tries, maxBackoff); for SwitchML RTO, or, while the worker
// holds no result of the all-reduce (a peer may not have begun it: a
// straggler's lateness is not a loss), RTO·2^min(tries−1, maxBackoff): the
// k-th timeout comes RTO·2^(k−1) after the chunk was sent.
func (w *INAWorker) backoff(tries uint8) time.Duration {
	if w.kind != SwitchML {
		return w.rto << min(tries, maxBackoff)
	}
	if w.st.nHave > 0 || tries == 0 {
		return w.rto
	}
	return w.rto << min(tries-1, maxBackoff)
}

func nudgeKey(ar uint16, c uint32) uint64 { return uint64(ar)<<32 | uint64(c) }

type inaState struct {
	idx    int
	ar     uint16
	chunks uint32
	next   uint32
	have   []bool
	nHave  uint32
	tries  []uint8
	out    int
	dl     []host.Deadline
	dlHead int
	rep    *Report
}

const (
	keyRTO = 1
	keyAdm = 2 // SwitchML: repeat JOIN or LEAVE
)

// NewINAWorker returns the client for cfg, all-reducing ts in order.
func NewINAWorker(cfg INAConfig, ts []host.Tensor) *INAWorker {
	w := &INAWorker{kind: cfg.Kind, window: cfg.Window, rto: cfg.RTO, first: cfg.FirstWait, addr: cfg.Addr, ucQPN: cfg.UCQPN,
		ps: cfg.PS, psQPN: cfg.PSQPN, peers: cfg.Peers, sw: cfg.Switch}
	if cfg.Kind == SwitchML {
		w.adm.ctlQPN = cfg.SwitchCtlQPN
	}
	w.init(cfg.Job, cfg.Rank, cfg.Workers, cfg.Values, cfg.Quant, cfg.Timeline, ts)
	w.psHdr = ucHeader(w.addr, w.ps, w.psQPN, w.ucQPN, 0)
	w.psTmpl, _ = w.psHdr.Template(inahdr.Len + 4*w.Values()) // none if it fails: send encodes each frame
	w.ndDone = map[uint64]bool{}
	var s uint32
	for i := range ts {
		w.bases = append(w.bases, s)
		s += w.Chunks(i)
	}
	return w
}

// Window is the most chunks the worker keeps in flight.
func (w *INAWorker) Window() int { return w.window }

var _ emu.Node = (*INAWorker)(nil)

// Reset implements emu.Resetter: a crash that loses the worker's state.
// An ATP or ESA worker rejoins its job the way a training framework
// restarts a worker from its last completed iteration: the finished
// all-reduces are its checkpoint, the one in flight begins again (compute,
// then every chunk), and what its peers finished meanwhile it gets back
// from the switch (a stored or held result) or from the PS, which keeps
// every chunk's result and repeats its ACK. SwitchML keeps results only in
// the switch's shadow slots, which the peers reuse as they go on, so a
// SwitchML worker cannot rejoin (StateLost).
func (w *INAWorker) Reset() {
	if w.kind == SwitchML {
		w.LoseState()
		return
	}
	w.st = inaState{}
	w.active, w.waiting, w.planned, w.armed = false, false, false, false
	w.nd, w.ndHead = nil, 0
	w.ndDone = map[uint64]bool{}
}

// Start implements emu.Node.
func (w *INAWorker) Start(env *emu.Env) {
	w.now = env.Now()
	w.waiting, w.armed, w.adm.armed = false, false, false // after a crash the timers are gone
	w.advance(env)
}

func (w *INAWorker) advance(env *emu.Env) {
	if w.adm.ctlQPN != 0 && !w.admitted(env) {
		return
	}
	for !w.active && w.schedule(env) {
		w.begin()
	}
	w.pump(env)
	w.arm(env)
	if w.adm.ctlQPN != 0 && !w.active && w.cur >= w.Len() {
		w.leave(env)
	}
}

// admitted reports whether the controller has granted the job its pool;
// until it has, the worker JOINs from its timeline's start on.
func (w *INAWorker) admitted(env *emu.Env) bool {
	a := &w.adm
	switch {
	case a.granted:
		return true
	case a.armed:
	case w.now < w.tl.Start:
		env.SetTimer(w.tl.Start, keyAdm)
		a.armed = true
	default:
		w.sendCtl(env, inahdr.Ctl{Op: inahdr.CtlJoin, Job: w.Job(), Rank: w.Rank(), Want: 2 * w.window})
	}
	return false
}

// leave tells the controller, until it answers LEFT, that this worker has
// finished.
func (w *INAWorker) leave(env *emu.Env) {
	a := &w.adm
	if a.left || (a.armed && a.leaving) {
		return
	}
	if !a.leaving {
		a.leaving, a.tries = true, 0
	}
	w.sendCtl(env, inahdr.Ctl{Op: inahdr.CtlLeave, Job: w.Job(), Rank: w.Rank()})
}

// sendCtl sends m to the switch's controller and arms its repetition.
func (w *INAWorker) sendCtl(env *emu.Env, m inahdr.Ctl) {
	a := &w.adm
	var hb [inahdr.Len]byte
	m.Encode(hb[:])
	ucSend(env, w.addr, w.sw, a.ctlQPN, w.ucQPN, 0, hb[:])
	env.SetTimer(w.now+w.rto<<min(a.tries, maxBackoff), keyAdm)
	a.armed, a.tries = true, min(a.tries+1, 255)
}

// control handles a control message from the switch's controller.
func (w *INAWorker) control(h inahdr.Header) {
	m, err := inahdr.DecodeCtl(h)
	if err != nil || w.adm.ctlQPN == 0 {
		return
	}
	switch {
	case m.Op == inahdr.CtlGrant && !w.adm.granted:
		// The pool's halves are the shadow copies: half of it in flight.
		w.adm.granted, w.adm.tries = true, 0
		w.window = max(min(w.window, m.Slots/2), 1)
	case m.Op == inahdr.CtlLeft:
		w.adm.left = true
	}
}

func (w *INAWorker) begin() {
	rep := w.beginBase()
	i := w.cur
	n := w.Chunks(i)
	w.st = inaState{idx: i, ar: w.Tensor(i).AllReduce, chunks: n, have: make([]bool, n), tries: make([]uint8, n), rep: rep}
}

// hdrChunk is the chunk field a contribution carries: the job-wide
// sequence number for SwitchML (its slot is that mod the pool), the chunk
// index for ATP/ESA (hashed with the all-reduce id).
func (w *INAWorker) hdrChunk(i int, c uint32) uint32 {
	if w.kind == SwitchML {
		return w.bases[i] + c
	}
	return c
}

// canSend applies the window to chunk c of the current all-reduce.
func (w *INAWorker) canSend(c uint32) bool {
	st := &w.st
	if w.kind != SwitchML {
		return st.out < w.window
	}
	// SwitchML: sequence g may go only once g − window has its result
	// (slot g mod 2·window then holds no chunk anyone still needs).
	g := w.bases[st.idx] + c
	if g < uint32(w.window) {
		return true
	}
	p := g - uint32(w.window)
	if p < w.bases[st.idx] {
		return true // previous all-reduce: finished
	}
	return st.have[p-w.bases[st.idx]]
}

func (w *INAWorker) pump(env *emu.Env) {
	if !w.active {
		return
	}
	st := &w.st
	for st.next < st.chunks && w.canSend(st.next) {
		c := st.next
		w.send(env, st.idx, c, 0, st.rep)
		st.rep.Sent++
		st.out++
		st.next++
		wait := w.rto
		if st.nHave == 0 && w.kind != SwitchML {
			wait = max(wait, w.first)
		}
		st.dl = append(st.dl, host.Deadline{At: w.now + wait, Chunk: c})
	}
}

func (w *INAWorker) send(env *emu.Env, i int, c uint32, flags uint8, rep *Report) {
	hc := w.hdrChunk(i, c)
	fh := &w.psHdr
	fh.PSN = hc & rdma.PSNMask
	p := env.NewPacket()
	p.SetLen(fh.Len(inahdr.Len + 4*w.Values()))
	n := w.EncodeChunk(p.Bytes()[fh.PayloadOffset():], i, c, hc, flags, rep)
	if err := host.EncodeInPlace(env, p, fh, &w.psTmpl, n); err != nil {
		env.Free(p)
		return
	}
	env.Send(0, p)
}

// AcceptsDeferred implements emu.DeferAware: the worker trusts a sealed
// frame's ICRC (host.UCFrame).
func (w *INAWorker) AcceptsDeferred() bool { return true }

// Receive implements emu.Node.
func (w *INAWorker) Receive(env *emu.Env, port int, pkts []*emu.Packet) {
	w.now = env.Now()
	for _, p := range pkts {
		b := p.Bytes()
		if pl, ok := host.UCFrame(w.RxCounters(), p, rdma.Endpoint{}); ok && rdma.RoCE(b).BTH().DestQP() == w.ucQPN {
			if h, ok := inaHeader(pl); ok && h.Job() == w.Job() {
				switch {
				case (h.Has(inahdr.FlagResult) || h.IsCtl()) && w.sw.IP.IsValid() && rdma.RoCE(b).IPv4().Src() != w.sw.IP:
					w.RxCounters().Forged++ // results and control come from the switch only
				case h.IsCtl():
					w.control(h)
				case h.Has(inahdr.FlagResult):
					w.result(env, h)
				case h.Has(inahdr.FlagBypass) && w.kind == SwitchML:
					w.peerRequest(env, h)
				}
			}
		}
		env.Free(p)
	}
	w.advance(env)
}

func (w *INAWorker) result(env *emu.Env, h inahdr.Header) {
	st := &w.st
	if w.kind != SwitchML && h.Has(inahdr.FlagFromPS) && w.ndHead < len(w.nd) {
		k := nudgeKey(h.AllReduce(), h.Chunk())
		if done, pending := w.ndDone[k]; pending && !done {
			w.ndDone[k] = true
		}
	}
	if !w.active || h.AllReduce() != st.ar {
		return
	}
	c := h.Chunk()
	if w.kind == SwitchML {
		c -= w.bases[st.idx]
	}
	if c >= st.chunks {
		return
	}
	if st.have[c] {
		st.rep.Dups++
		return
	}
	if !w.Store(st.idx, c, h) {
		return
	}
	st.have[c] = true
	st.nHave++
	st.out--
	if st.nHave == 1 && (w.kind == SwitchML || w.first > w.rto) && host.Clamp(st.dl, st.dlHead, w.now+w.rto) {
		// The first result: every peer has begun the all-reduce, so a
		// result still missing RTO from now is lost, however long its
		// chunk waited for a late peer (SwitchML's backed-off waits,
		// ATP's and ESA's FirstWait). (ATP/ESA back off on loss too:
		// their waits after a timeout stay.)
		w.armed = false
	}
	if h.Has(inahdr.FlagFromPS) {
		st.rep.PSResults++
	} else {
		st.rep.SwitchResults++
		if w.kind != SwitchML {
			// ATP/ESA: a result the switch unicast back from a held
			// aggregator: the PS has not acknowledged it (its result or
			// its ACK was lost). Nudge the PS with our contribution on the
			// PS path: it either re-ACKs (releasing the aggregator) or
			// collects everyone's raw contributions.
			w.send(env, st.idx, c, inahdr.FlagResend|inahdr.FlagOverflow, nil)
			st.rep.PSResends++
			w.ndDone[nudgeKey(st.ar, c)] = false
			w.nd = append(w.nd, nudge{at: w.now + w.rto, idx: st.idx, c: c})
		}
	}
	if st.nHave == st.chunks {
		w.finish(st.rep)
		w.st = inaState{}
	}
}

// peerRequest (SwitchML): a peer has timed out twice on a chunk whose
// aggregator lost its state (switch reboot); if we already hold the result
// we re-contribute so the fresh aggregator completes.
func (w *INAWorker) peerRequest(env *emu.Env, h inahdr.Header) {
	i := w.TensorIndex(h.AllReduce())
	if i < 0 {
		return
	}
	c := h.Chunk() - w.bases[i]
	if c >= w.Chunks(i) {
		return
	}
	if i > w.cur || (i == w.cur && (!w.active || !w.st.have[c])) {
		return // we lack it too: our own timer retransmits it
	}
	w.send(env, i, c, inahdr.FlagResend, nil)
	if w.active {
		w.st.rep.ReContribs++
	}
}

// Timer implements emu.Node.
func (w *INAWorker) Timer(env *emu.Env, key uint64) {
	w.now = env.Now()
	switch key {
	case keyGap:
		w.waiting = false
	case keyRTO:
		w.armed = false
		w.expire(env)
	case keyAdm:
		w.adm.armed = false
	}
	w.advance(env)
}

func (w *INAWorker) expire(env *emu.Env) {
	for w.ndHead < len(w.nd) && w.nd[w.ndHead].at <= w.now {
		n := w.nd[w.ndHead]
		w.ndHead++
		k := nudgeKey(w.Tensor(n.idx).AllReduce, n.c)
		if w.ndDone[k] {
			delete(w.ndDone, k)
			continue
		}
		w.send(env, n.idx, n.c, inahdr.FlagResend|inahdr.FlagOverflow, nil)
		if w.active {
			w.st.rep.PSResends++
		}
		n.tries = min(n.tries+1, 255)
		w.nd = append(w.nd, nudge{at: w.now + w.backoff(n.tries), idx: n.idx, c: n.c, tries: n.tries})
	}
	if w.ndHead == len(w.nd) {
		w.nd, w.ndHead = w.nd[:0], 0
	} else if w.ndHead > 4096 && w.ndHead*2 > len(w.nd) {
		k := copy(w.nd, w.nd[w.ndHead:])
		w.nd, w.ndHead = w.nd[:k], 0
	}
	if !w.active {
		return
	}
	st := &w.st
	for st.dlHead < len(st.dl) && st.dl[st.dlHead].At <= w.now {
		c := st.dl[st.dlHead].Chunk
		st.dlHead++
		if st.have[c] {
			continue
		}
		if st.tries[c] < 255 {
			st.tries[c]++
		}
		switch {
		case w.kind == SwitchML:
			w.send(env, st.idx, c, inahdr.FlagResend, nil)
			st.rep.Retransmits++
			if st.tries[c] >= 2 {
				w.askPeers(env, c)
			}
		case st.tries[c]%2 == 1:
			// ATP/ESA odd timeouts: through the switch again (completes
			// an aggregator that missed only this contribution, or gets a
			// held result back).
			w.send(env, st.idx, c, inahdr.FlagResend, nil)
			st.rep.Retransmits++
		default:
			// Even timeouts: on the PS path (the PS aggregates whatever
			// reaches it, or repeats its ACK).
			w.send(env, st.idx, c, inahdr.FlagResend|inahdr.FlagOverflow, nil)
			st.rep.PSResends++
		}
		st.dl = append(st.dl, host.Deadline{At: w.now + w.backoff(st.tries[c]), Chunk: c})
	}
	st.dl, st.dlHead = host.Compact(st.dl, st.dlHead)
}

func (w *INAWorker) askPeers(env *emu.Env, c uint32) {
	st := &w.st
	hc := w.hdrChunk(st.idx, c)
	var hb [inahdr.Len]byte
	inahdr.Header(hb[:]).Encode(inahdr.Meta{Flags: inahdr.FlagBypass | inahdr.FlagResend, Job: w.Job(),
		AllReduce: st.ar, Chunk: hc, Worker: uint8(w.Rank()), Bitmap: 1 << w.Rank()})
	for r, p := range w.peers {
		if r != w.Rank() {
			ucSend(env, w.addr, p.Addr, p.QPN, w.ucQPN, hc, hb[:])
			st.rep.PeerRequests++
		}
	}
}

func (w *INAWorker) arm(env *emu.Env) {
	if w.armed {
		return
	}
	at := time.Duration(-1)
	if w.ndHead < len(w.nd) {
		at = w.nd[w.ndHead].at
	}
	if st := &w.st; w.active {
		for st.dlHead < len(st.dl) && st.have[st.dl[st.dlHead].Chunk] {
			st.dlHead++
		}
		if st.dlHead < len(st.dl) && (at < 0 || st.dl[st.dlHead].At < at) {
			at = st.dl[st.dlHead].At
		}
	}
	if at >= 0 {
		env.SetTimer(at, keyRTO)
		w.armed = true
	}
}
