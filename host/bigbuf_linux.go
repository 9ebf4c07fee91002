package host

import (
	"syscall"
	"unsafe"
)

// madvPopulateWrite is MADV_POPULATE_WRITE (Linux 5.14): fault the range in
// as if written, without writing it.
const madvPopulateWrite = 23

// adviseHuge asks for transparent huge pages over the 2 MiB-aligned
// interior of the size bytes at p, and has the kernel fault all of it in
// from another thread (advice only: an error changes nothing). The
// emulator's goroutine then finds the pages there instead of taking their
// first-touch faults itself: on a 2-core machine the other core pays them.
func adviseHuge(p unsafe.Pointer, size uintptr) {
	const huge = 2 << 20
	lo := (uintptr(p) + huge - 1) &^ (huge - 1)
	hi := (uintptr(p) + size) &^ (huge - 1)
	if hi > lo {
		_ = syscall.Madvise(unsafe.Slice((*byte)(unsafe.Add(p, lo-uintptr(p))), hi-lo), syscall.MADV_HUGEPAGE)
	}
	const page = 4 << 10
	if start := (uintptr(p) + page - 1) &^ (page - 1); start < uintptr(p)+size {
		b := unsafe.Slice((*byte)(unsafe.Add(p, start-uintptr(p))), uintptr(p)+size-start)
		go func() { _ = syscall.Madvise(b, madvPopulateWrite) }()
	}
}
