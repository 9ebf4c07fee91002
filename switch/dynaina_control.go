package sw

import (
	"fmt"
	"slices"
	"time"

	"github.com/inabox/inabox/switch/dynaina"
	"github.com/inabox/inabox/switch/inahdr"
)

// DynaINA behind FreeINA's all-reduce-level leases (docs/dynaina.md).
//
// DynaINAControl is a control plane over a FreeINA lease table whose
// ALLOCs are decided by the DynaINA scheduler: an ALLOC is the job's
// all-reduce start (dynaina PhaseStart), a FREE its end (PhaseEnd), and
// the scheduler's decision becomes the GRANT:
//
//   - Grant(range): a lease over the job's pool (range ∩ chunks), installed
//     in the lease table exactly where the scheduler put it
//     (FreeINA.Install), so every grant is inside the job's pool, or, with
//     dynaina.Config.Lend, inside the loan the scheduler recorded for the
//     job's all-reduce out of another, idle pool;
//   - Queue: no answer yet (the PS keeps re-sending its ALLOC, which is
//     idempotent); the GRANT is sent when the holder's PhaseEnd hands the
//     pool over, or a GRANT of 0 when Expire turns the wait into the PS path;
//   - PSPath: a GRANT of 0 (the whole all-reduce on the PS path).
//
// The switch knows a job only once the cluster manager has registered it
// (Register, at the job's arrival); it is unregistered when its last
// all-reduce has ended. The PS sends FREE at the end of every all-reduce,
// also one planned entirely on the PS path (host.PSConfig.FreeEvery); a
// lost FREE is made good by the job's next ALLOC, which ends the previous
// all-reduce first. The FreeINA workers run unchanged.

// DynaINAStats are the control plane's counters.
type DynaINAStats struct {
	Allocs, Grants, Queued, PSPath, Expired, Frees, IdleFrees, Registered, Unregistered uint64
	// Loans counts the grants (included in Grants) installed over a loan:
	// slots of another job's idle pool lent for one all-reduce
	// (dynaina.Config.Lend).
	Loans uint64
	// Outside counts grants that would have fallen outside both the job's
	// pool and its recorded loan, or onto slots in use (refused; must stay
	// 0).
	Outside uint64
}

// DynaINAControl is the switch's control plane under DynaINA. Its methods
// run on the emulator's goroutine: in the node's callbacks, in
// emu.Network.At callbacks (the cluster manager's Register) or
// before the run. Scheduler decisions made outside a node callback are
// sent at the node's next callback.
type DynaINAControl struct {
	f      *FreeINA
	sched  *dynaina.Scheduler
	grants grants
	idle   leaseTimer

	jobs     map[uint16]*dynState
	states   []*dynState        // jobs' values, for the per-callback scan (a map's range draws a random start)
	pending  []dynaina.Decision // decisions made outside a callback, applied at the next one
	out      []Lease            // GRANTs to send
	stats    DynaINAStats
	expireAt time.Duration // armed queue-expiry timer, -1 none
	err      error
}

type dynState struct {
	allReduces int    // after this many all-reduces the job leaves (0: never)
	ar         uint16 // current all-reduce
	active     bool   // ar started and not ended
	queued     bool
	lease      bool // ar holds a lease
	ps         bool // ar decided PS path
	chunks     uint32
	ended      int
	rng        dynaina.Range
}

// Control-plane timer keys of DynaINAControl.
const (
	dynaLeaseTimer  = 1
	dynaExpireTimer = 2
)

var _ ControlPlane = (*DynaINAControl)(nil)

// NewDynaINAControl returns DynaINA's control plane over lease table f:
// cfg.TotalSlots is set to f's aggregators (the scheduler's slots are the
// pool's aggregators).
func NewDynaINAControl(f *FreeINA, cfg dynaina.Config) (*DynaINAControl, error) {
	cfg.TotalSlots = f.Aggregators()
	s, err := dynaina.New(cfg)
	if err != nil {
		return nil, err
	}
	return &DynaINAControl{f: f, sched: s, grants: grants{}, idle: leaseTimer{key: dynaLeaseTimer},
		jobs: map[uint16]*dynState{}, expireAt: -1}, nil
}

