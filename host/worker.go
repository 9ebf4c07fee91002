package host

import (
	"time"

	"github.com/inabox/inabox/emu"
	"github.com/inabox/inabox/internal/hugemem"
	"github.com/inabox/inabox/rdma"
	"github.com/inabox/inabox/switch/inahdr"
)

// WorkerConfig configures a FreeINA worker.
type WorkerConfig struct {
	Job     uint16
	Rank    uint8
	Workers int
	Addr    rdma.Endpoint
	// PS is the parameter server's address and its QPN for this worker.
	PS Peer
	// QPN is the worker's RC QP (to the PS); UCQPN its UC QP, the
	// destination of the switch's result frames.
	QPN, UCQPN uint32
	// Switch is the switch's address: the source of every UC frame the
	// worker accepts (results, GRANTs); zero: any.
	Switch rdma.Endpoint
	// Values is the number of int32 values per chunk (= per packet); 0
	// means 64 (one pipeline pass).
	Values int
	Quant  Quantizer
	// WantSlots is how many aggregators the all-reduce asks for (0: 256).
	WantSlots int
	// PSWindow bounds PS-path chunks without a result (0: 128).
	PSWindow int
	// Ring bounds posted, uncompleted chunk messages (0: 1024); it is the
	// RC send queue budget for data.
	Ring int
	// ResultTimeout: a chunk whose message the PS acknowledged this long
	// ago and whose result has not arrived is fetched from the PS (0:
	// 200 µs. A spurious fetch costs one RC message each way; 3 × the
	// 524 µs RC ACK timeout made no clear difference on the trim path:
	// 23.3 ms vs 22.4 ms at 1 % loss, 154 ms vs 165 ms at 5 %).
	ResultTimeout time.Duration
	// QP is the template of the RC QP (addresses and QPNs filled in).
	QP rdma.Config
	// Timeline is when each all-reduce may begin (the job's arrival, its
	// compute phases and buckets); the zero Timeline begins each one as
	// soon as the previous one ends.
	Timeline Timeline
	// INAPath selects how INA-path chunks travel: PathUC (the default: UC
	// SEND Only to the switch, absorbed there; RC only as a fallback) or
	// PathTrim (RC to the PS, trimmed by the switch). The PS must use the
	// same.
	INAPath INAPath
	// PSUCQPN is the PS's UC QP for this worker: the destination QP of
	// PathUC contributions (the switch's ina_worker key).
	PSUCQPN uint32
	// UCTimeout (PathUC): a UC contribution without a result this long
	// after it was sent is retransmitted (0: 25 µs; the testbed derives it
	// from the link, see testbed.UCTimeout); UCRetries: the UCRetries-th
	// timeout sends the chunk raw over RC instead (0: 16, at most 65535;
	// the testbed derives it from the RC ACK timeout, see
	// testbed.UCRetries: a short fallback delay makes one slow RC-path
	// chunk stall every window and fall back the next ones, measured in
	// docs/freeina.md §11). Until the worker holds a result of the
	// all-reduce, a peer may not have begun it: the wait after a chunk's
	// k-th timeout is then UCTimeout·2^(k−1), at most UCMaxWait (0:
	// UCTimeout·2^MaxBackoff; the testbed keeps it under half the switch's
	// lease idle timeout: a waiting chunk's resends keep its lease), and
	// the first result brings every wait in to UCTimeout from then
	// (docs/freeina.md, "Timeouts and stragglers").
	UCTimeout time.Duration
	UCRetries int
	UCMaxWait time.Duration
	// UCBeginWait (PathUC), if not 0, bounds in time how long a chunk
	// waits before the all-reduce's first result: it is sent raw over RC
	// once UCBeginWait has passed since it was first sent, and its
	// timeouts before the first result do not count towards UCRetries
	// (UCRetries counts from the first result). A peer's lateness is
	// compute time, which a scaled scenario does not stretch; a count of
	// stretched timeouts would span a different time at every scale
	// (docs/freeina.md §12). 0: the count alone.
	UCBeginWait time.Duration
	// AdaptUCTimeout (PathUC) lets the UC timeout grow with measured
	// round trips (ucRTO). For real time, where a round trip includes how
	// late each process runs; in virtual time the link-derived UCTimeout
	// is exact, and adapting would only let other workers' losses (which
	// delay my result) inflate my timeout and slow my own recovery
	// (measured: 1 % loss 0.92 → 2.66 ms, 5 % loss 1.46 → 18.7 ms).
	AdaptUCTimeout bool
}

