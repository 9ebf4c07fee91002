package host

import (
	"math"
	"math/rand/v2"
	"testing"
)

// TestQuantFixedBound: the sum of N quantized vectors, computed exactly in
// int64 here, dequantizes to within N·2^-(F+1) of the float sum.
func TestQuantFixedBound(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	for _, n := range []int{1, 2, 8, 32} {
		for _, f := range []int{0, 8, 16, 20} {
			q := Quantizer{Mode: QuantFixed, Frac: f, Workers: n}
			if f == 0 {
				q.Frac = 0 // default 16
			}
			const m = 512
			sum := make([]float64, m)
			isum := make([]int64, m)
			buf := make([]int32, m)
			for w := 0; w < n; w++ {
				x := make([]float32, m)
				for i := range x {
					x[i] = float32(rng.NormFloat64() * 3)
					sum[i] += float64(x[i])
				}
				if cl := q.Quantize(buf, x, 0); cl != 0 {
					t.Fatalf("n=%d F=%d: %d clipped", n, f, cl)
				}
				for i, v := range buf {
					isum[i] += int64(v)
				}
			}
			out := make([]float64, m)
			i32 := make([]int32, m)
			for i, v := range isum {
				if v > math.MaxInt32 || v < math.MinInt32 {
					t.Fatalf("int32 sum overflow at %d", i)
				}
				i32[i] = int32(v)
			}
			q.Dequantize(out, i32, 0)
			b := q.Bound(0)
			for i := range out {
				if d := math.Abs(out[i] - sum[i]); d > b {
					t.Fatalf("n=%d F=%d: |err| %g > bound %g", n, q.Frac, d, b)
				}
			}
		}
	}
}

// TestQuantClip: values beyond Limit are clipped and counted; N clipped
// values still sum inside int32.
func TestQuantClip(t *testing.T) {
	q := Quantizer{Frac: 16, Workers: 8}
	dst := make([]int32, 4)
	cl := q.Quantize(dst, []float32{1e9, -1e9, float32(math.NaN()), 1}, 0)
	if cl != 3 || dst[0] != q.Limit() || dst[1] != -q.Limit() || dst[2] != 0 || dst[3] != 1<<16 {
		t.Fatalf("clipped %d: %v", cl, dst)
	}
	if int64(q.Limit())*8 > math.MaxInt32 {
		t.Fatal("limit too large")
	}
}

// TestQuantExponent: with a shared per-chunk exponent that bounds every
// value, nothing clips, the int32 sum never overflows, and the error is
// within N·2^-(B−e+1).
func TestQuantExponent(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	const n, m = 8, 64
	for _, mag := range []float64{1e-6, 1e-2, 1, 1e3, 1e6} {
		xs := make([][]float32, n)
		ref := make([]float32, m)
		for w := range xs {
			xs[w] = make([]float32, m)
			for i := range xs[w] {
				xs[w][i] = float32((rng.Float64()*2 - 1) * mag)
				ref[i] = float32(math.Max(float64(ref[i]), math.Abs(float64(xs[w][i]))))
			}
		}
		e := ExponentsFrom(ref, m, 0)[0]
		q := Quantizer{Mode: QuantExponent, Workers: n}
		isum := make([]int64, m)
		sum := make([]float64, m)
		buf := make([]int32, m)
		for w := range xs {
			if cl := q.Quantize(buf, xs[w], e); cl != 0 {
				t.Fatalf("mag %g: clipped %d", mag, cl)
			}
			for i, v := range buf {
				isum[i] += int64(v)
				sum[i] += float64(xs[w][i])
			}
		}
		i32 := make([]int32, m)
		for i, v := range isum {
			if v > math.MaxInt32 || v < math.MinInt32 {
				t.Fatal("overflow")
			}
			i32[i] = int32(v)
		}
		out := make([]float64, m)
		q.Dequantize(out, i32, e)
		for i := range out {
			if d := math.Abs(out[i] - sum[i]); d > q.Bound(e) {
				t.Fatalf("mag %g: err %g > %g", mag, d, q.Bound(e))
			}
		}
		// relative precision: about 2^-(B-1) of the magnitude
		if q.Bound(e) > mag*math.Ldexp(1, -20) {
			t.Fatalf("mag %g: bound %g too loose", mag, q.Bound(e))
		}
	}
}

// TestPow2: pow2 is math.Ldexp(1, k) for every k, normal or not.
func TestPow2(t *testing.T) {
	for k := -1100; k <= 1100; k++ {
		if got, want := pow2(k), math.Ldexp(1, k); got != want {
			t.Fatalf("pow2(%d) = %v, want %v", k, got, want)
		}
	}
}
