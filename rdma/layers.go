package rdma

import (
	"encoding/binary"
	"errors"
	"fmt"

	"github.com/gopacket/gopacket"
	"github.com/gopacket/gopacket/layers"
)

// gopacket layer type numbers of this package (1000-1999 is the range for
// application layer types). Keep them distinct from other packages'.
const (
	layerNumBTH   = 1791
	layerNumRETH  = 1792
	layerNumAETH  = 1793
	layerNumImmDt = 1794
)

// Layer types of the InfiniBand transport headers. LayerTypeBTH is
// registered as the decoder of UDP port 4791, so gopacket decodes RoCEv2
// frames (either direction) without further set-up.
var (
	LayerTypeBTH = gopacket.RegisterLayerType(layerNumBTH, gopacket.LayerTypeMetadata{
		Name: "BTH", Decoder: gopacket.DecodeFunc(decodeBTH)})
	LayerTypeRETH = gopacket.RegisterLayerType(layerNumRETH, gopacket.LayerTypeMetadata{
		Name: "RETH", Decoder: gopacket.DecodeFunc(decodeRETH)})
	LayerTypeAETH = gopacket.RegisterLayerType(layerNumAETH, gopacket.LayerTypeMetadata{
		Name: "AETH", Decoder: gopacket.DecodeFunc(decodeAETH)})
	LayerTypeImmDt = gopacket.RegisterLayerType(layerNumImmDt, gopacket.LayerTypeMetadata{
		Name: "ImmDt", Decoder: gopacket.DecodeFunc(decodeImmDt)})
)

func init() {
	layers.RegisterUDPPortLayerType(layers.UDPPort(UDPPort), LayerTypeBTH)
}

// Errors of the gopacket layers.
var (
	errLayerShort = errors.New("rdma: layer data too short")
	errLayerPad   = errors.New("rdma: packet too short for its extension headers, pad and ICRC")
)

// BTHLayer is the gopacket layer of a Base Transport Header. It decodes
// the UDP payload of a RoCEv2 packet: the BTH (its Contents), the extension
// headers the opcode implies (into the RETH, AETH and Imm fields; RC and UC
// opcodes alike, see Opcode.Supported), and the trailing ICRC; its Payload
// is the application payload without pad and ICRC. It implements
// gopacket.DecodingLayer and gopacket.SerializableLayer.
//
// Through gopacket.NewPacket the extension headers also appear as their own
// RETHLayer, AETHLayer and ImmDtLayer layers after the BTH.
type BTHLayer struct {
	layers.BaseLayer
	Opcode         Opcode
	SolicitedEvent bool
	MigReq         bool
	PadCount       uint8
	TVer           uint8
	PKey           uint16
	FECN, BECN     bool
	Resv6a         uint8
	DestQP         uint32
	AckReq         bool
	Resv7          uint8
	PSN            uint32

	// Extension headers, valid when the opcode implies them.
	HasRETH, HasAETH, HasImm bool
	RETH                     RETHLayer
	AETH                     AETHLayer
	Imm                      ImmDtLayer

	// ICRC is the trailer as stored (read little-endian). It is only
	// checkable with the outer IPv4/UDP headers: see CheckICRC.
	ICRC uint32
}

// LayerType implements gopacket.Layer.
func (b *BTHLayer) LayerType() gopacket.LayerType { return LayerTypeBTH }

// CanDecode implements gopacket.DecodingLayer.
func (b *BTHLayer) CanDecode() gopacket.LayerClass { return LayerTypeBTH }

// NextLayerType implements gopacket.DecodingLayer.
func (b *BTHLayer) NextLayerType() gopacket.LayerType { return gopacket.LayerTypePayload }

// DecodeFromBytes implements gopacket.DecodingLayer. data is the UDP
// payload, from the BTH to the ICRC inclusive.
func (b *BTHLayer) DecodeFromBytes(data []byte, df gopacket.DecodeFeedback) error {
	if len(data) < BTHLen+ICRCLen {
		df.SetTruncated()
		return errLayerShort
	}
	h := BTH(data)
	*b = BTHLayer{
		Opcode:         h.Opcode(),
		SolicitedEvent: h.SolicitedEvent(),
		MigReq:         h.MigReq(),
		PadCount:       uint8(h.PadCount()),
		TVer:           h.TVer(),
		PKey:           h.PKey(),
		FECN:           h.FECN(),
		BECN:           h.BECN(),
		Resv6a:         data[4] & 0x3F,
		DestQP:         h.DestQP(),
		AckReq:         h.AckReq(),
		Resv7:          data[8] & 0x7F,
		PSN:            h.PSN(),
		ICRC:           binary.LittleEndian.Uint32(data[len(data)-ICRCLen:]),
	}
	op := b.Opcode
	hl := BTHLen
	if op.Supported() {
		hl = op.HeaderLen()
	}
	end := len(data) - ICRCLen - int(b.PadCount)
	if end < hl {
		df.SetTruncated()
		return errLayerPad
	}
	x := data[BTHLen:end] // each extension layer's payload runs to the pad
	if op.HasRETH() {
		b.HasRETH = true
		_ = b.RETH.DecodeFromBytes(x, df)
		x = x[RETHLen:]
	}
	if op.HasAETH() {
		b.HasAETH = true
		_ = b.AETH.DecodeFromBytes(x, df)
		x = x[AETHLen:]
	}
	if op.HasImm() {
		b.HasImm = true
		_ = b.Imm.DecodeFromBytes(x, df)
	}
	b.BaseLayer = layers.BaseLayer{Contents: data[:BTHLen], Payload: data[hl:end]}
	return nil
}

