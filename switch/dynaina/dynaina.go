// Package dynaina is the DynaINA multi-tenant scheduler of the switch's
// aggregation memory: a deterministic state machine (no clock, no
// goroutines) that places jobs into dynamic memory pools and decides, at the
// start of each all-reduce, whether the job gets its pool now, waits for it,
// or uses the PS path.
//
//   - Spatial compatibility: switch memory is divided into pools, contiguous
//     slot ranges; a job lives in exactly one pool and is only ever granted
//     slots inside it, or (Config.Lend) a recorded loan out of another
//     pool that is idle. Pools are created, grown, shrunk, moved, split and
//     merged as jobs arrive and leave, never while a lease on them is
//     active.
//   - Temporal compatibility: jobs whose all-reduce phases rarely overlap
//     (predicted from their profiles, then measured) share one pool; a job
//     that finds its pool busy waits for it when the wait is short (which
//     shifts its phase away from the other job's), else goes the PS path.
//   - Priority: communication-intensive jobs (high all-reduce/compute time
//     ratio) are placed first, get their full demand, are granted first, and
//     may shrink pools of less intensive jobs.
//
// docs/dynaina.md describes the algorithm with a worked example.
package dynaina

import (
	"errors"
	"fmt"
	"math"
	"slices"
	"sort"
	"time"
)

// Config sizes the scheduler.
type Config struct {
	// TotalSlots is the switch memory the scheduler manages, in aggregator
	// slots (one slot holds ValuesPerSlot int32 values: one packet's worth).
	TotalSlots int
	// ValuesPerSlot is the values per packet and slot (default 64).
	ValuesPerSlot int
	// LinkBitsPerSecond is the workers' link rate (default 100 Gb/s).
	LinkBitsPerSecond int64
	// RTT is the INA path's round-trip time, worker → switch → worker,
	// including queueing (default 10 µs). A job needs rate × RTT worth of
	// slots to keep its link busy.
	RTT time.Duration
	// MinSlots is the smallest pool worth creating (default 64).
	MinSlots int
	// ShareOverlap is the largest predicted probability that two jobs'
	// all-reduces overlap for them to share a pool (default 0.15).
	ShareOverlap float64
	// MaxWaitFraction: a job whose pool is busy waits if the holder is
	// expected to finish within this fraction of the waiting job's own
	// all-reduce time (default 0.5); otherwise it goes the PS path.
	MaxWaitFraction float64
	// Alpha is the weight of a new measurement in the moving averages of
	// phase times (default 0.3).
	Alpha float64

	// Ablation switches: each turns one part of DynaINA off; the zero value
	// is the full scheduler. Dynamic pools alone are NoSharing+NoPriority;
	// adding contention-aware scheduling is NoPriority alone.

	// NoSharing turns contention-aware scheduling off: no two jobs are ever
	// placed in one pool (no sharing by time, no merging), and no job
	// queues for its pool: a job whose pool is busy, or that has none,
	// takes the PS path.
	NoSharing bool
	// NoPriority turns the priority of communication-intensive jobs off:
	// jobs short of memory are served in arrival order, no pool is shrunk to
	// make room for a more intensive job, and queued all-reduces are granted
	// first come, first served.
	NoPriority bool

	// Lend makes idle pools work-conserving: a job whose pool is busy,
	// smaller than its demand, or absent may be granted one contiguous
	// range of another, idle pool whose jobs are predicted not to need it
	// before the borrower's all-reduce ends; the loan ends with that
	// all-reduce, and a job that finds its own pool lent queues for the
	// loan's end (docs/dynaina.md, "Lending").
	Lend bool
	// LendMargin is a loan's safety margin, as a fraction of the borrower's
	// all-reduce time Ta (default 0.5): a pool is lent only if each of its
	// jobs is predicted to start its next all-reduce no sooner than
	// (1+LendMargin)·Ta + RTT from now.
	LendMargin float64

	// MeasuredOverlap lets observed collisions override the overlap
	// predictor, which assumes independent phases (and so fails for
	// phase-locked jobs, which always overlap): two jobs sharing a pool are
	// phase-locked once one has found the other in its all-reduce at
	// LockAfter consecutive all-reduce starts, and from then on, while both
	// are registered, their overlap counts as 1: they split into separate
	// pools when memory allows and are not put together again while
	// another choice is left.
	MeasuredOverlap bool
	// LockAfter is the consecutive collisions that make two jobs
	// phase-locked (default 4).
	LockAfter int
}

