package run

import (
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/inabox/inabox/harness/scenario"
	"github.com/inabox/inabox/host"
)

// TestAheadSlice: values made ahead of the sender are the generator's, for
// any pattern of fills: in order in blocks of any size (across spans),
// chunks sent again behind them, jumps past them; and the spans go back
// once the last value is out.
func TestAheadSlice(t *testing.T) {
	g, pf := aheadFixture(t, 100)
	defer pf.stop()
	rng := rand.New(rand.NewPCG(3, 4))
	for trial := range 20 {
		src := lazySlice{g.lazyVariant(1, trial%2, trial%2), 37 * trial, 3000}
		a := &aheadSlice{lazySlice: src, pf: pf}
		want := make([]float32, src.n)
		src.Fill(want, 0)
		off := 0
		for off < src.n {
			var lo, m int
			switch r := rng.IntN(10); {
			case r < 7: // in order
				lo, m = off, 1+rng.IntN(300)
			case r < 9 && off > 0: // a chunk sent again
				lo, m = rng.IntN(off), 1+rng.IntN(64)
			default: // a jump ahead
				lo, m = off+rng.IntN(400), 1+rng.IntN(300)
			}
			if lo >= src.n {
				continue
			}
			m = min(m, src.n-lo)
			got := make([]float32, m)
			a.Fill(got, lo)
			if !slices.Equal(got, want[lo:lo+m]) {
				t.Fatalf("trial %d: values [%d, %d) differ from the generator's", trial, lo, lo+m)
			}
			off = max(off, lo+m)
		}
		if a.ready.vals != nil || a.next.vals != nil || a.pending {
			t.Fatalf("trial %d: spans still held after the last value", trial)
		}
		// a chunk sent again after the end is made here
		got := make([]float32, 64)
		a.Fill(got, 500)
		if !slices.Equal(got, want[500:564]) || a.pending {
			t.Fatalf("trial %d: a value sent again after the end differs, or started a prefetch", trial)
		}
	}
	// in order, only the first fill is made on the sender's goroutine
	a := &aheadSlice{lazySlice: lazySlice{g.lazyVariant(1, 0, 0), 0, 3000}, pf: pf}
	for lo := 0; lo < 3000; lo += 64 {
		a.Fill(make([]float32, min(64, 3000-lo)), lo)
	}
	if a.inline != 64 {
		t.Errorf("%d values made inline in order, want 64 (the first fill)", a.inline)
	}
	if len(pf.free) > 4 {
		t.Errorf("%d spans made for one slice at a time (want ≤ 4)", len(pf.free))
	}
}

