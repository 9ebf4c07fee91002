// Package baseline implements the comparison points of FreeINA on the same
// emulator, switch and host code (issue 5): no INA (a parameter server
// alone, "ps", and a host ring all-reduce, "ring"), and three INA clients
// that drive the switch's built-in policies — SwitchML ("switchml": static
// slots with shadow copies, per-chunk retransmission timers, a self-clocked
// window), ATP ("atp": hashed best-effort aggregators, results through the
// PS, PS fallback, timeout-based loss recovery) and ESA ("esa": ATP with
// priority preemption). Every node is a deterministic emu.Node; New builds a
// testbed the same way for every kind. The protocols are described in
// README.md next to this file.
package baseline

import (
	"encoding/binary"
	"time"

	"github.com/inabox/inabox/emu"
	"github.com/inabox/inabox/host"
	"github.com/inabox/inabox/rdma"
	"github.com/inabox/inabox/switch/inahdr"
)

// Report is a worker's account of one all-reduce.
type Report struct {
	AllReduce  uint16
	Start, End time.Duration
	Chunks     int
	Clipped    int
	// Sent counts first transmissions of chunk messages; Retransmits
	// retransmissions on timeout (INA path); PSResends retransmissions sent
	// on the PS path (ATP/ESA: FlagOverflow|FlagResend); PeerRequests
	// SwitchML re-contribution requests sent to peers; ReContribs chunks
	// re-sent because a peer asked.
	Sent, Retransmits, PSResends, PeerRequests, ReContribs int
	// SwitchResults came from the switch (multicast or a stored result
	// unicast back), PSResults from the PS; Dups are results already held.
	SwitchResults, PSResults, Dups int
}

// clientBase is what every baseline worker shares: tensors, quantization,
// results, reports and the compute gaps between all-reduces.
type clientBase struct {
	job     uint16
	rank    int
	n       int
	values  int
	quant   host.Quantizer
	tensors []host.Tensor
	results [][]int32
	rexp    [][]int8
	reports []Report
	start   time.Duration // arrival of the job
	gap     time.Duration // compute time before each all-reduce
	cur     int
	active  bool // an all-reduce is in progress
	waiting bool // the gap timer is armed
	planned bool // at is the next all-reduce's start
	at      time.Duration
	now     time.Duration
	qbuf    []int32
}

const keyGap = 1 << 40

func (b *clientBase) init(job uint16, rank, n, values int, q host.Quantizer, ts []host.Tensor) {
	b.job, b.rank, b.n, b.values = job, rank, n, values
	q.Workers = n
	b.quant = q
	b.tensors = ts
	b.results = make([][]int32, len(ts))
	b.rexp = make([][]int8, len(ts))
	b.qbuf = make([]int32, values)
}

func (b *clientBase) chunksOf(i int) uint32 {
	return uint32((len(b.tensors[i].Data) + b.values - 1) / b.values)
}

// Done reports whether every tensor has been all-reduced.
func (b *clientBase) Done() bool { return len(b.reports) == len(b.tensors) }

// Result returns tensor i's int32 sum.
func (b *clientBase) Result(i int) []int32 { return b.results[i] }

// Reports returns one report per finished all-reduce.
func (b *clientBase) Reports() []Report { return b.reports }

// Dequantized returns tensor i's sum in float64.
func (b *clientBase) Dequantized(i int) []float64 {
	out := make([]float64, len(b.results[i]))
	V := b.values
	for c := 0; c*V < len(out); c++ {
		hi := min((c+1)*V, len(out))
		b.quant.Dequantize(out[c*V:hi], b.results[i][c*V:hi], b.rexp[i][c])
	}
	return out
}

// schedule arms the timer for the next all-reduce (after the gap), or
// reports true if it should begin now.
func (b *clientBase) schedule(env *emu.Env) bool {
	if b.active || b.waiting || b.cur >= len(b.tensors) {
		return false
	}
	if !b.planned {
		b.at = b.now + b.gap
		if b.cur == 0 {
			b.at = max(b.start, 0) + b.gap
		}
		b.planned = true
	}
	if b.at <= b.now {
		b.planned = false
		return true
	}
	env.SetTimer(b.at, keyGap)
	b.waiting = true
	return false
}

// beginBase allocates the result of tensor cur and returns its report.
func (b *clientBase) beginBase() *Report {
	i := b.cur
	b.results[i] = make([]int32, len(b.tensors[i].Data))
	b.rexp[i] = make([]int8, b.chunksOf(i))
	b.active = true
	return &Report{AllReduce: b.tensors[i].AllReduce, Start: b.now, Chunks: int(b.chunksOf(i))}
}

