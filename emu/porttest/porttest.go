// Package porttest is a conformance suite for emu.Port backends. A backend's
// test calls Run with a function that makes a fresh pair of connected ports;
// the suite checks delivery, order, batching, frame sizes, headroom, buffer
// ownership, oversize handling and Close, the same way for every backend.
//
// Test frames carry the EtherType 0x88B5 (IEEE local experimental), a magic
// tag and a per-pair random run ID; the suite ignores any other frame it
// reads, so a backend may also deliver frames the test did not send (for
// example ones a kernel originates on a TAP device).
package porttest

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"math/rand/v2"
	"net"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/inabox/inabox/emu"
)

// EtherType is the EtherType of the suite's frames.
const EtherType = 0x88B5

// MinFrame is the smallest frame the suite sends: a minimum Ethernet frame
// without its FCS.
const MinFrame = 60

// waitTimeout bounds every wait for a frame or for Read to return. It is a
// hang guard, not a performance assertion.
const waitTimeout = 10 * time.Second

// MaxFramer is implemented by ports that know the largest frame they carry.
// The suite then sends a frame of exactly that size and expects a larger one
// to be refused by Write with an error.
type MaxFramer interface{ MaxFrame() int }

// Statser is implemented by ports with counters; the suite then checks that
// they count what it sent, received and dropped.
type Statser interface{ Stats() emu.PortStats }

// Run runs the conformance suite. newPair must return two fresh connected
// ports (frames written on a are read on b and vice versa, in order for a
// single writer) and arrange, with t.Cleanup, to release them and anything
// else it set up; the suite closes the ports itself too, so Close must
// tolerate being called twice.
func Run(t *testing.T, newPair func(t *testing.T) (a, b emu.Port)) {
	t.Run("Basics", func(t *testing.T) { testBasics(t, newPair) })
	t.Run("BothWays", func(t *testing.T) { testBothWays(t, newPair) })
	t.Run("Batches", func(t *testing.T) { testBatches(t, newPair) })
	t.Run("FrameSizes", func(t *testing.T) { testFrameSizes(t, newPair) })
	t.Run("Offset", func(t *testing.T) { testOffset(t, newPair) })
	t.Run("NoRetain", func(t *testing.T) { testNoRetain(t, newPair) })
	t.Run("OversizeRead", func(t *testing.T) { testOversizeRead(t, newPair) })
	t.Run("OversizeWrite", func(t *testing.T) { testOversizeWrite(t, newPair) })
	t.Run("ReadAfterClose", func(t *testing.T) { testReadAfterClose(t, newPair) })
	t.Run("CloseUnblocksRead", func(t *testing.T) { testCloseUnblocksRead(t, newPair) })
}

// Frame layout after the Ethernet header.
const (
	offMagic   = 14
	offRun     = 18
	offSeq     = 22
	offKind    = 26
	headerLen  = 27
	kindData   = 1
	kindProbe  = 2
	headroomFF = 0xEE // filler of write headroom; never a valid frame start
)

var magic = [4]byte{'P', 'T', 'S', 'T'}

// gen builds and recognizes the frames of one direction of one pair.
type gen struct {
	run      uint32
	src, dst [6]byte
}

// newGens returns the generators of the a→b and b→a directions.
func newGens() (ab, ba *gen) {
	run := rand.Uint32()
	macA := [6]byte{0x02, 0x50, 0x54, 0, 0, 0x0a}
	macB := [6]byte{0x02, 0x50, 0x54, 0, 0, 0x0b}
	return &gen{run: run, src: macA, dst: macB}, &gen{run: run ^ 0x5a5a5a5a, src: macB, dst: macA}
}

