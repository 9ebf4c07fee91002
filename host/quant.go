package host

import (
	"encoding/binary"
	"math"
	"math/bits"
)

// QuantMode selects how float32 gradients become int32 switch values.
type QuantMode uint8

const (
	// QuantFixed (ATP-like): q = round(x · 2^F), one scale for the job.
	QuantFixed QuantMode = iota
	// QuantExponent (SwitchML-like): chunk c is scaled by 2^(B − e_c), where
	// e_c is a per-chunk (= per-packet) exponent carried in the INA header
	// and B = 30 − ceil(log2 N) is the headroom that keeps the sum of N
	// in-range values inside int32. All workers must use the same e_c for a
	// chunk: ExponentsFrom derives it from data every worker holds (the
	// previous all-reduce's identical result).
	QuantExponent
)

// Quantizer converts between float32 and the switch's int32 domain.
//
// Error bound (no clipping): each value is rounded to the nearest multiple
// of 2^-s (s = F, or B − e_c), an error ≤ 2^-(s+1); the int32 sum is exact
// (switch and PS add the same integers), so
//
//	|Σ_w x_w − Σ_w q_w · 2^-s| ≤ N · 2^-(s+1).
//
// Dequantize returns float64 so the bound holds as stated; converting to
// float32 adds at most half an ulp of the result.
//
// Clipping: a value whose quantized magnitude exceeds Limit() = ⌊(2^31−1)/N⌋
// is clipped to ±Limit() and counted, so the sum of N values never
// saturates int32.
type Quantizer struct {
	Mode    QuantMode
	Frac    int // F for QuantFixed (default 16)
	Workers int // N
}

// DefaultFrac is the fixed-point fraction bits used when Frac is 0.
const DefaultFrac = 16

func (q Quantizer) frac() int {
	if q.Frac == 0 {
		return DefaultFrac
	}
	return q.Frac
}

// Headroom returns B = 30 − ceil(log2 N): 2^B · N ≤ 2^30 < 2^31.
func (q Quantizer) Headroom() int {
	n := max(q.Workers, 1)
	return 30 - bits.Len(uint(n-1))
}

// Limit returns the largest magnitude of one quantized value.
func (q Quantizer) Limit() int32 {
	return int32(math.MaxInt32 / int64(max(q.Workers, 1)))
}

// Shift returns the scale exponent s of a chunk with exponent e: values are
// multiplied by 2^s.
func (q Quantizer) Shift(e int8) int {
	if q.Mode == QuantExponent {
		return q.Headroom() - int(e)
	}
	return q.frac()
}

// pow2 is 2^k, math.Ldexp(1, k), built from its bits where k is a normal
// float64's exponent: once per chunk quantized, Ldexp's general case cost
// more than a chunk's header.
func pow2(k int) float64 {
	if k >= -1022 && k <= 1023 {
		return math.Float64frombits(uint64(k+1023) << 52)
	}
	return math.Ldexp(1, k)
}

// Quantize writes round(x · 2^Shift(e)) of src into dst, clipping to
// ±Limit(); it returns how many values were clipped.
func (q Quantizer) Quantize(dst []int32, src []float32, e int8) (clipped int) {
	scale := pow2(q.Shift(e))
	lim := float64(q.Limit())
	dst = dst[:len(src)]
	// Four at a time, bounds checks hoisted; a group with a value out of
	// range (NaN is) goes through quantizeClip.
	for len(src) >= 4 {
		s, d := (*[4]float32)(src), (*[4]int32)(dst)
		v0, v1 := math.RoundToEven(float64(s[0])*scale), math.RoundToEven(float64(s[1])*scale)
		v2, v3 := math.RoundToEven(float64(s[2])*scale), math.RoundToEven(float64(s[3])*scale)
		if math.Abs(v0) <= lim && math.Abs(v1) <= lim && math.Abs(v2) <= lim && math.Abs(v3) <= lim {
			d[0], d[1], d[2], d[3] = int32(v0), int32(v1), int32(v2), int32(v3)
		} else {
			clipped += quantizeClip(d[:], s[:], scale, lim)
		}
		src, dst = src[4:], dst[4:]
	}
	return clipped + quantizeClip(dst, src, scale, lim)
}

// quantizeClip is Quantize a value at a time, scaled by scale and clipped
// to ±lim.
func quantizeClip(dst []int32, src []float32, scale, lim float64) (clipped int) {
	dst = dst[:len(src)]
	for i, x := range src {
		v := math.RoundToEven(float64(x) * scale)
		switch {
		case v > lim:
			v = lim
			clipped++
		case v < -lim:
			v = -lim
			clipped++
		case v != v: // NaN
			v = 0
			clipped++
		}
		dst[i] = int32(v)
	}
	return clipped
}

// roundMagic is 1.5·2^52 (see quantizeWire), and roundMagicBits its bits.
const (
	roundMagic     = 0x1.8p52
	roundMagicBits = 0x4338000000000000
)

