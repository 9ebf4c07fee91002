package emu

import (
	"cmp"
	"math/rand/v2"
	"slices"
	"testing"
)

// TestDequeBlocks pushes and pops across block boundaries, interleaved, and
// checks FIFO order, the length, and that drained blocks are reused.
func TestDequeBlocks(t *testing.T) {
	var bp blockPool[int]
	var q deque[int]
	rng := rand.New(rand.NewPCG(1, 2))
	next, want := 0, 0
	for step := 0; step < 20000; step++ {
		if rng.IntN(3) > 0 || q.len() == 0 {
			for k := rng.IntN(3 * dequeBlockLen); k > 0; k-- {
				q.push(next, &bp)
				next++
			}
			continue
		}
		for k := rng.IntN(3*dequeBlockLen) + 1; k > 0 && q.len() > 0; k-- {
			if f := *q.front(); f != want {
				t.Fatalf("front = %d, want %d", f, want)
			}
			if v := q.pop(&bp); v != want {
				t.Fatalf("pop = %d, want %d", v, want)
			}
			want++
		}
		if q.len() != next-want {
			t.Fatalf("len = %d, want %d", q.len(), next-want)
		}
	}
	q.clear(&bp)
	if q.len() != 0 {
		t.Fatalf("len after clear = %d", q.len())
	}
	free := 0
	for b := bp.free; b != nil; b = b.next {
		free++
	}
	if free == 0 {
		t.Fatal("no drained block came back to the pool")
	}
	// The deque keeps one block; filling it and the pool's blocks, then
	// draining them, takes no new memory.
	emptied := false
	allocs := testing.AllocsPerRun(3, func() {
		for i := 0; i < (free+1)*dequeBlockLen; i++ {
			q.push(i, &bp)
		}
		emptied = bp.free == nil
		q.clear(&bp)
	})
	if allocs != 0 || !emptied {
		t.Fatalf("refill: %v allocations, pool emptied: %t", allocs, emptied)
	}
}

// TestSchedulerOrder schedules random arrivals on a few link directions
// (some out of order, as reordering makes them), timers and callbacks, and
// checks that they come out in exactly (at, seq) order, as from one heap.
func TestSchedulerOrder(t *testing.T) {
	for seed := uint64(1); seed <= 20; seed++ {
		rng := rand.New(rand.NewPCG(seed, 7))
		n := NewNetwork(Config{})
		for i := 0; i < 4; i++ {
			n.dirs = append(n.dirs, &linkDir{idx: int32(i)})
		}
		var want []event
		var got []event
		clock := int64(0)
		for step := 0; step < 5000; step++ {
			switch r := rng.IntN(10); {
			case r < 6:
				d := n.dirs[rng.IntN(len(n.dirs))]
				at := clock + rng.Int64N(50)
				if rng.IntN(4) > 0 {
					at = max(at, d.inOrderAt) // in order, as a FIFO link keeps them
				}
				n.scheduleArrival(d, at, &Packet{}, rng.IntN(9) == 0)
				want = append(want, event{at: at, seq: n.seq, kind: evArrive, idx: d.idx})
			case r < 8:
				at := clock + rng.Int64N(50)
				n.schedule(event{at: at, kind: evTimer, idx: 9, fn: func() {}}) // fn: a reference its slot must drop
				want = append(want, event{at: at, seq: n.seq, kind: evTimer, idx: 9})
			default:
				for k := rng.IntN(8); k > 0 && n.Pending() > 0; k-- {
					e := n.pop()
					if e.at < clock {
						t.Fatalf("seed %d: event at %d after %d", seed, e.at, clock)
					}
					clock = e.at
					got = append(got, e)
				}
			}
		}
		for n.Pending() > 0 {
			got = append(got, n.pop())
		}
		// Events come out in (at, seq) order among those scheduled before
		// each pop; with every pop's clock non-decreasing (checked above)
		// and nothing scheduled in the past, that is the global order.
		slices.SortFunc(want, func(a, b event) int {
			return cmp.Or(cmp.Compare(a.at, b.at), cmp.Compare(a.seq, b.seq))
		})
		if len(got) != len(want) {
			t.Fatalf("seed %d: %d events out, %d scheduled", seed, len(got), len(want))
		}
		for i := range got {
			if got[i].at != want[i].at || got[i].seq != want[i].seq || got[i].kind != want[i].kind || got[i].idx != want[i].idx {
				t.Fatalf("seed %d: event %d = (at %d, seq %d, kind %d, dir %d), want (at %d, seq %d, kind %d, dir %d)",
					seed, i, got[i].at, got[i].seq, got[i].kind, got[i].idx, want[i].at, want[i].seq, want[i].kind, want[i].idx)
			}
		}
		if n.waiting != 0 {
			t.Fatalf("seed %d: %d arrivals still waiting", seed, n.waiting)
		}
		if len(n.free) != len(n.slots) {
			t.Fatalf("seed %d: %d of %d event slots free with no event left", seed, len(n.free), len(n.slots))
		}
		for i := range n.slots {
			if e := &n.slots[i]; e.pkt != nil || e.fn != nil {
				t.Fatalf("seed %d: slot %d still holds a packet or a callback", seed, i)
			}
		}
	}
}
