package host

import (
	"slices"
	"testing"

	"github.com/inabox/inabox/switch/inahdr"
)

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

// sinkRecorder keeps what a ResultSink is given.
type sinkRecorder struct {
	got   map[uint32][]int32
	exps  map[uint32]int8
	calls int
}

func (s *sinkRecorder) ResultChunk(i int, k uint32, vals []int32, e int8) {
	s.calls++
	s.got[k], s.exps[k] = append([]int32(nil), vals...), e
}

// TestResultSink: with a sink, an endpoint passes each stored chunk, the
// values a kept result would hold, and keeps nothing; a chunk that does
// not fit is refused as before.
func TestResultSink(t *testing.T) {
	data := make([]float32, 300) // 4 chunks of 64 and one of 44
	for i := range data {
		data[i] = float32(i%17) - 8.5
	}
	ts := []Tensor{{AllReduce: 1, Data: data}}
	q := Quantizer{Mode: QuantExponent}
	ts[0].Exps = make([]int8, 5)
	for k := range ts[0].Exps {
		ts[0].Exps[k] = int8(k - 2)
	}
	src := NewCore(1, 0, 2, 64, q, ts)
	kept := NewCore(1, 1, 2, 64, q, ts)
	sunk := NewCore(1, 1, 2, 64, q, ts)
	rec := &sinkRecorder{got: map[uint32][]int32{}, exps: map[uint32]int8{}}
	sunk.SetResultSink(rec)
	kept.Begin(0, 0)
	sunk.Begin(0, 0)
	buf := make([]byte, 2048)
	for _, k := range []uint32{3, 0, 4, 1} {
		n := src.EncodeChunk(buf, 0, k, k, 0, nil)
		h := inahdr.Header(buf[:n])
		if !kept.Store(0, k, h) || !sunk.Store(0, k, h) {
			t.Fatalf("chunk %d refused", k)
		}
	}
	sunk.StoreValues(0, 2, []int32{7, 8, 9}, 5)
	kept.StoreValues(0, 2, []int32{7, 8, 9}, 5)
	if n := src.EncodeChunk(buf, 0, 4, 4, 0, nil); sunk.Store(0, 5, inahdr.Header(buf[:n])) || sunk.Store(0, 3, inahdr.Header(buf[:n])) {
		t.Fatal("a chunk past the tensor, or of the wrong length, was stored")
	}
	if rec.calls != 5 || sunk.Result(0) != nil || sunk.ResultExps(0) != nil || len(sunk.Dequantized(0)) != 0 {
		t.Fatalf("%d chunks passed, result %v held", rec.calls, sunk.Result(0))
	}
	res := kept.Result(0)
	for k := range uint32(5) {
		lo := int(k) * 64
		want := res[lo:min(lo+64, len(res))]
		if k == 2 {
			want = want[:3]
		}
		if !slices.Equal(rec.got[k], want) || rec.exps[k] != kept.ResultExps(0)[k] {
			t.Fatalf("chunk %d: passed %v (exponent %d), kept %v (%d)", k, rec.got[k], rec.exps[k], want, kept.ResultExps(0)[k])
		}
	}
}