// AddJob registers where job j's GRANTs go.
func (d *DynaINAControl) AddJob(j FreeINAJob) { d.grants[j.Job] = j }

// Register is the cluster manager's registration of a job at now: its
// profile, and how many all-reduces it performs (after the last one ends
// the job is unregistered; 0: never). An ALLOC of a job not registered
// takes the PS path. An error (a bad profile, a job registered twice) is
// also kept for Err.
func (d *DynaINAControl) Register(now time.Duration, p dynaina.JobProfile, allReduces int) error {
	if _, err := d.sched.Register(now, p); err != nil {
		d.fail(err)
		return err
	}
	st := &dynState{allReduces: allReduces}
	d.jobs[p.ID] = st
	d.states = append(d.states, st)
	d.stats.Registered++
	return nil
}

// Scheduler returns the DynaINA scheduler (read-only use: Pools,
// JobInfo, FreeSlots).
func (d *DynaINAControl) Scheduler() *dynaina.Scheduler { return d.sched }

// Stats returns the control plane's counters.
func (d *DynaINAControl) Stats() DynaINAStats { return d.stats }

// Err returns the first scheduler error (an invariant broken), or nil.
func (d *DynaINAControl) Err() error {
	if d.err != nil {
		return d.err
	}
	return d.sched.Check()
}

// Start implements ControlPlane: the crash cancelled the timers.
func (d *DynaINAControl) Start(c *CtlEnv) {
	// (after a crash every timer is gone; Settle re-arms what is needed)
	d.expireAt, d.idle.armed = -1, false
}

// Frames implements ControlPlane: the decisions made since the last
// callback are sent. (A packet that uses a lease marks it used at the time
// the Node gives the switch with each batch.)
func (d *DynaINAControl) Frames(c *CtlEnv) { d.events(c) }

// Control implements ControlPlane: ALLOC and FREE go to the scheduler.
func (d *DynaINAControl) Control(c *CtlEnv, port int, m inahdr.Ctl) {
	switch m.Op {
	case inahdr.CtlAlloc:
		d.alloc(c.Now(), m.Job, m.AllReduce, m.Chunks, m.Want, m.Exact)
	case inahdr.CtlFree:
		d.free(c.Now(), m.Job, m.AllReduce)
	}
}

// Timer implements ControlPlane: overdue waits and idle leases expire.
func (d *DynaINAControl) Timer(c *CtlEnv, key uint64) {
	now := c.Now()
	switch key {
	case dynaExpireTimer:
		d.expireAt = -1
		for _, dec := range d.sched.Expire(now) {
			d.stats.Expired++
			d.apply(now, dec)
		}
	case dynaLeaseTimer:
		d.idle.armed = false
		d.expireIdle(now)
	}
}

// Settle implements ControlPlane: pending decisions are applied, GRANTs
// sent and timers armed.
func (d *DynaINAControl) Settle(c *CtlEnv) {
	d.events(c)
	d.idle.arm(c, d.f)
}

// Reset implements ControlPlane: the data plane's leases are lost; the
// scheduler's state lives in the control plane and survives. A lost lease
// is re-installed by the PS's exact re-ALLOC.
func (d *DynaINAControl) Reset() {
	d.f.Reset()
	d.idle.armed = false
}

// events applies pending decisions, sends the GRANTs and arms the
// queue-expiry timer.
func (d *DynaINAControl) events(c *CtlEnv) {
	now := c.Now()
	d.advance(now)
	for _, l := range d.take() {
		d.grants.send(c, l)
	}
	queued := false
	for _, st := range d.states {
		queued = queued || st.queued
	}
	if !queued {
		return
	}
	// Expire decides at the scheduler's own deadline; poll at the RTT
	// granularity of the scheduler's deadline formula.
	if next := now + 50*time.Microsecond; d.expireAt < 0 || d.expireAt > next {
		d.expireAt = next
		c.SetTimer(next, dynaExpireTimer)
	}
}

