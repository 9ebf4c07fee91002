package rdma

import (
	"encoding/binary"
	"errors"
)

// Errors returned by the decoders and the encoder. They are preallocated so
// the hot path allocates nothing; each names what is malformed.
var (
	ErrShortEthernet     = errors.New("rdma: frame shorter than an Ethernet header")
	ErrNotIPv4           = errors.New("rdma: EtherType is not IPv4")
	ErrShortIPv4         = errors.New("rdma: truncated IPv4 header")
	ErrIPv4Header        = errors.New("rdma: IPv4 version/IHL is not 4/5 (options are not supported)")
	ErrIPv4Length        = errors.New("rdma: IPv4 total length disagrees with the UDP length")
	ErrIPv4Fragment      = errors.New("rdma: IPv4 packet is a fragment")
	ErrNotUDP            = errors.New("rdma: IPv4 protocol is not UDP")
	ErrShortUDP          = errors.New("rdma: truncated UDP header")
	ErrNotRoCE           = errors.New("rdma: UDP destination port is not 4791")
	ErrUDPLength         = errors.New("rdma: UDP length too small for BTH and ICRC")
	ErrTruncated         = errors.New("rdma: frame shorter than its UDP length")
	ErrShortBTH          = errors.New("rdma: truncated BTH")
	ErrUnsupportedOpcode = errors.New("rdma: unsupported BTH opcode")
	ErrShortTransport    = errors.New("rdma: packet too short for its extension headers, pad and ICRC")
	ErrBadTVer           = errors.New("rdma: BTH transport version is not 0")
	ErrBufferTooSmall    = errors.New("rdma: buffer too small for the frame")
	ErrPayloadTooLong    = errors.New("rdma: payload too long for one packet")
	ErrAddress           = errors.New("rdma: endpoint address is not IPv4")
)

// Frame is a parsed, zero-copy view of a RoCEv2-over-IPv4 Ethernet frame:
//
//	+----------+--------+-------+-------+------------------------+---------+-----+------+
//	| Ethernet |  IPv4  |  UDP  |  BTH  | RETH / AETH / ImmDt    | payload | pad | ICRC |
//	|   14     |   20   |   8   |  12   | 0, 4, 16 or 20         |  0..MTU | 0-3 |  4   |
//	+----------+--------+-------+-------+------------------------+---------+-----+------+
//	0          14       34      42      54                                              End
//	           EthLen           HeadersLen                                 = 34 + UDP length
//
// (the views Ethernet, IPv4, UDP, BTH, RETH, AETH and ImmDt define each
// header; RoCE reads them in place without parsing). Every slice aliases the
// parsed buffer. Absent extension headers are nil. Payload excludes the pad
// and the ICRC.
type Frame struct {
	Eth     []byte
	IPv4    []byte
	UDP     []byte
	BTH     BTH
	RETH    RETH
	AETH    AETH
	ImmDt   ImmDt
	Payload []byte
	// Pad is the pad count from the BTH.
	Pad int
	// ICRC is the received ICRC as stored (read little-endian).
	ICRC uint32
	// End is the offset just past the ICRC: the end of the UDP datagram.
	// Bytes after it are Ethernet padding.
	End int
}

// Parse decodes frame into f without copying or allocating. It checks the
// structure (lengths, types, UDP port, opcode) but not the ICRC: see
// CheckICRC. It accepts every Supported opcode, RC and UC; for a UC opcode
// the extension headers are those of its RC twin (UC SEND Only: none).
// Reserved bits (BTH byte 4, Resv7, MigReq) are ignored. On error, the
// fields already decoded are left set.
func (f *Frame) Parse(frame []byte) error { return f.parse(frame, false) }

// parseRC is Parse for an RC queue pair: an opcode of another transport is
// ErrUnsupportedOpcode, at the point where Parse checks the opcode.
func (f *Frame) parseRC(frame []byte) error { return f.parse(frame, true) }

