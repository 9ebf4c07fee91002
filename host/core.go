package host

import (
	"slices"
	"time"

	"github.com/inabox/inabox/emu"
	"github.com/inabox/inabox/internal/hugemem"
	"github.com/inabox/inabox/rdma"
	"github.com/inabox/inabox/switch/inahdr"
)

// Tensor is one all-reduce a worker performs.
type Tensor struct {
	AllReduce uint16
	// Data is the gradient, or nil if Source makes it.
	Data []float32
	// Source, if Data is nil, makes the gradient's values when they are
	// sent: a gradient too large to hold (a true-scale run).
	Source Source
	// Exps are the per-chunk exponents (QuantExponent); every worker must
	// pass the same ones (see ExponentsFrom).
	Exps []int8
}

// Source makes a gradient's values on demand (Tensor.Source).
type Source interface {
	// Len is the number of values.
	Len() int
	// Fill writes values [off, off+len(dst)) into dst.
	Fill(dst []float32, off int)
}

// WireSource is a Source that can also hand out its chunks in their wire
// form, quantized as the worker sends them, made ahead of the call (on
// another goroutine, say: WirePlan.Quantize is a pure function). NewCore
// calls PlanWire once, with how the worker quantizes the tensor's chunks.
// FillWire writes the wire form of chunks [k, k+len(clip)) into wire
// (4 bytes a value; the tensor's last chunk may be short) and each one's
// clipped count into clip, or reports false and writes nothing (the worker
// then quantizes Fill's values itself). wire and clip stay the caller's.
type WireSource interface {
	Source
	PlanWire(WirePlan)
	FillWire(wire []byte, clip []int32, k uint32) bool
}

// WirePlan is how a worker quantizes a tensor's chunks for the wire.
type WirePlan struct {
	Quant  Quantizer
	Values int    // values a chunk
	Exps   []int8 // chunk k's exponent under QuantExponent (0 past the end)
}

// Exp returns chunk k's exponent.
func (p *WirePlan) Exp(k uint32) int8 {
	if p.Quant.Mode == QuantExponent && int(k) < len(p.Exps) {
		return p.Exps[k]
	}
	return 0
}

// Quantize writes the wire form of chunks k, k+1, … into wire (4 bytes a
// value) and each one's clipped count into clip: vals are the values from
// chunk k's first on, a whole number of chunks but for a short last one.
func (p *WirePlan) Quantize(wire []byte, clip []int32, vals []float32, k uint32) {
	for j := 0; j*p.Values < len(vals); j++ {
		lo := j * p.Values
		hi := min(lo+p.Values, len(vals))
		clip[j] = int32(p.Quant.quantizeWire(wire[4*lo:], vals[lo:hi], p.Exp(k+uint32(j))))
	}
}

// Len is the number of values of t.
func (t *Tensor) Len() int {
	if t.Data == nil && t.Source != nil {
		return t.Source.Len()
	}
	return len(t.Data)
}

// Values returns values [lo, hi) of t: a slice of Data, or scratch (which
// must hold hi-lo values) filled by Source.
func (t *Tensor) Values(scratch []float32, lo, hi int) []float32 {
	if t.Data == nil && t.Source != nil {
		scratch = scratch[:hi-lo]
		t.Source.Fill(scratch, lo)
		return scratch
	}
	return t.Data[lo:hi]
}

// Report is a worker's account of one all-reduce. Every client fills the
// counters its protocol has; the others stay 0.
type Report struct {
	AllReduce  uint16
	Start, End time.Duration
	// Chunks is the number of chunks (packets of Values values) of the
	// tensor; Clipped the values the quantizer clipped.
	Chunks, Clipped int
	// Plan is FreeINA's partition of the chunks between the two paths.
	Plan Plan
	// Sent counts first transmissions of chunk messages.
	Sent int
	// SwitchResults came from the switch (its multicast, or a stored
	// result sent back); PSResults from the parameter server; Dups are
	// results already held.
	SwitchResults, PSResults, Dups int
	// Retransmits counts INA-path contributions resent after a timeout;
	// PSResends contributions resent on the PS path (ATP, ESA:
	// FlagOverflow|FlagResend); Fallbacks chunks sent raw over RC after
	// UCRetries timeouts (FreeINA's UC path).
	Retransmits, PSResends, Fallbacks int
	// Fetches asked the PS for a late result, Pulls answered its requests
	// for a raw contribution, Grants are GRANT multicasts seen (FreeINA).
	Fetches, Pulls, Grants int
	// PeerRequests are SwitchML re-contribution requests sent to peers;
	// ReContribs chunks re-sent because a peer asked.
	PeerRequests, ReContribs int
	// Demoted: the PS moved the chunks not yet sent to the PS path, the
	// lease being lost for good (FreeINA's UC path, PS.demote).
	Demoted bool
}