// advance applies the pending decisions.
func (d *DynaINAControl) advance(now time.Duration) {
	for len(d.pending) > 0 {
		dec := d.pending[0]
		d.pending = d.pending[1:]
		d.apply(now, dec)
	}
}

func (d *DynaINAControl) fail(err error) {
	if d.err == nil {
		d.err = err
	}
}

func (d *DynaINAControl) alloc(now time.Duration, job, ar uint16, chunks uint32, want int, exact bool) {
	d.stats.Allocs++
	st := d.jobs[job]
	if st == nil { // not registered (yet): the PS path
		d.emit(Lease{Job: job, AllReduce: ar, Chunks: chunks})
		return
	}
	if st.active && st.ar == ar {
		switch {
		case st.lease:
			l, ok := d.f.Renew(now, job, ar)
			if !ok { // lost in a reboot: re-install over the same range
				if li, ok := d.install(now, job, ar, chunks, st.rng); ok && (!exact || li.Slots == want) {
					d.emit(li)
				} else {
					if ok {
						d.f.Free(job, ar)
					}
					d.emit(Lease{Job: job, AllReduce: ar, Chunks: chunks})
				}
				return
			}
			d.emit(l)
		case st.ps:
			d.emit(Lease{Job: job, AllReduce: ar, Chunks: chunks})
		}
		return // queued: the answer comes with the grant
	}
	if exact {
		// A PS asks again for the lease of an all-reduce it planned, which
		// the scheduler has ended (its lease idled out) or never knew: it
		// is not begun anew (that would end it twice), and no lease.
		d.emit(Lease{Job: job, AllReduce: ar, Chunks: chunks})
		return
	}
	if st.active { // the previous all-reduce's end was not reported
		d.end(now, job, st.ar)
		if st = d.jobs[job]; st == nil { // that was its last: gone
			d.emit(Lease{Job: job, AllReduce: ar, Chunks: chunks})
			return
		}
	}
	st.ar, st.active, st.queued, st.lease, st.ps, st.chunks = ar, true, false, false, false, chunks
	dec, err := d.sched.PhaseStart(now, job, uint32(ar))
	if err != nil {
		d.fail(err)
		st.ps = true
		d.emit(Lease{Job: job, AllReduce: ar, Chunks: chunks})
		return
	}
	d.apply(now, dec)
}

// apply carries out one scheduler decision.
func (d *DynaINAControl) apply(now time.Duration, dec dynaina.Decision) {
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
			if dec.Lender != 0 {
				d.stats.Loans++
			}
			d.emit(l)
			return
		}
		// Not installable (must not happen): give the pool back, PS path.
		d.stats.Outside++
		st.ps = true
		out, _ := d.sched.PhaseEnd(now, dec.Job)
		d.pending = append(d.pending, out...)
		d.emit(Lease{Job: dec.Job, AllReduce: st.ar, Chunks: st.chunks})
	case dynaina.PSPath:
		st.queued, st.ps = false, true
		d.stats.PSPath++
		d.emit(Lease{Job: dec.Job, AllReduce: st.ar, Chunks: st.chunks})
	}
}

// install puts a lease over r (clipped to the all-reduce's chunks) into the
// lease table. It refuses a range outside both the job's pool and the loan
// its all-reduce holds, or over aggregators in use.
func (d *DynaINAControl) install(now time.Duration, job, ar uint16, chunks uint32, r dynaina.Range) (Lease, bool) {
	info := d.sched.JobInfo(job)
	inPool := false
	for _, p := range d.sched.Pools() {
		if p.ID == info.Pool && rangeWithin(r, p.Range) {
			inPool = true
		}
	}
	if ln, ok := d.sched.LoanOf(job); ok && rangeWithin(r, ln.Range) {
		inPool = true
	}
	if !inPool {
		return Lease{}, false
	}
	n := min(r.Slots, int(min(chunks, uint32(d.f.Aggregators()))))
	return d.f.Install(now, job, ar, chunks, r.Base, n)
}