// maxUCRetries bounds UCRetries: the timeouts are counted per chunk in a
// uint16.
const maxUCRetries = 1<<16 - 1

func (c *WorkerConfig) fill() {
	if c.Values == 0 {
		c.Values = 64
	}
	if c.WantSlots == 0 {
		c.WantSlots = 256
	}
	if c.PSWindow == 0 {
		c.PSWindow = 128
	}
	if c.Ring == 0 {
		c.Ring = 1024
	}
	if c.ResultTimeout == 0 {
		c.ResultTimeout = 200 * time.Microsecond
	}
	if c.Quant.Workers == 0 {
		c.Quant.Workers = c.Workers
	}
	if c.UCTimeout == 0 {
		c.UCTimeout = 25 * time.Microsecond
	}
	if c.UCRetries == 0 {
		c.UCRetries = 16
	}
	if c.UCMaxWait == 0 {
		c.UCMaxWait = c.UCTimeout << MaxBackoff
	}
	c.UCRetries = min(c.UCRetries, maxUCRetries)
}

// Worker is a FreeINA worker: an emu.Node with one RC QP to the PS that
// all-reduces its tensors one after the other.
type Worker struct {
	Core
	cfg   WorkerConfig
	qp    *rdma.QP
	plans map[uint16]Plan

	cur     int // tensor being all-reduced
	st      *arState
	ring    [][]byte
	ringN   int // posted, uncompleted ring buffers
	ringPos int
	qpTimer rdma.QPTimer
	armedRT bool
	armedUC bool
	ucPSN   uint32
	ucHdr   rdma.FrameHeader // PathUC contributions' headers (PSN set per frame)
	ucTmpl  rdma.Template    // ucHdr's headers for a whole chunk's payload
	// PathUC's round-trip estimate from results of contributions sent
	// once (Karn): the retransmission timeout (ucRTO) grows when round
	// trips do (a busy switch, or processes running late in real time)
	// and never drops below the link-derived UCTimeout.
	srtt, rttvar time.Duration
	rttOK        bool
	// Until the first sample, each expiry that resends doubles the
	// timeout (Karn: a resent chunk gives no sample, so a timeout below
	// the round trip would otherwise never learn it); expiries before the
	// all-reduce's first result do not (their chunks back off already).
	backoff int
	now     time.Duration
	// postFails counts RC posts refused; postErr is the first reason.
	postFails int
	postErr   error
	// early are the PS's pulls of an all-reduce the worker has not begun
	// (its gradient is not computed yet), answered when it begins.
	early []earlyPull
}

// earlyPull is a pull of chunk of tensor the worker has not begun.
type earlyPull struct {
	tensor int
	chunk  uint32
}

type arState struct {
	ar       uint16
	chunks   uint32
	plan     Plan
	planned  bool
	psFrom   uint32 // chunks from psFrom on take the PS path (the plan was demoted at chunk psFrom)
	next     uint32
	have     []bool
	fetched  []bool
	acked    []bool // my message for the chunk was acknowledged by the PS
	nHave    uint32
	slotBusy []int64
	inaSent  []uint32 // INA chunks in send order
	ord      []int32  // chunk → index in inaSent (INA chunks; RC path only)
	scan     int      // inaSent[:scan] checked by the gap detector
	psOut    int
	dl       []Deadline
	dlHead   int
	ucTries  []uint16        // PathUC: timeouts per chunk
	ucSent   []time.Duration // PathUC: when the chunk was first sent
	ucDL     []Deadline      // PathUC: retransmission deadlines (one behind a later one waits: none fires early)
	ucHead   int
	rep      *Report
}

// WR id layout.
const (
	wrRing = 1 << 63
	wrData = 1 << 62
)

// timer keys
const (
	keyQP = iota
	keyResult
	keyGap
	keyUC
)

