//go:build purego || !amd64

package sw

// wide is false: there are no wide lane kernels in this build (lanes.go's
// portable loops take every lane). See lanes_amd64.go.
var wide = false

func addWrapWide([]uint32, []byte) bool { panic("sw: no wide lane kernels") }
func writeWide([]uint32, []byte)        { panic("sw: no wide lane kernels") }
func readWide([]uint32, []byte)         { panic("sw: no wide lane kernels") }
func swapWide([]uint32, []byte)         { panic("sw: no wide lane kernels") }

// prefetch does nothing in this build (lanes_amd64.go's issues PREFETCHT0).
func prefetch([]uint32) {}

// anchorAddWide reports that there is no SIMD anchor in this build.
func anchorAddWide([]int32, []byte) bool { return false }
