package baseline

import (
	"encoding/binary"
	"math/bits"
	"time"

	"github.com/inabox/inabox/emu"
	"github.com/inabox/inabox/host"
	"github.com/inabox/inabox/rdma"
	"github.com/inabox/inabox/switch/inahdr"
)

// PSStats are the ATP/ESA parameter server's counters.
type PSStats struct {
	// SwitchResults: complete aggregates from the switch (FlagResult);
	// Partials: preempted partial aggregates (FlagPartial, ESA);
	// Collisions: contributions the switch forwarded for lack of an
	// aggregator (FlagCollision); Resends: contributions the workers sent
	// on the PS path (FlagOverflow|FlagResend).
	SwitchResults, Partials, Collisions, Resends uint64
	// SoftResults: chunks the PS summed itself (from partials and raw
	// contributions); Acks: ACK frames sent (first ACK of a chunk);
	// ReAcks: ACKs repeated for a contribution that arrived after the
	// result; Overlaps: pieces left out of a result because one of their
	// workers was already counted; Stale: frames of unknown jobs.
	SoftResults, Acks, ReAcks, Overlaps, Stale uint64
	// Retired: frames of an all-reduce every worker of the job had moved
	// past (answered by a release ACK, PS doc); RetiredAllReduces: the
	// all-reduces whose state the PS dropped so.
	Retired, RetiredAllReduces uint64
	// Frames: INA frames received (bytes on the wire are in the emu link
	// counters).
	Frames uint64
}

// PS is the ATP/ESA parameter server: it receives whatever the switch
// could not aggregate (collisions, preempted partial sums), complete
// aggregates (ATP sends results to the PS), and the workers' PS-path
// retransmissions; it finishes each chunk exactly once and acknowledges it
// with the result through the switch, which releases the aggregator and
// multicasts the result to the job's workers.
//
// It keeps each chunk's result, to repeat its ACK, until every worker of
// the job has been seen in a later all-reduce (a worker's all-reduces are
// sequential: one that contributes to all-reduce b has every result of
// each a before b). Then it drops the all-reduce's state, so its memory
// is that of the all-reduces in progress, not of the whole run, and an
// all-reduce id can come back after it wraps. A frame of a dropped
// all-reduce can still come: a worker's nudge (its PS-path contribution
// for a result it got from a held aggregator, repeated until it sees the
// PS's ACK). It gets a release ACK: the chunk's header with every value
// zero, which frees what the switch still holds for the chunk and stops
// the nudges; no worker is in that all-reduce to take it as a result.
type PS struct {
	rx    host.RxStats
	lost  bool
	addr  rdma.Endpoint
	sw    rdma.Endpoint
	jobs  map[uint16]*psJob
	hot   *psJob // the job of the last frame (jobs are never removed)
	stats PSStats
	// ReAck bounds ACK repetitions per chunk (0: 20 µs).
	ReAck time.Duration
	now   time.Duration
	// Scratch for summing a chunk's pieces, and the value and piece
	// slices of finished chunks, taken again by new pieces: a collided
	// contribution costs no allocation in steady state.
	sum        []int32
	single     []int
	out        []byte
	freeVals   [][]int32
	freePieces [][]piece
}

type psJob struct {
	id     uint16
	n      int
	mask   uint32
	ackQPN uint32
	ars    map[uint16]*psAR
	// seen[w] is the latest all-reduce worker w has been seen in (0:
	// none); floor the oldest of them once every worker has been seen:
	// every all-reduce before floor is retired.
	seen  []uint16
	floor uint16
	// hot is ars[hotAR], the all-reduce of the job's last frame, or nil.
	hot   *psAR
	hotAR uint16
}

// psAR is the PS's state of one all-reduce of a job.
type psAR struct {
	chunks chunkTable[psChunk]
	// recs hands out chunk records in blocks of chunkBlock, acks their ACK
	// payloads, so a chunk costs no allocation of its own.
	recs []psChunk
	acks host.Slab[byte]
}

// chunkBlock is the chunk records of one block of an all-reduce's recs.
const chunkBlock = 256

