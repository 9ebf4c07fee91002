package run

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"sort"
	"strings"
	"time"

	"github.com/inabox/inabox/emu"
	"github.com/inabox/inabox/harness/report"
	"github.com/inabox/inabox/harness/scenario"
	"github.com/inabox/inabox/harness/testbed"
)

// Options modify a run without editing the scenario.
type Options struct {
	// Seed, if non-zero, replaces the scenario's seed.
	Seed uint64
	// Policy, if set, replaces the scenario's policy.
	Policy string
	// PcapDir, if set, receives one pcap file per link, captured at the
	// host or PS end and named by PcapName: h0-w1.0-sw3.pcap, ps0-sw4.pcap.
	PcapDir string
	// Progress, if set, is told virtual time as the run advances.
	Progress report.Progress
	// Models are the model profiles (nil: the embedded ones).
	Models scenario.Models
	// Step is the virtual time between two samples of the testbed (switch
	// occupancy, finished all-reduces); 0 means 100 µs.
	Step time.Duration
	// Realtime builds the testbed for real-time processes (inabox up):
	// FreeINA workers adapt their UC retransmission timeout to measured
	// round trips, which there include how late each process runs
	// (host.WorkerConfig.AdaptUCTimeout). Virtual-time runs leave it off.
	Realtime bool
	// Context, if set, stops the run when it is done (Ctrl-C): Run then
	// returns the results so far and an error wrapping ErrInterrupted.
	Context context.Context
	// ChecksInline checks a large job's results on the run's own goroutine
	// even where another CPU could take them (runs going side by side
	// already keep every CPU busy). Results do not depend on it.
	ChecksInline bool
	// Measures, if set, receives the run's link counters and workers'
	// all-reduce times when it has ended (not when it failed).
	Measures *Measures
}

// ErrUnfinished is returned, with the results so far, when a job has not
// finished by the scenario's time limit.
var ErrUnfinished = errors.New("not finished by time_limit")

// ErrInterrupted is returned, with the results so far, when the run's
// Context was done before every job finished.
var ErrInterrupted = errors.New("interrupted")

// Run runs scenario s under opts and returns its results. If a job has not
// finished by the time limit it returns the results so far and an error
// wrapping ErrUnfinished.
func Run(s *scenario.Scenario, opts Options) (*report.Results, error) {
	aside := asyncCheck && !opts.ChecksInline
	r, err := prepare(s, opts, aside)
	if err != nil {
		return nil, err
	}
	r.checkAsStored(aside)
	defer r.stopChecks()
	if err := r.faults(); err != nil {
		return nil, err
	}
	if opts.PcapDir != "" {
		closeAll, err := r.pcap(opts.PcapDir)
		if err != nil {
			return nil, err
		}
		defer closeAll()
	}
	prog := opts.Progress
	if prog == nil {
		prog = noProgress{}
	}
	defer prog.Done()
	r.ctx = opts.Context
	res, err := r.run(r.step, prog)
	if err == nil && opts.Measures != nil {
		r.measure(opts.Measures)
	}
	return res, err
}