func (b *clientBase) finish(rep *Report) {
	rep.End = b.now
	b.reports = append(b.reports, *rep)
	b.active = false
	b.cur++
}

func (b *clientBase) exp(i int, c uint32) int8 {
	t := &b.tensors[i]
	if b.quant.Mode == host.QuantExponent && int(c) < len(t.Exps) {
		return t.Exps[c]
	}
	return 0
}

// encode writes chunk c of tensor i (INA header with hdrChunk as its chunk
// field, and the quantized values) into buf and returns its length.
func (b *clientBase) encode(buf []byte, i int, c, hdrChunk uint32, flags uint8, rep *Report) int {
	t := &b.tensors[i]
	lo := int(c) * b.values
	hi := min(lo+b.values, len(t.Data))
	e := b.exp(i, c)
	q := b.qbuf[:hi-lo]
	cl := b.quant.Quantize(q, t.Data[lo:hi], e)
	if rep != nil {
		rep.Clipped += cl
	}
	inahdr.Header(buf).Encode(inahdr.Meta{Flags: flags, Job: b.job, AllReduce: t.AllReduce, Count: hi - lo,
		Chunk: hdrChunk, Worker: uint8(b.rank), Exponent: e, Bitmap: 1 << b.rank})
	for k, v := range q {
		binary.BigEndian.PutUint32(buf[inahdr.Len+4*k:], uint32(v))
	}
	return inahdr.Len + 4*len(q)
}

// store copies a result for chunk c of tensor i; it reports false if the
// header does not fit the chunk.
func (b *clientBase) store(i int, c uint32, h inahdr.Header) bool {
	res := b.results[i]
	lo := int(c) * b.values
	hi := min(lo+b.values, len(res))
	if lo >= len(res) || h.Count() != hi-lo || len(h) < h.Size() {
		return false
	}
	for k := lo; k < hi; k++ {
		res[k] = h.Value(k - lo)
	}
	b.rexp[i][c] = h.Exponent()
	return true
}

// tensorIndex returns the index of the tensor with all-reduce id ar, or -1.
func (b *clientBase) tensorIndex(ar uint16) int {
	for i := range b.tensors {
		if b.tensors[i].AllReduce == ar {
			return i
		}
	}
	return -1
}

// ucSend builds a UC SEND Only frame carrying payload and sends it on
// port 0.
func ucSend(env *emu.Env, src, dst rdma.Endpoint, destQP, srcQPN uint32, psn uint32, payload []byte) {
	fh := rdma.FrameHeader{Src: src, Dst: dst, Opcode: rdma.OpSendOnly, DestQP: destQP,
		SrcPort: rdma.SourcePort(srcQPN), PSN: psn & rdma.PSNMask, TOS: 2}
	p := env.NewPacket()
	p.SetLen(fh.Len(len(payload)))
	n, err := fh.Encode(p.Bytes(), payload)
	if err != nil {
		env.Free(p)
		return
	}
	p.SetLen(n)
	p.Bytes()[rdma.HeadersLen] = 0x24 // UC SEND Only
	_ = rdma.SetICRC(p.Bytes())
	env.Send(0, p)
}

// ucPayload returns the payload of a UC SEND Only frame with a good ICRC
// and its destination QP, or nil.
func ucPayload(b []byte) ([]byte, uint32) {
	const bth = rdma.HeadersLen
	if len(b) < bth+rdma.BTHLen+rdma.ICRCLen || b[bth] != 0x24 || !rdma.CheckICRC(b) {
		return nil, 0
	}
	ulen := int(binary.BigEndian.Uint16(b[rdma.EthLen+rdma.IPv4Len+4:]))
	end := rdma.EthLen + rdma.IPv4Len + ulen - rdma.ICRCLen - rdma.BTH(b[bth:]).PadCount()
	if end < bth+rdma.BTHLen || end > len(b) {
		return nil, 0
	}
	return b[bth+rdma.BTHLen : end], rdma.BTH(b[bth:]).DestQP()
}

// inaHeader returns the INA header at pl if it is one with its values.
func inaHeader(pl []byte) (inahdr.Header, bool) {
	if len(pl) < inahdr.Len || pl[0] != inahdr.Version {
		return nil, false
	}
	h := inahdr.Header(pl)
	if len(pl) < h.Size() {
		return nil, false
	}
	return h, true
}

// deadline is a per-chunk retransmission deadline.
type deadline struct {
	at    time.Duration
	chunk uint32
}
