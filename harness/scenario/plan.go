package scenario

import (
	"fmt"
	"maps"
	"math"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/inabox/inabox/harness/testbed"
	sw "github.com/inabox/inabox/switch"
)

// JobPlan is a job resolved against its model, the scaling and the
// topology: what the runner builds.
type JobPlan struct {
	Index      int // position in jobs; the switch job id is Index+1
	Name       string
	Model      Model
	Workers    int
	Iterations int
	Arrival    time.Duration
	Priority   int
	// Hosts[i] runs worker i; PS aggregates what the switch does not.
	Hosts []string
	PS    string
	// Per all-reduce, after tensor_scale: int32 elements, payload bytes and
	// INA packets per worker.
	Elements, Bytes, Packets int64
	// Compute is the per-iteration compute time (the model's, or derived
	// from comm_ratio).
	Compute time.Duration
	// CommIdeal is the all-reduce lower bound at the scaled link rate with
	// INA headers; CommRatio is CommIdeal / Compute.
	CommIdeal time.Duration
	CommRatio float64
	// Forward is the forward pass of an iteration and Buckets its
	// all-reduces in the order they become ready (one, of the whole
	// gradient after the whole compute, without bucket_mib): Compute is
	// Forward plus the buckets' Backward.
	Forward time.Duration
	Buckets []BucketPlan
	// ComputeVar is how the workers' compute varies (nil: not at all).
	ComputeVar *Compute
}

// BucketPlan is one all-reduce of an iteration, after tensor_scale: the
// gradient elements [Offset, Offset+Elements) in Packets INA packets,
// ready Backward after the previous bucket (or the forward pass).
type BucketPlan struct {
	Offset, Elements, Packets int64
	Backward                  time.Duration
}

// AllReduces is the number of all-reduces of the job's run.
func (p *JobPlan) AllReduces() int { return p.Iterations * len(p.Buckets) }

// Plan resolves every job. The scenario must be valid for models.
// Worker placement: with topology.hosts 0 each worker has its own host,
// jobs taking consecutive hosts; otherwise job j's workers start at host
// (sum of earlier jobs' workers) mod hosts, wrapping, so jobs share hosts
// evenly. Job j uses ps<PSOf(j)>.
func (s *Scenario) Plan(models Models) []JobPlan {
	models = s.withOwn(models)
	hosts := s.HostNames()
	vpp := int64(s.Topology.Switch.ValuesPerPacket)
	eff := WireEfficiency(int(vpp), INAHeaderBytes)
	rate := float64(s.LinkBitsPerSecond())
	out := make([]JobPlan, len(s.Jobs))
	off := 0
	for i, j := range s.Jobs {
		m := models[j.Model]
		elems := max(int64(math.Ceil(float64(m.Elements())*s.Scaling.TensorScale)), 1)
		p := JobPlan{Index: i, Name: j.Name, Model: m, Workers: j.Workers, Iterations: j.Iterations,
			Arrival: j.Arrival.D(), Priority: j.Priority, PS: "ps" + strconv.Itoa(s.PSOf(i)),
			Elements: elems, Bytes: 4 * elems, Packets: (elems + vpp - 1) / vpp, Compute: m.Compute(),
			Forward: m.Compute(), Buckets: []BucketPlan{{Elements: elems, Packets: (elems + vpp - 1) / vpp}}, ComputeVar: s.ComputeOf(i)}
		if j.BucketMiB > 0 {
			fwd, bs := m.Buckets(int64(math.Round(j.BucketMiB * (1 << 20))))
			p.Forward, p.Compute, p.Elements, p.Packets, p.Buckets = fwd, fwd, 0, 0, nil
			for _, b := range bs {
				e := max(int64(math.Ceil(float64(b.Params)*s.Scaling.TensorScale)), 1)
				bp := BucketPlan{Offset: p.Elements, Elements: e, Packets: (e + vpp - 1) / vpp, Backward: b.Backward}
				p.Buckets = append(p.Buckets, bp)
				p.Elements += e
				p.Packets += bp.Packets
				p.Compute += b.Backward
			}
			p.Bytes = 4 * p.Elements
		}
		for w := 0; w < j.Workers; w++ {
			p.Hosts = append(p.Hosts, hosts[(off+w)%len(hosts)])
		}
		off += j.Workers
		if rate > 0 {
			p.CommIdeal = time.Duration(math.Round(float64(p.Bytes) * 8 / (rate * eff) * 1e9))
		}
		if j.CommRatio > 0 {
			c := time.Duration(math.Round(float64(p.CommIdeal) / j.CommRatio))
			if old := p.Compute; old > 0 && j.BucketMiB > 0 {
				f := float64(c) / float64(old)
				stretch := func(d time.Duration) time.Duration { return time.Duration(math.Round(float64(d) * f)) }
				p.Forward = stretch(p.Forward)
				c = p.Forward
				for k := range p.Buckets {
					p.Buckets[k].Backward = stretch(p.Buckets[k].Backward)
					c += p.Buckets[k].Backward
				}
			} else {
				p.Forward = c
			}
			p.Compute = c
		}
		if p.Compute > 0 {
			p.CommRatio = float64(p.CommIdeal) / float64(p.Compute)
		}
		out[i] = p
	}
	return out
}