// quantizeWire is Quantize writing each value big-endian into dst (4
// bytes a value), as the INA header's values are sent.
//
// A value y = x·scale with |y| < 2^51, added to 1.5·2^52, is rounded to the
// nearest integer, ties to even, and lands in [2^52, 2^53), where the
// float64's bits are those of 1.5·2^52 plus that integer: the bits less
// roundMagicBits are round(y). Anything else (|y| ≥ 2^51, infinities,
// NaN) gives a difference far outside ±Limit, so one unsigned comparison
// a value sends it to quantizeSlow with the values that need clipping.
func (q Quantizer) quantizeWire(dst []byte, src []float32, e int8) (clipped int) {
	scale := pow2(q.Shift(e))
	lim := int64(q.Limit())
	span := uint64(2 * lim)
	dst = dst[:4*len(src)]
	// Eight at a time with AVX2 where there is a kernel; a group of eight
	// with a value out of range goes through the loop below.
	for wideQuant && len(src) >= 8 {
		k := quantizeWireWide(dst, src, scale, lim)
		src, dst = src[k:], dst[4*k:]
		if len(src) >= 8 {
			clipped += quantizeSlow(dst[:32], src[:8], scale, float64(lim))
			src, dst = src[8:], dst[32:]
		}
	}
	// Four at a time, bounds checks hoisted; a group with a value out of
	// range (rare) goes through quantizeSlow.
	for len(src) >= 4 {
		s, d := (*[4]float32)(src), (*[16]byte)(dst)
		v0 := int64(math.Float64bits(float64(s[0])*scale+roundMagic)) - roundMagicBits
		v1 := int64(math.Float64bits(float64(s[1])*scale+roundMagic)) - roundMagicBits
		v2 := int64(math.Float64bits(float64(s[2])*scale+roundMagic)) - roundMagicBits
		v3 := int64(math.Float64bits(float64(s[3])*scale+roundMagic)) - roundMagicBits
		if uint64(v0+lim) <= span && uint64(v1+lim) <= span && uint64(v2+lim) <= span && uint64(v3+lim) <= span {
			binary.BigEndian.PutUint32(d[0:], uint32(v0))
			binary.BigEndian.PutUint32(d[4:], uint32(v1))
			binary.BigEndian.PutUint32(d[8:], uint32(v2))
			binary.BigEndian.PutUint32(d[12:], uint32(v3))
		} else {
			clipped += quantizeSlow(d[:], s[:], scale, float64(lim))
		}
		src, dst = src[4:], dst[16:]
	}
	return clipped + quantizeSlow(dst, src, scale, float64(lim))
}

// quantizeSlow is quantizeWire a value at a time, scaled by scale and
// clipped to ±lim.
func quantizeSlow(dst []byte, src []float32, scale, lim float64) (clipped int) {
	dst = dst[:4*len(src)]
	for i, x := range src {
		// Rounded to the nearest integer, ties to even: adding and
		// subtracting 1.5·2^52 leaves no fraction bits. Exact (as
		// math.RoundToEven) below 2^51 in magnitude; above, the value is
		// far beyond Limit and clipped either way.
		v := float64(x) * scale
		v = (v + roundMagic) - roundMagic
		if !(math.Abs(v) <= lim) { // one test for both limits and NaN
			switch {
			case v > lim:
				v = lim
			case v < -lim:
				v = -lim
			default: // NaN
				v = 0
			}
			clipped++
		}
		binary.BigEndian.PutUint32(dst[4*i:], uint32(int32(v)))
	}
	return clipped
}

// Dequantize writes Σq · 2^-Shift(e) into dst.
func (q Quantizer) Dequantize(dst []float64, src []int32, e int8) {
	s := q.Shift(e)
	for i, v := range src {
		dst[i] = math.Ldexp(float64(v), -s)
	}
}

// Bound returns the documented worst-case |Σx − deq(Σq)| for a chunk with
// exponent e when nothing was clipped: N · 2^-(Shift(e)+1).
func (q Quantizer) Bound(e int8) float64 {
	return float64(max(q.Workers, 1)) * math.Ldexp(1, -(q.Shift(e)+1))
}

// ExponentFor returns the exponent e (−64..63) such that every |x| in a
// chunk whose values are bounded by maxAbs fits: maxAbs ≤ 2^e.
func ExponentFor(maxAbs float64) int8 {
	if maxAbs <= 0 || maxAbs != maxAbs {
		return -64
	}
	_, e := math.Frexp(maxAbs) // maxAbs = f · 2^e, f in [0.5, 1)
	return int8(min(max(e, -64), 63))
}

// ExponentsFrom derives per-chunk exponents from data all workers hold
// identically (e.g. the previous iteration's all-reduced gradient divided
// by N, or a known per-chunk bound): chunk c gets ExponentFor(max|ref| in
// the chunk · 2^margin). Every worker computes the same exponents, so the
// switch adds values of one scale.
func ExponentsFrom(ref []float32, values, margin int) []int8 {
	n := (len(ref) + values - 1) / values
	out := make([]int8, n)
	for c := range out {
		m := 0.0
		for _, x := range ref[c*values : min((c+1)*values, len(ref))] {
			m = max(m, math.Abs(float64(x)))
		}
		out[c] = ExponentFor(math.Ldexp(m, margin))
	}
	return out
}
