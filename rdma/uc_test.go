package rdma

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"math/rand/v2"
	"net/netip"
	"os"
	"path/filepath"
	"testing"

	"github.com/inabox/inabox/internal/testenv"
)

var ucOps = []Opcode{OpUCSendFirst, OpUCSendMiddle, OpUCSendLast, OpUCSendLastImm, OpUCSendOnly, OpUCSendOnlyImm,
	OpUCRDMAWriteFirst, OpUCRDMAWriteMiddle, OpUCRDMAWriteLast, OpUCRDMAWriteLastImm, OpUCRDMAWriteOnly, OpUCRDMAWriteOnlyImm}

// rcAndUCOps returns allOps followed by ucOps.
func rcAndUCOps() []Opcode { return append(append([]Opcode(nil), allOps...), ucOps...) }

// The references below are the code this package's UC support replaces,
// copied from its call sites outside the package (package qualifiers
// dropped, nothing else changed), so that the tests pin the new API to the
// old semantics byte for byte.

// refPatchUC is how UC frames were built: encode the RC twin, overwrite
// the opcode byte, recompute the ICRC (host/worker.go sendUC, host/ps.go
// ctlFrame, host/baseline/common.go ucSend).
func refPatchUC(h FrameHeader, buf, payload []byte) (int, error) {
	uc := h.Opcode
	h.Opcode = uc.WithTransport(TransportRC)
	n, err := h.Encode(buf, payload)
	if err != nil {
		return n, err
	}
	b := buf[:n]
	b[HeadersLen] = byte(uc)
	_ = SetICRC(b)
	return n, nil
}

// refUCPayloadHost is host/proto.go ucPayload.
func refUCPayloadHost(b []byte, qpn uint32) []byte {
	const bth = HeadersLen
	if len(b) < bth+BTHLen+ICRCLen || b[bth] != 0x24 || BTH(b[bth:]).DestQP() != qpn {
		return nil
	}
	if !CheckICRC(b) {
		return nil
	}
	ulen := int(binary.BigEndian.Uint16(b[EthLen+IPv4Len+4:]))
	end := EthLen + IPv4Len + ulen - ICRCLen - BTH(b[bth:]).PadCount()
	if end < bth+BTHLen || end > len(b) {
		return nil
	}
	return b[bth+BTHLen : end]
}

// refUCPayloadBaseline is host/baseline/common.go ucPayload.
func refUCPayloadBaseline(b []byte) ([]byte, uint32) {
	const bth = HeadersLen
	if len(b) < bth+BTHLen+ICRCLen || b[bth] != 0x24 || !CheckICRC(b) {
		return nil, 0
	}
	ulen := int(binary.BigEndian.Uint16(b[EthLen+IPv4Len+4:]))
	end := EthLen + IPv4Len + ulen - ICRCLen - BTH(b[bth:]).PadCount()
	if end < bth+BTHLen || end > len(b) {
		return nil, 0
	}
	return b[bth+BTHLen : end], BTH(b[bth:]).DestQP()
}

// refINAExt is the former switch/pipeline.go inaExt.
func refINAExt(op byte) int {
	switch op {
	case 0x04, 0x24: // SEND ONLY
		return BTHLen
	case 0x05, 0x25: // SEND ONLY with immediate
		return BTHLen + ImmDtLen
	case 0x0A, 0x2A: // RDMA WRITE ONLY
		return BTHLen + RETHLen
	case 0x0B, 0x2B: // RDMA WRITE ONLY with immediate
		return BTHLen + RETHLen + ImmDtLen
	}
	return -1
}

// refSwitchParse is the RoCE part of switch/pipeline.go parse: whether the
// frame gets past the header checks and the opcode table, and then the
// offset of the INA header (the payload) and the limit (end of payload).
func refSwitchParse(d []byte) (ina, limit int, ok bool) {
	const (
		offIP   = 14
		offUDP  = offIP + 20
		offBTH  = offUDP + 8
		minRoCE = offBTH + BTHLen
	)
	if len(d) < minRoCE || d[12] != 0x08 || d[13] != 0x00 || d[offIP] != 0x45 || d[offIP+9] != 17 ||
		binary.BigEndian.Uint16(d[offUDP+2:]) != UDPPort {
		return 0, 0, false
	}
	ulen := int(binary.BigEndian.Uint16(d[offUDP+4:]))
	end := offUDP + ulen
	if end > len(d) || ulen < 8+BTHLen+ICRCLen {
		return 0, 0, false
	}
	ina = offBTH + refINAExt(d[offBTH])
	if ina == offBTH-1 {
		return 0, 0, false
	}
	pad := int(d[offBTH+1]>>4) & 3
	limit = end - ICRCLen - pad
	return ina, limit, true
}

