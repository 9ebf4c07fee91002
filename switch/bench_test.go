package sw

import (
	"encoding/binary"
	"fmt"
	"testing"
	"time"

	"github.com/inabox/inabox/rdma"
	"github.com/inabox/inabox/switch/inahdr"
)

// baseRound is the base: a plain int32 add loop over the same packets
// (big-endian decode + add into one accumulator per chunk), with the same
// per-round chunk renumbering and payload restore as the pipeline run.
func baseRound(frames []Frame, orig [][]byte, acc []int32, chunk uint32, nv, workers int) {
	for i := range frames {
		h := inahdr.Header(frames[i].Data[54:])
		h.SetChunk(chunk + uint32(i/workers))
		a := acc[(i/workers)*nv : (i/workers+1)*nv]
		p := frames[i].Data[54+inahdr.Len:]
		for k := range a {
			a[k] += int32(binary.BigEndian.Uint32(p[4*k:]))
		}
		if i%workers == workers-1 {
			copy(frames[i].Data, orig[i])
		}
	}
}

// BenchmarkPipeline measures aggregated values per second per core through
// Process (8 workers, hashed stage, batches of 32 frames, one Egress per
// result for its ICRC) against a plain int32 add loop over the same payload
// bytes (big-endian decode + add into an accumulator), the base. Both
// restore the completing packets' payloads each round, since the pipeline
// overwrites them with the result. The values=N benchmark interleaves a base
// round with every pipeline round (so machine noise hits both alike) and
// reports values/s (pipeline), base-values/s and %base = pipeline rate as a
// percentage of the base rate (goal >= 50); its ns/op covers both rounds.
// values=N/base=add-loop runs the base alone.
func BenchmarkPipeline(b *testing.B) {
	for _, nv := range []int{64, 256} {
		const workers, chunks = 8, 4 // 32 frames per batch
		passes := (nv + 63) / 64
		mk := func() ([]Frame, [][]byte, *Switch) {
			s := newTestSwitch(b, 4096)
			if err := s.SetPool(1, 0, 4096, passes); err != nil {
				b.Fatal(err)
			}
			installJob(b, s, 1, workers, StageHashed, 1, 0, 40)
			var frames []Frame
			var orig [][]byte
			for c := 0; c < chunks; c++ {
				for w := 0; w < workers; w++ {
					v := make([]int32, nv)
					for i := range v {
						v[i] = int32(i*w - c)
					}
					d := workerPkt(1, 1, uint32(c), uint8(w), v).build()
					frames = append(frames, Frame{Data: d, InPort: w + 1})
					orig = append(orig, append([]byte(nil), d...))
				}
			}
			return frames, orig, s
		}
		b.Run(fmt.Sprintf("values=%d", nv), func(b *testing.B) {
			frames, orig, s := mk()
			bframes, borig, _ := mk()
			acc := make([]int32, chunks*nv)
			ms := s.AppendMembers(nil, 1)
			chunk := uint32(0)
			var tPipe, tBase time.Duration
			b.ReportAllocs()
			b.ResetTimer()
			for b.Loop() {
				chunk += chunks
				// The hosts' part, not timed: the next chunks, each frame
				// with its ICRC (the switch checks it).
				for i := range frames {
					h := inahdr.Header(frames[i].Data[54:])
					h.SetChunk(chunk + uint32(i/workers))
					_ = rdma.SetICRC(frames[i].Data)
				}
				t0 := time.Now()
				s.Process(frames)
				for i := range frames {
					if frames[i].Action == ActMulticast {
						s.Egress(frames[i].Data, ms[0])
						copy(frames[i].Data, orig[i])
					}
				}
				t1 := time.Now()
				baseRound(bframes, borig, acc, chunk, nv, workers)
				tBase += time.Since(t1)
				tPipe += t1.Sub(t0)
			}
			n := float64(b.N) * float64(len(frames)*nv)
			b.ReportMetric(n/tPipe.Seconds(), "values/s")
			b.ReportMetric(n/tBase.Seconds(), "base-values/s")
			b.ReportMetric(100*tBase.Seconds()/tPipe.Seconds(), "%base")
		})
		b.Run(fmt.Sprintf("values=%d/base=add-loop", nv), func(b *testing.B) {
			frames, orig, _ := mk()
			acc := make([]int32, chunks*nv)
			chunk := uint32(0)
			b.ReportAllocs()
			b.ResetTimer()
			for b.Loop() {
				chunk += chunks
				baseRound(frames, orig, acc, chunk, nv, workers)
			}
			b.ReportMetric(float64(b.N)*float64(len(frames)*nv)/b.Elapsed().Seconds(), "values/s")
		})
	}
}