func (c *Config) defaults() error {
	if c.TotalSlots <= 0 {
		return fmt.Errorf("dynaina: TotalSlots = %d: must be > 0", c.TotalSlots)
	}
	if c.ValuesPerSlot == 0 {
		c.ValuesPerSlot = 64
	}
	if c.LinkBitsPerSecond == 0 {
		c.LinkBitsPerSecond = 100e9
	}
	if c.RTT == 0 {
		c.RTT = 10 * time.Microsecond
	}
	if c.MinSlots == 0 {
		c.MinSlots = 64
	}
	if c.ShareOverlap == 0 {
		c.ShareOverlap = 0.15
	}
	if c.MaxWaitFraction == 0 {
		c.MaxWaitFraction = 0.5
	}
	if c.Alpha == 0 {
		c.Alpha = 0.3
	}
	if c.LendMargin == 0 {
		c.LendMargin = 0.5
	}
	if c.LockAfter == 0 {
		c.LockAfter = 4
	}
	switch {
	case c.ValuesPerSlot < 0:
		return fmt.Errorf("dynaina: ValuesPerSlot = %d: must be > 0", c.ValuesPerSlot)
	case c.LinkBitsPerSecond < 0:
		return fmt.Errorf("dynaina: LinkBitsPerSecond = %d: must be > 0", c.LinkBitsPerSecond)
	case c.RTT < 0:
		return fmt.Errorf("dynaina: RTT = %v: must be > 0", c.RTT)
	case c.MinSlots < 0 || c.MinSlots > c.TotalSlots:
		return fmt.Errorf("dynaina: MinSlots = %d: must be in [1, TotalSlots=%d]", c.MinSlots, c.TotalSlots)
	case c.ShareOverlap < 0 || c.ShareOverlap > 1:
		return fmt.Errorf("dynaina: ShareOverlap = %v: must be in [0, 1]", c.ShareOverlap)
	case c.Alpha < 0 || c.Alpha > 1:
		return fmt.Errorf("dynaina: Alpha = %v: must be in [0, 1]", c.Alpha)
	case c.LendMargin < 0:
		return fmt.Errorf("dynaina: LendMargin = %v: must be ≥ 0", c.LendMargin)
	case c.LockAfter < 0:
		return fmt.Errorf("dynaina: LockAfter = %d: must be ≥ 1", c.LockAfter)
	}
	return nil
}

// JobProfile is what a job declares when it registers.
type JobProfile struct {
	ID      uint16
	Workers int
	// GradientBytes is the size of one all-reduce (the model's gradient).
	GradientBytes int64
	// Compute is the per-iteration compute time (the "on" phase).
	Compute time.Duration
}

// Action says what a job does with an all-reduce that is about to start.
type Action uint8

const (
	// Grant: the job holds Decision.Range for this all-reduce.
	Grant Action = iota + 1
	// Queue: the pool is busy with a job expected to finish soon; the grant
	// comes from PhaseEnd of the holder (or PSPath from Expire).
	Queue
	// PSPath: no switch memory for this all-reduce; use the PS path.
	PSPath
)

func (a Action) String() string {
	switch a {
	case Grant:
		return "grant"
	case Queue:
		return "queue"
	case PSPath:
		return "ps-path"
	}
	return "Action(?)"
}

// Decision answers an all-reduce start.
type Decision struct {
	Job       uint16
	AllReduce uint32
	Action    Action
	Range     Range // for Grant
	// Lender, for a Grant out of another job's pool (a loan, with
	// Config.Lend): that pool's ID; 0 for the job's own pool.
	Lender int
	// Deadline, for Queue: if not granted by then, Expire turns it into
	// PSPath.
	Deadline time.Duration
}

// PoolInfo describes a pool for metrics and tests.
type PoolInfo struct {
	ID     int
	Range  Range
	Jobs   []uint16
	Leased bool   // an all-reduce of one of its jobs holds it now
	Holder uint16 // the job holding it, if Leased
	// Lent: Loan, part of the pool, is lent to Borrower, a job of another
	// pool, for its current all-reduce (Config.Lend).
	Lent     bool
	Borrower uint16
	Loan     Range
}

// JobInfo describes a job's standing.
type JobInfo struct {
	ID        uint16
	Pool      int // -1: no pool (PS path only)
	Demand    int // slots to keep its link busy
	Intensity float64
	// Measured (or, before the first measurement, predicted) phase times.
	Comm, Compute time.Duration
	// Counts of decisions.
	Grants, Queued, PSPaths int
	Waited                  time.Duration
	// Borrowed counts the job's grants out of another job's pool (loans,
	// included in Grants); Lent, the loans made out of the job's pool.
	Borrowed, Lent int
	// Collisions counts the job's all-reduce starts that found a job it
	// shares its pool with in its all-reduce.
	Collisions int
	// PhaseLocked lists, in ID order, the jobs it is phase-locked with
	// (Config.MeasuredOverlap).
	PhaseLocked []uint16
}

// Loan is a range of an idle pool granted to a job of another pool for one
// all-reduce (Config.Lend).
type Loan struct {
	Borrower uint16
	Pool     int      // the lending pool
	Owners   []uint16 // the lending pool's jobs
	Range    Range
	At       time.Duration // when it was granted
	// Return is the owners' earliest predicted next all-reduce start, as
	// predicted when the loan was granted.
	Return time.Duration
}

type job struct {
	prof      JobProfile
	seq       int // arrival order
	demand    int
	comm      float64 // ns, EWMA
	compute   float64 // ns, EWMA
	pool      *pool
	inPhase   bool
	phaseAt   time.Duration
	phaseAR   uint32
	lastEnd   time.Duration
	ended     bool
	info      JobInfo
	queuedAt  time.Duration
	queuedFor uint32
	queued    bool
	loan      *loan // held by the job's current all-reduce
	// run counts, per job sharing its pool, the consecutive all-reduce
	// starts that found that job in its all-reduce; locked marks the jobs
	// it is phase-locked with (Config.MeasuredOverlap).
	run    map[uint16]int
	locked map[uint16]bool
}