// inaOpcode is how the switch's opcode table is written with this
// package's API: RC or UC SEND/RDMA WRITE Only, with or without immediate.
func inaOpcode(op Opcode) bool { return op.IsSendOrWriteOnly() }

func TestUCOpcodes(t *testing.T) {
	if len(ucOps) != 12 {
		t.Fatal("ucOps")
	}
	for i, uc := range ucOps {
		rc := allOps[i]
		if byte(uc) != 0x20|byte(rc) || uc.Transport() != TransportUC || rc.Transport() != TransportRC {
			t.Errorf("%#x: not the UC twin of %v", byte(uc), rc)
		}
		if uc.WithTransport(TransportRC) != rc || rc.WithTransport(TransportUC) != uc || uc.WithTransport(TransportUC) != uc {
			t.Errorf("%#x: WithTransport", byte(uc))
		}
		if !uc.Supported() || uc.HeaderLen() != rc.HeaderLen() || uc.flags() != rc.flags() ||
			uc.HasRETH() != rc.HasRETH() || uc.HasAETH() || uc.HasImm() != rc.HasImm() ||
			uc.IsFirst() != rc.IsFirst() || uc.IsLast() != rc.IsLast() || uc.IsMiddle() != rc.IsMiddle() ||
			uc.IsOnly() != rc.IsOnly() || uc.IsSend() != rc.IsSend() || uc.IsWrite() != rc.IsWrite() {
			t.Errorf("%#x: flags differ from %v", byte(uc), rc)
		}
	}
	if OpUCSendOnly != 0x24 || OpUCSendOnly.HeaderLen() != BTHLen || OpUCSendOnlyImm.HeaderLen() != BTHLen+ImmDtLen ||
		OpUCRDMAWriteOnly.HeaderLen() != BTHLen+RETHLen || OpUCRDMAWriteOnlyImm.HeaderLen() != MaxTransportHeadersLen {
		t.Error("UC Only header lengths")
	}
	// UC has no READ, atomics or ACK; nothing above 0x3F but CNP's layout
	// is known, and CNP is not Supported (as before).
	for o := 0x2C; o < 0x100; o++ {
		if Opcode(o).Supported() {
			t.Errorf("%#x Supported", o)
		}
	}
	if OpCNP.Transport() != TransportCNP || Opcode(0x64).Transport() != TransportUD || Opcode(0x40).Transport() != TransportRD ||
		Opcode(0xA0).Transport() != TransportXRC || Opcode(0xE0).Transport() != 7 {
		t.Error("Transport")
	}
	for tr, want := range []string{"RC", "UC", "RD", "UD", "CNP", "XRC", "Transport(6)", "Transport(7)"} {
		if s := Transport(tr).String(); s != want {
			t.Errorf("Transport(%d).String() = %q, want %q", tr, s, want)
		}
	}
	// The switch's opcode rewrite and table, exhaustively.
	for o := 0; o < 256; o++ {
		op := Opcode(o)
		if got, want := op.WithTransport(TransportUC), Opcode(byte(op)&0x1F|0x20); got != want {
			t.Errorf("%#x.WithTransport(UC) = %#x, switch computes %#x", o, byte(got), byte(want))
		}
		if op.IsSendOrWriteOnly() != (op.IsOnly() && (op.IsSend() || op.IsWrite())) {
			t.Errorf("%#x: IsSendOrWriteOnly", o)
		}
		ext := -1
		if inaOpcode(op) {
			ext = op.HeaderLen()
		}
		if ref := refINAExt(byte(o)); ext != ref {
			t.Errorf("%#x: INA extension %d, switch table %d", o, ext, ref)
		}
	}
}

// TestOpcodeNames: String prints the RC names exactly as before UC opcodes
// existed ("inabox decode" output is recorded in golden files), the UC
// twins of SEND and RDMA WRITE as "UC " and the RC name, and any other
// opcode in hex.
func TestOpcodeNames(t *testing.T) {
	names := []string{"SEND First", "SEND Middle", "SEND Last", "SEND Last with Immediate", "SEND Only",
		"SEND Only with Immediate", "RDMA WRITE First", "RDMA WRITE Middle", "RDMA WRITE Last",
		"RDMA WRITE Last with Immediate", "RDMA WRITE Only", "RDMA WRITE Only with Immediate", "RDMA READ Request",
		"RDMA READ Response First", "RDMA READ Response Middle", "RDMA READ Response Last", "RDMA READ Response Only",
		"Acknowledge", "Atomic Acknowledge", "CmpSwap", "FetchAdd"}
	for o := 0; o < 256; o++ {
		want := fmt.Sprintf("Opcode(%#x)", o)
		switch {
		case o < len(names):
			want = names[o]
		case o >= 0x20 && o < 0x20+12: // UC has RC's SEND and RDMA WRITE
			want = "UC " + names[o-0x20]
		case o == 0x81:
			want = "CNP"
		}
		if got := Opcode(o).String(); got != want {
			t.Errorf("Opcode(%#x).String() = %q, want %q", o, got, want)
		}
	}
	if OpUCSendOnly.String() != "UC SEND Only" || OpUCRDMAWriteOnlyImm.String() != "UC RDMA WRITE Only with Immediate" {
		t.Error("UC opcode names")
	}
}