// Estimate is a rough cost of a scenario for the emulator.
type Estimate struct {
	// WorkerPackets is the INA packets all workers send over the run (no
	// retransmissions); the emulator handles about 3 packet events per
	// worker packet (to the switch, result multicast, RC ACK).
	WorkerPackets int64
	// VirtualTime is a lower bound on the makespan: the latest of arrival +
	// iterations × (compute + ideal all-reduce) over the jobs.
	VirtualTime time.Duration
}

// Estimate computes the cost estimate. The scenario must be valid for
// models.
func (s *Scenario) Estimate(models Models) Estimate {
	models = s.withOwn(models)
	var e Estimate
	for _, p := range s.Plan(models) {
		e.WorkerPackets += p.Packets * int64(p.Workers) * int64(p.Iterations)
		// With buckets the last one's all-reduce is what overlaps no compute.
		comm := p.CommIdeal
		if n := len(p.Buckets); n > 1 {
			comm = time.Duration(float64(p.CommIdeal) * float64(p.Buckets[n-1].Packets) / float64(max(p.Packets, 1)))
		}
		e.VirtualTime = max(e.VirtualTime, p.Arrival+time.Duration(p.Iterations)*(p.Compute+comm))
	}
	return e
}

// FixedTraversals is the most link traversals an all-reduce of the shipped
// policies waits for beyond its transfer: FreeINA's BEGIN → PS, ALLOC →
// switch, GRANT → PS, PLAN → worker, then the last chunk's round trip
// (../shared review: SwitchML 2, ATP 4, FreeINA 8).
const FixedTraversals = 8

// TrueDelayMax is the longest link delay Warnings takes for a true one (a
// link within a data-centre row, plus its switch); a longer one in a scaled
// scenario is taken as stretched by 1/rate_scale.
const TrueDelayMax = 5 * time.Microsecond

// LatencyShareWarn is the share of a job's ideal all-reduce that fixed
// latencies may take before Warnings says so: the scaling check's
// tolerance, and about what such a share moves a time-averaged quantity
// (freeina-single's 2.8 % moves FreeINA's aggregation throughput by 2.5 %,
// docs/results.md, "The single-job scenario at true scale").
const LatencyShareWarn = 0.02

// Warnings are what makes the scenario's comparisons suspect though it is
// valid: fixed per-all-reduce latencies (FixedTraversals link delays) that
// are a large share of a job's ideal all-reduce (its smallest bucket's)
// because link delays are stretched (longer than TrueDelayMax in a scaled
// scenario) by 1/rate_scale to keep the bandwidth-delay product while the
// transfer keeps its length. Each names the field, the job and the share.
//
// And, with true delays at a scaled rate, a window so small (below
// CoarseWindow aggregators) that memory shares round coarsely when the
// jobs' windows do not all fit the switch: contention results then differ
// from true scale's by about one aggregator's share of a window (measured:
// docs/results.md, "Scaling check"). Where the window is not that small,
// SwitchML's static pools, which may lose to rounding a larger part of a
// job's pool than at true scale (switchMLPools).
//
// And, in a scaled scenario, each other fixed latency given longer than
// TrueDelayMax (the switch's, a host stack's, a PS core's per packet) that
// FixedTraversals times over would be more than LatencyShareWarn of a
// job's ideal all-reduce: taken as stretched like a link delay, it
// inflates fixed latencies as much (latencyFields).
func (s *Scenario) Warnings(models Models) []string {
	models = s.withOwn(models)
	var out []string
	if s.Scaling.RateScale >= 1 {
		return nil
	}
	plan := s.Plan(models)
	// True delays at a scaled rate keep the transfer's and the delays'
	// true lengths, but shrink the window with the rate.
	if s.Topology.LinkDelay.D() <= TrueDelayMax {
		if w := s.coarseWindow(models); w != "" {
			out = append(out, w)
		} else if w := s.switchMLPools(models); w != "" {
			out = append(out, w)
		}
	} else {
		out = append(out, s.latencyShares(plan, "topology.link_delay", s.Topology.LinkDelay, "link traversals")...)
	}
	for _, f := range s.latencyFields() {
		if f.d.D() > TrueDelayMax {
			out = append(out, s.latencyShares(plan, f.path, f.d, "")...)
		}
	}
	return out
}

