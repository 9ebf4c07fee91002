package rdma

import (
	"bytes"
	"encoding/binary"
	"encoding/hex"
	"hash/crc32"
	"math/rand/v2"
	"net/netip"
	"strings"
	"testing"
)

// refICRC is an independent ICRC computation straight from the spec text
// (IBA A17.4.1, rocev2.md §1.7): CRC-32 over 8 bytes of 0xFF, then the IPv4
// header with TOS, TTL and checksum set to all ones, the UDP header with its
// checksum set to all ones, the BTH with byte 4 set to all ones, and
// everything after the BTH up to the ICRC. It shares no code with icrc.go.
func refICRC(t testing.TB, frame []byte) uint32 {
	t.Helper()
	ip := frame[14:34]
	udp := frame[34:42]
	ulen := int(udp[4])<<8 | int(udp[5])
	roce := frame[42 : 34+ulen-4] // BTH .. pad
	var pseudo bytes.Buffer
	pseudo.Write(bytes.Repeat([]byte{0xFF}, 8))
	ipm := append([]byte(nil), ip...)
	ipm[1], ipm[8], ipm[10], ipm[11] = 0xFF, 0xFF, 0xFF, 0xFF
	pseudo.Write(ipm)
	udpm := append([]byte(nil), udp...)
	udpm[6], udpm[7] = 0xFF, 0xFF
	pseudo.Write(udpm)
	bthm := append([]byte(nil), roce...)
	bthm[4] = 0xFF
	pseudo.Write(bthm)
	h := crc32.NewIEEE()
	h.Write(pseudo.Bytes())
	return h.Sum32()
}