// RxStats count the frames an endpoint dropped on arrival, by cause (its RC
// QPs count their own: rdma.Stats).
type RxStats struct {
	// BadICRC: damaged past the FCS (the end-to-end check caught it).
	BadICRC uint64
	// Forged: a result or control message not from where it must come
	// from (a result not from the switch, a GRANT not from the switch).
	Forged uint64
	// Stale: for another job, or an all-reduce or chunk the endpoint is
	// not waiting for.
	Stale uint64
	// Malformed: a well-formed frame whose contents cannot be (a chunk
	// beyond its all-reduce).
	Malformed uint64
}

// Add returns the sum of r and o.
func (r RxStats) Add(o RxStats) RxStats {
	return RxStats{BadICRC: r.BadICRC + o.BadICRC, Forged: r.Forged + o.Forged, Stale: r.Stale + o.Stale,
		Malformed: r.Malformed + o.Malformed}
}

// EncodeInPlace finishes p as the frame of fh around its payload, the n
// bytes at fh.PayloadOffset() that the caller wrote there, and sets p's
// length: with t, fh's template, where it fits (n is its payload length
// and env defers ICRCs: a copy of the headers and the PSN), else by
// encoding fh (EncodeSealed). It returns what fh.Encode returns, and
// frees nothing.
func EncodeInPlace(env *emu.Env, p *emu.Packet, fh *rdma.FrameHeader, t *rdma.Template, n int) error {
	if n == t.PayloadLen() && env.Defers() {
		if m := t.EncodeDeferred(p.Bytes(), fh.PSN); m > 0 { // 0: p is too short for it
			p.SetLen(m)
			p.Defer(rdma.SealICRC)
			return nil
		}
	}
	p.SetLen(fh.Len(n))
	b := p.Bytes()
	off := fh.PayloadOffset()
	_, err := EncodeSealed(env, p, fh, b, b[off:off+n])
	return err
}

// EncodeSealed encodes frame header fh and payload into buf, p's bytes
// (rdma.FrameHeader.Encode), and marks p sealed. Where env.Defers, the
// ICRC is deferred (emu.Packet.Defer): written only where the frame is
// seen, not on every send.
func EncodeSealed(env *emu.Env, p *emu.Packet, fh *rdma.FrameHeader, buf, payload []byte) (int, error) {
	if env.Defers() {
		n, err := fh.EncodeDeferred(buf, payload)
		if err == nil {
			p.Defer(rdma.SealICRC)
		}
		return n, err
	}
	n, err := fh.Encode(buf, payload)
	p.Sealed = err == nil
	return n, err
}

// UCFrame checks an arriving UC SEND Only frame p: it returns its payload
// if its ICRC is right (or p is sealed: emu.Packet.Sealed) and it comes
// from src (when src is set), counting the drop in rx otherwise.
func UCFrame(rx *RxStats, p *emu.Packet, src rdma.Endpoint) ([]byte, bool) {
	b := p.Bytes()
	pl, _, ok := rdma.UCPayloadSealed(b, p.Sealed)
	switch {
	case !ok:
		if !rdma.CheckSealed(b, p.Sealed) {
			rx.BadICRC++
		}
		return nil, false
	case src.IP.IsValid() && rdma.RoCE(b).IPv4().Src() != src.IP:
		rx.Forged++
		return nil, false
	}
	return pl, true
}

// Deadline is a per-chunk timer entry: at is when chunk's timer fires.
type Deadline struct {
	At    time.Duration
	Chunk uint32
}

// Core is what every worker endpoint shares, FreeINA's and the baselines':
// its place in the job, the tensors it all-reduces in order, their
// quantization into chunks of Values int32 values, the results, and one
// Report per finished all-reduce.
type Core struct {
	job     uint16
	rank    int
	workers int
	values  int
	quant   Quantizer
	tensors []Tensor
	results [][]int32
	rexp    [][]int8
	// spares are dropped results' buffers, each reused by a later Begin
	// that fits in it (the smallest that does): an iteration's buckets
	// then take the buffers of the previous iteration's, and cost no fresh
	// memory, page faults or garbage.
	spares  [][]int32
	reports []Report
	qb      quantBlock
	rx      RxStats
	lost    bool
	observe func(Step)
	// sink, if set, takes the results in place of results
	// (SetResultSink); scratch holds a chunk's values on their way to it.
	sink    ResultSink
	scratch []int32
}

