//go:build !purego

#include "textflag.h"

// The AVX2 kernel of quantizeWire (quant_amd64.go): eight values an
// iteration, each float32 widened to float64 (exact), scaled (a power of
// two: exact), added to 1.5·2^52 (rounds to the nearest integer, ties to
// even, as the scalar loop does) and less 1.5·2^52's bits as an int64.

DATA roundMagic<>+0x00(SB)/8, $0x4338000000000000
GLOBL roundMagic<>(SB), RODATA|NOPTR, $8

// In each 128-bit lane: the low 32 bits of both int64s, byte-swapped
// (big-endian), into the lane's low 8 bytes; zeros above.
DATA packSwap<>+0x00(SB)/8, $0x08090a0b00010203
DATA packSwap<>+0x08(SB)/8, $0x8080808080808080
DATA packSwap<>+0x10(SB)/8, $0x08090a0b00010203
DATA packSwap<>+0x18(SB)/8, $0x8080808080808080
GLOBL packSwap<>(SB), RODATA|NOPTR, $32

// Each 32-bit lane's bytes turned around (big-endian).
DATA bswap32<>+0x00(SB)/8, $0x0405060700010203
DATA bswap32<>+0x08(SB)/8, $0x0c0d0e0f08090a0b
DATA bswap32<>+0x10(SB)/8, $0x0405060700010203
DATA bswap32<>+0x18(SB)/8, $0x0c0d0e0f08090a0b
GLOBL bswap32<>(SB), RODATA|NOPTR, $32

// GROUPS loads both kernels' first arguments (dst in DI, src in SI, the
// groups of eight in CX), zeroes the count done (AX), and jumps to done if
// there is no group.
#define GROUPS(done) \
	MOVQ dst+0(FP), DI; \
	MOVQ src+8(FP), SI; \
	MOVQ n+16(FP), CX; \
	XORQ AX, AX; \
	SHRQ $3, CX; \
	JZ   done

// func quantizeWireAVX2(dst *byte, src *float32, n int, scale float64, lim int64) int
//
// Quantizes groups of eight values of src into dst (32 bytes a group)
// while every value of a group is within ±lim, and returns the values
// done: n rounded down to eight, or where the first group with a value out
// of range starts (that group is not written).
TEXT ·quantizeWireAVX2(SB), NOSPLIT, $0-48
	GROUPS(done)
	VBROADCASTSD scale+24(FP), Y15
	VBROADCASTSD roundMagic<>(SB), Y14
	VPBROADCASTQ lim+32(FP), Y13
	VPXOR        Y12, Y12, Y12
	VPSUBQ       Y13, Y12, Y12          // -lim
	VMOVDQU      packSwap<>(SB), Y11

loop:
	VCVTPS2PD   (SI), Y0
	VCVTPS2PD   16(SI), Y1
	VMULPD      Y15, Y0, Y0
	VMULPD      Y15, Y1, Y1
	VADDPD      Y14, Y0, Y0
	VADDPD      Y14, Y1, Y1
	VPSUBQ      Y14, Y0, Y0             // the rounded values, int64
	VPSUBQ      Y14, Y1, Y1
	VPCMPGTQ    Y13, Y0, Y2             // v > lim
	VPCMPGTQ    Y0, Y12, Y3             // v < -lim
	VPCMPGTQ    Y13, Y1, Y4
	VPCMPGTQ    Y1, Y12, Y5
	VPOR        Y2, Y3, Y2
	VPOR        Y4, Y5, Y4
	VPOR        Y2, Y4, Y2
	VPTEST      Y2, Y2
	JNZ         done
	VPSHUFB     Y11, Y0, Y0             // lanes: v0 v1 . . | v2 v3 . .
	VPSHUFB     Y11, Y1, Y1             // lanes: v4 v5 . . | v6 v7 . .
	VPUNPCKLQDQ Y1, Y0, Y2              // v0 v1 v4 v5 | v2 v3 v6 v7
	VPERMQ      $0xd8, Y2, Y2           // v0 v1 v2 v3 v4 v5 v6 v7
	VMOVDQU     Y2, (DI)
	ADDQ        $32, SI
	ADDQ        $32, DI
	ADDQ        $8, AX
	DECQ        CX
	JNZ         loop

done:
	VZEROUPPER
	MOVQ AX, ret+40(FP)
	RET

// func quantizeWire32AVX2(dst *byte, src *float32, n int, scale float32, lim int32) int
//
// quantizeWireAVX2 in float32, for a scale that is a normal float32 (a
// power of two in [2^-126, 2^127]): x·scale is then exact wherever it is a
// normal float32, and rounds to 0 either way where it is not; VCVTPS2DQ
// rounds it to the nearest integer, ties to even (Go keeps MXCSR's default
// rounding), and gives 0x80000000, below -lim, for anything beyond int32,
// infinities and NaN. So every value comes out as the float64 kernel's,
// and the same groups are out of range.
TEXT ·quantizeWire32AVX2(SB), NOSPLIT, $0-40
	GROUPS(done32)
	VBROADCASTSS scale+24(FP), Y15
	MOVL         lim+28(FP), R8
	VMOVD        R8, X13
	VPBROADCASTD X13, Y13
	VPXOR        Y12, Y12, Y12
	VPSUBD       Y13, Y12, Y12          // -lim
	VMOVDQU      bswap32<>(SB), Y11

loop32:
	VMULPS    (SI), Y15, Y0
	VCVTPS2DQ Y0, Y0                    // the rounded values, int32
	VPCMPGTD  Y13, Y0, Y2               // v > lim
	VPCMPGTD  Y0, Y12, Y3               // v < -lim
	VPOR      Y2, Y3, Y2
	VPTEST    Y2, Y2
	JNZ       done32
	VPSHUFB   Y11, Y0, Y0
	VMOVDQU   Y0, (DI)
	ADDQ      $32, SI
	ADDQ      $32, DI
	ADDQ      $8, AX
	DECQ      CX
	JNZ       loop32

done32:
	VZEROUPPER
	MOVQ AX, ret+32(FP)
	RET
