package emu

import "math/bits"

// evKind says what an event does when it fires.
type evKind uint8

const (
	evArrive evKind = iota // a packet reaches the far end of a link direction
	evTimer                // a node's timer expires
	evFunc                 // a scheduled callback (faults, user hooks)
)

// event is something scheduled: a packet's arrival, a timer's expiry or a
// callback. Events fire in (at, seq) order: equal-time events fire in the
// order they were scheduled, which is what makes a run deterministic.
type event struct {
	at   int64 // run time in ns
	seq  uint64
	pkt  *Packet
	fn   func()
	key  uint64 // timer key
	idx  int32  // link direction (evArrive) or node (evTimer)
	gen  uint32 // link epoch (evArrive) or timer generation (evTimer)
	kind evKind
	fcs  bool // evArrive: the frame was corrupted on the wire (bad FCS)
}

// entry is an event's place in the scheduler's heap: its time and
// sequence number, and which event it is, so that keeping the order moves
// 24 bytes and no pointers.
type entry struct {
	key uint64 // the time, its sign bit flipped: compared unsigned, in order
	seq uint64
	// ref ≥ 0: the event in Network.slots[ref]; ref < 0: the first
	// in-order arrival of link direction ^ref (linkDir.first).
	ref int32
}

// newEntry is the heap entry of the event at time at with sequence number
// seq and reference ref.
func newEntry(at int64, seq uint64, ref int32) entry {
	return entry{key: uint64(at) ^ 1<<63, seq: seq, ref: ref}
}

// time is the entry's event time.
func (a *entry) time() int64 { return int64(a.key ^ 1<<63) }

// less reports whether a comes before b.
func (a *entry) less(b *entry) bool { return a.before(b) != 0 }

// before is 1 if a comes before b and 0 if not: (at, seq) compared as one
// 128-bit number, by a subtraction's borrow, with no branch to mispredict.
func (a *entry) before(b *entry) int {
	_, borrow := bits.Sub64(a.seq, b.seq, 0)
	_, borrow = bits.Sub64(a.key, b.key, borrow)
	return int(borrow)
}

// eventHeap is a 4-ary min-heap of entries held by value, so scheduling
// an event allocates nothing once the slice has grown.
type eventHeap struct {
	ev []entry
}

func (h *eventHeap) Len() int { return len(h.ev) }

func (h *eventHeap) push(e entry) {
	h.ev = append(h.ev, entry{})
	i := len(h.ev) - 1
	// The parents later than e move down into the hole; e goes where
	// the hole stops (the same places as swapping e up).
	for i > 0 {
		p := (i - 1) / 4
		if !e.less(&h.ev[p]) {
			break
		}
		h.ev[i] = h.ev[p]
		i = p
	}
	h.ev[i] = e
}

// peek returns the earliest entry; the heap must not be empty.
func (h *eventHeap) peek() *entry { return &h.ev[0] }

// pop removes the earliest entry; the heap must not be empty.
func (h *eventHeap) pop() {
	n := len(h.ev) - 1
	last := h.ev[n]
	h.ev = h.ev[:n]
	if n > 0 {
		h.down(last)
	}
}

// replaceTop puts e in place of the earliest entry: a pop and a push in
// one pass down the heap.
func (h *eventHeap) replaceTop(e entry) { h.down(e) }

// down puts e at the top of the heap, in place of the entry there, and
// moves it down to its place: the earliest children move up into the hole
// it leaves, and e goes where the hole stops (the same places as swapping
// e down).
func (h *eventHeap) down(e entry) {
	ev := h.ev
	n := len(ev)
	i := 0
	for {
		first := 4*i + 1
		var m int
		if first+4 <= n {
			// All four children: the earlier of each pair, then of the
			// two, with no branch.
			c := (*[4]entry)(ev[first : first+4])
			a := c[1].before(&c[0])
			b := 2 + c[3].before(&c[2])
			a += (b - a) & -c[b&3].before(&c[a&1])
			m = first + a
		} else if first < n {
			m = first
			for c := first + 1; c < n; c++ {
				if ev[c].less(&ev[m]) {
					m = c
				}
			}
		} else {
			break
		}
		if !ev[m].less(&e) {
			break
		}
		ev[i] = ev[m]
		i = m
	}
	ev[i] = e
}