// ResultSink takes an endpoint's results chunk by chunk as they arrive,
// instead of the endpoint keeping them: a runner that checks each chunk
// then holds no result (at true scale the results are most of a run's
// memory).
type ResultSink interface {
	// ResultChunk is chunk k of all-reduce i's int32 sum, the values from
	// element k×Values on, with its exponent; an endpoint passes each chunk
	// once per Begin of the all-reduce. vals belongs to the endpoint: it is
	// valid only during the call.
	ResultChunk(i int, k uint32, vals []int32, exp int8)
}

// SetResultSink makes the endpoint pass its results to s instead of
// keeping them: Result and ResultExps are then nil, Dequantized empty.
// Call it before the first all-reduce begins.
func (c *Core) SetResultSink(s ResultSink) {
	c.sink = s
	c.scratch = make([]int32, c.values)
}

// Step is one step of an endpoint's all-reduces, as an observer (a fault
// trigger of the harness) sees it.
type Step struct {
	Kind StepKind
	// Index is the all-reduce's index (its tensor's, from 0, in the order
	// they run); Chunks its number of chunks.
	Index  int
	Chunks uint32
	// Chunk is the chunk whose result a StepChunk stored.
	Chunk uint32
}

// StepKind says what a Step is.
type StepKind uint8

const (
	// StepBegin: the all-reduce begins (its first packet leaves now).
	StepBegin StepKind = iota
	// StepChunk: a chunk's result is stored (once per chunk: endpoints
	// drop duplicates before they store).
	StepChunk
	// StepEnd: the all-reduce has finished at this endpoint.
	StepEnd
)

// Observe calls fn at each Step of the endpoint's all-reduces, on the
// endpoint's own event (so fn may schedule emulator events at or after
// now). nil stops observing. Observing changes nothing the endpoint does.
func (c *Core) Observe(fn func(Step)) { c.observe = fn }

// LoseState records a crash that lost the endpoint's state (emu.Resetter):
// its finished all-reduces (reports, checked results) are its checkpoint,
// everything in flight is gone. An endpoint whose protocol cannot rejoin
// its job from there reports it (StateLost) so that the run stops at once,
// naming it, instead of waiting for what will never come.
func (c *Core) LoseState() { c.lost = true }

// RestoreReports sets the all-reduces the endpoint had finished before a
// crash that lost its state, from a checkpoint (their reports): a new
// endpoint then stands where the crashed one did after LoseState. Their
// results are not kept (Result is nil for them). The endpoint's own
// position (the all-reduce it is at) must follow: see the baseline
// clients' Restore.
func (c *Core) RestoreReports(reps []Report) {
	c.reports = append(c.reports[:0], reps...)
}

// StateLost reports whether the endpoint lost its state in a crash.
func (c *Core) StateLost() bool { return c.lost }

// Rx returns the counters of the frames the endpoint dropped on arrival.
func (c *Core) Rx() RxStats { return c.rx }

// RxCounters returns the counters for the endpoint to count its drops in.
func (c *Core) RxCounters() *RxStats { return &c.rx }

// NewCore returns the core of worker rank (of workers) of job, with
// values int32 values per chunk (0: 64) and quantizer q (its Workers is
// set to workers if zero).
func NewCore(job uint16, rank, workers, values int, q Quantizer, tensors []Tensor) Core {
	if values == 0 {
		values = 64
	}
	if q.Workers == 0 {
		q.Workers = workers
	}
	c := Core{job: job, rank: rank, workers: workers, values: values, quant: q, tensors: tensors,
		results: make([][]int32, len(tensors)), rexp: make([][]int8, len(tensors)), qb: quantBlock{ti: -1}}
	for i, t := range tensors {
		if ws, ok := t.Source.(WireSource); ok && t.Data == nil {
			ws.PlanWire(c.plan(i))
		}
	}
	return c
}

// Job, Rank, Workers and Values return the core's identity and chunk size.
func (c *Core) Job() uint16 { return c.job }
func (c *Core) Rank() int   { return c.rank }
func (c *Core) Workers() int {
	return c.workers
}
func (c *Core) Values() int { return c.values }

// Quantizer returns the worker's quantizer.
func (c *Core) Quantizer() Quantizer { return c.quant }

