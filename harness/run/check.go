package run

import (
	"fmt"
	"math/bits"
	"slices"
	"time"

	"github.com/inabox/inabox/harness/scenario"
	"github.com/inabox/inabox/harness/testbed"
	"github.com/inabox/inabox/host"
)

// check compares every worker's result of job i's all-reduce k with the
// reference and frees it.
func (r *runner) check(i, k int, ws []testbed.WorkerHandle) error {
	where := func(rank int) string {
		p := r.plans[i]
		if len(p.Buckets) == 1 {
			return fmt.Sprintf("%s: job %s worker %d iteration %d", r.s.Name, p.Name, rank, k)
		}
		return fmt.Sprintf("%s: job %s worker %d iteration %d bucket %d", r.s.Name, p.Name, rank, k/len(p.Buckets), k%len(p.Buckets))
	}
	if r.checks != nil {
		if r.async != nil && r.gen.isLazy(i) {
			r.async.sync()
		}
		ds, gots, stored, chunks := r.checks[i].end(k)
		for rank := range ws {
			if d := ds[rank]; stored[rank] != chunks {
				return fmt.Errorf("%s: result has %d of its %d chunks", where(rank), stored[rank], chunks)
			} else if d.bad > 0 {
				return fmt.Errorf("%s: element %d = %d, want %d (wrong all-reduce sum)", where(rank), d.first, gots[rank], d.want)
			}
		}
		return nil
	}
	gots := r.gots[:0]
	for _, w := range ws {
		gots = append(gots, w.Endpoint.Result(k))
	}
	r.gots = gots
	ds := r.gen.compare(i, k, gots)
	clear(r.gots)
	for rank, w := range ws {
		got, d := w.Endpoint.Result(k), ds[rank]
		if len(got) != d.n {
			return fmt.Errorf("%s: result has %d elements, want %d", where(rank), len(got), d.n)
		}
		if d.bad > 0 {
			return fmt.Errorf("%s: element %d = %d, want %d (wrong all-reduce sum)", where(rank), d.first, got[d.first], d.want)
		}
		w.Endpoint.DropResult(k)
	}
	return nil
}

// checkAsStored makes every worker pass its results to its job's
// resultCheck as they arrive instead of keeping them (a run in virtual
// time; a process of inabox up keeps its worker's results and checks them
// on another goroutine). Lazy jobs' checks run on a goroutine of their own
// if aside: call stopChecks when the run is over.
func (r *runner) checkAsStored(aside bool) {
	r.checks = make([]*resultCheck, len(r.plans))
	for i, ws := range r.tb.Workers {
		if len(ws) == 0 {
			continue
		}
		c := newResultCheck(r.gen, i, ws[0].Endpoint.Values())
		r.checks[i] = c
		if aside && r.gen.isLazy(i) && r.async == nil {
			r.async = startAsyncChecks()
		}
		for rank, w := range ws {
			w.Endpoint.SetResultSink(r.sink(i, rank))
		}
	}
}

// sink is the result sink of worker rank of job i (checkAsStored).
func (r *runner) sink(i, rank int) host.ResultSink {
	if r.async != nil && r.gen.isLazy(i) {
		return asyncSink{a: r.async, c: r.checks[i], rank: rank}
	}
	return rankSink{c: r.checks[i], rank: rank}
}

// stopChecks ends the goroutines of the lazy jobs' checks and of their
// gradients made ahead, if there are any.
func (r *runner) stopChecks() {
	if r.async != nil {
		r.async.stop()
		r.async = nil
	}
	r.gen.ahead.stop()
}

// span returns worker w's all-reduce i's start and end.
func span(w testbed.Worker, i int) (start, end time.Duration) {
	rep := w.Reports()[i]
	return rep.Start, rep.End
}

// tensorGen makes every worker's gradients, deterministic from the seed:
// two variants per worker, alternating by iteration (so a result left over
// from the previous all-reduce cannot pass the check), and their reference
// sums (fixed-point quantization as the workers do, summed exactly).
//
// A job whose gradients and sums would take more than LazyGradientBytes is
// lazy: its workers' gradients are made as they are sent (host.Source) and
// its sums as results are checked, from the generator's state saved every
// lazyBlock values; the values are the same.
type tensorGen struct {
	seed  uint64
	plans []scenario.JobPlan
	data  map[[3]int][]float32 // job, rank, variant
	// lazy is complete once the testbed is built (tensors makes every
	// variant an all-reduce uses); afterwards it is only read, also by the
	// checks' goroutine (asyncChecks).
	lazy map[[3]int]*lazyVariant // job, rank, variant
	ref  map[[2]int][]int32      // job, variant
	// ahead, if set, makes lazy gradients ahead of their senders.
	ahead *prefetcher
}

