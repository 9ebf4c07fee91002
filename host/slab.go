package host

// Slab hands out zeroed byte slices carved from blocks of SlabBlock bytes,
// so that many small long-lived buffers (a chunk's stored result) cost one
// allocation per block. A slice is never handed out twice; its capacity is
// its length, so appending to it cannot reach a neighbour. The zero value
// is ready to use.
type Slab struct {
	buf []byte
}

// SlabBlock is the bytes of one block of a Slab.
const SlabBlock = 64 << 10

// Take returns n zeroed bytes.
func (s *Slab) Take(n int) []byte {
	if len(s.buf) < n {
		s.buf = make([]byte, max(SlabBlock, n))
	}
	b := s.buf[:n:n]
	s.buf = s.buf[n:]
	return b
}