// newChunk returns a fresh chunk record.
func (a *psAR) newChunk(exp int8, count int) *psChunk {
	if len(a.recs) == 0 {
		a.recs = make([]psChunk, chunkBlock)
	}
	c := &a.recs[0]
	a.recs = a.recs[1:]
	c.exp, c.count = exp, count
	return c
}

// before reports whether all-reduce id a comes before b, in serial-number
// order (ids wrap: harness/run numbers them 1, 2, … 65535, 1, …).
func before(a, b uint16) bool { return int16(a-b) < 0 }

// note records that the workers in bits were seen in all-reduce ar, and
// drops the all-reduces every worker has moved past (PS doc).
func (p *PS) note(j *psJob, ar uint16, bits uint32) {
	moved := false
	for w := range j.seen {
		if bits&(1<<w) != 0 && (j.seen[w] == 0 || before(j.seen[w], ar)) {
			j.seen[w], moved = ar, true
		}
	}
	if !moved {
		return
	}
	floor := j.seen[0]
	for _, s := range j.seen {
		if s == 0 {
			return
		}
		if before(s, floor) {
			floor = s
		}
	}
	if floor == j.floor {
		return
	}
	j.floor = floor
	for id := range j.ars {
		if before(id, floor) {
			if j.hot != nil && id == j.hotAR {
				j.hot = nil
			}
			delete(j.ars, id)
			p.stats.RetiredAllReduces++
		}
	}
}

type piece struct {
	bits uint32
	vals []int32
}

type psChunk struct {
	pieces  []piece
	exp     int8
	count   int
	ack     []byte // the ACK payload once resolved
	lastAck time.Duration
}

var _ emu.Node = (*PS)(nil)

// PSJob is a job the ATP/ESA PS serves: its workers and the QP number its
// ACK frames carry (the switch's ina_worker entry for the job's PS, on the
// PS's port, marks them as the job's PS).
type PSJob struct {
	Job     uint16
	Workers int
	AckQPN  uint32
}

// NewPS returns a PS at addr serving jobs; its ACKs go to the switch's
// address sw.
func NewPS(addr, sw rdma.Endpoint, jobs ...PSJob) *PS {
	p := &PS{addr: addr, sw: sw, jobs: map[uint16]*psJob{}, ReAck: 20 * time.Microsecond}
	for _, j := range jobs {
		p.jobs[j.Job] = &psJob{id: j.Job, n: j.Workers, mask: uint32(1)<<j.Workers - 1, ackQPN: j.AckQPN,
			ars: map[uint16]*psAR{}, seen: make([]uint16, j.Workers)}
	}
	return p
}

// Stats returns the PS's counters.
func (p *PS) Stats() PSStats { return p.stats }

// Reset implements emu.Resetter: a crash that loses the PS's state (the
// pieces of every open chunk, the ACKs it repeats); StateLost reports it.
func (p *PS) Reset() {
	for _, j := range p.jobs {
		j.ars, j.hot = map[uint16]*psAR{}, nil
		clear(j.seen)
		j.floor = 0
	}
	p.lost = true
}

// StateLost reports whether the PS lost its state in a crash.
func (p *PS) StateLost() bool { return p.lost }

// Rx returns the counters of the frames the PS dropped on arrival; Stale
// includes frames of unknown jobs or workers (PSStats.Stale).
func (p *PS) Rx() host.RxStats {
	rx := p.rx
	rx.Stale += p.stats.Stale
	return rx
}

// Start implements emu.Node.
func (p *PS) Start(env *emu.Env) {}

// Timer implements emu.Node.
func (p *PS) Timer(env *emu.Env, key uint64) {}

// AcceptsDeferred implements emu.DeferAware: the PS trusts a sealed
// frame's ICRC (host.UCFrame).
func (p *PS) AcceptsDeferred() bool { return true }

// Receive implements emu.Node.
func (p *PS) Receive(env *emu.Env, port int, pkts []*emu.Packet) {
	p.now = env.Now()
	for _, pk := range pkts {
		if pl, ok := host.UCFrame(&p.rx, pk, rdma.Endpoint{}); ok {
			if h, ok := inaHeader(pl); ok && !h.Has(inahdr.FlagFromPS) && !h.Has(inahdr.FlagBypass) {
				p.frame(env, h)
			}
		}
		env.Free(pk)
	}
}