// SerializeTo implements gopacket.SerializableLayer. It prepends the BTH and
// the extension headers of the opcode (from the RETH, AETH and Imm fields),
// and appends the pad and a zero ICRC: once the whole frame is serialized,
// fill the ICRC in with SetICRC. With opts.FixLengths, PadCount is set from
// the payload length.
func (b *BTHLayer) SerializeTo(buf gopacket.SerializeBuffer, opts gopacket.SerializeOptions) error {
	plen := len(buf.Bytes())
	if opts.FixLengths {
		b.PadCount = uint8(PadFor(plen))
	}
	tail, err := buf.AppendBytes(int(b.PadCount) + ICRCLen)
	if err != nil {
		return err
	}
	clear(tail)
	hl := BTHLen
	if b.Opcode.Supported() {
		hl = b.Opcode.HeaderLen()
	}
	hdr, err := buf.PrependBytes(hl)
	if err != nil {
		return err
	}
	h := BTH(hdr)
	h.SetOpcode(b.Opcode)
	hdr[1] = b.PadCount&3<<4 | b.TVer&0x0F
	h.SetSolicitedEvent(b.SolicitedEvent)
	h.SetMigReq(b.MigReq)
	h.SetPKey(b.PKey)
	hdr[4] = b.Resv6a & 0x3F
	if b.FECN {
		hdr[4] |= 0x80
	}
	if b.BECN {
		hdr[4] |= 0x40
	}
	h.SetDestQP(b.DestQP)
	h.SetPSN(b.PSN)
	hdr[8] = b.Resv7 & 0x7F
	if b.AckReq {
		hdr[8] |= 0x80
	}
	x := hdr[BTHLen:]
	if b.Opcode.HasRETH() {
		b.RETH.put(x)
		x = x[RETHLen:]
	}
	if b.Opcode.HasAETH() {
		b.AETH.put(x)
		x = x[AETHLen:]
	}
	if b.Opcode.HasImm() {
		b.Imm.put(x)
	}
	return nil
}

func decodeBTH(data []byte, p gopacket.PacketBuilder) error {
	b := &BTHLayer{}
	if err := b.DecodeFromBytes(data, p); err != nil {
		return err
	}
	p.AddLayer(b)
	if b.HasRETH {
		r := b.RETH
		p.AddLayer(&r)
	}
	if b.HasAETH {
		a := b.AETH
		p.AddLayer(&a)
	}
	if b.HasImm {
		i := b.Imm
		p.AddLayer(&i)
	}
	if len(b.Payload) == 0 {
		return nil
	}
	return p.NextDecoder(gopacket.LayerTypePayload)
}

// RETHLayer is the gopacket layer of an RDMA Extended Transport Header.
type RETHLayer struct {
	layers.BaseLayer
	VA        uint64
	RKey      uint32
	DMALength uint32
}

// LayerType implements gopacket.Layer.
func (r *RETHLayer) LayerType() gopacket.LayerType { return LayerTypeRETH }

// CanDecode implements gopacket.DecodingLayer.
func (r *RETHLayer) CanDecode() gopacket.LayerClass { return LayerTypeRETH }

// NextLayerType implements gopacket.DecodingLayer.
func (r *RETHLayer) NextLayerType() gopacket.LayerType { return gopacket.LayerTypePayload }

// DecodeFromBytes implements gopacket.DecodingLayer.
func (r *RETHLayer) DecodeFromBytes(data []byte, df gopacket.DecodeFeedback) error {
	if len(data) < RETHLen {
		df.SetTruncated()
		return errLayerShort
	}
	h := RETH(data)
	*r = RETHLayer{VA: h.VA(), RKey: h.RKey(), DMALength: h.DMALength(),
		BaseLayer: layers.BaseLayer{Contents: data[:RETHLen], Payload: data[RETHLen:]}}
	return nil
}

func (r *RETHLayer) put(b []byte) {
	h := RETH(b)
	h.SetVA(r.VA)
	h.SetRKey(r.RKey)
	h.SetDMALength(r.DMALength)
}

// SerializeTo implements gopacket.SerializableLayer.
func (r *RETHLayer) SerializeTo(buf gopacket.SerializeBuffer, _ gopacket.SerializeOptions) error {
	b, err := buf.PrependBytes(RETHLen)
	if err != nil {
		return err
	}
	r.put(b)
	return nil
}

