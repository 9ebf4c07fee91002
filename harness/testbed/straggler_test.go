package testbed

import (
	"math"
	"testing"
	"time"

	"github.com/inabox/inabox/emu"
	"github.com/inabox/inabox/host"
)

// Stragglers: one worker of a job begins every all-reduce late, or every
// worker's compute jitters. A result that has not come back because a
// peer has not contributed yet is not a loss: the INA clients' timers fire
// for every chunk in the window while the switch waits, and must neither
// flood the network nor hand the chunks to the PS path
// (docs/freeina.md, "Timeouts and stragglers").

// stragglerPolicies are the INA policies a straggler test runs (FreeINA
// and DynaINA on the UC path, the default).
// atpNoFirstWait is ATP with Spec.ATPFirstWait off (the RTO from an
// all-reduce's start).
var stragglerPolicies = []string{"freeina", "dynaina", "switchml", "atp", "esa", atpNoFirstWait}

const atpNoFirstWait = "atp-first-wait-0"

// stragglerCase is a compute pattern for a job of stragglerWorkers
// workers, one bucket per iteration.
type stragglerCase struct {
	name string
	// forward is every worker's forward pass; slow the last rank's
	// slowdown (0: none); cv a lognormal jitter on every worker.
	forward time.Duration
	slow    float64
	cv      float64
	loss    float64
}

const (
	stragglerWorkers = 4
	stragglerARs     = 3
	stragglerChunks  = 400
)

var stragglerCases = []stragglerCase{
	{name: "late1ms", forward: time.Millisecond, slow: 2},
	{name: "late20us", forward: 20 * time.Microsecond, slow: 2},
	{name: "late2.5ms", forward: 5 * time.Millisecond, slow: 1.5},
	{name: "jitter", forward: time.Millisecond, cv: 0.05},
}

// timeline is rank's timeline under sc.
func (sc stragglerCase) timeline(rank int) host.Timeline {
	tl := host.Timeline{Forward: sc.forward}
	if sc.cv > 0 {
		tl.Jitter = host.Jitter{Dist: host.JitterLognormal, CV: sc.cv, Key: uint64(rank + 1)}
	}
	if rank == stragglerWorkers-1 && sc.slow > 0 {
		tl.Jitter.Slow = sc.slow
	}
	return tl
}

// compute returns iteration i's compute on the slowest worker and how
// much later than the fastest it ends.
func (sc stragglerCase) compute(i int) (slowest, spread time.Duration) {
	fastest := time.Duration(math.MaxInt64)
	for r := 0; r < stragglerWorkers; r++ {
		tl := sc.timeline(r)
		d := tl.Ready(i, 0)
		slowest, fastest = max(slowest, d), min(fastest, d)
	}
	return slowest, slowest - fastest
}

// stragglerResult is what one run measured.
type stragglerResult struct {
	jct time.Duration
	// resends: contributions resent after a timeout (INA path and PS
	// path); fallbacks: chunks that reached the PS path because of a
	// timeout (FreeINA: sent raw over RC, or pulled; SwitchML: results
	// from the PS; ATP, ESA: chunks the PS summed in software).
	resends, fallbacks int
	// peers: SwitchML re-contribution requests.
	peers int
	// window is the most chunks a worker has in flight; rto the first
	// retransmission timeout, maxWait the longest backed-off wait.
	window       int
	rto, maxWait time.Duration
}

