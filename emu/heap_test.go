package emu

import (
	"math/rand/v2"
	"slices"
	"testing"
)

// TestEventHeap: random pushes, pops and replaceTops, with many equal
// times, give the events in (time, sequence) order, checked against a
// sorted list of what the heap holds.
func TestEventHeap(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	var h eventHeap
	var ref []event // what h holds, sorted
	seq := uint64(0)
	next := func() event {
		seq++
		return event{at: int64(rng.IntN(40)), seq: seq, key: seq}
	}
	insert := func(e event) {
		i, _ := slices.BinarySearchFunc(ref, e, func(a, b event) int {
			switch {
			case a.less(&b):
				return -1
			case b.less(&a):
				return 1
			}
			return 0
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
			got := h.pop()
			if got.key != ref[0].key {
				t.Fatalf("step %d: pop gave (%d, %d), want (%d, %d)", step, got.at, got.seq, ref[0].at, ref[0].seq)
			}
			ref = ref[1:]
		default:
			e := next()
			e.at += ref[0].at // not before the top, as the in-order arrivals are
			got := h.replaceTop(e)
			if got.key != ref[0].key {
				t.Fatalf("step %d: replaceTop gave (%d, %d), want (%d, %d)", step, got.at, got.seq, ref[0].at, ref[0].seq)
			}
			ref = ref[1:]
			insert(e)
		}
		if h.Len() != len(ref) || (h.Len() > 0 && h.peek().key != ref[0].key) {
			t.Fatalf("step %d: %d events, top %v; want %d", step, h.Len(), h.peek(), len(ref))
		}
	}
}
