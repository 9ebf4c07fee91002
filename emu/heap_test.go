package emu

import (
	"cmp"
	"math/rand/v2"
	"slices"
	"testing"
)

// TestEventHeap: random pushes, pops and replaceTops, with many equal
// times, give the entries in (time, sequence) order, checked against a
// sorted list of what the heap holds.
func TestEventHeap(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	var h eventHeap
	var ref []entry // what h holds, sorted
	seq := uint64(0)
	next := func() entry {
		seq++
		return newEntry(int64(rng.IntN(40)-8), seq, int32(seq)) // some before 0: signed order
	}
	insert := func(e entry) {
		i, _ := slices.BinarySearchFunc(ref, e, func(a, b entry) int { // (time, seq), not the heap's less
			return cmp.Or(cmp.Compare(a.time(), b.time()), cmp.Compare(a.seq, b.seq))
		})
		ref = slices.Insert(ref, i, e)
	}
	for step := range 200000 {
		switch op := rng.IntN(3); {
		case h.Len() == 0 || op == 0 || (op == 1 && h.Len() < 50):
			e := next()
			h.push(e)
			insert(e)
		case op == 1:
			got := *h.peek()
			h.pop()
			if got.ref != ref[0].ref {
				t.Fatalf("step %d: pop gave (%d, %d), want (%d, %d)", step, got.time(), got.seq, ref[0].time(), ref[0].seq)
			}
			ref = ref[1:]
		default:
			e := next()
			e = newEntry(e.time()+8+ref[0].time(), e.seq, e.ref) // not before the top, as the in-order arrivals are
			got := *h.peek()
			h.replaceTop(e)
			if got.ref != ref[0].ref {
				t.Fatalf("step %d: replaceTop gave (%d, %d), want (%d, %d)", step, got.time(), got.seq, ref[0].time(), ref[0].seq)
			}
			ref = ref[1:]
			insert(e)
		}
		if h.Len() != len(ref) || (h.Len() > 0 && h.peek().ref != ref[0].ref) {
			t.Fatalf("step %d: %d events, top %v; want %d", step, h.Len(), h.peek(), len(ref))
		}
	}
}

// BenchmarkEventHeap: replaceTop on a heap of 42 entries (a true-scale
// all-reduce of 8 workers holds 42 on average), each new entry a random
// time after the one it replaces, as a link's next arrival is.
func BenchmarkEventHeap(b *testing.B) {
	rng := rand.New(rand.NewPCG(1, 2))
	var h eventHeap
	seq := uint64(0)
	for range 42 {
		seq++
		h.push(newEntry(rng.Int64N(1000), seq, 0))
	}
	step := make([]int64, 4096)
	for i := range step {
		step[i] = 1 + rng.Int64N(2000)
	}
	b.ResetTimer()
	for i := range b.N {
		seq++
		h.replaceTop(newEntry(h.peek().time()+step[i&4095], seq, 0))
	}
}