// latencyShares warns, for every job of plan of whose ideal all-reduce
// (its smallest bucket's) FixedTraversals times d is more than
// LatencyShareWarn, that the field at path makes fixed latencies weigh far
// more than at true scale; what names what FixedTraversals counts ("": the
// times a latency other than a link's is paid, at most).
func (s *Scenario) latencyShares(plan []JobPlan, path string, d Duration, what string) []string {
	var out []string
	fixed := time.Duration(FixedTraversals) * d.D()
	for _, p := range plan {
		if p.CommIdeal <= 0 {
			continue
		}
		// Every bucket pays the fixed latencies: the smallest weighs most.
		ideal := p.CommIdeal
		for _, b := range p.Buckets {
			ideal = min(ideal, time.Duration(float64(p.CommIdeal)*float64(b.Packets)/float64(max(p.Packets, 1))))
		}
		share := float64(fixed) / float64(max(ideal, 1))
		if share <= LatencyShareWarn {
			continue
		}
		paid := fmt.Sprintf("%d %s (%v) are", FixedTraversals, what, fixed)
		if what == "" {
			paid = fmt.Sprintf("paid up to %d times an all-reduce (%v), is", FixedTraversals, fixed)
		}
		w := fmt.Sprintf("%s: %v: %s %.0f %% of job %s's ideal all-reduce (%v); "+
			"fixed latencies weigh far more on policies with more round trips than at true scale",
			path, d, paid, 100*share, p.Name, ideal.Round(time.Microsecond))
		if rs := s.Scaling.RateScale; rs < 1 {
			w += fmt.Sprintf(" (%.2g %% there if the %s was stretched by 1/rate_scale)", 100*share*rs, strings.ReplaceAll(path[strings.LastIndex(path, ".")+1:], "_", " "))
		}
		out = append(out, w)
	}
	return out
}

// latencyField is a fixed latency a scenario gives, as run.
type latencyField struct {
	path string
	d    Duration
}

// latencyFields are the scenario's fixed latencies but the links': the
// switch's, the host stacks' (topology.software_stack and every
// topology.host_costs entry) and a PS core's per packet.
func (s *Scenario) latencyFields() []latencyField {
	t := &s.Topology
	out := []latencyField{{"topology.switch.latency", t.Switch.Latency}, {"topology.software_stack.latency", t.SoftwareStack.Latency}}
	for _, k := range slices.Sorted(maps.Keys(t.HostCosts)) {
		c := t.HostCosts[k]
		out = append(out, latencyField{"topology.host_costs." + k + ".workers.latency", c.Workers.Latency},
			latencyField{"topology.host_costs." + k + ".ps.latency", c.PS.Latency})
	}
	if t.PS.CPU != nil {
		out = append(out, latencyField{"topology.ps.cpu.per_packet", t.PS.CPU.PerPacket})
	}
	return out
}

// CoarseWindow is the window, in aggregators, below which Warnings says
// that memory shares round coarsely: one aggregator is then more than 2 %
// of a window.
const CoarseWindow = 50

