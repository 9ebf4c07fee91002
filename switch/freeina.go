package sw

import (
	"errors"
	"time"
)

// FreeINA's lease table (docs/freeina.md): leases of aggregators per
// all-reduce, granted on ALLOC, ended by FREE or an idle timeout. Its slot
// stage is in stage_freeina.go; the control planes that drive it are
// FreeINAControl (freeina_control.go) and DynaINAControl
// (dynaina_control.go).

// FreeINAConfig configures FreeINA's all-reduce-level allocation.
type FreeINAConfig struct {
	// PoolID is the pool leases are carved from; FreeINA jobs are installed
	// in it (JobSpec.PoolID) with PolicyID = the id FreeINA is registered
	// under. Leases count aggregators of the pool's stride.
	PoolID uint16
	// LeaseIdle frees a lease that saw no packet and no ALLOC for this long
	// (a lost FREE cannot leak memory); 0 means DefaultLeaseIdle.
	LeaseIdle time.Duration
	// MaxLease caps the aggregators of one lease; 0 means no cap.
	MaxLease int
}

// DefaultLeaseIdle is FreeINAConfig.LeaseIdle's default.
const DefaultLeaseIdle = 2 * time.Millisecond

// Lease is one all-reduce's memory: Slots aggregators from slot Base on
// (aggregator k at Base + k·Stride).
type Lease struct {
	Job, AllReduce uint16
	Base, Slots    int
	Chunks         uint32
	Granted        time.Duration
	LastUse        time.Duration
}

// FreeINAStats are the lease table's counters.
type FreeINAStats struct {
	Allocs, Grants, Partial, Zero, Regrants, Frees, Expired uint64
}

// FreeINA is the all-reduce-level lease table and the slot stage of its
// jobs (register it with RegisterStage under an id ≥ StageCustom): chunk c
// of an all-reduce holding a lease uses aggregator c mod the lease's size;
// without a lease the packet goes raw to the PS. Its methods take the
// switch's lock, except those of SlotStage, which run under it.
type FreeINA struct {
	s      *Switch
	cfg    FreeINAConfig
	pool   *Pool
	used   []bool // per aggregator of the pool
	leases map[uint32]*Lease
	// hot is the lease the last packet found (hotKey its key): a batch's
	// packets mostly belong to one all-reduce. Cleared whenever a lease
	// is installed or removed.
	hot    *Lease
	hotKey uint32
	now    time.Duration
	stats  FreeINAStats
}

// ErrFreeINAPool is returned by NewFreeINA for a pool the switch lacks.
var ErrFreeINAPool = errors.New("sw: FreeINA pool missing")

// NewFreeINA returns a lease table over pool cfg.PoolID of s.
func NewFreeINA(s *Switch, cfg FreeINAConfig) (*FreeINA, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	p := s.t.pools[cfg.PoolID]
	if p == nil {
		return nil, ErrFreeINAPool
	}
	if cfg.LeaseIdle == 0 {
		cfg.LeaseIdle = DefaultLeaseIdle
	}
	return &FreeINA{s: s, cfg: cfg, pool: p, used: make([]bool, p.Aggregators()),
		leases: map[uint32]*Lease{}}, nil
}

func leaseKey(job, ar uint16) uint32 { return uint32(job)<<16 | uint32(ar) }

// Config returns the configuration with defaults filled in.
func (f *FreeINA) Config() FreeINAConfig { return f.cfg }

// Aggregators returns the number of aggregators leases are carved from
// (the pool's).
func (f *FreeINA) Aggregators() int { return len(f.used) }

// SetNow tells the lease table the current time: a packet that uses a
// lease marks it used at the later of it and the switch's time, which a
// Node sets with each batch (lease idle accounting).
func (f *FreeINA) SetNow(now time.Duration) {
	f.s.mu.Lock()
	f.now = now
	f.s.mu.Unlock()
}

