package rdma

import (
	"bytes"
	"encoding/binary"
	"io"
	"net/netip"
	"testing"
	"time"

	"github.com/gopacket/gopacket"
	"github.com/gopacket/gopacket/layers"
	"github.com/gopacket/gopacket/pcapgo"
)

// seedFrames adds one frame of every opcode, RC and UC, to a fuzz corpus.
func seedFrames(f *testing.F) {
	for _, op := range rcAndUCOps() {
		var p []byte
		if op != OpAck {
			p = []byte("seed payload")
		}
		f.Add(testFrame(f, op, p))
	}
	f.Add([]byte{})
}

// FuzzParseFrame: Parse never panics; a frame it accepts has a payload inside
// the frame, consistent with PayloadOffset and with the gopacket decoder;
// re-encoding the parsed fields reproduces the frame up to masked and
// reserved bits.
func FuzzParseFrame(f *testing.F) {
	seedFrames(f)
	f.Fuzz(func(t *testing.T, b []byte) {
		var fr Frame
		icrcOK := CheckICRC(b)
		if c, err := ComputeICRC(b); err == nil && icrcOK != (c == binary.LittleEndian.Uint32(b[fr.endOr(b)-4:])) {
			t.Fatal("CheckICRC disagrees with ComputeICRC")
		}
		if err := fr.Parse(b); err != nil {
			return
		}
		off, end, err := PayloadOffset(b)
		if err != nil || !bytes.Equal(b[off:end], fr.Payload) || end+fr.Pad+ICRCLen != fr.End || fr.End > len(b) {
			t.Fatalf("PayloadOffset %d,%d,%v disagrees with Parse", off, end, err)
		}
		op := fr.BTH.Opcode()
		h := FrameHeader{
			Src: Endpoint{IP: addr4(fr.IPv4[12:16])}, Dst: Endpoint{IP: addr4(fr.IPv4[16:20])},
			SrcPort: binary.BigEndian.Uint16(fr.UDP[0:]), TOS: fr.IPv4[1], TTL: fr.IPv4[8],
			ID: binary.BigEndian.Uint16(fr.IPv4[4:]), Opcode: op, SolicitedEvent: fr.BTH.SolicitedEvent(),
			PKey: fr.BTH.PKey(), BECN: fr.BTH.BECN(), DestQP: fr.BTH.DestQP(), AckReq: fr.BTH.AckReq(), PSN: fr.BTH.PSN(),
		}
		copy(h.Src.MAC[:], b[6:12])
		copy(h.Dst.MAC[:], b[0:6])
		if fr.RETH != nil {
			h.VA, h.RKey, h.DMALength = fr.RETH.VA(), fr.RETH.RKey(), fr.RETH.DMALength()
		}
		if fr.AETH != nil {
			h.Syndrome, h.MSN = fr.AETH.Syndrome(), fr.AETH.MSN()
		}
		if fr.ImmDt != nil {
			h.Imm = fr.ImmDt.Imm()
		}
		if h.TTL == 0 || h.PKey == 0 {
			return // zero means "default" to the encoder
		}
		buf := make([]byte, h.Len(len(fr.Payload)))
		n, err := h.Encode(buf, fr.Payload)
		if err != nil {
			t.Fatalf("re-encode: %v", err)
		}
		var g Frame
		if err := g.Parse(buf[:n]); err != nil {
			t.Fatalf("re-encoded frame does not parse: %v", err)
		}
		if g.BTH.PSN() != fr.BTH.PSN() || g.BTH.Opcode() != op || !bytes.Equal(g.Payload, fr.Payload) || !CheckICRC(buf[:n]) {
			t.Fatal("re-encoded frame differs")
		}
		// The gopacket decoder agrees.
		pkt := gopacket.NewPacket(b, layers.LayerTypeEthernet, gopacket.NoCopy)
		if l, ok := pkt.Layer(LayerTypeBTH).(*BTHLayer); ok {
			if l.Opcode != op || l.PSN != fr.BTH.PSN() || !bytes.Equal(l.LayerPayload(), fr.Payload) {
				t.Fatalf("gopacket BTH %v/%d payload %d bytes, Parse %v/%d %d bytes", l.Opcode, l.PSN, len(l.LayerPayload()), op, fr.BTH.PSN(), len(fr.Payload))
			}
		}
	})
}

