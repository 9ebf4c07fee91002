package baseline

import (
	"encoding/binary"
	"time"

	"github.com/inabox/inabox/emu"
	"github.com/inabox/inabox/host"
	"github.com/inabox/inabox/rdma"
	"github.com/inabox/inabox/switch/inahdr"
)

// qpSet hosts RC QPs behind port 0: a backlog per QP (posted work beyond
// the send queue waits here), transmission and timers (key = QP index).
type qpSet struct {
	qps     []*rdma.QP
	backlog []fifo[rdma.WorkRequest]
	timers  []rdma.QPTimer
}

const sqDepth = 1024

// rcQP returns an RC QP from local (qpn) to remote on template tpl.
func rcQP(tpl rdma.Config, local rdma.Endpoint, qpn uint32, remote host.Peer) (*rdma.QP, error) {
	c := tpl
	c.Local, c.Remote, c.QPN, c.RemoteQPN = local, remote.Addr, qpn, remote.QPN
	rqpn := remote.QPN
	c.SendPSN, c.RecvPSN = host.InitialPSN(qpn), host.InitialPSN(rqpn)
	c.SendQueueDepth = sqDepth
	return rdma.NewQP(c)
}

func (s *qpSet) add(q *rdma.QP) int {
	s.qps = append(s.qps, q)
	s.backlog = append(s.backlog, fifo[rdma.WorkRequest]{})
	s.timers = append(s.timers, rdma.QPTimer{})
	return len(s.qps) - 1
}

func (s *qpSet) post(i int, wr rdma.WorkRequest) { s.backlog[i].push(wr) }

// fifo is a queue in one slice that it reuses (host.Compact): a queue
// that keeps its size allocates nothing.
type fifo[T any] struct {
	v    []T
	head int
}

func (q *fifo[T]) push(x T)  { q.v = append(q.v, x) }
func (q *fifo[T]) len() int  { return len(q.v) - q.head }
func (q *fifo[T]) front() *T { return &q.v[q.head] }

func (q *fifo[T]) pop() T {
	x := q.v[q.head]
	q.head++
	q.v, q.head = host.Compact(q.v, q.head)
	return x
}

func (s *qpSet) start() {
	clear(s.timers)
}

// receive hands a frame to the QP it is addressed to; it returns the QP's
// index or -1.
func (s *qpSet) receive(now time.Duration, p *emu.Packet) int {
	b := p.Bytes()
	if len(b) < rdma.HeadersLen+rdma.BTHLen {
		return -1
	}
	qpn := rdma.BTH(b[rdma.HeadersLen:]).DestQP()
	for i, q := range s.qps {
		if q.Config().QPN == qpn {
			_ = q.ReceiveSealed(now, b, p.Sealed)
			return i
		}
	}
	return -1
}

func (s *qpSet) timer(now time.Duration, key uint64) int {
	if key >= uint64(len(s.qps)) {
		return -1
	}
	s.timers[key].Expired()
	s.qps[key].HandleTimeout(now)
	return int(key)
}

// flush posts backlogs, sends every QP's frames and re-arms timers.
func (s *qpSet) flush(env *emu.Env) {
	for i, q := range s.qps {
		bl := &s.backlog[i]
		for bl.len() > 0 && q.Outstanding() < sqDepth {
			if q.PostSend(*bl.front()) != nil {
				break
			}
			bl.pop()
		}
		rdma.FlushQP(env, 0, q, uint64(i), &s.timers[i])
	}
}

// Errors returns the first QP error, if any.
func (s *qpSet) err() error {
	for _, q := range s.qps {
		if q.Err() != nil {
			return q.Err()
		}
	}
	return nil
}

// rcClient is what the workers whose chunks travel over RC (PS-only,
// ring) share: the client base, the QPs, and the node callbacks that feed
// frames and timeouts to the QPs and let the protocol drain QP i and
// advance.
type rcClient struct {
	clientBase
	qs    qpSet
	proto interface {
		drain(i int)
		advance(env *emu.Env)
	}
}

// Start implements emu.Node.
func (w *rcClient) Start(env *emu.Env) {
	w.now = env.Now()
	w.waiting = false // after a crash the timers are gone
	w.qs.start()
	w.proto.advance(env)
}

// AcceptsDeferred implements emu.DeferAware: its QPs trust a sealed
// frame's ICRC (rdma.QP.ReceiveSealed).
func (w *rcClient) AcceptsDeferred() bool { return true }

