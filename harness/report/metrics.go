package report

import (
	"cmp"
	"math"
	"slices"
	"sort"
	"time"

	"github.com/montanaflynn/stats"

	"github.com/inabox/inabox/harness/testbed"
)

// Collector turns a run's events into Results. It is fed by the runner with
// virtual times only (it never reads a clock), so the same event sequence
// gives the same Results. Events for a job not yet added create it, after
// the added ones. Not safe for concurrent use.
//
// Each job alternates compute and an all-reduce: IterationStart, (compute),
// AllReduceStart, AllReduceEnd, IterationEnd. Occupancy reports the slots a
// (pool, job) pair holds from t on; it is integrated exactly.
type Collector struct {
	cfg    CollectorConfig
	jobs   []*jobRec
	byName map[string]*jobRec
	occ    map[occKey]*occRec
	occOrd []occKey
	// zeroAt is, per pair ReservedAt has not recorded yet, its latest
	// reading of nothing reserved.
	zeroAt  map[occKey]time.Duration
	occNow  int // slots occupied now, all pairs
	occPeak int
	occLast time.Duration // time of the last occupancy change
	totalSS float64       // occupied slot-seconds, all pairs (up to occLast)
	tput    bins          // elements/s of all jobs
	end     time.Duration
	// runDrops are the run's drops by cause (RunDrops).
	runDrops testbed.Drops
	faults   []FaultRecord
}

// CollectorConfig configures a Collector.
type CollectorConfig struct {
	Scenario string
	Policy   string
	Seed     uint64
	// TotalSlots is the switch's aggregator slots (utilization = occupied /
	// TotalSlots); 0 for a policy that uses no switch memory (the memory
	// metrics are null).
	TotalSlots int
	// Resolution is the bin width of the time series; 0 means 1 ms. It
	// doubles whenever a run outgrows 2^17 bins.
	Resolution time.Duration
	// MaxPoints bounds the points of each output time series: adjacent bins
	// are merged to fit; 0 means 400.
	MaxPoints int
	// NoPSPath marks a policy without a PS path (the ring, SwitchML): its
	// PS-path fraction is undefined (null), not 0 % or 100 %.
	NoPSPath bool
	// Costs are the host costs the run modelled (nil: none).
	Costs *HostCosts
	// PSLayout is Results.PSLayout.
	PSLayout string
	// ScenarioAsRun is the scenario as it ran, as JSON (Results.ScenarioAsRun).
	ScenarioAsRun []byte
}

type jobRec struct {
	name, model  string
	workers      int
	arrival      time.Duration
	arrived      bool
	finish       time.Duration
	finished     bool
	iters        []iterRec
	cur          map[int]int // iteration number → index in iters
	collisions   int64
	switchChunks int64
	psChunks     int64
	retrans      int64
	drops        testbed.Drops
	aggregations int64
	tput         bins
	// inUseSS are the job's slot-seconds in use by a chunk
	// (InUseSlotSeconds).
	inUseSS float64
	// inUse are its in-use slot-seconds per bin, sampled (InUseAt) up to
	// inUseT, where they were inUseCum.
	inUse    bins
	inUseT   time.Duration
	inUseCum float64
	// coll are its collisions per bin, sampled (CollisionsAt) up to collT,
	// where they were collCum.
	coll    bins
	collT   time.Duration
	collCum int64
	// swB and psB are its chunks per bin by path, each all-reduce's spread
	// over it (AllReduceChunks).
	swB, psB bins
}

type occKey struct{ pool, job string }

type occRec struct {
	now  int
	last time.Duration
	ss   float64 // slot-seconds up to last, from the sampled slot counts
	peak int
	b    bins // slot-seconds per bin
	// exact marks a pair whose slot-seconds come from ReservedAt: xss up
	// to xt, which fill b instead of the slot counts.
	exact bool
	xss   float64
	xt    time.Duration
}

// bins accumulate a quantity per time bin.
type bins struct {
	width time.Duration
	v     []float64
}

// spread adds amount spread uniformly over [from, to) (all at from when
// to <= from).
func (b *bins) spread(from, to time.Duration, amount float64) {
	if amount == 0 {
		return
	}
	if to <= from {
		b.add(int(from/b.width), amount)
		return
	}
	rate := amount / float64(to-from)
	for t := from; t < to; {
		i := int(t / b.width)
		next := min(time.Duration(i+1)*b.width, to)
		b.add(i, rate*float64(next-t))
		t = next
	}
}

