package emu_test

import (
	"errors"
	"io"
	"net"
	"testing"
	"testing/synctest"

	"github.com/inabox/inabox/emu"
	"github.com/inabox/inabox/emu/porttest"
)

func memPair(batch, depth int) func(t *testing.T) (emu.Port, emu.Port) {
	return func(t *testing.T) (emu.Port, emu.Port) {
		a, b := emu.NewMemPipe(batch, depth)
		t.Cleanup(func() {
			a.Close()
			b.Close()
		})
		return a, b
	}
}

func TestMemPortConformance(t *testing.T) {
	t.Run("batch64-depth4", func(t *testing.T) { porttest.Run(t, memPair(64, 4)) })
	t.Run("batch3-depth1", func(t *testing.T) { porttest.Run(t, memPair(3, 1)) })
	t.Run("defaults", func(t *testing.T) { porttest.Run(t, memPair(0, 0)) })
}

func makeBatch(n, size int) [][]byte {
	bufs := make([][]byte, n)
	for i := range bufs {
		bufs[i] = make([]byte, size)
		for j := range bufs[i] {
			bufs[i][j] = byte(i + j)
		}
	}
	return bufs
}

// TestMemPipeAllocs checks that a warmed-up pipe moves a batch without
// allocating.
func TestMemPipeAllocs(t *testing.T) {
	a, b := emu.NewMemPipe(64, 4)
	defer a.Close()
	defer b.Close()
	out := makeBatch(64, 256)
	in := makeBatch(64, 1600)
	sizes := make([]int, 64)
	allocs := testing.AllocsPerRun(100, func() {
		if n, err := a.Write(out, 14); n != 64 || err != nil {
			t.Fatalf("Write = %d, %v", n, err)
		}
		for got := 0; got < 64; {
			n, err := b.Read(in[got:], sizes[got:], 0)
			if err != nil {
				t.Fatalf("Read: %v", err)
			}
			got += n
		}
	})
	if allocs != 0 {
		t.Errorf("Write+Read of a 64-frame batch allocates %v times, want 0", allocs)
	}
}

// TestMemPipeSynctest shows that the pipe blocks only on channels: inside a
// synctest bubble a Write into a full pipe is durably blocked until the peer
// reads (back-pressure, no drops).
func TestMemPipeSynctest(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		a, b := emu.NewMemPipe(2, 1)
		defer a.Close()
		defer b.Close()
		frame := [][]byte{make([]byte, 60), make([]byte, 60)}
		if n, err := a.Write(frame, 0); n != 2 || err != nil {
			t.Fatalf("first Write = %d, %v", n, err)
		}
		written := make(chan struct{})
		go func() {
			defer close(written)
			if n, err := a.Write(frame, 0); n != 2 || err != nil {
				t.Errorf("second Write = %d, %v", n, err)
			}
		}()
		synctest.Wait()
		select {
		case <-written:
			t.Fatal("Write into a full pipe (depth 1) did not block")
		default:
		}
		bufs, sizes := makeBatch(2, 100), make([]int, 2)
		if n, err := b.Read(bufs, sizes, 0); n != 2 || err != nil {
			t.Fatalf("Read = %d, %v", n, err)
		}
		synctest.Wait()
		select {
		case <-written:
		default:
			t.Fatal("Write still blocked after the peer read")
		}
		if st := a.Stats(); st.FramesWritten != 4 || st.BytesWritten != 240 {
			t.Errorf("Stats = %+v, want 4 frames / 240 bytes written", st)
		}
	})
}

// TestMemPipePeerClose checks the net.Pipe-like behaviour after the peer
// closes: queued frames are still read, then io.EOF; Write fails.
func TestMemPipePeerClose(t *testing.T) {
	a, b := emu.NewMemPipe(4, 2)
	defer b.Close()
	if n, err := a.Write(makeBatch(3, 60), 0); n != 3 || err != nil {
		t.Fatalf("Write = %d, %v", n, err)
	}
	a.Close()
	bufs, sizes := makeBatch(4, 100), make([]int, 4)
	if n, err := b.Read(bufs, sizes, 0); n != 3 || err != nil {
		t.Fatalf("Read of queued frames after peer Close = %d, %v; want 3, nil", n, err)
	}
	if n, err := b.Read(bufs, sizes, 0); n != 0 || err != io.EOF {
		t.Errorf("Read after draining = %d, %v; want 0, io.EOF", n, err)
	}
	if n, err := b.Write(bufs[:1], 0); n != 0 || !errors.Is(err, io.ErrClosedPipe) {
		t.Errorf("Write after peer Close = %d, %v; want 0 and io.ErrClosedPipe", n, err)
	}
	if err := a.Close(); !errors.Is(err, net.ErrClosed) {
		t.Errorf("second Close = %v, want net.ErrClosed", err)
	}
}

// TestMemPipeLongWrite checks that a Write of more than BatchSize frames is
// split into batches and delivered in order, and a blocked long Write is
// released by Close with a short count.
func TestMemPipeLongWrite(t *testing.T) {
	a, b := emu.NewMemPipe(4, 1)
	defer b.Close()
	out := makeBatch(10, 70)
	for i := range out {
		out[i][0] = byte(i)
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		if n, err := a.Write(out, 0); n != 10 || err != nil {
			t.Errorf("Write(10) = %d, %v", n, err)
		}
		// The pipe now holds at most one batch; this Write blocks until Close.
		n, err := a.Write(out, 0)
		if !errors.Is(err, net.ErrClosed) || n > 8 {
			t.Errorf("Write blocked by a full pipe, then Close = %d, %v; want <= 8 and net.ErrClosed", n, err)
		}
	}()
	bufs, sizes := makeBatch(4, 100), make([]int, 4)
	for want := 0; want < 10; {
		k := min(len(bufs), 10-want) // do not take frames of the second Write
		n, err := b.Read(bufs[:k], sizes, 0)
		if err != nil {
			t.Fatal(err)
		}
		for i := range n {
			if sizes[i] != 70 || bufs[i][0] != byte(want) {
				t.Fatalf("frame %d: size %d, first byte %d", want, sizes[i], bufs[i][0])
			}
			want++
		}
	}
	a.Close()
	<-done
}
