package host

import (
	"syscall"
	"unsafe"
)

// adviseHuge asks for transparent huge pages over the 2 MiB-aligned
// interior of the size bytes at p (advice only: an error changes nothing).
func adviseHuge(p unsafe.Pointer, size uintptr) {
	const huge = 2 << 20
	lo := (uintptr(p) + huge - 1) &^ (huge - 1)
	hi := (uintptr(p) + size) &^ (huge - 1)
	if hi <= lo {
		return
	}
	_ = syscall.Madvise(unsafe.Slice((*byte)(unsafe.Add(p, lo-uintptr(p))), hi-lo), syscall.MADV_HUGEPAGE)
}
