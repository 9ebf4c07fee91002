package baseline

import (
	"math/rand/v2"
	"testing"
)

// TestChunkTable: the table agrees with a map under random and ordered
// sets and gets, across pages and at the ends of the chunk numbers.
func TestChunkTable(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	var tb chunkTable[int]
	ref := map[uint32]*int{}
	keys := []uint32{0, chunkPage - 1, chunkPage, 1<<32 - 1, 1<<32 - chunkPage}
	for i := range 20000 {
		var k uint32
		switch {
		case i < len(keys):
			k = keys[i]
		case rng.IntN(2) == 0:
			k = uint32(i)
		default:
			k = rng.Uint32() % 100000
		}
		if got := tb.get(k); got != ref[k] {
			t.Fatalf("get(%d) = %p, want %p", k, got, ref[k])
		}
		if rng.IntN(3) > 0 {
			v := new(int)
			tb.set(k, v)
			ref[k] = v
		}
	}
	for k, v := range ref {
		if tb.get(k) != v {
			t.Fatalf("get(%d) after all sets: wrong record", k)
		}
	}
}