func (b *bins) add(i int, x float64) {
	for len(b.v) <= i {
		b.v = append(b.v, 0)
	}
	b.v[i] += x
}

// NewCollector returns an empty collector.
func NewCollector(cfg CollectorConfig) *Collector {
	if cfg.Resolution <= 0 {
		cfg.Resolution = time.Millisecond
	}
	if cfg.MaxPoints <= 0 {
		cfg.MaxPoints = 400
	}
	return &Collector{cfg: cfg, byName: map[string]*jobRec{}, occ: map[occKey]*occRec{}, tput: bins{width: cfg.Resolution}}
}

// AddJob declares a job, fixing its place in the results.
func (c *Collector) AddJob(name, model string, workers int, arrival time.Duration) {
	j := c.job(name)
	j.model, j.workers, j.arrival = model, workers, arrival
}

func (c *Collector) job(name string) *jobRec {
	j := c.byName[name]
	if j == nil {
		w := c.cfg.Resolution
		j = &jobRec{name: name, cur: map[int]int{}, tput: bins{width: w}, inUse: bins{width: w}, coll: bins{width: w},
			swB: bins{width: w}, psB: bins{width: w}}
		c.byName[name] = j
		c.jobs = append(c.jobs, j)
	}
	return j
}

// maxBins bounds each time series' bins: past it, every series halves its
// resolution (merging bin pairs), so memory stays bounded on long runs.
const maxBins = 1 << 17

func (c *Collector) at(t time.Duration) {
	c.end = max(c.end, t)
	for int64(t/c.cfg.Resolution) >= maxBins {
		c.cfg.Resolution *= 2
		c.tput.halve()
		for _, j := range c.jobs {
			for _, b := range []*bins{&j.tput, &j.inUse, &j.coll, &j.swB, &j.psB} {
				b.halve()
			}
		}
		for _, o := range c.occ {
			o.b.halve()
		}
	}
}

// halve doubles the bin width, merging bin pairs.
func (b *bins) halve() {
	for i := 0; i < len(b.v); i += 2 {
		x := b.v[i]
		if i+1 < len(b.v) {
			x += b.v[i+1]
		}
		b.v[i/2] = x
	}
	b.v = b.v[:(len(b.v)+1)/2]
	b.width *= 2
}

// JobArrived records the job's arrival (its JCT starts here).
func (c *Collector) JobArrived(t time.Duration, job string) {
	c.at(t)
	j := c.job(job)
	j.arrival, j.arrived = t, true
}

// JobFinished records the job's completion.
func (c *Collector) JobFinished(t time.Duration, job string) {
	c.at(t)
	j := c.job(job)
	j.finish, j.finished = t, true
}

// iterRec is one iteration in progress; -1 marks a time not seen.
type iterRec struct {
	n                             int
	start, arStart, arEnd, finish time.Duration
	bytes, elements               int64
}

func (it iterRec) result() IterationResult {
	s := func(d time.Duration) Num {
		if d < 0 {
			return -1
		}
		return seconds(d)
	}
	return IterationResult{Iteration: it.n, Start: s(it.start), AllReduceStart: s(it.arStart), AllReduceEnd: s(it.arEnd),
		End: s(it.finish), Bytes: it.bytes, Elements: it.elements}
}

func (j *jobRec) iter(n int) *iterRec {
	i, ok := j.cur[n]
	if !ok {
		i = len(j.iters)
		j.cur[n] = i
		j.iters = append(j.iters, iterRec{n: n, start: -1, arStart: -1, arEnd: -1, finish: -1})
	}
	return &j.iters[i]
}

// IterationStart records the start of iteration iter (its compute phase).
func (c *Collector) IterationStart(t time.Duration, job string, iter int) {
	c.at(t)
	c.job(job).iter(iter).start = t
}

// IterationEnd records the end of iteration iter.
func (c *Collector) IterationEnd(t time.Duration, job string, iter int) {
	c.at(t)
	c.job(job).iter(iter).finish = t
}

// AllReduceStart records the start of iteration iter's all-reduce.
func (c *Collector) AllReduceStart(t time.Duration, job string, iter int) {
	c.at(t)
	c.job(job).iter(iter).arStart = t
}

// AllReduceEnd records the end of iteration iter's all-reduce, which
// aggregated elements gradient elements (bytes on the wire per worker,
// payload only).
func (c *Collector) AllReduceEnd(t time.Duration, job string, iter int, bytes, elements int64) {
	from := t
	if it := c.job(job).iter(iter); it.arStart >= 0 {
		from = it.arStart
	}
	c.Bucket(from, t, job, iter, bytes, elements)
}

