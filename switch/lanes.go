package sw

import (
	"encoding/binary"
	"math"
)

// Value-lane kernels. reg has n lanes; pkt has 4n big-endian bytes. Each
// lane is one register RMW (one SALU on Tofino). Adds saturate at the int32
// limits and report whether any lane saturated.

func writeBlock(reg []int32, pkt []byte) {
	pkt = pkt[:4*len(reg)]
	i := 0
	for ; i+4 <= len(reg); i += 4 {
		r := reg[i : i+4 : i+4]
		p := pkt[4*i : 4*i+16 : 4*i+16]
		u, w := binary.BigEndian.Uint64(p[0:]), binary.BigEndian.Uint64(p[8:])
		r[0], r[1], r[2], r[3] = int32(u>>32), int32(u), int32(w>>32), int32(w)
	}
	for ; i < len(reg); i++ {
		reg[i] = int32(binary.BigEndian.Uint32(pkt[4*i:]))
	}
}

func readBlock(reg []int32, pkt []byte) {
	pkt = pkt[:4*len(reg)]
	i := 0
	for ; i+4 <= len(reg); i += 4 {
		r := reg[i : i+4 : i+4]
		p := pkt[4*i : 4*i+16 : 4*i+16]
		binary.BigEndian.PutUint64(p[0:], uint64(uint32(r[0]))<<32|uint64(uint32(r[1])))
		binary.BigEndian.PutUint64(p[8:], uint64(uint32(r[2]))<<32|uint64(uint32(r[3])))
	}
	for ; i < len(reg); i++ {
		binary.BigEndian.PutUint32(pkt[4*i:], uint32(reg[i]))
	}
}

func swapBlock(reg []int32, pkt []byte) {
	pkt = pkt[:4*len(reg)]
	for i, v := range reg {
		reg[i] = int32(binary.BigEndian.Uint32(pkt[4*i:]))
		binary.BigEndian.PutUint32(pkt[4*i:], uint32(v))
	}
}

// addBlock: reg += pkt, saturating. It loads two big-endian lanes per
// 64-bit read and detects signed overflow branch-free; only a block that
// overflowed takes the saturating repair loop.
func addBlock(reg []int32, pkt []byte) bool {
	pkt = pkt[:4*len(reg)]
	var ov int32
	i := 0
	for ; i+4 <= len(reg); i += 4 {
		r := reg[i : i+4 : i+4]
		p := pkt[4*i : 4*i+16 : 4*i+16]
		u, w := binary.BigEndian.Uint64(p[0:]), binary.BigEndian.Uint64(p[8:])
		b0, b1, b2, b3 := int32(u>>32), int32(u), int32(w>>32), int32(w)
		s0, s1, s2, s3 := r[0]+b0, r[1]+b1, r[2]+b2, r[3]+b3
		ov |= (r[0] ^ s0) & (b0 ^ s0)
		ov |= (r[1] ^ s1) & (b1 ^ s1)
		ov |= (r[2] ^ s2) & (b2 ^ s2)
		ov |= (r[3] ^ s3) & (b3 ^ s3)
		r[0], r[1], r[2], r[3] = s0, s1, s2, s3
	}
	for ; i < len(reg); i++ {
		a, b := reg[i], int32(binary.BigEndian.Uint32(pkt[4*i:]))
		s := a + b
		ov |= (a ^ s) & (b ^ s)
		reg[i] = s
	}
	if ov < 0 {
		saturate(reg, pkt)
		return true
	}
	return false
}

// addReadBlock: reg += pkt, saturating, and pkt = reg (the completing
// contribution carries the result out).
func addReadBlock(reg []int32, pkt []byte) bool {
	o := addBlock(reg, pkt)
	readBlock(reg, pkt)
	return o
}

// saturate repairs lanes whose wrapping sum overflowed: the original
// register value is s-b (wrapping), and the sum is clamped.
func saturate(reg []int32, pkt []byte) {
	for i, s := range reg {
		b := int32(binary.BigEndian.Uint32(pkt[4*i:]))
		a := s - b
		if (a^s)&(b^s) < 0 {
			if b > 0 {
				reg[i] = math.MaxInt32
			} else {
				reg[i] = math.MinInt32
			}
		}
	}
}