// duty is the fraction of time the job spends in all-reduce.
func (j *job) duty() float64 { return j.comm / (j.comm + j.compute) }

// intensity is all-reduce time over compute time: the priority key.
func (j *job) intensity() float64 { return j.comm / math.Max(j.compute, 1) }

type pool struct {
	id     int
	rng    Range
	jobs   []*job
	holder *job
	queue  []*job
	// want is a resize deferred until the pool is free.
	want int
	loan *loan // lent out
}

// busy reports whether an all-reduce holds the pool's slots, its own job's
// or a borrower's.
func (p *pool) busy() bool { return p.holder != nil || p.loan != nil }

// loan is a range of pool from lent to job to for one all-reduce.
type loan struct {
	from     *pool
	to       *job
	rng      Range
	at, back time.Duration
}

// Scheduler is the DynaINA state machine. Its methods take the current time
// and return decisions; it never reads a clock.
type Scheduler struct {
	cfg    Config
	free   *freeList
	pools  []*pool
	jobs   map[uint16]*job
	nextID int
	seq    int
	// Ops counts pool operations by kind: create, grow, shrink, split,
	// merge, move, free.
	Ops map[string]int
	// Refusals counts why lending (Config.Lend) made no loan.
	Refusals LendRefusals
}

// LendRefusals count the all-reduces lending considered (Tried: with
// Config.Lend, those of a job whose own pool is missing, busy or smaller
// than its demand, holding no loan and not queued) and, for those that got
// no loan, the furthest any other pool came: NoIdle, no other pool idle (each busy, or without jobs); TooSmall,
// idle pools, none giving more slots than the borrower's own pool gives
// now; Unpredicted, large enough but with a job never seen ending an
// all-reduce (no return prediction); TooSoon, predicted to return before
// the loan would end with its margin.
type LendRefusals struct {
	Tried, NoIdle, TooSmall, Unpredicted, TooSoon uint64
}

// New returns a scheduler owning cfg.TotalSlots slots.
func New(cfg Config) (*Scheduler, error) {
	if err := cfg.defaults(); err != nil {
		return nil, err
	}
	return &Scheduler{cfg: cfg, free: newFreeList(cfg.TotalSlots), jobs: map[uint16]*job{}, Ops: map[string]int{}}, nil
}

// ErrUnknownJob is returned for a job that is not registered.
var ErrUnknownJob = errors.New("dynaina: unknown job")

// Register places a new job into a pool (or none: PS path only) and returns
// where it went.
func (s *Scheduler) Register(now time.Duration, p JobProfile) (JobInfo, error) {
	switch {
	case p.ID == 0:
		return JobInfo{}, errors.New("dynaina: job ID 0 is reserved")
	case s.jobs[p.ID] != nil:
		return JobInfo{}, fmt.Errorf("dynaina: job %d already registered", p.ID)
	case p.Workers < 1 || p.Workers > 32:
		return JobInfo{}, fmt.Errorf("dynaina: job %d: Workers = %d: must be in [1, 32]", p.ID, p.Workers)
	case p.GradientBytes <= 0:
		return JobInfo{}, fmt.Errorf("dynaina: job %d: GradientBytes = %d: must be > 0", p.ID, p.GradientBytes)
	case p.Compute < 0:
		return JobInfo{}, fmt.Errorf("dynaina: job %d: Compute = %v: must be ≥ 0", p.ID, p.Compute)
	}
	s.seq++
	j := &job{prof: p, seq: s.seq}
	// Predicted all-reduce time at line rate with INA: each worker sends
	// and receives one copy of the gradient (plus header overhead).
	slotBytes := 4 * s.cfg.ValuesPerSlot
	wire := float64(p.GradientBytes) * float64(slotBytes+80) / float64(slotBytes)
	j.comm = wire * 8 / float64(s.cfg.LinkBitsPerSecond) * 1e9
	j.compute = float64(p.Compute)
	bdp := float64(s.cfg.LinkBitsPerSecond) * s.cfg.RTT.Seconds() / float64(8*(slotBytes+80))
	j.demand = max(s.cfg.MinSlots, int(math.Ceil(bdp)))
	// A job never needs more slots than chunks in its gradient.
	chunks := int((p.GradientBytes + int64(slotBytes) - 1) / int64(slotBytes))
	j.demand = max(1, min(j.demand, chunks))
	j.info = JobInfo{ID: p.ID, Pool: -1, Demand: j.demand}
	s.jobs[p.ID] = j
	s.place(j)
	s.rebalance()
	return s.JobInfo(p.ID), nil
}

