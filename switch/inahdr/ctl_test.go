package inahdr

import (
	"bytes"
	"math"
	"math/rand/v2"
	"strconv"
	"strings"
	"testing"

	"github.com/gopacket/gopacket"
)

// The encoders the callers used before Ctl (the former host/proto.go
// ctlMsg, host/ps.go toSwitch and toSwitchExact, switch/freeina_node.go
// grant), reproduced literally: Ctl.Encode must write the same bytes.

const oldFlagCtlMsg = 0x80 | FlagBypass // the former host flagCtlMsg: the switch's FlagCtl | FlagBypass

// host/proto.go ctlMsg (BEGIN, PLAN, FETCH, PULL, DONE).
func oldCtlMsg(op uint8, job, ar uint16, chunk uint32, slot uint16, bitmap uint32) []byte {
	b := make([]byte, Len)
	Header(b).Encode(Meta{Flags: oldFlagCtlMsg, Job: job, AllReduce: ar, Chunk: chunk,
		Worker: op, Slot: slot, Bitmap: bitmap})
	return b
}

// host/ps.go toSwitch (ALLOC, FREE).
func oldToSwitch(op uint8, job, ar uint16, slot uint16, bitmap uint32) []byte {
	b := make([]byte, Len)
	Header(b).Encode(Meta{Flags: oldFlagCtlMsg, Job: job, AllReduce: ar, Worker: op, Slot: slot, Bitmap: bitmap})
	return b
}

// host/ps.go toSwitchExact (re-ALLOC after a reboot).
func oldToSwitchExact(job, ar uint16, slot uint16, bitmap uint32) []byte {
	b := make([]byte, Len)
	Header(b).Encode(Meta{Flags: oldFlagCtlMsg, Job: job, AllReduce: ar, Worker: 1, Slot: slot, Bitmap: bitmap, Exponent: 1})
	return b
}

// switch/freeina_node.go grant (lease: Base, Slots int; Chunks uint32).
func oldGrant(job, ar uint16, base, slots int, chunks uint32) []byte {
	b := make([]byte, Len)
	Header(b).Encode(Meta{Flags: 0x80 | FlagBypass, Job: job, AllReduce: ar,
		Chunk: uint32(base), Worker: 2, Slot: uint16(slots), Bitmap: chunks})
	return b
}

// maxChunkInt is the largest Base or PSChunks that round-trips: the Chunk
// index field's maximum, or the largest int where int has 32 bits.
var maxChunkInt = min(uint64(math.MaxUint32), uint64(math.MaxInt))

func TestCtlConstants(t *testing.T) {
	// The values the switch's and the hosts' own constants had before
	// inahdr owned the control protocol.
	if FlagCtl != 0x80 || CtlFlags != 0xC0 || CtlExact != 1 || MaxCtlSlots != 0xFFFF {
		t.Fatal("flag or exact value changed")
	}
	want := []struct {
		op   CtlOp
		v    uint8
		name string
	}{
		{CtlAlloc, 1, "ALLOC"}, {CtlGrant, 2, "GRANT"}, {CtlFree, 3, "FREE"},
		{CtlJoin, 4, "JOIN"}, {CtlLeave, 5, "LEAVE"}, {CtlLeft, 6, "LEFT"},
		{CtlBegin, 16, "BEGIN"}, {CtlPlan, 17, "PLAN"}, {CtlFetch, 18, "FETCH"}, {CtlPull, 19, "PULL"}, {CtlDone, 20, "DONE"},
	}
	for _, w := range want {
		if uint8(w.op) != w.v || w.op.String() != w.name || !w.op.Known() {
			t.Errorf("%v = %d known %v, want %s = %d", w.op, uint8(w.op), w.op.Known(), w.name, w.v)
		}
	}
	if CtlHost != CtlBegin {
		t.Fatal("CtlHost is the first host opcode")
	}
	for _, o := range []CtlOp{0, 7, 15, 21, 255} {
		if o.Known() || !strings.HasPrefix(o.String(), "CtlOp(") {
			t.Errorf("%d: known %v, string %q", o, o.Known(), o.String())
		}
	}
	if CtlOp(7).String() != "CtlOp(7)" {
		t.Fatal(CtlOp(7).String())
	}
	// The flag list is complete: the eight bits, each once.
	all := []uint8{FlagCollision, FlagOverflow, FlagResend, FlagResult, FlagFromPS, FlagPartial, FlagBypass, FlagCtl}
	var seen uint8
	for _, f := range all {
		if f&(f-1) != 0 || seen&f != 0 {
			t.Fatalf("flag %#x", f)
		}
		seen |= f
	}
	if seen != 0xFF {
		t.Fatalf("flags cover %#x", seen)
	}
}

