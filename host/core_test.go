package host

import "testing"

// TestResultBuffersReused: the results an iteration's buckets dropped are
// taken again by the next iteration's buckets, each by the one it fits
// best, cleared; none is allocated anew.
func TestResultBuffersReused(t *testing.T) {
	sizes := []int{100, 4000, 50, 1000} // one iteration's buckets
	var ts []Tensor
	for it := 0; it < 2; it++ {
		for _, n := range sizes {
			ts = append(ts, Tensor{AllReduce: uint16(len(ts) + 1), Data: make([]float32, n)})
		}
	}
	c := NewCore(1, 0, 2, 64, Quantizer{}, ts)
	first := map[int]*int32{}
	for i := range sizes {
		c.Begin(i, 0)
		r := c.Result(i)
		for k := range r {
			r[k] = int32(k + 1)
		}
		first[sizes[i]] = &r[0]
	}
	for i := range sizes {
		c.DropResult(i)
		if c.Result(i) != nil {
			t.Fatalf("result %d still held after DropResult", i)
		}
	}
	for i := range sizes {
		j := len(sizes) + i
		c.Begin(j, 0)
		r := c.Result(j)
		if len(r) != sizes[i] {
			t.Fatalf("tensor %d: result of %d values, want %d", j, len(r), sizes[i])
		}
		if &r[0] != first[sizes[i]] {
			t.Errorf("tensor %d (%d values) did not take the dropped buffer of its size", j, sizes[i])
		}
		for k, v := range r {
			if v != 0 {
				t.Fatalf("tensor %d: value %d = %d in a reused buffer, want 0", j, k, v)
			}
		}
	}
}