// randHeader returns a random header of opcode op, including the values the
// encoder treats specially (TTL and PKey 0, QP and PSN beyond 24 bits).
func randHeader(r *rand.Rand, op Opcode) FrameHeader {
	var h FrameHeader
	for i := range h.Src.MAC {
		h.Src.MAC[i], h.Dst.MAC[i] = byte(r.Uint32()), byte(r.Uint32())
	}
	h.Src.IP = netip.AddrFrom4([4]byte{byte(r.Uint32()), byte(r.Uint32()), byte(r.Uint32()), byte(r.Uint32())})
	h.Dst.IP = netip.AddrFrom4([4]byte{byte(r.Uint32()), byte(r.Uint32()), byte(r.Uint32()), byte(r.Uint32())})
	h.SrcPort, h.TOS, h.TTL, h.ID = uint16(r.Uint32()), uint8(r.Uint32()), uint8(r.Uint32()), uint16(r.Uint32())
	if r.IntN(4) == 0 {
		h.TTL = 0
	}
	h.Opcode = op
	h.SolicitedEvent, h.BECN, h.AckReq = r.IntN(2) == 0, r.IntN(2) == 0, r.IntN(2) == 0
	h.PKey = uint16(r.Uint32())
	if r.IntN(4) == 0 {
		h.PKey = 0
	}
	h.DestQP, h.PSN = r.Uint32(), r.Uint32()
	h.VA, h.RKey, h.DMALength = r.Uint64(), r.Uint32(), r.Uint32()
	h.Syndrome, h.MSN, h.Imm = Syndrome(r.Uint32()), r.Uint32(), r.Uint32()
	return h
}

// TestUCEncodeMatchesPatch: encoding a UC opcode produces exactly the bytes
// of the old method (encode the RC twin, patch the opcode, SetICRC), for
// random headers and payloads, into a fresh and into a dirty buffer and in
// place.
func TestUCEncodeMatchesPatch(t *testing.T) {
	r := rand.New(rand.NewPCG(7, 24))
	for i := 0; i < 3000; i++ {
		op := ucOps[r.IntN(len(ucOps))]
		if i%3 == 0 {
			op = OpUCSendOnly // what the project sends
		}
		h := randHeader(r, op)
		payload := make([]byte, r.IntN(1100))
		for j := range payload {
			payload[j] = byte(r.Uint32())
		}
		want := make([]byte, h.Len(len(payload))+r.IntN(8))
		n0, err := refPatchUC(h, want, payload)
		if err != nil {
			t.Fatal(err)
		}
		got := make([]byte, len(want))
		for j := range got {
			got[j] = byte(r.Uint32()) // stale bytes must not leak
		}
		n, err := h.Encode(got, payload)
		if err != nil || n != n0 || !bytes.Equal(got[:n], want[:n0]) {
			t.Fatalf("%#x: Encode = %d, %v\n got % x\nwant % x", byte(op), n, err, got[:n], want[:n0])
		}
		// In place, as host/worker.go sendUC encodes.
		inplace := make([]byte, n)
		copy(inplace[h.PayloadOffset():], payload)
		if m, err := h.Encode(inplace, inplace[h.PayloadOffset():h.PayloadOffset()+len(payload)]); err != nil || !bytes.Equal(inplace[:m], want[:n0]) {
			t.Fatalf("%#x: in-place Encode differs", byte(op))
		}
		if !CheckICRC(got[:n]) || refICRC(t, got[:n]) != binary.LittleEndian.Uint32(got[n-ICRCLen:]) {
			t.Fatalf("%#x: ICRC", byte(op))
		}
	}
}

