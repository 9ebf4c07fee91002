// Package prefetch asks the CPU to bring memory into its caches ahead of
// use (PREFETCHT0 on amd64), without waiting for it: a hint that never
// faults and changes no state, so nothing a program computes depends on
// it. Elsewhere, and in purego builds, it does nothing.
package prefetch

import "unsafe"

// Lines asks for the cache lines of the n bytes from p on (at least one).
// p need not be valid memory: a prefetch of an unmapped address is
// dropped.
func Lines(p unsafe.Pointer, n int) { lines(p, n) }