// runDepth is how far from its end an entry may go into an eventQueue's
// run; one that would go deeper goes to the heap instead.
const runDepth = 4

// eventQueue holds the scheduler's entries and gives them in (time,
// sequence) order. Link directions' first in-order arrivals go to a
// sorted run, where each one nearly always goes last: a busy direction's
// next arrival is a serialization later than the one it replaces, while
// the other directions' arrivals come in turn. (In a true-scale all-reduce
// of 8 workers, 98 % of them go last or one from last, against the 16th
// place of 41 in a heap of every entry.) Everything else, and any such
// arrival that would go more than runDepth from the run's end, goes to
// a heap. The earliest entry is the earlier of the run's first and the
// heap's top.
type eventQueue struct {
	run     []entry // run[head:] are held, sorted
	head    int
	heap    eventHeap
	n       int   // entries held
	fromRun bool  // the earliest is run[head]
	top     entry // a copy of the earliest
}

func (q *eventQueue) Len() int { return q.n }

// settle notes where the earliest entry is, after a change.
func (q *eventQueue) settle() {
	switch {
	case q.head < len(q.run) && (len(q.heap.ev) == 0 || q.run[q.head].before(&q.heap.ev[0]) != 0):
		q.fromRun, q.top = true, q.run[q.head]
	case len(q.heap.ev) > 0:
		q.fromRun, q.top = false, q.heap.ev[0]
	}
}

// second returns the entry after the earliest if the run holds both (a
// guess at the next but one, for prefetching: the heap may hold an
// earlier one).
func (q *eventQueue) second() (*entry, bool) {
	if q.fromRun && q.head+1 < len(q.run) {
		return &q.run[q.head+1], true
	}
	return nil, false
}

// peek returns the earliest entry; the queue must not be empty.
func (q *eventQueue) peek() *entry { return &q.top }

// pop removes the earliest entry; the queue must not be empty.
func (q *eventQueue) pop() {
	if q.fromRun {
		q.head++
	} else {
		q.heap.pop()
	}
	q.n--
	q.settle()
}

// replaceTop puts e in place of the earliest entry; e must not come
// before it.
func (q *eventQueue) replaceTop(e entry) {
	switch {
	case q.fromRun:
		q.head++
		q.insert(e)
	case e.ref >= 0:
		q.heap.replaceTop(e)
	default:
		q.heap.pop()
		q.insert(e)
	}
	q.settle()
}

// push adds e.
func (q *eventQueue) push(e entry) {
	q.insert(e)
	q.n++
	q.settle()
}

// insert adds e to the run or the heap.
func (q *eventQueue) insert(e entry) {
	if e.ref >= 0 {
		q.heap.push(e)
		return
	}
	n := len(q.run)
	i := n
	for i > q.head && e.before(&q.run[i-1]) != 0 {
		if n-i == runDepth {
			q.heap.push(e)
			return
		}
		i--
	}
	if n == cap(q.run) {
		// Move the held entries to the front, of a slice twice as long
		// if they fill half of this one or more: at most one move per
		// entry taken from the run since the last.
		run := q.run
		if 2*(n-q.head) >= cap(run) {
			run = make([]entry, 0, max(16, 2*cap(run)))
		}
		k := copy(run[:cap(run)], q.run[q.head:])
		i -= q.head
		q.run, q.head, n = run[:k], 0, k
	}
	q.run = q.run[:n+1]
	for ; n > i; n-- { // at most runDepth
		q.run[n] = q.run[n-1]
	}
	q.run[i] = e
}
