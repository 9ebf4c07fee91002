package emu

import "github.com/inabox/inabox/internal/hugemem"

// dequeBlockLen is the number of entries in one block of a deque.
const dequeBlockLen = 128

// dequeBlock is one fixed-size block of a deque's entries.
type dequeBlock[T any] struct {
	v    [dequeBlockLen]T
	next *dequeBlock[T]
}

// blockPool is a free list of deque blocks, shared by the deques of one
// network, so a queue that grew and drained leaves its memory to the next.
// It makes blocks in batches, each twice the last up to maxBlockBatch
// (large ones from internal/hugemem: huge pages faulted in ahead).
type blockPool[T any] struct {
	free  *dequeBlock[T]
	batch int // blocks in the next batch
}

const (
	minBlockBatch = 4
	maxBlockBatch = 1024
)

func (bp *blockPool[T]) get() *dequeBlock[T] {
	if bp.free == nil {
		k := max(bp.batch, minBlockBatch)
		bp.batch = min(2*k, maxBlockBatch)
		bs := hugemem.Make[dequeBlock[T]](k)
		for i := range bs {
			bs[i].next = bp.free
			bp.free = &bs[i]
		}
	}
	b := bp.free
	bp.free, b.next = b.next, nil
	return b
}

func (bp *blockPool[T]) put(b *dequeBlock[T]) {
	b.next = bp.free
	bp.free = b
}

// deque is a FIFO held in linked fixed-size blocks: pushing never copies the
// entries already held (a slice's growth would, and would touch twice the
// memory), and drained blocks go back to a blockPool. The zero value is an
// empty deque.
type deque[T any] struct {
	head, tail *dequeBlock[T]
	hi, ti     int // next entry to pop in head; next free entry in tail
	n          int
}

func (q *deque[T]) len() int { return q.n }

func (q *deque[T]) push(v T, bp *blockPool[T]) {
	if q.tail == nil {
		q.head = bp.get()
		q.tail, q.hi, q.ti = q.head, 0, 0
	} else if q.ti == dequeBlockLen {
		b := bp.get()
		q.tail.next = b
		q.tail, q.ti = b, 0
	}
	q.tail.v[q.ti] = v
	q.ti++
	q.n++
}

// front returns the oldest entry; the deque must not be empty.
func (q *deque[T]) front() *T { return &q.head.v[q.hi] }

// pop removes the oldest entry (the deque must not be empty), clearing its
// slot so the block keeps no references.
func (q *deque[T]) pop(bp *blockPool[T]) T {
	b := q.head
	v := b.v[q.hi]
	var zero T
	b.v[q.hi] = zero
	q.hi++
	q.n--
	switch {
	case q.n == 0:
		// Keep the last block for the next push: a queue that empties and
		// refills (the common case) touches no new block.
		q.hi, q.ti = 0, 0
		q.head.next = nil
		q.tail = q.head
	case q.hi == dequeBlockLen:
		q.head, q.hi = b.next, 0
		bp.put(b)
	}
	return v
}

// clear removes every entry, returning all blocks but one to bp.
func (q *deque[T]) clear(bp *blockPool[T]) {
	for q.n > 0 {
		q.pop(bp)
	}
}