func (f *Frame) parse(frame []byte, rcOnly bool) error {
	*f = Frame{}
	end, err := roceSpan(frame)
	if err != nil {
		return err
	}
	f.Eth = frame[:EthLen]
	f.IPv4 = frame[EthLen : EthLen+IPv4Len]
	if binary.BigEndian.Uint16(f.IPv4[6:])&0x3FFF != 0 { // MF or fragment offset
		return ErrIPv4Fragment
	}
	f.UDP = frame[EthLen+IPv4Len : HeadersLen]
	if binary.BigEndian.Uint16(f.UDP[2:]) != UDPPort {
		return ErrNotRoCE
	}
	f.End = end
	f.BTH = BTH(frame[HeadersLen : HeadersLen+BTHLen])
	op := f.BTH.Opcode()
	if !op.Supported() || rcOnly && op.Transport() != TransportRC {
		return ErrUnsupportedOpcode
	}
	if f.BTH.TVer() != 0 {
		return ErrBadTVer
	}
	f.Pad = f.BTH.PadCount()
	hl := op.HeaderLen()
	pend := end - ICRCLen - f.Pad
	if pend < HeadersLen+hl {
		return ErrShortTransport
	}
	off := HeadersLen + BTHLen
	if op.HasRETH() {
		f.RETH = RETH(frame[off : off+RETHLen])
		off += RETHLen
	}
	if op.HasAETH() {
		f.AETH = AETH(frame[off : off+AETHLen])
		off += AETHLen
	}
	if op.HasImm() {
		f.ImmDt = ImmDt(frame[off : off+ImmDtLen])
		off += ImmDtLen
	}
	f.Payload = frame[off:pend]
	f.ICRC = binary.LittleEndian.Uint32(frame[end-ICRCLen:])
	return nil
}

// PayloadOffset returns the span frame[off:end] of the payload of a RoCEv2
// frame (excluding pad and ICRC), checking its structure as Frame.Parse does
// (RC and UC opcodes alike).
func PayloadOffset(frame []byte) (off, end int, err error) {
	var f Frame
	if err := f.Parse(frame); err != nil {
		return 0, 0, err
	}
	end = f.End - ICRCLen - f.Pad
	return end - len(f.Payload), end, nil
}

// FrameHeader holds every header field of a frame to encode. The zero value
// of TTL means 64 and of PKey means DefaultPKey.
type FrameHeader struct {
	Src, Dst Endpoint
	SrcPort  uint16 // UDP source port; see SourcePort
	TOS      uint8  // DSCP<<2 | ECN
	TTL      uint8
	ID       uint16 // IPv4 identification

	Opcode         Opcode
	SolicitedEvent bool
	PKey           uint16
	BECN           bool
	DestQP         uint32
	AckReq         bool
	PSN            uint32

	// RETH, used when Opcode.HasRETH.
	VA        uint64
	RKey      uint32
	DMALength uint32
	// AETH, used when Opcode.HasAETH.
	Syndrome Syndrome
	MSN      uint32
	// ImmDt, used when Opcode.HasImm.
	Imm uint32
}

// Len returns the length of the frame carrying payloadLen bytes of payload.
func (h *FrameHeader) Len(payloadLen int) int {
	return HeadersLen + h.Opcode.HeaderLen() + payloadLen + PadFor(payloadLen) + ICRCLen
}

// PayloadOffset returns where the payload starts in an encoded frame.
func (h *FrameHeader) PayloadOffset() int { return HeadersLen + h.Opcode.HeaderLen() }

// Encode writes a complete frame carrying payload into buf and returns its
// length. It sets the IPv4 total length, DF and header checksum, the UDP
// length (checksum 0), the BTH pad count, zero pad bytes and the ICRC
// (computed once). payload may already sit at buf[h.PayloadOffset():]
// (in-place encoding). It allocates nothing.
//
// h.Opcode may be any Supported opcode, RC or UC. Every header field is
// written as given whatever the transport: a UC frame (e.g. OpUCSendOnly)
// is byte for byte the RC frame of its twin opcode with the opcode byte
// replaced and the ICRC recomputed, AckReq included (UC receivers ignore
// it; leave it false).
func (h *FrameHeader) Encode(buf []byte, payload []byte) (int, error) {
	return h.encode(buf, payload, true)
}

