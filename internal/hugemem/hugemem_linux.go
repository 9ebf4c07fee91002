package hugemem

import (
	"unsafe"

	"golang.org/x/sys/unix"
)

func advise(p unsafe.Pointer, size uintptr) {
	off, n := alignedRange(uintptr(p), size)
	if n > 0 {
		// Advice only: an error (THP compiled out) leaves the memory
		// ordinary.
		_ = unix.Madvise(unsafe.Slice((*byte)(unsafe.Add(p, off)), n), unix.MADV_HUGEPAGE)
	}
}