// Alloc handles ALLOC(job, ar, chunks, want): it is idempotent (an
// all-reduce that holds a lease gets the same lease again). want 0 means
// one slot per chunk. When memory is short the grant is the largest free
// run (partial), possibly 0 (the whole all-reduce takes the PS path).
func (f *FreeINA) Alloc(now time.Duration, job, ar uint16, chunks uint32, want int) Lease {
	return f.alloc(now, job, ar, chunks, want, false)
}

// AllocExact is Alloc for a re-ALLOC after the lease was lost (a reboot):
// the hosts' plan assumes exactly want aggregators, so the grant is want
// or nothing.
func (f *FreeINA) AllocExact(now time.Duration, job, ar uint16, chunks uint32, want int) Lease {
	return f.alloc(now, job, ar, chunks, want, true)
}

func (f *FreeINA) alloc(now time.Duration, job, ar uint16, chunks uint32, want int, exact bool) Lease {
	f.s.mu.Lock()
	defer f.s.mu.Unlock()
	f.stats.Allocs++
	if l := f.leases[leaseKey(job, ar)]; l != nil {
		f.stats.Regrants++
		l.LastUse = now
		return *l
	}
	if want <= 0 || uint32(want) > chunks {
		want = int(min(chunks, uint32(len(f.used))))
	}
	if f.cfg.MaxLease > 0 && want > f.cfg.MaxLease {
		want = f.cfg.MaxLease
	}
	bestAt, bestN := firstFit(f.used, want)
	if exact && bestN < want {
		bestN = 0
	}
	l := &Lease{Job: job, AllReduce: ar, Base: f.pool.Base + bestAt*f.pool.Stride, Slots: bestN, Chunks: chunks, Granted: now, LastUse: now}
	switch {
	case bestN == 0:
		f.stats.Zero++
		return *l // not installed: nothing to free
	case bestN < want:
		f.stats.Partial++
	}
	f.stats.Grants++
	f.take(l, bestAt)
	return *l
}

// Install leases n aggregators from aggregator first (counted from the
// pool's first) to all-reduce (job, ar) of chunks chunks at now, if they
// lie in the pool and are all free, and reports whether it did (counted
// as an ALLOC granted). It is how a control plane that decides placement
// itself (DynaINA's scheduler) puts its lease in the table; (job, ar) must
// hold no lease. The lease's registers are reset.
func (f *FreeINA) Install(now time.Duration, job, ar uint16, chunks uint32, first, n int) (Lease, bool) {
	f.s.mu.Lock()
	defer f.s.mu.Unlock()
	if n <= 0 || first < 0 || first+n > len(f.used) {
		return Lease{}, false
	}
	for i := first; i < first+n; i++ {
		if f.used[i] {
			return Lease{}, false
		}
	}
	f.stats.Allocs++
	f.stats.Grants++
	l := &Lease{Job: job, AllReduce: ar, Base: f.pool.Base + first*f.pool.Stride, Slots: n, Chunks: chunks, Granted: now, LastUse: now}
	f.take(l, first)
	return *l, true
}

// take installs l over its aggregators from first on and resets their
// registers.
func (f *FreeINA) take(l *Lease, first int) {
	for i := first; i < first+l.Slots; i++ {
		f.used[i] = true
	}
	f.s.resetSlotsLocked(l.Base, l.Slots*f.pool.Stride)
	f.leases[leaseKey(l.Job, l.AllReduce)] = l
	f.hot = nil
}

// lease returns the lease of tag's all-reduce, or nil, for the data path.
func (f *FreeINA) lease(tag Tag) *Lease {
	k := leaseKey(tag.Job(), tag.AllReduce())
	if f.hot != nil && f.hotKey == k {
		return f.hot
	}
	l := f.leases[k]
	if l != nil {
		f.hot, f.hotKey = l, k
	}
	return l
}

// Renew returns the lease of (job, ar), if it has one, marked used at now
// (an ALLOC for it keeps it from expiring).
func (f *FreeINA) Renew(now time.Duration, job, ar uint16) (Lease, bool) {
	f.s.mu.Lock()
	defer f.s.mu.Unlock()
	l := f.leases[leaseKey(job, ar)]
	if l == nil {
		return Lease{}, false
	}
	l.LastUse = now
	return *l, true
}

