package testbed

import (
	"os"
	"testing"
	"time"
)

// TestScalingPair is the cheap pair of the scaling check
// (docs/results.md): one job of 4 workers, true 2 µs links, the gradient
// and the link rate scaled together (1 Gb/s with n chunks, 10 Gb/s with
// 10n): under every policy the all-reduce takes the same time within 2 %,
// as it would at 100 Gb/s. (With delays stretched by 1/rate_scale instead,
// fixed latencies grow against the transfer and FreeINA's all-reduce
// differs by 12 % between the two scales.) INABOX_LONG=1 (make soak) adds
// the true-scale run, 100 Gb/s with 100× the gradient, against 1 Gb/s.
func TestScalingPair(t *testing.T) {
	fullSizeWithoutRace(t)
	t.Parallel() // a long test: it shares the cores with the others (make test)
	// Enough chunks that the ring's fill and drain — 2(N−1) hops of a
	// 4 KB message, a time that does not scale with the rate — stay below
	// 1 % of the transfer.
	const chunks = 1000
	const workers, delay = 4, 2 * time.Microsecond
	scales := []int64{1, 10}
	if os.Getenv("INABOX_LONG") != "" {
		scales = append(scales, 100) // the true-scale run: 100 Gb/s, 100× the gradient
	}
	for _, pol := range Names() {
		at := make([]time.Duration, len(scales))
		for i, scale := range scales {
			rate := scale * 1e9
			elems := int(scale) * chunks * DefaultValues
			// (DynaINA's scheduler takes the job's profile from its spec)
			js := JobSpec{Workers: workers, GradientBytes: 4 * int64(elems), Compute: time.Millisecond, AllReduces: 1}
			spec := Spec{Seed: 1, LinkBitsPerSecond: rate, LinkDelay: delay, Latency: -1, Jobs: []JobSpec{js}}
			spec.Timers = ScaledTimers(rate, delay)
			spec.WantSlots = PipeSlots(rate, delay, 0, DefaultValues)
			c, _ := runExact(t, pol, spec, 1, elems, 10*time.Second, nil)
			r := c.Workers[0][0].Endpoint.Reports()[0]
			at[i] = r.End - r.Start
		}
		for i := 1; i < len(at); i++ {
			if ratio := float64(at[0]) / float64(at[i]); ratio < 0.98 || ratio > 1.02 {
				t.Errorf("%s: all-reduce %v at 1 Gb/s, %v at %d Gb/s (%d× the gradient): %.3f×, want within 2 %%",
					pol, at[0], at[i], scales[i], scales[i], ratio)
			} else {
				t.Logf("%s: %v at 1 Gb/s, %v at %d Gb/s: %.4f×", pol, at[0], at[i], scales[i], ratio)
			}
		}
	}
}
