package sw

import (
	"bytes"
	"encoding/binary"
	"math/rand/v2"
	"net/netip"
	"testing"

	"github.com/inabox/inabox/rdma"
	"github.com/inabox/inabox/switch/inahdr"
)

// The references below are the switch's code before it read frames
// through rdma's header views (rdma.RoCE, Opcode methods), copied verbatim
// but for their names and the ref prefix on the offsets, so that the tests
// pin the views to the old byte offsets.

const (
	refOffIP   = 14
	refOffUDP  = refOffIP + 20
	refOffBTH  = refOffUDP + 8
	refMinRoCE = refOffBTH + rdma.BTHLen
)

func refINAExt(op byte) int {
	switch op {
	case 0x04, byte(rdma.OpUCSendOnly): // SEND ONLY
		return rdma.BTHLen
	case 0x05, byte(rdma.OpUCSendOnlyImm): // SEND ONLY with immediate
		return rdma.BTHLen + rdma.ImmDtLen
	case 0x0A, byte(rdma.OpUCRDMAWriteOnly): // RDMA WRITE ONLY
		return rdma.BTHLen + rdma.RETHLen
	case 0x0B, byte(rdma.OpUCRDMAWriteOnlyImm): // RDMA WRITE ONLY with immediate
		return rdma.BTHLen + rdma.RETHLen + rdma.ImmDtLen
	}
	return -1
}

// refParse is the header part of pipeline.go parse: the INA header, its
// offset and the UC flag, or nil.
func refParse(d []byte) (hdr inahdr.Header, ina int, uc bool) {
	if len(d) < refMinRoCE || d[12] != 0x08 || d[13] != 0x00 || d[refOffIP] != 0x45 || d[refOffIP+9] != 17 ||
		binary.BigEndian.Uint16(d[refOffUDP+2:]) != rdma.UDPPort {
		return nil, 0, false
	}
	ulen := int(binary.BigEndian.Uint16(d[refOffUDP+4:]))
	end := refOffUDP + ulen
	if end > len(d) || ulen < 8+rdma.BTHLen+rdma.ICRCLen {
		return nil, 0, false
	}
	op := d[refOffBTH]
	ina = refOffBTH + refINAExt(op)
	if ina == refOffBTH-1 {
		return nil, 0, false
	}
	pad := int(d[refOffBTH+1]>>4) & 3
	limit := end - rdma.ICRCLen - pad
	if ina+inahdr.Len > limit || d[ina] != inahdr.Version || d[ina+1]&inahdr.FlagBypass != 0 {
		return nil, 0, false
	}
	return inahdr.Header(d[ina:limit]), ina, op == byte(rdma.OpUCSendOnly)
}

func refIPChecksum(ip []byte) {
	ip[10], ip[11] = 0, 0
	var sum uint32
	for i := 0; i < 20; i += 2 {
		sum += uint32(ip[i])<<8 | uint32(ip[i+1])
	}
	for sum > 0xFFFF {
		sum = sum&0xFFFF + sum>>16
	}
	binary.BigEndian.PutUint16(ip[10:], ^uint16(sum))
}

func refTrimFrame(d []byte, ina int) []byte {
	n := ina + inahdr.Len + rdma.ICRCLen
	if n > len(d) {
		return d
	}
	d = d[:n]
	inahdr.Header(d[ina:]).SetCount(0)
	d[refOffBTH+1] &^= 0x30 // pad count 0 (the INA header is 4-byte aligned)
	binary.BigEndian.PutUint16(d[refOffIP+2:], uint16(n-refOffIP))
	binary.BigEndian.PutUint16(d[refOffUDP+4:], uint16(n-refOffUDP))
	refIPChecksum(d[refOffIP : refOffIP+20])
	return d
}

func refApplyRewrite(d []byte, rw *Rewrite) {
	if len(d) < refMinRoCE {
		return
	}
	copy(d[0:6], rw.DstMAC[:])
	copy(d[6:12], rw.SrcMAC[:])
	if rw.SrcIP.Is4() {
		a := rw.SrcIP.As4()
		copy(d[refOffIP+12:], a[:])
	}
	if rw.DstIP.Is4() {
		a := rw.DstIP.As4()
		copy(d[refOffIP+16:], a[:])
	}
	d[refOffBTH+5], d[refOffBTH+6], d[refOffBTH+7] = byte(rw.DstQP>>16), byte(rw.DstQP>>8), byte(rw.DstQP)
	refIPChecksum(d[refOffIP : refOffIP+20])
}

