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
			spec.Timers = ScaledTimers(rate, delay, float64(scale)/100)
			spec.RateScale = float64(scale) / 100
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

// TestScaledTimersStretch: a scenario scaled by rate_scale s (rates × s,
// delays ÷ s) gets the true-scale timeouts stretched by exactly 1/s — the
// protocol timers (a lease's idle time less its fixed 2 ms) and the RC
// QPs' ACK timeout — so its runs time out at the same point of their
// stretched timeline. (Rounding the unit up to a
// power of two after scaling gave ATP's RTO 126 µs of true time at 0.01
// against 197 µs at true scale.)
func TestScaledTimersStretch(t *testing.T) {
	for _, c := range []struct {
		rate  int64
		delay time.Duration
	}{{100e9, 2 * time.Microsecond}, {100e9, time.Microsecond}, {25e9, 5 * time.Microsecond}, {400e9, 500 * time.Nanosecond}} {
		want := ScaledTimers(c.rate, c.delay, 1)
		wantRC := (&Testbed{Spec: Spec{LinkBitsPerSecond: c.rate, PSLinkBitsPerSecond: c.rate, LinkDelay: c.delay, QueuePackets: DefaultQueuePackets, ValuesPerPacket: DefaultValues}}).rcQP()
		for _, s := range []float64{0.1, 0.01, 0.001} {
			k := 1 / s
			rate, delay := int64(float64(c.rate)*s), time.Duration(float64(c.delay)*k)
			got := ScaledTimers(rate, delay, s)
			for _, f := range []struct {
				name      string
				got, want time.Duration
			}{{"grant", got.GrantTimeout, want.GrantTimeout}, {"lease idle less 2 ms", got.LeaseIdle - 2*time.Millisecond, want.LeaseIdle - 2*time.Millisecond},
				{"result", got.ResultTimeout, want.ResultTimeout}, {"RTO", got.RTO, want.RTO}, {"SwitchML RTO", got.SwitchMLRTO, want.SwitchMLRTO}} {
				if d := float64(f.got) - float64(f.want)*k; d > 1 || d < -1 {
					t.Errorf("%d b/s %v at scale %g: %s %v, want %v × %g", c.rate, c.delay, s, f.name, f.got, f.want, k)
				}
			}
			rc := (&Testbed{Spec: Spec{LinkBitsPerSecond: rate, PSLinkBitsPerSecond: rate, LinkDelay: delay, QueuePackets: DefaultQueuePackets, ValuesPerPacket: DefaultValues, RateScale: s}}).rcQP()
			if rc.Timeout != wantRC.Timeout || rc.TimeoutStretch != k {
				t.Errorf("%d b/s %v at scale %g: RC timeout 2^%d × %g, want 2^%d × %g", c.rate, c.delay, s, rc.Timeout, rc.TimeoutStretch, wantRC.Timeout, k)
			}
		}
	}
}

// TestUCFallbackSpansStretchedACKTimeouts: a FreeINA worker sends a UC
// contribution raw over RC only after UCRetries UC timeouts, which must
// span four RC ACK timeouts as its QP runs them — stretched by
// 1/rate_scale in a scaled scenario — so a fallback never comes sooner
// than RC recovers a loss. Both stretch alike, so the count is the same at
// every scale (within 10 %). (Sized from the unstretched exponent, the
// scaled workers fell back after 16 timeouts: in esa-stragglers BERT's
// chunks collided and were retransmitted 1.15 M times, and its JCT went
// from 4.24 to 7.53 s.)
func TestUCFallbackSpansStretchedACKTimeouts(t *testing.T) {
	const workers, chunks = 4, 64
	elems := chunks * DefaultValues
	for _, pol := range []string{"freeina", "dynaina"} {
		retries := 0
		for _, s := range []float64{1, 0.1, 0.01} {
			rate := int64(float64(DefaultRate) * s)
			delay := time.Duration(float64(2*time.Microsecond) / s)
			js := JobSpec{Workers: workers, GradientBytes: 4 * int64(elems), AllReduces: 1, Compute: time.Millisecond}
			spec := Spec{Seed: 1, LinkBitsPerSecond: rate, LinkDelay: delay, Jobs: []JobSpec{js},
				Timers: ScaledTimers(rate, delay, s), RateScale: s}
			c, _ := runExact(t, pol, spec, 1, elems, 10*time.Second, nil)
			cfg := c.FreeINAWorker(0, 1).Config()
			span, ack := time.Duration(cfg.UCRetries)*cfg.UCTimeout, cfg.QP.ACKTimeout()
			if span < 4*ack {
				t.Errorf("%s at scale %g: falls back after %d × %v = %v, under four ACK timeouts of %v", pol, s, cfg.UCRetries, cfg.UCTimeout, span, ack)
			}
			if retries == 0 {
				retries = cfg.UCRetries
			} else if r := float64(cfg.UCRetries) / float64(retries); r < 0.9 || r > 1.1 {
				// (within 10 %: the switch's pipeline latency, not
				// stretched, is a larger share of the true-scale UC timeout)
				t.Errorf("%s at scale %g: %d UC retries, %d at true scale", pol, s, cfg.UCRetries, retries)
			}
		}
	}
}