// put writes frame seq of the given kind and size into b[:size].
func (g *gen) put(b []byte, seq uint32, kind byte, size int) {
	b = b[:size]
	copy(b[0:6], g.dst[:])
	copy(b[6:12], g.src[:])
	binary.BigEndian.PutUint16(b[12:14], EtherType)
	copy(b[offMagic:], magic[:])
	binary.BigEndian.PutUint32(b[offRun:], g.run)
	binary.BigEndian.PutUint32(b[offSeq:], seq)
	b[offKind] = kind
	for i := headerLen; i < size; i++ {
		b[i] = byte(seq*7 + uint32(i)*31 + uint32(i>>8))
	}
}

// frame returns a new buffer holding data frame seq of the given size.
func (g *gen) frame(seq uint32, size int) []byte {
	b := make([]byte, size)
	g.put(b, seq, kindData, size)
	return b
}

// parse reports whether f is one of g's frames and, if so, its sequence
// number and kind.
func (g *gen) parse(f []byte) (seq uint32, kind byte, ok bool) {
	if len(f) < headerLen || binary.BigEndian.Uint16(f[12:14]) != EtherType ||
		!bytes.Equal(f[offMagic:offMagic+4], magic[:]) || binary.BigEndian.Uint32(f[offRun:]) != g.run {
		return 0, 0, false
	}
	return binary.BigEndian.Uint32(f[offSeq:]), f[offKind], true
}

// rx reads one port in the background and forwards copies of g's data frames.
type rx struct {
	port   emu.Port
	g      *gen
	frames chan []byte
	probe  chan struct{} // closed at the first probe frame
	exited chan struct{}
	err    error // Read's final error, valid after exited is closed
}

// startRx starts reading p with nbufs buffers of room bytes after offset
// bytes of headroom. It closes both ports and waits for the reader when the
// test ends.
func startRx(t *testing.T, p emu.Port, g *gen, nbufs, room, offset int, closeAlso ...emu.Port) *rx {
	t.Helper()
	if nbufs > p.BatchSize() {
		nbufs = p.BatchSize()
	}
	r := &rx{port: p, g: g, frames: make(chan []byte, 1<<16), probe: make(chan struct{}), exited: make(chan struct{})}
	bufs := make([][]byte, nbufs)
	for i := range bufs {
		bufs[i] = make([]byte, offset+room)
	}
	sizes := make([]int, nbufs)
	go func() {
		defer close(r.exited)
		defer close(r.frames)
		probed := false
		for {
			n, err := p.Read(bufs, sizes, offset)
			if err != nil {
				r.err = err
				return
			}
			if n <= 0 || n > len(bufs) {
				t.Errorf("%s: Read(%d bufs) returned n=%d and no error", p.Name(), len(bufs), n)
				return
			}
			for i := range n {
				if sizes[i] < 0 || sizes[i] > room {
					t.Errorf("%s: Read set sizes[%d]=%d, room is %d", p.Name(), i, sizes[i], room)
					return
				}
				f := bufs[i][offset : offset+sizes[i]]
				_, kind, ok := g.parse(f)
				switch {
				case !ok:
					// Not ours (e.g. kernel-originated): ignore.
				case kind == kindProbe:
					if !probed {
						probed = true
						close(r.probe)
					}
				default:
					r.frames <- bytes.Clone(f)
				}
			}
		}
	}()
	t.Cleanup(func() {
		p.Close()
		for _, q := range closeAlso {
			q.Close()
		}
		<-r.exited
	})
	return r
}

