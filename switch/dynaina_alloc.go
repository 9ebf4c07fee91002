package sw

import (
	"fmt"
	"sort"
	"time"

	"github.com/inabox/inabox/emu"
	"github.com/inabox/inabox/rdma"
	"github.com/inabox/inabox/switch/dynaina"
)

// DynaINA behind FreeINA's all-reduce-level allocation (docs/dynaina.md).
//
// DynaINANode wraps a FreeINANode and takes over its control frames: an
// ALLOC is the job's all-reduce start (dynaina PhaseStart), a FREE its end
// (PhaseEnd), and the scheduler's decision becomes the GRANT:
//
//   - Grant(range): a lease over the job's pool (range ∩ chunks), installed
//     in the FreeINA allocator exactly where the scheduler put it, so every
//     grant is inside the job's pool;
//   - Queue: no answer yet (the PS keeps re-sending its ALLOC, which is
//     idempotent); the GRANT is sent when the holder's PhaseEnd hands the
//     pool over, or a GRANT of 0 when Expire turns the wait into the PS path;
//   - PSPath: a GRANT of 0 (the whole all-reduce on the PS path).
//
// Jobs register with the scheduler at their arrival (a registration the
// cluster manager hands to the switch's control plane; the node arms a timer
// for it) and unregister when their last all-reduce has ended. An
// all-reduce planned entirely on the PS path frees no lease, so the PS
// sends no FREE: its end is reported out of band (ReportEnd, from the PS's
// OnAllReduce hook). The FreeINA workers and PS run unchanged.

// DynaINAJob is a job the scheduler learns about at Arrival.
type DynaINAJob struct {
	Profile dynaina.JobProfile
	Arrival time.Duration
	// AllReduces is how many all-reduces the job performs; after the last
	// one ends the job is unregistered (0: never).
	AllReduces int
}

// DynaINAStats are the wiring's counters.
type DynaINAStats struct {
	Allocs, Grants, Queued, PSPath, Expired, Frees, IdleFrees, Registered, Unregistered uint64
	// Outside counts grants that would have fallen outside the job's pool
	// or onto slots in use (refused; must stay 0).
	Outside uint64
}

// DynaINANode is the switch node with DynaINA's control plane.
type DynaINANode struct {
	*FreeINANode
	Sched *dynaina.Scheduler

	arrivals []DynaINAJob // not yet registered, by arrival
	jobs     map[uint16]*dynState
	pending  []dynaina.Decision // decisions made outside an event, sent at the next one
	stats    DynaINAStats
	expireAt time.Duration // armed queue-expiry timer, -1 none
	regAt    time.Duration // armed registration timer, -1 none
	err      error
	keepBuf  []*emu.Packet
	out      []Lease // GRANTs to send
}

type dynState struct {
	spec   DynaINAJob
	ar     uint16 // current all-reduce
	active bool   // ar started and not ended
	queued bool
	lease  bool // ar holds a lease
	ps     bool // ar decided PS path
	chunks uint32
	ended  int
	rng    dynaina.Range
}

const (
	dynRegTimerKey    = 3
	dynExpireTimerKey = 4
)

var (
	_ emu.Node     = (*DynaINANode)(nil)
	_ emu.Resetter = (*DynaINANode)(nil)
)

// NewDynaINANode wraps n: cfg.TotalSlots is set to the FreeINA pool's
// aggregators (the scheduler's slots are the pool's aggregators).
func NewDynaINANode(n *FreeINANode, cfg dynaina.Config, jobs ...DynaINAJob) (*DynaINANode, error) {
	cfg.TotalSlots = len(n.F.used)
	s, err := dynaina.New(cfg)
	if err != nil {
		return nil, err
	}
	d := &DynaINANode{FreeINANode: n, Sched: s, jobs: map[uint16]*dynState{}, expireAt: -1, regAt: -1}
	d.arrivals = append(d.arrivals, jobs...)
	sort.SliceStable(d.arrivals, func(a, b int) bool { return d.arrivals[a].Arrival < d.arrivals[b].Arrival })
	return d, nil
}

// Stats returns the wiring's counters.
func (d *DynaINANode) Stats() DynaINAStats { return d.stats }

// Err returns the first scheduler error (an invariant broken), or nil.
func (d *DynaINANode) Err() error {
	if d.err != nil {
		return d.err
	}
	return d.Sched.Check()
}

