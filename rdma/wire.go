package rdma

import (
	"encoding/binary"
	"net"
	"net/netip"
	"strconv"
)

// Sizes of the headers of a RoCEv2 frame over IPv4, in bytes.
const (
	// UDPPort is the IANA "roce" port: the destination port of every RoCEv2
	// packet, requests and acknowledgements alike.
	UDPPort = 4791

	EthLen  = 14 // Ethernet II header, no VLAN tag
	IPv4Len = 20 // IPv4 header without options (IHL 5)
	UDPLen  = 8  // UDP header

	// HeadersLen is the length of the Ethernet, IPv4 and UDP headers that
	// precede the BTH.
	HeadersLen = EthLen + IPv4Len + UDPLen

	BTHLen   = 12 // Base Transport Header
	RETHLen  = 16 // RDMA Extended Transport Header
	AETHLen  = 4  // ACK Extended Transport Header
	ImmDtLen = 4  // Immediate Data extended header
	ICRCLen  = 4  // Invariant CRC trailer

	// MaxTransportHeadersLen is the longest run of transport headers this
	// package emits: BTH, RETH and ImmDt (RDMA WRITE Only with Immediate).
	MaxTransportHeadersLen = BTHLen + RETHLen + ImmDtLen

	// MaxOverhead is the most bytes a frame adds around its payload:
	// Ethernet, IPv4, UDP, transport headers, pad and ICRC.
	MaxOverhead = HeadersLen + MaxTransportHeadersLen + 3 + ICRCLen

	// EtherTypeIPv4 is the Ethernet type of RoCEv2 over IPv4.
	EtherTypeIPv4 = 0x0800
	// DefaultPKey is the default partition key (full membership).
	DefaultPKey = 0xFFFF
)

// Opcode is a BTH opcode: bits 7-5 select the transport (see Transport) and
// bits 4-0 the operation.
//
//	  7   6   5   4   3   2   1   0
//	+---+---+---+---+---+---+---+---+
//	| transport |    operation      |
//	+---+---+---+---+---+---+---+---+
//
// The same operation has the same low bits in every transport: the UC twin
// of an RC opcode is 0x20 | op (OpUCSendOnly = 0x20 | OpSendOnly).
type Opcode uint8

// Reliable Connection opcodes (IBA Table 38; Linux include/rdma/ib_pack.h).
const (
	OpSendFirst        Opcode = 0x00
	OpSendMiddle       Opcode = 0x01
	OpSendLast         Opcode = 0x02
	OpSendLastImm      Opcode = 0x03
	OpSendOnly         Opcode = 0x04
	OpSendOnlyImm      Opcode = 0x05
	OpRDMAWriteFirst   Opcode = 0x06
	OpRDMAWriteMiddle  Opcode = 0x07
	OpRDMAWriteLast    Opcode = 0x08
	OpRDMAWriteLastImm Opcode = 0x09
	OpRDMAWriteOnly    Opcode = 0x0A
	OpRDMAWriteOnlyImm Opcode = 0x0B
	OpRDMAReadRequest  Opcode = 0x0C
	OpReadRespFirst    Opcode = 0x0D
	OpReadRespMiddle   Opcode = 0x0E
	OpReadRespLast     Opcode = 0x0F
	OpReadRespOnly     Opcode = 0x10
	OpAck              Opcode = 0x11
	OpAtomicAck        Opcode = 0x12
	OpCompareSwap      Opcode = 0x13
	OpFetchAdd         Opcode = 0x14
	OpCNP              Opcode = 0x81
)

// Unreliable Connection opcodes (IBA Table 38; Linux include/rdma/ib_pack.h):
// the SEND and RDMA WRITE operations of RC, with transport bits 001. UC has
// no RDMA READ, atomics or acknowledgements.
const (
	OpUCSendFirst        Opcode = 0x20
	OpUCSendMiddle       Opcode = 0x21
	OpUCSendLast         Opcode = 0x22
	OpUCSendLastImm      Opcode = 0x23
	OpUCSendOnly         Opcode = 0x24
	OpUCSendOnlyImm      Opcode = 0x25
	OpUCRDMAWriteFirst   Opcode = 0x26
	OpUCRDMAWriteMiddle  Opcode = 0x27
	OpUCRDMAWriteLast    Opcode = 0x28
	OpUCRDMAWriteLastImm Opcode = 0x29
	OpUCRDMAWriteOnly    Opcode = 0x2A
	OpUCRDMAWriteOnlyImm Opcode = 0x2B
)

