// Package hugemem allocates large buffers that are written throughout (a
// run's packet buffers, an all-reduce's result and per-chunk state, switch
// registers) so that their first touch costs little.
//
// Each 4 KiB page costs a page fault on first touch, and on a virtual
// machine that fault is expensive: measured on the 2-core Firecracker VM
// this project is developed on, 12 µs per 4 KiB page (400 MiB in 1.2 s)
// against 0.5 µs per 4 KiB-equivalent once advised for huge pages (55 ms)
// when the host already backs the memory, and about 1.7 s per GiB when it
// does not. Make therefore (1) asks for transparent huge pages
// (madvise(MADV_HUGEPAGE)) on the 2 MiB-aligned part of an allocation of
// Threshold bytes or more, and (2) has the kernel fault an allocation of
// PopulateMin bytes or more in from another thread
// (madvise(MADV_POPULATE_WRITE), Linux 5.14, in a goroutine that ends when
// the call returns): on a machine with a second core, the caller finds the
// pages there instead of taking the faults itself. Both are advice: where
// the kernel lacks them, or on other systems, the memory is ordinary, and
// nothing a program computes depends on them. The memory stays owned by
// the Go garbage collector.
package hugemem

import "unsafe"

// Threshold is the smallest allocation, in bytes, that Make advises for
// huge pages: below it no 2 MiB-aligned huge page fits, and a small buffer
// would pay a whole huge page of resident memory.
const Threshold = 2 << 20

// PopulateMin is the smallest allocation, in bytes, that Make has faulted
// in ahead.
const PopulateMin = 1 << 20

const hugePage = 2 << 20

// Make returns make([]T, n), advised as the package says when it spans
// PopulateMin bytes or more.
func Make[T any](n int) []T {
	s := make([]T, n)
	var zero T
	if size := uintptr(n) * unsafe.Sizeof(zero); n > 0 && size >= PopulateMin {
		advise(unsafe.Pointer(unsafe.SliceData(s)), size)
	}
	return s
}

// alignedRange returns the part of [p, p+size) aligned to align (a power
// of two) as an offset from p and a length (0 when there is none).
func alignedRange(p, size, align uintptr) (off, n uintptr) {
	lo := (p + align - 1) &^ (align - 1)
	hi := (p + size) &^ (align - 1)
	if hi <= lo {
		return 0, 0
	}
	return lo - p, hi - lo
}
