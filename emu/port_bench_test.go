//go:build linux

package emu_test

import (
	"runtime"
	"sync/atomic"
	"testing"
	"time"

	"github.com/inabox/inabox/emu"
	"github.com/inabox/inabox/emu/internal/netns"
)

const (
	benchBatch = 64
	benchFrame = 256
)

// BenchmarkPortBatch64 moves b.N frames of 256 bytes from one port to its
// peer in batches of 64, one writer and one reader goroutine; ns/op is per
// frame and pkts/s the rate the reader saw. The channel baselines run in the
// same process and run, so compare ratios rather than absolute numbers:
//
//   - chan-baseline hands batches of 64 buffer pointers over a channel
//     (batches recycled through a second channel) and touches one byte of
//     each frame: the cost floor of any in-process hand-off.
//   - chan-copy-baseline does the same but copies every frame in and out,
//     which is the work NewMemPipe does to keep buffer ownership with the
//     caller.
//
// The UDP and TAP variants keep at most 32 batches in flight (a credit
// window), so the kernel does not drop for lack of buffer space; a frame lost
// anyway shows up as the "lost" metric. pkts/read is the mean batch a Read
// returned.
func BenchmarkPortBatch64(b *testing.B) {
	b.Run("mem", func(b *testing.B) {
		w, r := emu.NewMemPipe(benchBatch, 8)
		defer w.Close()
		defer r.Close()
		benchPort(b, w, r, false)
	})
	b.Run("chan-baseline", func(b *testing.B) { benchChan(b, false) })
	b.Run("chan-copy-baseline", func(b *testing.B) { benchChan(b, true) })
	b.Run("udp-loopback", func(b *testing.B) {
		w, r := udpPair(b, benchBatch)
		benchPort(b, w, r, true)
	})
	b.Run("tap-bridge", func(b *testing.B) {
		if err := netns.Available(); err != nil {
			b.Skipf("skipping: %v", err)
		}
		w, r := tapPair(b, benchBatch)
		benchPort(b, w, r, true)
	})
}

// benchPort writes b.N frames on w and reads them on r.
func benchPort(b *testing.B, w, r emu.Port, lossy bool) {
	out := makeBatch(benchBatch, benchFrame)
	for _, f := range out {
		// Valid unicast addresses and a local EtherType, so a bridge forwards it.
		copy(f, []byte{0x02, 0, 0, 0, 0, 0x0b, 0x02, 0, 0, 0, 0, 0x0a, 0x88, 0xb5})
	}
	in := makeBatch(benchBatch, 2048)
	sizes := make([]int, benchBatch)
	// Warm up (allocations of the backend, bridge learning, ...).
	if _, err := w.Write(out[:1], 0); err != nil {
		b.Fatal(err)
	}
	if _, err := r.Read(in, sizes, 0); err != nil {
		b.Fatal(err)
	}

	const window = 32 // batches in flight when lossy
	credits := make(chan struct{}, window)
	for range window {
		credits <- struct{}{}
	}
	var got, reads atomic.Int64
	readerDone := make(chan error, 1)
	b.ReportAllocs()
	b.ResetTimer()
	go func() {
		pending := 0
		for got.Load() < int64(b.N) {
			n, err := r.Read(in, sizes, 0)
			if err != nil {
				readerDone <- err
				return
			}
			got.Add(int64(n))
			reads.Add(1)
			pending += n
			for lossy && pending >= benchBatch {
				pending -= benchBatch
				select {
				case credits <- struct{}{}:
				default:
				}
			}
		}
		readerDone <- nil
	}()
	timer := time.NewTimer(time.Hour)
	for sent := 0; sent < b.N; {
		if lossy {
			timer.Reset(time.Second)
			select {
			case <-credits:
			case <-timer.C:
				b.Logf("no credit for 1s: frames lost; stopping at %d of %d", sent, b.N)
				sent = b.N
				continue
			}
		}
		k := min(benchBatch, b.N-sent)
		n, err := w.Write(out[:k], 0)
		if err != nil {
			b.Fatal(err)
		}
		sent += n
	}
	timer.Stop()
	select {
	case err := <-readerDone:
		if err != nil {
			b.Fatal(err)
		}
	case <-time.After(2 * time.Second):
		r.Close() // frames were lost; unblock the reader
		<-readerDone
	}
	b.StopTimer()
	rcvd := got.Load()
	b.ReportMetric(float64(rcvd)/b.Elapsed().Seconds(), "pkts/s")
	b.ReportMetric(float64(rcvd)/float64(max(reads.Load(), 1)), "pkts/read")
	if lossy {
		b.ReportMetric(float64(int64(b.N)-min(rcvd, int64(b.N))), "lost")
	}
}

type chanBatch struct {
	bufs [][]byte
	n    int
}

// benchChan is the channel hand-off baseline; with copy it also copies each
// frame in and out, as the mem pipe does.
func benchChan(b *testing.B, copyFrames bool) {
	const depth = 8
	full := make(chan *chanBatch, depth)
	free := make(chan *chanBatch, depth+2)
	for range depth + 2 {
		free <- &chanBatch{bufs: makeBatch(benchBatch, 2048)}
	}
	out := makeBatch(benchBatch, benchFrame)
	in := makeBatch(benchBatch, 2048)
	var sink byte
	done := make(chan struct{})
	b.ReportAllocs()
	b.ResetTimer()
	go func() {
		defer close(done)
		for got := 0; got < b.N; {
			cb := <-full
			for i, f := range cb.bufs[:cb.n] {
				if copyFrames {
					copy(in[i], f)
				} else {
					sink += f[0]
				}
			}
			got += cb.n
			free <- cb
		}
	}()
	for sent := 0; sent < b.N; {
		cb := <-free
		cb.n = min(benchBatch, b.N-sent)
		for i := range cb.n {
			if copyFrames {
				cb.bufs[i] = cb.bufs[i][:len(out[i])]
				copy(cb.bufs[i], out[i])
			} else {
				cb.bufs[i][0] = byte(sent + i)
			}
		}
		sent += cb.n
		full <- cb
	}
	<-done
	b.StopTimer()
	runtime.KeepAlive(sink)
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "pkts/s")
}