// Transport is the transport service an opcode belongs to: its bits 7-5.
type Transport uint8

// Transports (IBA 9.2, Table 38; RoCEv2 Annex A17 for CNP).
const (
	TransportRC  Transport = 0 // 000 Reliable Connection
	TransportUC  Transport = 1 // 001 Unreliable Connection
	TransportRD  Transport = 2 // 010 Reliable Datagram
	TransportUD  Transport = 3 // 011 Unreliable Datagram
	TransportCNP Transport = 4 // 100 RoCEv2 Congestion Notification Packet (OpCNP)
	TransportXRC Transport = 5 // 101 Extended Reliable Connection
	// 110 and 111 are manufacturer specific.
)

var transportNames = [...]string{"RC", "UC", "RD", "UD", "CNP", "XRC"}

// String returns the transport's abbreviation ("RC", "UC", ...) or
// "Transport(n)" for the manufacturer-specific values 6 and 7.
func (t Transport) String() string {
	if int(t) < len(transportNames) {
		return transportNames[t]
	}
	return "Transport(" + strconv.Itoa(int(t)) + ")"
}

// Transport returns the transport of o (its bits 7-5).
func (o Opcode) Transport() Transport { return Transport(o >> 5) }

// WithTransport returns the opcode of the same operation (bits 4-0 of o) in
// transport t, e.g. OpSendOnly.WithTransport(TransportUC) == OpUCSendOnly
// and back. It does not check that t has the operation: see Supported.
func (o Opcode) WithTransport(t Transport) Opcode { return o&0x1F | Opcode(t&7)<<5 }

var opNames = [...]string{
	OpSendFirst:        "SEND First",
	OpSendMiddle:       "SEND Middle",
	OpSendLast:         "SEND Last",
	OpSendLastImm:      "SEND Last with Immediate",
	OpSendOnly:         "SEND Only",
	OpSendOnlyImm:      "SEND Only with Immediate",
	OpRDMAWriteFirst:   "RDMA WRITE First",
	OpRDMAWriteMiddle:  "RDMA WRITE Middle",
	OpRDMAWriteLast:    "RDMA WRITE Last",
	OpRDMAWriteLastImm: "RDMA WRITE Last with Immediate",
	OpRDMAWriteOnly:    "RDMA WRITE Only",
	OpRDMAWriteOnlyImm: "RDMA WRITE Only with Immediate",
	OpRDMAReadRequest:  "RDMA READ Request",
	OpReadRespFirst:    "RDMA READ Response First",
	OpReadRespMiddle:   "RDMA READ Response Middle",
	OpReadRespLast:     "RDMA READ Response Last",
	OpReadRespOnly:     "RDMA READ Response Only",
	OpAck:              "Acknowledge",
	OpAtomicAck:        "Atomic Acknowledge",
	OpCompareSwap:      "CmpSwap",
	OpFetchAdd:         "FetchAdd",

	OpUCSendFirst:        "UC SEND First",
	OpUCSendMiddle:       "UC SEND Middle",
	OpUCSendLast:         "UC SEND Last",
	OpUCSendLastImm:      "UC SEND Last with Immediate",
	OpUCSendOnly:         "UC SEND Only",
	OpUCSendOnlyImm:      "UC SEND Only with Immediate",
	OpUCRDMAWriteFirst:   "UC RDMA WRITE First",
	OpUCRDMAWriteMiddle:  "UC RDMA WRITE Middle",
	OpUCRDMAWriteLast:    "UC RDMA WRITE Last",
	OpUCRDMAWriteLastImm: "UC RDMA WRITE Last with Immediate",
	OpUCRDMAWriteOnly:    "UC RDMA WRITE Only",
	OpUCRDMAWriteOnlyImm: "UC RDMA WRITE Only with Immediate",
}