// TestCtlGolden pins the bytes of one message per opcode.
func TestCtlGolden(t *testing.T) {
	cases := []struct {
		c    Ctl
		want string // hex, 20 bytes
		s    string
	}{
		{Ctl{Op: CtlAlloc, Job: 1, AllReduce: 9, Chunks: 100, Want: 64, Exact: true},
			"a1c00001000900000000000001010040" + "00000064", "ALLOC job=1 allreduce=9 chunks=100 want=64 exact"},
		{Ctl{Op: CtlAlloc, Job: 1, AllReduce: 9, Chunks: 100},
			"a1c00001000900000000000001000000" + "00000064", "ALLOC job=1 allreduce=9 chunks=100 want=0"},
		{Ctl{Op: CtlGrant, Job: 2, AllReduce: 0x102, Chunks: 0x01020304, Slots: 64, Base: 128},
			"a1c00002010200000000008002000040" + "01020304", "GRANT job=2 allreduce=258 chunks=16909060 slots=64 base=128"},
		{Ctl{Op: CtlFree, Job: 3, AllReduce: 4},
			"a1c00003000400000000000003000000" + "00000000", "FREE job=3 allreduce=4"},
		{Ctl{Op: CtlJoin, Job: 1, Rank: 3, Want: 64},
			"a1c00001000000000000000304000040" + "00000000", "JOIN job=1 allreduce=0 rank=3 want=64"},
		{Ctl{Op: CtlLeave, Job: 1, Rank: 7},
			"a1c00001000000000000000705000000" + "00000000", "LEAVE job=1 allreduce=0 rank=7"},
		{Ctl{Op: CtlLeft, Job: 2},
			"a1c00002000000000000000006000000" + "00000000", "LEFT job=2 allreduce=0"},
		{Ctl{Op: CtlBegin, Job: 1, AllReduce: 9, Chunks: 100, Want: 0xFFFF},
			"a1c0000100090000000000001000ffff" + "00000064", "BEGIN job=1 allreduce=9 chunks=100 want=65535"},
		{Ctl{Op: CtlPlan, Job: 1, AllReduce: 9, Chunks: 100, Slots: 64, PSChunks: 36},
			"a1c00001000900000000002411000040" + "00000064", "PLAN job=1 allreduce=9 chunks=100 slots=64 ps-chunks=36"},
		{Ctl{Op: CtlFetch, Job: 1, AllReduce: 9, Chunk: 0xDEADBEEF},
			"a1c0000100090000deadbeef12000000" + "00000000", "FETCH job=1 allreduce=9 chunk=3735928559"},
		{Ctl{Op: CtlPull, Job: 1, AllReduce: 9, Chunk: 5},
			"a1c00001000900000000000513000000" + "00000000", "PULL job=1 allreduce=9 chunk=5"},
		{Ctl{Op: CtlDone, Job: 1, AllReduce: 9},
			"a1c00001000900000000000014000000" + "00000000", "DONE job=1 allreduce=9"},
	}
	for _, tc := range cases {
		var b [Len]byte
		if n := tc.c.Encode(b[:]); n != Len {
			t.Fatalf("Encode returned %d", n)
		}
		if got := hexString(b[:]); got != tc.want {
			t.Errorf("%v:\n got %s\nwant %s", tc.c.Op, got, tc.want)
		}
		if got := tc.c.String(); got != tc.s {
			t.Errorf("String = %q, want %q", got, tc.s)
		}
		d, err := DecodeCtl(b[:])
		if err != nil || d != tc.c {
			t.Errorf("DecodeCtl = %+v, %v; want %+v", d, err, tc.c)
		}
		if !Header(b[:]).IsCtl() || Header(b[:]).IsAbsorbed() {
			t.Errorf("%v: IsCtl %v IsAbsorbed %v", tc.c.Op, Header(b[:]).IsCtl(), Header(b[:]).IsAbsorbed())
		}
		if got := tc.c.Append([]byte{0xEE}); got[0] != 0xEE || !bytes.Equal(got[1:], b[:]) {
			t.Errorf("Append % x", got)
		}
	}
	if s := (Ctl{Op: 7, Job: 1, AllReduce: 2, Chunk: 3}).String(); s != "CtlOp(7) job=1 allreduce=2" {
		t.Errorf("unknown op String %q", s)
	}
}