// Tensor returns tensor i; Len how many there are.
func (c *Core) Tensor(i int) *Tensor { return &c.tensors[i] }
func (c *Core) Len() int             { return len(c.tensors) }

// TensorIndex returns the index of the tensor with all-reduce id ar, or -1.
func (c *Core) TensorIndex(ar uint16) int {
	for i := range c.tensors {
		if c.tensors[i].AllReduce == ar {
			return i
		}
	}
	return -1
}

// Chunks returns the number of chunks of tensor i.
func (c *Core) Chunks(i int) uint32 {
	return uint32((c.tensors[i].Len() + c.values - 1) / c.values)
}

// Exp returns chunk k of tensor i's exponent (QuantExponent), else 0.
func (c *Core) Exp(i int, k uint32) int8 {
	t := &c.tensors[i]
	if c.quant.Mode == QuantExponent && int(k) < len(t.Exps) {
		return t.Exps[k]
	}
	return 0
}

// plan is how tensor i's chunks are quantized.
func (c *Core) plan(i int) WirePlan {
	return WirePlan{Quant: c.quant, Values: c.values, Exps: c.tensors[i].Exps}
}

// Begin allocates tensor i's result (unless a ResultSink takes it) and
// returns its report, started now.
func (c *Core) Begin(i int, now time.Duration) Report {
	n := c.Chunks(i)
	if c.sink != nil {
		return c.begun(i, n, now)
	}
	m := c.tensors[i].Len()
	best := -1
	for j, b := range c.spares {
		if cap(b) >= m && (best < 0 || cap(b) < cap(c.spares[best])) {
			best = j
		}
	}
	if best >= 0 {
		c.results[i] = c.spares[best][:m]
		clear(c.results[i])
		c.spares = slices.Delete(c.spares, best, best+1)
	} else {
		c.results[i] = hugemem.Make[int32](m)
	}
	c.rexp[i] = make([]int8, n)
	return c.begun(i, n, now)
}

// begun reports the begin of all-reduce i of n chunks.
func (c *Core) begun(i int, n uint32, now time.Duration) Report {
	if c.observe != nil {
		c.observe(Step{Kind: StepBegin, Index: i, Chunks: n})
	}
	return Report{AllReduce: c.tensors[i].AllReduce, Start: now, Chunks: int(n)}
}

// Finish records rep, ended now.
func (c *Core) Finish(rep Report, now time.Duration) {
	rep.End = now
	c.reports = append(c.reports, rep)
	if c.observe != nil {
		i := len(c.reports) - 1 // all-reduces finish in order
		c.observe(Step{Kind: StepEnd, Index: i, Chunks: c.Chunks(i)})
	}
}

func (c *Core) observeChunk(i int, k uint32) {
	c.observe(Step{Kind: StepChunk, Index: i, Chunks: c.Chunks(i), Chunk: k})
}

// EncodeChunk writes chunk k of tensor i into buf — the INA header (with
// hdrChunk as its chunk field and flags) and the quantized values — and
// returns its length; clipped values are counted in rep if it is not nil.
//
// Chunks sent in order are quantized a block at a time (quantBlock): one
// sequential pass over the tensor, which the memory prefetches, instead of
// a few cache lines of it per packet.
func (c *Core) EncodeChunk(buf []byte, i int, k, hdrChunk uint32, flags uint8, rep *Report) int {
	t := &c.tensors[i]
	lo := int(k) * c.values
	hi := min(lo+c.values, t.Len())
	e := c.Exp(i, k)
	inahdr.Header(buf).Encode(inahdr.Meta{Flags: flags, Job: c.job, AllReduce: t.AllReduce, Count: hi - lo,
		Chunk: hdrChunk, Worker: uint8(c.rank), Exponent: e, Bitmap: 1 << c.rank})
	vals := buf[inahdr.Len : inahdr.Len+4*(hi-lo)]
	b := &c.qb
	if b.ti != i || k >= b.end {
		c.fillBlock(i, k)
	}
	var cl int
	if k >= b.first { // in the block
		copy(vals, b.wire[4*(lo-int(b.first)*c.values):])
		cl = int(b.clip[k-b.first])
	} else { // an earlier chunk, sent again
		cl = c.quant.quantizeWire(vals, t.Values(c.qb.src, lo, hi), e)
	}
	if rep != nil {
		rep.Clipped += cl
	}
	return inahdr.Len + len(vals)
}

