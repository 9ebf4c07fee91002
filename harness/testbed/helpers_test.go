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
