package sw

import "encoding/binary"

// Value-lane kernels. reg has n lanes; pkt has 4n big-endian bytes. Each
// lane is one register RMW (one SALU on Tofino). Adds saturate at the int32
// limits and report whether any lane saturated.
//
// A register holds its int32 value in offset binary, v ^ regBias (regOf,
// valueOf): MinInt32 is 0, MaxInt32 is 0xFFFFFFFF. A register r plus a
// packet value b, sign-extended, is then exact in 64 bits and lies in
// [0, 2³²) if and only if the int32 sum does not overflow, so one OR per
// lane collects the overflow of a whole block, in its bits 32 and up. The
// loops take 16 lanes (64 bytes) per iteration through fixed-size array
// pointers (no bounds checks) and decode two big-endian lanes per 64-bit
// load. Where the CPU has AVX2 (lanes_amd64.go, wide), each block's whole
// groups of 16 lanes go through the same operations on 256-bit vectors
// first, and these loops take the rest.

// regBias maps an int32 value to its register form and back.
const regBias = 0x80000000

// pairBias is regBias for two lanes in one 64-bit word.
const pairBias = regBias<<32 | regBias

// regOf is the register form of value v.
func regOf(v int32) uint32 { return uint32(v) ^ regBias }

// valueOf is the value of register r.
func valueOf(r uint32) int32 { return int32(r ^ regBias) }

// wideLanes is how many of n lanes the wide kernels take: whole groups of
// 16, where there are wide kernels.
func wideLanes(n int) int {
	if !wide {
		return 0
	}
	return n &^ 15
}

// wholeWide reports whether the wide kernels take all n lanes of a block:
// where there are wide kernels, and n is a positive multiple of 16 (every
// block of whole 64-value passes). Such a block calls its wide kernel
// straight away.
func wholeWide(n int) bool { return wide && n > 0 && n&15 == 0 }

// bothWays runs wideFn on the whole groups of 16 lanes of reg (where there
// are wide kernels) and laneFn on the rest, each with its share of pkt.
func bothWays(reg []uint32, pkt []byte, wideFn, laneFn func([]uint32, []byte)) {
	pkt = pkt[:4*len(reg)]
	if n := wideLanes(len(reg)); n > 0 {
		wideFn(reg[:n], pkt[:4*n])
		reg, pkt = reg[n:], pkt[4*n:]
	}
	laneFn(reg, pkt)
}

// writeBlock: reg = pkt.
func writeBlock(reg []uint32, pkt []byte) {
	if wholeWide(len(reg)) {
		writeWide(reg, pkt)
		return
	}
	bothWays(reg, pkt, writeWide, writeLanes)
}

// writeLanes is writeBlock's portable loop.
func writeLanes(reg []uint32, pkt []byte) {
	pkt = pkt[:4*len(reg)]
	for len(reg) >= 16 {
		r, p := (*[16]uint32)(reg), (*[64]byte)(pkt)
		x0 := binary.BigEndian.Uint64(p[0:]) ^ pairBias
		r[0], r[1] = uint32(x0>>32), uint32(x0)
		x1 := binary.BigEndian.Uint64(p[8:]) ^ pairBias
		r[2], r[3] = uint32(x1>>32), uint32(x1)
		x2 := binary.BigEndian.Uint64(p[16:]) ^ pairBias
		r[4], r[5] = uint32(x2>>32), uint32(x2)
		x3 := binary.BigEndian.Uint64(p[24:]) ^ pairBias
		r[6], r[7] = uint32(x3>>32), uint32(x3)
		x4 := binary.BigEndian.Uint64(p[32:]) ^ pairBias
		r[8], r[9] = uint32(x4>>32), uint32(x4)
		x5 := binary.BigEndian.Uint64(p[40:]) ^ pairBias
		r[10], r[11] = uint32(x5>>32), uint32(x5)
		x6 := binary.BigEndian.Uint64(p[48:]) ^ pairBias
		r[12], r[13] = uint32(x6>>32), uint32(x6)
		x7 := binary.BigEndian.Uint64(p[56:]) ^ pairBias
		r[14], r[15] = uint32(x7>>32), uint32(x7)
		reg, pkt = reg[16:], pkt[64:]
	}
	for i := range reg {
		reg[i] = binary.BigEndian.Uint32(pkt[4*i:]) ^ regBias
	}
}