// String returns the name of an opcode as Wireshark's opcode table spells
// its operation: an RC opcode without its transport ("SEND Only"), a UC
// opcode with it ("UC SEND Only"), "CNP", or else the hex value
// ("Opcode(0x64)").
func (o Opcode) String() string {
	if int(o) < len(opNames) && opNames[o] != "" {
		return opNames[o]
	}
	if o == OpCNP {
		return "CNP"
	}
	return "Opcode(0x" + strconv.FormatUint(uint64(o), 16) + ")"
}

// Opcode flags describing where a packet sits in a message and which
// extension headers follow its BTH.
const (
	flagFirst = 1 << iota
	flagMiddle
	flagLast
	flagRETH
	flagImm
	flagAETH
	flagSend
	flagWrite
	flagKnown
)

// opFlags holds the flags of the RC opcodes (0x00-0x1F) and of their UC
// twins (0x20-0x3F): SEND and RDMA WRITE only.
var opFlags = func() (t [64]uint16) {
	t = [64]uint16{
		OpSendFirst:        flagKnown | flagSend | flagFirst,
		OpSendMiddle:       flagKnown | flagSend | flagMiddle,
		OpSendLast:         flagKnown | flagSend | flagLast,
		OpSendLastImm:      flagKnown | flagSend | flagLast | flagImm,
		OpSendOnly:         flagKnown | flagSend | flagFirst | flagLast,
		OpSendOnlyImm:      flagKnown | flagSend | flagFirst | flagLast | flagImm,
		OpRDMAWriteFirst:   flagKnown | flagWrite | flagFirst | flagRETH,
		OpRDMAWriteMiddle:  flagKnown | flagWrite | flagMiddle,
		OpRDMAWriteLast:    flagKnown | flagWrite | flagLast,
		OpRDMAWriteLastImm: flagKnown | flagWrite | flagLast | flagImm,
		OpRDMAWriteOnly:    flagKnown | flagWrite | flagFirst | flagLast | flagRETH,
		OpRDMAWriteOnlyImm: flagKnown | flagWrite | flagFirst | flagLast | flagRETH | flagImm,
		OpRDMAReadRequest:  flagKnown | flagFirst | flagLast | flagRETH,
		OpReadRespFirst:    flagKnown | flagFirst | flagAETH,
		OpReadRespMiddle:   flagKnown | flagMiddle,
		OpReadRespLast:     flagKnown | flagLast | flagAETH,
		OpReadRespOnly:     flagKnown | flagFirst | flagLast | flagAETH,
		OpAck:              flagKnown | flagFirst | flagLast | flagAETH,
	}
	for op := OpSendFirst; op <= OpRDMAWriteOnlyImm; op++ {
		t[op.WithTransport(TransportUC)] = t[op]
	}
	return t
}()

func (o Opcode) flags() uint16 {
	if o >= Opcode(len(opFlags)) {
		return 0
	}
	return opFlags[o]
}

// Supported reports whether o is an opcode whose header layout this package
// knows: RC SEND, RDMA WRITE, RDMA READ request/response and ACK, and UC
// SEND and RDMA WRITE. The queue pair (QP) only speaks RC.
func (o Opcode) Supported() bool { return o.flags()&flagKnown != 0 }

// HasRETH reports whether a RETH follows the BTH.
func (o Opcode) HasRETH() bool { return o.flags()&flagRETH != 0 }

// HasAETH reports whether an AETH follows the BTH.
func (o Opcode) HasAETH() bool { return o.flags()&flagAETH != 0 }

// HasImm reports whether an ImmDt header follows the BTH (after the RETH,
// if any).
func (o Opcode) HasImm() bool { return o.flags()&flagImm != 0 }

// IsFirst reports whether o starts a message (First or Only).
func (o Opcode) IsFirst() bool { return o.flags()&flagFirst != 0 }

// IsLast reports whether o ends a message (Last or Only).
func (o Opcode) IsLast() bool { return o.flags()&flagLast != 0 }

// IsOnly reports whether o is a whole message in one packet (Only): SEND
// Only, RDMA WRITE Only (with or without immediate, RC or UC), RDMA READ
// Request, RDMA READ Response Only or Acknowledge.
func (o Opcode) IsOnly() bool { return o.flags()&(flagFirst|flagLast) == flagFirst|flagLast }

