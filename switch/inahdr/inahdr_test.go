package inahdr

import (
	"bytes"
	"testing"

	"github.com/gopacket/gopacket"
)

func TestFieldsContiguous(t *testing.T) {
	off := 0
	for _, f := range Fields {
		if f.Off != off || f.Bits%8 != 0 {
			t.Fatalf("field %s at %d bits %d, want offset %d", f.Name, f.Off, f.Bits, off)
		}
		off += f.Bits / 8
	}
	if off != Len {
		t.Fatalf("fields cover %d bytes, Len is %d", off, Len)
	}
}

func TestRoundTrip(t *testing.T) {
	m := Meta{Flags: FlagResult | FlagOverflow, Job: 7, AllReduce: 0xBEEF, Chunk: 0x01020304,
		Worker: 31, Exponent: -3, Slot: 0x1234, Bitmap: 0x80000001}
	vals := []int32{1, -1, 1 << 30, -1 << 31}
	b := Append(nil, m, vals)
	if len(b) != Len+16 {
		t.Fatalf("len %d", len(b))
	}
	m.Count = 4
	got, gv, err := Decode(b)
	if err != nil || got != m {
		t.Fatalf("Decode = %+v, %v; want %+v", got, err, m)
	}
	for i := range vals {
		if gv[i] != vals[i] {
			t.Fatalf("value %d = %d", i, gv[i])
		}
	}
	// Byte-exact check of the layout against the diagram.
	want := []byte{0xA1, 0x0A, 0, 7, 0xBE, 0xEF, 0, 4, 1, 2, 3, 4, 31, 0xFD, 0x12, 0x34, 0x80, 0, 0, 1,
		0, 0, 0, 1, 0xFF, 0xFF, 0xFF, 0xFF, 0x40, 0, 0, 0, 0x80, 0, 0, 0}
	if !bytes.Equal(b, want) {
		t.Fatalf("bytes\n got % x\nwant % x", b, want)
	}
	// gopacket layer agrees with the view.
	p := gopacket.NewPacket(b, LayerType, gopacket.Default)
	l, ok := p.Layer(LayerType).(*Layer)
	if !ok {
		t.Fatalf("no INA layer: %v", p.ErrorLayer())
	}
	if l.Meta != m || len(l.Values) != 4 || l.Values[3] != vals[3] {
		t.Fatalf("layer %+v", l)
	}
	sb := gopacket.NewSerializeBuffer()
	if err := l.SerializeTo(sb, gopacket.SerializeOptions{}); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(sb.Bytes(), b) {
		t.Fatalf("serialize mismatch")
	}
}

func TestValidate(t *testing.T) {
	good := Append(nil, Meta{Job: 1}, []int32{5})
	cases := []struct {
		name string
		mod  func([]byte) []byte
		want error
	}{
		{"ok", func(b []byte) []byte { return b }, nil},
		{"short", func(b []byte) []byte { return b[:Len-1] }, ErrShort},
		{"version", func(b []byte) []byte { b[0] = 0xA2; return b }, ErrVersion},
		{"zero count", func(b []byte) []byte { Header(b).SetCount(0); return b }, ErrCount},
		{"huge count", func(b []byte) []byte { Header(b).SetCount(MaxValues + 1); return b }, ErrCount},
		{"truncated", func(b []byte) []byte { return b[:len(b)-1] }, ErrValues},
		{"job0", func(b []byte) []byte { Header(b).SetJob(0); return b }, ErrJob},
		{"worker", func(b []byte) []byte { Header(b).SetWorker(32); return b }, ErrWorker},
	}
	for _, c := range cases {
		b := c.mod(append([]byte(nil), good...))
		if err := Header(b).Validate(); err != c.want {
			t.Errorf("%s: %v, want %v", c.name, err, c.want)
		}
	}
}

func TestAccessorsAllocateNothing(t *testing.T) {
	b := Append(nil, Meta{Job: 1}, make([]int32, 64))
	h := Header(b)
	n := testing.AllocsPerRun(100, func() {
		_ = h.Validate()
		h.SetFlags(h.Flags() | FlagResult)
		for i := 0; i < h.Count(); i++ {
			h.SetValue(i, h.Value(i)+1)
		}
	})
	if n != 0 {
		t.Fatalf("%v allocs", n)
	}
}