// settle writes probe frames on w until r has seen one, so that a backend
// that needs time to settle (a bridge port coming up) is ready.
func settle(t *testing.T, w emu.Port, g *gen, r *rx) {
	t.Helper()
	probe := make([]byte, MinFrame)
	g.put(probe, 0, kindProbe, MinFrame)
	deadline := time.Now().Add(waitTimeout)
	for {
		if _, err := w.Write([][]byte{probe}, 0); err != nil {
			t.Fatalf("%s: writing probe: %v", w.Name(), err)
		}
		select {
		case <-r.probe:
			return
		case <-r.exited:
			t.Fatalf("%s: reader stopped before the first probe: %v", r.port.Name(), r.err)
		case <-time.After(5 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			t.Fatalf("no probe frame from %s reached %s within %v", w.Name(), r.port.Name(), waitTimeout)
		}
	}
}

// next returns the next data frame r received.
func (r *rx) next(t *testing.T) []byte {
	t.Helper()
	select {
	case f, ok := <-r.frames:
		if !ok {
			t.Fatalf("%s: reader stopped: %v", r.port.Name(), r.err)
		}
		return f
	case <-time.After(waitTimeout):
		t.Fatalf("%s: no frame within %v", r.port.Name(), waitTimeout)
	}
	return nil
}

// expect checks that the next frames r receives are exactly want, in order.
func (r *rx) expect(t *testing.T, want [][]byte) {
	t.Helper()
	for i, w := range want {
		got := r.next(t)
		if !bytes.Equal(got, w) {
			gs, _, _ := r.g.parse(got)
			ws, _, _ := r.g.parse(w)
			t.Fatalf("%s: frame %d of %d: got seq %d (%d bytes), want seq %d (%d bytes)%s",
				r.port.Name(), i, len(want), gs, len(got), ws, len(w), diff(got, w))
		}
	}
}

func diff(got, want []byte) string {
	if len(got) != len(want) {
		return ""
	}
	for i := range got {
		if got[i] != want[i] {
			return fmt.Sprintf("; first difference at byte %d: %#02x != %#02x", i, got[i], want[i])
		}
	}
	return ""
}

// write writes frames in one call (no headroom) and requires all to be sent.
func write(t *testing.T, p emu.Port, frames [][]byte) {
	t.Helper()
	n, err := p.Write(frames, 0)
	if err != nil || n != len(frames) {
		t.Fatalf("%s: Write(%d frames) = %d, %v", p.Name(), len(frames), n, err)
	}
}

// maxFrame is the largest frame the suite expects p to carry.
func maxFrame(p emu.Port) int {
	if m, ok := p.(MaxFramer); ok {
		return m.MaxFrame()
	}
	return 1514
}

func stats(p emu.Port) (emu.PortStats, bool) {
	if s, ok := p.(Statser); ok {
		return s.Stats(), true
	}
	return emu.PortStats{}, false
}

func testBasics(t *testing.T, newPair func(*testing.T) (emu.Port, emu.Port)) {
	a, b := newPair(t)
	defer a.Close()
	defer b.Close()
	for _, p := range []emu.Port{a, b} {
		if p.Name() == "" {
			t.Errorf("%T: empty Name", p)
		}
		if p.BatchSize() < 1 {
			t.Errorf("%s: BatchSize() = %d, want >= 1", p.Name(), p.BatchSize())
		}
		if m, ok := p.(MaxFramer); ok && m.MaxFrame() < 1514 {
			t.Errorf("%s: MaxFrame() = %d, want >= 1514", p.Name(), m.MaxFrame())
		}
	}
	if a.Name() == b.Name() {
		t.Errorf("both ends are named %q", a.Name())
	}
}

// testBothWays sends frames of varied sizes in both directions at once.
func testBothWays(t *testing.T, newPair func(*testing.T) (emu.Port, emu.Port)) {
	a, b := newPair(t)
	gab, gba := newGens()
	rb := startRx(t, b, gab, b.BatchSize(), 1514, 0, a)
	ra := startRx(t, a, gba, a.BatchSize(), 1514, 0, b)
	settle(t, a, gab, rb)
	settle(t, b, gba, ra)
	before := map[emu.Port]emu.PortStats{}
	for _, p := range []emu.Port{a, b} {
		before[p], _ = stats(p)
	}

	const n = 500
	mk := func(g *gen) [][]byte {
		fs := make([][]byte, n)
		for i := range fs {
			fs[i] = g.frame(uint32(i), MinFrame+(i*97)%(1500-MinFrame+1))
		}
		return fs
	}
	fab, fba := mk(gab), mk(gba)
	var wg sync.WaitGroup
	errs := make(chan error, 2)
	for _, d := range []struct {
		p  emu.Port
		fs [][]byte
	}{{a, fab}, {b, fba}} {
		wg.Go(func() {
			for fs := d.fs; len(fs) > 0; {
				k := min(len(fs), 1+len(fs)%d.p.BatchSize())
				if m, err := d.p.Write(fs[:k], 0); err != nil || m != k {
					errs <- fmt.Errorf("%s: Write(%d) = %d, %v", d.p.Name(), k, m, err)
					return
				}
				fs = fs[k:]
			}
		})
	}
	rb.expect(t, fab)
	ra.expect(t, fba)
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}

	var bytesN uint64
	for _, f := range fab {
		bytesN += uint64(len(f))
	}
	for _, p := range []emu.Port{a, b} {
		after, ok := stats(p)
		if !ok {
			continue
		}
		d := before[p]
		if w := after.FramesWritten - d.FramesWritten; w < n {
			t.Errorf("%s: Stats FramesWritten grew by %d, want >= %d", p.Name(), w, n)
		}
		if r := after.FramesRead - d.FramesRead; r < n {
			t.Errorf("%s: Stats FramesRead grew by %d, want >= %d", p.Name(), r, n)
		}
		if after.BytesWritten-d.BytesWritten < bytesN/2 || after.BytesRead-d.BytesRead < bytesN/2 {
			t.Errorf("%s: Stats bytes did not grow with the traffic: %+v -> %+v", p.Name(), d, after)
		}
	}
}