// readBlock: pkt = reg.
func readBlock(reg []uint32, pkt []byte) {
	if wholeWide(len(reg)) {
		readWide(reg, pkt)
		return
	}
	bothWays(reg, pkt, readWide, readLanes)
}

// readLanes is readBlock's portable loop.
func readLanes(reg []uint32, pkt []byte) {
	pkt = pkt[:4*len(reg)]
	for len(reg) >= 16 {
		r, p := (*[16]uint32)(reg), (*[64]byte)(pkt)
		binary.BigEndian.PutUint64(p[0:], (uint64(r[0])<<32|uint64(r[1]))^pairBias)
		binary.BigEndian.PutUint64(p[8:], (uint64(r[2])<<32|uint64(r[3]))^pairBias)
		binary.BigEndian.PutUint64(p[16:], (uint64(r[4])<<32|uint64(r[5]))^pairBias)
		binary.BigEndian.PutUint64(p[24:], (uint64(r[6])<<32|uint64(r[7]))^pairBias)
		binary.BigEndian.PutUint64(p[32:], (uint64(r[8])<<32|uint64(r[9]))^pairBias)
		binary.BigEndian.PutUint64(p[40:], (uint64(r[10])<<32|uint64(r[11]))^pairBias)
		binary.BigEndian.PutUint64(p[48:], (uint64(r[12])<<32|uint64(r[13]))^pairBias)
		binary.BigEndian.PutUint64(p[56:], (uint64(r[14])<<32|uint64(r[15]))^pairBias)
		reg, pkt = reg[16:], pkt[64:]
	}
	for i := range reg {
		binary.BigEndian.PutUint32(pkt[4*i:], reg[i]^regBias)
	}
}

// swapBlock: reg = pkt and pkt = the old reg, at once.
func swapBlock(reg []uint32, pkt []byte) {
	if wholeWide(len(reg)) {
		swapWide(reg, pkt)
		return
	}
	bothWays(reg, pkt, swapWide, swapLanes)
}

// swapLanes is swapBlock's portable loop.
func swapLanes(reg []uint32, pkt []byte) {
	pkt = pkt[:4*len(reg)]
	for len(reg) >= 16 {
		r, p := (*[16]uint32)(reg), (*[64]byte)(pkt)
		x0, y0 := binary.BigEndian.Uint64(p[0:])^pairBias, (uint64(r[0])<<32|uint64(r[1]))^pairBias
		r[0], r[1] = uint32(x0>>32), uint32(x0)
		binary.BigEndian.PutUint64(p[0:], y0)
		x1, y1 := binary.BigEndian.Uint64(p[8:])^pairBias, (uint64(r[2])<<32|uint64(r[3]))^pairBias
		r[2], r[3] = uint32(x1>>32), uint32(x1)
		binary.BigEndian.PutUint64(p[8:], y1)
		x2, y2 := binary.BigEndian.Uint64(p[16:])^pairBias, (uint64(r[4])<<32|uint64(r[5]))^pairBias
		r[4], r[5] = uint32(x2>>32), uint32(x2)
		binary.BigEndian.PutUint64(p[16:], y2)
		x3, y3 := binary.BigEndian.Uint64(p[24:])^pairBias, (uint64(r[6])<<32|uint64(r[7]))^pairBias
		r[6], r[7] = uint32(x3>>32), uint32(x3)
		binary.BigEndian.PutUint64(p[24:], y3)
		x4, y4 := binary.BigEndian.Uint64(p[32:])^pairBias, (uint64(r[8])<<32|uint64(r[9]))^pairBias
		r[8], r[9] = uint32(x4>>32), uint32(x4)
		binary.BigEndian.PutUint64(p[32:], y4)
		x5, y5 := binary.BigEndian.Uint64(p[40:])^pairBias, (uint64(r[10])<<32|uint64(r[11]))^pairBias
		r[10], r[11] = uint32(x5>>32), uint32(x5)
		binary.BigEndian.PutUint64(p[40:], y5)
		x6, y6 := binary.BigEndian.Uint64(p[48:])^pairBias, (uint64(r[12])<<32|uint64(r[13]))^pairBias
		r[12], r[13] = uint32(x6>>32), uint32(x6)
		binary.BigEndian.PutUint64(p[48:], y6)
		x7, y7 := binary.BigEndian.Uint64(p[56:])^pairBias, (uint64(r[14])<<32|uint64(r[15]))^pairBias
		r[14], r[15] = uint32(x7>>32), uint32(x7)
		binary.BigEndian.PutUint64(p[56:], y7)
		reg, pkt = reg[16:], pkt[64:]
	}
	for i, v := range reg {
		reg[i] = binary.BigEndian.Uint32(pkt[4*i:]) ^ regBias
		binary.BigEndian.PutUint32(pkt[4*i:], v^regBias)
	}
}