// runStraggler runs policy on sc (or, with compute only, every worker at
// the same compute) and checks every result exactly.
func runStraggler(t *testing.T, policy string, sc stragglerCase) stragglerResult {
	t.Helper()
	spec := Spec{Seed: 11, Jobs: []JobSpec{{Workers: stragglerWorkers, Timeline: sc.timeline,
		AllReduces: stragglerARs, GradientBytes: 4 * 64 * stragglerChunks}}, Impairments: emu.Impairments{Loss: sc.loss}}
	if policy == atpNoFirstWait {
		policy, spec.ATPFirstWait = "atp", -1
	}
	c, jct := runExact(t, policy, spec, stragglerARs, 64*stragglerChunks, 2*time.Second, nil)
	tot := c.Totals(0)
	r := stragglerResult{jct: jct, resends: tot.Retransmits + tot.PSResends, peers: tot.PeerRequests}
	switch policy {
	case "freeina", "dynaina":
		r.fallbacks = tot.Fallbacks + int(c.FreeINAPS(0).Stats().Pulls)
		p := c.FreeINAWorker(0, 0).Reports()[0].Plan
		r.window = max(min(p.INA, 256)/2, 1) // host.Worker's PathUC window
		r.rto = UCTimeout(c.Spec.LinkBitsPerSecond, c.Spec.LinkDelay, c.latency(), c.Spec.ValuesPerPacket, 256)
		r.maxWait = UCMaxWait(r.rto, c.Spec.Timers.LeaseIdle)
	case "switchml":
		r.fallbacks = tot.PSResults
		r.window, r.rto = switchMLWindow(c), 50*time.Microsecond
		r.maxWait = r.rto << host.MaxBackoff
	default:
		r.fallbacks = int(c.ATPPS(0).Stats().SoftResults)
		r.window, r.rto = 2*c.PipeSlots(), 100*time.Microsecond
		r.maxWait = r.rto << host.MaxBackoff
	}
	r.window = min(r.window, stragglerChunks)
	return r
}

// timeoutsWithin bounds how often one chunk times out while it waits d for
// a late peer when the wait after its k-th timeout is rto·2^(k−1), at most
// maxWait (FreeINA, SwitchML; ATP/ESA's rto·2^k fire less often): the
// timeouts within d — ⌊log₂(d/rto)⌋ + 1 while the waits double, then one
// per maxWait — plus one that fires while the late peer's contributions
// are on their way.
func timeoutsWithin(d, rto, maxWait time.Duration) int {
	n, at, wait := 1, rto, rto
	for at <= d {
		n++
		at += wait
		wait = min(2*wait, maxWait)
	}
	return n
}