// quantBlock holds chunks [first, end) of tensor ti quantized, in wire
// order (big-endian int32), and each one's clipped count.
type quantBlock struct {
	ti         int
	first, end uint32
	wire       []byte
	clip       []int32
	src        []float32 // the block's values, from a Tensor.Source
}

// quantBlockValues is how many values a quantBlock holds (16 KiB of
// float32: a few chunks' worth stays in the cache beside the rest).
const quantBlockValues = 4096

// fillBlock quantizes the chunks of tensor i from k on into the block.
func (c *Core) fillBlock(i int, k uint32) {
	b := &c.qb
	per := max(quantBlockValues/c.values, 1)
	if b.wire == nil {
		b.wire, b.clip, b.src = make([]byte, 4*per*c.values), make([]int32, per), make([]float32, per*c.values)
	}
	t := &c.tensors[i]
	n := min(uint32(per), max(c.Chunks(i), k)-k)
	first := int(k) * c.values
	end := min(first+int(n)*c.values, t.Len())
	b.ti, b.first, b.end = i, k, k+n
	if ws, ok := t.Source.(WireSource); ok && t.Data == nil && ws.FillWire(b.wire[:4*(end-first)], b.clip[:n], k) {
		return // made ahead
	}
	p := c.plan(i)
	p.Quantize(b.wire, b.clip, t.Values(b.src, first, end), k) // one Fill for the block
}

// Store copies the values of h, the result of chunk k of tensor i; it
// reports false if h does not fit the chunk.
func (c *Core) Store(i int, k uint32, h inahdr.Header) bool {
	res, n := c.results[i], len(c.results[i])
	if c.sink != nil {
		res, n = c.scratch, c.tensors[i].Len()
	}
	lo := int(k) * c.values
	hi := min(lo+c.values, n)
	if lo >= n || h.Count() != hi-lo || len(h) < h.Size() {
		return false
	}
	if c.sink != nil {
		h.ReadValues(res[:hi-lo])
		c.sink.ResultChunk(i, k, res[:hi-lo], h.Exponent())
	} else {
		h.ReadValues(res[lo:hi])
		c.rexp[i][k] = h.Exponent()
	}
	if c.observe != nil {
		c.observeChunk(i, k)
	}
	return true
}

// StoreValues copies vals, the int32 sum of chunk k of tensor i, with
// exponent e (results computed on the host, e.g. by a ring).
func (c *Core) StoreValues(i int, k uint32, vals []int32, e int8) {
	if c.sink != nil {
		c.sink.ResultChunk(i, k, vals, e)
	} else {
		copy(c.results[i][int(k)*c.values:], vals)
		c.rexp[i][k] = e
	}
	if c.observe != nil {
		c.observeChunk(i, k)
	}
}

// Done reports whether every tensor has been all-reduced.
func (c *Core) Done() bool { return len(c.reports) == len(c.tensors) }

// Finished is the number of all-reduces finished (they finish in order).
func (c *Core) Finished() int { return len(c.reports) }

// Reports returns one report per finished all-reduce.
func (c *Core) Reports() []Report { return c.reports }

// Result returns the int32 sum of tensor i (valid once finished).
func (c *Core) Result(i int) []int32 { return c.results[i] }

// DropResult releases tensor i's result (a runner that has checked it
// keeps memory bounded on long runs); Result(i) is nil afterwards.
func (c *Core) DropResult(i int) {
	if r := c.results[i]; cap(r) > 0 {
		c.spares = append(c.spares, r)
		if len(c.spares) > maxSpares { // keep the largest
			small := 0
			for j, b := range c.spares {
				if cap(b) < cap(c.spares[small]) {
					small = j
				}
			}
			c.spares = slices.Delete(c.spares, small, small+1)
		}
	}
	c.results[i] = nil
}

// maxSpares bounds the dropped results a Core keeps for reuse: more than
// the buckets of an iteration of the models shipped (VGG and ResNet at 25
// MiB: 4 to 5; BERT-large 37, whose buckets are small).
const maxSpares = 8

// ResultExps returns the per-chunk exponents of tensor i's result.
func (c *Core) ResultExps(i int) []int8 { return c.rexp[i] }

// Dequantized returns tensor i's sum in float64.
func (c *Core) Dequantized(i int) []float64 {
	out := make([]float64, len(c.results[i]))
	V := c.values
	for k := 0; k*V < len(out); k++ {
		hi := min((k+1)*V, len(out))
		c.quant.Dequantize(out[k*V:hi], c.results[i][k*V:hi], c.rexp[i][k])
	}
	return out
}