// place puts a job into a pool: a new one of its full demand if memory
// allows, else one from the largest free range, else a shared one with little
// predicted overlap, else memory taken from less intensive jobs or freed by
// merging two pools of rarely-overlapping jobs, else the least contended pool;
// with no memory at all, none.
func (s *Scheduler) place(j *job) {
	if r, ok := s.free.take(j.demand); ok {
		s.newPool(r, j)
		return
	}
	// Free memory is used before anything is shared: an undersized pool of
	// its own still serves the job at a fraction of its rate.
	if s.takeLargest(j) {
		return
	}
	if !s.cfg.NoSharing {
		if p := s.bestShare(j, true); p != nil {
			s.join(p, j)
			return
		}
	}
	// Take memory from the least intensive exclusive pool that is less
	// intensive than j: shrink it, down to MinSlots.
	var victim *pool
	for _, p := range s.pools {
		if !s.cfg.NoPriority && len(p.jobs) == 1 && p.jobs[0].intensity() < j.intensity() && p.rng.Slots > s.cfg.MinSlots {
			if victim == nil || p.jobs[0].intensity() < victim.jobs[0].intensity() {
				victim = p
			}
		}
	}
	if victim != nil && !victim.busy() {
		give := min(victim.rng.Slots-s.cfg.MinSlots, j.demand)
		s.resize(victim, victim.rng.Slots-give)
		if r, ok := s.free.take(min(j.demand, s.free.largest())); ok && r.Slots >= s.cfg.MinSlots {
			s.newPool(r, j)
			return
		} else if ok {
			s.free.give(r)
		}
	}
	if s.takeLargest(j) || s.cfg.NoSharing {
		return
	}
	// Merge two idle pools whose jobs rarely overlap, to free memory for a
	// pool of j's own.
	if s.mergeForRoom() && s.takeLargest(j) {
		return
	}
	if p := s.bestShare(j, false); p != nil {
		s.join(p, j)
	}
}

// takeLargest gives j a new pool from the largest free range, if that is at
// least MinSlots.
func (s *Scheduler) takeLargest(j *job) bool {
	if s.free.largest() < s.cfg.MinSlots {
		return false
	}
	r, _ := s.free.take(min(j.demand, s.free.largest()))
	s.newPool(r, j)
	return true
}

// overlap is overlap(p, j), or 1 with MeasuredOverlap if j is
// phase-locked with one of p's jobs.
func (s *Scheduler) overlap(p *pool, j *job) float64 {
	if s.cfg.MeasuredOverlap {
		for _, k := range p.jobs {
			if k != j && j.locked[k.prof.ID] {
				return 1
			}
		}
	}
	return overlap(p, j)
}

// overlap is the predicted probability that j's all-reduce finds one of p's
// jobs in its own all-reduce, with independent phases.
func overlap(p *pool, j *job) float64 {
	free := 1.0
	for _, k := range p.jobs {
		free *= 1 - k.duty()
	}
	return j.duty() * (1 - free)
}

// bestShare returns the pool whose jobs overlap least with j; with strict, only
// a pool under the ShareOverlap bound whose combined duty leaves room for j.
func (s *Scheduler) bestShare(j *job, strict bool) *pool {
	var best *pool
	bestOv := math.Inf(1)
	for _, p := range s.pools {
		ov := s.overlap(p, j)
		if strict {
			sum := j.duty()
			for _, k := range p.jobs {
				sum += k.duty()
			}
			if ov > s.cfg.ShareOverlap || sum > 1 {
				continue
			}
		}
		if ov < bestOv || (ov == bestOv && p.id < best.id) {
			best, bestOv = p, ov
		}
	}
	return best
}

func (s *Scheduler) newPool(r Range, j *job) {
	s.nextID++
	p := &pool{id: s.nextID, rng: r}
	s.pools = append(s.pools, p)
	s.Ops["create"]++
	s.join(p, j)
}

func (s *Scheduler) join(p *pool, j *job) {
	p.jobs = append(p.jobs, j)
	j.pool, j.run = p, nil
	j.info.Pool = p.id
	// A shared pool grows towards the largest demand among its jobs.
	if want := j.demand; want > p.rng.Slots {
		s.resize(p, want)
	}
}

// resize grows a pool in place when the slots after it are free, or shrinks
// it by returning its tail. A leased pool is resized when its lease ends.
func (s *Scheduler) resize(p *pool, slots int) {
	if p.busy() {
		p.want = slots
		return
	}
	p.want = 0
	switch {
	case slots < p.rng.Slots:
		s.free.give(Range{p.rng.Base + slots, p.rng.Slots - slots})
		p.rng.Slots = slots
		s.Ops["shrink"]++
	case slots > p.rng.Slots:
		extra := slots - p.rng.Slots
		for extra > 0 && !s.free.takeAt(p.rng.End(), extra) {
			extra--
		}
		if extra > 0 {
			p.rng.Slots += extra
			s.Ops["grow"]++
		}
	}
}

// Unregister removes a job. Its pool shrinks to what the remaining jobs need,
// or is freed; freed memory is merged and offered to jobs that have less
// than they need. A job leaving while another job's all-reduce holds a shared
// pool does not disturb that lease: the resize waits for its end.
func (s *Scheduler) Unregister(now time.Duration, id uint16) ([]Decision, error) {
	j := s.jobs[id]
	if j == nil {
		return nil, ErrUnknownJob
	}
	delete(s.jobs, id)
	for _, k := range s.jobs {
		delete(k.run, id)
		delete(k.locked, id)
	}
	out := s.endLoan(now, j)
	if p := j.pool; p != nil {
		p.jobs = remove(p.jobs, j)
		p.queue = remove(p.queue, j)
		if p.holder == j {
			out = append(out, s.release(now, p)...)
		}
		if len(p.jobs) == 0 {
			s.dropPool(p)
		} else {
			need := 0
			for _, k := range p.jobs {
				need = max(need, k.demand)
			}
			if need < p.rng.Slots {
				s.resize(p, need)
			}
		}
	}
	s.rebalance()
	return out, nil
}