// refEgressUC is egress.go EgressUC without the switch (rw given).
func refEgressUC(frame []byte, rw *Rewrite) {
	if len(frame) < refMinRoCE {
		return
	}
	if rw != nil {
		refApplyRewrite(frame, rw)
	}
	bth := rdma.BTH(frame[refOffBTH:])
	bth.SetOpcode(rdma.Opcode(byte(bth.Opcode())&0x1F | 0x20))
	bth.SetAckReq(false)
	if ina := refOffBTH + refINAExt(frame[refOffBTH]); ina >= refOffBTH && ina+inahdr.Len <= len(frame) {
		bth.SetPSN(inahdr.Header(frame[ina:]).Chunk() & 0xFFFFFF)
	}
	_ = rdma.SetICRC(frame)
}

// refCtlHeader is the former freeina_node.go's ctlHeader (control QP qpn).
func refCtlHeader(b []byte, qpn uint32) inahdr.Header {
	if len(b) < refMinRoCE+inahdr.Len+rdma.ICRCLen || b[12] != 0x08 || b[13] != 0 || b[refOffIP+9] != 17 ||
		b[refOffUDP+2] != 0x12 || b[refOffUDP+3] != 0xB7 {
		return nil
	}
	op := b[refOffBTH]
	if op != 0x04 && op != byte(rdma.OpUCSendOnly) {
		return nil
	}
	if rdma.BTH(b[refOffBTH:]).DestQP() != qpn {
		return nil
	}
	h := inahdr.Header(b[refOffBTH+rdma.BTHLen:])
	if h[0] != inahdr.Version || h.Flags()&0x80 == 0 {
		return nil
	}
	return h
}

// refPlainDst is forward.go's test for ipv4_lpm and the address it looks
// up.
func refPlainDst(d []byte) (netip.Addr, bool) {
	if len(d) >= refOffUDP && d[12] == 0x08 && d[13] == 0 && d[refOffIP]>>4 == 4 {
		return netip.AddrFrom4([4]byte(d[refOffIP+16 : refOffIP+20])), true
	}
	return netip.Addr{}, false
}

// viewMutants returns frames of every INA opcode and of others, RC and UC,
// control frames, and variants of each: every header byte changed,
// truncations, every UDP length near the real one, pad counts, Ethernet
// padding.
func viewMutants(t testing.TB, r *rand.Rand) [][]byte {
	var base [][]byte
	for _, op := range []byte{0x04, 0x05, 0x0A, 0x0B, byte(rdma.OpUCSendOnly), byte(rdma.OpUCSendOnlyImm), byte(rdma.OpUCRDMAWriteOnly), byte(rdma.OpUCRDMAWriteOnlyImm), 0x00, 0x06, 0x11, 0x10, 0x81, 0x64} {
		p := workerPkt(1, 2, 0x123456, 1, []int32{1, -2, 3})
		p.opcode, p.psn = op, 77
		base = append(base, p.build())
	}
	for _, op := range []byte{0x04, byte(rdma.OpUCSendOnly)} {
		p := workerPkt(1, 2, 0, 0, nil)
		p.opcode, p.qp = op, DefaultCtlQPN
		p.meta = inahdr.Ctl{Op: inahdr.CtlAlloc, Job: 1, AllReduce: 2, Want: 5, Chunks: 9}.Meta()
		base = append(base, p.build())
	}
	var out [][]byte
	for _, f := range base {
		out = append(out, f, append(append([]byte(nil), f...), 0, 0, 0, 0, 0, 0))
		for i := 0; i < len(f) && i < refOffBTH+rdma.MaxTransportHeadersLen+inahdr.Len; i++ {
			for _, x := range []byte{0x01, 0x10, 0x80, 0xFF, byte(r.Uint32())} {
				g := append([]byte(nil), f...)
				g[i] ^= x
				out = append(out, g)
			}
			out = append(out, append([]byte(nil), f[:i]...))
		}
		ulen := int(binary.BigEndian.Uint16(f[refOffUDP+4:]))
		for ul := ulen - 30; ul <= ulen+4; ul++ {
			g := append([]byte(nil), f...)
			binary.BigEndian.PutUint16(g[refOffUDP+4:], uint16(ul))
			out = append(out, g)
		}
		for pad := 0; pad < 4; pad++ {
			g := append([]byte(nil), f...)
			g[refOffBTH+1] = g[refOffBTH+1]&^0x30 | byte(pad)<<4
			out = append(out, g)
		}
	}
	return out
}