// Bucket records one all-reduce of iteration iter's buckets, from start to
// end (which is the iteration's all-reduce end so far); call
// AllReduceStart with the first bucket's start before.
func (c *Collector) Bucket(start, end time.Duration, job string, iter int, bytes, elements int64) {
	c.at(end)
	j := c.job(job)
	it := j.iter(iter)
	it.arEnd = max(it.arEnd, end)
	it.bytes += bytes
	it.elements += elements
	j.tput.spread(start, end, float64(elements))
	c.tput.spread(start, end, float64(elements))
}

// Occupancy records that (pool, job) holds slots aggregator slots from t
// on. Calls must not go back in time for a pair. Use pool "" for a policy
// without pools, job "" for slots not attributable to a job.
func (c *Collector) Occupancy(t time.Duration, pool, job string, slots int) {
	c.at(t)
	k := occKey{pool, job}
	o := c.occ[k]
	if o == nil {
		o = &occRec{last: t, b: bins{width: c.cfg.Resolution}}
		c.occ[k] = o
		c.occOrd = append(c.occOrd, k)
	}
	c.advanceTotal(t)
	if t > o.last {
		if !o.exact {
			o.b.spread(o.last, t, float64(o.now)*float64(t-o.last)/1e9)
		}
		o.ss += float64(o.now) * float64(t-o.last) / 1e9
		o.last = t
	}
	c.occNow += slots - o.now
	o.now = slots
	o.peak = max(o.peak, slots)
	c.occPeak = max(c.occPeak, c.occNow)
}

// ReservedAt records that (pool, job) reserved ss slot-seconds from the
// start up to t, integrated exactly (by the switch): from the first call
// on, the pair's slot-seconds — its total, the run's, and the time series,
// the growth between two calls spread evenly over the time between them —
// come from these readings instead of the slot counts of Occupancy, which
// still give the peaks. Readings must not go back in time. A pair that
// reserved nothing yet is not recorded.
func (c *Collector) ReservedAt(t time.Duration, pool, job string, ss float64) {
	k := occKey{pool, job}
	o := c.occ[k]
	if o == nil && ss <= 0 {
		// nothing reserved up to t: the series starts at the latest such reading
		if c.zeroAt == nil {
			c.zeroAt = map[occKey]time.Duration{}
		}
		c.zeroAt[k] = max(c.zeroAt[k], t)
		return
	}
	c.at(t)
	if o == nil {
		o = &occRec{last: t, b: bins{width: c.cfg.Resolution}}
		c.occ[k] = o
		c.occOrd = append(c.occOrd, k)
	}
	if !o.exact {
		// the readings replace every sampled amount, from the last time
		// the pair held nothing
		o.exact, o.xt = true, c.zeroAt[k]
		clear(o.b.v)
	}
	if t < o.xt {
		return
	}
	o.b.spread(o.xt, t, ss-o.xss)
	o.xss, o.xt = ss, t
}

// InUseSlotSeconds sets the job's slot-seconds in use by a chunk (its
// aggregators holding a partial or complete sum: the part of what it
// reserves that is not idle), as the switch integrated them.
func (c *Collector) InUseSlotSeconds(job string, ss float64) {
	c.job(job).inUseSS = ss
}

// InUseAt records the job's slot-seconds in use by a chunk from the start
// up to t (as InUseSlotSeconds), sampled: the growth since the previous
// sample is spread evenly over the time between them, giving the in-use
// time series. Samples must not go back in time. It does not extend the
// run (Results' end).
func (c *Collector) InUseAt(t time.Duration, job string, ss float64) {
	j := c.job(job)
	if t < j.inUseT {
		return
	}
	j.inUse.spread(j.inUseT, t, ss-j.inUseCum)
	j.inUseT, j.inUseCum = t, ss
}

// CollisionsAt records the job's collisions from the start up to t,
// sampled like InUseAt, for the collision time series (the totals are
// Collisions'). It does not extend the run.
func (c *Collector) CollisionsAt(t time.Duration, job string, n int64) {
	j := c.job(job)
	if t < j.collT {
		return
	}
	j.coll.spread(j.collT, t, float64(n-j.collCum))
	j.collT, j.collCum = t, n
}