// rangeWithin reports whether r is a non-empty part of p.
func rangeWithin(r, p dynaina.Range) bool {
	return r.Slots > 0 && r.Base >= p.Base && r.End() <= p.End()
}

func (d *DynaINAControl) free(now time.Duration, job, ar uint16) {
	d.stats.Frees++
	st := d.jobs[job]
	if st == nil || !st.active || st.ar != ar {
		d.f.Free(job, ar) // a stale lease, if any
		return
	}
	d.end(now, job, ar)
}

// end finishes the job's current all-reduce: its lease (if any) is freed and
// the scheduler told; the grants this makes are applied.
func (d *DynaINAControl) end(now time.Duration, job, ar uint16) {
	out := d.endAt(now, job, ar)
	for _, dec := range out {
		d.apply(now, dec)
	}
}

func (d *DynaINAControl) endAt(now time.Duration, job, ar uint16) []dynaina.Decision {
	st := d.jobs[job]
	if st == nil || !st.active || st.ar != ar {
		return nil
	}
	if st.lease {
		d.f.Free(job, ar)
	}
	st.active, st.queued, st.lease, st.ps = false, false, false, false
	st.ended++
	out, err := d.sched.PhaseEnd(now, job)
	if err != nil {
		d.fail(err)
	}
	if st.allReduces > 0 && st.ended >= st.allReduces {
		more, err := d.sched.Unregister(now, job)
		if err != nil {
			d.fail(err)
		}
		out = append(out, more...)
		delete(d.jobs, job)
		d.states = slices.DeleteFunc(d.states, func(x *dynState) bool { return x == st })
		d.stats.Unregistered++
	}
	return out
}

// expireIdle frees leases idle for LeaseIdle (a lost FREE): the all-reduce
// is ended for the scheduler too.
func (d *DynaINAControl) expireIdle(now time.Duration) {
	for _, l := range d.f.Idle(now) {
		d.stats.IdleFrees++
		if st := d.jobs[l.Job]; st != nil && st.active && st.ar == l.AllReduce && st.lease {
			d.end(now, l.Job, l.AllReduce)
		} else {
			d.f.Free(l.Job, l.AllReduce)
		}
	}
}

// emit queues GRANT(l) (Slots 0: the PS path) for the job's group and PS.
func (d *DynaINAControl) emit(l Lease) { d.out = append(d.out, l) }

func (d *DynaINAControl) take() []Lease {
	out := d.out
	d.out = nil
	return out
}

// Alloc handles ALLOC(job, ar, chunks, want) at now without a node and
// returns the GRANTs to send (to any job: none if the all-reduce is
// queued).
func (d *DynaINAControl) Alloc(now time.Duration, job, ar uint16, chunks uint32, want int, exact bool) []Lease {
	d.f.SetNow(now)
	d.advance(now)
	d.alloc(now, job, ar, chunks, want, exact)
	return d.take()
}

// Free handles FREE(job, ar) at now without a node and returns the GRANTs
// it causes.
func (d *DynaINAControl) Free(now time.Duration, job, ar uint16) []Lease {
	d.advance(now)
	d.free(now, job, ar)
	return d.take()
}

// Advance applies pending decisions, expires overdue waits and idle
// leases at now without a node and returns the GRANTs to send.
func (d *DynaINAControl) Advance(now time.Duration) []Lease {
	d.advance(now)
	for _, dec := range d.sched.Expire(now) {
		d.stats.Expired++
		d.apply(now, dec)
	}
	d.expireIdle(now)
	return d.take()
}

// JobPool returns the scheduler's pool of job (-1: none).
func (d *DynaINAControl) JobPool(job uint16) int { return d.sched.JobInfo(job).Pool }

// String describes the pools (for debugging and tests).
func (d *DynaINAControl) String() string {
	s := ""
	for _, p := range d.sched.Pools() {
		s += fmt.Sprintf("pool %d [%d,%d) jobs %v leased %v; ", p.ID, p.Range.Base, p.Range.End(), p.Jobs, p.Leased)
	}
	return s
}