func hexString(b []byte) string {
	const digits = "0123456789abcdef"
	var s strings.Builder
	for _, c := range b {
		s.WriteByte(digits[c>>4])
		s.WriteByte(digits[c&15])
	}
	return s.String()
}

// TestCtlOldEncoding compares Encode with today's encoders for random
// values in the ranges the callers use, and decodes back.
func TestCtlOldEncoding(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	u16 := func() uint16 { return uint16(r.Uint32()) }
	for range 2000 {
		job, ar, chunks := u16(), u16(), r.Uint32()
		// want: the callers clamp with min(x, 0xFFFF); try beyond it too.
		want := r.IntN(3 * 0x10000)
		n := r.IntN(0x10000) // plan.INA, lease slots: ≤ MaxCtlSlots
		base := r.IntN(0x10000)
		ps := int(r.Uint64N(maxChunkInt + 1))
		chunk := r.Uint32()
		cases := []struct {
			name string
			c    Ctl
			old  []byte
		}{
			{"ALLOC", Ctl{Op: CtlAlloc, Job: job, AllReduce: ar, Chunks: chunks, Want: want},
				oldToSwitch(1, job, ar, uint16(min(want, 0xFFFF)), chunks)},
			{"ALLOC exact", Ctl{Op: CtlAlloc, Job: job, AllReduce: ar, Chunks: chunks, Want: n, Exact: true},
				oldToSwitchExact(job, ar, uint16(n), chunks)},
			{"GRANT", Ctl{Op: CtlGrant, Job: job, AllReduce: ar, Chunks: chunks, Slots: n, Base: base},
				oldGrant(job, ar, base, n, chunks)},
			{"FREE", Ctl{Op: CtlFree, Job: job, AllReduce: ar},
				oldToSwitch(3, job, ar, 0, 0)},
			{"BEGIN", Ctl{Op: CtlBegin, Job: job, AllReduce: ar, Chunks: chunks, Want: want},
				oldCtlMsg(16, job, ar, 0, uint16(min(want, 0xFFFF)), chunks)},
			{"PLAN", Ctl{Op: CtlPlan, Job: job, AllReduce: ar, Chunks: chunks, Slots: n, PSChunks: ps},
				oldCtlMsg(17, job, ar, uint32(ps), uint16(n), chunks)},
			{"FETCH", Ctl{Op: CtlFetch, Job: job, AllReduce: ar, Chunk: chunk},
				oldCtlMsg(18, job, ar, chunk, 0, 0)},
			{"PULL", Ctl{Op: CtlPull, Job: job, AllReduce: ar, Chunk: chunk},
				oldCtlMsg(19, job, ar, chunk, 0, 0)},
			{"DONE", Ctl{Op: CtlDone, Job: job, AllReduce: ar},
				oldCtlMsg(20, job, ar, 0, 0, 0)},
		}
		for _, tc := range cases {
			got := tc.c.Append(nil)
			if !bytes.Equal(got, tc.old) {
				t.Fatalf("%s %+v:\n got % x\nwant % x", tc.name, tc.c, got, tc.old)
			}
			d, err := DecodeCtl(got)
			wantC := tc.c
			wantC.Want = min(wantC.Want, MaxCtlSlots)
			if err != nil || d != wantC {
				t.Fatalf("%s: DecodeCtl = %+v, %v; want %+v", tc.name, d, err, wantC)
			}
		}
	}
}

