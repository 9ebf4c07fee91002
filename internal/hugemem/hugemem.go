// Package hugemem allocates large buffers that the kernel may back with huge
// pages.
//
// A run's packet buffers and tensors are touched once, front to back, and
// each 4 KiB page costs a page fault on first touch. On a virtual machine
// that fault is expensive: measured on the 2-core Firecracker VM this
// project is developed on, 12 µs per 4 KiB page (400 MiB in 1.2 s) against
// 0.5 µs per 4 KiB-equivalent once advised for huge pages (55 ms), and the
// star benchmark against ns-3 spent a third of its time there. Make asks
// for transparent huge pages (madvise(MADV_HUGEPAGE)) on the 2 MiB-aligned
// part of a large allocation before anything touches it. It is advice only:
// where the kernel has transparent huge pages off, or on other systems, the
// memory is ordinary. The memory stays owned by the Go garbage collector.
package hugemem

import "unsafe"

// Threshold is the smallest allocation, in bytes, that Make advises: below
// it no 2 MiB-aligned huge page fits, and a small buffer would pay a whole
// huge page of resident memory.
const Threshold = 2 << 20

const hugePage = 2 << 20

// Make returns make([]T, n), advising its memory for huge pages when it
// spans at least Threshold bytes.
func Make[T any](n int) []T {
	s := make([]T, n)
	var zero T
	if size := uintptr(n) * unsafe.Sizeof(zero); n > 0 && size >= Threshold {
		advise(unsafe.Pointer(&s[0]), size)
	}
	return s
}

// alignedRange returns the 2 MiB-aligned part of [p, p+size) as an offset
// from p and a length (0 when there is none).
func alignedRange(p, size uintptr) (off, n uintptr) {
	lo := (p + hugePage - 1) &^ (hugePage - 1)
	hi := (p + size) &^ (hugePage - 1)
	if hi <= lo {
		return 0, 0
	}
	return lo - p, hi - lo
}