// IsSendOrWriteOnly reports whether o is SEND Only or RDMA WRITE Only, with
// or without immediate, RC or UC: a whole message and its payload in one
// packet. It is o.IsOnly() && (o.IsSend() || o.IsWrite()) in one look-up.
func (o Opcode) IsSendOrWriteOnly() bool {
	f := o.flags()
	return f&(flagFirst|flagLast) == flagFirst|flagLast && f&(flagSend|flagWrite) != 0
}

// IsMiddle reports whether o is a Middle packet.
func (o Opcode) IsMiddle() bool { return o.flags()&flagMiddle != 0 }

// IsSend reports whether o is a SEND opcode.
func (o Opcode) IsSend() bool { return o.flags()&flagSend != 0 }

// IsWrite reports whether o is an RDMA WRITE opcode.
func (o Opcode) IsWrite() bool { return o.flags()&flagWrite != 0 }

// HeaderLen returns the length of the transport headers of opcode o: the BTH
// plus the extension headers the opcode implies (RETH, AETH, ImmDt); the
// payload of a frame starts HeadersLen + HeaderLen() bytes in. It is BTHLen
// for an opcode that is not Supported.
func (o Opcode) HeaderLen() int { return headerLen(o.flags()) }

// headerLen is HeaderLen of the opcode with flags f.
func headerLen(f uint16) int {
	n := BTHLen
	if f&flagRETH != 0 {
		n += RETHLen
	}
	if f&flagAETH != 0 {
		n += AETHLen
	}
	if f&flagImm != 0 {
		n += ImmDtLen
	}
	return n
}

// BTH is a view of a Base Transport Header. It must be at least BTHLen bytes.
//
//	 0                   1                   2                   3
//	 0 1 2 3 4 5 6 7 8 9 0 1 2 3 4 5 6 7 8 9 0 1 2 3 4 5 6 7 8 9 0 1
//	+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//	|    OpCode     |S|M|Pad| TVer  |            P_Key              |
//	+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//	|F|B|  Resv6a   |                 Destination QP                |
//	+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//	|A|   Resv7     |          Packet Sequence Number               |
//	+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//
// S is the solicited event bit, M MigReq, Pad the pad count, F/B the
// FECN/BECN congestion bits and A AckReq. Byte 4 (F, B, Resv6a) is masked out
// of the ICRC; receivers ignore it and Resv7.
type BTH []byte

// Opcode returns the opcode.
func (b BTH) Opcode() Opcode { return Opcode(b[0]) }

// SetOpcode sets the opcode.
func (b BTH) SetOpcode(o Opcode) { b[0] = byte(o) }

// SolicitedEvent returns the SE bit.
func (b BTH) SolicitedEvent() bool { return b[1]&0x80 != 0 }

// SetSolicitedEvent sets the SE bit.
func (b BTH) SetSolicitedEvent(v bool) { b[1] = setBit(b[1], 0x80, v) }

// MigReq returns the MigReq bit.
func (b BTH) MigReq() bool { return b[1]&0x40 != 0 }

// SetMigReq sets the MigReq bit.
func (b BTH) SetMigReq(v bool) { b[1] = setBit(b[1], 0x40, v) }

// PadCount returns the number of pad bytes (0-3) before the ICRC.
func (b BTH) PadCount() int { return int(b[1]>>4) & 3 }

// SetPadCount sets the pad count; n is taken modulo 4.
func (b BTH) SetPadCount(n int) { b[1] = b[1]&^0x30 | byte(n&3)<<4 }

// TVer returns the transport header version (0).
func (b BTH) TVer() uint8 { return b[1] & 0x0F }

// PKey returns the partition key.
func (b BTH) PKey() uint16 { return binary.BigEndian.Uint16(b[2:]) }

// SetPKey sets the partition key.
func (b BTH) SetPKey(k uint16) { binary.BigEndian.PutUint16(b[2:], k) }

// FECN returns the forward ECN bit.
func (b BTH) FECN() bool { return b[4]&0x80 != 0 }

