package hugemem

import (
	"unsafe"

	"golang.org/x/sys/unix"
)

func advise(p unsafe.Pointer, size uintptr) {
	if size >= Threshold {
		if off, n := alignedRange(uintptr(p), size, hugePage); n > 0 {
			_ = unix.Madvise(unsafe.Slice((*byte)(unsafe.Add(p, off)), n), unix.MADV_HUGEPAGE)
		}
	}
	if off, n := alignedRange(uintptr(p), size, 4096); n > 0 {
		b := unsafe.Slice((*byte)(unsafe.Add(p, off)), n)
		// The slice keeps the memory alive until the kernel is done; the
		// call writes nothing, so it races with nothing the caller does.
		go func() { _ = unix.Madvise(b, unix.MADV_POPULATE_WRITE) }()
	}
}
