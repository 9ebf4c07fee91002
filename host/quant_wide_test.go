package host

import (
	"encoding/binary"
	"fmt"
	"math"
	"math/rand/v2"
	"testing"
)

// FuzzQuantizeWire: for any values and exponent, quantizeWire (with the
// AVX2 kernel where there is one, and without) writes the values Quantize
// gives and clips as many.
func FuzzQuantizeWire(f *testing.F) {
	seed := make([]byte, 4*19)
	for i := range 19 {
		binary.LittleEndian.PutUint32(seed[4*i:], math.Float32bits(float32(i)*0.37-3))
	}
	f.Add(seed, int8(0), uint8(8))
	f.Add(seed, int8(-20), uint8(1))
	binary.LittleEndian.PutUint32(seed[4*9:], 0x7fc00000) // a NaN in the second group
	f.Add(seed, int8(3), uint8(255))
	f.Fuzz(func(t *testing.T, raw []byte, e int8, workers uint8) {
		src := make([]float32, len(raw)/4)
		for i := range src {
			src[i] = math.Float32frombits(binary.LittleEndian.Uint32(raw[4*i:]))
		}
		q := Quantizer{Mode: QuantExponent, Workers: int(workers)}
		want := make([]int32, len(src))
		wcl := q.Quantize(want, src, e)
		for _, w := range wideModes() {
			restore := setWideQuant(w.on)
			got := make([]byte, 4*len(src))
			cl := q.quantizeWire(got, src, e)
			restore()
			if cl != wcl {
				t.Fatalf("%s: %d clipped, want %d", w.name, cl, wcl)
			}
			for i := range want {
				if g := int32(binary.BigEndian.Uint32(got[4*i:])); g != want[i] {
					t.Fatalf("%s: value %d (%g) → %d, want %d", w.name, i, src[i], g, want[i])
				}
			}
		}
	})
}

// BenchmarkQuantizeWire: quantizeWire over a chunk of values in (-1, 1),
// none clipped (values=N), with the AVX2 kernel where there is one and
// with the Go loop alone; values/s is the rate.
func BenchmarkQuantizeWire(b *testing.B) {
	q := Quantizer{Mode: QuantExponent, Workers: 8}
	rng := rand.New(rand.NewPCG(1, 2))
	for _, n := range []int{64, 256, 1 << 16} {
		src := make([]float32, n)
		for i := range src {
			src[i] = float32(2*rng.Float64() - 1)
		}
		dst := make([]byte, 4*n)
		for _, w := range wideModes() {
			b.Run(fmt.Sprintf("values=%d/%s", n, w.name), func(b *testing.B) {
				defer setWideQuant(w.on)()
				b.ReportAllocs()
				for b.Loop() {
					q.quantizeWire(dst, src, 0)
				}
				b.ReportMetric(float64(b.N)*float64(n)/b.Elapsed().Seconds(), "values/s")
			})
		}
	}
}
