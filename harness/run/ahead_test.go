package run

import (
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/inabox/inabox/harness/scenario"
)

// TestAheadSlice: values made ahead of the sender are the generator's, for
// any pattern of fills: in order in blocks of any size (across spans),
// chunks sent again behind them, jumps past them; and the spans go back
// once the last value is out.
func TestAheadSlice(t *testing.T) {
	old := aheadSpan
	aheadSpan = 100
	t.Cleanup(func() { aheadSpan = old })
	s := tiny(t, "")
	g := newTensorGen(1, s, s.Plan(scenario.DefaultModels()))
	pf := &prefetcher{}
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
		if a.ready != nil || a.next != nil || a.pending {
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