// Free ends the lease of (job, ar); it reports whether there was one.
func (f *FreeINA) Free(job, ar uint16) bool {
	f.s.mu.Lock()
	defer f.s.mu.Unlock()
	l := f.leases[leaseKey(job, ar)]
	if l == nil {
		return false
	}
	f.release(l)
	f.stats.Frees++
	return true
}

func (f *FreeINA) release(l *Lease) {
	delete(f.leases, leaseKey(l.Job, l.AllReduce))
	f.hot = nil
	first := (l.Base - f.pool.Base) / f.pool.Stride
	for i := first; i < first+l.Slots; i++ {
		f.used[i] = false
	}
	f.s.resetSlotsLocked(l.Base, l.Slots*f.pool.Stride)
}

// Expire frees every lease idle for LeaseIdle at now and returns how many.
func (f *FreeINA) Expire(now time.Duration) int {
	f.s.mu.Lock()
	defer f.s.mu.Unlock()
	n := 0
	for _, l := range f.sortedLeases() {
		if now-l.LastUse >= f.cfg.LeaseIdle {
			f.release(l)
			f.stats.Expired++
			n++
		}
	}
	return n
}

// Idle returns the leases idle for LeaseIdle at now (those Expire would
// free), in (job, all-reduce) order.
func (f *FreeINA) Idle(now time.Duration) []Lease {
	f.s.mu.Lock()
	defer f.s.mu.Unlock()
	var out []Lease
	for _, l := range f.sortedLeases() {
		if now-l.LastUse >= f.cfg.LeaseIdle {
			out = append(out, *l)
		}
	}
	return out
}

// sortedLeases returns the leases in key order (determinism).
func (f *FreeINA) sortedLeases() []*Lease {
	ls := make([]*Lease, 0, len(f.leases))
	for _, l := range f.leases {
		ls = append(ls, l)
	}
	for i := 1; i < len(ls); i++ {
		for k := i; k > 0 && leaseKey(ls[k].Job, ls[k].AllReduce) < leaseKey(ls[k-1].Job, ls[k-1].AllReduce); k-- {
			ls[k], ls[k-1] = ls[k-1], ls[k]
		}
	}
	return ls
}

// Leases returns a copy of the active leases, in (job, all-reduce) order.
func (f *FreeINA) Leases() []Lease {
	f.s.mu.Lock()
	defer f.s.mu.Unlock()
	var out []Lease
	for _, l := range f.sortedLeases() {
		out = append(out, *l)
	}
	return out
}

// HasLeases reports whether any lease is active.
func (f *FreeINA) HasLeases() bool {
	f.s.mu.Lock()
	defer f.s.mu.Unlock()
	return len(f.leases) > 0
}

// Stats returns the lease table's counters.
func (f *FreeINA) Stats() FreeINAStats {
	f.s.mu.Lock()
	defer f.s.mu.Unlock()
	return f.stats
}

// Reset forgets every lease: the switch rebooted (Node.Reset, which also
// resets the registers).
func (f *FreeINA) Reset() {
	f.s.mu.Lock()
	defer f.s.mu.Unlock()
	f.leases = map[uint32]*Lease{}
	f.hot = nil
	clear(f.used)
}

// firstFit returns the first run of at least want free aggregators in
// used, as (its start, want), else the longest free run (its start and
// length); (0, 0) when want ≤ 0 or nothing is free.
func firstFit(used []bool, want int) (at, n int) {
	if want <= 0 {
		return 0, 0
	}
	for i := 0; i < len(used); {
		if used[i] {
			i++
			continue
		}
		k := i
		for k < len(used) && !used[k] && k-i < want {
			k++
		}
		if k-i > n {
			at, n = i, k-i
		}
		if n == want {
			break
		}
		i = k + 1
	}
	return at, n
}
