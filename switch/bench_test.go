package sw

import (
	"encoding/binary"
	"flag"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/inabox/inabox/rdma"
	"github.com/inabox/inabox/switch/inahdr"
)

// kernelAdd is the anchor of BenchmarkPipeline: the machine's rate of
// adding big-endian int32 values into int32 accumulators, acc += p
// (wrapping, no overflow check). It is 16-wide unrolled, and its inner
// loop has no bounds checks (fixed-size array pointers). It is independent
// of the switch's own value lanes (lanes.go), which it measures.
func kernelAdd(acc []int32, p []byte) {
	for len(acc) >= 16 && len(p) >= 64 {
		a, q := (*[16]int32)(acc), (*[64]byte)(p)
		a[0] += int32(binary.BigEndian.Uint32(q[0:]))
		a[1] += int32(binary.BigEndian.Uint32(q[4:]))
		a[2] += int32(binary.BigEndian.Uint32(q[8:]))
		a[3] += int32(binary.BigEndian.Uint32(q[12:]))
		a[4] += int32(binary.BigEndian.Uint32(q[16:]))
		a[5] += int32(binary.BigEndian.Uint32(q[20:]))
		a[6] += int32(binary.BigEndian.Uint32(q[24:]))
		a[7] += int32(binary.BigEndian.Uint32(q[28:]))
		a[8] += int32(binary.BigEndian.Uint32(q[32:]))
		a[9] += int32(binary.BigEndian.Uint32(q[36:]))
		a[10] += int32(binary.BigEndian.Uint32(q[40:]))
		a[11] += int32(binary.BigEndian.Uint32(q[44:]))
		a[12] += int32(binary.BigEndian.Uint32(q[48:]))
		a[13] += int32(binary.BigEndian.Uint32(q[52:]))
		a[14] += int32(binary.BigEndian.Uint32(q[56:]))
		a[15] += int32(binary.BigEndian.Uint32(q[60:]))
		acc, p = acc[16:], p[64:]
	}
	for i := range acc {
		acc[i] += int32(binary.BigEndian.Uint32(p[4*i:]))
	}
}

// kernelAddSIMD is kernelAdd with the whole groups of 16 lanes added by
// AVX2 (anchorAddWide): the machine's rate for the add alone. It reports
// false where the build or the CPU has no such kernel.
func kernelAddSIMD(acc []int32, p []byte) bool {
	if !anchorAddWide(acc, p) {
		return false
	}
	n := len(acc) &^ 15
	kernelAdd(acc[n:], p[4*n:])
	return true
}

// kernelRoundSIMD is kernelRound with kernelAddSIMD.
func kernelRoundSIMD(frames []Frame, acc []int32, nv, workers int) bool {
	for i := range frames {
		c := i / workers
		if !kernelAddSIMD(acc[c*nv:(c+1)*nv], frames[i].Data[54+inahdr.Len:54+inahdr.Len+4*nv]) {
			return false
		}
	}
	return true
}

// kernelRound runs kernelAdd over the values of every frame of a batch, the
// frames of chunk c (workers of them) into accumulator c.
func kernelRound(frames []Frame, acc []int32, nv, workers int) {
	for i := range frames {
		c := i / workers
		kernelAdd(acc[c*nv:(c+1)*nv], frames[i].Data[54+inahdr.Len:54+inahdr.Len+4*nv])
	}
}

// baseRound is the former base: a plain, bounds-checked int32 add loop
// over the same packets (per-element big-endian decode + add into one
// accumulator per chunk), with a per-round chunk renumbering and payload
// restore.
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

// icrcRound is the ICRC work the switch does for one batch of the
// benchmark: a check of every frame (parse; none when the frames come
// sealed) and a recomputation per result (Egress; none when the replicas'
// ICRC is deferred). It is timed alone to show what share of the
// pipeline's time the ICRC takes.
func icrcRound(frames []Frame, workers int, sealed, deferred bool) {
	for i := range frames {
		if !sealed {
			_ = rdma.CheckICRC(frames[i].Data)
		}
		if i%workers == workers-1 && !deferred {
			_ = rdma.SetICRC(frames[i].Data)
		}
	}
}

