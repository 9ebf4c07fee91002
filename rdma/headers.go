package rdma

import (
	"encoding/binary"
	"net/netip"
)

// IPProtoUDP is the IPv4 protocol number of UDP.
const IPProtoUDP = 17

// Ethernet is a view of an Ethernet II header without VLAN tag. It must be
// at least EthLen bytes.
//
//	 0                   1                   2                   3
//	 0 1 2 3 4 5 6 7 8 9 0 1 2 3 4 5 6 7 8 9 0 1 2 3 4 5 6 7 8 9 0 1
//	+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//	|                 Destination MAC (bytes 0-3)                   |
//	+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//	| Destination MAC (bytes 4-5)   |    Source MAC (bytes 0-1)     |
//	+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//	|                    Source MAC (bytes 2-5)                     |
//	+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//	|           EtherType           |
//	+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//
// The ICRC does not cover it.
type Ethernet []byte

// Dst returns the destination MAC address.
func (e Ethernet) Dst() [6]byte { return [6]byte(e[0:6]) }

// SetDst sets the destination MAC address.
func (e Ethernet) SetDst(mac [6]byte) { copy(e[0:6], mac[:]) }

// Src returns the source MAC address.
func (e Ethernet) Src() [6]byte { return [6]byte(e[6:12]) }

// SetSrc sets the source MAC address.
func (e Ethernet) SetSrc(mac [6]byte) { copy(e[6:12], mac[:]) }

// EtherType returns the EtherType (EtherTypeIPv4 for RoCEv2 over IPv4).
func (e Ethernet) EtherType() uint16 { return binary.BigEndian.Uint16(e[12:]) }

// SetEtherType sets the EtherType.
func (e Ethernet) SetEtherType(t uint16) { binary.BigEndian.PutUint16(e[12:], t) }

// IPv4 is a view of an IPv4 header without options (IHL 5). It must be at
// least IPv4Len bytes.
//
//	 0                   1                   2                   3
//	 0 1 2 3 4 5 6 7 8 9 0 1 2 3 4 5 6 7 8 9 0 1 2 3 4 5 6 7 8 9 0 1
//	+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//	|Version|  IHL  |   DSCP    |ECN|          Total Length         |
//	+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//	|        Identification         |R|D|M|     Fragment Offset     |
//	+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//	| Time to Live  |   Protocol    |        Header Checksum        |
//	+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//	|                        Source Address                         |
//	+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//	|                      Destination Address                      |
//	+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//
// D is Don't Fragment and M More Fragments. The ICRC covers the header
// with TOS (DSCP, ECN), TTL and the checksum masked, so a switch may change
// those without recomputing it; any other change needs SetICRC, and every
// change needs UpdateChecksum.
type IPv4 []byte

// Version returns the IP version (4).
func (ip IPv4) Version() uint8 { return ip[0] >> 4 }

// IHL returns the header length in 32-bit words (5: no options).
func (ip IPv4) IHL() uint8 { return ip[0] & 0x0F }

// TOS returns the type-of-service byte: DSCP<<2 | ECN.
func (ip IPv4) TOS() uint8 { return ip[1] }

// SetTOS sets the type-of-service byte.
func (ip IPv4) SetTOS(v uint8) { ip[1] = v }

// TotalLength returns the total length: header and UDP datagram.
func (ip IPv4) TotalLength() uint16 { return binary.BigEndian.Uint16(ip[2:]) }

// SetTotalLength sets the total length.
func (ip IPv4) SetTotalLength(n uint16) { binary.BigEndian.PutUint16(ip[2:], n) }

// ID returns the identification.
func (ip IPv4) ID() uint16 { return binary.BigEndian.Uint16(ip[4:]) }

// SetID sets the identification.
func (ip IPv4) SetID(id uint16) { binary.BigEndian.PutUint16(ip[4:], id) }

// DF returns the Don't Fragment bit.
func (ip IPv4) DF() bool { return ip[6]&0x40 != 0 }

// Fragmented reports whether the packet is a fragment: More Fragments set
// or a fragment offset other than 0 (Frame.Parse rejects those).
func (ip IPv4) Fragmented() bool { return binary.BigEndian.Uint16(ip[6:])&0x3FFF != 0 }

// TTL returns the time to live.
func (ip IPv4) TTL() uint8 { return ip[8] }

// SetTTL sets the time to live.
func (ip IPv4) SetTTL(v uint8) { ip[8] = v }

