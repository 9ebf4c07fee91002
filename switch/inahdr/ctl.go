package inahdr

import (
	"errors"
	"math"
	"strconv"
)

// CtlFlags is the flags byte of every control message.
const CtlFlags = FlagCtl | FlagBypass

// CtlOp is the opcode of a control message, carried in the Worker ID byte.
type CtlOp uint8

// Control opcodes.
const (
	// CtlAlloc (PS → switch): lease aggregators for an all-reduce.
	CtlAlloc CtlOp = 1
	// CtlGrant (switch → PS and the job's workers): the lease granted
	// for an ALLOC (Slots 0: none, the all-reduce takes the PS path).
	CtlGrant CtlOp = 2
	// CtlFree (PS → switch): release the all-reduce's lease.
	CtlFree CtlOp = 3
	// CtlJoin (worker → switch): the worker's job starts and asks for a
	// pool of Want aggregators for its whole run (SwitchML's admission);
	// answered with a GRANT to the job's workers once the job is admitted.
	CtlJoin CtlOp = 4
	// CtlLeave (worker → switch): the worker has finished its job.
	CtlLeave CtlOp = 5
	// CtlLeft (switch → the job's workers): every worker of the job left;
	// its pool is released (the answer to every LEAVE from then on).
	CtlLeft CtlOp = 6

	// CtlHost is the first opcode of host-to-host (worker ↔ PS) messages.
	CtlHost CtlOp = 16

	// CtlBegin (worker → PS): an all-reduce starts.
	CtlBegin CtlOp = 16
	// CtlPlan (PS → worker): the path partition of the all-reduce.
	CtlPlan CtlOp = 17
	// CtlFetch (worker → PS): send me chunk Chunk's result when you have it.
	CtlFetch CtlOp = 18
	// CtlPull (PS → worker): resend chunk Chunk raw (FlagBypass): the
	// switch lost the partial aggregate your contribution went into.
	CtlPull CtlOp = 19
	// CtlDone (worker → PS): I hold every result of the all-reduce (RC
	// order also proves every contribution of mine was delivered).
	CtlDone CtlOp = 20
)

// CtlExact is the Exponent byte of an ALLOC that asks for exactly Want
// aggregators or none (a re-ALLOC after a switch reboot: the plan already
// fixes the number). Any other value asks for up to Want.
const CtlExact = 1

// MaxCtlSlots is the largest Want or Slots a control message carries (the
// 16-bit Slot field).
const MaxCtlSlots = math.MaxUint16

// Errors returned by DecodeCtl (besides ErrShort and ErrVersion).
var (
	ErrNotCtl = errors.New("inahdr: not a control message (flags lack FlagCtl|FlagBypass)")
	ErrCtlOp  = errors.New("inahdr: unknown control opcode")
)

// Known reports whether o is one of the control opcodes.
func (o CtlOp) Known() bool {
	return (o >= CtlAlloc && o <= CtlLeft) || (o >= CtlBegin && o <= CtlDone)
}

var ctlOpNames = [...]string{CtlAlloc: "ALLOC", CtlGrant: "GRANT", CtlFree: "FREE",
	CtlJoin: "JOIN", CtlLeave: "LEAVE", CtlLeft: "LEFT",
	CtlBegin: "BEGIN", CtlPlan: "PLAN", CtlFetch: "FETCH", CtlPull: "PULL", CtlDone: "DONE"}

// String returns the opcode's name ("ALLOC", …, "DONE"), or "CtlOp(n)".
func (o CtlOp) String() string {
	if o.Known() {
		return ctlOpNames[o]
	}
	return "CtlOp(" + strconv.Itoa(int(o)) + ")"
}