var (
	_ emu.Node     = (*Worker)(nil)
	_ emu.Resetter = (*Worker)(nil)
)

// NewWorker returns a worker that all-reduces tensors in order.
func NewWorker(cfg WorkerConfig, tensors ...Tensor) (*Worker, error) {
	cfg.fill()
	qc := cfg.QP
	qc.Local, qc.Remote, qc.QPN, qc.RemoteQPN = cfg.Addr, cfg.PS.Addr, cfg.QPN, cfg.PS.QPN
	qc.SendPSN, qc.RecvPSN = InitialPSN(cfg.QPN), InitialPSN(cfg.PS.QPN)
	if qc.SendQueueDepth == 0 {
		qc.SendQueueDepth = cfg.Ring + 256
	}
	q, err := rdma.NewQP(qc)
	if err != nil {
		return nil, err
	}
	w := &Worker{Core: NewCore(cfg.Job, int(cfg.Rank), cfg.Workers, cfg.Values, cfg.Quant, tensors), cfg: cfg, qp: q,
		plans: map[uint16]Plan{}}
	w.ucHdr = rdma.FrameHeader{Src: cfg.Addr, Dst: cfg.PS.Addr, Opcode: rdma.OpUCSendOnly, DestQP: cfg.PSUCQPN,
		SrcPort: rdma.SourcePort(cfg.UCQPN), TOS: cfg.QP.TOS}
	w.ucTmpl, _ = w.ucHdr.Template(inahdr.Len + 4*cfg.Values) // none if it fails: sendUC encodes each frame
	w.ring = make([][]byte, cfg.Ring)
	for i := range w.ring {
		w.ring[i] = make([]byte, inahdr.Len+4*cfg.Values)
	}
	return w, nil
}

// QP returns the worker's RC QP.
func (w *Worker) QP() *rdma.QP { return w.qp }

// Config returns the worker's configuration as it runs (defaults filled in).
func (w *Worker) Config() WorkerConfig { return w.cfg }

// QPs returns the worker's RC QPs (the one to the PS).
func (w *Worker) QPs() []*rdma.QP { return []*rdma.QP{w.qp} }

// Reset implements emu.Resetter: a crash that loses the worker's state.
// FreeINA cannot re-admit it mid-job (StateLost): its RC connection to the
// PS and the results it had not yet received are gone.
func (w *Worker) Reset() { w.LoseState() }

// Start implements emu.Node.
// After a crash Start runs again: the timers are gone, and everything
// still needed is armed anew (a compute gap that has not ended resumes).
func (w *Worker) Start(env *emu.Env) {
	w.now = env.Now()
	w.qpTimer = rdma.QPTimer{}
	w.armedRT, w.armedUC = false, false
	if w.st == nil && w.cur < w.Len() {
		if at := w.NextReady(&w.cfg.Timeline); at > w.now {
			w.gap(env, at)
		} else {
			w.begin(env)
		}
	}
	w.flush(env)
}

// gap arms the end of a compute phase at at.
func (w *Worker) gap(env *emu.Env, at time.Duration) {
	env.SetTimer(at, keyGap)
}

func (w *Worker) begin(env *emu.Env) {
	t := w.Tensor(w.cur)
	chunks := w.Chunks(w.cur)
	r := w.Begin(w.cur, w.now)
	rep := &r
	w.st = &arState{ar: t.AllReduce, chunks: chunks, psFrom: chunks, have: hugemem.Make[bool](int(chunks)), fetched: hugemem.Make[bool](int(chunks)),
		acked: hugemem.Make[bool](int(chunks)), inaSent: hugemem.Make[uint32](int(chunks))[:0], rep: rep}
	if w.cfg.INAPath == PathUC {
		w.st.ucTries = hugemem.Make[uint16](int(chunks))
		w.st.ucSent = hugemem.Make[time.Duration](int(chunks))
	} else {
		w.st.ord = hugemem.Make[int32](int(chunks)) // for gapFetch, on the RC path only
	}
	w.postCtl(ctl(inahdr.Ctl{Op: inahdr.CtlBegin, Job: w.cfg.Job, AllReduce: t.AllReduce, Want: w.cfg.WantSlots, Chunks: chunks}))
	if p, ok := w.plans[t.AllReduce]; ok {
		w.setPlan(p)
	}
	n := 0
	for _, e := range w.early {
		if e.tensor == w.cur {
			w.pullChunk(w.cur, e.chunk)
		} else {
			w.early[n] = e
			n++
		}
	}
	w.early = w.early[:n]
}