func TestUCEncodeParseRoundTrip(t *testing.T) {
	for _, op := range ucOps {
		for _, plen := range []int{0, 1, 2, 3, 4, 5, 255, 256, 1024} {
			payload := make([]byte, plen)
			for i := range payload {
				payload[i] = byte(i*5 + plen)
			}
			f := testFrame(t, op, payload)
			if want := HeadersLen + op.HeaderLen() + plen + PadFor(plen) + ICRCLen; len(f) != want {
				t.Fatalf("%#x/%d: length %d want %d", byte(op), plen, len(f), want)
			}
			var fr Frame
			if err := fr.Parse(f); err != nil {
				t.Fatalf("%#x/%d: Parse: %v", byte(op), plen, err)
			}
			if !bytes.Equal(fr.Payload, payload) || fr.BTH.Opcode() != op || fr.BTH.PSN() != 0xFFFFFE ||
				fr.BTH.DestQP() != 0x123456 || fr.Pad != PadFor(plen) || fr.End != len(f) {
				t.Fatalf("%#x/%d: parsed %+v", byte(op), plen, fr)
			}
			if (fr.RETH != nil) != op.HasRETH() || fr.AETH != nil || (fr.ImmDt != nil) != op.HasImm() {
				t.Fatalf("%#x: extension header presence wrong", byte(op))
			}
			if fr.RETH != nil && (fr.RETH.VA() != 0x1122334455667788 || fr.RETH.RKey() != 0xCAFEBABE || fr.RETH.DMALength() != 4000) {
				t.Fatalf("%#x: RETH wrong", byte(op))
			}
			if fr.ImmDt != nil && fr.ImmDt.Imm() != 0xDEADBEEF {
				t.Fatalf("%#x: ImmDt wrong", byte(op))
			}
			if off, end, err := PayloadOffset(f); err != nil || !bytes.Equal(f[off:end], payload) {
				t.Fatalf("%#x: PayloadOffset = %d,%d,%v", byte(op), off, end, err)
			}
			if off, end, ok := RoCE(f).Payload(); !ok || !bytes.Equal(f[off:end], payload) {
				t.Fatalf("%#x: RoCE.Payload = %d,%d,%v", byte(op), off, end, ok)
			}
			if !CheckICRC(f) {
				t.Fatalf("%#x: ICRC", byte(op))
			}
			pl, qp, ok := UCPayload(f)
			if want := op == OpUCSendOnly; ok != want || ok && (!bytes.Equal(pl, payload) || pl == nil || qp != 0x123456) {
				t.Fatalf("%#x/%d: UCPayload = %d bytes, %#x, %v", byte(op), plen, len(pl), qp, ok)
			}
		}
	}
}

// ucMutants returns a UC SEND Only frame and variants that UCPayload (and
// the old copies of it) must judge: every single-byte change with the ICRC
// fixed up or not, truncations, Ethernet padding, RC and other opcodes.
func ucMutants(t testing.TB) [][]byte {
	var out [][]byte
	for _, plen := range []int{0, 1, 3, 4, 9} {
		h := testHeader(OpUCSendOnly)
		h.AckReq = false
		payload := bytes.Repeat([]byte{0xA5}, plen)
		f := testFrame(t, h.Opcode, payload)
		out = append(out, f, append(append([]byte(nil), f...), make([]byte, 9)...))
		for i := range f {
			g := append([]byte(nil), f...)
			g[i] ^= 0x5A
			out = append(out, g)
			if i >= EthLen {
				h := append([]byte(nil), g...)
				_ = SetICRC(h)
				out = append(out, h)
			}
			out = append(out, f[:i])
		}
		for _, op := range append([]Opcode{0x15, 0x2C, 0x64, OpCNP}, rcAndUCOps()...) {
			g := append([]byte(nil), f...)
			g[HeadersLen] = byte(op)
			_ = SetICRC(g)
			out = append(out, g)
		}
		for pad := 0; pad < 4; pad++ { // pad count eating into the BTH
			g := append([]byte(nil), f...)
			BTH(g[HeadersLen:]).SetPadCount(pad)
			_ = SetICRC(g)
			out = append(out, g)
		}
	}
	return out
}

func TestUCPayload(t *testing.T) {
	good := testFrame(t, OpUCSendOnly, []byte("abcde"))
	if pl, qp, ok := UCPayload(good); !ok || string(pl) != "abcde" || qp != 0x123456 {
		t.Fatalf("UCPayload(good) = %q, %#x, %v", pl, qp, ok)
	}
	if pl, _, ok := UCPayload(testFrame(t, OpUCSendOnly, nil)); !ok || pl == nil || len(pl) != 0 {
		t.Fatal("empty payload: want a non-nil empty slice")
	}
	reject := map[string][]byte{
		"bad ICRC":     func() []byte { b := append([]byte(nil), good...); b[len(b)-5] ^= 1; return b }(),
		"truncated":    good[:len(good)-1],
		"short":        good[:HeadersLen+BTHLen],
		"empty":        nil,
		"RC SEND Only": testFrame(t, OpSendOnly, []byte("abcde")),
		"UC Only Imm":  testFrame(t, OpUCSendOnlyImm, []byte("abcde")),
		"UC WRITE":     testFrame(t, OpUCRDMAWriteOnly, []byte("abcde")),
		"UC SEND Last": testFrame(t, OpUCSendLast, []byte("abcde")),
		"not IPv4":     func() []byte { b := append([]byte(nil), good...); b[12] = 0x86; return b }(),
	}
	for name, b := range reject {
		if pl, qp, ok := UCPayload(b); ok || pl != nil || qp != 0 {
			t.Errorf("%s: UCPayload = %q, %#x, %v", name, pl, qp, ok)
		}
	}
	// Exactly the old semantics, on every mutant.
	for i, b := range ucMutants(t) {
		pl, qp, ok := UCPayload(b)
		checkUCPayload(t, fmt.Sprint("mutant ", i), b, pl, qp, ok)
	}
}