// AllReduceChunks records that one all-reduce of the job, from start to
// end, completed switchPath chunks in the switch and psPath at the PS,
// spread evenly over it, for the PS-path time series (the totals are
// Chunks'). It does not extend the run.
func (c *Collector) AllReduceChunks(start, end time.Duration, job string, switchPath, psPath int64) {
	j := c.job(job)
	j.swB.spread(start, end, float64(switchPath))
	j.psB.spread(start, end, float64(psPath))
}

func (c *Collector) advanceTotal(t time.Duration) {
	if t > c.occLast {
		c.totalSS += float64(c.occNow) * float64(t-c.occLast) / 1e9
		c.occLast = t
	}
}

// Aggregations adds n useful aggregations of the job: aggregator results
// the switch completed and delivered (not collisions, preemptions or
// duplicates).
func (c *Collector) Aggregations(t time.Duration, job string, n int64) {
	c.at(t)
	c.job(job).aggregations += n
}

// Collisions adds n packets of the job that found no aggregator.
func (c *Collector) Collisions(t time.Duration, job string, n int64) {
	c.at(t)
	c.job(job).collisions += n
}

// Chunks adds chunks of the job aggregated in the switch (switchPath) and
// at the parameter server (psPath).
func (c *Collector) Chunks(t time.Duration, job string, switchPath, psPath int64) {
	c.at(t)
	j := c.job(job)
	j.switchChunks += switchPath
	j.psChunks += psPath
}

// Drops adds the job's frames dropped on the way.
func (c *Collector) Drops(t time.Duration, job string, d testbed.Drops) {
	c.at(t)
	j := c.job(job)
	j.drops = j.drops.Add(d)
}

// RunDrops sets every frame the run dropped, whoever it claimed to be.
func (c *Collector) RunDrops(d testbed.Drops) { c.runDrops = d }

// Fault records that a fault fired (f.At is when).
func (c *Collector) Fault(f FaultRecord) { c.faults = append(c.faults, f) }

// Retransmissions adds n retransmitted packets of the job.
func (c *Collector) Retransmissions(t time.Duration, job string, n int64) {
	c.at(t)
	c.job(job).retrans += n
}