// Ctl is a FreeINA control message (docs/freeina.md), one meaning per
// field.
//
// On the wire a control message is an INA header without values: flags
// CtlFlags (FlagCtl|FlagBypass), Count 0, the opcode in the Worker ID byte,
// Job ID and All-reduce ID as usual, and the other fields re-used with one
// meaning per opcode. Opcodes below CtlHost travel between a host and the
// switch's control plane (UC SEND Only to the switch's control QP, and the
// GRANT or LEFT multicast back): ALLOC and FREE from a FreeINA PS, JOIN
// and LEAVE from a SwitchML worker. Opcodes from CtlHost on travel between
// a worker and its PS over their RC connection.
//
// Wire table: the Ctl field each header field carries, per opcode. "-" is
// written 0 by Encode and ignored by DecodeCtl; Count is always written 0;
// the Version byte is Version. (WG: the job's worker group, which only
// counts GRANTs.)
//
//	op         from → to        Chunk index   Exponent         Slot    Worker bitmap
//	ALLOC  1   PS → switch      -             Exact: CtlExact  Want    Chunks
//	GRANT  2   switch → PS, WG  Base          -                Slots   Chunks
//	FREE   3   PS → switch      -             -                -       -
//	JOIN   4   worker → switch  Rank          -                Want    -
//	LEAVE  5   worker → switch  Rank          -                -       -
//	LEFT   6   switch → WG      -             -                -       -
//	BEGIN 16   worker → PS      -             -                Want    Chunks
//	PLAN  17   PS → worker      PSChunks      -                Slots   Chunks
//	FETCH 18   worker → PS      Chunk         -                -       -
//	PULL  19   PS → worker      Chunk         -                -       -
//	DONE  20   worker → PS      -             -                -       -
//
// Want and Slots travel in the 16-bit Slot field: Encode clamps them to
// 0..MaxCtlSlots (the callers' min(x, 0xFFFF) gives the same bytes). Base
// and PSChunks travel in the 32-bit Chunk index: Encode clamps them to
// 0..2³²-1 (and DecodeCtl saturates at the largest int where int has 32
// bits). Encode writes only the fields of Op; DecodeCtl sets only those
// and leaves the others zero.
type Ctl struct {
	Op CtlOp
	// Job and AllReduce identify the all-reduce (every opcode).
	Job, AllReduce uint16
	// Chunks is the number of chunks in the all-reduce (ALLOC, GRANT,
	// BEGIN, PLAN; Worker bitmap field).
	Chunks uint32
	// Want is the number of aggregators wanted, 0 meaning as many as
	// chunks (ALLOC, BEGIN), or the pool asked for (JOIN). Slot field,
	// clamped to 0..MaxCtlSlots.
	Want int
	// Exact asks for exactly Want aggregators or none (ALLOC; Exponent
	// byte CtlExact, else 0).
	Exact bool
	// Slots is the number of INA aggregators: granted (GRANT; 0 = no
	// lease, the PS path) or planned, i.e. INA chunks per round (PLAN).
	// Slot field, clamped to 0..MaxCtlSlots.
	Slots int
	// Base is the first aggregator slot of the lease (GRANT; Chunk index
	// field, clamped to 0..2³²-1).
	Base int
	// PSChunks is the number of PS-path chunks per round (PLAN; Chunk
	// index field, clamped to 0..2³²-1).
	PSChunks int
	// Chunk is a chunk index: the chunk whose result is wanted (FETCH), or
	// the chunk to resend raw (PULL). Chunk index field.
	Chunk uint32
	// Rank is the sending worker's rank in its job (JOIN, LEAVE; Chunk
	// index field, clamped to 0..2³²-1).
	Rank int
}

func clampSlot(n int) uint16 { return uint16(min(max(n, 0), MaxCtlSlots)) }

func clamp32(n int) uint32 {
	if n < 0 {
		return 0
	}
	if uint64(n) > math.MaxUint32 {
		return math.MaxUint32
	}
	return uint32(n)
}

// toInt converts a 32-bit field to int, saturating where int has 32 bits.
func toInt(v uint32) int {
	if uint64(v) > uint64(math.MaxInt) {
		return math.MaxInt
	}
	return int(v)
}

// Meta returns the header fields that Encode writes for c.
func (c Ctl) Meta() Meta {
	m := Meta{Flags: CtlFlags, Job: c.Job, AllReduce: c.AllReduce, Worker: uint8(c.Op)}
	switch c.Op {
	case CtlAlloc:
		m.Slot, m.Bitmap = clampSlot(c.Want), c.Chunks
		if c.Exact {
			m.Exponent = CtlExact
		}
	case CtlGrant:
		m.Chunk, m.Slot, m.Bitmap = clamp32(c.Base), clampSlot(c.Slots), c.Chunks
	case CtlBegin:
		m.Slot, m.Bitmap = clampSlot(c.Want), c.Chunks
	case CtlJoin:
		m.Chunk, m.Slot = clamp32(c.Rank), clampSlot(c.Want)
	case CtlLeave:
		m.Chunk = clamp32(c.Rank)
	case CtlPlan:
		m.Chunk, m.Slot, m.Bitmap = clamp32(c.PSChunks), clampSlot(c.Slots), c.Chunks
	case CtlFetch, CtlPull:
		m.Chunk = c.Chunk
	}
	return m
}

// Encode writes c as an INA header into b[:Len] (b needs Len bytes; it
// panics otherwise) and returns Len. Fields Op does not use are written 0.
// An opcode that is not Known is written with Job and AllReduce only.
// It allocates nothing.
func (c Ctl) Encode(b []byte) int {
	_ = b[Len-1]
	Header(b).Encode(c.Meta())
	return Len
}