// onINA reports whether chunk c takes the INA path: the plan's, up to a
// demotion.
func (st *arState) onINA(c uint32) bool { return c < st.psFrom && st.plan.OnINA(c) }

func (w *Worker) setPlan(p Plan) {
	st := w.st
	st.plan, st.planned = p, true
	st.rep.Plan = p
	st.slotBusy = make([]int64, max(p.INA, 0))
	for i := range st.slotBusy {
		st.slotBusy[i] = -1
	}
}

func (w *Worker) postCtl(b []byte) { w.post(rdma.WorkRequest{Op: rdma.WRSend, Data: b}) }

// post posts wr on the RC QP; a refusal (send queue full, QP in error) is
// counted and kept (PostErr), never dropped silently: the run then fails
// naming the worker instead of stalling.
func (w *Worker) post(wr rdma.WorkRequest) {
	if err := w.qp.PostSend(wr); err != nil {
		w.postFails++
		if w.postErr == nil {
			w.postErr = err
		}
	}
}

// PostErr returns how many messages the worker could not post on its RC QP
// and the first reason, or 0 and nil.
func (w *Worker) PostErr() (int, error) { return w.postFails, w.postErr }

// pump posts chunks while the windows allow.
func (w *Worker) pump(env *emu.Env) {
	st := w.st
	if st == nil || !st.planned {
		return
	}
	uc := w.cfg.INAPath == PathUC
	// Shadow half: at most ⌈n/2⌉ INA chunks in flight, so a slot is
	// reused only after the chunk sent half a lease later has completed,
	// i.e. after every RC retransmission of the slot's previous chunk has
	// passed the switch (docs/freeina.md). PathUC: ⌊n/2⌋ (at least 1), the
	// SwitchML self-clocked window: a slot's next chunk is sent by anyone
	// only after every worker holds the slot's previous result
	// (docs/freeina.md §11).
	h := (st.plan.INA + 1) / 2
	if uc {
		// At most half the window asked for, even when granted more
		// (DynaINA's pools have a minimum size): the UC timeout covers
		// the queue of that window only, and more in flight made it fire
		// spuriously (a retransmission storm: 8 slots wanted, 64
		// granted, 230× slower).
		h = max(min(st.plan.INA, max(w.cfg.WantSlots, 2))/2, 1)
	}
	for st.next < st.chunks && w.ringN < len(w.ring) {
		c := st.next
		ina := st.onINA(c)
		if ina {
			s := st.plan.Slot(c)
			if b := st.slotBusy[s]; b >= 0 && !st.have[b] {
				return // SwitchML: the slot's previous chunk is not done
			}
			if len(st.inaSent) >= h && !st.have[st.inaSent[len(st.inaSent)-h]] {
				return
			}
			st.slotBusy[s] = int64(c)
			if !uc {
				st.ord[c] = int32(len(st.inaSent))
			}
			st.inaSent = append(st.inaSent, c)
			if uc {
				if !st.have[c] { // a PS result (pull) may have come first
					w.sendUC(env, c)
					st.ucSent[c] = w.now
					st.ucDL = append(st.ucDL, Deadline{At: w.now + w.ucRTO(), Chunk: c})
				}
				st.next++
				continue
			}
		} else {
			if st.psOut >= w.cfg.PSWindow {
				return
			}
			st.psOut++
		}
		buf := w.ring[w.ringPos]
		w.ringPos = (w.ringPos + 1) % len(w.ring)
		w.ringN++
		var fl uint8
		if !ina {
			fl = inahdr.FlagBypass
		}
		n := w.EncodeChunk(buf, w.cur, c, c, fl, st.rep)
		w.post(rdma.WorkRequest{ID: wrRing | wrData | uint64(st.ar)<<32 | uint64(c), Op: rdma.WRSend, Data: buf[:n]})
		st.next++
	}
}