// coarseWindow is Warnings' coarse-window warning, or "".
func (s *Scenario) coarseWindow(models Models) string {
	t := s.Topology
	vpp := t.Switch.ValuesPerPacket
	lat := max(t.Switch.Latency.D(), 0)
	w := testbed.PipeSlots(s.LinkBitsPerSecond(), t.LinkDelay.D(), lat, vpp)
	if w >= CoarseWindow || s.LinkBitsPerSecond() <= 0 {
		return ""
	}
	jobs := len(s.Plan(models))
	if t.Switch.Slots >= jobs*w {
		return "" // every job's window fits: no sharing to round
	}
	trueW := testbed.PipeSlots(int64(math.Round(t.LinkGbps*1e9)), t.LinkDelay.D(), lat, vpp)
	msg := fmt.Sprintf("topology.switch.slots: %d: a window is %d aggregators at rate_scale %g (%d at true scale), so the jobs' shares of the "+
		"switch round coarsely (one aggregator is %.0f %% of a window): contention results can differ from true scale's by as much "+
		"(docs/results.md, \"Scaling check\")", t.Switch.Slots, w, s.Scaling.RateScale, trueW, 100/float64(w))
	if s.Scaling.TensorScale == s.Scaling.RateScale {
		// The coarsest of these scales whose window is not coarse.
		for _, r := range []float64{0.02, 0.05, 0.1, 0.2, 0.5, 1} {
			if r > s.Scaling.RateScale && testbed.PipeSlots(int64(math.Round(t.LinkGbps*1e9*r)), t.LinkDelay.D(), lat, vpp) >= CoarseWindow {
				msg += fmt.Sprintf("; `inabox rescale --rate-scale %g` writes it at a scale with a window of %d or more, its memory kept in windows, "+
					"at which the ablation's regimes kept their true-scale results (docs/results.md, \"A window of 75 aggregators\")",
					r, CoarseWindow)
				break
			}
		}
	}
	return msg
}

// SwitchMLRoundingWarn is how much more of a SwitchML job's pool rounding
// may lose at a scaled rate than at true scale before Warnings says so.
const SwitchMLRoundingWarn = 0.02

// switchMLPools is Warnings' warning that SwitchML's static pools round
// coarsely at this scale, or "". SwitchML's controller (sw.SwitchMLControl)
// gives a job min(two windows, aggregators ÷ jobs present) aggregators,
// rounded down to an integer and to even (the pool's halves are shadow
// copies), so a pool of a few aggregators loses up to two of its share, a
// larger part of it the smaller the window. It takes every job present at
// once (the most the memory is divided by; jobs that arrive apart may not
// share it, as in `long`, whose SwitchML runs kept their true-scale JCT at
// rate_scale 0.1) and, for true scale, the memory kept in windows, as
// `inabox rescale` keeps it. It warns when rounding loses
// SwitchMLRoundingWarn more of the pool than at true scale (measured:
// `cluster-tight` at rate_scale 0.5, 4.0 % against 0.7 %, and SwitchML's
// JCT mean there 2.7 % longer than at true scale; docs/results.md,
// "`cluster-tight` at true scale").
func (s *Scenario) switchMLPools(models Models) string {
	t := s.Topology
	jobs := len(s.Plan(models))
	vpp := t.Switch.ValuesPerPacket
	if jobs < 2 || vpp < 1 || s.LinkBitsPerSecond() <= 0 {
		return ""
	}
	stride := sw.SlotsPerAggregator(vpp)
	lat := max(t.Switch.Latency.D(), 0)
	w := testbed.PipeSlots(s.LinkBitsPerSecond(), t.LinkDelay.D(), lat, vpp)
	trueW := testbed.PipeSlots(int64(math.Round(t.LinkGbps*1e9)), t.LinkDelay.D(), lat, vpp)
	trueSlots := max(1, int(math.Round(float64(t.Switch.Slots)*float64(trueW)/float64(w))))
	// pool is a job's pool with every job present, share the same before
	// rounding (a fraction of an aggregator), as the controller computes
	// them (admit: min(want, max(used/present, MinAggregators)) &^ 1, with
	// want two windows of min(pipe, aggregators/2), at least one).
	pool := func(slots, window int) (int, float64) {
		aggs := slots / stride
		want := 2 * max(min(window, aggs/2), 1)
		share := math.Min(float64(want), float64(aggs)/float64(jobs))
		return min(want, max(aggs/jobs, 2)) &^ 1, share
	}
	n, share := pool(t.Switch.Slots, w)
	trueN, trueShare := pool(trueSlots, trueW)
	lost, trueLost := 1-float64(n)/share, 1-float64(trueN)/trueShare
	if share < 2 || lost-trueLost <= SwitchMLRoundingWarn {
		return ""
	}
	return fmt.Sprintf("topology.switch.slots: %d: if all %d jobs are present at once, a SwitchML job's static pool is %d aggregators "+
		"(%d ÷ %d = %.3g, rounded down to even), %.1f %% short of its share, where at true scale (a window of %d aggregators, %d slots) "+
		"it is %.1f %% short: where that many jobs share the memory, SwitchML's results can differ from true scale's by up to about the difference "+
		"(docs/results.md, \"`cluster-tight` at true scale\")",
		t.Switch.Slots, jobs, n, t.Switch.Slots/stride, jobs, float64(t.Switch.Slots/stride)/float64(jobs),
		100*lost, trueW, trueSlots, 100*trueLost)
}
