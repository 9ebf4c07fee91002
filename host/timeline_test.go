package host

import (
	"math"
	"slices"
	"testing"
	"time"
)

func TestTimelineBuckets(t *testing.T) {
	us := time.Microsecond
	tl := Timeline{Start: 100 * us, Forward: 10 * us, Backward: []time.Duration{3 * us, 4 * us, 5 * us}}
	if tl.Buckets() != 3 || tl.Compute() != 22*us {
		t.Fatalf("Buckets %d Compute %v, want 3 and 22µs", tl.Buckets(), tl.Compute())
	}
	// ready(bucket b) = iteration start + forward + backward[0..b]
	for k, want := range []time.Duration{13, 17, 22, 13, 17, 22} {
		if got := tl.Ready(k, 1000*us); got != 1000*us+want*us {
			t.Errorf("Ready(%d) = %v, want %v", k, got, 1000*us+want*us)
		}
	}
	// The zero Timeline: each all-reduce as soon as its iteration starts.
	var z Timeline
	if z.Buckets() != 1 || z.Ready(5, 7*us) != 7*us {
		t.Errorf("zero timeline: Buckets %d Ready %v, want 1 and 7µs", z.Buckets(), z.Ready(5, 7*us))
	}
}

// TestNextReady walks an endpoint's core through two iterations of three
// buckets: each iteration starts when the previous one's last all-reduce
// ended, whatever its other buckets did.
func TestNextReady(t *testing.T) {
	us := time.Microsecond
	tl := Timeline{Start: 50 * us, Forward: 10 * us, Backward: []time.Duration{1 * us, 2 * us, 3 * us}}
	c := NewCore(1, 0, 2, 64, Quantizer{}, make([]Tensor, 6))
	ends := []time.Duration{70, 90, 95, 200, 210, 400}
	want := []time.Duration{61, 63, 66, 106, 108, 111}
	for k := range ends {
		if got := c.NextReady(&tl); got != want[k]*us {
			t.Fatalf("all-reduce %d: NextReady %v, want %v", k, got, want[k]*us)
		}
		c.Finish(Report{}, ends[k]*us)
	}
}

// TestJitterDistribution checks the draws statistically: mean 1 and the
// asked-for CV within 5 standard errors, and a Kolmogorov–Smirnov test of
// the draws (of their logarithm for the lognormal) against the normal
// distribution they should follow, at the 0.1 % level.
func TestJitterDistribution(t *testing.T) {
	const n = 20000
	for _, c := range []struct {
		dist string
		cv   float64
	}{{JitterLognormal, 0.05}, {JitterLognormal, 0.3}, {JitterNormal, 0.05}, {JitterNormal, 0.1}} {
		j := Jitter{Dist: c.dist, CV: c.cv, Key: 42}
		xs := make([]float64, n)
		var sum float64
		for i := range xs {
			xs[i] = j.Factor(i)
			sum += xs[i]
		}
		mean := sum / n
		var ss float64
		for _, x := range xs {
			ss += (x - mean) * (x - mean)
		}
		sd := math.Sqrt(ss / (n - 1))
		if se := c.cv / math.Sqrt(n); math.Abs(mean-1) > 5*se {
			t.Errorf("%s cv %v: mean %.5f, want 1 ± %.5f", c.dist, c.cv, mean, 5*se)
		}
		// The standard error of a sample SD is about sd/sqrt(2n) for a normal;
		// a lognormal's is larger: allow 5 % relative.
		if math.Abs(sd/mean-c.cv) > 0.05*c.cv {
			t.Errorf("%s cv %v: measured cv %.4f", c.dist, c.cv, sd/mean)
		}
		mu, sigma := 1.0, c.cv
		ys := xs
		if c.dist == JitterLognormal {
			s2 := math.Log1p(c.cv * c.cv)
			mu, sigma = -s2/2, math.Sqrt(s2)
			ys = make([]float64, n)
			for i, x := range xs {
				ys[i] = math.Log(x)
			}
		}
		slices.Sort(ys)
		d := 0.0
		for i, y := range ys {
			f := 0.5 * (1 + math.Erf((y-mu)/(sigma*math.Sqrt2)))
			d = max(d, math.Abs(f-float64(i)/n), math.Abs(f-float64(i+1)/n))
		}
		if crit := 1.95 / math.Sqrt(n); d > crit {
			t.Errorf("%s cv %v: Kolmogorov–Smirnov D = %.4f > %.4f", c.dist, c.cv, d, crit)
		}
	}
}

func TestJitterDeterministic(t *testing.T) {
	a := Jitter{Dist: JitterLognormal, CV: 0.1, Slow: 1.5, Key: 7}
	b := a
	b.Key = 8
	same := 0
	for i := 0; i < 100; i++ {
		if a.Factor(i) != a.Factor(i) {
			t.Fatal("Factor is not a function of (Key, i)")
		}
		if a.Factor(i) == b.Factor(i) {
			same++
		}
	}
	if same > 0 {
		t.Errorf("keys 7 and 8 drew %d equal factors of 100", same)
	}
	if f := (Jitter{Slow: 1.5}).Factor(3); f != 1.5 {
		t.Errorf("a straggler without jitter: factor %v, want 1.5", f)
	}
	if f := (Jitter{}).Factor(3); f != 1 {
		t.Errorf("no jitter: factor %v, want 1", f)
	}
	for _, bad := range []Jitter{{Dist: "gamma"}, {CV: -1}, {CV: math.NaN()}, {Slow: -2}, {Slow: math.Inf(1)}} {
		if bad.Validate() == nil {
			t.Errorf("%+v: Validate accepted it", bad)
		}
	}
}

// TestTimelineJitter: a jittered iteration stretches every bucket's ready
// time by the same factor.
func TestTimelineJitter(t *testing.T) {
	tl := Timeline{Forward: 100 * time.Microsecond, Backward: []time.Duration{50 * time.Microsecond, 50 * time.Microsecond},
		Jitter: Jitter{Dist: JitterLognormal, CV: 0.2, Key: 3}}
	for it := 0; it < 5; it++ {
		f := tl.Jitter.Factor(it)
		for b, base := range []float64{150e3, 200e3} {
			want := time.Duration(math.Round(base * f))
			if got := tl.Ready(2*it+b, 0); got != want {
				t.Errorf("iteration %d bucket %d: ready %v, want %v", it, b, got, want)
			}
		}
	}
}

// TestJitterHiccups: the share of slowed iterations matches HiccupP.
func TestJitterHiccups(t *testing.T) {
	const n = 20000
	j := Jitter{HiccupP: 0.05, HiccupSlow: 3, Key: 11}
	slow := 0
	for i := 0; i < n; i++ {
		switch f := j.Factor(i); f {
		case 3:
			slow++
		case 1:
		default:
			t.Fatalf("iteration %d: factor %v, want 1 or 3", i, f)
		}
	}
	// binomial(20000, 0.05): sd ≈ 30.8; allow 5 sd
	if slow < 1000-154 || slow > 1000+154 {
		t.Errorf("%d of %d iterations slowed, want 1000 ± 154", slow, n)
	}
}