// Start implements emu.Node.
func (d *DynaINANode) Start(env *emu.Env) {
	d.FreeINANode.Start(env)
	d.expireAt, d.regAt = -1, -1
	d.events(env)
}

// Reset implements emu.Resetter: the data plane reboots (leases and
// registers lost, FreeINANode.Reset); the scheduler's state lives in the
// control plane and survives. A lost lease is re-installed by the PS's
// exact re-ALLOC.
func (d *DynaINANode) Reset() {
	d.FreeINANode.Reset()
}

// Timer implements emu.Node.
func (d *DynaINANode) Timer(env *emu.Env, key uint64) {
	now := env.Now()
	switch key {
	case dynRegTimerKey:
		d.regAt = -1
	case dynExpireTimerKey:
		d.expireAt = -1
		for _, dec := range d.Sched.Expire(now) {
			d.stats.Expired++
			d.apply(now, dec)
		}
	case leaseTimerKey:
		d.armed = false
		d.expireIdle(now)
	default:
		d.FreeINANode.Timer(env, key)
	}
	d.events(env)
	d.arm(env)
}

// events registers arrived jobs, sends pending decisions and arms timers.
func (d *DynaINANode) events(env *emu.Env) {
	now := env.Now()
	d.advance(now)
	d.flush(env)
	if len(d.arrivals) > 0 && d.regAt != d.arrivals[0].Arrival {
		d.regAt = d.arrivals[0].Arrival
		env.SetTimer(d.regAt, dynRegTimerKey)
	}
	var next time.Duration = -1
	for _, id := range d.sortedJobs() {
		if st := d.jobs[id]; st.queued {
			// Expire decides at the scheduler's own deadline; poll at the
			// RTT granularity of the scheduler's deadline formula.
			next = now + 50*time.Microsecond
			break
		}
	}
	if next >= 0 && (d.expireAt < 0 || d.expireAt > next) {
		d.expireAt = next
		env.SetTimer(next, dynExpireTimerKey)
	}
}

// advance registers the jobs arrived by now and applies pending decisions.
func (d *DynaINANode) advance(now time.Duration) {
	for len(d.arrivals) > 0 && d.arrivals[0].Arrival <= now {
		j := d.arrivals[0]
		d.arrivals = d.arrivals[1:]
		if _, err := d.Sched.Register(now, j.Profile); err != nil {
			d.fail(err)
			continue
		}
		d.jobs[j.Profile.ID] = &dynState{spec: j}
		d.stats.Registered++
	}
	for len(d.pending) > 0 {
		dec := d.pending[0]
		d.pending = d.pending[1:]
		d.apply(now, dec)
	}
}

func (d *DynaINANode) fail(err error) {
	if d.err == nil {
		d.err = err
	}
}

func (d *DynaINANode) sortedJobs() []uint16 {
	ids := make([]uint16, 0, len(d.jobs))
	for id := range d.jobs {
		ids = append(ids, id)
	}
	sort.Slice(ids, func(a, b int) bool { return ids[a] < ids[b] })
	return ids
}

// Receive implements emu.Node: ALLOC and FREE go to the scheduler, the rest
// to the FreeINA node.
func (d *DynaINANode) Receive(env *emu.Env, port int, pkts []*emu.Packet) {
	d.F.SetNow(env.Now())
	d.events(env)
	keep := d.keepBuf[:0]
	for _, p := range pkts {
		h := d.ctlHeader(p.Bytes())
		if h == nil || (h.Worker() != CtlAlloc && h.Worker() != CtlFree) {
			keep = append(keep, p)
			continue
		}
		if !rdma.CheckICRC(p.Bytes()) {
			keep = append(keep, p) // the FreeINA node counts and drops it
			continue
		}
		switch h.Worker() {
		case CtlAlloc:
			d.alloc(env.Now(), h.Job(), h.AllReduce(), h.Bitmap(), int(h.Slot()), h.Exponent() == CtlExact)
		case CtlFree:
			d.free(env.Now(), h.Job(), h.AllReduce())
		}
		env.Free(p)
	}
	if len(keep) > 0 {
		d.FreeINANode.Receive(env, port, keep)
	}
	clear(keep)
	d.keepBuf = keep[:0]
	d.events(env)
	d.arm(env)
}