// Append appends c's Len header bytes to b and returns the extended slice.
func (c Ctl) Append(b []byte) []byte {
	var z [Len]byte
	n := len(b)
	b = append(b, z[:]...)
	c.Encode(b[n:])
	return b
}

// DecodeCtl validates h as a control message and returns it: h must hold
// Len bytes, start with Version and have both FlagCtl and FlagBypass set
// (other flag bits, Count and the fields the opcode does not use are
// ignored, as the receivers always did). An unknown opcode returns
// ErrCtlOp with Op, Job and AllReduce set, so tools can still show them.
// It allocates nothing.
func DecodeCtl(h Header) (Ctl, error) {
	if len(h) < Len {
		return Ctl{}, ErrShort
	}
	if h[0] != Version {
		return Ctl{}, ErrVersion
	}
	if h[1]&CtlFlags != CtlFlags {
		return Ctl{}, ErrNotCtl
	}
	c := Ctl{Op: CtlOp(h[12]), Job: h.Job(), AllReduce: h.AllReduce()}
	switch c.Op {
	case CtlAlloc:
		c.Want, c.Chunks, c.Exact = int(h.Slot()), h.Bitmap(), h[13] == CtlExact
	case CtlGrant:
		c.Base, c.Slots, c.Chunks = toInt(h.Chunk()), int(h.Slot()), h.Bitmap()
	case CtlBegin:
		c.Want, c.Chunks = int(h.Slot()), h.Bitmap()
	case CtlPlan:
		c.PSChunks, c.Slots, c.Chunks = toInt(h.Chunk()), int(h.Slot()), h.Bitmap()
	case CtlFetch, CtlPull:
		c.Chunk = h.Chunk()
	case CtlJoin:
		c.Rank, c.Want = toInt(h.Chunk()), int(h.Slot())
	case CtlLeave:
		c.Rank = toInt(h.Chunk())
	case CtlFree, CtlDone, CtlLeft:
	default:
		return c, ErrCtlOp
	}
	return c, nil
}

// IsCtl reports whether h is a control message: at least Len bytes,
// Version, and both FlagCtl and FlagBypass set. The opcode is not checked
// (DecodeCtl does): a control message with an unknown opcode is still not
// data.
func (h Header) IsCtl() bool {
	return len(h) >= Len && h[0] == Version && h[1]&CtlFlags == CtlFlags
}

// IsAbsorbed reports whether h is the switch's "absorbed" marker: at least
// Len bytes, Version, FlagCtl set and FlagBypass clear, Count 0. The other
// fields are the worker's contribution header as sent (Job, AllReduce,
// Chunk, Worker ID, Bitmap, …); other flag bits (e.g. FlagResend) may be set.
func (h Header) IsAbsorbed() bool {
	return len(h) >= Len && h[0] == Version && h[1]&CtlFlags == FlagCtl && h.Count() == 0
}

// String renders c for tools: the opcode's name, Job and AllReduce, then
// the opcode's fields, e.g.
//
//	ALLOC job=1 allreduce=9 chunks=100 want=64 exact
//	GRANT job=1 allreduce=9 chunks=100 slots=64 base=128
//	FREE job=1 allreduce=9
//	BEGIN job=1 allreduce=9 chunks=100 want=0
//	PLAN job=1 allreduce=9 chunks=100 slots=64 ps-chunks=36
//	FETCH job=1 allreduce=9 chunk=5
//	JOIN job=1 allreduce=0 rank=3 want=64
//	CtlOp(7) job=1 allreduce=9
func (c Ctl) String() string {
	var buf [128]byte
	b := append(buf[:0], c.Op.String()...)
	kv := func(k string, v int64) {
		b = append(b, ' ')
		b = append(b, k...)
		b = append(b, '=')
		b = strconv.AppendInt(b, v, 10)
	}
	kv("job", int64(c.Job))
	kv("allreduce", int64(c.AllReduce))
	switch c.Op {
	case CtlAlloc, CtlBegin:
		kv("chunks", int64(c.Chunks))
		kv("want", int64(c.Want))
		if c.Exact && c.Op == CtlAlloc {
			b = append(b, " exact"...)
		}
	case CtlGrant:
		kv("chunks", int64(c.Chunks))
		kv("slots", int64(c.Slots))
		kv("base", int64(c.Base))
	case CtlPlan:
		kv("chunks", int64(c.Chunks))
		kv("slots", int64(c.Slots))
		kv("ps-chunks", int64(c.PSChunks))
	case CtlFetch, CtlPull:
		kv("chunk", int64(c.Chunk))
	case CtlJoin:
		kv("rank", int64(c.Rank))
		kv("want", int64(c.Want))
	case CtlLeave:
		kv("rank", int64(c.Rank))
	}
	return string(b)
}
