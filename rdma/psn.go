package rdma

// PSNs are 24-bit sequence numbers compared modulo 2^24 within a window of
// ±2^23 (Linux rxe psn_compare).

// PSNMask masks a value to 24 bits.
const PSNMask = 1<<24 - 1

// PSNAdd returns psn+n modulo 2^24.
func PSNAdd(psn uint32, n int) uint32 { return (psn + uint32(n)) & PSNMask }

// PSNDiff returns the signed distance a-b modulo 2^24, in [-2^23, 2^23).
func PSNDiff(a, b uint32) int32 { return int32((a-b)<<8) >> 8 }

// PSNLess reports whether a precedes b in PSN order.
func PSNLess(a, b uint32) bool { return PSNDiff(a, b) < 0 }