// wireTable is the specification of which header field carries a field of
// Ctl, per opcode (the table in the package documentation).
var wireTable = map[CtlOp]struct{ chunk, exp, slot, bitmap bool }{
	CtlAlloc: {exp: true, slot: true, bitmap: true},
	CtlGrant: {chunk: true, slot: true, bitmap: true},
	CtlFree:  {},
	CtlJoin:  {chunk: true, slot: true},
	CtlLeave: {chunk: true},
	CtlLeft:  {},
	CtlBegin: {slot: true, bitmap: true},
	CtlPlan:  {chunk: true, slot: true, bitmap: true},
	CtlFetch: {chunk: true},
	CtlPull:  {chunk: true},
	CtlDone:  {},
}

// TestCtlWireTable fills every field of Ctl and checks that Encode writes
// exactly the opcode's fields of the table, and 0 elsewhere.
func TestCtlWireTable(t *testing.T) {
	full := Ctl{Job: 0x1111, AllReduce: 0x2222, Chunks: 0x33333333, Want: 0x4444, Exact: true,
		Slots: 0x5555, Base: 0x66666666, PSChunks: 0x77777777, Chunk: 0x88888888, Rank: 0x19999999}
	for op := range 256 {
		c := full
		c.Op = CtlOp(op)
		m := Header(c.Append(nil)).Meta()
		if m.Flags != CtlFlags || m.Count != 0 || m.Worker != uint8(op) || m.Job != 0x1111 || m.AllReduce != 0x2222 {
			t.Fatalf("op %d: %+v", op, m)
		}
		w := wireTable[c.Op]
		check := func(name string, carried bool, got, want uint64) {
			t.Helper()
			if !carried {
				want = 0
			}
			if got != want {
				t.Errorf("%v: %s = %#x, want %#x", c.Op, name, got, want)
			}
		}
		var chunk uint64
		switch c.Op {
		case CtlGrant:
			chunk = uint64(c.Base)
		case CtlPlan:
			chunk = uint64(c.PSChunks)
		case CtlJoin, CtlLeave:
			chunk = uint64(c.Rank)
		default:
			chunk = uint64(c.Chunk)
		}
		slot := uint64(c.Want)
		if c.Op == CtlGrant || c.Op == CtlPlan {
			slot = uint64(c.Slots)
		}
		check("chunk", w.chunk, uint64(m.Chunk), chunk)
		check("exponent", w.exp, uint64(m.Exponent), CtlExact)
		check("slot", w.slot, uint64(m.Slot), slot)
		check("bitmap", w.bitmap, uint64(m.Bitmap), uint64(c.Chunks))
		d, err := DecodeCtl(Header(c.Append(nil)))
		if _, known := wireTable[c.Op]; known != (err == nil) || known != c.Op.Known() {
			t.Errorf("op %d: known %v, DecodeCtl error %v", op, known, err)
		}
		if err == ErrCtlOp && (d != Ctl{Op: c.Op, Job: c.Job, AllReduce: c.AllReduce}) {
			t.Errorf("op %d: partial decode %+v", op, d)
		}
	}
}

