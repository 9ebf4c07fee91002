package rdma

import (
	"encoding/binary"
	"hash/crc32"
)

// The ICRC (IBA 7.8.1, Annex A17.4.1) is a CRC-32 (the Ethernet/zlib
// polynomial, as hash/crc32.IEEE) over
//
//	8 x 0xFF | IPv4 header' | UDP header' | BTH' | extension headers | payload | pad
//
// where the primed headers have their variant fields replaced by all ones:
// IPv4 TOS (DSCP+ECN), TTL and header checksum; the UDP checksum; BTH byte 4
// (FECN, BECN, Resv6a). The eight 0xFF bytes stand for the masked LRH of
// native InfiniBand. The Ethernet header and the Ethernet padding are not
// covered. The result is stored least-significant byte first, like the
// Ethernet FCS.
//
// Because the masked fields are exactly the ones a switch may rewrite (ECN
// marking, TTL decrement, congestion bits), none of them requires recomputing
// the ICRC.

// icrcPrefix is the CRC state after the 8 bytes of 0xFF.
var icrcPrefix = crc32.ChecksumIEEE([]byte{0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF})

// roceSpan checks that frame is Ethernet/IPv4/UDP and returns the offset of
// the IPv4 header (always EthLen) and the end of the RoCE packet as given by
// the UDP length, which excludes any Ethernet padding.
func roceSpan(frame []byte) (end int, err error) {
	if len(frame) < EthLen {
		return 0, ErrShortEthernet
	}
	if binary.BigEndian.Uint16(frame[12:]) != EtherTypeIPv4 {
		return 0, ErrNotIPv4
	}
	ip := frame[EthLen:]
	if len(ip) < IPv4Len {
		return 0, ErrShortIPv4
	}
	if ip[0] != 0x45 {
		return 0, ErrIPv4Header
	}
	if ip[9] != 17 {
		return 0, ErrNotUDP
	}
	udp := ip[IPv4Len:]
	if len(udp) < UDPLen {
		return 0, ErrShortUDP
	}
	ulen := int(binary.BigEndian.Uint16(udp[4:]))
	if ulen < UDPLen+BTHLen+ICRCLen {
		return 0, ErrUDPLength
	}
	if ulen > len(udp) {
		return 0, ErrTruncated
	}
	if int(binary.BigEndian.Uint16(ip[2:])) != IPv4Len+ulen {
		return 0, ErrIPv4Length
	}
	return HeadersLen - UDPLen + ulen, nil
}

// ComputeICRC returns the ICRC of a RoCEv2-over-IPv4 Ethernet frame. frame
// is the whole frame including the 4-byte ICRC slot at the end of the UDP
// datagram (its content is ignored); bytes after the UDP datagram
// (Ethernet padding) are ignored. It allocates nothing.
func ComputeICRC(frame []byte) (uint32, error) {
	end, err := roceSpan(frame)
	if err != nil {
		return 0, err
	}
	return icrc(frame[:end]), nil
}

// slicing8 holds the tables of a slicing-by-8 CRC-32 (IEEE), used for the
// 40 masked header bytes and the payload's last 0 to 15 (all of a payload
// under 64 bytes). hash/crc32 would make a stack copy of the header escape
// (it dispatches through a function variable) and takes such a tail a byte
// at a time; the rest of the payload, already on the heap, goes through
// crc32.Update and its carry-less-multiply fast path.
var slicing8 = func() (t [8][256]uint32) {
	t[0] = *crc32.IEEETable
	for i := 0; i < 256; i++ {
		c := t[0][i]
		for j := 1; j < 8; j++ {
			c = t[0][c&0xFF] ^ c>>8
			t[j][i] = c
		}
	}
	return t
}()

// icrc computes the ICRC of frame[:len-4], which is known to be well formed.
func icrc(frame []byte) uint32 {
	var h [IPv4Len + UDPLen + BTHLen]byte
	copy(h[:], frame[EthLen:HeadersLen+BTHLen])
	h[1] = 0xFF                // IPv4 TOS (DSCP, ECN)
	h[8] = 0xFF                // IPv4 TTL
	h[10], h[11] = 0xFF, 0xFF  // IPv4 header checksum
	h[IPv4Len+6] = 0xFF        // UDP checksum
	h[IPv4Len+7] = 0xFF        //
	h[IPv4Len+UDPLen+4] = 0xFF // BTH F|B|Resv6a

	c, _ := update8(^icrcPrefix, h[:]) // 40 bytes: none left
	p := frame[HeadersLen+BTHLen : len(frame)-ICRCLen]
	n := len(p) &^ 15
	if n < 64 { // crc32's carry-less-multiply path starts at 64 bytes
		n = 0
	}
	c = ^crc32.Update(^c, crc32.IEEETable, p[:n])
	// The tail, under 16 bytes (all of a short payload), here: crc32 would
	// take it a byte at a time.
	c, p = update8(c, p[n:])
	t := &slicing8
	if len(p) >= 4 {
		c ^= binary.LittleEndian.Uint32(p)
		c = t[0][c>>24] ^ t[1][c>>16&0xFF] ^ t[2][c>>8&0xFF] ^ t[3][c&0xFF]
		p = p[4:]
	}
	for _, b := range p {
		c = t[0][byte(c)^b] ^ c>>8
	}
	return ^c
}

// update8 runs the CRC-32 (IEEE) register c (crc32.Update's state between
// its two inversions) over p, 8 bytes at a time with slicing8, and returns
// it with the bytes left over (fewer than 8).
func update8(c uint32, p []byte) (uint32, []byte) {
	t := &slicing8
	for ; len(p) >= 8; p = p[8:] {
		c ^= binary.LittleEndian.Uint32(p)
		c = t[0][p[7]] ^ t[1][p[6]] ^ t[2][p[5]] ^ t[3][p[4]] ^
			t[4][c>>24] ^ t[5][c>>16&0xFF] ^ t[6][c>>8&0xFF] ^ t[7][c&0xFF]
	}
	return c, p
}

// SetICRC computes the ICRC of frame (see ComputeICRC) and writes it, least
// significant byte first, into the last 4 bytes of the UDP datagram.
func SetICRC(frame []byte) error {
	end, err := roceSpan(frame)
	if err != nil {
		return err
	}
	binary.LittleEndian.PutUint32(frame[end-ICRCLen:], icrc(frame[:end]))
	return nil
}

// SealICRC writes the ICRC of frame, as SetICRC, where frame is a
// RoCEv2 frame; any other frame it leaves as it is. It is the function a
// sender gives emu.Packet.Defer.
func SealICRC(frame []byte) { _ = SetICRC(frame) }

// CheckICRC reports whether frame is a well-formed RoCEv2-over-IPv4 frame
// whose ICRC is correct.
func CheckICRC(frame []byte) bool { return CheckSealed(frame, false) }

// CheckSealed is CheckICRC for a frame whose ICRC the caller may already
// know to be right (sealed: emu.Packet.Sealed, set by the node that
// computed it over the frame's current bytes): the frame's structure is
// checked, its ICRC only if it is not sealed.
func CheckSealed(frame []byte, sealed bool) bool {
	end, err := roceSpan(frame)
	if err != nil {
		return false
	}
	return sealed || binary.LittleEndian.Uint32(frame[end-ICRCLen:]) == icrc(frame[:end])
}