// checkUCPayload compares UCPayload's result on b with both old copies.
func checkUCPayload(t *testing.T, name string, b, pl []byte, qp uint32, ok bool) {
	t.Helper()
	bpl, bqp := refUCPayloadBaseline(b)
	if ok != (bpl != nil) || !bytes.Equal(pl, bpl) || qp != bqp || (ok && cap(pl) != cap(bpl)) {
		t.Fatalf("%s: UCPayload = %x, %#x, %v; baseline ucPayload = %x, %#x", name, pl, qp, ok, bpl, bqp)
	}
	if len(b) >= HeadersLen+BTHLen {
		want := BTH(b[HeadersLen:]).DestQP()
		hpl := refUCPayloadHost(b, want)
		if (ok && qp == want) != (hpl != nil) || ok && !bytes.Equal(pl, hpl) {
			t.Fatalf("%s: UCPayload = %x, %v; host ucPayload = %x", name, pl, ok, hpl)
		}
		if refUCPayloadHost(b, want+1) != nil {
			t.Fatalf("%s: host ucPayload accepts another QP", name)
		}
	}
}

// TestRoCEView: the accessors read and write the bytes Encode wrote, and
// Span/Payload agree with the switch's raw-offset parser on every mutant.
func TestRoCEView(t *testing.T) {
	h := testHeader(OpRDMAWriteOnlyImm)
	f := testFrame(t, h.Opcode, []byte("payload"))
	r := RoCE(f)
	e, ip, u, b := r.Ethernet(), r.IPv4(), r.UDP(), r.BTH()
	if e.Dst() != epB.MAC || e.Src() != epA.MAC || e.EtherType() != EtherTypeIPv4 {
		t.Error("Ethernet")
	}
	if ip.Version() != 4 || ip.IHL() != 5 || ip.TOS() != 2 || int(ip.TotalLength()) != len(f)-EthLen || ip.ID() != 7 ||
		!ip.DF() || ip.Fragmented() || ip.TTL() != 64 || ip.Protocol() != IPProtoUDP || !ip.ChecksumOK() ||
		ip.Src() != epA.IP || ip.Dst() != epB.IP {
		t.Errorf("IPv4 view: % x", []byte(ip))
	}
	if u.SrcPort() != SourcePort(17) || u.DstPort() != UDPPort || int(u.Length()) != len(f)-EthLen-IPv4Len || u.Checksum() != 0 {
		t.Errorf("UDP view: % x", []byte(u))
	}
	if b.Opcode() != h.Opcode || b.DestQP() != h.DestQP || b.PSN() != h.PSN {
		t.Error("BTH view")
	}
	if end, ok := r.Span(); !ok || end != len(f) {
		t.Errorf("Span = %d, %v", end, ok)
	}
	// Writing through the views yields what Encode writes for those fields.
	h2 := h
	h2.Src, h2.Dst = epB, epA
	h2.Src.IP, h2.Dst.IP = netip.MustParseAddr("192.0.2.1"), netip.MustParseAddr("198.51.100.7")
	h2.TOS, h2.TTL, h2.ID, h2.SrcPort = 0x03, 9, 0xBEEF, 0xC123
	want := testFrameH(t, h2, []byte("payload"))
	g := RoCE(append([]byte(nil), f...))
	g.Ethernet().SetDst(epA.MAC)
	g.Ethernet().SetSrc(epB.MAC)
	g.IPv4().SetSrc(h2.Src.IP)
	g.IPv4().SetDst(h2.Dst.IP)
	g.IPv4().SetTOS(h2.TOS)
	g.IPv4().SetTTL(h2.TTL)
	g.IPv4().SetID(h2.ID)
	g.UDP().SetSrcPort(h2.SrcPort)
	if g.IPv4().ChecksumOK() {
		t.Error("checksum still valid after rewriting addresses")
	}
	g.IPv4().UpdateChecksum()
	if err := SetICRC(g); err != nil || !bytes.Equal(g, want) {
		t.Fatalf("rewritten frame differs from the encoded one:\n got % x\nwant % x", []byte(g), want)
	}
	g.Ethernet().SetEtherType(0x86DD)
	g.IPv4().SetProtocol(6)
	g.IPv4().SetTotalLength(99)
	g.UDP().SetDstPort(1)
	g.UDP().SetLength(77)
	g.UDP().SetChecksum(0x1234)
	if e := g.Ethernet(); e.EtherType() != 0x86DD || g[12] != 0x86 || g[13] != 0xDD {
		t.Error("SetEtherType")
	}
	if g.IPv4().Protocol() != 6 || g.IPv4().TotalLength() != 99 || g.UDP().DstPort() != 1 || g.UDP().Length() != 77 ||
		g.UDP().Checksum() != 0x1234 || binary.BigEndian.Uint16(g[EthLen+IPv4Len+6:]) != 0x1234 {
		t.Error("setters")
	}
	if _, ok := g.Span(); ok {
		t.Error("Span accepts a non-IPv4 frame")
	}
	ip2 := append(IPv4(nil), ip...)
	ip2[6] = 0x20 // MF
	if !ip2.Fragmented() {
		t.Error("Fragmented")
	}
	ip2[6], ip2[7] = 0x40, 1 // DF, offset 1
	if !ip2.Fragmented() || !ip2.DF() {
		t.Error("Fragmented/DF")
	}
	// UpdateChecksum is SetIPv4Checksum.
	x, y := append([]byte(nil), f...), append([]byte(nil), f...)
	x[EthLen+8]--
	y[EthLen+8]--
	RoCE(x).IPv4().UpdateChecksum()
	if err := SetIPv4Checksum(y); err != nil || !bytes.Equal(x, y) {
		t.Error("UpdateChecksum differs from SetIPv4Checksum")
	}

	for _, op := range rcAndUCOps() {
		for i, m := range roceMutants(t, op) {
			checkRoCEView(t, fmt.Sprintf("%#x mutant %d", byte(op), i), m)
		}
	}
}