// BenchmarkPipeline measures aggregated values per second per core through
// Process (8 workers, hashed stage, batches of 32 frames: 4 chunks, one
// Egress per result) against the anchor, kernelAdd: an unrolled,
// bounds-check-free add of the same frames' big-endian values into one
// int32 accumulator per chunk. The values=N benchmark interleaves a kernel
// round (and the other references below) with every pipeline round, so
// machine noise hits them alike, and reports:
//
//	values/s         the pipeline (Process + Egress of the results)
//	kernel-values/s  the anchor, kernelAdd over the same frames
//	%kernel          pipeline rate as a percentage of the kernel's (goal >= 50)
//	%kernel-med      the same from the median round times of the last
//	                 4096 rounds (robust to the preemption of a shared machine)
//	%simd-kernel-med the same against kernelAddSIMD, the add done 16 lanes
//	                 at a time with AVX2 (the machine's rate for the add;
//	                 not reported where the CPU or build has no AVX2)
//	icrc-%pipe       share of the pipeline's time that the switch's ICRC work
//	                 alone takes (icrcRound: one check per frame unless
//	                 sealed, one recomputation per result, timed apart;
//	                 median rounds)
//	%kernel-no-icrc  an estimate of %kernel-med if that ICRC work were free:
//	                 the kernel's median round against the pipeline's less
//	                 icrcRound's
//	base-values/s    the former base (baseRound: a bounds-checked add loop)
//	%base            pipeline rate as a percentage of the former base's
//
// The hosts' part is not timed: restoring the payloads the results
// overwrote, the next chunk numbers and each frame's ICRC. ns/op covers
// every round. values=N/checked has the switch check every frame's ICRC
// and write each result's, as a real port's frames need;
// values=N/sealed hands the pipeline sealed frames (Frame.Sealed: the
// sender's ICRC is known right, so the switch checks none) and patches
// each replica's (EgressSealed), as the emulator does where it does not
// defer ICRCs; values=N/deferred is what the virtual-time emulator does:
// sealed frames, and the replicas' ICRC left to be written where it is
// seen (EgressDeferred; emu.Packet.Defer). values=N/kernel,
// values=N/kernel-simd and values=N/base=add-loop run a reference alone.
func BenchmarkPipeline(b *testing.B) {
	for _, nv := range []int{64, 256} {
		const workers, chunks = pipelineWorkers, pipelineChunks // 32 frames per batch
		mk := func() ([]Frame, [][]byte, *Switch) { return pipelineFrames(b, nv) }
		for _, mode := range []string{"checked", "sealed", "deferred"} {
			sealed, deferred := mode != "checked", mode == "deferred"
			b.Run(fmt.Sprintf("values=%d/%s", nv, mode), func(b *testing.B) {
				frames, orig, s := mk()
				bframes, borig, _ := mk()
				acc := make([]int32, chunks*nv)
				kacc := make([]int32, chunks*nv)
				ms := s.AppendMembers(nil, 1)
				chunk := uint32(0)
				var tPipe, tKernel, tBase time.Duration
				const keep = 4096 // rounds kept for the medians
				rp, rk, ri, rs := make([]time.Duration, keep), make([]time.Duration, keep), make([]time.Duration, keep), make([]time.Duration, keep)
				sacc := make([]int32, chunks*nv)
				simd := true
				rounds := 0
				b.ReportAllocs()
				b.ResetTimer()
				for b.Loop() {
					chunk += chunks
					// The hosts' part, not timed: the next chunks, each frame
					// with its ICRC (the switch checks it).
					nextChunks(frames, orig, chunk)
					for i := range frames {
						_ = rdma.SetICRC(frames[i].Data)
						frames[i].Sealed = sealed
					}
					t0 := time.Now()
					s.Process(frames)
					for i := range frames {
						if frames[i].Action == ActMulticast {
							switch {
							case deferred:
								s.EgressDeferred(frames[i].Data, ms[0])
							case frames[i].Sealed:
								s.EgressSealed(frames[i].Data, ms[0])
							default:
								s.Egress(frames[i].Data, ms[0])
							}
						}
					}
					t1 := time.Now()
					kernelRound(bframes, kacc, nv, workers)
					t2 := time.Now()
					icrcRound(bframes, workers, sealed, deferred)
					t3 := time.Now()
					baseRound(bframes, borig, acc, chunk, nv, workers)
					t4 := time.Now()
					simd = kernelRoundSIMD(bframes, sacc, nv, workers)
					rs[rounds%keep] = time.Since(t4)
					tPipe += t1.Sub(t0)
					tKernel += t2.Sub(t1)
					tBase += t4.Sub(t3)
					rp[rounds%keep], rk[rounds%keep], ri[rounds%keep] = t1.Sub(t0), t2.Sub(t1), t3.Sub(t2)
					rounds++
				}
				k := min(rounds, keep)
				mp, mk, mi, msimd := median(rp[:k]), median(rk[:k]), median(ri[:k]), median(rs[:k])
				if st := s.Stats(); st.ByReason[ReasonResult] != uint64(b.N*chunks) {
					b.Fatalf("%d results for %d chunks: %v", st.ByReason[ReasonResult], b.N*chunks, st.ByReason)
				}
				n := float64(b.N) * float64(len(frames)*nv)
				b.ReportMetric(n/tPipe.Seconds(), "values/s")
				b.ReportMetric(n/tKernel.Seconds(), "kernel-values/s")
				b.ReportMetric(100*tKernel.Seconds()/tPipe.Seconds(), "%kernel")
				b.ReportMetric(100*mk.Seconds()/mp.Seconds(), "%kernel-med")
				if simd {
					b.ReportMetric(100*msimd.Seconds()/mp.Seconds(), "%simd-kernel-med")
				}
				b.ReportMetric(100*mi.Seconds()/mp.Seconds(), "icrc-%pipe")
				b.ReportMetric(100*mk.Seconds()/(mp-mi).Seconds(), "%kernel-no-icrc")
				b.ReportMetric(n/tBase.Seconds(), "base-values/s")
				b.ReportMetric(100*tBase.Seconds()/tPipe.Seconds(), "%base")
			})
		}
		b.Run(fmt.Sprintf("values=%d/kernel", nv), func(b *testing.B) {
			frames, _, _ := mk()
			acc := make([]int32, chunks*nv)
			b.ReportAllocs()
			for b.Loop() {
				kernelRound(frames, acc, nv, workers)
			}
			b.ReportMetric(float64(b.N)*float64(len(frames)*nv)/b.Elapsed().Seconds(), "values/s")
		})
		b.Run(fmt.Sprintf("values=%d/kernel-simd", nv), func(b *testing.B) {
			frames, _, _ := mk()
			acc := make([]int32, chunks*nv)
			if !kernelRoundSIMD(frames, acc, nv, workers) {
				b.Skip("no AVX2 add in this build or on this CPU")
			}
			b.ReportAllocs()
			for b.Loop() {
				kernelRoundSIMD(frames, acc, nv, workers)
			}
			b.ReportMetric(float64(b.N)*float64(len(frames)*nv)/b.Elapsed().Seconds(), "values/s")
		})
		b.Run(fmt.Sprintf("values=%d/base=add-loop", nv), func(b *testing.B) {
			frames, orig, _ := mk()
			acc := make([]int32, chunks*nv)
			chunk := uint32(0)
			b.ReportAllocs()
			for b.Loop() {
				chunk += chunks
				baseRound(frames, orig, acc, chunk, nv, workers)
			}
			b.ReportMetric(float64(b.N)*float64(len(frames)*nv)/b.Elapsed().Seconds(), "values/s")
		})
	}
}

