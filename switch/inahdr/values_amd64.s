//go:build !purego

#include "textflag.h"

// The AVX2 kernel of values_amd64.go. VPSHUFB with bswap32<> turns the
// bytes of each 32-bit lane around.

DATA bswap32<>+0x00(SB)/8, $0x0405060700010203
DATA bswap32<>+0x08(SB)/8, $0x0c0d0e0f08090a0b
DATA bswap32<>+0x10(SB)/8, $0x0405060700010203
DATA bswap32<>+0x18(SB)/8, $0x0c0d0e0f08090a0b
GLOBL bswap32<>(SB), RODATA|NOPTR, $32

// func readValuesAVX2(dst *int32, src *byte, n int)
//
// dst[i] = the big-endian int32 at src[4i:] for i < n, n a multiple of 16:
// two 256-bit vectors (64 bytes) per iteration.
TEXT ·readValuesAVX2(SB), NOSPLIT, $0-24
	MOVQ    dst+0(FP), DI
	MOVQ    src+8(FP), SI
	MOVQ    n+16(FP), CX
	SHRQ    $4, CX
	JZ      done
	VMOVDQU bswap32<>(SB), Y15

loop:
	VMOVDQU (SI), Y0
	VMOVDQU 32(SI), Y1
	VPSHUFB Y15, Y0, Y0
	VPSHUFB Y15, Y1, Y1
	VMOVDQU Y0, (DI)
	VMOVDQU Y1, 32(DI)
	ADDQ    $64, SI
	ADDQ    $64, DI
	DECQ    CX
	JNZ     loop
	VZEROUPPER

done:
	RET