func testFrameH(t testing.TB, h FrameHeader, payload []byte) []byte {
	t.Helper()
	buf := make([]byte, h.Len(len(payload)))
	n, err := h.Encode(buf, payload)
	if err != nil {
		t.Fatal(err)
	}
	return buf[:n]
}

// roceMutants returns a frame of opcode op and variants: each header byte
// changed, truncations, Ethernet padding, every UDP length, pad counts
// (with and without payload).
func roceMutants(t testing.TB, op Opcode) [][]byte {
	f := testFrame(t, op, []byte("0123456789abcdef"))
	out := [][]byte{f, append(append([]byte(nil), f...), 1, 2, 3)}
	for ul := 0; ul <= len(f)-EthLen-IPv4Len+2; ul++ {
		g := append([]byte(nil), f...)
		RoCE(g).UDP().SetLength(uint16(ul))
		out = append(out, g)
	}
	for _, e := range [][]byte{testFrame(t, op, nil), testFrame(t, op, []byte{1})} {
		for pad := 0; pad < 4; pad++ {
			g := append([]byte(nil), e...)
			BTH(g[HeadersLen:]).SetPadCount(pad)
			out = append(out, g)
		}
	}
	for i := 0; i < HeadersLen+op.HeaderLen()+2 && i < len(f); i++ {
		for _, x := range []byte{0x01, 0x80, 0xFF} {
			g := append([]byte(nil), f...)
			g[i] ^= x
			out = append(out, g)
		}
		out = append(out, f[:i])
	}
	for pad := 0; pad < 4; pad++ {
		g := append([]byte(nil), f...)
		BTH(g[HeadersLen:]).SetPadCount(pad)
		out = append(out, g)
	}
	return out
}

// checkRoCEView compares RoCE.Span and RoCE.Payload with the switch's
// parser on b, and the INA header bound check for every header length.
func checkRoCEView(t *testing.T, name string, b []byte) {
	t.Helper()
	r := RoCE(b)
	end, spanOK := r.Span()
	off, pend, ok := r.Payload()
	if spanOK && (end > len(b) || end < HeadersLen+BTHLen+ICRCLen) || ok && (!spanOK || off > pend || pend > end) {
		t.Fatalf("%s: Span %d,%v Payload %d,%d,%v out of range (len %d)", name, end, spanOK, off, pend, ok, len(b))
	}
	if spanOK {
		op, pad := r.BTH().Opcode(), r.BTH().PadCount()
		if want := op.Supported() && end-ICRCLen-pad >= HeadersLen+op.HeaderLen(); ok != want {
			t.Fatalf("%s: Payload ok = %v, want %v (opcode %#x)", name, ok, want, byte(op))
		}
	}
	ina, limit, refOK := refSwitchParse(b)
	viewINA := spanOK && inaOpcode(r.BTH().Opcode())
	if refOK != viewINA {
		t.Fatalf("%s: switch parser %v, view %v", name, refOK, viewINA)
	}
	if !refOK {
		return
	}
	for n := 0; n < 48; n++ { // the switch: ina+inahdr.Len > limit -> not INA
		if refFits, viewFits := ina+n <= limit, ok && pend-off >= n; refFits != viewFits {
			t.Fatalf("%s: %d-byte header fits: switch %v, view %v", name, n, refFits, viewFits)
		}
	}
	if ok && (off != ina || pend != limit) {
		t.Fatalf("%s: Payload %d,%d, switch %d,%d", name, off, pend, ina, limit)
	}
}

