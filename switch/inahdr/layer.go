package inahdr

import (
	"github.com/gopacket/gopacket"
)

// LayerType is the gopacket layer type of the INA header. It is not bound to
// a port or EtherType (INA rides inside RoCEv2 payloads, which gopacket does
// not decode); decode it explicitly with
// gopacket.NewPacket(payload, inahdr.LayerType, gopacket.Default).
var LayerType = gopacket.RegisterLayerType(4791_1,
	gopacket.LayerTypeMetadata{Name: "INA", Decoder: gopacket.DecodeFunc(decodeLayer)})

// Layer is a gopacket layer for the INA header. Values are decoded into a
// slice; use Header for zero-allocation access.
type Layer struct {
	Meta
	Values   []int32
	contents []byte
	payload  []byte
}

// LayerType implements gopacket.Layer.
func (l *Layer) LayerType() gopacket.LayerType { return LayerType }

// LayerContents implements gopacket.Layer.
func (l *Layer) LayerContents() []byte { return l.contents }

// LayerPayload implements gopacket.Layer: bytes after the values (the ICRC
// and padding if the caller passed them).
func (l *Layer) LayerPayload() []byte { return l.payload }

// CanDecode implements gopacket.DecodingLayer.
func (l *Layer) CanDecode() gopacket.LayerClass { return LayerType }

// NextLayerType implements gopacket.DecodingLayer.
func (l *Layer) NextLayerType() gopacket.LayerType { return gopacket.LayerTypePayload }

// DecodeFromBytes implements gopacket.DecodingLayer.
func (l *Layer) DecodeFromBytes(data []byte, df gopacket.DecodeFeedback) error {
	h := Header(data)
	if err := h.Validate(); err != nil {
		df.SetTruncated()
		return err
	}
	l.Meta = h.Meta()
	n := h.Count()
	if cap(l.Values) < n {
		l.Values = make([]int32, n)
	}
	l.Values = l.Values[:n]
	for i := range l.Values {
		l.Values[i] = h.Value(i)
	}
	l.contents = data[:h.Size()]
	l.payload = data[h.Size():]
	return nil
}

// SerializeTo implements gopacket.SerializableLayer.
func (l *Layer) SerializeTo(b gopacket.SerializeBuffer, _ gopacket.SerializeOptions) error {
	buf, err := b.PrependBytes(Len + 4*len(l.Values))
	if err != nil {
		return err
	}
	m := l.Meta
	m.Count = len(l.Values)
	h := Header(buf)
	h.Encode(m)
	for i, v := range l.Values {
		h.SetValue(i, v)
	}
	return nil
}

func decodeLayer(data []byte, p gopacket.PacketBuilder) error {
	l := &Layer{}
	if err := l.DecodeFromBytes(data, p); err != nil {
		return err
	}
	p.AddLayer(l)
	return p.NextDecoder(gopacket.LayerTypePayload)
}

// CtlLayerType is the gopacket layer type of an INA control message (Ctl).
// Like LayerType it is bound to nothing; decode a control payload
// explicitly with gopacket.NewPacket(payload, inahdr.CtlLayerType,
// gopacket.Default). (LayerType rejects control messages, which carry no
// values, with ErrCount.)
var CtlLayerType = gopacket.RegisterLayerType(4791_2,
	gopacket.LayerTypeMetadata{Name: "INACtl", Decoder: gopacket.DecodeFunc(decodeCtlLayer)})

// CtlLayer is a gopacket layer for an INA control message. Its String is
// Ctl.String.
type CtlLayer struct {
	Ctl
	contents []byte
	payload  []byte
}

// LayerType implements gopacket.Layer.
func (l *CtlLayer) LayerType() gopacket.LayerType { return CtlLayerType }

// LayerContents implements gopacket.Layer: the Len header bytes.
func (l *CtlLayer) LayerContents() []byte { return l.contents }

// LayerPayload implements gopacket.Layer: bytes after the header (the ICRC
// and padding if the caller passed them).
func (l *CtlLayer) LayerPayload() []byte { return l.payload }

// CanDecode implements gopacket.DecodingLayer.
func (l *CtlLayer) CanDecode() gopacket.LayerClass { return CtlLayerType }

// NextLayerType implements gopacket.DecodingLayer.
func (l *CtlLayer) NextLayerType() gopacket.LayerType { return gopacket.LayerTypePayload }

// DecodeFromBytes implements gopacket.DecodingLayer with DecodeCtl.
func (l *CtlLayer) DecodeFromBytes(data []byte, df gopacket.DecodeFeedback) error {
	c, err := DecodeCtl(data)
	if err != nil {
		if err == ErrShort {
			df.SetTruncated()
		}
		return err
	}
	l.Ctl, l.contents, l.payload = c, data[:Len], data[Len:]
	return nil
}

// SerializeTo implements gopacket.SerializableLayer with Ctl.Encode.
func (l *CtlLayer) SerializeTo(b gopacket.SerializeBuffer, _ gopacket.SerializeOptions) error {
	buf, err := b.PrependBytes(Len)
	if err != nil {
		return err
	}
	l.Encode(buf)
	return nil
}

func decodeCtlLayer(data []byte, p gopacket.PacketBuilder) error {
	l := &CtlLayer{}
	if err := l.DecodeFromBytes(data, p); err != nil {
		return err
	}
	p.AddLayer(l)
	return p.NextDecoder(gopacket.LayerTypePayload)
}