// endOr returns the end of the UDP datagram of b if Parse would find one.
func (f *Frame) endOr(b []byte) int {
	end, err := roceSpan(b)
	if err != nil {
		return ICRCLen
	}
	return end
}

// FuzzLayers feeds arbitrary bytes to every gopacket decoder of the
// package, directly and through a full Ethernet decode.
func FuzzLayers(f *testing.F) {
	seedFrames(f)
	f.Fuzz(func(t *testing.T, b []byte) {
		df := gopacket.NilDecodeFeedback
		var bth BTHLayer
		if len(b) > HeadersLen {
			if err := bth.DecodeFromBytes(b[HeadersLen:], df); err == nil {
				if len(bth.Contents) != BTHLen || len(bth.Payload) > len(b) {
					t.Fatal("BTH layer slices out of range")
				}
			}
		}
		_ = bth.DecodeFromBytes(b, df)
		var r RETHLayer
		_ = r.DecodeFromBytes(b, df)
		var a AETHLayer
		_ = a.DecodeFromBytes(b, df)
		var i ImmDtLayer
		_ = i.DecodeFromBytes(b, df)
		for _, lt := range []gopacket.LayerType{layers.LayerTypeEthernet, LayerTypeBTH, LayerTypeRETH, LayerTypeAETH, LayerTypeImmDt} {
			_ = gopacket.NewPacket(b, lt, gopacket.NoCopy).Layers()
		}
	})
}