func (p *PS) frame(env *emu.Env, h inahdr.Header) {
	p.stats.Frames++
	j := p.hot
	if j == nil || j.id != h.Job() {
		if j = p.jobs[h.Job()]; j != nil {
			p.hot = j
		}
	}
	if j == nil || h.Count() == 0 {
		p.stats.Stale++
		return
	}
	b := h.Bitmap()
	if b == 0 || b&^j.mask != 0 {
		p.stats.Stale++
		return
	}
	switch {
	case h.Has(inahdr.FlagPartial):
		p.stats.Partials++
	case h.Has(inahdr.FlagResult):
		p.stats.SwitchResults++
	case h.Has(inahdr.FlagCollision):
		p.stats.Collisions++
	default:
		p.stats.Resends++
	}
	if j.floor != 0 && before(h.AllReduce(), j.floor) {
		p.stats.Retired++
		p.releaseAck(env, j, h)
		return
	}
	p.note(j, h.AllReduce(), b)
	a := j.hot
	if a == nil || j.hotAR != h.AllReduce() {
		if a = j.ars[h.AllReduce()]; a == nil {
			a = &psAR{}
			j.ars[h.AllReduce()] = a
		}
		j.hot, j.hotAR = a, h.AllReduce()
	}
	c := a.chunks.get(h.Chunk())
	if c == nil {
		c = a.newChunk(h.Exponent(), h.Count())
		a.chunks.set(h.Chunk(), c)
	}
	if c.ack != nil {
		// Late: the result exists. Repeat the ACK (its first copy, or the
		// multicast, may have been lost; it also releases a held
		// aggregator), at most once per ReAck.
		if p.now-c.lastAck >= p.ReAck {
			p.stats.ReAcks++
			p.sendAck(env, j, c)
		}
		return
	}
	if h.Count() != c.count {
		p.stats.Stale++
		return
	}
	if b == j.mask && len(c.pieces) == 0 {
		// The common case: a complete aggregate from the switch, the
		// chunk's first piece. Its values are the result, already in the
		// ACK's byte order.
		c.exp = max(c.exp, h.Exponent())
		p.ack(env, j, a, h.AllReduce(), h.Chunk(), c, h.ValueBytes()[:4*c.count], false)
		return
	}
	for _, q := range c.pieces {
		if q.bits == b {
			return // the same piece again (duplicate)
		}
	}
	v := p.takeVals(c.count)
	h.ReadValues(v)
	c.exp = max(c.exp, h.Exponent())
	if c.pieces == nil {
		if k := len(p.freePieces); k > 0 {
			c.pieces, p.freePieces = p.freePieces[k-1], p.freePieces[:k-1]
		}
	}
	c.pieces = append(c.pieces, piece{bits: b, vals: v})
	p.resolve(env, j, a, h.AllReduce(), h.Chunk(), c)
}

// takeVals returns n values' room, a finished piece's if one is free.
func (p *PS) takeVals(n int) []int32 {
	if k := len(p.freeVals); k > 0 && cap(p.freeVals[k-1]) >= n {
		v := p.freeVals[k-1]
		p.freeVals = p.freeVals[:k-1]
		return v[:n]
	}
	return make([]int32, n)
}

// release gives c's pieces back for new ones (c is finished).
func (p *PS) release(c *psChunk) {
	if c.pieces == nil {
		return
	}
	for i := range c.pieces {
		p.freeVals = append(p.freeVals, c.pieces[i].vals)
		c.pieces[i].vals = nil
	}
	p.freePieces = append(p.freePieces, c.pieces[:0])
	c.pieces = nil
}

// resolve finishes chunk c if its pieces cover every worker exactly once:
// a complete aggregate alone; otherwise disjoint multi-worker pieces
// (preempted partials) in arrival order, and single contributions for the
// rest. A piece that overlaps what is already counted is left out, so no
// contribution is ever counted twice; if the cover is not complete yet,
// the workers' PS-path retransmissions (one raw contribution each) will
// complete it.
func (p *PS) resolve(env *emu.Env, j *psJob, a *psAR, ar uint16, k uint32, c *psChunk) {
	if cap(p.sum) < c.count {
		p.sum = make([]int32, c.count)
	}
	if cap(p.single) < j.n {
		p.single = make([]int, j.n)
	}
	sum := p.sum[:c.count]
	soft, overlaps, ok := cover(c.pieces, j.n, sum, p.single[:j.n])
	if !ok {
		return
	}
	p.stats.Overlaps += uint64(overlaps)
	if cap(p.out) < 4*len(sum) {
		p.out = make([]byte, 4*len(sum))
	}
	vals := p.out[:4*len(sum)] // copied into the ACK by ack
	for i, v := range sum {
		binary.BigEndian.PutUint32(vals[4*i:], uint32(v))
	}
	p.ack(env, j, a, ar, k, c, vals, soft)
}