// TestStragglers: for every INA policy, a job of 4 workers all-reduces
// 3 × 400 chunks with one worker beginning every all-reduce 1 ms, 20 µs or
// 2.5 ms late (its compute 2× or 1.5× the others'), or with a 5 %
// lognormal compute jitter on every worker. Every result is exact, and
//
//   - the job takes at most 2 % more than the ideal: per iteration the
//     slowest worker's compute plus the all-reduce's time without a
//     straggler (measured on the same job with every worker at the same
//     compute; an upper bound of the ideal, since early workers hide the
//     handshake before the first chunk): the delay is paid once;
//   - no chunk falls back to the PS path (FreeINA: no chunk sent raw over
//     RC, no pull; SwitchML: no result from the PS; ATP/ESA: no chunk
//     summed by the PS): a late peer is not a loss;
//   - resends are bounded by the backoff: each of the N − 1 waiting
//     workers' window chunks times out at most timeoutsWithin times in an
//     iteration whose workers' computes end d apart: O(log(d/RTO)) up to
//     d ≈ RTO·2^(MaxBackoff+1), then one per longest wait. (A fixed
//     timeout resends each chunk d/RTO times: FreeINA 100 per chunk at
//     1 ms, 114 048 resends in all; SwitchML 20, 32 400.)
//
// ATP and ESA meet both because their workers wait ATP's 50 ms for an
// all-reduce's first result before a timeout (Spec.ATPFirstWait). Without
// that wait (atpNoFirstWait) a worker's retransmission finds its chunk's
// aggregator partial and forces the sum out to the PS, which frees the
// aggregator (in-ATP/ATP check_app_id_and_seq_resend;
// sw.contribution.force): a peer later than one RTO is handled as a loss
// and the PS finishes those chunks. For it the test asks for PS-finished
// chunks wherever the spread exceeds the RTO, and bounds the cost at the
// ideal plus 4 RTOs per all-reduce (measured: 3.0 RTOs at 1 ms and 2.5 ms
// late, 0.3 with the jitter).
func TestStragglers(t *testing.T) {
	fullSizeWithoutRace(t)
	t.Parallel() // a long test: it shares the cores with the others (make test)
	for _, policy := range stragglerPolicies {
		t.Run(policy, func(t *testing.T) {
			perAR := map[time.Duration]time.Duration{}
			for _, f := range []time.Duration{20 * time.Microsecond, time.Millisecond, 5 * time.Millisecond} {
				base := runStraggler(t, policy, stragglerCase{forward: f})
				if base.resends != 0 || base.fallbacks != 0 {
					t.Errorf("no straggler, %v compute: %d resends, %d fallbacks", f, base.resends, base.fallbacks)
				}
				perAR[f] = base.jct/stragglerARs - f
			}
			for _, sc := range stragglerCases {
				t.Run(sc.name, func(t *testing.T) {
					r := runStraggler(t, policy, sc)
					var ideal time.Duration
					bound := 0
					late := false // some spread exceeds the RTO
					for i := 0; i < stragglerARs; i++ {
						slowest, d := sc.compute(i)
						ideal += slowest + perAR[sc.forward]
						bound += (stragglerWorkers - 1) * r.window * timeoutsWithin(d, r.rto, r.maxWait)
						late = late || d > r.rto
					}
					t.Logf("%-8s %-9s JCT %v, ideal %v (%.3f×, +%.2f RTO per all-reduce); %d resends (bound %d), %d fallbacks, %d peer requests",
						policy, sc.name, r.jct, ideal, float64(r.jct)/float64(ideal), float64(r.jct-ideal)/float64(r.rto)/stragglerARs,
						r.resends, bound, r.fallbacks, r.peers)
					lim, what := ideal*102/100, "1.02 × ideal"
					forces := policy == atpNoFirstWait
					if forces {
						lim, what = ideal*102/100+stragglerARs*4*r.rto, "1.02 × ideal + 4 RTO per all-reduce"
					}
					if r.jct > lim {
						t.Errorf("JCT %v > %v (%s %v)", r.jct, lim, what, ideal)
					}
					switch {
					case !forces && r.fallbacks != 0:
						t.Errorf("%d chunks fell back to the PS path", r.fallbacks)
					case forces && late && r.fallbacks == 0:
						t.Errorf("no chunk forced to the PS although a peer was more than an RTO late")
					}
					if r.resends > bound {
						t.Errorf("%d resends > %d (window %d, RTO %v)", r.resends, bound, r.window, r.rto)
					}
				})
			}
		})
	}
}

// TestStragglersUnderLoss: the 1 ms straggler of TestStragglers with 1 %
// loss on every link. Once the straggler's first contribution completes a
// chunk, every other chunk's backed-off timer is brought in to one RTO:
// a loss that happens after a long wait costs one RTO, not the backed-off
// wait. The job takes at most the ideal (as TestStragglers, with the
// per-all-reduce time of the same job under the same loss without a
// straggler) plus 4 RTOs per all-reduce. (Without bringing the timers in:
// FreeINA 6.99 ms, 835 µs over the ideal; SwitchML 7.97 ms, 1.54 ms over.)
func TestStragglersUnderLoss(t *testing.T) {
	t.Parallel() // a long test: it shares the cores with the others (make test)
	for _, policy := range []string{"freeina", "dynaina", "switchml"} {
		t.Run(policy, func(t *testing.T) {
			sc := stragglerCase{name: "late1ms+loss1", forward: time.Millisecond, slow: 2, loss: 0.01}
			base := runStraggler(t, policy, stragglerCase{forward: sc.forward, loss: sc.loss})
			perAR := base.jct/stragglerARs - sc.forward
			r := runStraggler(t, policy, sc)
			var ideal time.Duration
			for i := 0; i < stragglerARs; i++ {
				slowest, _ := sc.compute(i)
				ideal += slowest + perAR
			}
			lim := ideal + stragglerARs*4*r.rto
			t.Logf("%-8s %s: JCT %v, ideal %v (%+v), bound %v; %d resends, %d fallbacks", policy, sc.name, r.jct, ideal, r.jct-ideal, lim,
				r.resends, r.fallbacks)
			if r.jct > lim {
				t.Errorf("JCT %v > %v (ideal %v + 4 RTOs per all-reduce)", r.jct, lim, ideal)
			}
		})
	}
}