// TestAheadSliceWire: the wire form made ahead (host.WireSource) is
// host.WirePlan.Quantize's of the generator's values, clipped counts
// included, under both quantizers, with chunk-sized spans and a short last
// chunk: for blocks of chunks in order, Fill calls between them, chunks
// asked again (refused: the worker quantizes them), jumps past the spans,
// and spans made before the first FillWire; and only that first call and
// the spans made before it are quantized on the sender's goroutine.
func TestAheadSliceWire(t *testing.T) {
	g, pf := aheadFixture(t, 200) // 3 chunks of 64 a span
	defer pf.stop()
	rng := rand.New(rand.NewPCG(5, 6))
	const V, n = 64, 3000 // 46 chunks and one of 56 values
	chunks := (n + V - 1) / V
	for trial := range 24 {
		plan := host.WirePlan{Quant: host.Quantizer{Workers: 4, Frac: 20 + 2*(trial%8)}, Values: V}
		if trial%2 == 1 {
			plan.Quant = host.Quantizer{Mode: host.QuantExponent, Workers: 4}
			plan.Exps = make([]int8, chunks-3) // the last chunks past the end: 0
			for i := range plan.Exps {
				plan.Exps[i] = int8(rng.IntN(9) - 4)
			}
		}
		src := lazySlice{g.lazyVariant(1, trial%2, trial%2), 41 * trial, n}
		vals := make([]float32, n)
		src.Fill(vals, 0)
		wantWire, wantClip := make([]byte, 4*n), make([]int32, chunks)
		plan.Quantize(wantWire, wantClip, vals, 0)
		clipped := 0
		for _, c := range wantClip {
			clipped += int(c)
		}
		if trial%8 == 6 && clipped == 0 {
			t.Fatalf("trial %d: no value clipped: the test would not see clipped counts", trial)
		}
		a := &aheadSlice{lazySlice: src, pf: pf}
		a.PlanWire(plan)
		k := 0
		if trial%3 == 0 { // spans made before the wire is asked for
			a.Fill(make([]float32, V), 0)
			k = 1
		}
		for k < chunks {
			var lo, m int
			switch r := rng.IntN(10); {
			case r < 6: // in order
				lo, m = k, 1+rng.IntN(7)
			case r < 7: // values only
				lo, m = k, min(1+rng.IntN(3), chunks-k)
				got := make([]float32, min(m*V, n-lo*V))
				a.Fill(got, lo*V)
				if !slices.Equal(got, vals[lo*V:lo*V+len(got)]) {
					t.Fatalf("trial %d: values of chunks [%d, %d) differ", trial, lo, lo+m)
				}
				k = max(k, lo+m)
				continue
			case r < 9 && k > 0: // asked again
				lo, m = rng.IntN(k), 1+rng.IntN(2)
			default: // a jump ahead
				lo, m = k+rng.IntN(8), 1+rng.IntN(5)
			}
			if lo >= chunks {
				continue
			}
			m = min(m, chunks-lo)
			end := min((lo+m)*V, n)
			wire, clip := make([]byte, 4*(end-lo*V)), make([]int32, m)
			asked := a.wire
			if !a.FillWire(wire, clip, uint32(lo)) {
				if lo >= k && asked {
					t.Fatalf("trial %d: chunks [%d, %d) in order refused", trial, lo, lo+m)
				}
				for _, b := range wire {
					if b != 0 {
						t.Fatalf("trial %d: a refused FillWire wrote", trial)
					}
				}
				continue
			}
			if lo < k {
				t.Fatalf("trial %d: chunks [%d, %d) behind %d served", trial, lo, lo+m, k)
			}
			if !slices.Equal(wire, wantWire[4*lo*V:4*end]) || !slices.Equal(clip, wantClip[lo:lo+m]) {
				t.Fatalf("trial %d: wire form of chunks [%d, %d) differs from WirePlan.Quantize's", trial, lo, lo+m)
			}
			k = lo + m
		}
		if a.ready.vals != nil || a.next.vals != nil || a.pending {
			t.Fatalf("trial %d: spans still held after the last value", trial)
		}
	}
	// in order from the start: the first call is refused, its chunk made
	// by the worker; the rest come from the spans
	a := &aheadSlice{lazySlice: lazySlice{g.lazyVariant(1, 0, 0), 0, n}, pf: pf}
	a.PlanWire(host.WirePlan{Quant: host.Quantizer{Workers: 4}, Values: V})
	for k := 0; k < chunks; k++ {
		end := min((k+1)*V, n)
		wire, clip := make([]byte, 4*(end-k*V)), make([]int32, 1)
		if !a.FillWire(wire, clip, uint32(k)) {
			if k != 0 {
				t.Fatalf("chunk %d refused", k)
			}
			a.Fill(make([]float32, V), 0) // as the worker does
		}
	}
	if a.inlineWire != 0 || a.inline != V {
		t.Errorf("in order, %d values quantized by the slice and %d made on the sender's goroutine, want 0 and %d (the first chunk, which the worker quantizes)", a.inlineWire, a.inline, V)
	}
}

// TestAheadMixedSpans: slices whose spans differ in length share one
// prefetcher's buffers: one with chunks of 64 values (spans of 192), then
// one with none planned and one with chunks of 100 (spans of 200 values
// and 800 wire bytes) start on the buffers the first left; each gets spans
// long enough, and its values and wire form are right.
func TestAheadMixedSpans(t *testing.T) {
	g, pf := aheadFixture(t, 200)
	defer pf.stop()
	const n = 2000
	for i, v := range []int{64, 0, 100} {
		a := &aheadSlice{lazySlice: lazySlice{g.lazyVariant(1, i%2, 0), 13 * i, n}, pf: pf}
		want := make([]float32, n)
		a.lazySlice.Fill(want, 0)
		if v == 0 {
			for off := 0; off < n; off += 200 {
				got := make([]float32, 200)
				a.Fill(got, off)
				if !slices.Equal(got, want[off:off+200]) {
					t.Fatalf("slice %d: values [%d, %d) differ", i, off, off+200)
				}
			}
			continue
		}
		p := host.WirePlan{Quant: host.Quantizer{Workers: 4, Frac: 30}, Values: v}
		a.PlanWire(p)
		for off := 0; off < n; off += v {
			k, end := off/v, min(off+v, n)
			wire, clip := make([]byte, 4*(end-off)), make([]int32, 1)
			if !a.FillWire(wire, clip, uint32(k)) {
				a.Fill(make([]float32, end-off), off) // as the worker does
				continue
			}
			ww, wc := make([]byte, len(wire)), make([]int32, 1)
			p.Quantize(ww, wc, want[off:end], uint32(k))
			if !slices.Equal(wire, ww) || clip[0] != wc[0] {
				t.Fatalf("slice %d: wire form of chunk %d differs", i, k)
			}
		}
		if a.ready.vals != nil || a.pending {
			t.Fatalf("slice %d: spans held after the last value", i)
		}
	}
}

// aheadFixture sets aheadSpan to span for the test, and returns the tiny
// scenario's tensor generator and a prefetcher (the caller stops it).
func aheadFixture(t *testing.T, span int) (*tensorGen, *prefetcher) {
	t.Helper()
	old := aheadSpan
	aheadSpan = span
	t.Cleanup(func() { aheadSpan = old })
	s := tiny(t, "")
	return newTensorGen(1, s, s.Plan(scenario.DefaultModels())), &prefetcher{}
}
