package host

import (
	"bytes"
	"encoding/binary"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/inabox/inabox/switch/inahdr"
)

// refEncode is EncodeChunk's values as Quantize writes them, big-endian,
// and the clipped count.
func refEncode(q Quantizer, data []float32, values int, k uint32, e int8) ([]byte, int) {
	lo := int(k) * values
	hi := min(lo+values, len(data))
	v := make([]int32, hi-lo)
	cl := q.Quantize(v, data[lo:hi], e)
	out := make([]byte, 4*len(v))
	for i, x := range v {
		binary.BigEndian.PutUint32(out[4*i:], uint32(x))
	}
	return out, cl
}

// wireSource is a WireSource over data that makes the wire form with
// refEncode (Quantize, chunk by chunk) from the plan it was given, and
// refuses one call in four.
type wireSource struct {
	data    []float32
	plan    WirePlan
	planned int
	rng     *rand.Rand
	served  int
}

func (w *wireSource) Len() int                    { return len(w.data) }
func (w *wireSource) Fill(dst []float32, off int) { copy(dst, w.data[off:]) }
func (w *wireSource) PlanWire(p WirePlan)         { w.plan = p; w.planned++ }
func (w *wireSource) FillWire(wire []byte, clip []int32, k uint32) bool {
	if w.rng.IntN(4) == 0 {
		return false
	}
	for j := range clip {
		b, cl := refEncode(w.plan.Quant, w.data, w.plan.Values, k+uint32(j), w.plan.Exp(k+uint32(j)))
		copy(wire[4*j*w.plan.Values:], b)
		clip[j] = int32(cl)
	}
	w.served++
	return true
}

// TestEncodeChunkBlocks: chunks encoded in any order — in order, resent,
// skipped ahead, from another tensor — carry the values and the clipped
// counts Quantize gives each one alone, for both modes and chunk sizes
// that do and do not divide the block or the tensor, from held values and
// from a WireSource (which gets the worker's plan once, and whose wire form
// the worker sends where it gives one).
func TestEncodeChunkBlocks(t *testing.T) {
	for _, src := range []bool{false, true} {
		t.Run(map[bool]string{false: "data", true: "wire-source"}[src], func(t *testing.T) { encodeChunkBlocks(t, src) })
	}
}

func encodeChunkBlocks(t *testing.T, fromSource bool) {
	rng := rand.New(rand.NewPCG(7, 8))
	special := []float32{0, float32(math.Copysign(0, -1)), float32(math.NaN()), float32(math.Inf(1)), float32(math.Inf(-1)),
		1e30, -1e30, 0.5, -0.5, 1.5, 2.5, -2.5, math.SmallestNonzeroFloat32}
	for _, mode := range []QuantMode{QuantFixed, QuantExponent} {
		for _, values := range []int{1, 7, 64, 256, 5000} {
			q := Quantizer{Mode: mode, Workers: 8}
			var ts []Tensor
			var data [][]float32
			var ws []*wireSource
			for a := range 2 {
				n := values*150 + rng.IntN(values)
				d := make([]float32, n)
				for i := range d {
					if rng.IntN(50) == 0 {
						d[i] = special[rng.IntN(len(special))]
					} else {
						d[i] = float32(rng.NormFloat64() * 3000)
					}
				}
				tn := Tensor{AllReduce: uint16(a + 1), Data: d}
				if mode == QuantExponent {
					tn.Exps = ExponentsFrom(d, values, 1)
				}
				data = append(data, d)
				if fromSource {
					w := &wireSource{data: d, rng: rng}
					tn.Data, tn.Source = nil, w
					ws = append(ws, w)
				}
				ts = append(ts, tn)
			}
			c := NewCore(1, 2, 8, values, q, ts)
			for a, w := range ws {
				if w.planned != 1 || w.plan.Values != values || w.plan.Quant != (Quantizer{Mode: mode, Workers: 8}) || len(w.plan.Exps) != len(ts[a].Exps) {
					t.Fatalf("mode %d values %d tensor %d: PlanWire called %d times with %+v", mode, values, a, w.planned, w.plan)
				}
			}
			buf := make([]byte, inahdr.Len+4*values)
			var rep Report
			want := 0
			for range 600 {
				i := rng.IntN(2)
				k := uint32(rng.IntN(int(c.Chunks(i))))
				if rng.IntN(3) > 0 { // mostly in order
					i, k = 0, uint32(want%int(c.Chunks(0)))
					want++
				}
				n := c.EncodeChunk(buf, i, k, k, 0, &rep)
				ref, cl := refEncode(q, data[i], values, k, c.Exp(i, k))
				if n != inahdr.Len+len(ref) || !bytes.Equal(buf[inahdr.Len:n], ref) {
					t.Fatalf("mode %d values %d tensor %d chunk %d: values differ from Quantize's", mode, values, i, k)
				}
				before := rep.Clipped
				c.EncodeChunk(buf, i, k, k, 0, &rep)
				if rep.Clipped-before != cl {
					t.Fatalf("mode %d values %d tensor %d chunk %d: %d clipped, want %d", mode, values, i, k, rep.Clipped-before, cl)
				}
			}
			for a, w := range ws {
				if w.served == 0 {
					t.Fatalf("mode %d values %d tensor %d: no chunk came from the WireSource", mode, values, a)
				}
			}
		}
	}
}