// A Template is the headers of frames that differ only in their PSN and
// carry payloads of one length (FrameHeader.Template), encoded once: a
// frame whose payload is already in place then takes a copy of them and
// its PSN instead of a whole encode, and gets the same bytes as
// FrameHeader.EncodeDeferred would write. The zero Template encodes no
// frame (PayloadLen −1).
type Template struct {
	hdr        [HeadersLen + MaxTransportHeadersLen]byte
	off        int // header bytes: where the payload starts
	payloadLen int
	n          int // frame length
}

// Template returns the template of h's frames carrying payloadLen bytes;
// h.PSN is not used (each frame gives its own).
func (h *FrameHeader) Template(payloadLen int) (Template, error) {
	x := *h
	x.PSN = 0
	buf := make([]byte, x.Len(payloadLen))
	off := x.PayloadOffset()
	n, err := x.EncodeDeferred(buf, buf[off:min(off+payloadLen, len(buf))])
	if err != nil {
		return Template{}, err
	}
	t := Template{off: off, payloadLen: payloadLen, n: n}
	copy(t.hdr[:], buf[:off])
	return t, nil
}

// PayloadLen returns the payload length of t's frames (−1 for the zero
// Template's none).
func (t *Template) PayloadLen() int {
	if t.n == 0 {
		return -1
	}
	return t.payloadLen
}

// EncodeDeferred writes the frame of psn (its low 24 bits) around its
// payload, which must already be in place (PayloadLen bytes at the
// template's header's PayloadOffset): the headers, the BTH's PSN and the
// pad, not the ICRC (as FrameHeader.EncodeDeferred). It returns the
// frame's length, 0 if buf is too short or t the zero Template. It
// allocates nothing.
func (t *Template) EncodeDeferred(buf []byte, psn uint32) int {
	if t.n == 0 || len(buf) < t.n {
		return 0
	}
	b := buf[:t.n]
	copy(b, t.hdr[:t.off])
	BTH(b[HeadersLen : HeadersLen+BTHLen]).SetPSN(psn)
	for i := t.off + t.payloadLen; i < t.n-ICRCLen; i++ { // the pad: at most 3 bytes, mostly none
		b[i] = 0
	}
	return t.n
}

// EncodeDeferred is Encode without the ICRC: the frame's last four bytes
// are left as they are, for SealICRC to write when the frame is seen
// (emu.Packet.Defer).
func (h *FrameHeader) EncodeDeferred(buf []byte, payload []byte) (int, error) {
	return h.encode(buf, payload, false)
}