// Receive implements emu.Node.
func (w *rcClient) Receive(env *emu.Env, port int, pkts []*emu.Packet) {
	w.now = env.Now()
	for _, p := range pkts {
		if i := w.qs.receive(w.now, p); i >= 0 {
			w.proto.drain(i)
		}
		env.Free(p)
	}
	w.proto.advance(env)
}

// Timer implements emu.Node.
func (w *rcClient) Timer(env *emu.Env, key uint64) {
	w.now = env.Now()
	if key == keyGap {
		w.waiting = false
	} else if i := w.qs.timer(w.now, key); i >= 0 {
		w.proto.drain(i)
	}
	w.proto.advance(env)
}

// Err returns the first error of the worker's RC QPs (a QP that gave up),
// or nil.
func (w *rcClient) Err() error { return w.qs.err() }

// QPs returns the worker's RC QPs.
func (w *rcClient) QPs() []*rdma.QP { return w.qs.qps }

// ---------------------------------------------------------------- PS only

// PSOnlyWorker pushes every chunk to the PS over its RC QP (FlagBypass:
// the switch forwards it as plain traffic) and receives each chunk's sum
// from the PS over the same connection.
type PSOnlyWorker struct {
	rcClient
	window int
	st     rcState
}

type rcState struct {
	idx    int
	ar     uint16
	chunks uint32
	next   uint32
	out    int
	have   []bool
	nHave  uint32
	rep    *Report
}

// RCConfig configures a worker whose chunks travel over RC (PS-only,
// ring): worker Rank of Workers in Job at Addr.
type RCConfig struct {
	Job           uint16
	Rank, Workers int
	Values        int
	Quant         host.Quantizer
	Addr          rdma.Endpoint
	// QP is the template of the worker's RC QPs (addresses, QPNs and
	// initial PSNs are filled in).
	QP       rdma.Config
	Timeline host.Timeline
}

// PSOnlyConfig configures a PS-only worker: its RC QP QPN to the PS's QP
// for it, at most Window chunk messages unacknowledged.
type PSOnlyConfig struct {
	RCConfig
	QPN    uint32
	PS     host.Peer
	Window int
}

// NewPSOnlyWorker returns a PS-only worker all-reducing ts in order.
func NewPSOnlyWorker(cfg PSOnlyConfig, ts []host.Tensor) (*PSOnlyWorker, error) {
	w := &PSOnlyWorker{window: cfg.Window}
	w.proto = w
	w.init(cfg.Job, cfg.Rank, cfg.Workers, cfg.Values, cfg.Quant, cfg.Timeline, ts)
	qp, err := rcQP(cfg.QP, cfg.Addr, cfg.QPN, cfg.PS)
	if err != nil {
		return nil, err
	}
	w.qs.add(qp)
	return w, nil
}

func (w *PSOnlyWorker) advance(env *emu.Env) {
	for !w.active && w.schedule(env) {
		rep := w.beginBase()
		i := w.cur
		n := w.Chunks(i)
		w.st = rcState{idx: i, ar: w.Tensor(i).AllReduce, chunks: n, have: make([]bool, n), rep: rep}
	}
	if w.active {
		st := &w.st
		for st.next < st.chunks && st.out < w.window {
			buf := make([]byte, inahdr.Len+4*w.Values())
			n := w.EncodeChunk(buf, st.idx, st.next, st.next, inahdr.FlagBypass, st.rep)
			w.qs.post(0, rdma.WorkRequest{ID: 1, Data: buf[:n]})
			st.rep.Sent++
			st.out++
			st.next++
		}
	}
	w.qs.flush(env)
}

func (w *PSOnlyWorker) drain(int) {
	q := w.qs.qps[0]
	for {
		c, ok := q.PollCompletion()
		if !ok {
			return
		}
		switch c.Opcode {
		case rdma.CompSend:
			if c.WRID == 1 && w.active {
				w.st.out--
			}
		case rdma.CompRecv:
			h, ok := inaHeader(c.Data)
			st := &w.st
			if !ok || !w.active || !h.Has(inahdr.FlagResult) || h.AllReduce() != st.ar || h.Chunk() >= st.chunks {
				continue
			}
			k := h.Chunk()
			if st.have[k] {
				st.rep.Dups++
				continue
			}
			if w.Store(st.idx, k, h) {
				st.have[k] = true
				st.nHave++
				st.rep.PSResults++
				if st.nHave == st.chunks {
					w.finish(st.rep)
				}
			}
		}
	}
}