// FuzzResponder feeds an arbitrary sequence of packets to a responder: real
// requester packets (in any order, repeated, dropped), mutated packets and
// crafted packets, all with valid ICRCs. The responder must never panic,
// never execute a PSN twice or out of order, and, when only genuine packets
// were fed, deliver exactly the messages 0, 1, 2, ... in order.
func FuzzResponder(f *testing.F) {
	f.Add([]byte{0, 0, 0, 1, 0, 2, 0, 3, 0, 4, 0, 5, 0, 6, 0, 7})
	f.Add([]byte{0, 1, 0, 0, 0, 1, 3, 0, 0, 2, 0, 2, 0, 3})
	f.Add([]byte{1, 0, 17, 5, 0, 0, 2, 4, 0, 1, 2, 2})
	f.Add([]byte{2, 0, 0, 0, 2, 2, 1, 0, 0, 0, 0, 1})
	f.Fuzz(func(t *testing.T, prog []byte) {
		ca, cb := qpConfigs(256, PSNMask-3, PSNMask-3)
		ca.MaxUnacked = 1 << 12
		ca.SendQueueDepth, cb.SendQueueDepth = 16, 16
		ca.Memory, cb.Memory = make([]byte, 4096), make([]byte, 4096)
		req, err := NewQP(ca)
		if err != nil {
			t.Fatal(err)
		}
		resp, err := NewQP(cb)
		if err != nil {
			t.Fatal(err)
		}
		ops := []WROpcode{WRSend, WRSendImm, WRWriteImm, WRSend}
		for i := 0; i < 8; i++ {
			_ = req.PostSend(WorkRequest{ID: uint64(i), Op: ops[i%4], Data: msg(i, 4+i*100), Imm: uint32(i), RemoteAddr: 0, RKey: 0xB})
		}
		buf := make([]byte, req.MaxFrameLen())
		var pkts [][]byte
		for {
			n := req.PollTransmit(0, buf)
			if n == 0 {
				break
			}
			pkts = append(pkts, append([]byte(nil), buf[:n]...))
		}
		genuine := true
		next := 0 // next expected message id (genuine runs)
		var lastMSN uint32
		for i := 0; i+1 < len(prog); i += 2 {
			op, arg := prog[i]%4, int(prog[i+1])
			var frame []byte
			switch op {
			case 0: // a genuine packet
				frame = pkts[arg%len(pkts)]
			case 1: // a genuine packet with one byte changed, ICRC fixed up
				if i+3 >= len(prog) {
					return
				}
				frame = append([]byte(nil), pkts[arg%len(pkts)]...)
				pos := HeadersLen + int(prog[i+2])%(len(frame)-HeadersLen-ICRCLen)
				frame[pos] ^= prog[i+3] | 1
				_ = SetICRC(frame)
				i += 2
				genuine = false
			case 2: // a crafted packet near the expected PSN
				if i+3 >= len(prog) {
					return
				}
				h := FrameHeader{Src: epA, Dst: epB, DestQP: cb.QPN, Opcode: Opcode(prog[i+2] % 12),
					PSN: PSNAdd(resp.ExpectedPSN(), int(int8(prog[i+3]))%4), AckReq: arg&1 != 0,
					RKey: 0xB, VA: uint64(arg), DMALength: uint32(arg % 300)}
				payload := make([]byte, arg%260)
				frame = make([]byte, h.Len(len(payload)))
				n, err := h.Encode(frame, payload)
				if err != nil {
					t.Fatal(err)
				}
				frame = frame[:n]
				i += 2
				genuine = false
			case 3: // the responder transmits its acknowledgements
				for resp.PollTransmit(0, buf) > 0 {
				}
				continue
			}
			before := resp.ExpectedPSN()
			psn := BTH(frame[HeadersLen:]).PSN()
			_ = resp.Receive(0, frame)
			after := resp.ExpectedPSN()
			if d := PSNDiff(after, before); d != 0 && (d != 1 || psn != before) {
				t.Fatalf("expected PSN moved %d → %d on PSN %d", before, after, psn)
			}
			recvs := 0
			for {
				c, ok := resp.PollCompletion()
				if !ok {
					break
				}
				if c.Opcode != CompRecv && c.Opcode != CompRecvWriteImm {
					continue
				}
				recvs++
				if after == before {
					t.Fatal("message delivered by a packet that executed nothing")
				}
				if genuine {
					id := int(c.Imm)
					if c.Opcode == CompRecv && ops[next%4] == WRSend {
						id = int(binary.BigEndian.Uint32(c.Data))
					}
					if id != next {
						t.Fatalf("delivered message %d, want %d", id, next)
					}
					if c.Opcode == CompRecv && !bytes.Equal(c.Data, msg(next, 4+next*100)) {
						t.Fatalf("message %d corrupted", next)
					}
				}
				next++
			}
			if recvs > 1 {
				t.Fatal("one packet delivered two messages")
			}
			if resp.msn != lastMSN && resp.msn != (lastMSN+1)&PSNMask {
				t.Fatal("MSN jumped")
			}
			lastMSN = resp.msn
		}
	})
}

func addr4(b []byte) netip.Addr { return netip.AddrFrom4([4]byte(b)) }

// FuzzDecodePcap feeds arbitrary bytes to the capture decoder: it must
// return an error or a summary whose counts add up, never panic.
func FuzzDecodePcap(f *testing.F) {
	var w bytes.Buffer
	pw := pcapgo.NewWriter(&w)
	_ = pw.WriteFileHeader(65536, layers.LinkTypeEthernet)
	for i, op := range allOps {
		fr := testFrame(f, op, []byte("x"))
		_ = pw.WritePacket(gopacket.CaptureInfo{Timestamp: time.Unix(int64(i), 0), CaptureLength: len(fr), Length: len(fr)}, fr)
	}
	f.Add(w.Bytes())
	f.Add([]byte{0x0A, 0x0D, 0x0D, 0x0A})
	f.Fuzz(func(t *testing.T, b []byte) {
		sum, err := DecodePcap(bytes.NewReader(b), io.Discard, func(p []byte) string { return string(p[:1]) })
		if err != nil {
			return
		}
		if sum.RoCE+sum.NonRoCE != sum.Frames || sum.BadICRC+sum.Malformed > sum.RoCE {
			t.Fatalf("inconsistent summary %+v", sum)
		}
	})
}