// dropPool returns an idle pool's memory; it does nothing for a leased pool
// (release drops it later) or one already dropped.
func (s *Scheduler) dropPool(p *pool) {
	if p.busy() {
		return
	}
	for i, q := range s.pools {
		if q == p {
			s.pools = append(s.pools[:i], s.pools[i+1:]...)
			s.free.give(p.rng)
			s.Ops["free"]++
			return
		}
	}
}

func remove(js []*job, j *job) []*job {
	for i, k := range js {
		if k == j {
			return append(js[:i], js[i+1:]...)
		}
	}
	return js
}

// rebalance gives memory back to jobs short of it, most intensive first:
// a job sharing a pool splits out into a pool of its own when free memory
// allows (split), a job in an undersized pool grows it, and a job without a
// pool gets one. When a job has none and memory is short, two pools whose
// jobs rarely overlap are merged to make room (merge).
func (s *Scheduler) rebalance() {
	order := s.byIntensity()
	for _, j := range order {
		p := j.pool
		switch {
		case p == nil:
			s.place(j)
		case len(p.jobs) > 1 && !p.busy() && s.overlap(withoutJob(p, j), j) > s.cfg.ShareOverlap &&
			s.free.largest() >= min(j.demand, max(s.cfg.MinSlots, p.rng.Slots/2)):
			if r, ok := s.free.take(min(j.demand, s.free.largest())); ok {
				p.jobs = remove(p.jobs, j)
				p.queue = remove(p.queue, j)
				s.Ops["split"]++
				s.nextID++
				np := &pool{id: s.nextID, rng: r}
				s.pools = append(s.pools, np)
				s.join(np, j)
			}
		case p.rng.Slots < j.demand && !p.busy():
			s.regrow(p, j.demand)
		}
	}
}

// regrow grows an idle pool smaller than need towards need: in place, into
// the free memory after it and then before it; or, if that run of free
// memory and the pool together hold less than need, by moving the pool to
// the best-fitting free range of need slots, else to the largest free
// range if that is larger than the run.
func (s *Scheduler) regrow(p *pool, need int) {
	old := p.rng
	s.free.give(old)
	var run Range
	for _, r := range s.free.r {
		if r.Base <= old.Base && old.End() <= r.End() {
			run = r
		}
	}
	got := run
	switch {
	case run.Slots >= need:
		got = Range{min(old.Base, run.End()-need), need}
	case s.free.largest() > run.Slots:
		got, _ = s.free.take(min(need, s.free.largest()))
		p.rng = got
		s.Ops["move"]++
		return
	}
	s.free.takeAt(got.Base, got.Slots)
	p.rng = got
	if got != old {
		s.Ops["grow"]++
	}
}

func withoutJob(p *pool, j *job) *pool {
	q := &pool{}
	for _, k := range p.jobs {
		if k != j {
			q.jobs = append(q.jobs, k)
		}
	}
	return q
}

// mergeForRoom merges the two idle pools whose jobs overlap least (if under
// the sharing bound) into the larger one, freeing the smaller's memory. It
// reports whether it merged.
func (s *Scheduler) mergeForRoom() bool {
	var a, b *pool
	best := math.Inf(1)
	for i, p := range s.pools {
		for _, q := range s.pools[i+1:] {
			if p.busy() || q.busy() {
				continue
			}
			ov := 0.0
			for _, k := range q.jobs {
				ov = math.Max(ov, s.overlap(p, k))
			}
			if ov <= s.cfg.ShareOverlap && ov < best {
				a, b, best = p, q, ov
			}
		}
	}
	if a == nil {
		return false
	}
	if b.rng.Slots > a.rng.Slots {
		a, b = b, a
	}
	for _, k := range b.jobs {
		a.jobs = append(a.jobs, k)
		k.pool, k.run = a, nil
		k.info.Pool = a.id
	}
	b.jobs = nil
	s.dropPool(b)
	s.Ops["merge"]++
	return true
}

// byIntensity returns the jobs in the order they are served: most
// communication-intensive first (ties by ID), or in arrival order with
// NoPriority.
func (s *Scheduler) byIntensity() []*job {
	js := make([]*job, 0, len(s.jobs))
	for _, j := range s.jobs {
		js = append(js, j)
	}
	sort.Slice(js, func(a, b int) bool {
		if s.cfg.NoPriority {
			return js[a].seq < js[b].seq
		}
		if ia, ib := js[a].intensity(), js[b].intensity(); ia != ib {
			return ia > ib
		}
		return js[a].prof.ID < js[b].prof.ID
	})
	return js
}

