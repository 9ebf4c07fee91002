package rdma

import (
	"encoding/binary"
	"sync/atomic"
)

// HeaderPatch updates a frame's ICRC for a change of its RoCE headers
// (the IPv4, UDP and BTH headers: what a switch's egress rewrite changes,
// addresses, destination QP, opcode, PSN) without a pass over the payload.
// The CRC is linear: for two messages of one length, crc(new) = crc(old)
// xor the raw CRC (no pre- or post-conditioning) of old xor new, and the
// raw CRC of the changed bytes followed by n zero bytes is theirs shifted
// over n bytes (a multiplication by x^(8n) modulo the polynomial, as
// zlib's crc32_combine).
//
//	var hp rdma.HeaderPatch
//	hp.Save(frame)    // the frame's ICRC is correct
//	... change bytes of frame[EthLen:HeadersLen+BTHLen] ...
//	hp.Reseal(frame)  // correct again
type HeaderPatch struct {
	old [patchLen]byte
	end int // the RoCE packet's end when saved; 0: not a RoCE frame
}

const (
	patchLo  = EthLen
	patchHi  = HeadersLen + BTHLen
	patchLen = patchHi - patchLo // 40: a multiple of 8
)

// patchMask is 0 at the header bytes the ICRC masks (they count as all
// ones whatever they hold, so their change changes nothing), 0xFF at the
// others: IPv4 TOS, TTL and header checksum, the UDP checksum, BTH byte 4.
var patchMask = func() (m [patchLen]byte) {
	for i := range m {
		m[i] = 0xFF
	}
	for _, off := range []int{1, 8, 10, 11, IPv4Len + 6, IPv4Len + 7, IPv4Len + UDPLen + 4} {
		m[off] = 0
	}
	return m
}()

// Save records frame's headers before they change. frame must be a
// well-formed RoCEv2 frame whose ICRC is correct; otherwise Reseal
// recomputes the ICRC in full (SetICRC).
func (hp *HeaderPatch) Save(frame []byte) {
	hp.end = 0
	if end, err := roceSpan(frame); err == nil && end >= patchHi+ICRCLen {
		hp.end = end
		copy(hp.old[:], frame[patchLo:patchHi])
	}
}

// Reseal updates frame's ICRC for what changed in its headers since Save;
// it recomputes it in full (SetICRC) when the RoCE packet's length
// changed or Save found no RoCE frame. Only the headers may have changed:
// a change of the payload is not seen.
func (hp *HeaderPatch) Reseal(frame []byte) error {
	end, err := roceSpan(frame)
	if err != nil {
		return err
	}
	if hp.end == 0 || end != hp.end {
		binary.LittleEndian.PutUint32(frame[end-ICRCLen:], icrc(frame[:end]))
		return nil
	}
	var c uint32
	t := &slicing8
	cur := frame[patchLo:patchHi]
	for i := 0; i < patchLen; i += 8 {
		d := (binary.LittleEndian.Uint64(hp.old[i:]) ^ binary.LittleEndian.Uint64(cur[i:])) &
			binary.LittleEndian.Uint64(patchMask[i:])
		c ^= uint32(d)
		c = t[0][byte(d>>56)] ^ t[1][byte(d>>48)] ^ t[2][byte(d>>40)] ^ t[3][byte(d>>32)] ^
			t[4][c>>24] ^ t[5][c>>16&0xFF] ^ t[6][c>>8&0xFF] ^ t[7][c&0xFF]
	}
	if c == 0 {
		return nil // nothing covered changed
	}
	at := frame[end-ICRCLen:]
	binary.LittleEndian.PutUint32(at, binary.LittleEndian.Uint32(at)^shiftCRC(c, end-ICRCLen-patchHi))
	return nil
}

// shiftCRC returns the raw CRC-32 (IEEE, reflected) of a message whose raw
// CRC is c followed by n zero bytes: c·x^(8n) mod P.
func shiftCRC(c uint32, n int) uint32 {
	if n < len(shiftTabs) {
		t := shiftTabs[n].Load()
		if t == nil {
			t = newShiftTab(n)
			shiftTabs[n].Store(t)
		}
		return t[0][c&0xFF] ^ t[1][c>>8&0xFF] ^ t[2][c>>16&0xFF] ^ t[3][c>>24]
	}
	return multModP(x8nModP(n), c)
}

// shiftTabs[n] multiplies by x^(8n) a byte at a time (built on first use:
// a switch sees a few frame lengths).
var shiftTabs [MaxOverhead + 9216]atomic.Pointer[[4][256]uint32]

func newShiftTab(n int) *[4][256]uint32 {
	op := x8nModP(n)
	t := new([4][256]uint32)
	for k := range 4 {
		for b := 1; b < 256; b++ {
			low := b & -b
			if low == b {
				t[k][b] = multModP(op, uint32(b)<<(8*k))
			} else {
				t[k][b] = t[k][b&^low] ^ t[k][low]
			}
		}
	}
	return t
}

// crcPoly is the reflected CRC-32 (IEEE) polynomial.
const crcPoly = 0xEDB88320

// multModP returns a·b modulo the polynomial, both reflected (bit 31 is
// x^0), as zlib's multmodp.
func multModP(a, b uint32) uint32 {
	var p uint32
	for m := uint32(1) << 31; m != 0; m >>= 1 {
		if a&m != 0 {
			p ^= b
		}
		if b&1 != 0 {
			b = b>>1 ^ crcPoly
		} else {
			b >>= 1
		}
	}
	return p
}

// x8nModP returns x^(8n) modulo the polynomial, reflected.
func x8nModP(n int) uint32 {
	p := uint32(1) << 31  // x^0
	sq := uint32(1) << 23 // x^8
	for ; n > 0; n >>= 1 {
		if n&1 != 0 {
			p = multModP(sq, p)
		}
		sq = multModP(sq, sq)
	}
	return p
}
