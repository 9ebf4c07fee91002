package testbed

import (
	"fmt"
	"testing"
	"time"

	"github.com/inabox/inabox/host"
)

// BenchmarkAllReduce: one 8-worker all-reduce of a 16 MB tensor at
// 100 Gb/s, on the UC INA path (the default) and the trim path. Metrics:
// x-bound = virtual completion time / analytic bound (2 × bytes / rate
// with per-packet headers, allReduceBound); x-bound-data the same against
// 2 × payload bytes / rate; ns/chunk = wall time per chunk (all workers,
// switch and PS). ps=200G gives the PS link twice the workers' rate (on
// the trim path the PS link carries N trimmed headers plus one result per
// INA chunk: at 64 values per packet it, not the workers' links, is the
// bottleneck at equal rates).
func BenchmarkAllReduce(b *testing.B) {
	for _, bc := range []struct {
		path   host.INAPath
		v      int
		psRate int64
	}{{host.PathUC, 64, 0}, {host.PathUC, 256, 0}, {host.PathTrim, 64, 0}, {host.PathTrim, 256, 0}, {host.PathTrim, 64, 200e9}} {
		v := bc.v
		name := fmt.Sprintf("%s/values=%d", bc.path, v)
		if bc.psRate != 0 {
			name += fmt.Sprintf("/ps=%dG", bc.psRate/1e9)
		}
		b.Run(name, func(b *testing.B) {
			elems := 4 << 20
			inputs := make([][]float32, 8)
			for r := range inputs {
				inputs[r] = genTensor(1, r, elems, 0)
			}
			var end time.Duration
			chunks := (elems + v - 1) / v
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				c, err := Build(Spec{Seed: 1, Jobs: jobSpecs([]int{8}), ValuesPerPacket: v, PSLinkBitsPerSecond: bc.psRate, INAPath: bc.path},
					"freeina", func(job, rank int) []host.Tensor { return []host.Tensor{{AllReduce: 1, Data: inputs[rank]}} })
				if err != nil {
					b.Fatal(err)
				}
				if end, err = c.Run(time.Second, time.Millisecond); err != nil {
					b.Fatal(err)
				}
			}
			b.StopTimer()
			bound := allReduceBound(elems, v, DefaultRate)
			data := time.Duration(2 * float64(4*elems) * 8 / DefaultRate * 1e9)
			b.ReportMetric(float64(end)/float64(bound), "x-bound")
			b.ReportMetric(float64(end)/float64(data), "x-bound-data")
			b.ReportMetric(float64(end.Microseconds()), "virtual-µs")
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/float64(chunks), "ns/chunk")
		})
	}
}