// ack finishes chunk k of all-reduce ar with the result vals (big-endian
// int32s) and sends its ACK.
func (p *PS) ack(env *emu.Env, j *psJob, a *psAR, ar uint16, k uint32, c *psChunk, vals []byte, soft bool) {
	if soft {
		p.stats.SoftResults++
	}
	c.ack = a.acks.Take(inahdr.Len + 4*c.count)
	inahdr.Header(c.ack).Encode(inahdr.Meta{Flags: inahdr.FlagFromPS | inahdr.FlagResult, Job: j.id, AllReduce: ar,
		Count: c.count, Chunk: k, Exponent: c.exp, Bitmap: j.mask})
	copy(c.ack[inahdr.Len:], vals)
	p.release(c)
	p.stats.Acks++
	p.sendAck(env, j, c)
}

// releaseAck answers h, a frame of a retired all-reduce, with a release
// ACK: its chunk's header and zero values (PS doc).
func (p *PS) releaseAck(env *emu.Env, j *psJob, h inahdr.Header) {
	n := inahdr.Len + 4*h.Count()
	if cap(p.out) < n {
		p.out = make([]byte, n)
	}
	b := p.out[:n]
	clear(b)
	inahdr.Header(b).Encode(inahdr.Meta{Flags: inahdr.FlagFromPS | inahdr.FlagResult, Job: j.id, AllReduce: h.AllReduce(),
		Count: h.Count(), Chunk: h.Chunk(), Bitmap: j.mask})
	ucSend(env, p.addr, p.sw, j.ackQPN, j.ackQPN, h.Chunk(), b)
}

func (p *PS) sendAck(env *emu.Env, j *psJob, c *psChunk) {
	c.lastAck = p.now
	ucSend(env, p.addr, p.sw, j.ackQPN, j.ackQPN, inahdr.Header(c.ack).Chunk(), c.ack)
}

// cover sums pieces so that every one of n workers is counted exactly
// once: a complete aggregate alone if there is one (soft = false);
// otherwise multi-worker pieces (preempted partials) that are disjoint from
// what is already counted, in arrival order, then single contributions for
// the workers still missing. It reports ok = false when some worker is
// neither in a chosen piece nor has a single contribution, and how many
// pieces it left out because they overlapped. The sum goes into sum (one
// value per chunk value); single (n entries) is scratch.
func cover(pieces []piece, n int, sum []int32, single []int) (soft bool, overlaps int, ok bool) {
	mask := uint32(1)<<n - 1
	clear(sum)
	for _, q := range pieces {
		if q.bits == mask {
			copy(sum, q.vals)
			return false, 0, true
		}
	}
	var counted uint32
	for i := range single {
		single[i] = -1
	}
	for i, q := range pieces {
		if bits.OnesCount32(q.bits) == 1 {
			if r := bits.TrailingZeros32(q.bits); r < n && single[r] < 0 {
				single[r] = i
			}
			continue
		}
		if q.bits&counted != 0 {
			overlaps++
			continue
		}
		counted |= q.bits
		add32(sum, q.vals)
	}
	for r := 0; r < n; r++ {
		if counted&(1<<r) != 0 {
			continue
		}
		if single[r] < 0 {
			return true, overlaps, false
		}
		counted |= 1 << r
		add32(sum, pieces[single[r]].vals)
	}
	return true, overlaps, true
}

// add32 adds src into dst with int32 saturation.
func add32(dst, src []int32) {
	for i := range dst {
		s := int64(dst[i]) + int64(src[i])
		dst[i] = int32(min(max(s, -1<<31), 1<<31-1))
	}
}