// The workload of BenchmarkPipeline and BenchmarkPipelineFloor: a batch of
// pipelineChunks chunks from each of pipelineWorkers workers.
const pipelineWorkers, pipelineChunks = 8, 4

// pipelineFrames returns a switch with one hashed job of pipelineWorkers
// workers (ports 1 to 8, its PS on port 40) over 4,096 slots, and a batch
// of its frames, nv values each (value i of worker w in chunk c is i·w − c),
// chunk by chunk, with a copy of each frame's bytes.
func pipelineFrames(tb testing.TB, nv int) ([]Frame, [][]byte, *Switch) {
	s := newTestSwitch(tb, 4096)
	if err := s.SetPool(1, 0, 4096, SlotsPerAggregator(nv)); err != nil {
		tb.Fatal(err)
	}
	installJob(tb, s, 1, pipelineWorkers, StageHashed, 1, 0, 40)
	var frames []Frame
	var orig [][]byte
	for c := range pipelineChunks {
		for w := range pipelineWorkers {
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

// nextChunks makes frames, pipelineFrames' batch after a round, the next
// round's: each result's frame its contribution again (from orig), and the
// chunks numbered from chunk. It leaves the ICRCs as they are.
func nextChunks(frames []Frame, orig [][]byte, chunk uint32) {
	for i := range frames {
		if frames[i].Action == ActMulticast { // a result: restore the contribution
			copy(frames[i].Data, orig[i])
		}
		inahdr.Header(frames[i].Data[54:]).SetChunk(chunk + uint32(i/pipelineWorkers))
	}
}

// median sorts d and returns its median.
func median(d []time.Duration) time.Duration {
	slices.Sort(d)
	return d[len(d)/2]
}

// TestKernelAdd checks the anchor against a plain loop.
func TestKernelAdd(t *testing.T) {
	for _, n := range []int{0, 1, 15, 16, 17, 64, 77} {
		p := make([]byte, 4*n)
		for i := range p {
			p[i] = byte(i*37 + 11)
		}
		acc, want := make([]int32, n), make([]int32, n)
		for i := range acc {
			acc[i] = int32(i * -1000003)
			want[i] = acc[i] + int32(binary.BigEndian.Uint32(p[4*i:]))
		}
		kernelAdd(acc, p)
		for i := range acc {
			if acc[i] != want[i] {
				t.Fatalf("n=%d lane %d: %d, want %d", n, i, acc[i], want[i])
			}
		}
	}
}

var pipelineRounds = flag.Int("pipeline-rounds", 64, "rounds of TestPipelineRounds")

// TestPipelineRounds runs -pipeline-rounds rounds of what
// BenchmarkPipeline/values=64/deferred times (Process and EgressDeferred of
// the results), with the hosts' part but no ICRC (the frames come sealed)
// and no anchor: a loop to count the pipeline's instructions with, which
// a benchmark run under valgrind does not give reliably:
//
//	go test -c -o /tmp/sw.test ./switch
//	valgrind --tool=cachegrind --cache-sim=no /tmp/sw.test -test.run '^TestPipelineRounds$' -pipeline-rounds 4000
//
// and again with 2000: the difference is 2,000 rounds of 32 frames. It
// checks that every chunk completed (64 rounds by default).
func TestPipelineRounds(t *testing.T) {
	frames, orig, s := pipelineFrames(t, 64)
	ms := s.AppendMembers(nil, 1)
	chunk := uint32(0)
	for range *pipelineRounds {
		chunk += pipelineChunks
		nextChunks(frames, orig, chunk)
		for i := range frames {
			frames[i].Sealed = true
		}
		s.Process(frames)
		for i := range frames {
			if frames[i].Action == ActMulticast {
				s.EgressDeferred(frames[i].Data, ms[0])
			}
		}
	}
	if st := s.Stats(); st.ByReason[ReasonResult] != uint64(*pipelineRounds*pipelineChunks) {
		t.Fatalf("%d results for %d chunks: %v", st.ByReason[ReasonResult], *pipelineRounds*pipelineChunks, st.ByReason)
	}
}
