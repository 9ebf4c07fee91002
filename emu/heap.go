package emu

// evKind says what an event does when it fires.
type evKind uint8

const (
	evArrive evKind = iota // a packet reaches the far end of a link direction
	evTimer                // a node's timer expires
	evFunc                 // a scheduled callback (faults, user hooks)
)

// event is one entry of the scheduler's queue. Events are ordered by (at,
// seq): equal-time events fire in the order they were scheduled, which is what
// makes a run deterministic.
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
	// inOrder marks an evArrive that heads its link direction's in-order
	// arrivals: when it fires, the next of them takes its place.
	inOrder bool
}

// arrival is an in-order packet arrival waiting behind its link direction's
// head (the event in the heap): the event it becomes, without the fields
// every arrival of the direction shares.
type arrival struct {
	at  int64
	seq uint64
	pkt *Packet
	gen uint32
	fcs bool
}

func (a *event) less(b *event) bool {
	return a.at < b.at || (a.at == b.at && a.seq < b.seq)
}

// eventHeap is a 4-ary min-heap of events held by value, so scheduling an
// event allocates nothing once the slice has grown.
type eventHeap struct {
	ev []event
}

func (h *eventHeap) Len() int { return len(h.ev) }

func (h *eventHeap) push(e event) {
	h.ev = append(h.ev, event{})
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

// peek returns the earliest event; the heap must not be empty.
func (h *eventHeap) peek() *event { return &h.ev[0] }

func (h *eventHeap) pop() event {
	top := h.ev[0]
	n := len(h.ev) - 1
	last := h.ev[n]
	h.ev[n] = event{} // drop references for the GC
	h.ev = h.ev[:n]
	if n > 0 {
		h.down(last)
	}
	return top
}

// replaceTop returns the earliest event and puts e in its place: a pop and
// a push in one pass down the heap.
func (h *eventHeap) replaceTop(e event) event {
	top := h.ev[0]
	h.down(e)
	return top
}

// down puts e at the top of the heap, in place of the event there, and
// moves it down to its place: the earliest children move up into the hole
// it leaves, and e goes where the hole stops (the same places as swapping
// e down).
func (h *eventHeap) down(e event) {
	n := len(h.ev)
	i := 0
	for {
		first := 4*i + 1
		if first >= n {
			break
		}
		m := first
		last := min(first+4, n)
		for c := first + 1; c < last; c++ {
			if h.ev[c].less(&h.ev[m]) {
				m = c
			}
		}
		if !h.ev[m].less(&e) {
			break
		}
		h.ev[i] = h.ev[m]
		i = m
	}
	h.ev[i] = e
}