// PSOnlyServer sums every chunk of every worker in software and sends the
// sum back to each worker over RC.
type PSOnlyServer struct {
	lost bool
	qs   qpSet
	refs []psRef
	jobs map[uint16]*rcJob
	// Chunks counts chunks summed; Messages contributions received.
	Chunks, Messages uint64
}

type psRef struct {
	job  *rcJob
	rank int
}

type rcJob struct {
	id   uint16
	n    int
	mask uint32
	qps  []int
	ars  map[uint16]map[uint32]*rcChunk
}

type rcChunk struct {
	sum []int32
	got uint32
	exp int8
}

// NewPSOnlyServer returns the PS-only server at addr hosting one RC QP
// (template tpl) per worker of every job: the QP LocalQPN[r] to
// Workers[r] (host.PSJob; UCQPN is not used).
func NewPSOnlyServer(tpl rdma.Config, addr rdma.Endpoint, jobs ...host.PSJob) (*PSOnlyServer, error) {
	p := &PSOnlyServer{jobs: map[uint16]*rcJob{}}
	for _, pj := range jobs {
		id, n := pj.Job, len(pj.Workers)
		j := &rcJob{id: id, n: n, mask: uint32(1)<<n - 1, ars: map[uint16]map[uint32]*rcChunk{}}
		for r := 0; r < n; r++ {
			qp, err := rcQP(tpl, addr, pj.LocalQPN[r], pj.Workers[r])
			if err != nil {
				return nil, err
			}
			j.qps = append(j.qps, p.qs.add(qp))
			p.refs = append(p.refs, psRef{job: j, rank: r})
		}
		p.jobs[id] = j
	}
	return p, nil
}

// Start implements emu.Node.
func (p *PSOnlyServer) Start(env *emu.Env) {
	p.qs.start()
	p.qs.flush(env) // after a crash: the QPs' timers armed anew
}

// QPs returns the server's RC QPs.
func (p *PSOnlyServer) QPs() []*rdma.QP { return p.qs.qps }

// Reset implements emu.Resetter: a crash that loses the server's state
// (its chunks' sums, its RC connections); StateLost reports it.
func (p *PSOnlyServer) Reset() { p.lost = true }

// StateLost reports whether the server lost its state in a crash.
func (p *PSOnlyServer) StateLost() bool { return p.lost }

// AcceptsDeferred implements emu.DeferAware: its QPs trust a sealed
// frame's ICRC (rdma.QP.ReceiveSealed).
func (p *PSOnlyServer) AcceptsDeferred() bool { return true }

// Receive implements emu.Node.
func (p *PSOnlyServer) Receive(env *emu.Env, port int, pkts []*emu.Packet) {
	for _, pk := range pkts {
		if i := p.qs.receive(env.Now(), pk); i >= 0 {
			p.drain(i)
		}
		env.Free(pk)
	}
	p.qs.flush(env)
}

// Timer implements emu.Node.
func (p *PSOnlyServer) Timer(env *emu.Env, key uint64) {
	if i := p.qs.timer(env.Now(), key); i >= 0 {
		p.drain(i)
	}
	p.qs.flush(env)
}

func (p *PSOnlyServer) drain(i int) {
	q := p.qs.qps[i]
	ref := p.refs[i]
	j := ref.job
	for {
		c, ok := q.PollCompletion()
		if !ok {
			return
		}
		if c.Opcode != rdma.CompRecv {
			continue
		}
		h, ok := inaHeader(c.Data)
		if !ok || h.Job() != j.id || h.Has(inahdr.FlagResult) {
			continue
		}
		p.Messages++
		chs := j.ars[h.AllReduce()]
		if chs == nil {
			chs = map[uint32]*rcChunk{}
			j.ars[h.AllReduce()] = chs
		}
		k := h.Chunk()
		ch := chs[k]
		if ch == nil {
			ch = &rcChunk{sum: make([]int32, h.Count()), exp: h.Exponent()}
			chs[k] = ch
		}
		bit := uint32(1) << ref.rank
		if ch.got&bit != 0 || len(ch.sum) != h.Count() {
			continue
		}
		ch.got |= bit
		ch.exp = max(ch.exp, h.Exponent())
		host.SatAdd(ch.sum, h.ValueBytes())
		if ch.got != j.mask {
			continue
		}
		p.Chunks++
		res := make([]byte, inahdr.Len+4*len(ch.sum))
		inahdr.Header(res).Encode(inahdr.Meta{Flags: inahdr.FlagFromPS | inahdr.FlagResult | inahdr.FlagBypass,
			Job: j.id, AllReduce: h.AllReduce(), Count: len(ch.sum), Chunk: k, Exponent: ch.exp, Bitmap: j.mask})
		for x, v := range ch.sum {
			binary.BigEndian.PutUint32(res[inahdr.Len+4*x:], uint32(v))
		}
		delete(chs, k)
		for r := 0; r < j.n; r++ {
			p.qs.post(j.qps[r], rdma.WorkRequest{Data: res})
		}
	}
}

