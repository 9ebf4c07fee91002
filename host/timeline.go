package host

import (
	"fmt"
	"math"
	"time"
)

// Timeline is when a worker's all-reduces may begin: the rhythm of
// data-parallel training on one worker. Iteration i is a forward pass and
// then a backward pass during which the gradient's buckets become ready one
// after the other (bucket 0 first: it holds the last layers, whose
// gradients the backward pass computes first). Each bucket is one
// all-reduce, and begins once it is ready and the worker's previous
// all-reduce has ended (one collective at a time, as a framework's one
// communication stream runs them). Iteration i+1's forward pass begins
// when iteration i's last all-reduce has ended.
//
//	iteration i:  S_i ── Forward ──┬── Backward[0] ──┬── Backward[1] ──┬ …
//	                               │                 ready(bucket 0)   ready(bucket 1)
//	all-reduces:                   │                 ├─ bucket 0 ─┤    ├─ bucket 1 ─┤ …
//	iteration i+1: S_{i+1} = end of iteration i's last all-reduce
//
// All-reduce k is bucket k mod B of iteration k / B, with B = Buckets().
// A Timeline is a value: Ready is a pure function of k and the end of the
// all-reduce before it, so a worker that restarts computes the same times.
type Timeline struct {
	// Start is when the first iteration's forward pass begins: the job's
	// arrival plus the worker's start offset.
	Start time.Duration
	// Forward is the forward pass of one iteration.
	Forward time.Duration
	// Backward[b] is the backward compute between bucket b−1 becoming
	// ready (for b = 0: the forward pass's end) and bucket b becoming
	// ready. Its length is the number of buckets per iteration; empty
	// means one bucket, ready when the forward pass ends.
	Backward []time.Duration
	// Jitter stretches each iteration's compute on this worker.
	Jitter Jitter
}

// Buckets is the number of all-reduces per iteration.
func (t *Timeline) Buckets() int { return max(len(t.Backward), 1) }

// Compute is one iteration's compute time without jitter.
func (t *Timeline) Compute() time.Duration {
	c := t.Forward
	for _, b := range t.Backward {
		c += b
	}
	return c
}

// Ready returns when all-reduce k may begin, given iterStart, when its
// iteration's forward pass began (Start for iteration 0, else the end of
// the previous iteration's last all-reduce); the caller begins it at the
// later of Ready and the end of all-reduce k−1.
func (t *Timeline) Ready(k int, iterStart time.Duration) time.Duration {
	b := k % t.Buckets()
	d := t.Forward
	for i := 0; i <= b && i < len(t.Backward); i++ {
		d += t.Backward[i]
	}
	if f := t.Jitter.Factor(k / t.Buckets()); f != 1 {
		d = time.Duration(math.Round(float64(d) * f))
	}
	return iterStart + d
}

// The compute-time distributions of Jitter.
const (
	JitterNone      = ""
	JitterNormal    = "normal"
	JitterLognormal = "lognormal"
)

// Jitter is how one worker's compute time varies: iteration i's compute
// times are multiplied by Slow × X_i × H_i, where the X_i are independent
// draws with mean 1 and coefficient of variation CV from Dist (a normal is
// truncated at 0.05; a lognormal has σ² = ln(1+CV²), μ = −σ²/2) and H_i is
// HiccupSlow with probability HiccupP, else 1. The draws are a pure
// function of Key and i: the same Key gives the same times, on any run.
type Jitter struct {
	Dist string
	CV   float64
	// Slow is the worker's persistent slowdown (a straggler: 1.5 is 50 %
	// slower); 0 means 1.
	Slow float64
	// HiccupP is the probability that an iteration is HiccupSlow times
	// slower (an occasional slow iteration).
	HiccupP, HiccupSlow float64
	Key                 uint64
}

// Validate reports a Jitter that Factor cannot use.
func (j Jitter) Validate() error {
	switch {
	case j.Dist != JitterNone && j.Dist != JitterNormal && j.Dist != JitterLognormal:
		return fmt.Errorf("distribution %q: must be %s or %s", j.Dist, JitterNormal, JitterLognormal)
	case !(j.CV >= 0) || j.CV > 10:
		return fmt.Errorf("cv %v: must be in [0, 10]", j.CV)
	case j.Slow != 0 && !(j.Slow > 0 && j.Slow <= 1000):
		return fmt.Errorf("slow %v: must be in (0, 1000]", j.Slow)
	case !(j.HiccupP >= 0 && j.HiccupP <= 1):
		return fmt.Errorf("hiccup probability %v: must be in [0, 1]", j.HiccupP)
	case j.HiccupP > 0 && !(j.HiccupSlow > 0 && j.HiccupSlow <= 1000):
		return fmt.Errorf("hiccup factor %v: must be in (0, 1000]", j.HiccupSlow)
	}
	return nil
}

// Factor returns iteration i's compute-time multiplier.
func (j Jitter) Factor(i int) float64 {
	f := 1.0
	if j.Slow > 0 {
		f = j.Slow
	}
	if j.HiccupP > 0 && Uniform(j.Key^0xD1B54A32D192ED03, uint64(i)) < j.HiccupP {
		f *= j.HiccupSlow
	}
	if j.Dist == JitterNone || j.CV == 0 {
		return f
	}
	z := j.normal(uint64(i))
	switch j.Dist {
	case JitterNormal:
		return f * max(1+j.CV*z, 0.05)
	case JitterLognormal:
		s2 := math.Log1p(j.CV * j.CV)
		return f * math.Exp(math.Sqrt(s2)*z-s2/2)
	}
	return f
}

// normal returns a standard normal draw for (Key, i) (Box–Muller over two
// splitmix64 outputs).
func (j Jitter) normal(i uint64) float64 {
	x := j.Key ^ (i+1)*0x9E3779B97F4A7C15
	u1 := float64(splitmix64(&x)>>11+1) / (1 << 53) // (0, 1]
	u2 := float64(splitmix64(&x)>>11) / (1 << 53)   // [0, 1)
	return math.Sqrt(-2*math.Log(u1)) * math.Cos(2*math.Pi*u2)
}

// Uniform returns a uniform draw in [0, 1) that is a pure function of key
// and i.
func Uniform(key, i uint64) float64 {
	x := key ^ (i+1)*0x9E3779B97F4A7C15
	return float64(splitmix64(&x)>>11) / (1 << 53)
}

// splitmix64 advances x and returns its next output.
func splitmix64(x *uint64) uint64 {
	*x += 0x9E3779B97F4A7C15
	z := *x
	z = (z ^ z>>30) * 0xBF58476D1CE4E5B9
	z = (z ^ z>>27) * 0x94D049BB133111EB
	return z ^ z>>31
}

// NextReady returns when the endpoint's next all-reduce (the first one not
// finished) may begin under t: the Timeline's Ready of it, with its
// iteration's start taken from the reports of the finished ones.
func (c *Core) NextReady(t *Timeline) time.Duration {
	k := len(c.reports)
	b := t.Buckets()
	start := t.Start
	if it := k / b; it > 0 {
		start = c.reports[it*b-1].End
	}
	return t.Ready(k, start)
}