// TestQuantizeWire: quantizeWire writes Quantize's values and clips the
// same ones for random values at every scale, half-integers, values at
// and around the limit, and the special ones; with the AVX2 kernel
// (where the CPU has one) and with the Go loop alone.
func TestQuantizeWire(t *testing.T) {
	for _, w := range wideModes() {
		t.Run(w.name, func(t *testing.T) {
			defer setWideQuant(w.on)()
			testQuantizeWire(t)
		})
	}
}

// wideMode is one setting of wideQuant for a test.
type wideMode struct {
	name string
	on   bool
}

// wideModes returns the settings of wideQuant this build and CPU have:
// the Go loop alone, and the AVX2 kernel where there is one.
func wideModes() []wideMode {
	m := []wideMode{{"go", false}}
	if wideQuant {
		m = append(m, wideMode{"avx2", true})
	}
	return m
}

// setWideQuant sets wideQuant and returns what puts it back.
func setWideQuant(on bool) func() {
	was := wideQuant
	wideQuant = on
	return func() { wideQuant = was }
}

func testQuantizeWire(t *testing.T) {
	rng := rand.New(rand.NewPCG(9, 10))
	q := Quantizer{Mode: QuantExponent, Workers: 8}
	lim := float64(q.Limit())
	// Exponents −70..70 take the float32 kernel (scale 2^-43..2^97);
	// below −100 the scale is beyond a float32 and they take the float64
	// one (−100 is the last of the float32 kernel's: 2^127).
	exps := []int8{-128, -110, -101, -100}
	for e := int8(-70); e <= 70; e++ {
		exps = append(exps, e)
	}
	for _, e := range exps {
		s := q.Shift(e)
		var src []float32
		for range 2000 {
			src = append(src, math.Float32frombits(rng.Uint32()))
		}
		// Runs of values in range (whole groups for the kernel), some
		// at the limit's magnitude.
		for range 2000 {
			src = append(src, float32(rng.NormFloat64()*math.Ldexp(lim, -s-3)))
		}
		for _, m := range []float64{0.5, 1.5, 2.5, -0.5, -1.5, 3.5, lim, lim + 0.5, lim + 1, -lim, -lim - 0.5, -lim - 1, 1 << 51, 1 << 52, 1 << 53, 3 << 51} {
			for _, d := range []float64{-1, 0, 1} {
				x := float32(math.Ldexp(m, -s))
				src = append(src, math.Nextafter32(x, float32(d*math.Inf(1))), x)
			}
		}
		// Every alignment of the four- and eight-value groups, and a
		// short tail.
		for _, cut := range []int{0, 1, 2, 3, 4, 5, 6, 7} {
			src := src[cut:]
			want := make([]int32, len(src))
			wcl := q.Quantize(want, src, e)
			got := make([]byte, 4*len(src))
			if cl := q.quantizeWire(got, src, e); cl != wcl {
				t.Fatalf("exponent %d, from %d: %d clipped, want %d", e, cut, cl, wcl)
			}
			for i, w := range want {
				if g := int32(binary.BigEndian.Uint32(got[4*i:])); g != w {
					t.Fatalf("exponent %d: %g → %d, want %d", e, src[i], g, w)
				}
			}
		}
	}
}

// TestQuantizeGroups: Quantize, four values at a time, gives what its
// one-at-a-time loop (quantizeClip) gives, clipped counts included, for the
// values of TestQuantizeWire at every alignment.
func TestQuantizeGroups(t *testing.T) {
	rng := rand.New(rand.NewPCG(11, 12))
	q := Quantizer{Mode: QuantExponent, Workers: 8}
	lim := float64(q.Limit())
	for e := int8(-70); e <= 70; e += 7 {
		s := q.Shift(e)
		var src []float32
		for range 500 {
			src = append(src, math.Float32frombits(rng.Uint32()), float32(rng.NormFloat64()*math.Ldexp(1, -s+20)))
		}
		for _, m := range []float64{0.5, 1.5, 2.5, -0.5, -1.5, lim, lim + 0.5, lim + 1, -lim, -lim - 1, 1 << 52, math.Inf(1), math.NaN()} {
			src = append(src, float32(math.Ldexp(m, -s)))
		}
		for _, cut := range []int{0, 1, 2, 3} {
			src := src[cut:]
			want, got := make([]int32, len(src)), make([]int32, len(src))
			wcl := quantizeClip(want, src, math.Ldexp(1, s), lim)
			if cl := q.Quantize(got, src, e); cl != wcl || wcl == 0 {
				t.Fatalf("exponent %d, from %d: %d clipped, want %d (> 0)", e, cut, cl, wcl)
			}
			for i := range want {
				if got[i] != want[i] {
					t.Fatalf("exponent %d: %g → %d, want %d", e, src[i], got[i], want[i])
				}
			}
		}
	}
}
