//go:build !purego

package host

import (
	"math"
	"unsafe"

	"golang.org/x/sys/cpu"
)

// wideQuant says whether quantizeWire takes the bulk of its values eight
// at a time with AVX2 (quant_amd64.s). Its Go loop takes the rest, and all
// of them where AVX2 is missing or the purego build tag is set. Tests turn
// it off to check that loop alone.
var wideQuant = cpu.X86.HasAVX2

//go:noescape
func quantizeWireAVX2(dst *byte, src *float32, n int, scale float64, lim int64) int

//go:noescape
func quantizeWire32AVX2(dst *byte, src *float32, n int, scale float32, lim int32) int

// quantizeWireWide quantizes the values of src into dst, 4 bytes a value,
// in groups of eight, up to the first group with a value beyond ±lim, and
// returns how many it did (a multiple of eight).
func quantizeWireWide(dst []byte, src []float32, scale float64, lim int64) int {
	n := len(src) &^ 7
	if n == 0 {
		return 0
	}
	_ = dst[4*n-1]
	if 0x1p-126 <= scale && scale <= 0x1p127 && lim <= math.MaxInt32 {
		// A normal float32: the kernel in float32, eight values a vector.
		return quantizeWire32AVX2(unsafe.SliceData(dst), unsafe.SliceData(src), n, float32(scale), int32(lim))
	}
	return quantizeWireAVX2(unsafe.SliceData(dst), unsafe.SliceData(src), n, scale, lim)
}
