package emu

import (
	"runtime"
	"sync/atomic"
	"testing"
)

// Handing frames between cores: what a parallel simulation split into two
// partitions would pay per packet-hop that crosses between them (each hop
// of a star split into the switch and its hosts), against the same work on
// one core. Not used by the emulator; the estimate in docs/emulator.md
// ("How far a second core could take…") rests on it.
const (
	handoffFrameBytes = 340     // a 64-value INA frame, about
	handoffWindow     = 300     // frames a partition receives per 1 µs window at true scale
	handoffFrames     = 1 << 14 // frames in the ring (5.6 MB: beyond the cache)
)

// handoffRing is the frames the benchmark writes and reads, a buffer each.
func handoffRing() [][]byte {
	r := make([][]byte, handoffFrames)
	for i := range r {
		r[i] = make([]byte, handoffFrameBytes)
	}
	return r
}

// handoffWrite writes one byte of every cache line of each of n frames
// from first on, as a sender fills a frame.
func handoffWrite(r [][]byte, first, n int, v byte) {
	for j := range n {
		f := r[(first+j)%len(r)]
		for x := 0; x < len(f); x += 64 {
			f[x] = v
		}
	}
}

// handoffRead reads a word of every 8 bytes of each of n frames from first
// on and marks each, as a receiver parses and sums a frame.
func handoffRead(r [][]byte, first, n int) uint64 {
	var s uint64
	for j := range n {
		f := r[(first+j)%len(r)]
		for x := 0; x < len(f); x += 8 {
			s += uint64(f[x])
		}
		f[0]++
	}
	return s
}

var handoffSum atomic.Uint64

// BenchmarkFrameHandoff: ns a frame written and then read, 300 frames of
// 340 bytes a window. one-core: one goroutine writes a window's frames and
// reads them. two-cores: two goroutines, each on its own thread, write a
// window's frames each, meet at a spin barrier, read each other's, and meet
// again: every frame is read on the other core than the one that wrote it.
// The difference is the hand-over's cost per frame, the barriers included
// (two a window).
func BenchmarkFrameHandoff(b *testing.B) {
	r := handoffRing()
	b.Run("one-core", func(b *testing.B) {
		k := 0
		for i := range b.N {
			handoffWrite(r, k, handoffWindow, byte(i))
			handoffSum.Add(handoffRead(r, k, handoffWindow))
			k = (k + handoffWindow) % handoffFrames
		}
		b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*handoffWindow), "ns/frame")
	})
	b.Run("two-cores", func(b *testing.B) {
		if runtime.GOMAXPROCS(0) < 2 {
			b.Skip("needs GOMAXPROCS ≥ 2")
		}
		var arrived atomic.Int64
		// wait is a spin barrier of two: the gen-th time both arrive.
		wait := func(gen int64) {
			arrived.Add(1)
			for arrived.Load() < 2*gen {
			}
		}
		done := make(chan struct{})
		work := func(id int) {
			runtime.LockOSThread()
			defer runtime.UnlockOSThread()
			k, gen := 0, int64(0)
			for i := range b.N {
				mine, theirs := (k+id*handoffWindow)%handoffFrames, (k+(1-id)*handoffWindow)%handoffFrames
				handoffWrite(r, mine, handoffWindow, byte(i))
				gen++
				wait(gen)
				handoffSum.Add(handoffRead(r, theirs, handoffWindow))
				gen++
				wait(gen)
				k = (k + 2*handoffWindow) % handoffFrames
			}
			done <- struct{}{}
		}
		b.ResetTimer()
		go work(0)
		go work(1)
		<-done
		<-done
		b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*handoffWindow), "ns/frame")
	})
}