// prepare builds scenario s's testbed for the policy of opts (or s) with
// the impairments applied: everything up to the fault schedule. If aside,
// large jobs' gradients are made ahead of their senders on a goroutine of
// their own (prefetcher; the runner's stopChecks ends it).
func prepare(s *scenario.Scenario, opts Options, aside bool) (r *runner, err error) {
	policy := s.Policy
	if opts.Policy != "" {
		policy = opts.Policy
	}
	if _, ok := testbed.Lookup(policy); !ok {
		return nil, fmt.Errorf("policy %q: must be one of %s (or a variant: %s)", policy, strings.Join(testbed.Names(), ", "), strings.Join(testbed.Variants(), ", "))
	}
	models := opts.Models
	if models == nil {
		models = scenario.DefaultModels()
	}
	if policy != s.Policy {
		// What the file allows under its own policy it may not under
		// this one (SwitchML's smallest pool): the file's line and field.
		if _, err := s.WithPolicy(policy, models); err != nil {
			return nil, err
		}
	}
	seed := s.Seed
	if opts.Seed != 0 {
		seed = opts.Seed
	}
	step := opts.Step
	if step <= 0 {
		step = 100 * time.Microsecond
	}
	if seed != s.Seed {
		// a generated cluster is drawn again for the seed
		var err error
		if s, err = s.WithSeed(seed, models); err != nil {
			return nil, err
		}
	}
	plans := s.Plan(models)
	gen := newTensorGen(seed, s, plans)
	if err := gen.checkRing(s, policy); err != nil {
		return nil, err
	}
	if aside {
		gen.ahead = &prefetcher{}
		defer func() {
			if err != nil {
				gen.ahead.stop()
			}
		}()
	}
	tb, err := testbed.Build(testbedSpec(s, policy, seed, plans, opts.Realtime), policy, gen.tensors)
	if err != nil {
		return nil, fmt.Errorf("%s: policy %s: %w", s.Name, policy, err)
	}
	r = &runner{s: s, tb: tb, plans: plans, gen: gen, policy: policy, seed: seed, step: step,
		hostLinks: map[string][]*emu.Link{}, hostNodes: map[string][]string{}}
	e, _ := testbed.Lookup(policy)
	slots := s.Topology.Switch.Slots
	if e.NoINA {
		slots = 0
	}
	asRun := *s // the scenario as it runs: this policy and seed
	asRun.Policy, asRun.Seed = policy, seed
	scJSON, err := json.Marshal(&asRun)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", s.Name, err)
	}
	r.col = report.NewCollector(report.CollectorConfig{Scenario: s.Name, Policy: policy, Seed: seed, TotalSlots: slots, ScenarioAsRun: scJSON,
		NoPSPath: !e.PSPath, Costs: hostCosts(s, tb), PSLayout: psLayout(&tb.Spec)})
	for i, p := range plans {
		r.col.AddJob(p.Name, p.Model.Name, p.Workers, p.Arrival)
		for w, h := range p.Hosts {
			wh := tb.Worker(i, w)
			r.hostLinks[h] = append(r.hostLinks[h], wh.Link)
			r.hostNodes[h] = append(r.hostNodes[h], wh.Name)
		}
	}
	for i := range s.PSNames() {
		if i >= len(tb.PSs) {
			continue
		}
		h := "ps" + fmt.Sprint(i)
		// Co-located, the PS's link is its worker host's: a link fault on
		// either name hits both, and a crash of the host crashes the PS.
		r.hostLinks[h] = append(r.hostLinks[h], tb.PSs[i].Link)
		r.hostNodes[h] = append(r.hostNodes[h], tb.PSs[i].Name)
		if tb.Spec.PSPlacement == testbed.PSCoLocated && i < len(plans) {
			host := plans[i].Hosts[0]
			r.hostNodes[host] = append(r.hostNodes[host], tb.PSs[i].Name)
		}
	}
	if err := r.impairments(); err != nil {
		return nil, err
	}
	return r, nil
}

// runner is a scenario's testbed built for one policy and seed, and the
// state of its run: what has been fed to the collector so far.
type runner struct {
	// fatal is why the run cannot finish, found by a fault (a node that
	// crashed for good), or nil.
	fatal     error
	ctx       context.Context // stops the run when done (Options.Context)
	s         *scenario.Scenario
	tb        *testbed.Testbed
	policy    string
	seed      uint64
	step      time.Duration
	plans     []scenario.JobPlan
	gen       *tensorGen
	col       *report.Collector
	hostLinks map[string][]*emu.Link
	hostNodes map[string][]string
	// flaps are the flapping impairments in force on each link direction
	// (nil entries: none), for Prepared.Peers.
	flaps map[*emu.Link]map[emu.Dir]*scenario.Flap
	// per job: iterations fed to the collector, arrival fed, finished
	fed     []int
	arrived []bool
	done    []bool
	// per job: the switch chunks fed as its all-reduces' (swFed), and
	// whether its in-use memory and collisions are sampled no more
	// (sampled: stopped once it finished)
	swFed   []int64
	sampled []bool
	occ     map[occKey]int
	gots    [][]int32 // check's scratch: a job's results of one all-reduce
	// checks, per job, check results as they arrive (checkAsStored), or
	// are nil: results are kept and checked whole.
	checks []*resultCheck
	async  *asyncChecks // runs lazy jobs' checks, or nil
}