// batchSizes lists the batch sizes to try: all of 1..max for small max.
func batchSizes(max int) []int {
	if max <= 64 {
		s := make([]int, max)
		for i := range s {
			s[i] = i + 1
		}
		return s
	}
	return []int{1, 2, 3, 7, 16, 31, max / 2, max - 1, max}
}

// testBatches writes batches of every size 1..BatchSize; a reads with fewer
// buffers than b, so batches are also split across Reads.
func testBatches(t *testing.T, newPair func(*testing.T) (emu.Port, emu.Port)) {
	a, b := newPair(t)
	gab, gba := newGens()
	rb := startRx(t, b, gab, b.BatchSize(), 1514, 0, a)
	ra := startRx(t, a, gba, a.BatchSize()/2+1, 1514, 0, b)
	settle(t, a, gab, rb)
	settle(t, b, gba, ra)
	for _, d := range []struct {
		w emu.Port
		g *gen
		r *rx
	}{{a, gab, rb}, {b, gba, ra}} {
		seq := uint32(0)
		var all [][]byte
		for _, k := range batchSizes(d.w.BatchSize()) {
			fs := make([][]byte, k)
			for i := range fs {
				fs[i] = d.g.frame(seq, MinFrame+int(seq%200)*7)
				seq++
			}
			write(t, d.w, fs)
			all = append(all, fs...)
		}
		d.r.expect(t, all)
	}
}

// testFrameSizes sends single frames from 60 bytes up to MaxFrame.
func testFrameSizes(t *testing.T, newPair func(*testing.T) (emu.Port, emu.Port)) {
	a, b := newPair(t)
	gab, gba := newGens()
	maxA, maxB := maxFrame(a), maxFrame(b)
	rb := startRx(t, b, gab, b.BatchSize(), maxA, 0, a)
	ra := startRx(t, a, gba, a.BatchSize(), maxB, 0, b)
	settle(t, a, gab, rb)
	settle(t, b, gba, ra)
	for _, d := range []struct {
		w   emu.Port
		g   *gen
		r   *rx
		max int
	}{{a, gab, rb, maxA}, {b, gba, ra, maxB}} {
		sizes := []int{60, 61, 63, 64, 65, 100, 127, 128, 256, 511, 512, 1000, 1024, 1499, 1500, 1514, 4096, 9000, 9014, d.max - 1, d.max}
		slices.Sort(sizes)
		sizes = slices.Compact(sizes)
		var all [][]byte
		for i, size := range sizes {
			if size > d.max {
				continue
			}
			f := d.g.frame(uint32(i), size)
			write(t, d.w, [][]byte{f})
			all = append(all, f)
		}
		d.r.expect(t, all)
	}
}