func TestCtlClamp(t *testing.T) {
	cases := []struct {
		c          Ctl
		slot       uint16
		chunkField uint32
	}{
		{Ctl{Op: CtlAlloc, Want: -1}, 0, 0},
		{Ctl{Op: CtlAlloc, Want: 0x10000}, 0xFFFF, 0},
		{Ctl{Op: CtlBegin, Want: math.MaxInt}, 0xFFFF, 0},
		{Ctl{Op: CtlBegin, Want: math.MinInt}, 0, 0},
		// A lease of MaxSlots (1<<16) aggregators: the old uint16()
		// conversion wrote 0 (= PS path); the clamp writes 65535.
		{Ctl{Op: CtlGrant, Slots: 1 << 16, Base: -3}, 0xFFFF, 0},
		{Ctl{Op: CtlPlan, Slots: -7, PSChunks: -1}, 0, 0},
		{Ctl{Op: CtlPlan, Slots: 0xFFFF, PSChunks: int(maxChunkInt)}, 0xFFFF, uint32(maxChunkInt)},
	}
	if strconv.IntSize == 64 {
		big := uint64(1) << 40
		cases = append(cases, []struct {
			c          Ctl
			slot       uint16
			chunkField uint32
		}{
			{Ctl{Op: CtlGrant, Slots: 7, Base: int(big)}, 7, math.MaxUint32},
			{Ctl{Op: CtlPlan, Slots: 0x1FFFF, PSChunks: int(maxChunkInt + 1)}, 0xFFFF, math.MaxUint32},
		}...)
	}
	for _, tc := range cases {
		h := Header(tc.c.Append(nil))
		if h.Slot() != tc.slot || h.Chunk() != tc.chunkField {
			t.Errorf("%+v: slot %d chunk %d, want %d %d", tc.c, h.Slot(), h.Chunk(), tc.slot, tc.chunkField)
		}
	}
}

func TestDecodeCtlRejects(t *testing.T) {
	good := Ctl{Op: CtlPlan, Job: 1, AllReduce: 2, Chunks: 3, Slots: 4, PSChunks: 5}.Append(nil)
	cases := []struct {
		name  string
		mod   func([]byte) []byte
		err   error
		isCtl bool
	}{
		{"ok", func(b []byte) []byte { return b }, nil, true},
		{"trailing bytes", func(b []byte) []byte { return append(b, 1, 2, 3, 4) }, nil, true},
		{"empty", func(b []byte) []byte { return b[:0] }, ErrShort, false},
		{"nil", func([]byte) []byte { return nil }, ErrShort, false},
		{"short", func(b []byte) []byte { return b[:Len-1] }, ErrShort, false},
		{"version", func(b []byte) []byte { b[0] = 0xA2; return b }, ErrVersion, false},
		{"FlagCtl only", func(b []byte) []byte { b[1] = FlagCtl; return b }, ErrNotCtl, false},
		{"FlagBypass only", func(b []byte) []byte { b[1] = FlagBypass; return b }, ErrNotCtl, false},
		{"no flags", func(b []byte) []byte { b[1] = 0; return b }, ErrNotCtl, false},
		{"other flags only", func(b []byte) []byte { b[1] = 0x3F; return b }, ErrNotCtl, false},
		{"op 0", func(b []byte) []byte { b[12] = 0; return b }, ErrCtlOp, true},
		{"op 7", func(b []byte) []byte { b[12] = 7; return b }, ErrCtlOp, true},
		{"op 15", func(b []byte) []byte { b[12] = 15; return b }, ErrCtlOp, true},
		{"op 21", func(b []byte) []byte { b[12] = 21; return b }, ErrCtlOp, true},
		{"op 255", func(b []byte) []byte { b[12] = 255; return b }, ErrCtlOp, true},
		// Tolerated, as today's receivers tolerate them.
		{"extra flags", func(b []byte) []byte { b[1] = 0xFF; return b }, nil, true},
		{"count", func(b []byte) []byte { Header(b).SetCount(3); return b }, nil, true},
		{"exponent", func(b []byte) []byte { b[13] = 0x7F; return b }, nil, true},
	}
	want, _ := DecodeCtl(good)
	for _, tc := range cases {
		b := tc.mod(append([]byte(nil), good...))
		c, err := DecodeCtl(b)
		if err != tc.err {
			t.Errorf("%s: error %v, want %v", tc.name, err, tc.err)
		}
		if got := Header(b).IsCtl(); got != tc.isCtl {
			t.Errorf("%s: IsCtl %v", tc.name, got)
		}
		switch tc.err {
		case nil:
			if c != want {
				t.Errorf("%s: %+v, want %+v", tc.name, c, want)
			}
		case ErrCtlOp:
			if c.Op != CtlOp(b[12]) || c.Job != 1 || c.AllReduce != 2 || c.Chunks != 0 || c.Slots != 0 {
				t.Errorf("%s: partial %+v", tc.name, c)
			}
		default:
			if c != (Ctl{}) {
				t.Errorf("%s: %+v, want zero", tc.name, c)
			}
		}
	}
	// Fields an opcode does not use are ignored when decoding.
	b := oldCtlMsg(18, 1, 2, 77, 0xABCD, 0x1234)
	b[13] = 1
	if c, err := DecodeCtl(b); err != nil || c != (Ctl{Op: CtlFetch, Job: 1, AllReduce: 2, Chunk: 77}) {
		t.Errorf("FETCH with noise: %+v, %v", c, err)
	}
	// Exact only for CtlExact in the exponent byte.
	for e, exact := range map[uint8]bool{0: false, 1: true, 2: false, 0xFF: false} {
		b := oldToSwitch(1, 1, 2, 5, 6)
		b[13] = e
		if c, _ := DecodeCtl(b); c.Exact != exact {
			t.Errorf("exponent %d: Exact %v", e, c.Exact)
		}
	}
}

