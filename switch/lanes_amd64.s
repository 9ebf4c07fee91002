//go:build !purego

#include "textflag.h"

// AVX2 lane kernels for lanes_amd64.go. Each takes n lanes, a multiple of
// 16: two 256-bit vectors (16 registers, 64 packet bytes) per iteration.
// Registers are offset binary (regBias), packet values big-endian int32;
// VPSHUFB with bswap32<> turns the bytes of each 32-bit lane around, and
// VPCMPEQD/VPSLLD make regBias in every lane.

DATA bswap32<>+0x00(SB)/8, $0x0405060700010203
DATA bswap32<>+0x08(SB)/8, $0x0c0d0e0f08090a0b
DATA bswap32<>+0x10(SB)/8, $0x0405060700010203
DATA bswap32<>+0x18(SB)/8, $0x0c0d0e0f08090a0b
GLOBL bswap32<>(SB), RODATA|NOPTR, $32

// LANES loads the arguments (reg or acc in DI, pkt in SI, n/16 in CX) and
// the byte-swap mask (Y15), and jumps to done if there is no group of 16.
#define LANES(done) \
	MOVQ    reg+0(FP), DI; \
	MOVQ    pkt+8(FP), SI; \
	MOVQ    n+16(FP), CX; \
	VMOVDQU bswap32<>(SB), Y15; \
	SHRQ    $4, CX; \
	JZ      done

// BIAS puts regBias in every lane of Y14.
#define BIAS \
	VPCMPEQD Y14, Y14, Y14; \
	VPSLLD   $31, Y14, Y14

// NEXT steps both pointers a group on and loops while groups are left.
#define NEXT(loop) \
	ADDQ $64, SI; \
	ADDQ $64, DI; \
	DECQ CX; \
	JNZ  loop

// func addWrapAVX2(reg *uint32, pkt *byte, n int) uint32
//
// reg += pkt, wrapping. In offset binary the register sum is r' = r + b,
// and the int32 sum overflowed where the sign bit of (r ^ r') &^ (b ^ r')
// is set; the result is the sign bits of those lanes ORed together.
TEXT ·addWrapAVX2(SB), NOSPLIT, $0-28
	VPXOR Y14, Y14, Y14
	LANES(addDone)

addLoop:
	VMOVDQU (SI), Y0
	VMOVDQU 32(SI), Y1
	VPSHUFB Y15, Y0, Y0
	VPSHUFB Y15, Y1, Y1
	VMOVDQU (DI), Y2
	VMOVDQU 32(DI), Y3
	VPADDD  Y0, Y2, Y4
	VPADDD  Y1, Y3, Y5
	VMOVDQU Y4, (DI)
	VMOVDQU Y5, 32(DI)
	VPXOR   Y2, Y4, Y2
	VPXOR   Y3, Y5, Y3
	VPXOR   Y0, Y4, Y0
	VPXOR   Y1, Y5, Y1
	VPANDN  Y2, Y0, Y0
	VPANDN  Y3, Y1, Y1
	VPOR    Y0, Y14, Y14
	VPOR    Y1, Y14, Y14
	NEXT(addLoop)

addDone:
	VMOVMSKPS Y14, AX
	VZEROUPPER
	MOVL    AX, ret+24(FP)
	RET

// func writeAVX2(reg *uint32, pkt *byte, n int)
//
// reg = pkt.
TEXT ·writeAVX2(SB), NOSPLIT, $0-24
	BIAS
	LANES(writeDone)

writeLoop:
	VMOVDQU (SI), Y0
	VMOVDQU 32(SI), Y1
	VPSHUFB Y15, Y0, Y0
	VPSHUFB Y15, Y1, Y1
	VPXOR   Y14, Y0, Y0
	VPXOR   Y14, Y1, Y1
	VMOVDQU Y0, (DI)
	VMOVDQU Y1, 32(DI)
	NEXT(writeLoop)

writeDone:
	VZEROUPPER
	RET

// func readAVX2(reg *uint32, pkt *byte, n int)
//
// pkt = reg.
TEXT ·readAVX2(SB), NOSPLIT, $0-24
	BIAS
	LANES(readDone)

readLoop:
	VMOVDQU (DI), Y0
	VMOVDQU 32(DI), Y1
	VPXOR   Y14, Y0, Y0
	VPXOR   Y14, Y1, Y1
	VPSHUFB Y15, Y0, Y0
	VPSHUFB Y15, Y1, Y1
	VMOVDQU Y0, (SI)
	VMOVDQU Y1, 32(SI)
	NEXT(readLoop)

readDone:
	VZEROUPPER
	RET

// func swapAVX2(reg *uint32, pkt *byte, n int)
//
// reg = pkt and pkt = the old reg.
TEXT ·swapAVX2(SB), NOSPLIT, $0-24
	BIAS
	LANES(swapDone)

swapLoop:
	VMOVDQU (SI), Y0
	VMOVDQU 32(SI), Y1
	VMOVDQU (DI), Y2
	VMOVDQU 32(DI), Y3
	VPSHUFB Y15, Y0, Y0
	VPSHUFB Y15, Y1, Y1
	VPXOR   Y14, Y0, Y0
	VPXOR   Y14, Y1, Y1
	VPXOR   Y14, Y2, Y2
	VPXOR   Y14, Y3, Y3
	VPSHUFB Y15, Y2, Y2
	VPSHUFB Y15, Y3, Y3
	VMOVDQU Y0, (DI)
	VMOVDQU Y1, 32(DI)
	VMOVDQU Y2, (SI)
	VMOVDQU Y3, 32(SI)
	NEXT(swapLoop)

swapDone:
	VZEROUPPER
	RET

// func addAnchorAVX2(reg *int32, pkt *byte, n int)
//
// reg += pkt (int32 lanes, not offset binary), wrapping, with no overflow check: the benchmark's SIMD
// anchor (the machine's rate for this add), not used by the switch.
TEXT ·addAnchorAVX2(SB), NOSPLIT, $0-24
	LANES(anchorDone)

anchorLoop:
	VMOVDQU (SI), Y0
	VMOVDQU 32(SI), Y1
	VPSHUFB Y15, Y0, Y0
	VPSHUFB Y15, Y1, Y1
	VPADDD  (DI), Y0, Y0
	VPADDD  32(DI), Y1, Y1
	VMOVDQU Y0, (DI)
	VMOVDQU Y1, 32(DI)
	NEXT(anchorLoop)

anchorDone:
	VZEROUPPER
	RET
