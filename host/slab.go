package host

import "unsafe"

// Slab hands out zeroed slices carved from blocks of SlabBlock bytes, so
// that many small long-lived buffers (a chunk's stored result, its partial
// sum) cost one allocation per block. A slice is never handed out twice;
// its capacity is its length, so appending to it cannot reach a neighbour.
// The zero value is ready to use.
type Slab[T any] struct {
	buf []T
}

// SlabBlock is the bytes of one block of a Slab.
const SlabBlock = 64 << 10

// Take returns n zeroed elements.
func (s *Slab[T]) Take(n int) []T {
	if len(s.buf) < n {
		var zero T
		s.buf = make([]T, max(SlabBlock/int(unsafe.Sizeof(zero)), n))
	}
	b := s.buf[:n:n]
	s.buf = s.buf[n:]
	return b
}