// ucRTO is PathUC's retransmission timeout now: the link-derived
// UCTimeout, or the measured srtt + max(4·rttvar, srtt/2) if that is
// longer (the srtt/2 margin, as UCTimeout's 1.5 round trips: in a
// deterministic network rttvar shrinks to nothing).
// (Deadlines are kept in send order; when the timeout shrinks, a later
// deadline waits for an earlier one, so none fires early.)
func (w *Worker) ucRTO() time.Duration {
	if !w.cfg.AdaptUCTimeout {
		return w.cfg.UCTimeout
	}
	if !w.rttOK {
		return w.cfg.UCTimeout << w.backoff
	}
	return max(w.cfg.UCTimeout, w.srtt+max(4*w.rttvar, w.srtt/2))
}

// ucWait is how long a UC contribution resent after its tries-th timeout
// (tries ≥ 1) waits for its result: ucRTO once the worker holds a result
// of the all-reduce (begun: every peer has contributed to it, so has begun
// it); before, ucRTO·2^(tries−1), at most UCMaxWait (and at least ucRTO),
// so the k-th timeout comes ucRTO·2^(k−1) after the chunk was sent. A
// result held up by a late peer is not a loss: the backoff bounds the
// resends of a chunk waiting d to ⌊log₂(d/ucRTO)⌋ + 1, where a fixed
// timeout resends it d/ucRTO times; a peer less than 2·ucRTO late costs
// what it did with the fixed timeout.
func (w *Worker) ucWait(tries uint16, begun bool) time.Duration {
	rto := w.ucRTO()
	if begun || tries <= 1 {
		return rto
	}
	return max(min(rto<<min(tries-1, MaxBackoff), w.cfg.UCMaxWait), rto)
}

// rttSample folds one contribution-to-result round trip into the estimate
// (RFC 6298's gains, 1/8 and 1/4).
func (w *Worker) rttSample(r time.Duration) {
	if r <= 0 {
		return
	}
	if !w.rttOK {
		w.srtt, w.rttvar, w.rttOK = r, r/2, true
		return
	}
	d := w.srtt - r
	if d < 0 {
		d = -d
	}
	w.rttvar += (d - w.rttvar) / 4
	w.srtt += (r - w.srtt) / 8
}

// sendUC sends chunk c of the current tensor as a UC SEND Only from the worker's UC QP to
// the PS's UC QP for this worker, through the switch (PathUC).
func (w *Worker) sendUC(env *emu.Env, c uint32) {
	fh := &w.ucHdr
	fh.PSN = w.ucPSN
	w.ucPSN = (w.ucPSN + 1) & rdma.PSNMask
	p := env.NewPacket()
	p.SetLen(fh.Len(inahdr.Len + 4*w.cfg.Values))
	off := fh.PayloadOffset()
	n := w.EncodeChunk(p.Bytes()[off:], w.cur, c, c, 0, nil)
	if err := EncodeInPlace(env, p, fh, &w.ucTmpl, n); err != nil {
		env.Free(p)
		return
	}
	env.Send(0, p)
}

// expireUC handles PathUC deadlines due at now: retransmit the UC
// contribution, or after UCRetries timeouts send the chunk raw over RC
// (FlagBypass); the PS then pulls the others and sums it in software.
func (w *Worker) expireUC(env *emu.Env) {
	st := w.st
	if st == nil || st.ucTries == nil {
		return
	}
	// Before the all-reduce's first result, a missing result may be a
	// peer that has not begun it (a straggler), not a loss: each chunk's
	// waits double instead (ucWait).
	begun := st.nHave > 0
	resent := false
	defer func() {
		if resent && begun && w.cfg.AdaptUCTimeout && !w.rttOK && w.backoff < 10 {
			w.backoff++
		}
	}()
	for st.ucHead < len(st.ucDL) && st.ucDL[st.ucHead].At <= w.now {
		k := st.ucDL[st.ucHead].Chunk
		st.ucHead++
		if st.have[k] {
			continue
		}
		st.ucTries[k]++
		giveUp := int(st.ucTries[k]) >= w.cfg.UCRetries
		if w.cfg.UCBeginWait > 0 && !begun {
			giveUp = w.now-st.ucSent[k] >= w.cfg.UCBeginWait
		}
		if giveUp {
			st.rep.Fallbacks++
			buf := make([]byte, inahdr.Len+4*w.cfg.Values)
			n := w.EncodeChunk(buf, w.cur, k, k, inahdr.FlagBypass, nil)
			w.post(rdma.WorkRequest{Op: rdma.WRSend, Data: buf[:n]})
			continue
		}
		st.rep.Retransmits++
		resent = true
		w.sendUC(env, k)
		at := w.now + w.ucWait(st.ucTries[k], begun)
		if w.cfg.UCBeginWait > 0 && !begun {
			at = min(at, st.ucSent[k]+w.cfg.UCBeginWait) // the give-up on time
		}
		st.ucDL = append(st.ucDL, Deadline{At: at, Chunk: k})
	}
	st.ucDL, st.ucHead = Compact(st.ucDL, st.ucHead)
}

