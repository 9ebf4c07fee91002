package testbed

import (
	"fmt"
	"testing"
	"time"

	"github.com/inabox/inabox/emu"
	"github.com/inabox/inabox/host"
)

// BenchmarkFreeINAvsATP: one 8-worker all-reduce of the same tensor at
// 100 Gb/s (every link), FreeINA on its UC INA path (the
// default, "freeina-uc": no per-chunk PS traffic) and on its trim path
// ("freeina-trim") against the ATP-style baseline. Metrics: the virtual
// completion times, atp/freeina-uc and atp/freeina-trim (the paper reports
// FreeINA 1.20× faster than ATP), and per chunk: bytes on the switch→PS
// and PS→switch links for each, ATP collisions and retransmissions.
func BenchmarkFreeINAvsATP(b *testing.B) {
	elems := 1 << 20
	for _, bc := range []struct {
		v, window int
		psRate    int64
		loss      float64
	}{{64, 0, 0, 0}, {256, 0, 0, 0}, {64, 100, 0, 0}, {64, 0, 200e9, 0}, {256, 0, 0, 0.001}, {256, 0, 0, 0.01}} {
		v := bc.v
		name := fmt.Sprintf("values=%d", v)
		if bc.window != 0 {
			name += fmt.Sprintf("/atp-window=%d", bc.window)
		}
		if bc.psRate != 0 {
			name += fmt.Sprintf("/ps=%dG", bc.psRate/1e9)
		}
		if bc.loss != 0 {
			name += fmt.Sprintf("/loss=%g%%", bc.loss*100)
		}
		im := emu.Impairments{Loss: bc.loss}
		b.Run(name, func(b *testing.B) {
			inputs := make([][]float32, 8)
			for r := range inputs {
				inputs[r] = genBaselineTensor(1, r, elems, 0)
			}
			tensors := func(job, rank int) []host.Tensor {
				return []host.Tensor{{AllReduce: 1, Data: inputs[rank]}}
			}
			chunks := float64((elems + v - 1) / v)
			var fEnd, uEnd, aEnd time.Duration
			var uDown, uUp float64
			var fDown, fUp, aDown, aUp float64
			var coll, retx float64
			for i := 0; i < b.N; i++ {
				spec := Spec{Seed: 1, Jobs: jobSpecs([]int{8}), ValuesPerPacket: v, PSLinkBitsPerSecond: bc.psRate, Impairments: im,
					INAPath: host.PathTrim}
				f, err := Build(spec, "freeina", tensors)
				if err != nil {
					b.Fatal(err)
				}
				if fEnd, err = f.Run(time.Second, time.Millisecond); err != nil {
					b.Fatal(err)
				}
				spec.INAPath = host.PathUC
				u, err := Build(spec, "freeina", tensors)
				if err != nil {
					b.Fatal(err)
				}
				if uEnd, err = u.Run(time.Second, time.Millisecond); err != nil {
					b.Fatal(err)
				}
				us, ur := u.PSs[0].Link.Stats(emu.AtoB), u.PSs[0].Link.Stats(emu.BtoA)
				uDown, uUp = float64(us.SentBytes)/chunks, float64(ur.SentBytes)/chunks
				spec.Window = bc.window
				a, err := Build(spec, "atp", tensors)
				if err != nil {
					b.Fatal(err)
				}
				if aEnd, err = a.Run(time.Second, 50*time.Microsecond); err != nil {
					b.Fatal(err)
				}
				fs, fr := f.PSs[0].Link.Stats(emu.AtoB), f.PSs[0].Link.Stats(emu.BtoA)
				as, ar := a.PSs[0].Link.Stats(emu.AtoB), a.PSs[0].Link.Stats(emu.BtoA)
				fDown, fUp = float64(fs.SentBytes)/chunks, float64(fr.SentBytes)/chunks
				aDown, aUp = float64(as.SentBytes)/chunks, float64(ar.SentBytes)/chunks
				st := a.ATPPS(0).Stats()
				tot := a.Totals(0)
				coll = float64(st.Collisions)
				retx = float64(tot.Retransmits + tot.PSResends)
			}
			b.ReportMetric(float64(fEnd.Microseconds()), "freeina-trim-µs")
			b.ReportMetric(float64(aEnd.Microseconds()), "atp-µs")
			b.ReportMetric(float64(aEnd)/float64(fEnd), "atp/freeina-trim")
			b.ReportMetric(float64(uEnd.Microseconds()), "freeina-uc-µs")
			b.ReportMetric(float64(aEnd)/float64(uEnd), "atp/freeina-uc")
			b.ReportMetric(uDown, "freeina-uc-sw→ps-B/chunk")
			b.ReportMetric(uUp, "freeina-uc-ps→sw-B/chunk")
			b.ReportMetric(fDown, "freeina-trim-sw→ps-B/chunk")
			b.ReportMetric(fUp, "freeina-trim-ps→sw-B/chunk")
			b.ReportMetric(aDown, "atp-sw→ps-B/chunk")
			b.ReportMetric(aUp, "atp-ps→sw-B/chunk")
			b.ReportMetric(coll, "atp-collisions")
			b.ReportMetric(retx, "atp-retx")
		})
	}
}