func FuzzDecode(f *testing.F) {
	f.Add(Append(nil, Meta{Job: 1, Worker: 2}, []int32{1, 2, 3}))
	f.Add([]byte{0xA1})
	f.Add(make([]byte, 40))
	f.Fuzz(func(t *testing.T, b []byte) {
		m, vals, err := Decode(b)
		if err != nil {
			return
		}
		// A decoded header re-encodes to the same bytes.
		out := Append(nil, m, vals)
		if !bytes.Equal(out, b[:len(out)]) {
			t.Fatalf("re-encode mismatch\n got % x\nwant % x", out, b[:len(out)])
		}
		var l Layer
		if err := l.DecodeFromBytes(b, gopacket.NilDecodeFeedback); err != nil || l.Meta != m {
			t.Fatalf("layer disagrees: %v", err)
		}
	})
}

// TestReadValues: ReadValues gives Value(i) for every i, for every count
// from 0 to 80 (the 16-wide part, the eight-wide part and every tail) and
// a prefix of the values, with the wide kernel and without it; it
// allocates nothing.
func TestReadValues(t *testing.T) {
	h := make(Header, Len+4*80)
	for i := range 80 {
		h.SetValue(i, int32(i*0x01234567-i*i))
	}
	for _, wide := range wideSettings() {
		defer setWideValues(wide)()
		for n := 0; n <= 80; n++ {
			h.SetCount(n)
			for _, k := range []int{n, n / 2, n &^ 15} {
				got := make([]int32, k)
				h.ReadValues(got)
				for i, g := range got {
					if g != h.Value(i) {
						t.Fatalf("wide %v, count %d, %d read: value %d = %d, want %d", wide, n, k, i, g, h.Value(i))
					}
				}
			}
		}
	}
	h.SetCount(40)
	dst := make([]int32, 40)
	if a := testing.AllocsPerRun(100, func() { h.ReadValues(dst) }); a != 0 {
		t.Fatalf("%v allocations", a)
	}
}

// wideSettings returns the settings of wideValues this build and CPU
// have: false, and true where the wide kernel exists.
func wideSettings() []bool {
	if wideValues {
		return []bool{false, true}
	}
	return []bool{false}
}

// setWideValues sets wideValues and returns what puts it back.
func setWideValues(on bool) func() {
	was := wideValues
	wideValues = on
	return func() { wideValues = was }
}

// FuzzReadValues: ReadValues of any bytes and any count gives what
// Value gives, with the wide kernel and without it, and writes nothing
// past the values it reads.
func FuzzReadValues(f *testing.F) {
	f.Add(make([]byte, Len+4*64), uint8(64))
	f.Add([]byte("0123456789abcdefghijklmnopqrstuvwxyz0123456789abcdefghijklmnopqrstuvwxyz0123456789abcdef"), uint8(17))
	f.Fuzz(func(t *testing.T, b []byte, k uint8) {
		if len(b) < Len {
			return
		}
		h := Header(b)
		n := min(int(k), (len(b)-Len)/4)
		for _, wide := range wideSettings() {
			restore := setWideValues(wide)
			got := make([]int32, n+1)
			got[n] = 0x5a5a5a5a
			h.ReadValues(got[:n])
			restore()
			for i := range n {
				if got[i] != h.Value(i) {
					t.Fatalf("wide %v, %d read: value %d = %d, want %d", wide, n, i, got[i], h.Value(i))
				}
			}
			if got[n] != 0x5a5a5a5a {
				t.Fatalf("wide %v: wrote past %d values", wide, n)
			}
		}
	})
}

// FuzzEncode holds Encode equal to setting each field on its own, and
// writing nothing past the header.
func FuzzEncode(f *testing.F) {
	f.Add(uint8(0), uint16(1), uint16(2), 64, uint32(3), uint8(4), int8(-5), uint16(6), uint32(1<<4))
	f.Add(uint8(0xFF), uint16(0xFFFF), uint16(0xFFFF), 70000, uint32(0xFFFFFFFF), uint8(0xFF), int8(-128), uint16(0xFFFF), uint32(0xFFFFFFFF))
	f.Fuzz(func(t *testing.T, flags uint8, job, ar uint16, count int, chunk uint32, worker uint8, exp int8, slot uint16, bitmap uint32) {
		m := Meta{Flags: flags, Job: job, AllReduce: ar, Count: count, Chunk: chunk, Worker: worker, Exponent: exp, Slot: slot, Bitmap: bitmap}
		got, want := make([]byte, Len+3), make([]byte, Len+3)
		for i := range got {
			got[i], want[i] = 0xA5, 0xA5
		}
		Header(got).Encode(m)
		w := Header(want)
		w[0], w[1] = Version, flags
		w.SetJob(job)
		w.SetAllReduce(ar)
		w.SetCount(count)
		w.SetChunk(chunk)
		w.SetWorker(worker)
		w[13] = uint8(exp)
		w.SetSlot(slot)
		w.SetBitmap(bitmap)
		if !bytes.Equal(got, want) {
			t.Fatalf("Encode(%+v) = %x, want %x", m, got, want)
		}
	})
}