// the latest event time if later). Pairs still holding slots are counted
// up to end. More events may follow; Results can be called again.
func (c *Collector) Results(end time.Duration) *Results {
	c.at(end) // may coarsen the bins; changes no result
	end = c.end
	r := &Results{SchemaVersion: ResultsSchemaVersion, Tool: Tool(), Scenario: c.cfg.Scenario, Policy: c.cfg.Policy, Seed: c.cfg.Seed,
		End: seconds(end), Costs: c.cfg.Costs, PSLayout: c.cfg.PSLayout, ScenarioAsRun: c.cfg.ScenarioAsRun}
	merge := c.mergeFactor(end)
	width := float64(c.cfg.Resolution) / 1e9 * float64(merge)
	r.Bin = Num(width)

	// Memory.
	m := &r.Memory
	m.TotalSlots = c.cfg.TotalSlots
	totalSS := c.totalSS + float64(c.occNow)*float64(max(end-c.occLast, 0))/1e9
	// exact pairs: their readings replace what the slot counts gave
	exactDelta := 0.0
	jobSS := map[string]float64{}
	keys := slices.Clone(c.occOrd)
	sort.Slice(keys, func(i, k int) bool {
		if keys[i].pool != keys[k].pool {
			return keys[i].pool < keys[k].pool
		}
		return keys[i].job < keys[k].job
	})
	nb := binCount(end, c.cfg.Resolution)
	util := make([]float64, nb)
	for _, k := range keys {
		o := c.occ[k]
		b := bins{width: o.b.width, v: slices.Clone(o.b.v)}
		ss := o.ss
		if end > o.last {
			ss += float64(o.now) * float64(end-o.last) / 1e9
		}
		if o.exact {
			sampled := ss
			ss = o.xss
			if end > o.xt {
				// past the last reading: what the pair holds now
				b.spread(o.xt, end, float64(o.now)*float64(end-o.xt)/1e9)
				ss += float64(o.now) * float64(end-o.xt) / 1e9
			}
			exactDelta += ss - sampled
		} else if end > o.last {
			b.spread(o.last, end, float64(o.now)*float64(end-o.last)/1e9)
		}
		jobSS[k.job] += ss
		for i, v := range b.v {
			if i < nb {
				util[i] += v
			}
		}
		r.Memory.Series = append(r.Memory.Series, OccupancySeries{Pool: k.pool, Job: k.job, PeakSlots: o.peak,
			SlotSeconds: Num(ss), Slots: series(b.v, nb, merge, width, width)})
	}
	if exactDelta != 0 {
		totalSS += exactDelta
	}
	m.OccupiedSlotSeconds = Num(totalSS)
	if c.cfg.TotalSlots > 0 {
		if end > 0 {
			m.MeanUtilization = Num(totalSS / end.Seconds() / float64(c.cfg.TotalSlots))
		}
		m.PeakUtilization = Num(float64(c.occPeak) / float64(c.cfg.TotalSlots))
		m.Utilization = series(util, nb, merge, width, width*float64(c.cfg.TotalSlots))
	}

	// Jobs.
	s := &r.Summary
	var jcts, iterMeans []float64
	var comm [][2]time.Duration
	first, last := math.Inf(1), 0.0
	inUseSS := 0.0
	collAll, swAll, psAll := make([]float64, nb), make([]float64, nb), make([]float64, nb)
	for _, j := range c.jobs {
		jr := JobResult{Name: j.name, Model: j.model, Workers: j.workers, Arrival: seconds(j.arrival), Finished: j.finished,
			Collisions: j.collisions, SwitchChunks: j.switchChunks, PSChunks: j.psChunks, Retransmissions: j.retrans,
			Aggregations: j.aggregations, Drops: j.drops}
		jr.Finish = seconds(end)
		if j.finished {
			jr.Finish = seconds(j.finish)
		}
		jr.JCT = jr.Finish - jr.Arrival
		first = min(first, float64(jr.Arrival))
		last = max(last, float64(jr.Finish))
		var its []float64
		var ct time.Duration
		for _, it := range j.iters {
			jr.Iters = append(jr.Iters, it.result())
			if it.start >= 0 && it.finish >= 0 {
				its = append(its, (it.finish - it.start).Seconds())
			}
			if it.arStart >= 0 && it.arEnd >= 0 {
				ct += it.arEnd - it.arStart
				comm = append(comm, [2]time.Duration{it.arStart, it.arEnd})
			}
			jr.Elements += it.elements
		}
		jr.Iterations = len(its)
		jr.IterMean, jr.IterP50, jr.IterP95, jr.IterP99 = meanOf(its), pct(its, 50), pct(its, 95), pct(its, 99)
		jr.CommTime = seconds(ct)
		jr.AggThroughput = ratio(float64(jr.Elements), ct.Seconds())
		jr.SlotSeconds = Num(jobSS[j.name])
		jr.InUseSlotSeconds, jr.InUseShare = Num(j.inUseSS), ratio(j.inUseSS, jobSS[j.name])
		inUseSS += j.inUseSS
		jr.UsefulPerSlotSecond = ratio(float64(j.aggregations), jobSS[j.name])
		jr.PSFraction = ratio(float64(j.psChunks), float64(j.psChunks+j.switchChunks))
		if c.cfg.NoPSPath {
			jr.PSFraction = Num(math.NaN())
		}
		jr.Throughput = series(j.tput.v, nb, merge, width, width)
		jr.InUseSlots = series(j.inUse.v, nb, merge, width, width)
		r.Jobs = append(r.Jobs, jr)
		addBins(collAll, j.coll.v)
		addBins(swAll, j.swB.v)
		addBins(psAll, j.psB.v)

		s.Jobs++
		if j.finished {
			s.JobsFinished++
			jcts = append(jcts, float64(jr.JCT))
		}
		if len(its) > 0 {
			iterMeans = append(iterMeans, float64(jr.IterMean))
		}
		s.Elements += jr.Elements
		s.Collisions += j.collisions
		s.SwitchChunks += j.switchChunks
		s.PSChunks += j.psChunks
		s.Retransmissions += j.retrans
		m.UsefulAggregations += j.aggregations
	}
	s.Drops = c.runDrops
	if s.Jobs > 0 {
		s.Makespan = Num(last - first)
	} else {
		s.Makespan = Num(math.NaN())
	}
	s.JCTMean, s.JCTP50, s.JCTP95 = meanOf(jcts), pct(jcts, 50), pct(jcts, 95)
	s.JCTMax = Num(math.NaN())
	if len(jcts) > 0 {
		s.JCTMax = Num(slices.Max(jcts))
	}
	s.IterMean = meanOf(iterMeans)
	s.AggThroughput = ratio(float64(s.Elements), unionLength(comm).Seconds())
	m.UsefulPerSlotSecond = ratio(float64(m.UsefulAggregations), totalSS)
	m.InUseSlotSeconds = Num(inUseSS)
	s.MemInUseMean, s.MemInUseShare = Num(math.NaN()), ratio(inUseSS, totalSS)
	if c.cfg.TotalSlots > 0 && end > 0 {
		s.MemInUseMean = Num(inUseSS / end.Seconds() / float64(c.cfg.TotalSlots))
	}
	s.MemUtilMean, s.MemUtilPeak, s.UsefulPerSlotSecond = m.MeanUtilization, m.PeakUtilization, m.UsefulPerSlotSecond
	if c.cfg.TotalSlots <= 0 {
		s.MemUtilMean, s.MemUtilPeak, s.MemInUseShare = Num(math.NaN()), Num(math.NaN()), Num(math.NaN())
		m.MeanUtilization, m.PeakUtilization = s.MemUtilMean, s.MemUtilPeak
	}
	s.PSFraction = ratio(float64(s.PSChunks), float64(s.PSChunks+s.SwitchChunks))
	if c.cfg.NoPSPath {
		s.PSFraction = Num(math.NaN())
	}
	r.Throughput = series(c.tput.v, nb, merge, width, width)
	r.CollisionRate = series(collAll, nb, merge, width, width)
	r.PSPathSeries = []Point{}
	if !c.cfg.NoPSPath {
		r.PSPathSeries = fractionSeries(psAll, swAll, nb, merge, width)
	}
	r.JCTCDF = CDF(jcts)
	r.Faults = slices.Clone(c.faults)
	return r
}

