package sw

import (
	"encoding/binary"
	"fmt"
	"testing"
	"time"

	"github.com/inabox/inabox/rdma"
	"github.com/inabox/inabox/switch/inahdr"
)

// floorRound is the least work the frames of BenchmarkPipeline need, a
// floor under the pipeline's time, not a switch: fixed-offset header checks,
// the port's worker entry from the cache Process filled, the hashed stage's
// aggregator (hashLocate), one owner and bitmap per aggregator, the lanes'
// wrapping write, add and read, and FlagResult on the completing frame,
// which it marks ActMulticast (the others ActDrop). It keeps no counters
// and checks no window, retransmission, port security or overflow, and
// leaves each frame's ICRC as it was. It returns the results.
func floorRound(s *Switch, j *Job, frames []Frame, nv int) int {
	results := 0
	for i := range frames {
		f := &frames[i]
		d := f.Data
		if len(d) < 54+inahdr.Len+4*nv || binary.BigEndian.Uint16(d[12:]) != rdma.EtherTypeIPv4 || d[14] != 0x45 ||
			d[23] != rdma.IPProtoUDP || binary.BigEndian.Uint16(d[36:]) != rdma.UDPPort || d[42] != 0x04 || // RC SEND Only
			f.InPort < 0 || f.InPort >= maxCachePorts {
			continue
		}
		h := inahdr.Header(d[54:])
		c := &s.cache[f.InPort]
		if h[0] != inahdr.Version || !c.valid || c.qp != binary.BigEndian.Uint32(d[46:])&0xFFFFFF ||
			h.Job() != c.e.Job || h.Worker() != c.e.Worker || h.Count() != nv {
			continue
		}
		tag := MakeTag(c.e.Job, h.AllReduce(), h.Chunk())
		head := hashLocate(j, tag)
		r := &s.r
		reg := r.values[head*s.cfg.ValuesPerPass:][:nv]
		pkt := d[54+inahdr.Len:][:4*nv]
		f.Action = ActDrop
		if r.agg[head].owner != tag {
			r.agg[head].owner, r.agg[head].bitmap = tag, 1<<c.e.Worker
			if wide {
				writeWide(reg, pkt)
			} else {
				writeLanes(reg, pkt)
			}
			continue
		}
		r.agg[head].bitmap |= 1 << c.e.Worker
		if wide {
			addWrapWide(reg, pkt)
		} else {
			addWrapLanes(reg, pkt)
		}
		if r.agg[head].bitmap == j.Mask {
			if wide {
				readWide(reg, pkt)
			} else {
				readLanes(reg, pkt)
			}
			h.AddFlags(inahdr.FlagResult)
			r.agg[head].owner = 0
			f.Action = ActMulticast
			results++
		}
	}
	return results
}

// floorFrames are BenchmarkPipeline's frames (pipelineFrames), sealed, on
// a switch whose port cache Process has filled, with each frame's original
// bytes.
func floorFrames(tb testing.TB, nv int) (*Switch, *Job, []Frame, [][]byte) {
	frames, orig, s := pipelineFrames(tb, nv)
	s.Process(frames[:pipelineWorkers]) // fills the port cache
	for i := range frames {
		frames[i].Data = frames[i].Data[:len(orig[i])]
		copy(frames[i].Data, orig[i])
		frames[i].Action, frames[i].Sealed = ActDrop, true
	}
	return s, s.jobByID(1), frames, orig
}

// TestPipelineFloor: floorRound sums every chunk of floorFrames, the sum
// checked against one made from the workers' int32 values here, and marks
// the last frame of each chunk the result, the others dropped.
func TestPipelineFloor(t *testing.T) {
	for _, w := range laneModes(t) {
		t.Run(fmt.Sprintf("wide=%v", w), func(t *testing.T) {
			defer setWide(w)()
			for _, nv := range []int{64, 256} {
				s, j, frames, _ := floorFrames(t, nv)
				for i := range frames {
					inahdr.Header(frames[i].Data[54:]).SetChunk(1000 + uint32(i/pipelineWorkers))
				}
				if n := floorRound(s, j, frames, nv); n != pipelineChunks {
					t.Fatalf("%d values: %d results, want %d", nv, n, pipelineChunks)
				}
				for i, f := range frames {
					if want := ActDrop; i%pipelineWorkers < pipelineWorkers-1 && f.Action != want {
						t.Fatalf("%d values: frame %d: action %v, want dropped", nv, i, f.Action)
					}
					if i%pipelineWorkers < pipelineWorkers-1 {
						continue
					}
					h := inahdr.Header(f.Data[54:])
					if f.Action != ActMulticast || !h.Has(inahdr.FlagResult) {
						t.Fatalf("%d values: frame %d is not a result", nv, i)
					}
					c := i / pipelineWorkers
					for k := range nv {
						var want int32
						for w := range pipelineWorkers {
							want += int32(k*w - c)
						}
						if got := int32(binary.BigEndian.Uint32(h[inahdr.Len+4*k:])); got != want {
							t.Fatalf("%d values: chunk %d value %d = %d, want %d", nv, c, k, got, want)
						}
					}
				}
			}
		})
	}
}

// BenchmarkPipelineFloor runs floorRound over BenchmarkPipeline's frames,
// a kernel round (kernelAdd, BenchmarkPipeline's anchor) beside every
// round, and reports the floor's rate as a percentage of the kernel's
// (median rounds): how far under the kernel the least work those frames
// need can go, against which BenchmarkPipeline's %kernel-med reads as the
// cost of what the switch checks and counts besides.
func BenchmarkPipelineFloor(b *testing.B) {
	for _, nv := range []int{64, 256} {
		b.Run(fmt.Sprintf("values=%d", nv), func(b *testing.B) {
			s, j, frames, orig := floorFrames(b, nv)
			kacc := make([]int32, pipelineChunks*nv)
			const keep = 4096
			rp, rk := make([]time.Duration, keep), make([]time.Duration, keep)
			chunk, rounds := uint32(100), 0
			b.ReportAllocs()
			for b.Loop() {
				chunk += pipelineChunks
				nextChunks(frames, orig, chunk)
				t0 := time.Now()
				if n := floorRound(s, j, frames, nv); n != pipelineChunks {
					b.Fatalf("%d results, want %d", n, pipelineChunks)
				}
				t1 := time.Now()
				kernelRound(frames, kacc, nv, pipelineWorkers)
				rp[rounds%keep], rk[rounds%keep] = t1.Sub(t0), time.Since(t1)
				rounds++
			}
			k := min(rounds, keep)
			b.ReportMetric(100*median(rk[:k]).Seconds()/median(rp[:k]).Seconds(), "%kernel-med")
		})
	}
}