// Protocol returns the protocol number (IPProtoUDP for RoCEv2).
func (ip IPv4) Protocol() uint8 { return ip[9] }

// SetProtocol sets the protocol number.
func (ip IPv4) SetProtocol(p uint8) { ip[9] = p }

// Checksum returns the header checksum as stored.
func (ip IPv4) Checksum() uint16 { return binary.BigEndian.Uint16(ip[10:]) }

// ChecksumOK reports whether the header checksum is valid.
func (ip IPv4) ChecksumOK() bool { return IPv4ChecksumOK(ip) }

// UpdateChecksum recomputes the header checksum over the IPv4Len bytes of
// the header, e.g. after rewriting addresses, lengths or the TTL.
func (ip IPv4) UpdateChecksum() {
	h := ip[:IPv4Len]
	h[10], h[11] = 0, 0
	binary.BigEndian.PutUint16(h[10:], ipv4Checksum(h))
}

// Src returns the source address.
func (ip IPv4) Src() netip.Addr { return netip.AddrFrom4([4]byte(ip[12:16])) }

// SetSrc sets the source address; a must be IPv4 (As4 panics otherwise).
func (ip IPv4) SetSrc(a netip.Addr) { s := a.As4(); copy(ip[12:16], s[:]) }

// Dst returns the destination address.
func (ip IPv4) Dst() netip.Addr { return netip.AddrFrom4([4]byte(ip[16:20])) }

// SetDst sets the destination address; a must be IPv4 (As4 panics
// otherwise).
func (ip IPv4) SetDst(a netip.Addr) { d := a.As4(); copy(ip[16:20], d[:]) }

// UDP is a view of a UDP header. It must be at least UDPLen bytes.
//
//	 0                   1                   2                   3
//	 0 1 2 3 4 5 6 7 8 9 0 1 2 3 4 5 6 7 8 9 0 1 2 3 4 5 6 7 8 9 0 1
//	+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//	|          Source Port          |       Destination Port        |
//	+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//	|            Length             |           Checksum            |
//	+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//
// RoCEv2 sends to UDPPort with checksum 0 (the ICRC masks it). Length
// covers the UDP header through the ICRC; it, not the Ethernet frame,
// bounds the RoCE packet.
type UDP []byte

// SrcPort returns the source port (see SourcePort).
func (u UDP) SrcPort() uint16 { return binary.BigEndian.Uint16(u[0:]) }

// SetSrcPort sets the source port.
func (u UDP) SetSrcPort(p uint16) { binary.BigEndian.PutUint16(u[0:], p) }

// DstPort returns the destination port (UDPPort for RoCEv2).
func (u UDP) DstPort() uint16 { return binary.BigEndian.Uint16(u[2:]) }

// SetDstPort sets the destination port.
func (u UDP) SetDstPort(p uint16) { binary.BigEndian.PutUint16(u[2:], p) }

// Length returns the UDP length: header, BTH through ICRC.
func (u UDP) Length() uint16 { return binary.BigEndian.Uint16(u[4:]) }

// SetLength sets the UDP length.
func (u UDP) SetLength(n uint16) { binary.BigEndian.PutUint16(u[4:], n) }

// Checksum returns the UDP checksum as stored.
func (u UDP) Checksum() uint16 { return binary.BigEndian.Uint16(u[6:]) }

// SetChecksum sets the UDP checksum.
func (u UDP) SetChecksum(c uint16) { binary.BigEndian.PutUint16(u[6:], c) }

// RoCE is a view of a whole Ethernet frame carrying RoCEv2 over IPv4, laid
// out as drawn at Frame: the Ethernet header at 0, IPv4 at EthLen, UDP at
// EthLen+IPv4Len and the BTH at HeadersLen. Unlike Frame it decodes
// nothing up front: it is for code that reads or rewrites a few fields in
// place (a switch pipeline). The header accessors slice r at those fixed
// offsets and panic if r is too short; Span checks it first.
type RoCE []byte

// Ethernet returns the Ethernet header.
func (r RoCE) Ethernet() Ethernet { return Ethernet(r[:EthLen]) }

// IPv4 returns the IPv4 header.
func (r RoCE) IPv4() IPv4 { return IPv4(r[EthLen : EthLen+IPv4Len]) }

// UDP returns the UDP header.
func (r RoCE) UDP() UDP { return UDP(r[EthLen+IPv4Len : HeadersLen]) }