// testOffset writes with headroom full of junk and reads with headroom: only
// bufs[i][offset:] may travel, and a Read frame must start at offset.
func testOffset(t *testing.T, newPair func(*testing.T) (emu.Port, emu.Port)) {
	a, b := newPair(t)
	gab, gba := newGens()
	rb := startRx(t, b, gab, b.BatchSize(), 1514, 0, a)
	ra := startRx(t, a, gba, a.BatchSize(), 1514, 128, b)
	settle(t, a, gab, rb)
	settle(t, b, gba, ra)
	for _, d := range []struct {
		w emu.Port
		g *gen
		r *rx
	}{{a, gab, rb}, {b, gba, ra}} {
		seq := uint32(0)
		var all [][]byte
		for _, off := range []int{0, 1, 2, 14, 64, 128, emu.DefaultHeadroom} {
			k := min(d.w.BatchSize(), 5)
			bufs := make([][]byte, k)
			for i := range bufs {
				size := MinFrame + int(seq)*13
				f := d.g.frame(seq, size)
				seq++
				buf := bytes.Repeat([]byte{headroomFF}, off+size)
				copy(buf[off:], f)
				bufs[i] = buf
				all = append(all, f)
			}
			n, err := d.w.Write(bufs, off)
			if err != nil || n != k {
				t.Fatalf("%s: Write(%d frames, offset %d) = %d, %v", d.w.Name(), k, off, n, err)
			}
		}
		d.r.expect(t, all)
	}
}

// testNoRetain overwrites the caller's buffers right after Write returns; the
// receiver must still get the frames as they were at the time of Write.
func testNoRetain(t *testing.T, newPair func(*testing.T) (emu.Port, emu.Port)) {
	a, b := newPair(t)
	gab, _ := newGens()
	rb := startRx(t, b, gab, b.BatchSize(), 1514, 0, a)
	settle(t, a, gab, rb)
	var all [][]byte
	bufs := make([][]byte, a.BatchSize())
	for i := range bufs {
		bufs[i] = make([]byte, 1000)
	}
	seq := uint32(0)
	for range 4 {
		for i := range bufs {
			gab.put(bufs[i], seq, kindData, len(bufs[i]))
			all = append(all, bytes.Clone(bufs[i]))
			seq++
		}
		write(t, a, bufs)
		for i := range bufs {
			for j := range bufs[i] {
				bufs[i][j] = 0xFF
			}
		}
	}
	rb.expect(t, all)
}

// testOversizeRead sends frames longer than the reader's buffers: they must
// be dropped (and counted), never delivered truncated, and later frames must
// still arrive.
func testOversizeRead(t *testing.T, newPair func(*testing.T) (emu.Port, emu.Port)) {
	a, b := newPair(t)
	gab, _ := newGens()
	const room = 600
	rb := startRx(t, b, gab, b.BatchSize(), room, 16, a)
	settle(t, a, gab, rb)
	before, _ := stats(b)
	f0 := gab.frame(0, 1000)
	f1 := gab.frame(1, room) // fits exactly
	f2 := gab.frame(2, room+1)
	f3 := gab.frame(3, 100)
	write(t, a, [][]byte{f0, f1})
	write(t, a, [][]byte{f2})
	write(t, a, [][]byte{f3})
	rb.expect(t, [][]byte{f1, f3})
	if after, ok := stats(b); ok {
		if d := after.RxOversize - before.RxOversize; d < 2 {
			t.Errorf("%s: Stats RxOversize grew by %d, want >= 2", b.Name(), d)
		}
	}
}

