package prefetch

import (
	"testing"
	"unsafe"
)

// TestLinesChangesNothing: asking for lines, of any length, leaves the
// memory as it was.
func TestLinesChangesNothing(t *testing.T) {
	b := make([]byte, 4096)
	for i := range b {
		b[i] = byte(i * 7)
	}
	for _, n := range []int{0, 1, 63, 64, 65, 200, 4096} {
		Lines(unsafe.Pointer(&b[0]), n)
	}
	for i := range b {
		if b[i] != byte(i*7) {
			t.Fatalf("byte %d changed", i)
		}
	}
}