// BECN returns the backward ECN bit.
func (b BTH) BECN() bool { return b[4]&0x40 != 0 }

// SetBECN sets the backward ECN bit (ICRC-neutral).
func (b BTH) SetBECN(v bool) { b[4] = setBit(b[4], 0x40, v) }

// DestQP returns the 24-bit destination queue pair number.
func (b BTH) DestQP() uint32 { return uint32(b[5])<<16 | uint32(b[6])<<8 | uint32(b[7]) }

// SetDestQP sets the destination QP number (low 24 bits of qp).
func (b BTH) SetDestQP(qp uint32) { b[5], b[6], b[7] = byte(qp>>16), byte(qp>>8), byte(qp) }

// AckReq returns the AckReq bit.
func (b BTH) AckReq() bool { return b[8]&0x80 != 0 }

// SetAckReq sets the AckReq bit and clears Resv7.
func (b BTH) SetAckReq(v bool) {
	if v {
		b[8] = 0x80
	} else {
		b[8] = 0
	}
}

// PSN returns the 24-bit packet sequence number.
func (b BTH) PSN() uint32 { return uint32(b[9])<<16 | uint32(b[10])<<8 | uint32(b[11]) }

// SetPSN sets the PSN (low 24 bits of psn).
func (b BTH) SetPSN(psn uint32) { b[9], b[10], b[11] = byte(psn>>16), byte(psn>>8), byte(psn) }

// RETH is a view of an RDMA Extended Transport Header (RETHLen bytes).
//
//	 0                   1                   2                   3
//	 0 1 2 3 4 5 6 7 8 9 0 1 2 3 4 5 6 7 8 9 0 1 2 3 4 5 6 7 8 9 0 1
//	+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//	|                  Virtual Address (bits 63-32)                 |
//	+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//	|                  Virtual Address (bits 31-0)                  |
//	+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//	|                          Remote Key                           |
//	+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//	|                          DMA Length                           |
//	+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//
// DMA Length is the length of the whole message, not of this packet.
type RETH []byte

// VA returns the virtual address.
func (r RETH) VA() uint64 { return binary.BigEndian.Uint64(r[0:]) }

// SetVA sets the virtual address.
func (r RETH) SetVA(va uint64) { binary.BigEndian.PutUint64(r[0:], va) }

// RKey returns the remote key.
func (r RETH) RKey() uint32 { return binary.BigEndian.Uint32(r[8:]) }

// SetRKey sets the remote key.
func (r RETH) SetRKey(k uint32) { binary.BigEndian.PutUint32(r[8:], k) }

// DMALength returns the DMA length.
func (r RETH) DMALength() uint32 { return binary.BigEndian.Uint32(r[12:]) }

// SetDMALength sets the DMA length.
func (r RETH) SetDMALength(n uint32) { binary.BigEndian.PutUint32(r[12:], n) }

// Syndrome is the AETH syndrome byte.
//
//	bit 7     reserved (0)
//	bits 6-5  00 ACK, 01 RNR NAK, 11 NAK
//	bits 4-0  credit count (ACK), RNR timer code (RNR NAK) or NAK code
type Syndrome uint8

// AETH syndromes.
const (
	SyndromeACK         Syndrome = 0x1F // ACK with "unlimited/invalid" credits, as rxe sends
	SyndromeRNRNAK      Syndrome = 0x20 // RNR NAK; low 5 bits carry the timer code
	SyndromeNAKPSNSeq   Syndrome = 0x60 // NAK: PSN sequence error
	SyndromeNAKInvalid  Syndrome = 0x61 // NAK: invalid request
	SyndromeNAKAccess   Syndrome = 0x62 // NAK: remote access error
	SyndromeNAKOpError  Syndrome = 0x63 // NAK: remote operational error
	SyndromeNAKInvalRD  Syndrome = 0x64 // NAK: invalid RD request
	syndromeTypeMask    Syndrome = 0x60
	syndromeValueMask   Syndrome = 0x1F
	syndromeTypeACK     Syndrome = 0x00
	syndromeTypeRNR     Syndrome = 0x20
	syndromeTypeNAK     Syndrome = 0x60
	syndromeTypeReserve Syndrome = 0x40
)