func TestIsAbsorbed(t *testing.T) {
	// A worker's contribution, as the switch forwards it trimmed to the
	// PS: FlagCtl added, Count 0, the rest as sent.
	contrib := Append(nil, Meta{Job: 1, AllReduce: 9, Chunk: 4, Worker: 3, Bitmap: 1 << 3}, []int32{1, 2})
	trim := append([]byte(nil), contrib[:Len]...)
	Header(trim).AddFlags(FlagCtl)
	Header(trim).SetCount(0)
	if h := Header(trim); !h.IsAbsorbed() || h.IsCtl() {
		t.Fatalf("trimmed: IsAbsorbed %v IsCtl %v", h.IsAbsorbed(), h.IsCtl())
	}
	Header(trim).AddFlags(FlagResend)
	if !Header(trim).IsAbsorbed() {
		t.Fatal("FlagResend|FlagCtl is still absorbed")
	}
	for name, b := range map[string][]byte{
		"contribution": contrib,
		"ctl message":  Ctl{Op: CtlDone, Job: 1}.Append(nil),
		"short":        trim[:Len-1],
		"version":      append([]byte{0xA0}, trim[1:]...),
		"count":        func() []byte { b := append([]byte(nil), trim...); Header(b).SetCount(1); return b }(),
	} {
		if Header(b).IsAbsorbed() {
			t.Errorf("%s: IsAbsorbed", name)
		}
	}
}

func TestCtlAllocateNothing(t *testing.T) {
	var b [Len]byte
	buf := make([]byte, 0, 4*Len)
	c := Ctl{Op: CtlGrant, Job: 1, AllReduce: 2, Chunks: 3, Slots: 4, Base: 5}
	var sink Ctl
	n := testing.AllocsPerRun(100, func() {
		c.Encode(b[:])
		d, err := DecodeCtl(b[:])
		if err != nil {
			panic(err)
		}
		sink = d
		_ = Header(b[:]).IsCtl() || Header(b[:]).IsAbsorbed()
		buf = c.Append(buf[:0])
		_ = c.Op.String()
	})
	if n != 0 || sink != c {
		t.Fatalf("%v allocs", n)
	}
}

