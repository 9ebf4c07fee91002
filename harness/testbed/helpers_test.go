package testbed

import (
	"testing"
	"time"

	"github.com/inabox/inabox/host"
)

// gradient returns worker rank of job's deterministic gradient of n values
// in ±2 for seed; salt tells generators of different test families apart.
func gradient(job uint16, rank, n int, seed, salt uint64) []float32 {
	x := seed*0x9E3779B97F4A7C15 + uint64(job)<<32 + uint64(rank+1)*0xBF58476D1CE4E5B9 + salt
	out := make([]float32, n)
	for i := range out {
		x ^= x << 13
		x ^= x >> 7
		x ^= x << 17
		out[i] = float32(int64(x>>11)%(1<<22)-(1<<21)) / (1 << 20)
	}
	return out
}

// genTensor is the FreeINA tests' gradient; genBaselineTensor the
// baselines'.
func genTensor(job uint16, rank, n int, seed uint64) []float32 {
	return gradient(job, rank, n, seed, 0)
}
func genBaselineTensor(job uint16, rank, n int, seed uint64) []float32 {
	return gradient(job, rank, n, seed, 1)
}

// tensors returns a tensor function for Build: ars all-reduces of elems
// values each, drawn by gen(job id, rank, all-reduce); every input is
// kept in inputs[[3]int{job id, rank, all-reduce}] for the reference sum.
func tensors(inputs map[[3]int][]float32, ars, elems int, gen func(job uint16, rank, a int) []float32) func(j, rank int) []host.Tensor {
	return func(j, rank int) []host.Tensor {
		job := JobID(j)
		var ts []host.Tensor
		for a := 0; a < ars; a++ {
			d := gen(job, rank, a)
			inputs[[3]int{int(job), rank, a}] = d
			ts = append(ts, host.Tensor{AllReduce: uint16(a + 1), Data: d})
		}
		return ts
	}
}

// reboot crashes c's switch at at (0: never) and restarts it down later.
func reboot(t testing.TB, c *Testbed, at, down time.Duration) {
	t.Helper()
	if at <= 0 {
		return
	}
	if err := c.Net.Crash(at, SwitchNode); err != nil {
		t.Fatal(err)
	}
	if err := c.Net.Restart(at+down, SwitchNode); err != nil {
		t.Fatal(err)
	}
}

// allPolicies are the registered policies and PS-only.
var allPolicies = append(Names(), "ps")

// newPolicy returns a fresh policy by name ("ps": PS-only).
func newPolicy(name string) Policy {
	if name == "ps" {
		return PSOnly()
	}
	e, ok := Lookup(name)
	if !ok {
		panic("no policy " + name)
	}
	return e.New()
}

// runExact builds spec under policy, with ars all-reduces of elems values
// per worker, lets prepare add faults, runs it to deadline and checks every
// worker's every result exactly (int32) against the quantized sum computed
// here. It returns the testbed and the end of the last all-reduce.
func runExact(t testing.TB, policy string, spec Spec, ars, elems int, deadline time.Duration, prepare func(*Testbed)) (*Testbed, time.Duration) {
	t.Helper()
	inputs := map[[3]int][]float32{}
	c, err := BuildWith(spec, newPolicy(policy), tensors(inputs, ars, elems, func(job uint16, rank, a int) []float32 {
		return gradient(job, rank, elems, uint64(a)+spec.Seed*100, 2)
	}))
	if err != nil {
		t.Fatal(err)
	}
	if prepare != nil {
		prepare(c)
	}
	end, err := c.Run(deadline, 0)
	if err != nil {
		t.Fatalf("%s: %v (drops %+v)", policy, err, c.Drops())
	}
	checkExact(t, c, policy, inputs, ars)
	return c, end
}

// checkExact checks every worker's every all-reduce against the quantized
// sum of inputs.
func checkExact(t testing.TB, c *Testbed, policy string, inputs map[[3]int][]float32, ars int) {
	t.Helper()
	for j, ws := range c.Workers {
		q := c.Spec.Quant
		q.Workers = len(ws)
		for a := 0; a < ars; a++ {
			var want []int64
			buf := []int32{}
			for r := range ws {
				in := inputs[[3]int{j + 1, r, a}]
				if want == nil {
					want, buf = make([]int64, len(in)), make([]int32, len(in))
				}
				q.Quantize(buf, in, 0)
				for i, v := range buf {
					want[i] += int64(v)
				}
			}
			for r, w := range ws {
				got := w.Endpoint.Result(a)
				if len(got) != len(want) {
					t.Fatalf("%s: job %d rank %d all-reduce %d: %d values, want %d", policy, j, r, a, len(got), len(want))
				}
				for i := range want {
					if int64(got[i]) != want[i] {
						t.Fatalf("%s: job %d rank %d all-reduce %d value %d = %d, want %d (wrong sum)", policy, j, r, a, i, got[i], want[i])
					}
				}
			}
		}
	}
}

// fullSizeWithoutRace skips a long virtual-time test under the race
// detector: `make test` runs it at full size without -race in its first
// step (the Makefile's NORACE_TESTS), where it costs a twentieth of its
// shrunken -race run; the -race run keeps the smaller tests of the same
// code, in parallel, for data races between goroutines.
func fullSizeWithoutRace(t *testing.T) {
	t.Helper()
	if raceEnabled {
		t.Skip("runs at full size without -race, in make test's first step")
	}
}