// TestQPRejectsUC: an RC queue pair drops a UC frame addressed to it, with
// a good ICRC, as malformed, exactly as before Parse knew UC opcodes.
func TestQPRejectsUC(t *testing.T) {
	ca, cb := qpConfigs(1024, 0, 0)
	q, err := NewQP(cb)
	if err != nil {
		t.Fatal(err)
	}
	for _, op := range ucOps {
		h := FrameHeader{Src: ca.Local, Dst: cb.Local, Opcode: op, DestQP: cb.QPN, PSN: 0, RKey: cb.RKey, DMALength: 4}
		f := testFrameH(t, h, []byte{1, 2, 3, 4})
		before := q.Stats()
		if err := q.Receive(0, f); err != ErrUnsupportedOpcode {
			t.Errorf("%#x: Receive = %v, want ErrUnsupportedOpcode", byte(op), err)
		}
		s := q.Stats()
		if s.RxMalformed != before.RxMalformed+1 || s.RxPackets != before.RxPackets+1 || s.MessagesReceived != 0 || s.RxUnsupported != 0 {
			t.Errorf("%#x: stats %+v", byte(op), s)
		}
		if _, ok := q.PollCompletion(); ok {
			t.Errorf("%#x: completion", byte(op))
		}
		// Even with the TVer or pad broken, the opcode is what is reported.
		g := append([]byte(nil), f...)
		g[HeadersLen+1] |= 0x3F
		_ = SetICRC(g)
		if err := q.Receive(0, g); err != ErrUnsupportedOpcode {
			t.Errorf("%#x bad TVer: Receive = %v, want ErrUnsupportedOpcode", byte(op), err)
		}
	}
	if q.ExpectedPSN() != 0 || q.State() != StateRTS {
		t.Error("UC frames moved the responder")
	}
}

// TestDecodePcapUC: the capture decoder prints UC SEND Only frames exactly
// as before (the lines were recorded with the previous version).
func TestDecodePcapUC(t *testing.T) {
	var frames [][]byte
	for _, n := range []int{0, 5, 32} {
		h := testHeader(OpUCSendOnly)
		h.AckReq = false
		h.PSN = uint32(n)
		buf := make([]byte, h.Len(n)+6)
		p := make([]byte, n)
		for i := range p {
			p[i] = byte(i)
		}
		m, _ := h.Encode(buf, p)
		frames = append(frames, buf[:m])
		if n == 5 {
			frames = append(frames, buf) // Ethernet padding
			bad := append([]byte(nil), buf[:m]...)
			bad[m-5] ^= 1
			frames = append(frames, bad)
		}
	}
	path := filepath.Join(t.TempDir(), "uc.pcap")
	testenv.WritePcap(t, path, frames)
	r, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	var out bytes.Buffer
	if _, err := DecodePcap(r, &out, func([]byte) string { return "p" }); err != nil {
		t.Fatal(err)
	}
	const want = `1 10.0.0.1:57236 -> 10.0.0.2:4791 RRoCE UC SEND Only QP=0x123456 PSN=0 len=0 ICRC ok
2 10.0.0.1:57236 -> 10.0.0.2:4791 RRoCE UC SEND Only QP=0x123456 PSN=5 len=5 {p} ICRC ok
3 10.0.0.1:57236 -> 10.0.0.2:4791 RRoCE UC SEND Only QP=0x123456 PSN=5 len=5 {p} ICRC ok
4 10.0.0.1:57236 -> 10.0.0.2:4791 RRoCE UC SEND Only QP=0x123456 PSN=5 len=5 {p} ICRC BAD(got 0xdc66fcdc want 0xab61cc4a)
5 10.0.0.1:57236 -> 10.0.0.2:4791 RRoCE UC SEND Only QP=0x123456 PSN=32 len=32 {p} ICRC ok
5 frames: 5 RoCEv2, 0 other, 1 bad ICRC, 0 malformed
  UC SEND Only                     5
`
	if got := out.String(); got != want {
		t.Fatalf("DecodePcap output changed:\n%s\nwant:\n%s", got, want)
	}
}

