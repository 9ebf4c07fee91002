//go:build !purego

package sw

import (
	"unsafe"

	pf "github.com/inabox/inabox/internal/prefetch"

	"golang.org/x/sys/cpu"
)

// wide says whether the lane kernels take the bulk of a block 16 lanes at a
// time with AVX2 (lanes_amd64.s). The portable loops in lanes.go take the
// rest, and all of a block where AVX2 is missing or the purego build tag
// is set. Tests turn it off to check those loops alone.
var wide = cpu.X86.HasAVX2

//go:noescape
func addWrapAVX2(reg *uint32, pkt *byte, n int) uint32

//go:noescape
func writeAVX2(reg *uint32, pkt *byte, n int)

//go:noescape
func readAVX2(reg *uint32, pkt *byte, n int)

//go:noescape
func swapAVX2(reg *uint32, pkt *byte, n int)

//go:noescape
func addAnchorAVX2(reg *int32, pkt *byte, n int)

// The wide kernels take len(reg) lanes, a multiple of 16, and 4·len(reg)
// bytes of pkt (their callers slice both).

func addWrapWide(reg []uint32, pkt []byte) bool {
	_ = pkt[4*len(reg)-1]
	return addWrapAVX2(unsafe.SliceData(reg), unsafe.SliceData(pkt), len(reg)) != 0
}

func writeWide(reg []uint32, pkt []byte) {
	_ = pkt[4*len(reg)-1]
	writeAVX2(unsafe.SliceData(reg), unsafe.SliceData(pkt), len(reg))
}

func readWide(reg []uint32, pkt []byte) {
	_ = pkt[4*len(reg)-1]
	readAVX2(unsafe.SliceData(reg), unsafe.SliceData(pkt), len(reg))
}

func swapWide(reg []uint32, pkt []byte) {
	_ = pkt[4*len(reg)-1]
	swapAVX2(unsafe.SliceData(reg), unsafe.SliceData(pkt), len(reg))
}

// anchorAddWide adds the big-endian int32 values of pkt to acc, wrapping,
// 16 lanes at a time with AVX2, and reports whether it could: the pipeline
// benchmark's SIMD anchor, the machine's rate for the add alone. It takes
// len(acc) &^ 15 lanes; the caller adds the rest.
func anchorAddWide(acc []int32, pkt []byte) bool {
	if !wide {
		return false
	}
	if n := len(acc) &^ 15; n > 0 {
		_ = pkt[4*n-1]
		addAnchorAVX2(unsafe.SliceData(acc), unsafe.SliceData(pkt), n)
	}
	return true
}

// prefetch asks the CPU to bring reg's cache lines in (PREFETCHT0): the
// value stages of a batch run after every frame's slot stage, so the
// registers a frame will add into are loaded while the frames after it are
// classified. It changes no state. reg must not be empty.
func prefetch(reg []uint32) {
	pf.Lines(unsafe.Pointer(unsafe.SliceData(reg)), 4*len(reg))
}
