package sw

import (
	"errors"
	"time"

	"github.com/inabox/inabox/rdma"
)

// FreeINA's allocator and control plane (docs/freeina.md): leases of
// aggregators per all-reduce, granted on ALLOC, ended by FREE or an idle
// timeout. Its slot stage is in stage_freeina.go, the node that speaks the
// control protocol in freeina_node.go.

// FlagCtl marks FreeINA metadata. Alone, on a Count-0 header travelling
// the RC path to the PS, it means "absorbed by the switch" (a trimmed
// contribution). With FlagBypass it is a control message whose opcode is
// in the worker byte (CtlAlloc, CtlGrant, CtlFree, and host-level opcodes
// ≥ CtlHost).
const FlagCtl = 0x80

// Control opcodes (INA header worker byte of a FlagCtl|FlagBypass message).
// Parameters: Job and AllReduce as usual; ALLOC: Slot = aggregators wanted
// (0: as many as chunks), Bitmap = chunks in the all-reduce, Exponent =
// CtlExact for all-or-nothing; GRANT: Slot = aggregators granted, Chunk =
// first slot, Bitmap = chunks; FREE: none.
const (
	CtlAlloc = 1
	CtlGrant = 2
	CtlFree  = 3
	// CtlHost is the first opcode free for host-to-host messages.
	CtlHost = 16
	// CtlExact in an ALLOC's exponent byte asks for exactly Slot
	// aggregators or none (a re-ALLOC after a reboot).
	CtlExact = 1
)

// DefaultCtlQPN is the destination QP number of control frames addressed
// to the switch's control plane.
const DefaultCtlQPN = 0xC7C7C7

// FreeINAConfig configures FreeINA's all-reduce-level allocation.
type FreeINAConfig struct {
	// PoolID is the pool leases are carved from; FreeINA jobs are installed
	// in it (JobSpec.PoolID) with PolicyID = the id FreeINA is registered
	// under. Leases count aggregators of the pool's stride.
	PoolID uint16
	// CtlQPN is the destination QP of control frames for the switch;
	// 0 means DefaultCtlQPN.
	CtlQPN uint32
	// LeaseIdle frees a lease that saw no packet and no ALLOC for this long
	// (a lost FREE cannot leak memory); 0 means 2 ms.
	LeaseIdle time.Duration
	// MaxLease caps the aggregators of one lease; 0 means no cap.
	MaxLease int
	// Addr is the source address of GRANT frames (the switch's own).
	Addr rdma.Endpoint
}

// FreeINAJob tells FreeINA where a job's GRANTs go: every member of the
// job's multicast group (rewrite per member) and its PS (rewrite PSRID,
// out of PSPort).
type FreeINAJob struct {
	Job    uint16
	PSPort int
	PSRID  uint16
}

// Lease is one all-reduce's memory: Slots aggregators from slot Base on
// (aggregator k at Base + k·Stride).
type Lease struct {
	Job, AllReduce uint16
	Base, Slots    int
	Chunks         uint32
	Granted        time.Duration
	LastUse        time.Duration
}

// FreeINAStats are the allocator's counters.
type FreeINAStats struct {
	Allocs, Grants, Partial, Zero, Regrants, Frees, Expired, Reboots uint64
	CtlBad                                                           uint64
}

// FreeINA is the all-reduce-level allocator and the slot stage of its jobs
// (register it with RegisterStage under an id ≥ StageCustom): chunk c of an
// all-reduce holding a lease uses aggregator c mod the lease's size;
// without a lease the packet goes raw to the PS.
type FreeINA struct {
	s      *Switch
	cfg    FreeINAConfig
	pool   *Pool
	used   []bool // per aggregator of the pool
	leases map[uint32]*Lease
	jobs   map[uint16]FreeINAJob
	now    time.Duration
	stats  FreeINAStats
}

// Errors of the FreeINA control plane.
var ErrFreeINAPool = errors.New("sw: FreeINA pool missing")

// NewFreeINA returns an allocator over pool cfg.PoolID of s.
func NewFreeINA(s *Switch, cfg FreeINAConfig) (*FreeINA, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	p := s.t.pools[cfg.PoolID]
	if p == nil {
		return nil, ErrFreeINAPool
	}
	if cfg.CtlQPN == 0 {
		cfg.CtlQPN = DefaultCtlQPN
	}
	if cfg.LeaseIdle == 0 {
		cfg.LeaseIdle = 2 * time.Millisecond
	}
	return &FreeINA{s: s, cfg: cfg, pool: p, used: make([]bool, p.Aggregators()),
		leases: map[uint32]*Lease{}, jobs: map[uint16]FreeINAJob{}}, nil
}

func leaseKey(job, ar uint16) uint32 { return uint32(job)<<16 | uint32(ar) }

// Config returns the configuration with defaults filled in.
func (f *FreeINA) Config() FreeINAConfig { return f.cfg }

// AddJob registers where a job's GRANTs go.
func (f *FreeINA) AddJob(j FreeINAJob) {
	f.s.mu.Lock()
	defer f.s.mu.Unlock()
	f.jobs[j.Job] = j
}

// SetNow tells the allocator the current time (lease idle accounting).
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
	// first fit, else the largest free run
	bestAt, bestN := 0, 0
	for i := 0; i < len(f.used); {
		if f.used[i] {
			i++
			continue
		}
		k := i
		for k < len(f.used) && !f.used[k] && k-i < want {
			k++
		}
		if k-i > bestN {
			bestAt, bestN = i, k-i
		}
		if bestN == want {
			break
		}
		i = k + 1
	}
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
	for i := bestAt; i < bestAt+bestN; i++ {
		f.used[i] = true
	}
	f.s.resetSlotsLocked(l.Base, l.Slots*f.pool.Stride)
	f.leases[leaseKey(job, ar)] = l
	return *l
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

// Stats returns the allocator's counters.
func (f *FreeINA) Stats() FreeINAStats {
	f.s.mu.Lock()
	defer f.s.mu.Unlock()
	return f.stats
}

// Reboot models a switch reboot: every lease and every register of the
// pool is lost.
func (f *FreeINA) Reboot() {
	f.s.mu.Lock()
	defer f.s.mu.Unlock()
	f.leases = map[uint32]*Lease{}
	clear(f.used)
	f.s.resetSlotsLocked(0, f.s.cfg.Slots)
	f.stats.Reboots++
}