// PhaseStart is called when a job's all-reduce is about to start.
func (s *Scheduler) PhaseStart(now time.Duration, id uint16, ar uint32) (Decision, error) {
	j := s.jobs[id]
	if j == nil {
		return Decision{}, ErrUnknownJob
	}
	if j.ended {
		s.observe(&j.compute, float64(now-j.lastEnd))
	}
	j.inPhase, j.phaseAt, j.phaseAR = true, now, ar
	s.collisions(j)
	d := Decision{Job: id, AllReduce: ar}
	p := j.pool
	switch {
	case p != nil && !p.busy() && (!s.cfg.Lend || p.rng.Slots >= j.demand):
		d.Action, d.Range = Grant, p.rng
		p.holder = j
	case s.cfg.Lend && s.lend(now, j, &d):
	case p == nil:
		d.Action = PSPath
	case !p.busy():
		d.Action, d.Range = Grant, p.rng
		p.holder = j
	case p.loan != nil:
		// The pool is lent: its job comes first at the loan's end, and
		// waits no longer than Expire allows.
		d.Action = Queue
		d.Deadline = now + time.Duration(s.cfg.MaxWaitFraction*j.comm) + s.cfg.RTT
		j.queued, j.queuedAt, j.queuedFor = true, now, ar
		p.queue = append(p.queue, j)
	case s.cfg.NoSharing:
		d.Action = PSPath
	default:
		h := p.holder
		left := time.Duration(h.comm) - (now - h.phaseAt)
		if left < 0 {
			left = 0
		}
		if float64(left) <= s.cfg.MaxWaitFraction*j.comm {
			d.Action = Queue
			d.Deadline = now + left + left/2 + s.cfg.RTT
			j.queued, j.queuedAt, j.queuedFor = true, now, ar
			p.queue = append(p.queue, j)
		} else {
			d.Action = PSPath
		}
	}
	s.count(j, d)
	return d, nil
}

// collisions records, at the start of j's all-reduce, which of the jobs
// sharing its pool are in their all-reduce, and locks j with one found
// there at LockAfter consecutive starts (MeasuredOverlap).
func (s *Scheduler) collisions(j *job) {
	p := j.pool
	if p == nil || len(p.jobs) < 2 {
		return
	}
	hit := false
	for _, k := range p.jobs {
		if k == j {
			continue
		}
		hit = hit || k.inPhase
		if !s.cfg.MeasuredOverlap {
			continue
		}
		if !k.inPhase {
			delete(j.run, k.prof.ID)
			continue
		}
		if j.run == nil {
			j.run = map[uint16]int{}
		}
		j.run[k.prof.ID]++
		if j.run[k.prof.ID] >= s.cfg.LockAfter {
			lock(j, k)
			lock(k, j)
		}
	}
	if hit {
		j.info.Collisions++
	}
}

func lock(j, k *job) {
	if j.locked == nil {
		j.locked = map[uint16]bool{}
	}
	j.locked[k.prof.ID] = true
}

func (s *Scheduler) count(j *job, d Decision) {
	switch d.Action {
	case Grant:
		j.info.Grants++
	case Queue:
		j.info.Queued++
	case PSPath:
		j.info.PSPaths++
	}
}

// lend grants j, whose all-reduce starts now, a loan out of an idle pool
// of other jobs, if one serves it better than its own pool can now and
// its jobs are predicted to stay away until the loan's end with the
// margin; it reports whether it did. Of the candidates it takes the one
// giving most slots (up to j's demand), then the smallest pool, then the
// one whose jobs return latest, then the oldest.
func (s *Scheduler) lend(now time.Duration, j *job, d *Decision) bool {
	own := j.pool
	if j.loan != nil || j.queued || (own != nil && own.holder == j) {
		return false
	}
	need := min(j.demand, s.cfg.MinSlots)
	if own != nil {
		have := min(own.rng.Slots, j.demand)
		if !own.busy() {
			have++ // only a loan larger than the idle pool of its own
		}
		need = max(need, have)
	}
	end := now + time.Duration((1+s.cfg.LendMargin)*j.comm) + s.cfg.RTT
	var best *pool
	var bestBack time.Duration
	s.Refusals.Tried++
	// reach: how far the furthest candidate came (0 none idle, 1 too
	// small, 2 no prediction, 3 back too soon).
	reach := 0
	for _, p := range s.pools {
		if p == own || p.busy() || len(p.jobs) == 0 {
			continue
		}
		if min(p.rng.Slots, j.demand) < need {
			reach = max(reach, 1)
			continue
		}
		back, ok := returnAt(p)
		if !ok {
			reach = max(reach, 2)
			continue
		}
		if back < end {
			reach = 3
			continue
		}
		if best != nil {
			gb, gp := min(best.rng.Slots, j.demand), min(p.rng.Slots, j.demand)
			if gp < gb || gp == gb && (p.rng.Slots > best.rng.Slots || p.rng.Slots == best.rng.Slots && back <= bestBack) {
				continue
			}
		}
		best, bestBack = p, back
	}
	if best == nil {
		switch reach {
		case 0:
			s.Refusals.NoIdle++
		case 1:
			s.Refusals.TooSmall++
		case 2:
			s.Refusals.Unpredicted++
		default:
			s.Refusals.TooSoon++
		}
		return false
	}
	ln := &loan{from: best, to: j, rng: Range{best.rng.Base, min(best.rng.Slots, j.demand)}, at: now, back: bestBack}
	best.loan, j.loan = ln, ln
	j.info.Borrowed++
	for _, k := range best.jobs {
		k.info.Lent++
	}
	d.Action, d.Range, d.Lender = Grant, ln.rng, best.id
	return true
}

