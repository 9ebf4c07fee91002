// Package inahdr defines the INA (in-network aggregation) header: the
// metadata and int32 values that workers, the switch and the parameter
// server (PS) exchange. It is carried as the payload of a RoCEv2 message,
// after the BTH and any RETH/ImmDt, so the same bytes travel on the INA
// path (through the aggregation switch) and on the RC path (to the PS).
//
// Wire layout (big-endian, 20 bytes, then Count int32 values):
//
//	 0                   1                   2                   3
//	 0 1 2 3 4 5 6 7 8 9 0 1 2 3 4 5 6 7 8 9 0 1 2 3 4 5 6 7 8 9 0 1
//	+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//	|  Version=0xA1 |     Flags     |            Job ID             |
//	+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//	|         All-reduce ID         |          Value count          |
//	+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//	|                          Chunk index                          |
//	+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//	|   Worker ID   |   Exponent    |         Slot (switch)         |
//	+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//	|                        Worker bitmap                          |
//	+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//	|                    Value 0 (int32, two's complement)          |
//	+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//	|                             ...                               |
//
// Fields:
//   - Version: 0xA1 marks an INA header of this layout. Anything else is not INA.
//   - Flags: see the Flag constants.
//   - Job ID: tenant (training job); 0 is reserved and invalid.
//   - All-reduce ID: the all-reduce (tensor / iteration) within the job.
//   - Value count: number of int32 values that follow (1..MaxValues; 0 in
//     a control message and in an "absorbed" marker, see FlagCtl).
//   - Chunk index: the chunk of the all-reduce this packet carries.
//   - Worker ID: the sender's rank in the job (0..31); in a control
//     message, its opcode (CtlOp).
//   - Exponent: SwitchML-style per-packet scaling exponent; the switch keeps the maximum.
//   - Slot: the aggregator slot the switch used (written by the switch, informational).
//   - Worker bitmap: in a worker's packet 1<<WorkerID; in a result or partial
//     aggregate, the set of workers whose values are included.
//
// A control message (flags CtlFlags = FlagCtl|FlagBypass, Count 0, no
// values) re-uses the fields: the Worker ID byte holds its opcode (CtlOp)
// and Chunk index, Exponent, Slot and Worker bitmap carry per-opcode
// parameters. Ctl is its typed form (Ctl.Encode, DecodeCtl); the Ctl
// documentation has the wire table. Validate and Decode reject control
// messages (Count 0); use DecodeCtl, Header.IsCtl and Header.IsAbsorbed.
//
// The layout is defined once, in Fields; the P4 twin's header declaration
// (switch/p4) is checked against it by a test.
package inahdr

import (
	"encoding/binary"
	"errors"
)

// Version is the value of the first byte of every INA header of this layout.
const Version = 0xA1

// Len is the length of the INA header without its values.
const Len = 20

// MaxValues is the largest value count an INA header may carry (a 9000-byte
// jumbo frame holds about 2200 values; 1024 keeps payloads within 4 KiB).
const MaxValues = 1024

// MaxWorkers is the largest number of workers per job (bitmap width).
const MaxWorkers = 32

// Flag bits. The eight bits are all assigned.
const (
	// FlagCollision: the switch had no aggregator for this packet (slot owned
	// by another chunk, or no memory); the packet went to the PS unaggregated.
	FlagCollision = 0x01
	// FlagOverflow has one meaning per direction:
	//   - on an aggregate (FlagResult or FlagPartial set), switch → PS and
	//     workers, or PS → workers: a saturating add clipped at least one
	//     value (set by the switch; by the PS on a sum of its own, and kept
	//     on a switch result it relays);
	//   - on a contribution, host → switch (FlagResult and FlagPartial
	//     clear): "do not aggregate, forward this to the PS" (ATP; the
	//     baselines' PS-path packets carry FlagOverflow|FlagResend).
	FlagOverflow = 0x02
	// FlagResend: a host retransmission after a timeout (ATP resend).
	FlagResend = 0x04
	// FlagResult: the packet carries an aggregated result (or, from the PS,
	// the ACK that releases the aggregator).
	FlagResult = 0x08
	// FlagFromPS: sent by the parameter server.
	FlagFromPS = 0x10
	// FlagPartial: a partial aggregate (preempted or evicted slot) whose
	// contributors are in Bitmap.
	FlagPartial = 0x20
	// FlagBypass: the packet travels the RC path to the PS; the switch
	// forwards it like ordinary traffic and never aggregates it.
	FlagBypass = 0x40
	// FlagCtl marks FreeINA metadata (docs/freeina.md), with two meanings:
	//   - alone (FlagBypass clear), on a Count-0 header travelling the RC
	//     path to the PS: "absorbed by the switch", a worker's contribution
	//     that the switch added into an aggregator and forwarded trimmed
	//     (same RC headers and PSN, values cut off); see Header.IsAbsorbed;
	//   - with FlagBypass: a control message (CtlFlags, Count 0) whose
	//     opcode is in the Worker ID byte; see Ctl and Header.IsCtl.
	FlagCtl = 0x80
)

