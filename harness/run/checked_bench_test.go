package run

import (
	"testing"
	"time"

	"github.com/inabox/inabox/harness/scenario"
	"github.com/inabox/inabox/internal/testenv"
)

// checkedProbe is docs/emulator.md's probe scenario: one VGG-11 job of 4
// workers, 2 iterations, at true scale (100 Gb/s, whole gradients).
const checkedProbe = `name: gomemlimit-probe
seed: 1
scaling: {tensor_scale: 1, rate_scale: 1}
topology: {link_gbps: 100, link_delay: 1us}
jobs:
  - {name: a, model: vgg11, workers: 4, iterations: 2, bucket_mib: 25}
`

// BenchmarkCheckedRun times a whole run as `inabox run` makes it, where
// BenchmarkTrueScale (harness/testbed) times the emulator alone: the
// probe above, whose gradients are made on demand, ahead of the senders,
// and whose results are checked as they arrive, on the helper goroutines
// where a second CPU exists. Per policy it reports
//
//	cpu/virtual   the process's CPU time (every goroutine) over the run's
//	              virtual time (its makespan)
//	wall/virtual  wall time over virtual time
//	cpu/wall      how many CPUs the run kept busy
//
// The virtual time includes the modelled compute between all-reduces,
// when the network idles and the emulator has little to do, so these
// ratios are lower than BenchmarkTrueScale's, which times an all-reduce
// alone; compare them with their own earlier values. About 12 s a run on
// this 2-CPU machine, quiet; skipped with -short.
func BenchmarkCheckedRun(b *testing.B) {
	if testing.Short() {
		b.Skip("a true-scale run: seconds per op")
	}
	s, err := scenario.Parse("probe.yaml", []byte(checkedProbe), scenario.DefaultModels())
	if err != nil {
		b.Fatal(err)
	}
	for _, policy := range []string{"freeina", "atp", "switchml"} {
		b.Run(policy, func(b *testing.B) {
			var wall, cpu time.Duration
			var virtual float64
			for b.Loop() {
				c0, _ := testenv.ProcessCPU()
				w0 := time.Now()
				res, err := Run(s, Options{Policy: policy})
				if err != nil {
					b.Fatal(err)
				}
				wall += time.Since(w0)
				c1, _ := testenv.ProcessCPU()
				cpu += c1 - c0
				virtual += float64(res.Summary.Makespan)
			}
			b.ReportMetric(cpu.Seconds()/virtual, "cpu/virtual")
			b.ReportMetric(wall.Seconds()/virtual, "wall/virtual")
			b.ReportMetric(cpu.Seconds()/wall.Seconds(), "cpu/wall")
		})
	}
}