func unhex(t testing.TB, s string) []byte {
	t.Helper()
	s = strings.NewReplacer(" ", "", "\n", "", "\t", "", "|", "").Replace(s)
	b, err := hex.DecodeString(s)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// TestICRCVectorCNP checks the ConnectX-4 Lx CNP capture (rocev2.md §3 V2):
// TOS 0xC2, BECN set, UDP source port 0. The wire ICRC is 82 fd 00 2a.
func TestICRCVectorCNP(t *testing.T) {
	frame := unhex(t, `e41d2dab2bc2 7cfe90643b32 0800
		45c2 003c 718c 4000 4011 9161 0a001101 0a001201
		0000 12b7 0028 0000
		8100ffff 40000118 00000000
		00000000000000000000000000000000
		82fd002a`)
	got, err := ComputeICRC(frame)
	if err != nil {
		t.Fatal(err)
	}
	wire := binary.LittleEndian.Uint32(frame[len(frame)-4:])
	if got != wire {
		t.Fatalf("ComputeICRC = %#08x, wire has %#08x", got, wire)
	}
	if r := refICRC(t, frame); r != wire {
		t.Fatalf("reference ICRC = %#08x, wire has %#08x", r, wire)
	}
	if !CheckICRC(frame) {
		t.Fatal("CheckICRC rejects the captured CNP")
	}
	if !IPv4ChecksumOK(frame[14:34]) {
		t.Fatal("IPv4 checksum of the captured CNP does not verify")
	}
	frame[len(frame)-1] ^= 1
	if CheckICRC(frame) {
		t.Fatal("CheckICRC accepts a corrupted ICRC")
	}
}

// TestICRCVectorScapyUC checks scapy's UC SEND_ONLY vector (rocev2.md §3 V3):
// IPv4 checksum 0xb4d5 and ICRC wire bytes 78 f3 53 f3.
func TestICRCVectorScapyUC(t *testing.T) {
	var h FrameHeader
	_ = h
	frame := make([]byte, 0, 14+44+20)
	frame = append(frame, make([]byte, 12)...)
	frame = append(frame, 0x08, 0x00)
	ip := []byte{0x45, 0x01, 0, 64, 0x04, 0x78, 0x40, 0x00, 64, 17, 0, 0, 192, 168, 0, 7, 192, 168, 0, 7}
	binary.BigEndian.PutUint16(ip[10:], ipv4Checksum(ip))
	if c := binary.BigEndian.Uint16(ip[10:]); c != 0xb4d5 {
		t.Fatalf("IPv4 checksum %#04x, want 0xb4d5", c)
	}
	frame = append(frame, ip...)
	frame = append(frame, 0xC0, 0x00, 0x12, 0xB7, 0x00, 44, 0, 0)
	bth := make(BTH, 12)
	bth.SetOpcode(0x24)
	bth.SetMigReq(true)
	bth.SetPadCount(2)
	bth.SetPKey(0xFFFF)
	bth.SetDestQP(211)
	bth.SetPSN(13571856)
	frame = append(frame, bth...)
	frame = append(frame, unhex(t, "4630818be28935d90e9a95505401be885e500000")...)
	frame = append(frame, 0, 0, 0, 0)
	if err := SetICRC(frame); err != nil {
		t.Fatal(err)
	}
	if got := frame[len(frame)-4:]; !bytes.Equal(got, []byte{0x78, 0xf3, 0x53, 0xf3}) {
		t.Fatalf("ICRC wire bytes % x, want 78 f3 53 f3", got)
	}
	if r := refICRC(t, frame); r != binary.LittleEndian.Uint32(frame[len(frame)-4:]) {
		t.Fatalf("reference ICRC %#08x disagrees", r)
	}
}

// TestICRCMaskedFields: rewriting TOS/ECN, TTL, the IPv4 and UDP checksums
// and BTH byte 4 keeps the ICRC valid; changing any other covered byte
// breaks it, and the Ethernet header and padding are not covered.
func TestICRCMaskedFields(t *testing.T) {
	f := testFrame(t, OpRDMAWriteOnlyImm, []byte("hello, world!"))
	if !CheckICRC(f) {
		t.Fatal("fresh frame fails CheckICRC")
	}
	masked := map[int]bool{14 + 1: true, 14 + 8: true, 14 + 10: true, 14 + 11: true, 34 + 6: true, 34 + 7: true, 42 + 4: true}
	for i := 0; i < len(f)-4; i++ {
		g := append([]byte(nil), f...)
		g[i] ^= 0xA5
		ok := CheckICRC(g)
		switch {
		case i == 12 || i == 13: // EtherType: no longer IPv4
		case i < 14 && !ok:
			t.Errorf("byte %d (Ethernet) changed the ICRC verdict", i)
		case masked[i] && !ok:
			t.Errorf("masked byte %d broke the ICRC", i)
		case i >= 14 && !masked[i] && ok:
			t.Errorf("covered byte %d did not break the ICRC", i)
		}
	}
	// Ethernet padding after the UDP datagram is ignored.
	g := append(append([]byte(nil), f...), 0, 0, 0, 0, 0, 0)
	if !CheckICRC(g) {
		t.Error("trailing Ethernet padding broke the ICRC")
	}
}

var (
	epA = Endpoint{MAC: [6]byte{2, 0, 0, 0, 0, 1}, IP: netip.AddrFrom4([4]byte{10, 0, 0, 1})}
	epB = Endpoint{MAC: [6]byte{2, 0, 0, 0, 0, 2}, IP: netip.AddrFrom4([4]byte{10, 0, 0, 2})}
)

func testHeader(op Opcode) FrameHeader {
	return FrameHeader{
		Src: epA, Dst: epB, SrcPort: SourcePort(17), TOS: 2, ID: 7,
		Opcode: op, PKey: 0xFFFF, DestQP: 0x123456, AckReq: op.IsLast(), PSN: 0xFFFFFE,
		VA: 0x1122334455667788, RKey: 0xCAFEBABE, DMALength: 4000,
		Syndrome: SyndromeACK, MSN: 0xABCDEF, Imm: 0xDEADBEEF,
	}
}

func testFrame(t testing.TB, op Opcode, payload []byte) []byte {
	t.Helper()
	h := testHeader(op)
	buf := make([]byte, h.Len(len(payload)))
	n, err := h.Encode(buf, payload)
	if err != nil {
		t.Fatal(err)
	}
	return buf[:n]
}

var allOps = []Opcode{OpSendFirst, OpSendMiddle, OpSendLast, OpSendLastImm, OpSendOnly, OpSendOnlyImm,
	OpRDMAWriteFirst, OpRDMAWriteMiddle, OpRDMAWriteLast, OpRDMAWriteLastImm, OpRDMAWriteOnly, OpRDMAWriteOnlyImm, OpAck}

func TestEncodeParseRoundTrip(t *testing.T) {
	for _, op := range allOps {
		for _, plen := range []int{0, 1, 2, 3, 4, 5, 255, 256, 1024} {
			if op == OpAck && plen > 0 {
				continue
			}
			payload := make([]byte, plen)
			for i := range payload {
				payload[i] = byte(i*7 + plen)
			}
			f := testFrame(t, op, payload)
			if want := 42 + op.HeaderLen() + plen + (-plen & 3) + 4; len(f) != want {
				t.Fatalf("%v/%d: length %d want %d", op, plen, len(f), want)
			}
			var fr Frame
			if err := fr.Parse(f); err != nil {
				t.Fatalf("%v/%d: Parse: %v", op, plen, err)
			}
			if !bytes.Equal(fr.Payload, payload) {
				t.Fatalf("%v/%d: payload mismatch", op, plen)
			}
			if fr.BTH.Opcode() != op || fr.BTH.PSN() != 0xFFFFFE || fr.BTH.DestQP() != 0x123456 || fr.BTH.PKey() != 0xFFFF {
				t.Fatalf("%v/%d: BTH fields wrong: % x", op, plen, []byte(fr.BTH))
			}
			if fr.BTH.AckReq() != op.IsLast() || fr.BTH.PadCount() != -plen&3 {
				t.Fatalf("%v/%d: AckReq/PadCount wrong", op, plen)
			}
			if (fr.RETH != nil) != op.HasRETH() || (fr.AETH != nil) != op.HasAETH() || (fr.ImmDt != nil) != op.HasImm() {
				t.Fatalf("%v: extension header presence wrong", op)
			}
			if fr.RETH != nil && (fr.RETH.VA() != 0x1122334455667788 || fr.RETH.RKey() != 0xCAFEBABE || fr.RETH.DMALength() != 4000) {
				t.Fatalf("%v: RETH wrong", op)
			}
			if fr.AETH != nil && (fr.AETH.Syndrome() != SyndromeACK || fr.AETH.MSN() != 0xABCDEF) {
				t.Fatalf("%v: AETH wrong", op)
			}
			if fr.ImmDt != nil && fr.ImmDt.Imm() != 0xDEADBEEF {
				t.Fatalf("%v: ImmDt wrong", op)
			}
			ip := fr.IPv4
			if binary.BigEndian.Uint16(ip[6:]) != 0x4000 || !IPv4ChecksumOK(ip) || ip[1] != 2 {
				t.Fatalf("%v: IPv4 DF/checksum/TOS wrong: % x", op, ip)
			}
			if int(binary.BigEndian.Uint16(ip[2:])) != len(f)-14 || int(binary.BigEndian.Uint16(fr.UDP[4:])) != len(f)-34 {
				t.Fatalf("%v: lengths wrong", op)
			}
			if binary.BigEndian.Uint16(fr.UDP[6:]) != 0 || binary.BigEndian.Uint16(fr.UDP[2:]) != UDPPort {
				t.Fatalf("%v: UDP checksum/port wrong", op)
			}
			if r := refICRC(t, f); r != fr.ICRC {
				t.Fatalf("%v/%d: ICRC %#08x, reference %#08x", op, plen, fr.ICRC, r)
			}
			off, end, err := PayloadOffset(f)
			if err != nil || !bytes.Equal(f[off:end], payload) {
				t.Fatalf("%v: PayloadOffset = %d,%d,%v", op, off, end, err)
			}
		}
	}
}

// TestEncodeDeferred: EncodeDeferred writes every byte Encode does but
// the ICRC, which SealICRC then writes, for every opcode RC and UC; a
// frame that is not RoCE SealICRC leaves as it is.
func TestEncodeDeferred(t *testing.T) {
	for _, base := range allOps {
		for _, op := range []Opcode{base, base.WithTransport(TransportUC)} {
			if !op.Supported() {
				continue
			}
			for _, plen := range []int{0, 3, 256} {
				if op.HasAETH() && plen > 0 {
					continue
				}
				payload := bytes.Repeat([]byte{byte(plen + 1)}, plen)
				want := testFrame(t, op, payload)
				h := testHeader(op)
				got := bytes.Repeat([]byte{0xA5}, len(want))
				n, err := h.EncodeDeferred(got, payload)
				if err != nil || n != len(want) {
					t.Fatalf("%v/%d: EncodeDeferred = %d, %v", op, plen, n, err)
				}
				if !bytes.Equal(got[:n-ICRCLen], want[:n-ICRCLen]) || !bytes.Equal(got[n-ICRCLen:n], []byte{0xA5, 0xA5, 0xA5, 0xA5}) {
					t.Fatalf("%v/%d: EncodeDeferred wrote\n%x\nwant all but the ICRC of\n%x", op, plen, got, want)
				}
				SealICRC(got)
				if !bytes.Equal(got, want) {
					t.Fatalf("%v/%d: sealed\n%x\nwant\n%x", op, plen, got, want)
				}
			}
		}
	}
	other := []byte("not a RoCE frame at all, just bytes")
	before := bytes.Clone(other)
	SealICRC(other)
	if !bytes.Equal(other, before) {
		t.Fatal("SealICRC changed a frame that is not RoCE")
	}
}

// TestParseIgnoresReserved: receivers ignore FECN/BECN/Resv6a, MigReq and
// Resv7.
func TestParseIgnoresReserved(t *testing.T) {
	f := testFrame(t, OpSendOnly, []byte{1, 2, 3, 4, 5})
	f[42+1] |= 0x40 // MigReq (covered by the ICRC)
	f[42+4] = 0xFF  // F, B, Resv6a (masked)
	f[42+8] |= 0x7F // Resv7 (covered)
	if err := SetICRC(f); err != nil {
		t.Fatal(err)
	}
	var fr Frame
	if err := fr.Parse(f); err != nil {
		t.Fatal(err)
	}
	if fr.BTH.PSN() != 0xFFFFFE || fr.BTH.DestQP() != 0x123456 || !bytes.Equal(fr.Payload, []byte{1, 2, 3, 4, 5}) {
		t.Fatal("reserved bits leaked into fields")
	}
}

func TestParseErrors(t *testing.T) {
	good := testFrame(t, OpRDMAWriteOnly, make([]byte, 2))
	cases := []struct {
		name string
		mut  func([]byte) []byte
		want error
	}{
		{"empty", func(b []byte) []byte { return b[:0] }, ErrShortEthernet},
		{"ethertype", func(b []byte) []byte { b[12] = 0x86; return b }, ErrNotIPv4},
		{"short ip", func(b []byte) []byte { return b[:20] }, ErrShortIPv4},
		{"ihl", func(b []byte) []byte { b[14] = 0x46; return b }, ErrIPv4Header},
		{"proto", func(b []byte) []byte { b[14+9] = 6; return b }, ErrNotUDP},
		{"short udp", func(b []byte) []byte { return b[:38] }, ErrShortUDP},
		{"truncated", func(b []byte) []byte { return b[:len(b)-1] }, ErrTruncated},
		{"udp len", func(b []byte) []byte { b[38], b[39] = 0, 10; return b }, ErrUDPLength},
		{"ip len", func(b []byte) []byte { b[17]++; return b }, ErrIPv4Length},
		{"fragment", func(b []byte) []byte { b[20] = 0x20; return b }, ErrIPv4Fragment},
		{"port", func(b []byte) []byte { b[37]++; return b }, ErrNotRoCE},
		{"opcode", func(b []byte) []byte { b[42] = 0x15; return b }, ErrUnsupportedOpcode},
		{"uc read", func(b []byte) []byte { b[42] = 0x2C; return b }, ErrUnsupportedOpcode}, // UC has no RDMA READ
		{"ud opcode", func(b []byte) []byte { b[42] = 0x64; return b }, ErrUnsupportedOpcode},
		{"tver", func(b []byte) []byte { b[43] |= 1; return b }, ErrBadTVer},
		{"short transport", func(b []byte) []byte { b[42] = byte(OpRDMAWriteOnlyImm); b[43] |= 0x30; return b }, ErrShortTransport},
	}
	for _, c := range cases {
		b := c.mut(append([]byte(nil), good...))
		var fr Frame
		if err := fr.Parse(b); err != c.want {
			t.Errorf("%s: Parse = %v, want %v", c.name, err, c.want)
		}
	}
}

func TestPSNArithmetic(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	for i := 0; i < 100000; i++ {
		a := r.Uint32() & PSNMask
		n := int(r.Int32N(1 << 23)) // 0 .. 2^23-1
		b := PSNAdd(a, n)
		if b > PSNMask {
			t.Fatalf("PSNAdd(%d,%d) = %d out of range", a, n, b)
		}
		if d := PSNDiff(b, a); d != int32(n) {
			t.Fatalf("PSNDiff(%d,%d) = %d, want %d", b, a, d, n)
		}
		if d := PSNDiff(a, b); d != -int32(n) {
			t.Fatalf("PSNDiff(%d,%d) = %d, want %d", a, b, d, -n)
		}
		if n > 0 && (!PSNLess(a, b) || PSNLess(b, a)) {
			t.Fatalf("PSNLess wrong for %d, %d (+%d)", a, b, n)
		}
		if PSNAdd(b, -n) != a {
			t.Fatalf("PSNAdd(%d,-%d) != %d", b, n, a)
		}
	}
	if PSNAdd(PSNMask, 1) != 0 || PSNDiff(0, PSNMask) != 1 || !PSNLess(PSNMask, 0) {
		t.Fatal("wrap at 2^24 wrong")
	}
}

func TestSetIPv4Checksum(t *testing.T) {
	f := testFrame(t, OpSendOnly, []byte{1})
	f[14+8]--     // TTL decrement
	f[14+15] = 99 // new source address (covered by the ICRC)
	if IPv4ChecksumOK(f[14:34]) {
		t.Fatal("checksum still valid after rewrite")
	}
	if err := SetIPv4Checksum(f); err != nil || !IPv4ChecksumOK(f[14:34]) {
		t.Fatalf("SetIPv4Checksum: %v", err)
	}
	if CheckICRC(f) {
		t.Fatal("ICRC still valid after rewriting a covered address")
	}
	if err := SetICRC(f); err != nil || !CheckICRC(f) {
		t.Fatal(err)
	}
}

func TestOpcodeString(t *testing.T) {
	if OpSendOnlyImm.String() != "SEND Only with Immediate" || OpAck.String() != "Acknowledge" || Opcode(0x33).String() != "Opcode(0x33)" {
		t.Fatal("Opcode.String")
	}
}

func TestZeroAllocs(t *testing.T) {
	h := testHeader(OpRDMAWriteOnlyImm)
	payload := make([]byte, 1024)
	buf := make([]byte, 2048)
	var fr Frame
	n, _ := h.Encode(buf, payload)
	f := buf[:n]
	checks := map[string]func(){
		"Encode":      func() { h.PSN++; _, _ = h.Encode(buf, payload) },
		"Parse":       func() { _ = fr.Parse(f) },
		"ComputeICRC": func() { _, _ = ComputeICRC(f) },
		"SetICRC":     func() { _ = SetICRC(f) },
		"CheckICRC":   func() { _ = CheckICRC(f) },
		"ParseError":  func() { _ = fr.Parse(f[:30]) },
	}
	for name, fn := range checks {
		if a := testing.AllocsPerRun(100, fn); a != 0 {
			t.Errorf("%s allocates %v per run", name, a)
		}
	}
}

// TestICRCEveryLength: ComputeICRC agrees with the spec's computation
// (refICRC) for every payload length from 0 to 300 bytes, so through every
// split of icrc between crc32's carry-less-multiply path (from 64 bytes, in
// 16-byte steps) and its own tail (0 to 15 bytes: 8, 4 and 1 at a time),
// with and without a pad.
func TestICRCEveryLength(t *testing.T) {
	r := rand.New(rand.NewPCG(17, 4))
	for n := 0; n <= 300; n++ {
		payload := make([]byte, n)
		for i := range payload {
			payload[i] = byte(r.Uint32())
		}
		f := testFrame(t, OpUCSendOnly, payload)
		got, err := ComputeICRC(f)
		if err != nil {
			t.Fatalf("payload %d: %v", n, err)
		}
		if want := refICRC(t, f); got != want {
			t.Fatalf("payload %d bytes: ICRC %#08x, the spec's %#08x", n, got, want)
		}
	}
}

// refOnesSum is RFC 1071's one's-complement sum of 16-bit words, one word
// at a time: the reference for onesSum.
func refOnesSum(h []byte) uint16 {
	var sum uint32
	for i := 0; i+1 < len(h); i += 2 {
		sum += uint32(h[i])<<8 | uint32(h[i+1])
	}
	for sum > 0xFFFF {
		sum = sum>>16 + sum&0xFFFF
	}
	return uint16(sum)
}

// FuzzIPv4Checksum: onesSum of any 20 bytes is the word-at-a-time sum;
// ipv4Checksum makes a header IPv4ChecksumOK accepts, and one changed
// byte makes it refuse.
func FuzzIPv4Checksum(f *testing.F) {
	f.Add(make([]byte, IPv4Len), uint8(3))
	f.Add([]byte{0x45, 0, 0, 0x73, 0, 0, 0x40, 0, 0x40, 0x11, 0, 0, 0xc0, 0xa8, 0, 1, 0xc0, 0xa8, 0, 0xc7}, uint8(0))
	f.Add([]byte{0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff}, uint8(19))
	// A sum whose second fold carries again (0x0001 + 0xFFFF).
	f.Add([]byte{0, 1, 0xff, 0xff, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0}, uint8(5))
	f.Fuzz(func(t *testing.T, b []byte, at uint8) {
		if len(b) < IPv4Len {
			return
		}
		h := append([]byte(nil), b[:IPv4Len]...)
		if got, want := onesSum(h), refOnesSum(h); got != want {
			t.Fatalf("onesSum(% x) = %#x, want %#x", h, got, want)
		}
		h[10], h[11] = 0, 0
		binary.BigEndian.PutUint16(h[10:], ipv4Checksum(h))
		if !IPv4ChecksumOK(h) {
			t.Fatalf("checksummed header % x refused", h)
		}
		i := int(at) % IPv4Len
		h[i]++
		if IPv4ChecksumOK(h) != (refOnesSum(h) == 0xFFFF) {
			t.Fatalf("header % x: IPv4ChecksumOK disagrees with the reference", h)
		}
	})
}