// BTH returns the BTH.
func (r RoCE) BTH() BTH { return BTH(r[HeadersLen : HeadersLen+BTHLen]) }

// Span reports whether r looks like a RoCEv2 frame to a switch parser and
// returns the end of its UDP datagram, where the ICRC ends (r[end:] is
// Ethernet padding). It checks: EtherType IPv4; IPv4 version 4 without
// options (IHL 5); protocol UDP; UDP destination port UDPPort; a UDP length
// that covers at least a BTH and an ICRC and ends within r. It does not
// check the IPv4 total length, fragmentation, checksums, the BTH or the
// ICRC (see Frame.Parse and CheckICRC). It allocates nothing.
func (r RoCE) Span() (end int, ok bool) {
	if len(r) < HeadersLen {
		return 0, false
	}
	ip, udp := r.IPv4(), r.UDP()
	if r.Ethernet().EtherType() != EtherTypeIPv4 || ip.Version() != 4 || ip.IHL() != 5 ||
		ip.Protocol() != IPProtoUDP || udp.DstPort() != UDPPort {
		return 0, false
	}
	ulen := int(udp.Length())
	end = EthLen + IPv4Len + ulen
	if ulen < UDPLen+BTHLen+ICRCLen || end > len(r) {
		return 0, false
	}
	return end, true
}

// Payload returns the span r[off:end] of the payload of a frame that Span
// accepts: from after the transport headers of the BTH opcode (RETH, AETH,
// ImmDt as Opcode.HeaderLen says) to the pad, which with the ICRC ends the
// UDP datagram. ok is false if Span is, if the opcode is not Supported or
// if the transport headers and pad do not fit. Like Span it checks no
// TVer, checksum or ICRC; Frame.Parse and PayloadOffset check more.
func (r RoCE) Payload() (off, end int, ok bool) {
	udpEnd, ok := r.Span()
	if !ok {
		return 0, 0, false
	}
	bth := r.BTH()
	f := bth.Opcode().flags()
	if f&flagKnown == 0 { // not Supported
		return 0, 0, false
	}
	off = HeadersLen + headerLen(f)
	end = udpEnd - ICRCLen - bth.PadCount()
	if end < off {
		return 0, 0, false
	}
	return off, end, true
}

// CheckSealedSpan is CheckSealed for a frame that Span accepted, its UDP
// datagram ending at end: it checks what Span leaves out of CheckSealed's
// structure checks (the IPv4 total length) and, unless sealed, the ICRC.
// A switch that has parsed a frame with Span or Payload does not look at
// its headers twice.
func (r RoCE) CheckSealedSpan(end int, sealed bool) bool {
	if int(r.IPv4().TotalLength()) != end-EthLen {
		return false
	}
	return sealed || binary.LittleEndian.Uint32(r[end-ICRCLen:end]) == icrc(r[:end])
}

// UCPayload returns the payload of frame, without pad and ICRC, and its BTH
// destination QP, if frame is a UC SEND Only (OpUCSendOnly) with a good
// ICRC; otherwise nil, 0, false. The payload aliases frame and ends where
// the UDP length says, before any Ethernet padding; it is empty, not nil,
// when the frame carries no payload. Frame structure is checked as
// CheckICRC does (Ethernet/IPv4 without options/UDP, the IPv4 and UDP
// lengths); UDP ports, TVer and the other BTH fields are not. It allocates
// nothing.
func UCPayload(frame []byte) (payload []byte, destQP uint32, ok bool) {
	return UCPayloadSealed(frame, false)
}

// UCPayloadSealed is UCPayload for a frame whose ICRC the caller may
// already know to be right (sealed, as CheckSealed): the ICRC of a sealed
// frame is not recomputed; everything else is checked.
func UCPayloadSealed(frame []byte, sealed bool) (payload []byte, destQP uint32, ok bool) {
	if len(frame) < HeadersLen+BTHLen+ICRCLen || Opcode(frame[HeadersLen]) != OpUCSendOnly {
		return nil, 0, false
	}
	end, err := roceSpan(frame)
	if err != nil || !sealed && binary.LittleEndian.Uint32(frame[end-ICRCLen:]) != icrc(frame[:end]) {
		return nil, 0, false
	}
	bth := BTH(frame[HeadersLen : HeadersLen+BTHLen])
	pend := end - ICRCLen - bth.PadCount()
	if pend < HeadersLen+BTHLen {
		return nil, 0, false
	}
	return frame[HeadersLen+BTHLen : pend], bth.DestQP(), true
}
