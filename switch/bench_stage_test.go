package sw

import (
	"testing"
	"time"

	"github.com/inabox/inabox/rdma"
	"github.com/inabox/inabox/switch/inahdr"
)

// BenchmarkPipelineStages runs Process over the same workload as
// BenchmarkPipeline/values=64 (8 workers, 4 chunks per batch of 32 frames)
// through each slot stage: static, preemptive, and FreeINA on its RC (trim)
// and UC paths. It reports values/s.
func BenchmarkPipelineStages(b *testing.B) {
	const workers, chunks, nv = 8, 4, 64
	for _, st := range []string{"static", "preemptive", "freeina-rc", "freeina-uc"} {
		b.Run(st, func(b *testing.B) {
			s := newTestSwitch(b, 4096)
			if err := s.SetPool(1, 0, 4096, 1); err != nil {
				b.Fatal(err)
			}
			switch st {
			case "static":
				installJob(b, s, 1, workers, StageStatic, 1, 0, 40)
			case "preemptive":
				installJob(b, s, 1, workers, StagePreemptive, 1, 0, 40)
			default:
				installFreeINABench(b, s, workers, 2*chunks)
			}
			opcode := byte(0x04)
			if st == "freeina-uc" {
				opcode = byte(rdma.OpUCSendOnly)
			}
			var frames []Frame
			var orig [][]byte
			for c := 0; c < chunks; c++ {
				for w := 0; w < workers; w++ {
					v := make([]int32, nv)
					for i := range v {
						v[i] = int32(i*w - c)
					}
					p := workerPkt(1, 1, uint32(c), uint8(w), v)
					p.opcode = opcode
					d := p.build()
					frames = append(frames, Frame{Data: d, InPort: w + 1})
					orig = append(orig, append([]byte(nil), d...))
				}
			}
			ms := s.AppendMembers(nil, 1)
			chunk := uint32(0)
			var tPipe time.Duration
			b.ReportAllocs()
			b.ResetTimer()
			for b.Loop() {
				chunk += chunks
				// The hosts' part, not timed: fresh frames for the next
				// chunks, each with its ICRC (the switch checks it).
				for i := range frames {
					frames[i].Data = frames[i].Data[:len(orig[i])]
					copy(frames[i].Data, orig[i])
					inahdr.Header(frames[i].Data[54:]).SetChunk(chunk + uint32(i/workers))
					_ = rdma.SetICRC(frames[i].Data)
				}
				t0 := time.Now()
				s.Process(frames)
				for i := range frames {
					switch frames[i].Action {
					case ActMulticast:
						s.Egress(frames[i].Data, ms[0])
					case ActForwardMulticast:
						s.EgressUC(frames[i].Data, ms[0])
					}
				}
				tPipe += time.Since(t0)
			}
			if st := s.Stats(); st.ByReason[ReasonBadICRC] != 0 || st.ByReason[ReasonStale] != 0 {
				b.Fatalf("the workload was refused: %v", st.ByReason)
			}
			b.ReportMetric(float64(b.N)*float64(len(frames)*nv)/tPipe.Seconds(), "values/s")
			b.ReportMetric(float64(tPipe.Nanoseconds())/float64(b.N*len(frames)), "ns/frame")
		})
	}
}

// installFreeINABench installs job 1 with n workers on FreeINA's stage and a
// lease of slots aggregators for all-reduce 1.
func installFreeINABench(b *testing.B, s *Switch, n, slots int) {
	f, err := NewFreeINA(s, FreeINAConfig{PoolID: 1})
	if err != nil {
		b.Fatal(err)
	}
	if err := s.RegisterStage(StageCustom, f); err != nil {
		b.Fatal(err)
	}
	installJob(b, s, 1, n, StageCustom, 1, 0, 40)
	if l := f.Alloc(0, 1, 1, 1<<30, slots); l.Slots != slots {
		b.Fatalf("lease %+v", l)
	}
}