func TestCtlLayer(t *testing.T) {
	c := Ctl{Op: CtlPlan, Job: 1, AllReduce: 9, Chunks: 100, Slots: 64, PSChunks: 36}
	icrc := []byte{1, 2, 3, 4}
	b := append(c.Append(nil), icrc...)
	p := gopacket.NewPacket(b, CtlLayerType, gopacket.Default)
	l, ok := p.Layer(CtlLayerType).(*CtlLayer)
	if !ok {
		t.Fatalf("no INACtl layer: %v", p.ErrorLayer())
	}
	if l.Ctl != c || !bytes.Equal(l.LayerContents(), b[:Len]) || !bytes.Equal(l.LayerPayload(), icrc) {
		t.Fatalf("layer %+v", l)
	}
	if s := gopacket.LayerString(l); !strings.Contains(s, c.String()) {
		t.Fatalf("LayerString %q", s)
	}
	sb := gopacket.NewSerializeBuffer()
	if err := l.SerializeTo(sb, gopacket.SerializeOptions{}); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(sb.Bytes(), b[:Len]) {
		t.Fatalf("serialize % x", sb.Bytes())
	}
	// The data layer still rejects a control message (no values), as before.
	if p := gopacket.NewPacket(b, LayerType, gopacket.Default); p.Layer(LayerType) != nil || p.ErrorLayer() == nil {
		t.Fatal("LayerType decoded a control message")
	}
	// And the control layer rejects data.
	data := Append(nil, Meta{Job: 1}, []int32{5})
	if p := gopacket.NewPacket(data, CtlLayerType, gopacket.Default); p.Layer(CtlLayerType) != nil || p.ErrorLayer() == nil {
		t.Fatal("CtlLayerType decoded data")
	}
	var dl CtlLayer
	if err := dl.DecodeFromBytes(b[:5], gopacket.NilDecodeFeedback); err != ErrShort {
		t.Fatalf("short: %v", err)
	}
}

// FuzzDecodeCtl: DecodeCtl never panics, agrees with IsCtl, IsAbsorbed
// and the gopacket layer, and a decoded message re-encodes to the fields
// of the wire table, decoding to the same Ctl. Seeds are in
// testdata/fuzz/FuzzDecodeCtl.
func FuzzDecodeCtl(f *testing.F) {
	f.Add(Ctl{Op: CtlAlloc, Job: 1, AllReduce: 2, Chunks: 3, Want: 4, Exact: true}.Append(nil))
	f.Fuzz(func(t *testing.T, b []byte) {
		h := Header(b)
		c, err := DecodeCtl(h)
		if h.IsCtl() != (err == nil || err == ErrCtlOp) {
			t.Fatalf("IsCtl %v, error %v", h.IsCtl(), err)
		}
		if h.IsCtl() && h.IsAbsorbed() {
			t.Fatal("both a control message and an absorbed marker")
		}
		var l CtlLayer
		if lerr := l.DecodeFromBytes(b, gopacket.NilDecodeFeedback); lerr != err || (err == nil && l.Ctl != c) {
			t.Fatalf("layer: %v %+v, DecodeCtl: %v %+v", lerr, l.Ctl, err, c)
		}
		if err == ErrCtlOp {
			if c.Op.Known() || c != (Ctl{Op: CtlOp(b[12]), Job: h.Job(), AllReduce: h.AllReduce()}) {
				t.Fatalf("partial %+v", c)
			}
			return
		}
		if err != nil {
			if c != (Ctl{}) {
				t.Fatalf("error %v with %+v", err, c)
			}
			return
		}
		_ = c.String()
		out := Header(c.Append(nil))
		if d, err := DecodeCtl(out); err != nil || d != c {
			t.Fatalf("re-decode %+v, %v; want %+v", d, err, c)
		}
		w, ok := wireTable[c.Op]
		if !ok {
			t.Fatalf("decoded unknown op %v", c.Op)
		}
		m, in := out.Meta(), h.Meta()
		if m.Flags != CtlFlags || m.Count != 0 || m.Worker != in.Worker || m.Job != in.Job || m.AllReduce != in.AllReduce {
			t.Fatalf("header % x from % x", out, b[:Len])
		}
		same := func(name string, carried bool, got, orig uint64) {
			if carried && got != orig || !carried && got != 0 {
				t.Fatalf("%v: %s = %#x from %#x (carried %v)", c.Op, name, got, orig, carried)
			}
		}
		chunk := uint64(in.Chunk)
		if c.Op == CtlGrant || c.Op == CtlPlan {
			chunk = min(chunk, maxChunkInt) // Base, PSChunks: int
		}
		same("chunk", w.chunk, uint64(m.Chunk), chunk)
		same("slot", w.slot, uint64(m.Slot), uint64(in.Slot))
		same("bitmap", w.bitmap, uint64(m.Bitmap), uint64(in.Bitmap))
		exp := uint64(0)
		if in.Exponent == CtlExact {
			exp = CtlExact
		}
		same("exponent", w.exp, uint64(m.Exponent), exp)
	})
}