func (d *DynaINANode) alloc(now time.Duration, job, ar uint16, chunks uint32, want int, exact bool) {
	d.stats.Allocs++
	st := d.jobs[job]
	if st == nil { // not registered (yet): the PS path
		d.emit(Lease{Job: job, AllReduce: ar, Chunks: chunks})
		return
	}
	if st.active && st.ar == ar {
		switch {
		case st.lease:
			d.F.s.mu.Lock()
			l := d.F.leases[leaseKey(job, ar)]
			d.F.s.mu.Unlock()
			if l == nil { // lost in a reboot: re-install over the same range
				if li, ok := d.install(now, job, ar, chunks, st.rng); ok && (!exact || li.Slots == want) {
					d.emit(li)
				} else {
					if ok {
						d.F.Free(job, ar)
					}
					d.emit(Lease{Job: job, AllReduce: ar, Chunks: chunks})
				}
				return
			}
			l.LastUse = now
			d.emit(*l)
		case st.ps:
			d.emit(Lease{Job: job, AllReduce: ar, Chunks: chunks})
		}
		return // queued: the answer comes with the grant
	}
	if st.active { // the previous all-reduce's end was not reported
		d.end(now, job, st.ar)
		if st = d.jobs[job]; st == nil { // that was its last: gone
			d.emit(Lease{Job: job, AllReduce: ar, Chunks: chunks})
			return
		}
	}
	st.ar, st.active, st.queued, st.lease, st.ps, st.chunks = ar, true, false, false, false, chunks
	dec, err := d.Sched.PhaseStart(now, job, uint32(ar))
	if err != nil {
		d.fail(err)
		st.ps = true
		d.emit(Lease{Job: job, AllReduce: ar, Chunks: chunks})
		return
	}
	d.apply(now, dec)
}

// apply carries out one scheduler decision.
func (d *DynaINANode) apply(now time.Duration, dec dynaina.Decision) {
	st := d.jobs[dec.Job]
	if st == nil || !st.active || uint32(st.ar) != dec.AllReduce {
		return
	}
	switch dec.Action {
	case dynaina.Queue:
		st.queued = true
		d.stats.Queued++
	case dynaina.Grant:
		st.queued = false
		if l, ok := d.install(now, dec.Job, st.ar, st.chunks, dec.Range); ok {
			st.lease, st.rng = true, dec.Range
			d.stats.Grants++
			d.emit(l)
			return
		}
		// Not installable (must not happen): give the pool back, PS path.
		d.stats.Outside++
		st.ps = true
		out, _ := d.Sched.PhaseEnd(now, dec.Job)
		d.pending = append(d.pending, out...)
		d.emit(Lease{Job: dec.Job, AllReduce: st.ar, Chunks: st.chunks})
	case dynaina.PSPath:
		st.queued, st.ps = false, true
		d.stats.PSPath++
		d.emit(Lease{Job: dec.Job, AllReduce: st.ar, Chunks: st.chunks})
	}
}

// install puts a lease over r (clipped to the all-reduce's chunks) into the
// FreeINA allocator. It refuses a range outside the job's pool or over
// aggregators in use.
func (d *DynaINANode) install(now time.Duration, job, ar uint16, chunks uint32, r dynaina.Range) (Lease, bool) {
	info := d.Sched.JobInfo(job)
	inPool := false
	for _, p := range d.Sched.Pools() {
		if p.ID == info.Pool && r.Base >= p.Range.Base && r.End() <= p.Range.End() {
			inPool = true
		}
	}
	n := min(r.Slots, int(min(chunks, uint32(len(d.F.used)))))
	f := d.F
	f.s.mu.Lock()
	defer f.s.mu.Unlock()
	if !inPool || n <= 0 || r.Base < 0 || r.Base+n > len(f.used) {
		return Lease{}, false
	}
	for i := r.Base; i < r.Base+n; i++ {
		if f.used[i] {
			return Lease{}, false
		}
	}
	f.stats.Allocs++
	f.stats.Grants++
	l := &Lease{Job: job, AllReduce: ar, Base: f.pool.Base + r.Base*f.pool.Stride, Slots: n, Chunks: chunks, Granted: now, LastUse: now}
	for i := r.Base; i < r.Base+n; i++ {
		f.used[i] = true
	}
	f.s.resetSlotsLocked(l.Base, l.Slots*f.pool.Stride)
	f.leases[leaseKey(job, ar)] = l
	return *l, true
}

