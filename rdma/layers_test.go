package rdma

import (
	"bytes"
	"net"
	"testing"

	"github.com/gopacket/gopacket"
	"github.com/gopacket/gopacket/layers"
)

func TestGopacketDecode(t *testing.T) {
	for _, op := range rcAndUCOps() {
		payload := []byte("0123456789")
		if op == OpAck {
			payload = nil
		}
		f := testFrame(t, op, payload)
		pkt := gopacket.NewPacket(f, layers.LayerTypeEthernet, gopacket.Default)
		if el := pkt.ErrorLayer(); el != nil {
			t.Fatalf("%v: decode error %v", op, el.Error())
		}
		want := []gopacket.LayerType{layers.LayerTypeEthernet, layers.LayerTypeIPv4, layers.LayerTypeUDP, LayerTypeBTH}
		if op.HasRETH() {
			want = append(want, LayerTypeRETH)
		}
		if op.HasAETH() {
			want = append(want, LayerTypeAETH)
		}
		if op.HasImm() {
			want = append(want, LayerTypeImmDt)
		}
		if len(payload) > 0 {
			want = append(want, gopacket.LayerTypePayload)
		}
		got := pkt.Layers()
		if len(got) != len(want) {
			t.Fatalf("%v: layers %v, want %v", op, got, want)
		}
		for i := range want {
			if got[i].LayerType() != want[i] {
				t.Fatalf("%v: layer %d is %v, want %v", op, i, got[i].LayerType(), want[i])
			}
		}
		bth := pkt.Layer(LayerTypeBTH).(*BTHLayer)
		if bth.Opcode != op || bth.PSN != 0xFFFFFE || bth.DestQP != 0x123456 || bth.PKey != 0xFFFF || bth.AckReq != op.IsLast() {
			t.Fatalf("%v: BTH %+v", op, bth)
		}
		if !bytes.Equal(bth.LayerPayload(), payload) {
			t.Fatalf("%v: BTH payload %q", op, bth.LayerPayload())
		}
		if l := pkt.Layer(LayerTypeRETH); l != nil {
			r := l.(*RETHLayer)
			if r.VA != 0x1122334455667788 || r.RKey != 0xCAFEBABE || r.DMALength != 4000 {
				t.Fatalf("RETH %+v", r)
			}
		}
		if l := pkt.Layer(LayerTypeAETH); l != nil {
			if a := l.(*AETHLayer); a.Syndrome != SyndromeACK || a.MSN != 0xABCDEF {
				t.Fatalf("AETH %+v", a)
			}
		}
		if l := pkt.Layer(LayerTypeImmDt); l != nil {
			if i := l.(*ImmDtLayer); i.Imm != 0xDEADBEEF {
				t.Fatalf("ImmDt %+v", i)
			}
		}
		var fr Frame
		_ = fr.Parse(f)
		if bth.ICRC != fr.ICRC {
			t.Fatalf("%v: ICRC %#x vs %#x", op, bth.ICRC, fr.ICRC)
		}
	}
}

func TestDecodingLayerParser(t *testing.T) {
	var (
		eth layers.Ethernet
		ip4 layers.IPv4
		udp layers.UDP
		bth BTHLayer
		pl  gopacket.Payload
	)
	parser := gopacket.NewDecodingLayerParser(layers.LayerTypeEthernet, &eth, &ip4, &udp, &bth, &pl)
	decoded := make([]gopacket.LayerType, 0, 8)
	f := testFrame(t, OpRDMAWriteOnlyImm, []byte("payload!!"))
	// Ethernet minimum-size padding after the datagram must not matter.
	f = append(f, make([]byte, 8)...)
	if err := parser.DecodeLayers(f, &decoded); err != nil {
		t.Fatal(err)
	}
	if len(decoded) != 5 || decoded[3] != LayerTypeBTH {
		t.Fatalf("decoded %v", decoded)
	}
	if !bth.HasRETH || !bth.HasImm || bth.Imm.Imm != 0xDEADBEEF || bth.RETH.RKey != 0xCAFEBABE || string(pl) != "payload!!" {
		t.Fatalf("BTH %+v payload %q", bth, pl)
	}
	if a := testing.AllocsPerRun(100, func() { _ = parser.DecodeLayers(f, &decoded) }); a != 0 {
		t.Errorf("DecodeLayers allocates %v", a)
	}
}

// TestGopacketSerialize builds frames with gopacket layers and checks they
// equal the hot-path encoder's bytes.
func TestGopacketSerialize(t *testing.T) {
	for _, op := range rcAndUCOps() {
		payload := []byte("abcdefg")
		if op == OpAck {
			payload = nil
		}
		h := testHeader(op)
		want := testFrame(t, op, payload)
		eth := &layers.Ethernet{SrcMAC: net.HardwareAddr(h.Src.MAC[:]), DstMAC: net.HardwareAddr(h.Dst.MAC[:]), EthernetType: layers.EthernetTypeIPv4}
		ip := &layers.IPv4{Version: 4, IHL: 5, TOS: h.TOS, Id: h.ID, Flags: layers.IPv4DontFragment, TTL: 64,
			Protocol: layers.IPProtocolUDP, SrcIP: h.Src.IP.AsSlice(), DstIP: h.Dst.IP.AsSlice()}
		udp := &layers.UDP{SrcPort: layers.UDPPort(h.SrcPort), DstPort: UDPPort}
		bth := &BTHLayer{Opcode: op, PKey: h.PKey, DestQP: h.DestQP, AckReq: h.AckReq, PSN: h.PSN,
			RETH: RETHLayer{VA: h.VA, RKey: h.RKey, DMALength: h.DMALength},
			AETH: AETHLayer{Syndrome: h.Syndrome, MSN: h.MSN}, Imm: ImmDtLayer{Imm: h.Imm}}
		buf := gopacket.NewSerializeBuffer()
		err := gopacket.SerializeLayers(buf, gopacket.SerializeOptions{FixLengths: true, ComputeChecksums: false},
			eth, ip, udp, bth, gopacket.Payload(payload))
		if err != nil {
			t.Fatal(err)
		}
		got := buf.Bytes()
		if len(got) > len(want) { // Ethernet pads to 60 bytes
			got = got[:len(want)]
		}
		got[24], got[25] = 0, 0
		c := ipv4Checksum(got[14:34])
		got[24], got[25] = byte(c>>8), byte(c)
		if err := SetICRC(got); err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(got, want) {
			t.Fatalf("%v: gopacket\n% x\nencoder\n% x", op, got, want)
		}
	}
}