func decodeRETH(data []byte, p gopacket.PacketBuilder) error {
	r := &RETHLayer{}
	if err := r.DecodeFromBytes(data, p); err != nil {
		return err
	}
	p.AddLayer(r)
	return p.NextDecoder(gopacket.LayerTypePayload)
}

// AETHLayer is the gopacket layer of an ACK Extended Transport Header.
type AETHLayer struct {
	layers.BaseLayer
	Syndrome Syndrome
	MSN      uint32
}

// LayerType implements gopacket.Layer.
func (a *AETHLayer) LayerType() gopacket.LayerType { return LayerTypeAETH }

// CanDecode implements gopacket.DecodingLayer.
func (a *AETHLayer) CanDecode() gopacket.LayerClass { return LayerTypeAETH }

// NextLayerType implements gopacket.DecodingLayer.
func (a *AETHLayer) NextLayerType() gopacket.LayerType { return gopacket.LayerTypePayload }

// DecodeFromBytes implements gopacket.DecodingLayer.
func (a *AETHLayer) DecodeFromBytes(data []byte, df gopacket.DecodeFeedback) error {
	if len(data) < AETHLen {
		df.SetTruncated()
		return errLayerShort
	}
	h := AETH(data)
	*a = AETHLayer{Syndrome: h.Syndrome(), MSN: h.MSN(),
		BaseLayer: layers.BaseLayer{Contents: data[:AETHLen], Payload: data[AETHLen:]}}
	return nil
}

func (a *AETHLayer) put(b []byte) {
	AETH(b).SetSyndrome(a.Syndrome)
	AETH(b).SetMSN(a.MSN)
}

// SerializeTo implements gopacket.SerializableLayer.
func (a *AETHLayer) SerializeTo(buf gopacket.SerializeBuffer, _ gopacket.SerializeOptions) error {
	b, err := buf.PrependBytes(AETHLen)
	if err != nil {
		return err
	}
	a.put(b)
	return nil
}

func decodeAETH(data []byte, p gopacket.PacketBuilder) error {
	a := &AETHLayer{}
	if err := a.DecodeFromBytes(data, p); err != nil {
		return err
	}
	p.AddLayer(a)
	return p.NextDecoder(gopacket.LayerTypePayload)
}

// ImmDtLayer is the gopacket layer of an Immediate Data header.
type ImmDtLayer struct {
	layers.BaseLayer
	Imm uint32
}

// LayerType implements gopacket.Layer.
func (i *ImmDtLayer) LayerType() gopacket.LayerType { return LayerTypeImmDt }

// CanDecode implements gopacket.DecodingLayer.
func (i *ImmDtLayer) CanDecode() gopacket.LayerClass { return LayerTypeImmDt }

// NextLayerType implements gopacket.DecodingLayer.
func (i *ImmDtLayer) NextLayerType() gopacket.LayerType { return gopacket.LayerTypePayload }

// DecodeFromBytes implements gopacket.DecodingLayer.
func (i *ImmDtLayer) DecodeFromBytes(data []byte, df gopacket.DecodeFeedback) error {
	if len(data) < ImmDtLen {
		df.SetTruncated()
		return errLayerShort
	}
	*i = ImmDtLayer{Imm: ImmDt(data).Imm(),
		BaseLayer: layers.BaseLayer{Contents: data[:ImmDtLen], Payload: data[ImmDtLen:]}}
	return nil
}

func (i *ImmDtLayer) put(b []byte) { ImmDt(b).SetImm(i.Imm) }

// SerializeTo implements gopacket.SerializableLayer.
func (i *ImmDtLayer) SerializeTo(buf gopacket.SerializeBuffer, _ gopacket.SerializeOptions) error {
	b, err := buf.PrependBytes(ImmDtLen)
	if err != nil {
		return err
	}
	i.put(b)
	return nil
}

func decodeImmDt(data []byte, p gopacket.PacketBuilder) error {
	i := &ImmDtLayer{}
	if err := i.DecodeFromBytes(data, p); err != nil {
		return err
	}
	p.AddLayer(i)
	return p.NextDecoder(gopacket.LayerTypePayload)
}

// String describes the BTH and its extension headers on one line.
func (b *BTHLayer) String() string {
	s := fmt.Sprintf("%s QP=0x%06x PSN=%d", b.Opcode, b.DestQP, b.PSN)
	if b.AckReq {
		s += " A"
	}
	if b.SolicitedEvent {
		s += " SE"
	}
	if b.BECN {
		s += " BECN"
	}
	if b.HasRETH {
		s += fmt.Sprintf(" RETH(va=0x%x rkey=0x%x len=%d)", b.RETH.VA, b.RETH.RKey, b.RETH.DMALength)
	}
	if b.HasAETH {
		s += fmt.Sprintf(" AETH(%s msn=%d)", b.AETH.Syndrome, b.AETH.MSN)
	}
	if b.HasImm {
		s += fmt.Sprintf(" Imm=0x%08x", b.Imm.Imm)
	}
	return s
}