// LazyGradientBytes is the size above which a job's gradients and
// reference sums (4 B per element, 2 variants per worker and 2 sums) are
// made on demand instead of held. A variable for tests.
var LazyGradientBytes = int64(scenario.LazyGradientBytes)

func newTensorGen(seed uint64, s *scenario.Scenario, plans []scenario.JobPlan) *tensorGen {
	return &tensorGen{seed: seed, plans: plans, data: map[[3]int][]float32{}, lazy: map[[3]int]*lazyVariant{}, ref: map[[2]int][]int32{}}
}

// checkRing refuses to run the ring (policy none) where it would hold more
// than scenario.RunMemoryLimit: for a lazy job the ring holds each
// worker's whole gradient quantized and the messages queued to send it
// (measured: dynaina-contention at true scale passed 24 GB; three
// ResNet-50 jobs of 2 workers 1.8 GB, 12 B per worker element).
func (g *tensorGen) checkRing(s *scenario.Scenario, policy string) error {
	if policy != "none" {
		return nil
	}
	var held int64
	for j, p := range g.plans {
		if g.isLazy(j) {
			held += 8 * int64(p.Elements) * int64(p.Workers) // a quantized copy per worker and its messages
		} else {
			held += scenario.HeldGradientBytes(int64(p.Elements), p.Workers)
		}
	}
	limit, err := scenario.RunMemoryLimit()
	if err != nil {
		return fmt.Errorf("%s: %w", s.Name, err)
	}
	if held > limit {
		return fmt.Errorf("%s: policy none: the ring would hold %.2f GiB (a quantized gradient per worker and the messages queued to send it, 4 B per element each): at most %.2f GiB; lower scaling.tensor_scale or the workers, or raise %s on a machine with the memory",
			s.Name, float64(held)/(1<<30), float64(limit)/(1<<30), scenario.RunMemoryEnv)
	}
	return nil
}

// isLazy reports whether job's gradients are made on demand.
func (g *tensorGen) isLazy(job int) bool {
	p := g.plans[job]
	return scenario.HeldGradientBytes(int64(p.Elements), p.Workers) > LazyGradientBytes
}

// state is variant v of worker rank of job's generator state.
func (g *tensorGen) state(job, rank, v int) uint64 {
	x := g.seed*0x9E3779B97F4A7C15 ^ uint64(job+1)<<40 ^ uint64(rank+1)<<20 ^ uint64(v+1)*0xBF58476D1CE4E5B9
	if x == 0 {
		x = 1
	}
	return x
}

// step advances the generator and returns its next value, in [-1, 1).
func step(x uint64) (uint64, float32) {
	x ^= x << 13
	x ^= x >> 7
	x ^= x << 17
	return x, float32(int64(x>>11)%(1<<21)-(1<<20)) / (1 << 20)
}

func (g *tensorGen) variant(job, rank, v int) []float32 {
	key := [3]int{job, rank, v}
	if d, ok := g.data[key]; ok {
		return d
	}
	x := g.state(job, rank, v)
	out := make([]float32, g.plans[job].Elements)
	for i := range out {
		x, out[i] = step(x)
	}
	g.data[key] = out
	return out
}

// lazyBlock is how many values apart a lazy variant saves its state.
const lazyBlock = 1024

// lazyVariant is a variant made on demand: variant's values, from the
// generator's state before every lazyBlock-th value.
type lazyVariant struct {
	n      int
	states []uint64
}

func (g *tensorGen) lazyVariant(job, rank, v int) *lazyVariant {
	key := [3]int{job, rank, v}
	if l, ok := g.lazy[key]; ok {
		return l
	}
	n := int(g.plans[job].Elements)
	l := &lazyVariant{n: n, states: make([]uint64, 0, n/lazyBlock+1)}
	x := g.state(job, rank, v)
	for i := 0; i < n; i += lazyBlock {
		l.states = append(l.states, x)
		x = jump(x)
	}
	g.lazy[key] = l
	return l
}