// ------------------------------------------------------------------- ring

// RingWorker is a host ring all-reduce (reduce-scatter then all-gather),
// streamed chunk by chunk over RC QPs to its neighbours; the switch is a
// plain L2 switch. Chunk k belongs to segment k mod N; in reduce-scatter
// step s worker r sends segment r−s and adds what it receives from r−1 to
// its own values before passing it on; after N−1 steps it holds the sum of
// segment r+1, which then travels once around the ring (all-gather).
type RingWorker struct {
	rcClient
	q     []int32
	st    rcState
	stash map[uint16][][]byte // messages of an all-reduce not begun yet
	// out is the message being filled with chunk records (an INA header
	// and its values each), outN records of at most maxRecs: a message is
	// as many records as fit the QP's MTU, as NCCL fills MTU-sized frames
	// (one record per message made every frame an RC message, ACKed, and
	// cost the ring 25 % over its bound in ACKs alone).
	out           []byte
	outN, maxRecs int
	// sent are the posted messages not yet completed, oldest first (RC
	// completes sends in posting order); spare are buffers to fill again;
	// vals holds one record's values.
	sent  fifo[[]byte]
	spare [][]byte
	vals  []int32
}

// RingConfig configures a ring worker: its QP RightQPN to Right (the next
// rank's QP towards its left) carries what it sends, its QP LeftQPN from
// Left (the previous rank's QP towards its right) what it receives.
type RingConfig struct {
	RCConfig
	RightQPN, LeftQPN uint32
	Right, Left       host.Peer
}

// NewRingWorker returns a ring worker all-reducing ts in order.
func NewRingWorker(cfg RingConfig, ts []host.Tensor) (*RingWorker, error) {
	w := &RingWorker{stash: map[uint16][][]byte{}}
	w.proto = w
	w.init(cfg.Job, cfg.Rank, cfg.Workers, cfg.Values, cfg.Quant, cfg.Timeline, ts)
	mtu := cfg.QP.MTU
	if mtu == 0 {
		mtu = 1024
	}
	w.maxRecs = max(1, mtu/(inahdr.Len+4*cfg.Values))
	qr, err := rcQP(cfg.QP, cfg.Addr, cfg.RightQPN, cfg.Right)
	if err != nil {
		return nil, err
	}
	ql, err := rcQP(cfg.QP, cfg.Addr, cfg.LeftQPN, cfg.Left)
	if err != nil {
		return nil, err
	}
	w.qs.add(qr)
	w.qs.add(ql)
	return w, nil
}

func (w *RingWorker) advance(env *emu.Env) {
	for !w.active && w.schedule(env) {
		w.begin()
	}
	w.qs.flush(env)
}

func (w *RingWorker) begin() {
	rep := w.beginBase()
	i := w.cur
	t := w.Tensor(i)
	n := w.Chunks(i)
	V := w.Values()
	w.st = rcState{idx: i, ar: t.AllReduce, chunks: n, have: make([]bool, n), rep: rep}
	m := t.Len()
	w.q = make([]int32, m)
	q := w.Quantizer()
	blk, scratch := max(m, 1), []float32(nil)
	if t.Data == nil { // from its Source, 64 Ki values at a time
		blk = min(blk, max(1<<16/V, 1)*V)
		scratch = make([]float32, blk)
	}
	for lo0 := 0; lo0 < m; lo0 += blk {
		hi0 := min(lo0+blk, m)
		vals := t.Values(scratch, lo0, hi0)
		for c := lo0 / V; c*V < hi0; c++ {
			lo, hi := c*V, min(c*V+V, hi0)
			rep.Clipped += q.Quantize(w.q[lo:hi], vals[lo-lo0:hi-lo0], w.Exp(i, uint32(c)))
		}
	}
	if w.Workers() == 1 {
		for c := uint32(0); c < n; c++ {
			lo := int(c) * V
			w.StoreValues(i, c, w.q[lo:min(lo+V, len(w.q))], w.Exp(i, c))
		}
		w.finish(rep)
		return
	}
	for c := uint32(w.Rank()); c < n; c += uint32(w.Workers()) {
		lo := int(c) * V
		w.sendSeg(0, c, w.q[lo:min(lo+V, len(w.q))], w.Exp(i, c))
		rep.Sent++
	}
	w.flushSegs()
	for _, m := range w.stash[t.AllReduce] {
		w.message(m)
	}
	delete(w.stash, t.AllReduce)
}