// occKey is a (pool, job) pair of the switch's occupancy.
type occKey struct{ pool, job string }

// noProgress is the Progress of a run given none.
type noProgress struct{}

func (noProgress) Update(time.Duration, time.Duration) {}
func (noProgress) Done()                               {}

// run steps virtual time by step until every job has finished or the time
// limit, sampling the testbed after each step, then gives the collector
// the testbed's counters and returns its results.
func (r *runner) run(step time.Duration, prog report.Progress) (*report.Results, error) {
	n := r.tb.Net
	nj := len(r.plans)
	r.fed, r.arrived, r.done = make([]int, nj), make([]bool, nj), make([]bool, nj)
	r.swFed, r.sampled = make([]int64, nj), make([]bool, nj)
	r.occ = map[occKey]int{}
	limit := r.s.TimeLimit.D()
	total := r.s.Estimate(scenario.DefaultModels()).VirtualTime
	if total > limit {
		total = limit
	}
	var end time.Duration
	interrupted := false
	if r.ctx != nil {
		// Between steps the context is checked below; within one (a step
		// can hold many long events, e.g. eight workers each making a
		// 553 MB result at an all-reduce's begin) the network stops
		// after its current event.
		defer context.AfterFunc(r.ctx, n.Interrupt)()
	}
	for t := step; ; t += step {
		now := min(t, limit)
		if _, err := n.RunUntil(now); errors.Is(err, emu.ErrInterrupted) {
			now, interrupted = n.Now(), true
		} else if err != nil {
			return nil, err
		}
		if err := r.sample(now); err != nil {
			return nil, err
		}
		if interrupted {
			end = now
			break
		}
		prog.Update(now, total)
		if err := r.tb.Failed(); err != nil {
			return nil, fmt.Errorf("%s: policy %s: at %v: %w", r.s.Name, r.policy, now, err)
		}
		if r.fatal != nil {
			return nil, fmt.Errorf("%s: policy %s: %w", r.s.Name, r.policy, r.fatal)
		}
		if all(r.done) || now >= limit {
			end = now
			break
		}
		if r.ctx != nil && r.ctx.Err() != nil {
			end, interrupted = now, true
			break
		}
	}
	if err := r.tb.Check(); err != nil {
		return nil, fmt.Errorf("%s: %w", r.s.Name, err)
	}
	last := time.Duration(0)
	for i, p := range r.plans {
		c := r.tb.Counters(i)
		total := int64(r.fed[i]) * p.Packets
		ps := max(total-c.SwitchChunks, 0)
		r.col.Chunks(end, p.Name, min(c.SwitchChunks, total), ps)
		r.col.Collisions(end, p.Name, c.Collisions)
		r.col.Aggregations(end, p.Name, c.SwitchChunks)
		r.col.Retransmissions(end, p.Name, c.Retransmissions)
		r.col.Drops(end, p.Name, c.Drops)
		if !r.done[i] {
			r.col.InUseSlotSeconds(p.Name, r.tb.InUseSlotTime(i).Seconds())
		}
	}
	r.col.RunDrops(r.tb.Drops())
	for _, d := range r.done {
		if !d {
			last = end
		}
	}
	for i := range r.plans {
		if r.done[i] {
			for _, w := range r.tb.Workers[i] {
				_, e := span(w.Endpoint, w.Endpoint.Finished()-1)
				last = max(last, e)
			}
		}
	}
	res := r.col.Results(last)
	if d := r.tb.DynaINA(); d != nil {
		st := d.Stats()
		res.DynaINA = &report.DynaINAStats{Allocs: st.Allocs, Grants: st.Grants, Loans: st.Loans, Queued: st.Queued,
			PSPath: st.PSPath, Expired: st.Expired, Outside: st.Outside}
		lr := d.Scheduler().Refusals
		res.DynaINA.LendTried, res.DynaINA.LendNoIdle, res.DynaINA.LendTooSmall = lr.Tried, lr.NoIdle, lr.TooSmall
		res.DynaINA.LendUnpredicted, res.DynaINA.LendTooSoon = lr.Unpredicted, lr.TooSoon
	}
	if s := r.tb.SwitchML(); s != nil {
		st := s.Stats()
		res.SwitchML = &report.SwitchMLStats{Admitted: st.Admitted, Waited: st.Waited,
			WaitS: report.Num(st.Wait.Seconds()), WaitMaxS: report.Num(st.WaitMax.Seconds())}
	}
	var unfinished []string
	for i, d := range r.done {
		if !d {
			unfinished = append(unfinished, fmt.Sprintf("%s (%d/%d iterations)", r.plans[i].Name, r.fed[i], r.plans[i].Iterations))
		}
	}
	if len(unfinished) > 0 && interrupted {
		return res, fmt.Errorf("%s: %w at virtual time %v: %s", r.s.Name, ErrInterrupted, end, strings.Join(unfinished, ", "))
	}
	if len(unfinished) > 0 {
		return res, fmt.Errorf("%s: %w (%v): %s", r.s.Name, ErrUnfinished, limit, strings.Join(unfinished, ", "))
	}
	return res, nil
}