// jump returns the generator's state lazyBlock steps after x. The
// xorshift step is linear over GF(2), so lazyBlock steps are one 64×64
// bit matrix, applied a byte of x at a time from jumpTable (8 lookups
// where the walk takes lazyBlock steps: VGG-16's 8 workers' checkpoints
// in tens of milliseconds, not seconds).
func jump(x uint64) uint64 {
	t := &jumpTable
	return t[0][byte(x)] ^ t[1][byte(x>>8)] ^ t[2][byte(x>>16)] ^ t[3][byte(x>>24)] ^
		t[4][byte(x>>32)] ^ t[5][byte(x>>40)] ^ t[6][byte(x>>48)] ^ t[7][byte(x>>56)]
}

// jumpTable[b][v] is lazyBlock steps applied to v<<8b (step without its
// output: the state part is linear, and 0 stays 0).
var jumpTable = func() (t [8][256]uint64) {
	var col [64]uint64 // col[i]: lazyBlock steps of bit i alone
	for i := range col {
		x := uint64(1) << i
		for range lazyBlock {
			x, _ = step(x)
		}
		col[i] = x
	}
	for b := range t {
		for v := 1; v < 256; v++ {
			lo := v & -v // lowest set bit
			t[b][v] = t[b][v^lo] ^ col[8*b+bits.TrailingZeros(uint(lo))]
		}
	}
	return t
}()

// fill writes values [off, off+len(dst)) into dst. Whole blocks go four
// (or two) at a time, their generators interleaved: each step depends on
// the one before, so one generator alone leaves the core idle between them.
func (l *lazyVariant) fill(dst []float32, off int) {
	b := off / lazyBlock
	x := l.states[b]
	for range off % lazyBlock {
		x, _ = step(x)
	}
	head := min(len(dst), (b+1)*lazyBlock-off) // to the next block's start
	if off%lazyBlock == 0 {
		head = 0
	}
	for i := range dst[:head] {
		x, dst[i] = step(x)
	}
	dst = dst[head:]
	if head > 0 {
		b++
	}
	for len(dst) >= 4*lazyBlock {
		d0, d1 := (*[lazyBlock]float32)(dst), (*[lazyBlock]float32)(dst[lazyBlock:])
		d2, d3 := (*[lazyBlock]float32)(dst[2*lazyBlock:]), (*[lazyBlock]float32)(dst[3*lazyBlock:])
		x0, x1, x2, x3 := l.states[b], l.states[b+1], l.states[b+2], l.states[b+3]
		for i := range lazyBlock {
			x0, d0[i] = step(x0)
			x1, d1[i] = step(x1)
			x2, d2[i] = step(x2)
			x3, d3[i] = step(x3)
		}
		dst, b = dst[4*lazyBlock:], b+4
	}
	if len(dst) >= 2*lazyBlock {
		d0, d1 := (*[lazyBlock]float32)(dst), (*[lazyBlock]float32)(dst[lazyBlock:])
		x0, x1 := l.states[b], l.states[b+1]
		for i := range lazyBlock {
			x0, d0[i] = step(x0)
			x1, d1[i] = step(x1)
		}
		dst, b = dst[2*lazyBlock:], b+2
	}
	if len(dst) > 0 {
		x = l.states[b]
	}
	for i := range dst {
		x, dst[i] = step(x)
	}
}

// lazySlice is values [off, off+n) of a lazy variant: a bucket's tensor.
type lazySlice struct {
	l      *lazyVariant
	off, n int
}

func (s lazySlice) Len() int                    { return s.n }
func (s lazySlice) Fill(dst []float32, off int) { s.l.fill(dst, s.off+off) }

// tensors returns worker rank of job (from 0)'s all-reduces, one per
// bucket of each iteration (all-reduce ids 1, 2, ...; they wrap at
// 65535): bucket b of iteration i is the bucket's part of variant i mod 2.
func (g *tensorGen) tensors(ji, rank int) []host.Tensor {
	p := g.plans[ji]
	nb := len(p.Buckets)
	ts := make([]host.Tensor, p.AllReduces())
	for k := range ts {
		b := p.Buckets[k%nb]
		v := (k / nb) % 2
		ts[k] = host.Tensor{AllReduce: uint16(k%0xFFFF + 1)}
		if g.isLazy(ji) {
			src := lazySlice{g.lazyVariant(ji, rank, v), int(b.Offset), int(b.Elements)}
			if g.ahead != nil {
				ts[k].Source = &aheadSlice{lazySlice: src, pf: g.ahead}
			} else {
				ts[k].Source = src
			}
		} else {
			ts[k].Data = g.variant(ji, rank, v)[b.Offset : b.Offset+b.Elements]
		}
	}
	return ts
}

