package run

import (
	"fmt"
	"time"

	"github.com/inabox/inabox/harness/scenario"
	"github.com/inabox/inabox/harness/testbed"
	"github.com/inabox/inabox/host"
)

// check compares every worker's result of job i's all-reduce k with the
// reference and frees it.
func (r *runner) check(i, k int, ws []testbed.WorkerHandle) error {
	ref := r.gen.reference(i, k)
	where := func(rank int) string {
		p := r.plans[i]
		if len(p.Buckets) == 1 {
			return fmt.Sprintf("%s: job %s worker %d iteration %d", r.s.Name, p.Name, rank, k)
		}
		return fmt.Sprintf("%s: job %s worker %d iteration %d bucket %d", r.s.Name, p.Name, rank, k/len(p.Buckets), k%len(p.Buckets))
	}
	for rank, w := range ws {
		got := w.Endpoint.Result(k)
		if len(got) != len(ref) {
			return fmt.Errorf("%s: result has %d elements, want %d", where(rank), len(got), len(ref))
		}
		for e := range ref {
			if got[e] != ref[e] {
				return fmt.Errorf("%s: element %d = %d, want %d (wrong all-reduce sum)", where(rank), e, got[e], ref[e])
			}
		}
		w.Endpoint.DropResult(k)
	}
	return nil
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
type tensorGen struct {
	seed  uint64
	plans []scenario.JobPlan
	data  map[[3]int][]float32 // job, rank, variant
	ref   map[[2]int][]int32   // job, variant
}

func newTensorGen(seed uint64, s *scenario.Scenario, plans []scenario.JobPlan) *tensorGen {
	return &tensorGen{seed: seed, plans: plans, data: map[[3]int][]float32{}, ref: map[[2]int][]int32{}}
}

func (g *tensorGen) variant(job, rank, v int) []float32 {
	key := [3]int{job, rank, v}
	if d, ok := g.data[key]; ok {
		return d
	}
	x := g.seed*0x9E3779B97F4A7C15 ^ uint64(job+1)<<40 ^ uint64(rank+1)<<20 ^ uint64(v+1)*0xBF58476D1CE4E5B9
	if x == 0 {
		x = 1
	}
	out := make([]float32, g.plans[job].Elements)
	for i := range out {
		x ^= x << 13
		x ^= x >> 7
		x ^= x << 17
		out[i] = float32(int64(x>>11)%(1<<21)-(1<<20)) / (1 << 20) // [-1, 1)
	}
	g.data[key] = out
	return out
}

// tensors returns worker rank of job (from 0)'s all-reduces, one per
// bucket of each iteration (all-reduce ids 1, 2, ...; they wrap at
// 65535): bucket b of iteration i is the bucket's part of variant i mod 2.
func (g *tensorGen) tensors(ji, rank int) []host.Tensor {
	p := g.plans[ji]
	nb := len(p.Buckets)
	ts := make([]host.Tensor, p.AllReduces())
	for k := range ts {
		b := p.Buckets[k%nb]
		ts[k] = host.Tensor{AllReduce: uint16(k%0xFFFF + 1), Data: g.variant(ji, rank, (k/nb)%2)[b.Offset : b.Offset+b.Elements]}
	}
	return ts
}

// reference is the sum job's all-reduce k must give.
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
