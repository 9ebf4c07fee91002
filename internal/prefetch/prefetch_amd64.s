//go:build !purego

#include "textflag.h"

// func lines(p unsafe.Pointer, n int)
//
// PREFETCHT0 of the cache lines of the n bytes from p on, one per 64
// bytes (at least one).
TEXT ·lines(SB), NOSPLIT, $0-16
	MOVQ p+0(FP), AX
	MOVQ n+8(FP), CX
loop:
	PREFETCHT0 (AX)
	ADDQ $64, AX
	SUBQ $64, CX
	JGT  loop
	RET
