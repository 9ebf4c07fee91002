package host

// Slab hands out zeroed byte slices carved from blocks of SlabBlock bytes
// and more, so that many small long-lived buffers (a chunk's stored
// result) cost one allocation per block. Each block is twice the last, up
// to SlabMaxBlock, and a large one is faulted in ahead (makeBig): a slab
// that holds hundreds of megabytes does not take a page fault per 4 KiB
// on the emulator's goroutine. A slice is never handed out twice; its
// capacity is its length, so appending to it cannot reach a neighbour.
// The zero value is ready to use.
type Slab struct {
	buf  []byte
	next int // the next block's size
}

// SlabBlock is the bytes of a Slab's first block; SlabMaxBlock of its
// largest.
const (
	SlabBlock    = 64 << 10
	SlabMaxBlock = 8 << 20
)

// Take returns n zeroed bytes.
func (s *Slab) Take(n int) []byte {
	if len(s.buf) < n {
		size := max(s.next, SlabBlock)
		s.buf = makeBig[byte](max(size, n))
		s.next = min(2*size, SlabMaxBlock)
	}
	b := s.buf[:n:n]
	s.buf = s.buf[n:]
	return b
}
