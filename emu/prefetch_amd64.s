//go:build !purego

#include "textflag.h"

// func prefetch3(p unsafe.Pointer)
//
// PREFETCHT0 of the three cache lines a Packet may span. A prefetch never
// faults and changes no state.
TEXT ·prefetch3(SB), NOSPLIT, $0-8
	MOVQ p+0(FP), AX
	PREFETCHT0 (AX)
	PREFETCHT0 64(AX)
	PREFETCHT0 128(AX)
	RET

// func prefetch2(p unsafe.Pointer)
TEXT ·prefetch2(SB), NOSPLIT, $0-8
	MOVQ p+0(FP), AX
	PREFETCHT0 (AX)
	PREFETCHT0 64(AX)
	RET
