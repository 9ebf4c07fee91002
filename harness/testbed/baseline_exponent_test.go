package testbed

import (
	"math"
	"testing"
	"time"

	"github.com/inabox/inabox/emu"
	"github.com/inabox/inabox/host"
)

// TestBaselineExponentMode: SwitchML-style per-chunk exponents (the same on every
// worker), 1 % loss, every baseline: exact int32 sums at each chunk's
// scale 2^(27−e) and dequantized within N·2^-(s+1).
func TestBaselineExponentMode(t *testing.T) {
	const n, elems, V = 8, 8192, 64
	chunks := elems / V
	exps := make([]int8, chunks)
	for c := range exps {
		exps[c] = int8(2 + c%3) // |x| ≤ 2 ≤ 2^e
	}
	q := host.Quantizer{Mode: host.QuantExponent, Workers: n}
	inputs := make([][]float32, n)
	for r := range inputs {
		inputs[r] = genBaselineTensor(1, r, elems, 9)
	}
	for _, kind := range baselineKinds {
		t.Run(kind, func(t *testing.T) {
			c, err := BuildWith(Spec{Seed: 5, Jobs: jobSpecs([]int{n}), Quant: host.Quantizer{Mode: host.QuantExponent},
				Impairments: emu.Impairments{Loss: 0.01}}, newBaseline(kind), func(job, rank int) []host.Tensor {
				return []host.Tensor{{AllReduce: 1, Data: inputs[rank], Exps: exps}}
			})
			if err != nil {
				t.Fatal(err)
			}
			if _, err := c.Run(1e9, 50*time.Microsecond); err != nil {
				t.Fatal(err)
			}
			lim := float64(math.MaxInt32 / n)
			for r := 0; r < n; r++ {
				got, deq := c.Worker(0, r).Endpoint.Result(0), c.Worker(0, r).Endpoint.Dequantized(0)
				for i := 0; i < elems; i++ {
					s := 27 - int(exps[i/V])
					var want int64
					var x float64
					for _, in := range inputs {
						v := math.RoundToEven(math.Ldexp(float64(in[i]), s))
						want += int64(math.Min(math.Max(v, -lim), lim))
						x += float64(in[i])
					}
					if int64(got[i]) != want {
						t.Fatalf("rank %d value %d = %d, want %d", r, i, got[i], want)
					}
					if d := math.Abs(deq[i] - x); d > q.Bound(exps[i/V]) {
						t.Fatalf("rank %d value %d off by %g > %g", r, i, d, q.Bound(exps[i/V]))
					}
				}
			}
		})
	}
}
