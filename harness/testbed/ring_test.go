package testbed

import (
	"testing"
	"time"

	"github.com/inabox/inabox/rdma"
)

// TestRingNearBound: the ring baseline (none) runs within 1.1× its own
// wire bound — 2(N−1)/N of the gradient's chunks over a worker link, in
// MTU-sized messages — at the default 100 Gb/s and 1 µs links and at the
// scaled 1 Gb/s and 200 µs of the shipped scenarios (the RC window covers
// the round trip: RingWindow).
func TestRingNearBound(t *testing.T) {
	t.Parallel() // a long test: it shares the cores with the others (make test)
	const workers = 8
	// Enough chunks that the ring's fill and drain (2(N−1) hops) stay
	// small against the transfer, race detector or not.
	elems := 64 * 16000
	for _, tc := range []struct {
		name  string
		rate  int64
		delay time.Duration
	}{
		{"100G-1us", 100e9, time.Microsecond},
		{"1G-200us", 1e9, 200 * time.Microsecond},
	} {
		t.Run(tc.name, func(t *testing.T) {
			spec := Spec{Seed: 3, LinkBitsPerSecond: tc.rate, LinkDelay: tc.delay, Jobs: []JobSpec{{Workers: workers}}}
			elems := elems
			if tc.rate < 10e9 {
				elems /= 8 // at 1 Gb/s an eighth of the frames still spans 40 round trips
			}
			c, _ := runExact(t, "none", spec, 1, elems, 10*time.Second, nil)
			// The wire bound: each worker sends 2(N−1)/N of the chunks,
			// as records (INA header + values) packed into MTU-sized RC
			// messages, each message one frame with its headers.
			v := c.Spec.ValuesPerPacket
			chunks := (elems + v - 1) / v
			recs := float64(2*(workers-1)) / workers * float64(chunks)
			perMsg := float64(DefaultQP.MTU / (20 + 4*v))
			frameOverhead := float64(rdma.HeadersLen + rdma.BTHLen + rdma.ICRCLen + DefaultOverhead)
			bytes := recs*float64(20+4*v) + recs/perMsg*frameOverhead
			bound := time.Duration(bytes * 8 / float64(tc.rate) * 1e9)
			for r, w := range c.Workers[0] {
				rep := w.Endpoint.Reports()[0]
				got := rep.End - rep.Start
				if ratio := float64(got) / float64(bound); ratio > 1.1 || ratio < 1 {
					t.Errorf("worker %d: all-reduce %v, bound %v: %.3f× (want [1, 1.1])", r, got, bound, ratio)
				} else if r == 0 {
					t.Logf("all-reduce %v, bound %v: %.3f×", got, bound, ratio)
				}
			}
		})
	}
}
