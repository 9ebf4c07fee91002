package host

import (
	"unsafe"

	"github.com/inabox/inabox/internal/hugemem"
)

// Slab hands out zeroed slices carved from blocks of SlabBlock bytes and
// more, so that many small long-lived buffers (a chunk's stored result,
// its partial sum) cost one allocation per block. Each block is twice the
// last, up to SlabMaxBlock, and a large one comes from hugemem.Make (huge
// pages, faulted in ahead): a slab that holds hundreds of megabytes does
// not take a page fault per 4 KiB on the emulator's goroutine. A slice is
// never handed out twice; its capacity is its length, so appending to it
// cannot reach a neighbour. The zero value is ready to use.
type Slab[T any] struct {
	buf  []T
	next int // the next block's size in bytes
}

// SlabBlock is the bytes of a Slab's first block; SlabMaxBlock of its
// largest.
const (
	SlabBlock    = 64 << 10
	SlabMaxBlock = 8 << 20
)

// Take returns n zeroed elements.
func (s *Slab[T]) Take(n int) []T {
	if len(s.buf) < n {
		var zero T
		size := max(s.next, SlabBlock)
		s.buf = hugemem.Make[T](max(size/int(unsafe.Sizeof(zero)), n))
		s.next = min(2*size, SlabMaxBlock)
	}
	b := s.buf[:n:n]
	s.buf = s.buf[n:]
	return b
}
