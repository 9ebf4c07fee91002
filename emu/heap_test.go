package emu

import (
	"cmp"
	"math/rand/v2"
	"slices"
	"testing"
)

// orderQueue is what the scheduler asks of its queue.
type orderQueue interface {
	Len() int
	push(entry)
	peek() *entry
	pop()
	replaceTop(entry)
}

// checkOrder runs 200,000 random pushes, pops and replaceTops on q and
// checks every entry it gives, and its earliest after each step, against
// a sorted list of what it holds. next makes the entry to push, or with
// replacing set the entry to put in place of the earliest, whose time is
// top (0 when q is empty); before is called before each pop.
func checkOrder(t *testing.T, q orderQueue, rng *rand.Rand, next func(top int64, replacing bool) entry, before func()) {
	t.Helper()
	var ref []entry // what q holds, sorted
	insert := func(e entry) {
		i, _ := slices.BinarySearchFunc(ref, e, func(a, b entry) int { // (time, seq), not the queue's less
			return cmp.Or(cmp.Compare(a.time(), b.time()), cmp.Compare(a.seq, b.seq))
		})
		ref = slices.Insert(ref, i, e)
	}
	for step := range 200000 {
		top := int64(0)
		if len(ref) > 0 {
			top = ref[0].time()
		}
		switch op := rng.IntN(3); {
		case q.Len() == 0 || op == 0 || (op == 1 && q.Len() < 50):
			e := next(top, false)
			q.push(e)
			insert(e)
		case op == 1:
			before()
			got := *q.peek()
			q.pop()
			if got.ref != ref[0].ref {
				t.Fatalf("step %d: pop gave (%d, %d), want (%d, %d)", step, got.time(), got.seq, ref[0].time(), ref[0].seq)
			}
			ref = ref[1:]
		default:
			e := next(top, true)
			got := *q.peek()
			q.replaceTop(e)
			if got.ref != ref[0].ref {
				t.Fatalf("step %d: replaceTop gave (%d, %d), want (%d, %d)", step, got.time(), got.seq, ref[0].time(), ref[0].seq)
			}
			ref = ref[1:]
			insert(e)
		}
		if q.Len() != len(ref) || (q.Len() > 0 && q.peek().ref != ref[0].ref) {
			t.Fatalf("step %d: %d entries, top %v; want %d", step, q.Len(), q.peek(), len(ref))
		}
	}
}

// TestEventHeap: random pushes, pops and replaceTops, with many equal
// times, give the entries in (time, sequence) order.
func TestEventHeap(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	seq := uint64(0)
	checkOrder(t, &eventHeap{}, rng, func(top int64, replacing bool) entry {
		seq++
		at := int64(rng.IntN(40) - 8) // some before 0: signed order
		if replacing {
			at += 8 + top // not before the top, as the in-order arrivals are
		}
		return newEntry(at, seq, int32(seq))
	}, func() {})
}

// TestEventQueue: as TestEventHeap, on the scheduler's queue, with half
// the entries link directions' first arrivals (which go to its run),
// mostly later than every entry before them, as a busy link's next
// arrival is, some a little earlier (into the run, or too deep for it and
// into the heap), and the rest timers (the heap).
func TestEventQueue(t *testing.T) {
	rng := rand.New(rand.NewPCG(5, 6))
	var q eventQueue
	seq, last := uint64(0), int64(0)
	inRun, inHeap := 0, 0
	checkOrder(t, &q, rng, func(top int64, replacing bool) entry {
		seq++
		r := int32(seq)
		if replacing {
			top += 8 // not before the top, as the in-order arrivals are
		}
		at := top + int64(rng.IntN(40)-8)
		if rng.IntN(2) == 0 {
			r = ^r
			if rng.IntN(4) > 0 {
				at = max(at, last+int64(rng.IntN(3))) // after the latest: last in the run
			}
		}
		last = max(last, at)
		return newEntry(at, seq, r)
	}, func() {
		if q.fromRun {
			inRun++
		} else {
			inHeap++
		}
	})
	if inRun < 10000 || inHeap < 10000 {
		t.Fatalf("%d pops from the run, %d from the heap: want both exercised", inRun, inHeap)
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

// BenchmarkEventQueue: the scheduler's queue against a heap of every
// entry, in the same run, on what a true-scale all-reduce of 8 workers
// holds: 16 link directions' first arrivals, each replaced by its next a
// round of the others later (give or take a few ns), and 25 timers
// further out. ns/op is one replaceTop.
func BenchmarkEventQueue(b *testing.B) {
	const dirs, timers, round = 16, 25, 16 * 27
	jitter := make([]int64, 4096)
	rng := rand.New(rand.NewPCG(1, 2))
	for i := range jitter {
		jitter[i] = rng.Int64N(9) - 4
	}
	type queue interface {
		push(entry)
		peek() *entry
		replaceTop(entry)
	}
	for _, c := range []struct {
		name string
		q    func() queue
	}{{"heap", func() queue { return &eventHeap{} }}, {"queue", func() queue { return &eventQueue{} }}} {
		b.Run(c.name, func(b *testing.B) {
			q, seq := c.q(), uint64(0)
			for i := range timers {
				seq++
				q.push(newEntry(1e9+int64(i)*1000, seq, int32(i)))
			}
			for i := range dirs {
				seq++
				q.push(newEntry(int64(i)*27, seq, ^int32(i)))
			}
			for i := 0; b.Loop(); i++ {
				top := q.peek()
				seq++
				q.replaceTop(newEntry(top.time()+round+jitter[i&4095], seq, top.ref))
			}
		})
	}
}