// seedUC adds UC SEND Only frames (empty, short, padded, Ethernet-padded,
// bad ICRC) and their neighbours to a fuzz corpus.
func seedUC(f *testing.F) {
	for _, p := range []string{"", "seed", "seed payload!"} {
		g := testFrame(f, OpUCSendOnly, []byte(p))
		f.Add(g)
		f.Add(append(append([]byte(nil), g...), 0, 0, 0, 0, 0, 0))
	}
	bad := testFrame(f, OpUCSendOnly, []byte("seed"))
	bad[len(bad)-1] ^= 1
	f.Add(bad)
	for _, op := range []Opcode{OpSendOnly, OpUCSendOnlyImm, OpUCRDMAWriteOnlyImm} {
		f.Add(testFrame(f, op, []byte("seed")))
	}
}

// FuzzUCPayload: UCPayload never panics, agrees exactly with the two copies
// it replaces (host and baseline ucPayload), and with Parse and CheckICRC:
// what it accepts is a UC SEND Only with a good ICRC whose payload lies in
// the frame, and every UC SEND Only that Parse accepts with a good ICRC it
// accepts with the same payload.
func FuzzUCPayload(f *testing.F) {
	seedUC(f)
	f.Fuzz(func(t *testing.T, b []byte) {
		pl, qp, ok := UCPayload(b)
		checkUCPayload(t, "fuzz", b, pl, qp, ok)
		if ok {
			if !CheckICRC(b) || Opcode(b[HeadersLen]) != OpUCSendOnly || qp != BTH(b[HeadersLen:]).DestQP() ||
				len(pl) > len(b)-HeadersLen-BTHLen-ICRCLen || (len(pl) > 0 && &pl[0] != &b[HeadersLen+BTHLen]) {
				t.Fatal("UCPayload accepted a frame it should not have, or returned a stray slice")
			}
		} else if pl != nil || qp != 0 {
			t.Fatal("UCPayload returned data with ok == false")
		}
		var fr Frame
		if fr.Parse(b) == nil && fr.BTH.Opcode() == OpUCSendOnly && CheckICRC(b) && (!ok || !bytes.Equal(pl, fr.Payload)) {
			t.Fatalf("Parse accepts a UC SEND Only (%d-byte payload) that UCPayload does not (%v)", len(fr.Payload), ok)
		}
	})
}

// FuzzRoCEView: RoCE.Span and RoCE.Payload never panic, agree with the
// switch's raw-offset parser (see checkRoCEView), and accept every frame
// Parse accepts, with the same bounds as PayloadOffset; the header views of
// a frame Span accepts can be read, and CheckSealedSpan of its end agrees
// with CheckSealed, sealed or not.
func FuzzRoCEView(f *testing.F) {
	seedFrames(f)
	seedUC(f)
	f.Fuzz(func(t *testing.T, b []byte) {
		checkRoCEView(t, "fuzz", b)
		r := RoCE(b)
		end, spanOK := r.Span()
		off, pend, ok := r.Payload()
		if spanOK {
			for _, sealed := range []bool{false, true} {
				if got, want := r.CheckSealedSpan(end, sealed), CheckSealed(b, sealed); got != want {
					t.Fatalf("CheckSealedSpan(%d, %v) = %v, CheckSealed %v", end, sealed, got, want)
				}
			}
			e, ip, u, bth := r.Ethernet(), r.IPv4(), r.UDP(), r.BTH()
			_, _, _ = e.Dst(), e.Src(), ip.Src().Compare(ip.Dst())
			if int(u.Length()) != end-EthLen-IPv4Len || ip.Version() != 4 || ip.IHL() != 5 || u.DstPort() != UDPPort || bth.PadCount() > 3 {
				t.Fatal("Span accepted inconsistent headers")
			}
		}
		var fr Frame
		if fr.Parse(b) != nil {
			return
		}
		poff, pe, err := PayloadOffset(b)
		if !spanOK || end != fr.End || !ok || err != nil || off != poff || pend != pe {
			t.Fatalf("Parse accepts (end %d, payload %d:%d) what the view does not (%d,%v; %d:%d,%v)", fr.End, poff, pe, end, spanOK, off, pend, ok)
		}
	})
}