// returnAt is the earliest predicted start of the next all-reduce of p's
// jobs: a job's last all-reduce end (or, during an all-reduce elsewhere,
// its start plus its all-reduce time) plus its compute time. A job never
// seen ending an all-reduce has no prediction: ok is false.
func returnAt(p *pool) (at time.Duration, ok bool) {
	for i, k := range p.jobs {
		var t time.Duration
		switch {
		case k.inPhase:
			t = k.phaseAt + time.Duration(k.comm+k.compute)
		case k.ended:
			t = k.lastEnd + time.Duration(k.compute)
		default:
			return 0, false
		}
		if i == 0 || t < at {
			at = t
		}
	}
	return at, len(p.jobs) > 0
}

// endLoan ends j's loan, if any, and hands the lending pool to its queued
// job.
func (s *Scheduler) endLoan(now time.Duration, j *job) []Decision {
	ln := j.loan
	if ln == nil {
		return nil
	}
	j.loan, ln.from.loan = nil, nil
	return s.release(now, ln.from)
}

// PhaseEnd is called when a job's all-reduce has finished. It returns the
// grants this frees for queued jobs.
func (s *Scheduler) PhaseEnd(now time.Duration, id uint16) ([]Decision, error) {
	j := s.jobs[id]
	if j == nil {
		return nil, ErrUnknownJob
	}
	if j.inPhase {
		s.observe(&j.comm, float64(now-j.phaseAt))
	}
	j.inPhase, j.ended, j.lastEnd = false, true, now
	lent := j.loan != nil
	out := s.endLoan(now, j)
	p := j.pool
	if p == nil || p.holder != j {
		if p != nil && j.queued {
			p.queue = remove(p.queue, j)
			j.queued = false
		}
		if lent {
			s.rebalance()
		}
		return out, nil
	}
	out = append(out, s.release(now, p)...)
	s.rebalance()
	return out, nil
}

// release ends the lease on p, applies a deferred resize, and grants the pool
// to the most intensive queued job.
func (s *Scheduler) release(now time.Duration, p *pool) []Decision {
	p.holder = nil
	if p.want > 0 {
		s.resize(p, p.want)
	}
	if len(p.jobs) == 0 {
		s.dropPool(p)
		return nil
	}
	if len(p.queue) == 0 {
		return nil
	}
	if !s.cfg.NoPriority {
		sort.SliceStable(p.queue, func(a, b int) bool { return p.queue[a].intensity() > p.queue[b].intensity() })
	}
	next := p.queue[0]
	p.queue = p.queue[1:]
	next.queued = false
	next.info.Waited += now - next.queuedAt
	next.phaseAt = now
	p.holder = next
	next.info.Grants++
	return []Decision{{Job: next.prof.ID, AllReduce: next.queuedFor, Action: Grant, Range: p.rng}}
}

// Expire turns queued all-reduces whose deadline passed into PS-path
// decisions.
func (s *Scheduler) Expire(now time.Duration) []Decision {
	var out []Decision
	for _, p := range s.pools {
		keep := p.queue[:0]
		for _, j := range p.queue {
			if p.busy() && now-j.queuedAt > time.Duration(s.cfg.MaxWaitFraction*j.comm)+s.cfg.RTT {
				j.queued = false
				j.info.PSPaths++
				j.info.Waited += now - j.queuedAt
				out = append(out, Decision{Job: j.prof.ID, AllReduce: j.queuedFor, Action: PSPath})
				continue
			}
			keep = append(keep, j)
		}
		p.queue = keep
	}
	return out
}

func (s *Scheduler) observe(v *float64, x float64) {
	if x <= 0 {
		return
	}
	*v = (1-s.cfg.Alpha)*(*v) + s.cfg.Alpha*x
}

// Pools describes every pool, in creation order.
func (s *Scheduler) Pools() []PoolInfo {
	out := make([]PoolInfo, 0, len(s.pools))
	for _, p := range s.pools {
		pi := PoolInfo{ID: p.id, Range: p.rng, Leased: p.holder != nil}
		if p.holder != nil {
			pi.Holder = p.holder.prof.ID
		}
		if ln := p.loan; ln != nil {
			pi.Lent, pi.Borrower, pi.Loan = true, ln.to.prof.ID, ln.rng
		}
		for _, j := range p.jobs {
			pi.Jobs = append(pi.Jobs, j.prof.ID)
		}
		out = append(out, pi)
	}
	return out
}

// JobInfo returns a job's standing.
func (s *Scheduler) JobInfo(id uint16) JobInfo {
	j := s.jobs[id]
	if j == nil {
		return JobInfo{ID: id, Pool: -1}
	}
	in := j.info
	in.Intensity = j.intensity()
	in.Comm, in.Compute = time.Duration(j.comm), time.Duration(j.compute)
	in.Demand = j.demand
	for id := range j.locked {
		in.PhaseLocked = append(in.PhaseLocked, id)
	}
	slices.Sort(in.PhaseLocked)
	if j.pool == nil {
		in.Pool = -1
	} else {
		in.Pool = j.pool.id
	}
	return in
}

// Loans describes the loans in force, in pool creation order.
func (s *Scheduler) Loans() []Loan {
	var out []Loan
	for _, p := range s.pools {
		if p.loan != nil {
			out = append(out, p.loan.info())
		}
	}
	return out
}