func all(b []bool) bool {
	for _, x := range b {
		if !x {
			return false
		}
	}
	return true
}

// sample feeds the collector with what happened up to now: occupancy (as
// of now), arrivals, and every all-reduce all of a job's workers finished
// (each worker's result checked).
func (r *runner) sample(now time.Duration) error {
	// occupancy
	cur := map[occKey]int{}
	for _, o := range r.tb.Occupancy() {
		name := ""
		if o.Job >= 0 {
			name = r.plans[o.Job].Name
		}
		cur[occKey{o.Pool, name}] += o.Slots
	}
	keys := make([]occKey, 0, len(cur)+len(r.occ))
	for k := range cur {
		keys = append(keys, k)
	}
	for k := range r.occ {
		if _, ok := cur[k]; !ok {
			keys = append(keys, k)
		}
	}
	// Decreases first: a lease that moved between two samples must not
	// count twice at this instant (peak utilization).
	sort.Slice(keys, func(a, b int) bool {
		da, db := cur[keys[a]] < r.occ[keys[a]], cur[keys[b]] < r.occ[keys[b]]
		if da != db {
			return da
		}
		if keys[a].pool != keys[b].pool {
			return keys[a].pool < keys[b].pool
		}
		return keys[a].job < keys[b].job
	})
	for _, k := range keys {
		if cur[k] != r.occ[k] {
			r.col.Occupancy(now, k.pool, k.job, cur[k])
			if cur[k] == 0 {
				delete(r.occ, k)
			} else {
				r.occ[k] = cur[k]
			}
		}
	}
	// where the switch integrates reserved memory exactly, its readings
	for i, p := range r.plans {
		if ss, ok := r.tb.ReservedSlotTime(i); ok {
			r.col.ReservedAt(now, "", p.Name, ss.Seconds())
		}
	}
	for i, p := range r.plans {
		if !r.arrived[i] && p.Arrival <= now {
			r.arrived[i] = true
			r.col.JobArrived(p.Arrival, p.Name)
		}
		if r.done[i] {
			continue
		}
		ws := r.tb.Workers[i]
		nb := len(p.Buckets)
		for {
			k := r.fed[i] // iteration; its all-reduces are k·nb … k·nb+nb−1
			if k >= p.Iterations {
				break
			}
			ready := true
			for _, w := range ws {
				if w.Endpoint.Finished() < (k+1)*nb {
					ready = false
					break
				}
			}
			if !ready {
				break
			}
			for b := range nb {
				if err := r.check(i, k*nb+b, ws); err != nil {
					return err
				}
			}
			// spans[b]: bucket b's all-reduce, from its first worker's start to
			// its last worker's end
			spans := make([][2]time.Duration, nb)
			for b := range nb {
				var s0, e0 time.Duration = -1, 0
				for _, w := range ws {
					s, e := span(w.Endpoint, k*nb+b)
					if s0 < 0 || s < s0 {
						s0 = s
					}
					e0 = max(e0, e)
				}
				spans[b] = [2]time.Duration{s0, e0}
			}
			start := p.Arrival
			if k > 0 {
				for _, w := range ws {
					_, e := span(w.Endpoint, k*nb-1)
					start = max(start, e)
				}
			}
			arStart := max(spans[0][0], start)
			arEnd := spans[nb-1][1]
			r.col.IterationStart(start, p.Name, k)
			r.col.AllReduceStart(arStart, p.Name, k)
			if nb == 1 {
				r.col.AllReduceEnd(arEnd, p.Name, k, p.Bytes, p.Elements)
			} else {
				for b, bk := range p.Buckets {
					r.col.Bucket(max(spans[b][0], start), spans[b][1], p.Name, k, 4*bk.Elements, bk.Elements)
				}
			}
			r.col.IterationEnd(arEnd, p.Name, k)
			// the all-reduce's chunks by path: the switch's completed since
			// the previous one, the rest at the PS
			sw, _ := r.tb.SwitchCounts(i)
			d := min(max(sw-r.swFed[i], 0), p.Packets)
			r.swFed[i] += d
			r.col.AllReduceChunks(arStart, arEnd, p.Name, d, p.Packets-d)
			r.fed[i]++
			if r.fed[i] == p.Iterations {
				r.done[i] = true
				r.col.JobFinished(arEnd, p.Name)
				// in use up to now, where its reserved memory stops too
				r.col.InUseSlotSeconds(p.Name, r.tb.InUseSlotTime(i).Seconds())
			}
		}
	}
	// in-use memory and collisions over time, up to each job's finish
	for i, p := range r.plans {
		if r.sampled[i] {
			continue
		}
		r.col.InUseAt(now, p.Name, r.tb.InUseSlotTime(i).Seconds())
		_, coll := r.tb.SwitchCounts(i)
		r.col.CollisionsAt(now, p.Name, coll)
		r.sampled[i] = r.done[i]
	}
	return nil
}

