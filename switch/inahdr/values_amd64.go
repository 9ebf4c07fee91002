//go:build !purego

package inahdr

import (
	"unsafe"

	"golang.org/x/sys/cpu"
)

// wideValues says whether ReadValues takes the bulk of its values 16 at a
// time with AVX2 (values_amd64.s). Its Go loop takes the rest, and all of
// them where AVX2 is missing or the purego build tag is set. Tests turn it
// off to check that loop alone.
var wideValues = cpu.X86.HasAVX2

//go:noescape
func readValuesAVX2(dst *int32, src *byte, n int)

// readValuesWide reads the first len(dst) &^ 15 big-endian values of src
// into dst and returns how many it read.
func readValuesWide(dst []int32, src []byte) int {
	n := len(dst) &^ 15
	if n == 0 || !wideValues {
		return 0
	}
	_ = src[4*n-1]
	readValuesAVX2(unsafe.SliceData(dst), unsafe.SliceData(src), n)
	return n
}