// MaxBackoff bounds a retransmission timer's exponential backoff: a
// chunk's wait is at most its timeout × 2^MaxBackoff.
const MaxBackoff = 6

// Clamp brings every deadline of q[head:] later than at in to at (a queue
// in time order stays in time order). It reports whether it moved any.
func Clamp(q []Deadline, head int, at time.Duration) bool {
	moved := false
	for i := head; i < len(q); i++ {
		if q[i].At > at {
			q[i].At, moved = at, true
		}
	}
	return moved
}

// Compact drops the consumed head q[:head] of a queue held in one slice:
// all of it once consumed, else by copying the rest down once the head is
// most of it (a queue that never empties stays bounded and stops growing;
// each entry is copied O(1) times on average). What it drops is cleared,
// so the slice keeps no references.
func Compact[T any](q []T, head int) ([]T, int) {
	if head == len(q) {
		clear(q)
		return q[:0], 0
	}
	if head > 4096 && head*2 > len(q) {
		n := copy(q, q[head:])
		clear(q[n:])
		return q[:n], 0
	}
	return q, head
}

// AcceptsDeferred implements emu.DeferAware: the worker trusts a sealed
// frame's ICRC (UCFrame, rdma.QP.ReceiveSealed).
func (w *Worker) AcceptsDeferred() bool { return true }

// Receive implements emu.Node.
func (w *Worker) Receive(env *emu.Env, port int, pkts []*emu.Packet) {
	w.now = env.Now()
	for _, p := range pkts {
		b := p.Bytes()
		switch destQP(b) {
		case w.cfg.UCQPN: // results and GRANTs: from the switch only
			if pl, ok := UCFrame(&w.rx, p, w.cfg.Switch); ok {
				w.uc(pl)
			}
		case w.cfg.QPN:
			_ = w.qp.ReceiveSealed(w.now, b, p.Sealed)
			w.drain(env)
		}
		env.Free(p)
	}
	w.flush(env)
}

func (w *Worker) uc(pl []byte) {
	if len(pl) < inahdr.Len || pl[0] != inahdr.Version {
		return
	}
	h := inahdr.Header(pl)
	if h.Has(inahdr.FlagResult) {
		w.result(h, true)
	} else if c, err := inahdr.DecodeCtl(h); err == nil && c.Op == inahdr.CtlGrant && w.st != nil && c.Job == w.cfg.Job {
		w.st.rep.Grants++ // GRANT multicast: informational (the PS's PLAN rules)
	}
}