// psLayout is Results.PSLayout for spec: "" for dedicated PSs.
func psLayout(spec *testbed.Spec) string {
	switch spec.PSPlacement {
	case testbed.PSShared:
		return fmt.Sprintf("shared: %d PSs serving every job (the old layout; each job's PS traffic shares their links, so the policies' PS capacity is not per job)", spec.PSCount)
	case testbed.PSCoLocated:
		return "co-located: each job's PS on its worker rank 0's host, sharing its link"
	}
	return ""
}

// trueGbps is a scaled rate in bits per second back at true scale, in Gb/s
// to the kb/s: 46 Gb/s scaled by 0.1 reads 46, not 45.99999999999999.
func trueGbps(bitsPerSecond int64, scale float64) float64 {
	return math.Round(float64(bitsPerSecond)/scale/1e3) / 1e6
}

// hostCosts are the host costs tb models, at true scale (nil: none).
func hostCosts(s *scenario.Scenario, tb *testbed.Testbed) *report.HostCosts {
	var h report.HostCosts
	scale := s.Scaling.RateScale
	// rates is a stack's rate, and its sending and receiving rates where
	// they differ from it, at true scale.
	rates := func(st testbed.SoftwareStack) (gbps, tx, rx float64) {
		gbps = trueGbps(st.BitsPerSecond, scale)
		if st.Tx() != st.BitsPerSecond {
			tx = trueGbps(st.Tx(), scale)
		}
		if st.Rx() != st.BitsPerSecond {
			rx = trueGbps(st.Rx(), scale)
		}
		return gbps, tx, rx
	}
	if st := tb.Stack(); st != (testbed.SoftwareStack{}) {
		h.SoftwareStackGbps, h.SoftwareStackTxGbps, h.SoftwareStackRxGbps = rates(st)
		h.SoftwareStackLatency = report.Num(st.Latency.Seconds())
	}
	if st := tb.PSStack(); st != tb.Stack() && tb.Spec.PSPlacement != testbed.PSCoLocated {
		h.PSStackGbps, h.PSStackTxGbps, h.PSStackRxGbps = rates(st)
		h.PSStackLatency = report.Num(st.Latency.Seconds())
		h.PSStackGiven = true
	}
	if e, ok := testbed.Lookup(tb.Policy().Name()); ok && !e.SoftwareStack {
		h.NIC = true
	}
	if c := tb.Spec.PSCPU; c.Enabled() {
		h.PSCores, h.PSGbpsPerCore, h.PSPerPacket = c.Cores, trueGbps(c.BitsPerSecond, scale), report.Num(c.PerPacket.Seconds())
	}
	if h == (report.HostCosts{NIC: h.NIC}) {
		return nil
	}
	return &h
}
