package emu

import (
	"bytes"
	"testing"
)

// A packet starts in its pool's smallest buffer and moves up only when a
// frame needs it, keeping the frame, its headroom and its metadata; a
// recycled packet is small again; the buffer classes cost no allocation
// once every class was used.
func TestPacketClasses(t *testing.T) {
	pl := NewPool(DefaultHeadroom, DefaultMaxFrame)
	p := pl.Get()
	if len(p.buf) != DefaultHeadroom+SmallFrame {
		t.Fatalf("a new packet's buffer is %d bytes, want %d", len(p.buf), DefaultHeadroom+SmallFrame)
	}
	p.SetBytes(bytes.Repeat([]byte{7}, 300))
	copy(p.Prepend(4), "hdr!")
	p.Port, p.Arrival = 3, 42
	for _, n := range []int{304, 1000, 1520, 9000, 60} {
		p.SetLen(n)
		b := p.Bytes()
		if len(b) != n || string(b[:4]) != "hdr!" || b[4] != 7 || (n >= 304 && b[303] != 7) {
			t.Fatalf("SetLen(%d): frame %d bytes, head %q: the frame was not kept", n, len(b), b[:4])
		}
		if p.Headroom() != DefaultHeadroom-4 || p.Port != 3 || p.Arrival != 42 {
			t.Fatalf("SetLen(%d): headroom %d, port %d, arrival %v", n, p.Headroom(), p.Port, p.Arrival)
		}
	}
	if len(p.buf) != DefaultHeadroom+DefaultMaxFrame {
		t.Errorf("after a 9000-byte frame the buffer is %d bytes", len(p.buf))
	}
	if p.Tailroom() != DefaultHeadroom+DefaultMaxFrame-p.end {
		t.Errorf("Tailroom %d", p.Tailroom())
	}
	c := pl.Clone(p)
	if !bytes.Equal(c.Bytes(), p.Bytes()) || c.Headroom() != p.Headroom() {
		t.Errorf("Clone differs")
	}
	pl.Put(c)
	pl.Put(p)
	q := pl.Get()
	if q.Len() != 0 || q.Headroom() != DefaultHeadroom || len(q.buf) > DefaultHeadroom+SmallFrame {
		t.Errorf("a recycled packet: len %d, headroom %d, buffer %d", q.Len(), q.Headroom(), len(q.buf))
	}
	if buf, off := q.Buffer(); len(buf) != DefaultHeadroom+DefaultMaxFrame || off != DefaultHeadroom {
		t.Errorf("Buffer: %d bytes at %d, want the full size", len(buf), off)
	}
	func() {
		defer func() {
			if recover() == nil {
				t.Errorf("SetLen beyond the pool's frame size did not panic")
			}
		}()
		q.SetLen(DefaultMaxFrame + 1)
	}()
	pl.Put(q)
	one := pl.Get()
	pl.Put(one)
	allocs := testing.AllocsPerRun(100, func() {
		p := pl.Get()
		p.SetLen(200)
		p.SetLen(1400)
		p.SetLen(8000)
		pl.Put(p)
	})
	if allocs > 0.05 {
		t.Errorf("%.2f allocations per Get/grow/Put cycle, want 0", allocs)
	}
}