func binCount(end, width time.Duration) int {
	return int((end + width - 1) / width)
}

// mergeFactor is how many bins are merged into one output point.
func (c *Collector) mergeFactor(end time.Duration) int {
	n := binCount(end, c.cfg.Resolution)
	return max(1, (n+c.cfg.MaxPoints-1)/c.cfg.MaxPoints)
}

// series merges bins by k and divides each sum by div (the merged width,
// times any scale): (point start s, value).
func series(v []float64, nb, k int, width, div float64) []Point {
	out := []Point{}
	for i := 0; i < nb; i += k {
		sum := 0.0
		for j := i; j < i+k && j < len(v); j++ {
			sum += v[j]
		}
		out = append(out, Point{X: Num(float64(i/k) * width), Y: Num(sum / div)})
	}
	return out
}

// addBins adds v to sum, bin by bin (the bins past len(sum) are past the
// run's end).
func addBins(sum, v []float64) {
	for i, x := range v {
		if i < len(sum) {
			sum[i] += x
		}
	}
}

// fractionSeries is a/(a+b) per merged bin, null where both are 0.
func fractionSeries(a, b []float64, nb, k int, width float64) []Point {
	out := []Point{}
	for i := 0; i < nb; i += k {
		sa, sb := 0.0, 0.0
		for j := i; j < i+k && j < nb; j++ {
			sa += a[j]
			sb += b[j]
		}
		out = append(out, Point{X: Num(float64(i/k) * width), Y: ratio(sa, sa+sb)})
	}
	return out
}

// CDF is the empirical CDF of xs: sorted (x, i/n) points.
func CDF(xs []float64) []Point {
	s := slices.Clone(xs)
	slices.Sort(s)
	out := make([]Point, len(s))
	for i, x := range s {
		out[i] = Point{X: Num(x), Y: Num(float64(i+1) / float64(len(s)))}
	}
	return out
}

// unionLength is the total length of the union of intervals.
func unionLength(iv [][2]time.Duration) time.Duration {
	s := slices.Clone(iv)
	slices.SortFunc(s, func(a, b [2]time.Duration) int { return cmp.Compare(a[0], b[0]) })
	var total time.Duration
	curS, curE := time.Duration(math.MinInt64), time.Duration(math.MinInt64)
	for _, x := range s {
		if x[0] > curE {
			if curE > curS {
				total += curE - curS
			}
			curS, curE = x[0], x[1]
		} else {
			curE = max(curE, x[1])
		}
	}
	if curE > curS {
		total += curE - curS
	}
	return total
}

func ratio(a, b float64) Num {
	if b == 0 {
		return Num(math.NaN())
	}
	return Num(a / b)
}

func meanOf(xs []float64) Num {
	m, err := stats.Mean(xs)
	if err != nil {
		return Num(math.NaN())
	}
	return Num(m)
}

// pct is the p-th percentile (linear interpolation between ranks).
func pct(xs []float64, p float64) Num {
	v, err := stats.Percentile(xs, p)
	if err != nil {
		return Num(math.NaN())
	}
	return Num(v)
}