// result stores a chunk result from the switch (uc) or the PS.
func (w *Worker) result(h inahdr.Header, uc bool) {
	st := w.st
	if st == nil || h.Job() != w.cfg.Job || h.AllReduce() != st.ar || h.Chunk() >= st.chunks {
		w.rx.Stale++
		return
	}
	k := h.Chunk()
	if st.have[k] {
		st.rep.Dups++
		return
	}
	if !w.Store(w.cur, k, h) {
		return
	}
	st.have[k] = true
	st.nHave++
	if st.nHave == 1 && Clamp(st.ucDL, st.ucHead, w.now+w.ucRTO()) {
		// Every peer has begun the all-reduce: a result still missing
		// UCTimeout from now is lost, however long its chunk waited.
		w.armedUC = false
	}
	if st.nHave == 1 && w.cfg.UCBeginWait > 0 && st.ucTries != nil {
		// UCRetries counts from here: the timeouts so far waited for a
		// late peer (at most one is kept: the chunk was resent).
		for _, d := range st.ucDL[st.ucHead:] {
			st.ucTries[d.Chunk] = min(st.ucTries[d.Chunk], 1)
		}
	}
	if uc {
		st.rep.SwitchResults++
		if w.cfg.INAPath != PathUC {
			w.gapFetch(int(st.ord[k]))
		} else if w.cfg.AdaptUCTimeout && st.ucTries[k] == 0 && st.plan.OnINA(k) {
			w.rttSample(w.now - st.ucSent[k])
		}
	} else {
		st.rep.PSResults++
	}
	if !st.onINA(k) {
		st.psOut--
	}
}

func (w *Worker) drain(env *emu.Env) {
	for {
		c, ok := w.qp.PollCompletion()
		if !ok {
			return
		}
		switch c.Opcode {
		case rdma.CompSend:
			if c.WRID&wrRing != 0 {
				w.ringN--
			}
			if c.WRID&wrData != 0 && w.st != nil && uint16(c.WRID>>32) == w.st.ar {
				k := uint32(c.WRID)
				w.st.acked[k] = true
				if !w.st.have[k] {
					w.st.dl = append(w.st.dl, Deadline{At: w.now + w.cfg.ResultTimeout, Chunk: k})
				}
			}
		case rdma.CompRecv:
			w.message(env, c.Data)
		}
	}
}

// message handles an RC message from the PS.
func (w *Worker) message(env *emu.Env, data []byte) {
	if len(data) < inahdr.Len || data[0] != inahdr.Version {
		return
	}
	h := inahdr.Header(data)
	if h.IsCtl() {
		c, err := inahdr.DecodeCtl(h)
		if err != nil {
			return
		}
		switch c.Op {
		case inahdr.CtlPlan:
			p := Plan{Chunks: c.Chunks, INA: c.Slots, PS: c.PSChunks}
			w.plans[c.AllReduce] = p
			if st := w.st; st != nil && st.ar == c.AllReduce {
				switch {
				case !st.planned:
					w.setPlan(p)
				case p.INA == 0 && st.plan.INA > 0 && st.psFrom == st.chunks:
					// Demoted (PS.demote): the lease is lost for good;
					// what is not sent yet goes over RC.
					st.psFrom = st.next
					st.rep.Demoted = true
					w.pump(env)
				}
			}
		case inahdr.CtlPull:
			w.pull(c.AllReduce, c.Chunk)
		}
		return
	}
	if h.Has(inahdr.FlagResult) {
		w.result(h, false)
	}
}

// pull resends chunk k of all-reduce ar raw on the RC path, once the
// worker has begun ar: before, its gradient is not computed (the worker is
// a straggler, or its previous all-reduce has not ended), and the pull
// waits for begin.
func (w *Worker) pull(ar uint16, k uint32) {
	for i := 0; i < w.Len(); i++ {
		t := w.Tensor(i)
		if t.AllReduce != ar || int(k)*w.cfg.Values >= t.Len() {
			continue
		}
		if i > w.cur || (i == w.cur && w.st == nil) {
			w.early = append(w.early, earlyPull{tensor: i, chunk: k})
			return
		}
		w.pullChunk(i, k)
		return
	}
}

// pullChunk sends chunk k of tensor i raw on the RC path.
func (w *Worker) pullChunk(i int, k uint32) {
	buf := make([]byte, inahdr.Len+4*w.cfg.Values)
	n := w.EncodeChunk(buf, i, k, k, inahdr.FlagBypass|inahdr.FlagResend, nil)
	w.post(rdma.WorkRequest{Op: rdma.WRSend, Data: buf[:n]})
	if w.st != nil && w.st.ar == w.Tensor(i).AllReduce {
		w.st.rep.Pulls++
	}
}

