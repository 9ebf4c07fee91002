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

// arrival is an in-order packet arrival in its link direction's deque:
// the event it becomes, without the fields every arrival of the direction
// shares.
type arrival struct {
	at  int64
	seq uint64
	pkt *Packet
	gen uint32
	fcs bool
}

// entry is an event's place in the scheduler's heap: its time and
// sequence number, and which event it is, so that keeping the order moves
// 24 bytes and no pointers.
type entry struct {
	key uint64 // the time, its sign bit flipped: compared unsigned, in order
	seq uint64
	// ref ≥ 0: the event in Network.slots[ref]; ref < 0: the first
	// in-order arrival of link direction ^ref.
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