// TestStragglerCausality: a straggler later than a FreeINA worker's whole
// fallback budget (UCRetries timeouts, backed off: ≈ 131 ms at 100 Gb/s)
// makes the other workers' window fall back to the PS, which pulls the
// straggler's contribution: the straggler answers only once it has begun
// the all-reduce (its gradient does not exist before), so no worker holds
// a result before every worker has begun, and every result is exact.
func TestStragglerCausality(t *testing.T) {
	sc := stragglerCase{forward: 150 * time.Millisecond, slow: 2}
	spec := Spec{Seed: 11, Jobs: []JobSpec{{Workers: stragglerWorkers, Timeline: sc.timeline}}}
	c, _ := runExact(t, "freeina", spec, 1, 64*stragglerChunks, 2*time.Second, nil)
	late := c.FreeINAWorker(0, stragglerWorkers-1).Reports()[0]
	tot := c.Totals(0)
	t.Logf("straggler begins at %v; %d fallbacks, %d pulls answered by it; %+v", late.Start, tot.Fallbacks, late.Pulls, tot)
	if tot.Fallbacks == 0 || late.Pulls == 0 {
		t.Fatalf("no fallback: the straggler was not late enough")
	}
	for r := range c.Workers[0] {
		if rep := c.FreeINAWorker(0, r).Reports()[0]; rep.End < late.Start {
			t.Errorf("worker %d finished at %v, before the straggler began (%v)", r, rep.End, late.Start)
		}
	}
}

// TestStragglerFallbackSpan: before a FreeINA worker holds a result, a
// missing result may be a late peer; the worker gives a chunk up to RC
// only UCBeginWait after it sent it (docs/freeina.md §12), a span in time
// taken from the true-scale timeouts (129.8 ms on these links), since a
// peer's lateness is compute time, which scaling does not stretch. So a
// peer 100 ms late makes no fallback and one 150 ms, 1 s or 2 s late makes
// the whole window fall back, at true scale and at rate_scale 0.01 alike.
// (When the span was a count of UC timeouts, it was 150 ms at true scale
// but 2 s at 0.01: the backoff stops at half the lease idle time, whose
// 2 ms is not stretched.)
func TestStragglerFallbackSpan(t *testing.T) {
	const workers, chunks = 4, 256
	elems := chunks * DefaultValues
	lates := []time.Duration{100 * time.Millisecond, 150 * time.Millisecond, time.Second, 2 * time.Second}
	fallbacks := map[float64][]int{}
	for _, s := range []float64{1, 0.01} {
		for _, late := range lates {
			rate := int64(float64(DefaultRate) * s)
			delay := time.Duration(float64(2*time.Microsecond) / s)
			js := lateRankJob(workers, elems, late)
			spec := Spec{Seed: 1, LinkBitsPerSecond: rate, LinkDelay: delay, Jobs: []JobSpec{js},
				Timers: ScaledTimers(rate, delay, s), RateScale: s}
			c, _ := runExact(t, "freeina", spec, 1, elems, 10*time.Second, nil)
			w := c.FreeINAWorker(0, 1)
			r, cfg := w.Reports()[0], w.Config()
			t.Logf("scale %g, peer %v late: %d fallbacks, %d resends (UC timeout %v, give-up %v, backoff cap %v)",
				s, late, r.Fallbacks, r.Retransmits, cfg.UCTimeout, cfg.UCBeginWait, cfg.UCMaxWait)
			fallbacks[s] = append(fallbacks[s], r.Fallbacks)
			if late <= 100*time.Millisecond && r.Fallbacks != 0 {
				t.Errorf("scale %g: a peer %v late made %d chunks fall back to RC", s, late, r.Fallbacks)
			}
			if late >= 150*time.Millisecond && r.Fallbacks == 0 {
				t.Errorf("scale %g: a peer %v late made no chunk fall back (give-up after %v)", s, late, cfg.UCBeginWait)
			}
		}
	}
	for i, late := range lates {
		if a, b := fallbacks[1][i], fallbacks[0.01][i]; a != b {
			t.Errorf("peer %v late: %d fallbacks at true scale, %d at 0.01", late, a, b)
		}
	}
}