func (h *FrameHeader) encode(buf []byte, payload []byte, seal bool) (int, error) {
	op := h.Opcode
	if !op.Supported() {
		return 0, ErrUnsupportedOpcode
	}
	if !h.Src.IP.Is4() || !h.Dst.IP.Is4() {
		return 0, ErrAddress
	}
	hl := op.HeaderLen()
	pad := PadFor(len(payload))
	n := HeadersLen + hl + len(payload) + pad + ICRCLen
	if n-EthLen > 0xFFFF {
		return 0, ErrPayloadTooLong
	}
	if len(buf) < n {
		return 0, ErrBufferTooSmall
	}
	b := buf[:n]
	off := HeadersLen + hl
	copy(b[off:], payload)
	off += len(payload)
	for i := 0; i < pad; i++ {
		b[off+i] = 0
	}

	// Ethernet.
	copy(b[0:6], h.Dst.MAC[:])
	copy(b[6:12], h.Src.MAC[:])
	binary.BigEndian.PutUint16(b[12:], EtherTypeIPv4)

	// IPv4.
	ip := b[EthLen : EthLen+IPv4Len]
	ip[0] = 0x45
	ip[1] = h.TOS
	binary.BigEndian.PutUint16(ip[2:], uint16(n-EthLen))
	binary.BigEndian.PutUint16(ip[4:], h.ID)
	binary.BigEndian.PutUint16(ip[6:], 0x4000) // DF
	ttl := h.TTL
	if ttl == 0 {
		ttl = 64
	}
	ip[8] = ttl
	ip[9] = 17
	ip[10], ip[11] = 0, 0
	s, d := h.Src.IP.As4(), h.Dst.IP.As4()
	copy(ip[12:16], s[:])
	copy(ip[16:20], d[:])

	// UDP.
	udp := b[EthLen+IPv4Len : HeadersLen]
	binary.BigEndian.PutUint16(udp[0:], h.SrcPort)
	binary.BigEndian.PutUint16(udp[2:], UDPPort)
	binary.BigEndian.PutUint16(udp[4:], uint16(n-EthLen-IPv4Len))
	udp[6], udp[7] = 0, 0

	// BTH.
	bth := BTH(b[HeadersLen : HeadersLen+BTHLen])
	bth[0] = byte(op)
	bth[1] = byte(pad) << 4
	if h.SolicitedEvent {
		bth[1] |= 0x80
	}
	pkey := h.PKey
	if pkey == 0 {
		pkey = DefaultPKey
	}
	bth.SetPKey(pkey)
	bth[4] = 0
	if h.BECN {
		bth[4] = 0x40
	}
	bth.SetDestQP(h.DestQP)
	bth.SetAckReq(h.AckReq)
	bth.SetPSN(h.PSN)
	x := HeadersLen + BTHLen
	if op.HasRETH() {
		r := RETH(b[x : x+RETHLen])
		r.SetVA(h.VA)
		r.SetRKey(h.RKey)
		r.SetDMALength(h.DMALength)
		x += RETHLen
	}
	if op.HasAETH() {
		a := AETH(b[x : x+AETHLen])
		a.SetSyndrome(h.Syndrome)
		a.SetMSN(h.MSN)
		x += AETHLen
	}
	if op.HasImm() {
		ImmDt(b[x : x+ImmDtLen]).SetImm(h.Imm)
	}

	if seal {
		binary.LittleEndian.PutUint32(b[n-ICRCLen:], icrc(b))
	}
	binary.BigEndian.PutUint16(ip[10:], ipv4Checksum(ip))
	return n, nil
}

// ipv4Checksum returns the Internet checksum of an IPv4 header (IPv4Len
// bytes, no options) whose checksum field is zero.
func ipv4Checksum(h []byte) uint16 { return ^onesSum(h) }

// IPv4ChecksumOK reports whether the IPv4 header checksum of ip (IPv4Len
// bytes, no options) is valid.
func IPv4ChecksumOK(ip []byte) bool {
	return len(ip) >= IPv4Len && onesSum(ip) == 0xFFFF
}

// onesSum returns the one's-complement sum of the ten 16-bit words of an
// IPv4 header (RFC 1071), in [1, 0xFFFF] unless every word is zero. It
// adds the header as five 32-bit words and folds the carries back in,
// which gives the same sum (2^16 ≡ 1 modulo 2^16 − 1).
func onesSum(h []byte) uint16 {
	h = h[:IPv4Len]
	s := uint64(binary.BigEndian.Uint32(h[0:])) + uint64(binary.BigEndian.Uint32(h[4:])) +
		uint64(binary.BigEndian.Uint32(h[8:])) + uint64(binary.BigEndian.Uint32(h[12:])) +
		uint64(binary.BigEndian.Uint32(h[16:]))
	s = s>>32 + s&0xFFFFFFFF // ≤ 2^32 + 3 (s < 5·2^32)
	s = s>>16 + s&0xFFFF     // ≤ 0x1FFFE
	s = s>>16 + s&0xFFFF     // ≤ 0xFFFF
	return uint16(s)
}

// SetIPv4Checksum recomputes the IPv4 header checksum of an Ethernet/IPv4
// frame, e.g. after rewriting addresses or the TTL. The ICRC does not cover
// the checksum, so the order of SetIPv4Checksum and SetICRC does not matter.
func SetIPv4Checksum(frame []byte) error {
	if len(frame) < EthLen+IPv4Len {
		return ErrShortIPv4
	}
	ip := frame[EthLen : EthLen+IPv4Len]
	if ip[0] != 0x45 {
		return ErrIPv4Header
	}
	ip[10], ip[11] = 0, 0
	binary.BigEndian.PutUint16(ip[10:], ipv4Checksum(ip))
	return nil
}