// diff is how a result compares with its reference sum: n elements
// expected, bad of them wrong, the first at first (its reference want).
type diff struct {
	n, bad, first int
	want          int32
}

// compare compares each of gots, results of job's all-reduce k, with the
// reference sum, element by element (a result of the wrong length: every
// element wrong), and returns a diff per result. A lazy job's sum is made
// once for all of them.
func (g *tensorGen) compare(job, k int, gots [][]int32) []diff {
	p := g.plans[job]
	nb := len(p.Buckets)
	b := p.Buckets[k%nb]
	ds := make([]diff, len(gots))
	var todo []int // the results of the right length
	for r, got := range gots {
		ds[r] = diff{n: int(b.Elements), first: -1}
		if len(got) != ds[r].n {
			ds[r].bad = ds[r].n
			continue
		}
		todo = append(todo, r)
	}
	if len(todo) == 0 {
		return ds
	}
	// match compares want, the reference's elements from lo on, with every
	// result.
	match := func(lo int, want []int32) {
		for _, r := range todo {
			got, d := gots[r][lo:lo+len(want)], &ds[r]
			if slices.Equal(got, want) {
				continue
			}
			for e, w := range want {
				if got[e] != w {
					if d.bad == 0 {
						d.first, d.want = lo+e, w
					}
					d.bad++
				}
			}
		}
	}
	if !g.isLazy(job) {
		match(0, g.reference(job, k))
		return ds
	}
	// The sum a block at a time, from every worker's lazy variant.
	const block = 1 << 16
	n := int(b.Elements)
	buf := make([]int32, min(block, n))
	var sc refScratch
	for lo := 0; lo < n; lo += block {
		m := min(block, n-lo)
		g.refInto(job, k, lo, buf[:m], &sc)
		match(lo, buf[:m])
	}
	return ds
}

// refScratch is refInto's working memory, kept by its caller.
type refScratch struct {
	vals []float32
	q    []int32
	sum  []int64
}

// refInto writes elements [lo, lo+len(dst)) of the sum job's all-reduce k
// must give into dst: from the held reference, or, for a lazy job, made
// from every worker's lazy variant (sc: working memory it grows).
func (g *tensorGen) refInto(job, k, lo int, dst []int32, sc *refScratch) {
	if !g.isLazy(job) {
		copy(dst, g.reference(job, k)[lo:])
		return
	}
	p := g.plans[job]
	nb := len(p.Buckets)
	b := p.Buckets[k%nb]
	v := (k / nb) % 2
	m := len(dst)
	if cap(sc.vals) < m {
		sc.vals, sc.q, sc.sum = make([]float32, m), make([]int32, m), make([]int64, m)
	}
	vals, q, sum := sc.vals[:m], sc.q[:m], sc.sum[:m]
	clear(sum)
	quant := host.Quantizer{Workers: p.Workers}
	for rank := 0; rank < p.Workers; rank++ {
		g.lazyVariant(job, rank, v).fill(vals, int(b.Offset)+lo)
		quant.Quantize(q, vals, 0)
		for i, x := range q {
			sum[i] += int64(x)
		}
	}
	for i, x := range sum {
		dst[i] = int32(x)
	}
}

// reference is the sum job's all-reduce k must give, held (a job that is
// not lazy).
func (g *tensorGen) reference(job, k int) []int32 {
	p := g.plans[job]
	nb := len(p.Buckets)
	b := p.Buckets[k%nb]
	return g.whole(job, (k/nb)%2)[b.Offset : b.Offset+b.Elements]
}

// whole is the sum of variant v of every worker's whole gradient.
func (g *tensorGen) whole(job, v int) []int32 {
	key := [2]int{job, v}
	if r, ok := g.ref[key]; ok {
		return r
	}
	p := g.plans[job]
	q := host.Quantizer{Workers: p.Workers}
	sum := make([]int64, p.Elements)
	buf := make([]int32, p.Elements)
	for rank := 0; rank < p.Workers; rank++ {
		q.Quantize(buf, g.variant(job, rank, v), 0)
		for i, v := range buf {
			sum[i] += int64(v)
		}
	}
	out := make([]int32, p.Elements)
	for i, v := range sum {
		out[i] = int32(v)
	}
	g.ref[key] = out
	return out
}