// TestLeaseKeptWhilePeerLate: at true scale a FreeINA worker whose peer is
// 300 ms late gives up on its window's chunks after UCBeginWait
// (129.8 ms, TestStragglerFallbackSpan) and sends them raw over
// RC; its UC resends, which kept the lease in use, stop. The PS then
// renews the lease (host.PSConfig.KeepAlive) until the all-reduce ends, so
// when the peer comes, every later chunk still finds its aggregators: the
// all-reduce ends within 3 % of the peer's lateness plus its time without
// a late peer, nothing but the window reaches the PS path, no lease idles
// out and none is asked for again. (Without the renewals DynaINA's lease
// idled out, the scheduler ended the all-reduce and left the job, and all
// 4,096 chunks collided and were summed by the PS: +15 ms.)
func TestLeaseKeptWhilePeerLate(t *testing.T) {
	const workers, chunks, late = 4, 4096, 300 * time.Millisecond
	elems := chunks * DefaultValues
	for _, policy := range []string{"freeina", "dynaina"} {
		var base time.Duration
		for _, d := range []time.Duration{0, late} {
			js := lateRankJob(workers, elems, d)
			spec := Spec{Seed: 1, Jobs: []JobSpec{js}, Timers: ScaledTimers(DefaultRate, 2*time.Microsecond, 1)}
			c, jct := runExact(t, policy, spec, 1, elems, 10*time.Second, nil)
			if d == 0 {
				base = jct
				continue
			}
			ps := c.FreeINAPS(0).Stats()
			w := c.FreeINAWorker(0, 1).Reports()[0]
			window := w.Plan.INA / 2
			t.Logf("%s: %v (%v without the late peer); %d chunks fell back; PS: %d renewals, %d re-ALLOCs, %d software sums",
				policy, jct, base, w.Fallbacks, ps.KeepAlives, ps.Reallocs, ps.SoftResults)
			if jct-late > base*103/100 {
				t.Errorf("%s: the all-reduce took %v after the late peer's %v, want within 3 %% of %v", policy, jct-late, late, base)
			}
			if w.Fallbacks == 0 || ps.KeepAlives == 0 {
				t.Errorf("%s: %d fallbacks and %d renewals: the case does not test the renewal", policy, w.Fallbacks, ps.KeepAlives)
			}
			if ps.Reallocs != 0 || int(ps.SoftResults) > window {
				t.Errorf("%s: %d re-ALLOCs and %d chunks summed by the PS (window %d): the lease was lost", policy, ps.Reallocs, ps.SoftResults, window)
			}
			if policy == "dynaina" {
				if st := c.DynaINA().Stats(); st.IdleFrees != 0 {
					t.Errorf("dynaina: %d leases idled out", st.IdleFrees)
				}
			} else if st := c.FreeINA().Stats(); st.Expired != 0 {
				t.Errorf("freeina: %d leases idled out", st.Expired)
			}
		}
	}
}

// lateRankJob is one all-reduce of elems values among workers workers,
// each computing 1 ms, rank 0 beginning late.
func lateRankJob(workers, elems int, late time.Duration) JobSpec {
	return JobSpec{Workers: workers, GradientBytes: 4 * int64(elems), AllReduces: 1,
		Timeline: func(rank int) host.Timeline {
			tl := host.Timeline{Forward: time.Millisecond}
			if rank == 0 {
				tl.Start = late
			}
			return tl
		}}
}