// TestViewsMatchOffsets: parse, trimming, the egress rewrite, EgressUC,
// control-frame recognition and the LPM address read through rdma's views
// give exactly what the old offset code gave, on valid and mutated frames
// of every opcode.
func TestViewsMatchOffsets(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 9))
	s := newTestSwitch(t, 64)
	rws := []*Rewrite{
		{SrcMAC: mac(100), DstMAC: mac(7), SrcIP: ip(100), DstIP: ip(7), DstQP: 0xABCDEF},
		{SrcMAC: mac(1), DstMAC: mac(2), DstQP: 0x123}, // no IP rewrite
	}
	var nINA, nCtl int
	for i, f := range viewMutants(t, r) {
		var m pmeta
		s.parse(&Frame{Data: f, InPort: -1}, &m)
		hdr, ina, uc := refParse(f)
		if (m.pkt.hdr == nil) != (hdr == nil) || hdr != nil && (m.pkt.ina != ina || m.pkt.uc != uc || len(m.pkt.hdr) != len(hdr)) {
			t.Fatalf("frame %d: parse ina %d uc %v len %d, offsets %d %v %d (% x)", i, m.pkt.ina, m.pkt.uc, len(m.pkt.hdr), ina, uc, len(hdr), f)
		}
		if got, want := ctlHeader(f, DefaultCtlQPN), refCtlHeader(f, DefaultCtlQPN); (got == nil) != (want == nil) || got != nil && &got[0] != &want[0] {
			t.Fatalf("frame %d: ctlHeader %v, offsets %v (% x)", i, got != nil, want != nil, f)
		} else if got != nil {
			nCtl++
		}
		if hdr != nil {
			nINA++
		}
		if len(f) >= rdma.EthLen {
			got, gok := netip.Addr{}, false
			if len(f) >= rdma.EthLen+rdma.IPv4Len && rdma.Ethernet(f).EtherType() == rdma.EtherTypeIPv4 && rdma.RoCE(f).IPv4().Version() == 4 {
				got, gok = rdma.RoCE(f).IPv4().Dst(), true
			}
			if want, wok := refPlainDst(f); got != want || gok != wok {
				t.Fatalf("frame %d: LPM address %v %v, offsets %v %v", i, got, gok, want, wok)
			}
		}
		if hdr != nil {
			a, b := append([]byte(nil), f...), append([]byte(nil), f...)
			if got, want := trimFrame(a, ina), refTrimFrame(b, ina); !bytes.Equal(got, want) {
				t.Fatalf("frame %d: trimmed\n% x\nwant\n% x", i, got, want)
			}
		}
		for _, rw := range rws {
			a, b := append([]byte(nil), f...), append([]byte(nil), f...)
			applyRewrite(a, rw)
			refApplyRewrite(b, rw)
			if !bytes.Equal(a, b) {
				t.Fatalf("frame %d: rewrite\n% x\nwant\n% x", i, a, b)
			}
		}
		for k, rw := range append(rws, nil) {
			rid := uint16(10 + k)
			if rw != nil {
				s.SetRewrite(rid, *rw)
			}
			a, b := append([]byte(nil), f...), append([]byte(nil), f...)
			s.EgressUC(a, McastMember{RID: rid, Port: 1})
			refEgressUC(b, rw)
			if !bytes.Equal(a, b) {
				t.Fatalf("frame %d rewrite %d: EgressUC\n% x\nwant\n% x", i, k, a, b)
			}
		}
	}
	if nINA < 1000 || nCtl < 100 {
		t.Fatalf("only %d INA and %d control frames among the mutants", nINA, nCtl)
	}
	t.Logf("%d INA frames, %d control frames", nINA, nCtl)
}