// testOversizeWrite writes a frame one byte over MaxFrame in the middle of a
// batch: Write must stop there with an error, and the frame must not arrive.
func testOversizeWrite(t *testing.T, newPair func(*testing.T) (emu.Port, emu.Port)) {
	a, b := newPair(t)
	if _, ok := a.(MaxFramer); !ok {
		t.Skipf("%T does not report MaxFrame", a)
	}
	if a.BatchSize() < 3 {
		t.Skipf("%s: BatchSize %d < 3", a.Name(), a.BatchSize())
	}
	gab, _ := newGens()
	mf := maxFrame(a)
	rb := startRx(t, b, gab, b.BatchSize(), mf+1, 0, a)
	settle(t, a, gab, rb)
	before, _ := stats(a)
	f0, f1, f2 := gab.frame(0, 100), gab.frame(1, mf+1), gab.frame(2, 200)
	n, err := a.Write([][]byte{f0, f1, f2}, 0)
	if err == nil || n != 1 {
		t.Fatalf("%s: Write(ok, %d bytes > MaxFrame %d, ok) = %d, %v; want 1 and an error", a.Name(), mf+1, mf, n, err)
	}
	if !errors.Is(err, emu.ErrFrameTooLarge) {
		t.Errorf("%s: oversize Write error %v does not wrap emu.ErrFrameTooLarge", a.Name(), err)
	}
	write(t, a, [][]byte{f2})
	rb.expect(t, [][]byte{f0, f2})
	if after, ok := stats(a); ok && after.TxOversize-before.TxOversize != 1 {
		t.Errorf("%s: Stats TxOversize grew by %d, want 1", a.Name(), after.TxOversize-before.TxOversize)
	}
}

func testReadAfterClose(t *testing.T, newPair func(*testing.T) (emu.Port, emu.Port)) {
	a, b := newPair(t)
	defer b.Close()
	if err := a.Close(); err != nil {
		t.Fatalf("%s: Close: %v", a.Name(), err)
	}
	bufs, sizes := [][]byte{make([]byte, 1514)}, []int{0}
	n, err := a.Read(bufs, sizes, 0)
	if n != 0 || !errors.Is(err, net.ErrClosed) {
		t.Errorf("%s: Read after Close = %d, %v; want 0 and an error wrapping net.ErrClosed", a.Name(), n, err)
	}
	gab, _ := newGens()
	if n, err := a.Write([][]byte{gab.frame(0, 100)}, 0); n != 0 || err == nil {
		t.Errorf("%s: Write after Close = %d, %v; want 0 and an error", a.Name(), n, err)
	}
	a.Close() // a second Close must not panic
}

func testCloseUnblocksRead(t *testing.T, newPair func(*testing.T) (emu.Port, emu.Port)) {
	for _, end := range []string{"a", "b"} {
		a, b := newPair(t)
		p := a
		if end == "b" {
			p = b
		}
		type result struct {
			n   int
			err error
		}
		done := make(chan result, 1)
		go func() {
			bufs, sizes := [][]byte{make([]byte, 1514)}, []int{0}
			for {
				n, err := p.Read(bufs, sizes, 0)
				if err != nil {
					done <- result{n, err}
					return
				}
				// Frames the test did not send (kernel-originated) may arrive;
				// keep reading until Close.
			}
		}()
		time.Sleep(20 * time.Millisecond) // let Read block; correctness does not depend on it
		if err := p.Close(); err != nil {
			t.Errorf("%s: Close: %v", p.Name(), err)
		}
		select {
		case r := <-done:
			if r.n != 0 || !errors.Is(r.err, net.ErrClosed) {
				t.Errorf("%s: Read unblocked by Close = %d, %v; want 0 and an error wrapping net.ErrClosed", p.Name(), r.n, r.err)
			}
		case <-time.After(waitTimeout):
			t.Fatalf("%s: Close did not unblock Read within %v", p.Name(), waitTimeout)
		}
		a.Close()
		b.Close()
	}
}