// Timer implements emu.Node.
func (w *Worker) Timer(env *emu.Env, key uint64) {
	w.now = env.Now()
	switch key {
	case keyQP:
		w.qpTimer.Expired()
		w.qp.HandleTimeout(w.now)
		w.drain(env)
	case keyResult:
		w.armedRT = false
		w.expire()
	case keyUC:
		w.armedUC = false
		w.expireUC(env)
	case keyGap:
		if w.st == nil && w.cur < w.Len() {
			w.begin(env)
		}
	}
	w.flush(env)
}

// FetchGap: a switch result for the INA chunk sent m-th means the results
// of INA chunks sent before m − FetchGap were most likely lost: fetch them
// from the PS without waiting for ResultTimeout (slots complete roughly in
// send order; a spurious fetch only costs one RC message each way).
const FetchGap = 32

func (w *Worker) gapFetch(m int) {
	st := w.st
	for ; st.scan < m-FetchGap; st.scan++ {
		c := st.inaSent[st.scan]
		if !st.acked[c] && !st.have[c] {
			break // my own contribution is still in RC recovery: wait for it
		}
		if !st.have[c] && !st.fetched[c] {
			st.fetched[c] = true
			st.rep.Fetches++
			w.postCtl(ctl(inahdr.Ctl{Op: inahdr.CtlFetch, Job: w.cfg.Job, AllReduce: st.ar, Chunk: c}))
		}
	}
}

// expire fetches results overdue at now.
func (w *Worker) expire() {
	st := w.st
	if st == nil {
		return
	}
	for st.dlHead < len(st.dl) && st.dl[st.dlHead].At <= w.now {
		k := st.dl[st.dlHead].Chunk
		st.dlHead++
		if !st.have[k] && !st.fetched[k] {
			st.fetched[k] = true
			st.rep.Fetches++
			w.postCtl(ctl(inahdr.Ctl{Op: inahdr.CtlFetch, Job: w.cfg.Job, AllReduce: st.ar, Chunk: k}))
		}
	}
	st.dl, st.dlHead = Compact(st.dl, st.dlHead)
}

// flush advances the all-reduce, sends frames and re-arms timers.
func (w *Worker) flush(env *emu.Env) {
	for i := 0; i < 4; i++ {
		w.pump(env)
		if st := w.st; st != nil && st.planned && st.nHave == st.chunks {
			w.Finish(*st.rep, w.now)
			w.postCtl(ctl(inahdr.Ctl{Op: inahdr.CtlDone, Job: w.cfg.Job, AllReduce: st.ar}))
			w.st = nil
			w.cur++
			if w.cur < w.Len() {
				if at := w.NextReady(&w.cfg.Timeline); at > w.now {
					w.gap(env, at)
				} else {
					w.begin(env)
					continue
				}
			}
		}
		break
	}
	rdma.FlushQP(env, 0, w.qp, keyQP, &w.qpTimer)
	// A deadline whose chunk no longer needs it (its result is in, or it
	// was fetched) is dropped before a timer is armed for it, as the
	// baselines do: otherwise the timer fires once per chunk sent, an RTO
	// after it, to find the result long in.
	st := w.st
	if st == nil {
		return
	}
	if !w.armedRT {
		for st.dlHead < len(st.dl) && (st.have[st.dl[st.dlHead].Chunk] || st.fetched[st.dl[st.dlHead].Chunk]) {
			st.dlHead++
		}
		if st.dlHead < len(st.dl) {
			env.SetTimer(st.dl[st.dlHead].At, keyResult)
			w.armedRT = true
		}
	}
	if !w.armedUC {
		for st.ucHead < len(st.ucDL) && st.have[st.ucDL[st.ucHead].Chunk] {
			st.ucHead++
		}
		if st.ucHead < len(st.ucDL) {
			env.SetTimer(st.ucDL[st.ucHead].At, keyUC)
			w.armedUC = true
		}
	}
}

// UCRTO returns the UC path's retransmission timeout now, and the
// round-trip estimate it follows (ok is false before the first sample).
func (w *Worker) UCRTO() (rto, srtt, rttvar time.Duration, ok bool) {
	return w.ucRTO(), w.srtt, w.rttvar, w.rttOK
}