// IsACK reports whether s is a positive acknowledgement.
func (s Syndrome) IsACK() bool { return s&syndromeTypeMask == syndromeTypeACK }

// IsRNR reports whether s is a receiver-not-ready NAK.
func (s Syndrome) IsRNR() bool { return s&syndromeTypeMask == syndromeTypeRNR }

// IsNAK reports whether s is a NAK (not RNR).
func (s Syndrome) IsNAK() bool { return s&syndromeTypeMask == syndromeTypeNAK }

// Value returns the low 5 bits: credits, RNR timer code or NAK code.
func (s Syndrome) Value() uint8 { return uint8(s & syndromeValueMask) }

// String describes the syndrome.
func (s Syndrome) String() string {
	switch {
	case s.IsACK():
		return "ACK(credits=" + strconv.Itoa(int(s.Value())) + ")"
	case s.IsRNR():
		return "RNR-NAK(timer=" + strconv.Itoa(int(s.Value())) + ")"
	case s == SyndromeNAKPSNSeq:
		return "NAK(PSN sequence error)"
	case s == SyndromeNAKInvalid:
		return "NAK(invalid request)"
	case s == SyndromeNAKAccess:
		return "NAK(remote access error)"
	case s == SyndromeNAKOpError:
		return "NAK(remote operational error)"
	case s == SyndromeNAKInvalRD:
		return "NAK(invalid RD request)"
	}
	return "Syndrome(0x" + strconv.FormatUint(uint64(s), 16) + ")"
}

// AETH is a view of an ACK Extended Transport Header (AETHLen bytes).
//
//	 0                   1                   2                   3
//	 0 1 2 3 4 5 6 7 8 9 0 1 2 3 4 5 6 7 8 9 0 1 2 3 4 5 6 7 8 9 0 1
//	+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//	|   Syndrome    |             Message Sequence Number           |
//	+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
type AETH []byte

// Syndrome returns the syndrome.
func (a AETH) Syndrome() Syndrome { return Syndrome(a[0]) }

// SetSyndrome sets the syndrome.
func (a AETH) SetSyndrome(s Syndrome) { a[0] = byte(s) }

// MSN returns the 24-bit message sequence number.
func (a AETH) MSN() uint32 { return uint32(a[1])<<16 | uint32(a[2])<<8 | uint32(a[3]) }

// SetMSN sets the MSN (low 24 bits of n).
func (a AETH) SetMSN(n uint32) { a[1], a[2], a[3] = byte(n>>16), byte(n>>8), byte(n) }

// ImmDt is a view of an Immediate Data header (ImmDtLen bytes): four opaque
// bytes, read and written big-endian here.
type ImmDt []byte

// Imm returns the immediate value.
func (i ImmDt) Imm() uint32 { return binary.BigEndian.Uint32(i) }

// SetImm sets the immediate value.
func (i ImmDt) SetImm(v uint32) { binary.BigEndian.PutUint32(i, v) }

// Endpoint is the link- and network-layer address of one RoCEv2 port.
type Endpoint struct {
	MAC [6]byte
	IP  netip.Addr // IPv4
}

// HardwareAddr returns the MAC address as a net.HardwareAddr (allocates).
func (e Endpoint) HardwareAddr() net.HardwareAddr { return append(net.HardwareAddr(nil), e.MAC[:]...) }

// String formats the endpoint as "mac/ip".
func (e Endpoint) String() string { return net.HardwareAddr(e.MAC[:]).String() + "/" + e.IP.String() }

// SourcePort returns the UDP source port rxe uses for a QP: 0xC000 plus a
// 14-bit hash of the QP number, constant per QP so a flow is never reordered
// by ECMP.
func SourcePort(qpn uint32) uint16 {
	// hash_32_generic(qpn, 14): multiply by the golden ratio, keep top bits.
	h := (qpn * 0x61C88647) >> (32 - 14)
	return 0xC000 | uint16(h&0x3FFF)
}

// PadFor returns the number of pad bytes after a payload of n bytes.
func PadFor(n int) int { return -n & 3 }

func setBit(b, mask byte, v bool) byte {
	if v {
		return b | mask
	}
	return b &^ mask
}