// Field describes one header field, in wire order. Widths are in bits.
type Field struct {
	Name string
	Bits int
	Off  int // byte offset
}

// Fields is the single definition of the header layout. The P4 twin's
// `header ina_h` must declare the same fields, in order, with the same widths.
var Fields = []Field{
	{Name: "version", Bits: 8, Off: 0},
	{Name: "flags", Bits: 8, Off: 1},
	{Name: "job", Bits: 16, Off: 2},
	{Name: "allreduce", Bits: 16, Off: 4},
	{Name: "count", Bits: 16, Off: 6},
	{Name: "chunk", Bits: 32, Off: 8},
	{Name: "worker", Bits: 8, Off: 12},
	{Name: "exponent", Bits: 8, Off: 13},
	{Name: "slot", Bits: 16, Off: 14},
	{Name: "bitmap", Bits: 32, Off: 16},
}

// Errors returned by Validate and Decode.
var (
	ErrShort   = errors.New("inahdr: buffer shorter than the INA header")
	ErrVersion = errors.New("inahdr: not an INA header (version byte)")
	ErrCount   = errors.New("inahdr: value count zero or above MaxValues")
	ErrValues  = errors.New("inahdr: values truncated")
	ErrJob     = errors.New("inahdr: job id 0 is reserved")
	ErrWorker  = errors.New("inahdr: worker id out of range")
)

// Header is a view of an INA header and its values in a byte slice, in the
// style of gVisor's header package: accessors read and write the bytes in
// place and allocate nothing. The slice must hold at least Len bytes; the
// value accessors also need the values.
type Header []byte

// Fields accessors.

func (h Header) Version() uint8          { return h[0] }
func (h Header) Flags() uint8            { return h[1] }
func (h Header) Job() uint16             { return binary.BigEndian.Uint16(h[2:]) }
func (h Header) AllReduce() uint16       { return binary.BigEndian.Uint16(h[4:]) }
func (h Header) Count() int              { return int(binary.BigEndian.Uint16(h[6:])) }
func (h Header) Chunk() uint32           { return binary.BigEndian.Uint32(h[8:]) }
func (h Header) Worker() uint8           { return h[12] }
func (h Header) Exponent() int8          { return int8(h[13]) }
func (h Header) Slot() uint16            { return binary.BigEndian.Uint16(h[14:]) }
func (h Header) Bitmap() uint32          { return binary.BigEndian.Uint32(h[16:]) }
func (h Header) Has(flag uint8) bool     { return h[1]&flag != 0 }
func (h Header) SetVersion(v uint8)      { h[0] = v }
func (h Header) SetFlags(f uint8)        { h[1] = f }
func (h Header) AddFlags(f uint8)        { h[1] |= f }
func (h Header) ClearFlags(f uint8)      { h[1] &^= f }
func (h Header) SetJob(j uint16)         { binary.BigEndian.PutUint16(h[2:], j) }
func (h Header) SetAllReduce(a uint16)   { binary.BigEndian.PutUint16(h[4:], a) }
func (h Header) SetCount(n int)          { binary.BigEndian.PutUint16(h[6:], uint16(n)) }
func (h Header) SetChunk(c uint32)       { binary.BigEndian.PutUint32(h[8:], c) }
func (h Header) SetWorker(w uint8)       { h[12] = w }
func (h Header) SetExponent(e int8)      { h[13] = uint8(e) }
func (h Header) SetSlot(s uint16)        { binary.BigEndian.PutUint16(h[14:], s) }
func (h Header) SetBitmap(b uint32)      { binary.BigEndian.PutUint32(h[16:], b) }
func (h Header) Value(i int) int32       { return int32(binary.BigEndian.Uint32(h[Len+4*i:])) }
func (h Header) SetValue(i int, v int32) { binary.BigEndian.PutUint32(h[Len+4*i:], uint32(v)) }