func TestUCZeroAllocs(t *testing.T) {
	h := testHeader(OpUCSendOnly)
	payload := make([]byte, 1024)
	buf := make([]byte, 2048)
	n, _ := h.Encode(buf, payload)
	f := buf[:n]
	var fr Frame
	var sink uint32
	checks := map[string]func(){
		"Encode UC":      func() { h.PSN++; _, _ = h.Encode(buf, payload) },
		"Parse UC":       func() { _ = fr.Parse(f) },
		"UCPayload":      func() { _, q, _ := UCPayload(f); sink += q },
		"UCPayload bad":  func() { _, q, _ := UCPayload(f[:100]); sink += q },
		"RoCE.Span":      func() { e, _ := RoCE(f).Span(); sink += uint32(e) },
		"RoCE.Payload":   func() { o, _, _ := RoCE(f).Payload(); sink += uint32(o) },
		"IPv4 accessors": func() { ip := RoCE(f).IPv4(); sink += uint32(ip.Src().As4()[0]) + uint32(ip.Dst().BitLen()) },
		"IPv4 rewrite":   func() { ip := RoCE(f).IPv4(); ip.SetSrc(epB.IP); ip.SetDst(epA.IP); ip.UpdateChecksum() },
		"Ethernet":       func() { e := RoCE(f).Ethernet(); e.SetDst(e.Src()); sink += uint32(e.EtherType()) },
	}
	for name, fn := range checks {
		if a := testing.AllocsPerRun(100, fn); a != 0 {
			t.Errorf("%s allocates %v per run", name, a)
		}
	}
	_ = sink
}

// templateMatches checks that t, h's template for payloads of plen bytes,
// writes the bytes h.EncodeDeferred writes with PSN psn, both in place
// around the same payload in buffers of the same stale bytes, and the same
// frame once each is sealed.
func templateMatches(tb testing.TB, h FrameHeader, plen int, psn uint32, r *rand.Rand) {
	tb.Helper()
	tp, err := h.Template(plen)
	if err != nil {
		if _, err2 := h.EncodeDeferred(make([]byte, 1<<17), make([]byte, plen)); err2 == nil {
			tb.Fatalf("%#x, %d bytes: Template: %v, but EncodeDeferred encodes it", byte(h.Opcode), plen, err)
		}
		if tp.PayloadLen() != -1 || tp.EncodeDeferred(make([]byte, 1<<17), psn) != 0 {
			tb.Fatalf("failed Template encodes")
		}
		return
	}
	if tp.PayloadLen() != plen {
		tb.Fatalf("PayloadLen %d, want %d", tp.PayloadLen(), plen)
	}
	h.PSN = psn
	want := make([]byte, h.Len(plen)+r.IntN(8))
	for j := range want {
		want[j] = byte(r.Uint32()) // stale bytes: the pad must be cleared
	}
	got := append([]byte(nil), want...)
	off := h.PayloadOffset()
	n0, err := h.EncodeDeferred(want, want[off:off+plen])
	if err != nil {
		tb.Fatal(err)
	}
	n := tp.EncodeDeferred(got, psn)
	if n != n0 || !bytes.Equal(got, want) {
		tb.Fatalf("%#x, %d bytes, PSN %#x: template wrote %d bytes\n got % x\nwant % x", byte(h.Opcode), plen, psn, n, got[:n], want[:n0])
	}
	SealICRC(got[:n])
	SealICRC(want[:n0])
	if !bytes.Equal(got, want) || !CheckICRC(got[:n]) {
		tb.Fatalf("%#x: sealed frames differ", byte(h.Opcode))
	}
	if tp.EncodeDeferred(got[:n-1], psn) != 0 {
		tb.Fatalf("a short buffer took a frame")
	}
}

// TestTemplate: a template writes what EncodeDeferred writes, for random
// headers, opcodes, payload lengths (every pad) and PSNs, and the zero
// Template writes nothing.
func TestTemplate(t *testing.T) {
	r := rand.New(rand.NewPCG(8, 25))
	ops := rcAndUCOps()
	for i := 0; i < 3000; i++ {
		op := ops[r.IntN(len(ops))]
		if i%3 == 0 {
			op = OpUCSendOnly // what the workers send
		}
		templateMatches(t, randHeader(r, op), r.IntN(1100), r.Uint32(), r)
	}
	var zero Template
	if zero.PayloadLen() != -1 || zero.EncodeDeferred(make([]byte, 100), 1) != 0 {
		t.Fatal("the zero Template encodes")
	}
	h := randHeader(r, OpUCSendOnly)
	tp, _ := h.Template(286)
	buf := make([]byte, h.Len(286))
	if a := testing.AllocsPerRun(100, func() { tp.EncodeDeferred(buf, 7) }); a != 0 {
		t.Fatalf("%v allocations", a)
	}
}

// FuzzTemplate: TestTemplate for any header a seed makes, any opcode byte,
// payload length and PSN.
func FuzzTemplate(f *testing.F) {
	f.Add(uint64(1), byte(OpUCSendOnly), uint16(286), uint32(5))
	f.Add(uint64(2), byte(OpRDMAWriteOnlyImm), uint16(3), uint32(0xFFFFFF))
	f.Fuzz(func(t *testing.T, seed uint64, op byte, plen uint16, psn uint32) {
		r := rand.New(rand.NewPCG(seed, 26))
		templateMatches(t, randHeader(r, Opcode(op)), int(plen)%70000, psn, r)
	})
}