// addBlock: reg += pkt, saturating. The wrapped sums are stored as they
// come; only a block that overflowed takes the saturating repair loop.
func addBlock(reg []uint32, pkt []byte) bool {
	pkt = pkt[:4*len(reg)]
	var o bool
	if wholeWide(len(reg)) {
		o = addWrapWide(reg, pkt)
	} else {
		o = addWrap(reg, pkt)
	}
	if !o {
		return false
	}
	saturate(reg, pkt)
	return true
}

// addWrap: reg += pkt, wrapping; it reports whether a lane overflowed.
func addWrap(reg []uint32, pkt []byte) bool {
	var o bool
	if n := wideLanes(len(reg)); n > 0 {
		o = addWrapWide(reg[:n], pkt[:4*n])
		reg, pkt = reg[n:], pkt[4*n:]
	}
	return addWrapLanes(reg, pkt) || o
}

// addWrapLanes is addWrap's portable loop.
func addWrapLanes(reg []uint32, pkt []byte) bool {
	pkt = pkt[:4*len(reg)]
	var o0, o1 uint64
	for len(reg) >= 16 {
		r, p := (*[16]uint32)(reg), (*[64]byte)(pkt)
		x0 := uint64(p[0])<<56 | uint64(p[1])<<48 | uint64(p[2])<<40 | uint64(p[3])<<32 | uint64(p[4])<<24 | uint64(p[5])<<16 | uint64(p[6])<<8 | uint64(p[7])
		s0, s1 := uint64(r[0])+uint64(int64(x0)>>32), uint64(r[1])+uint64(int64(int32(x0)))
		o0, o1 = o0|s0, o1|s1
		r[0], r[1] = uint32(s0), uint32(s1)
		x1 := uint64(p[8])<<56 | uint64(p[9])<<48 | uint64(p[10])<<40 | uint64(p[11])<<32 | uint64(p[12])<<24 | uint64(p[13])<<16 | uint64(p[14])<<8 | uint64(p[15])
		s2, s3 := uint64(r[2])+uint64(int64(x1)>>32), uint64(r[3])+uint64(int64(int32(x1)))
		o0, o1 = o0|s2, o1|s3
		r[2], r[3] = uint32(s2), uint32(s3)
		x2 := uint64(p[16])<<56 | uint64(p[17])<<48 | uint64(p[18])<<40 | uint64(p[19])<<32 | uint64(p[20])<<24 | uint64(p[21])<<16 | uint64(p[22])<<8 | uint64(p[23])
		s4, s5 := uint64(r[4])+uint64(int64(x2)>>32), uint64(r[5])+uint64(int64(int32(x2)))
		o0, o1 = o0|s4, o1|s5
		r[4], r[5] = uint32(s4), uint32(s5)
		x3 := uint64(p[24])<<56 | uint64(p[25])<<48 | uint64(p[26])<<40 | uint64(p[27])<<32 | uint64(p[28])<<24 | uint64(p[29])<<16 | uint64(p[30])<<8 | uint64(p[31])
		s6, s7 := uint64(r[6])+uint64(int64(x3)>>32), uint64(r[7])+uint64(int64(int32(x3)))
		o0, o1 = o0|s6, o1|s7
		r[6], r[7] = uint32(s6), uint32(s7)
		x4 := uint64(p[32])<<56 | uint64(p[33])<<48 | uint64(p[34])<<40 | uint64(p[35])<<32 | uint64(p[36])<<24 | uint64(p[37])<<16 | uint64(p[38])<<8 | uint64(p[39])
		s8, s9 := uint64(r[8])+uint64(int64(x4)>>32), uint64(r[9])+uint64(int64(int32(x4)))
		o0, o1 = o0|s8, o1|s9
		r[8], r[9] = uint32(s8), uint32(s9)
		x5 := uint64(p[40])<<56 | uint64(p[41])<<48 | uint64(p[42])<<40 | uint64(p[43])<<32 | uint64(p[44])<<24 | uint64(p[45])<<16 | uint64(p[46])<<8 | uint64(p[47])
		s10, s11 := uint64(r[10])+uint64(int64(x5)>>32), uint64(r[11])+uint64(int64(int32(x5)))
		o0, o1 = o0|s10, o1|s11
		r[10], r[11] = uint32(s10), uint32(s11)
		x6 := uint64(p[48])<<56 | uint64(p[49])<<48 | uint64(p[50])<<40 | uint64(p[51])<<32 | uint64(p[52])<<24 | uint64(p[53])<<16 | uint64(p[54])<<8 | uint64(p[55])
		s12, s13 := uint64(r[12])+uint64(int64(x6)>>32), uint64(r[13])+uint64(int64(int32(x6)))
		o0, o1 = o0|s12, o1|s13
		r[12], r[13] = uint32(s12), uint32(s13)
		x7 := uint64(p[56])<<56 | uint64(p[57])<<48 | uint64(p[58])<<40 | uint64(p[59])<<32 | uint64(p[60])<<24 | uint64(p[61])<<16 | uint64(p[62])<<8 | uint64(p[63])
		s14, s15 := uint64(r[14])+uint64(int64(x7)>>32), uint64(r[15])+uint64(int64(int32(x7)))
		o0, o1 = o0|s14, o1|s15
		r[14], r[15] = uint32(s14), uint32(s15)
		reg, pkt = reg[16:], pkt[64:]
	}
	for i := range reg {
		s := uint64(reg[i]) + uint64(int64(int32(binary.BigEndian.Uint32(pkt[4*i:]))))
		o0 |= s
		reg[i] = uint32(s)
	}
	return (o0|o1)>>32 != 0
}

// addReadBlock: reg += pkt, saturating, and pkt = reg (the completing
// contribution carries the result out).
func addReadBlock(reg []uint32, pkt []byte) bool {
	o := addBlock(reg, pkt)
	readBlock(reg, pkt)
	return o
}

// saturate repairs lanes whose wrapping sum overflowed: the original
// register is the sum minus b (wrapping), and the exact sum is clamped to
// [0, 2³²) (MinInt32 and MaxInt32 in register form).
func saturate(reg []uint32, pkt []byte) {
	for i, s := range reg {
		b := int32(binary.BigEndian.Uint32(pkt[4*i:]))
		switch e := int64(s-uint32(b)) + int64(b); {
		case e < 0:
			reg[i] = 0
		case e > 0xFFFFFFFF:
			reg[i] = 0xFFFFFFFF
		}
	}
}