// LoanOf returns the loan job's current all-reduce holds, if any.
func (s *Scheduler) LoanOf(id uint16) (Loan, bool) {
	if j := s.jobs[id]; j != nil && j.loan != nil {
		return j.loan.info(), true
	}
	return Loan{}, false
}

func (ln *loan) info() Loan {
	l := Loan{Borrower: ln.to.prof.ID, Pool: ln.from.id, Range: ln.rng, At: ln.at, Return: ln.back}
	for _, k := range ln.from.jobs {
		l.Owners = append(l.Owners, k.prof.ID)
	}
	return l
}

// FreeSlots returns the memory in no pool.
func (s *Scheduler) FreeSlots() int { return s.free.total() }

// LeasedSlots returns the memory held by active all-reduces.
func (s *Scheduler) LeasedSlots() int {
	n := 0
	for _, p := range s.pools {
		if p.holder != nil {
			n += p.rng.Slots
		}
		if p.loan != nil {
			n += p.loan.rng.Slots
		}
	}
	return n
}

// Check verifies the scheduler's invariants: pools and free ranges tile the
// memory without overlap; every job is in the pool it thinks it is in; a
// holder belongs to its pool; a queued job waits for a busy pool of its own;
// a pool is held by one of its jobs or lent, not both; a loan lies in the
// lending pool, is held by a job of another pool that is in an all-reduce,
// and is that job's only loan; and no two active grants (holders' pools,
// loans) overlap.
func (s *Scheduler) Check() error {
	if err := s.free.check(s.cfg.TotalSlots); err != nil {
		return err
	}
	all := append([]Range{}, s.free.r...)
	var leases []Range
	inPools := map[*pool]bool{}
	for _, p := range s.pools {
		inPools[p] = true
		if p.rng.Slots <= 0 {
			return fmt.Errorf("pool %d has %d slots", p.id, p.rng.Slots)
		}
		all = append(all, p.rng)
		for _, j := range p.jobs {
			if j.pool != p {
				return fmt.Errorf("job %d listed in pool %d but placed in another", j.prof.ID, p.id)
			}
		}
		if p.holder != nil && p.holder.pool != p {
			return fmt.Errorf("pool %d held by job %d of another pool", p.id, p.holder.prof.ID)
		}
		if p.holder != nil {
			leases = append(leases, p.rng)
		}
		for _, j := range p.queue {
			if j.pool != p {
				return fmt.Errorf("job %d queued for pool %d but not waiting for it", j.prof.ID, p.id)
			}
		}
		if len(p.queue) > 0 && !p.busy() {
			return fmt.Errorf("pool %d is idle with %d all-reduces queued for it", p.id, len(p.queue))
		}
		ln := p.loan
		if ln == nil {
			continue
		}
		b := ln.to
		switch {
		case p.holder != nil:
			return fmt.Errorf("pool %d is both held by job %d and lent to job %d", p.id, p.holder.prof.ID, b.prof.ID)
		case ln.from != p:
			return fmt.Errorf("pool %d holds a loan of another pool", p.id)
		case s.jobs[b.prof.ID] != b:
			return fmt.Errorf("pool %d lent to job %d, which left", p.id, b.prof.ID)
		case b.loan != ln:
			return fmt.Errorf("pool %d lent to job %d, which does not hold the loan", p.id, b.prof.ID)
		case b.pool == p:
			return fmt.Errorf("pool %d lent to its own job %d", p.id, b.prof.ID)
		case !b.inPhase:
			return fmt.Errorf("pool %d lent to job %d, which is in no all-reduce", p.id, b.prof.ID)
		case ln.rng.Slots <= 0 || ln.rng.Base < p.rng.Base || ln.rng.End() > p.rng.End():
			return fmt.Errorf("loan %+v of pool %d lies outside the pool %+v", ln.rng, p.id, p.rng)
		}
		leases = append(leases, ln.rng)
	}
	for _, j := range s.byIntensity() {
		if j.pool != nil && (!inPools[j.pool] || !slices.Contains(j.pool.jobs, j)) {
			return fmt.Errorf("job %d placed in pool %d, which does not list it", j.prof.ID, j.pool.id)
		}
		if ln := j.loan; ln != nil && (ln.to != j || !inPools[ln.from] || ln.from.loan != ln) {
			return fmt.Errorf("job %d holds a loan no pool made", j.prof.ID)
		}
	}
	if err := disjoint(leases); err != nil {
		return fmt.Errorf("grants: %w", err)
	}
	if err := disjoint(all); err != nil {
		return err
	}
	sum := 0
	for _, r := range all {
		sum += r.Slots
	}
	if sum != s.cfg.TotalSlots {
		return fmt.Errorf("pools and free ranges cover %d of %d slots", sum, s.cfg.TotalSlots)
	}
	return nil
}

// disjoint sorts rs by base and reports the first overlap.
func disjoint(rs []Range) error {
	sort.Slice(rs, func(a, b int) bool { return rs[a].Base < rs[b].Base })
	next := 0
	for _, r := range rs {
		if r.Base < next {
			return fmt.Errorf("range %+v overlaps the previous one", r)
		}
		next = r.End()
	}
	return nil
}
