package host

import (
	"testing"
	"unsafe"
)

// Take hands out zeroed, disjoint slices whose capacity is their length,
// one allocation per block.
func TestSlab(t *testing.T) {
	var s Slab[byte]
	a, b := s.Take(10), s.Take(20)
	for i := range a {
		a[i] = 0xff
	}
	if len(a) != 10 || cap(a) != 10 || len(b) != 20 || b[0] != 0 {
		t.Fatalf("a %d/%d, b %d, b[0] %d", len(a), cap(a), len(b), b[0])
	}
	if a = append(a, 1); b[0] != 0 || len(a) != 11 { // reallocates: b is untouched
		t.Errorf("appending to one slice wrote into the next")
	}
	if big := s.Take(SlabBlock + 1); len(big) != SlabBlock+1 {
		t.Errorf("a take larger than a block: %d bytes", len(big))
	}
	if n := testing.AllocsPerRun(1000, func() { s.Take(300) }); n > 0.01 {
		t.Errorf("%.3f allocations per 300-byte take, want 1 per %d bytes", n, SlabBlock)
	}
	var w Slab[int32]
	if x := w.Take(3); len(x) != 3 || cap(x) != 3 || cap(w.buf) != SlabBlock/4-3 {
		t.Errorf("int32 slab: take %d/%d, block left %d, want %d", len(x), cap(x), cap(w.buf), SlabBlock/4-3)
	}
}

// TestSlabGrows: the blocks double up to SlabMaxBlock, so a slab of many
// megabytes takes a few blocks, and every slice is zeroed and disjoint.
func TestSlabGrows(t *testing.T) {
	var s Slab[byte]
	blocks, prev := 0, []byte(nil)
	for range (24 << 20) / 300 {
		b := s.Take(300)
		if b[0] != 0 || b[299] != 0 {
			t.Fatal("a slice is not zeroed")
		}
		b[0], b[299] = 1, 1
		if prev == nil || !adjacent(prev, b) {
			blocks++
		}
		prev = b
	}
	// 64 KiB, 128 KiB, ... 8 MiB (8 blocks, 16 MiB - 64 KiB), then 8 MiB ones.
	if blocks < 9 || blocks > 11 {
		t.Fatalf("%d blocks for 24 MiB, want 9..11", blocks)
	}
}

// adjacent reports whether b starts right after a in memory.
func adjacent(a, b []byte) bool {
	return uintptr(unsafe.Pointer(&a[len(a)-1]))+1 == uintptr(unsafe.Pointer(&b[0]))
}
