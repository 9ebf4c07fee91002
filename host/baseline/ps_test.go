package baseline

import (
	"math/rand/v2"
	"testing"
)

// TestCover: whatever pieces (complete aggregates, overlapping partial
// sums, repeated single contributions) reach the PS, a result counts every
// worker exactly once, and with every single contribution present a result
// always exists.
func TestCover(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	const n, count = 6, 3
	for iter := 0; iter < 2000; iter++ {
		contrib := make([][]int32, n)
		want := make([]int32, count)
		for r := range contrib {
			contrib[r] = make([]int32, count)
			for i := range contrib[r] {
				contrib[r][i] = rng.Int32N(2001) - 1000
				want[i] += contrib[r][i]
			}
		}
		mk := func(b uint32) piece {
			v := make([]int32, count)
			for r := 0; r < n; r++ {
				if b&(1<<r) != 0 {
					add32(v, contrib[r])
				}
			}
			return piece{bits: b, vals: v}
		}
		var ps []piece
		for k := rng.IntN(8); k > 0; k-- {
			b := rng.Uint32N(1<<n-1) + 1
			if rng.IntN(10) == 0 {
				b = 1<<n - 1
			}
			ps = append(ps, mk(b))
		}
		sum, single := make([]int32, count), make([]int, n)
		_, _, ok := cover(ps, n, sum, single)
		if ok {
			for i := range want {
				if sum[i] != want[i] {
					t.Fatalf("iter %d: %v: sum %v, want %v", iter, ps, sum, want)
				}
			}
		}
		for r := 0; r < n; r++ { // every worker's raw contribution arrives
			ps = append(ps, mk(1<<r))
		}
		_, _, ok = cover(ps, n, sum, single)
		if !ok {
			t.Fatalf("iter %d: no cover with every single contribution", iter)
		}
		for i := range want {
			if sum[i] != want[i] {
				t.Fatalf("iter %d: sum %v, want %v", iter, sum, want)
			}
		}
	}
}
