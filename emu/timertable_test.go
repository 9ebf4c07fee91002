package emu

import (
	"math/rand/v2"
	"testing"
)

// TestTimerTable: a timerTable answers as a map does, for keys in its
// array, keys beyond it, and both after clear.
func TestTimerTable(t *testing.T) {
	var tt timerTable
	ref := map[uint64]timerState{}
	r := rand.New(rand.NewPCG(1, 2))
	keys := []uint64{0, 1, 3, smallTimers - 1, smallTimers, 17, 1 << 40, 1<<63 | 1}
	for i := range 20000 {
		k := keys[r.IntN(len(keys))]
		switch op := r.IntN(10); {
		case op < 5:
			st := timerState{at: int64(i), evAt: int64(i / 2), seq: uint64(i), gen: uint32(i)}
			tt.put(k, st)
			ref[k] = st
		case op < 9:
			tt.del(k)
			delete(ref, k)
		case i%7 == 0:
			tt.clear()
			clear(ref)
		}
		for _, k := range keys {
			got, ok := tt.get(k)
			want, wok := ref[k]
			if ok != wok || (ok && got != want) {
				t.Fatalf("step %d key %#x: got %+v %v, want %+v %v", i, k, got, ok, want, wok)
			}
		}
	}
}