// sendSeg adds chunk c's values at ring step step to the message being
// filled, and sends it when full.
func (w *RingWorker) sendSeg(step int, c uint32, vals []int32, e int8) {
	if w.out == nil {
		if k := len(w.spare); k > 0 {
			w.out, w.spare = w.spare[k-1][:0], w.spare[:k-1]
		} else {
			w.out = make([]byte, 0, w.maxRecs*(inahdr.Len+4*w.Values()))
		}
	}
	off := len(w.out)
	w.out = w.out[:off+inahdr.Len+4*len(vals)]
	buf := w.out[off:]
	inahdr.Header(buf).Encode(inahdr.Meta{Flags: inahdr.FlagBypass, Job: w.Job(), AllReduce: w.st.ar, Count: len(vals),
		Chunk: c, Worker: uint8(step), Exponent: e, Bitmap: 1 << w.Rank()})
	for k, v := range vals {
		binary.BigEndian.PutUint32(buf[inahdr.Len+4*k:], uint32(v))
	}
	if w.outN++; w.outN == w.maxRecs {
		w.flushSegs()
	}
}

// flushSegs sends the message being filled, if any.
func (w *RingWorker) flushSegs() {
	if w.outN == 0 {
		return
	}
	w.qs.post(0, rdma.WorkRequest{Data: w.out})
	w.sent.push(w.out)
	w.out, w.outN = nil, 0
}

func (w *RingWorker) drain(i int) {
	q := w.qs.qps[i]
	for {
		c, ok := q.PollCompletion()
		if !ok {
			return
		}
		if c.Opcode == rdma.CompSend && i == 0 && w.sent.len() > 0 {
			// The message is acknowledged: its buffer can be filled again.
			w.spare = append(w.spare, w.sent.pop())
			continue
		}
		if c.Opcode == rdma.CompRecv {
			h, ok := inaHeader(c.Data)
			if !ok || h.Job() != w.Job() {
				continue
			}
			if !w.active || h.AllReduce() != w.st.ar {
				w.stash[h.AllReduce()] = append(w.stash[h.AllReduce()], append([]byte(nil), c.Data...))
				continue
			}
			w.message(c.Data)
		}
	}
}

// message handles one ring message of the current all-reduce: its chunk
// records in order; what they pass on is sent as one message.
func (w *RingWorker) message(data []byte) {
	for len(data) >= inahdr.Len {
		h, ok := inaHeader(data)
		if !ok {
			break
		}
		w.record(h)
		data = data[h.Size():]
	}
	w.flushSegs()
}

// record handles one chunk record of a ring message.
func (w *RingWorker) record(h inahdr.Header) {
	st := &w.st
	k := h.Chunk()
	if k >= st.chunks || !w.active {
		return
	}
	V := w.Values()
	lo := int(k) * V
	hi := min(lo+V, len(w.q))
	if h.Count() != hi-lo {
		return
	}
	step := int(h.Worker())
	if cap(w.vals) < hi-lo {
		w.vals = make([]int32, V)
	}
	vals := w.vals[:hi-lo] // copied by sendSeg and StoreValues
	for x := range vals {
		vals[x] = h.Value(x)
	}
	N := w.Workers()
	if step < N-1 { // reduce-scatter
		add32(vals, w.q[lo:hi])
		if step < N-2 {
			w.sendSeg(step+1, k, vals, h.Exponent())
			return
		}
		w.have(k, vals, h.Exponent())
		w.sendSeg(N-1, k, vals, h.Exponent())
		return
	}
	w.have(k, vals, h.Exponent()) // all-gather
	if step-(N-1) < N-2 {
		w.sendSeg(step+1, k, vals, h.Exponent())
	}
}

func (w *RingWorker) have(k uint32, vals []int32, e int8) {
	st := &w.st
	if st.have[k] {
		st.rep.Dups++
		return
	}
	w.StoreValues(st.idx, k, vals, e)
	st.have[k] = true
	st.nHave++
	if st.nHave == st.chunks {
		w.finish(st.rep)
	}
}

// Err returns the first error of the server's RC QPs, or nil.
func (p *PSOnlyServer) Err() error { return p.qs.err() }