func (d *DynaINANode) free(now time.Duration, job, ar uint16) {
	d.stats.Frees++
	st := d.jobs[job]
	if st == nil || !st.active || st.ar != ar {
		d.F.Free(job, ar) // a stale lease, if any
		return
	}
	d.end(now, job, ar)
}

// end finishes the job's current all-reduce: its lease (if any) is freed and
// the scheduler told; the grants this makes are applied.
func (d *DynaINANode) end(now time.Duration, job, ar uint16) {
	out := d.endAt(now, job, ar)
	for _, dec := range out {
		d.apply(now, dec)
	}
}

func (d *DynaINANode) endAt(now time.Duration, job, ar uint16) []dynaina.Decision {
	st := d.jobs[job]
	if st == nil || !st.active || st.ar != ar {
		return nil
	}
	if st.lease {
		d.F.Free(job, ar)
	}
	st.active, st.queued, st.lease, st.ps = false, false, false, false
	st.ended++
	out, err := d.Sched.PhaseEnd(now, job)
	if err != nil {
		d.fail(err)
	}
	if st.spec.AllReduces > 0 && st.ended >= st.spec.AllReduces {
		more, err := d.Sched.Unregister(now, job)
		if err != nil {
			d.fail(err)
		}
		out = append(out, more...)
		delete(d.jobs, job)
		d.stats.Unregistered++
	}
	return out
}

// ReportEnd is the out-of-band end of an all-reduce that held no lease (the
// PS sends no FREE for it), at now. Grants it causes are sent at the
// node's next event.
func (d *DynaINANode) ReportEnd(now time.Duration, job, ar uint16) {
	st := d.jobs[job]
	if st == nil || !st.active || st.ar != ar || st.lease || st.queued {
		return
	}
	d.pending = append(d.pending, d.endAt(now, job, ar)...)
}

// expireIdle frees leases idle for LeaseIdle (a lost FREE): the all-reduce
// is ended for the scheduler too.
func (d *DynaINANode) expireIdle(now time.Duration) {
	for _, l := range d.F.Leases() {
		if now-l.LastUse < d.F.cfg.LeaseIdle {
			continue
		}
		d.stats.IdleFrees++
		if st := d.jobs[l.Job]; st != nil && st.active && st.ar == l.AllReduce && st.lease {
			d.end(now, l.Job, l.AllReduce)
		} else {
			d.F.Free(l.Job, l.AllReduce)
		}
	}
}

// emit queues GRANT(l) (Slots 0: the PS path) for the job's group and PS.
func (d *DynaINANode) emit(l Lease) { d.out = append(d.out, l) }

// flush sends the queued GRANTs.
func (d *DynaINANode) flush(env *emu.Env) {
	for _, l := range d.take() {
		d.grant(env, l)
	}
}

func (d *DynaINANode) take() []Lease {
	out := d.out
	d.out = nil
	return out
}

// Alloc handles ALLOC(job, ar, chunks, want) at now and returns the GRANTs
// to send (to any job: none if the all-reduce is queued).
func (d *DynaINANode) Alloc(now time.Duration, job, ar uint16, chunks uint32, want int, exact bool) []Lease {
	d.F.SetNow(now)
	d.advance(now)
	d.alloc(now, job, ar, chunks, want, exact)
	return d.take()
}

// Free handles FREE(job, ar) at now and returns the GRANTs it causes.
func (d *DynaINANode) Free(now time.Duration, job, ar uint16) []Lease {
	d.advance(now)
	d.free(now, job, ar)
	return d.take()
}

// Advance registers the jobs arrived by now, expires overdue waits and idle
// leases and returns the GRANTs to send.
func (d *DynaINANode) Advance(now time.Duration) []Lease {
	d.advance(now)
	for _, dec := range d.Sched.Expire(now) {
		d.stats.Expired++
		d.apply(now, dec)
	}
	d.expireIdle(now)
	return d.take()
}

// JobPool returns the scheduler's pool of job (-1: none).
func (d *DynaINANode) JobPool(job uint16) int { return d.Sched.JobInfo(job).Pool }

// String describes the pools (for debugging and tests).
func (d *DynaINANode) String() string {
	s := ""
	for _, p := range d.Sched.Pools() {
		s += fmt.Sprintf("pool %d [%d,%d) jobs %v leased %v; ", p.ID, p.Range.Base, p.Range.End(), p.Jobs, p.Leased)
	}
	return s
}