// ValueBytes returns the Count()*4 value bytes (which must be present).
func (h Header) ValueBytes() []byte { return h[Len : Len+4*h.Count()] }

// ReadValues writes the first len(dst) values (at most Count(), which
// must be present) into dst: 16 at a time with AVX2 where the CPU has it,
// the rest eight at a time with the bounds checks hoisted. It allocates
// nothing.
func (h Header) ReadValues(dst []int32) {
	src := h[Len : Len+4*len(dst)]
	n := readValuesWide(dst, src)
	dst, src = dst[n:], src[4*n:]
	for len(dst) >= 8 && len(src) >= 32 {
		d, s := (*[8]int32)(dst), (*[32]byte)(src)
		d[0] = int32(binary.BigEndian.Uint32(s[0:]))
		d[1] = int32(binary.BigEndian.Uint32(s[4:]))
		d[2] = int32(binary.BigEndian.Uint32(s[8:]))
		d[3] = int32(binary.BigEndian.Uint32(s[12:]))
		d[4] = int32(binary.BigEndian.Uint32(s[16:]))
		d[5] = int32(binary.BigEndian.Uint32(s[20:]))
		d[6] = int32(binary.BigEndian.Uint32(s[24:]))
		d[7] = int32(binary.BigEndian.Uint32(s[28:]))
		dst, src = dst[8:], src[32:]
	}
	for x := range dst {
		dst[x] = int32(binary.BigEndian.Uint32(src[4*x:]))
	}
}

// Size returns the header length plus its values: Len + 4*Count().
func (h Header) Size() int { return Len + 4*h.Count() }

// Validate checks that h is a well-formed INA header whose values are all
// present in h. It allocates nothing.
func (h Header) Validate() error {
	if len(h) < Len {
		return ErrShort
	}
	if h[0] != Version {
		return ErrVersion
	}
	n := h.Count()
	if n == 0 || n > MaxValues {
		return ErrCount
	}
	if len(h) < Len+4*n {
		return ErrValues
	}
	if h.Job() == 0 {
		return ErrJob
	}
	if h.Worker() >= MaxWorkers && !h.Has(FlagFromPS) {
		return ErrWorker
	}
	return nil
}

// Meta is the header fields as a struct.
type Meta struct {
	Flags     uint8
	Job       uint16
	AllReduce uint16
	Count     int
	Chunk     uint32
	Worker    uint8
	Exponent  int8
	Slot      uint16
	Bitmap    uint32
}

// Encode writes the header for m into h (which needs Len bytes) and sets
// the version. Values are not touched.
func (h Header) Encode(m Meta) {
	_ = h[Len-1]
	// Three stores: version, flags, job, all-reduce and count; chunk,
	// worker, exponent and slot; bitmap.
	binary.BigEndian.PutUint64(h[0:], uint64(Version)<<56|uint64(m.Flags)<<48|uint64(m.Job)<<32|uint64(m.AllReduce)<<16|uint64(uint16(m.Count)))
	binary.BigEndian.PutUint64(h[8:], uint64(m.Chunk)<<32|uint64(m.Worker)<<24|uint64(uint8(m.Exponent))<<16|uint64(m.Slot))
	binary.BigEndian.PutUint32(h[16:], m.Bitmap)
}

// Meta returns the header fields as a struct.
func (h Header) Meta() Meta {
	return Meta{Flags: h[1], Job: h.Job(), AllReduce: h.AllReduce(), Count: h.Count(),
		Chunk: h.Chunk(), Worker: h[12], Exponent: int8(h[13]), Slot: h.Slot(), Bitmap: h.Bitmap()}
}

// Append appends a header for m followed by vals to b and returns the
// extended slice. m.Count is set from len(vals).
func Append(b []byte, m Meta, vals []int32) []byte {
	m.Count = len(vals)
	n := len(b)
	for i := 0; i < Len+4*len(vals); i++ {
		b = append(b, 0)
	}
	h := Header(b[n:])
	h.Encode(m)
	for i, v := range vals {
		h.SetValue(i, v)
	}
	return b
}

// Decode validates b and returns its fields and a copy of its values.
func Decode(b []byte) (Meta, []int32, error) {
	h := Header(b)
	if err := h.Validate(); err != nil {
		return Meta{}, nil, err
	}
	vals := make([]int32, h.Count())
	for i := range vals {
		vals[i] = h.Value(i)
	}
	return h.Meta(), vals, nil
}
