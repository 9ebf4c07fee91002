package sw

import (
	"encoding/binary"
	"errors"
	"time"

	"github.com/inabox/inabox/rdma"
	"github.com/inabox/inabox/switch/inahdr"
)

// FreeINA mode (docs/freeina.md).
//
// A job installed with JobSpec.FreeINA sends every contribution as an RC
// SEND Only on its worker's QP to the parameter server; the switch sits on
// the path. For such a job the slot stage:
//
//   - adds a new contribution into the leased aggregator and forwards the
//     packet to the PS trimmed (same RC headers and PSN, payload = the INA
//     header with Count 0 and FlagCtl: "absorbed by the switch");
//   - sends the completing contribution to the PS with the full sum
//     (FlagResult) and multicasts it to the job's group as UC SEND Only
//     frames (EgressUC), PSN = chunk & 0xFFFFFF;
//   - forwards a retransmission of a counted contribution trimmed, or, if
//     the aggregator holds that chunk's completed result, with the result;
//   - forwards anything without an aggregator (no lease, or the aggregator
//     belongs to a newer chunk) raw to the PS, marked FlagCollision.
//
// The RC connection worker↔PS therefore sees every PSN: RC is never broken.
//
// A contribution that arrives as a UC SEND Only (opcode 0x24, the hosts'
// "uc" INA path) is a best-effort datagram with no PSN to keep: the slot
// stage then drops what it absorbs (and a retransmission of a counted,
// incomplete contribution), multicasts the completing one to the group
// only, and sends a retransmission that finds its chunk complete back to
// its sender with the result. Without an aggregator it is still forwarded
// raw to the PS (FlagCollision), which finishes the chunk.

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

// freeINASlotMeta is the slot stage of a FreeINA job.
func (s *Switch) freeINASlotMeta(f *Frame, m *pmeta, h inahdr.Header) {
	j := m.job
	r := &s.r
	pool := j.Pool
	if m.passes > pool.Stride || h.Has(inahdr.FlagOverflow) {
		s.collide(m, j)
		return
	}
	head, ok := j.policy.Locate(j, m.tag)
	if !ok || head < pool.Base || head+pool.Stride > pool.Base+pool.Slots {
		s.collide(m, j)
		return
	}
	m.head = head
	bit := uint32(1) << m.worker
	own, st := r.owner[head], r.state[head]
	uc := f.Data[offBTH] == 0x24
	switch {
	case own == m.tag && st == StateClaimed:
		if r.bitmap[head]&bit != 0 { // counted already: trimmed again
			m.emit, m.port, m.reason, m.trim, m.setFl = emPort, j.PSPort, ReasonDuplicate, true, FlagCtl
			if uc { // UC: nothing to acknowledge, drop it
				m.emit, m.trim, m.setFl = emDrop, false, 0
			}
			j.stats.Duplicates++
			return
		}
		r.bitmap[head] |= bit
		r.count[head]++
		if e := h.Exponent(); e > r.exp[head] {
			r.exp[head] = e
		}
		m.op = opAdd
	case own == m.tag: // complete: the retransmission carries the result
		m.op, m.readout = opRead, true
		m.emit, m.port, m.reason = emPort, j.PSPort, ReasonResent
		if uc { // UC: the stored result back to the sender (its UC QP)
			m.emit, m.port = emBack, f.InPort
		}
		m.setFl, m.bitmap, m.exp, m.ovf = inahdr.FlagResult, r.bitmap[head], r.exp[head], r.ovf[head] != 0
		m.outTag = m.tag
		j.stats.Resent++
		return
	case st == StateFree:
		s.claim(m, j, head, h, false)
		pool.stats.Claims++
	case own.Job() == m.tag.Job() && (own.AllReduce() != m.tag.AllReduce() || own.Chunk() < m.tag.Chunk()):
		// SwitchML-style reuse: the slot's previous chunk (or a previous
		// all-reduce's leftover) gives way to a newer chunk. If it was not
		// complete, its missing contributions now go raw to the PS, which
		// finishes it (pull); nothing is counted twice.
		s.claim(m, j, head, h, false)
		pool.stats.Reclaims++
	default:
		s.collide(m, j)
		return
	}
	if r.bitmap[head] == j.Mask {
		m.readout = true
		m.bitmap, m.exp, m.outTag = r.bitmap[head], r.exp[head], m.tag
		m.setFl = inahdr.FlagResult
		m.reason = ReasonResult
		m.emit, m.port = emFwdMcast, j.PSPort
		if uc { // UC: the workers only; the PS never sees the chunk
			m.emit = emMcast
		}
		j.stats.Results++
		pool.stats.Completions++
		s.setState(head, StateComplete)
		if o, ok := j.policy.(CompletionObserver); ok {
			o.Completed(j, m.tag, head)
		}
		return
	}
	m.emit, m.port, m.reason, m.trim, m.setFl = emPort, j.PSPort, ReasonAbsorbed, true, FlagCtl
	if uc { // UC: absorbed means consumed
		m.emit, m.trim, m.setFl = emDrop, false, 0
	}
	j.stats.Absorbed++
}

// trimFrame cuts a RoCEv2 frame after the INA header at offset ina: Count
// becomes 0, the pad 0, and the IPv4 total length, UDP length and IPv4
// checksum are fixed. The caller recomputes the ICRC.
func trimFrame(d []byte, ina int) []byte {
	n := ina + inahdr.Len + rdma.ICRCLen
	if n > len(d) {
		return d
	}
	d = d[:n]
	inahdr.Header(d[ina:]).SetCount(0)
	d[offBTH+1] &^= 0x30 // pad count 0 (the INA header is 4-byte aligned)
	binary.BigEndian.PutUint16(d[offIP+2:], uint16(n-offIP))
	binary.BigEndian.PutUint16(d[offUDP+4:], uint16(n-offUDP))
	ipChecksum(d[offIP : offIP+20])
	return d
}

// EgressUC finishes one replica of an ActForwardMulticast frame for member
// m: the egress rewrite of m.RID (addresses, destination QP), the RC opcode
// turned into its UC twin (SEND Only → UC SEND Only), PSN = chunk &
// 0xFFFFFF (a UC responder accepts an Only packet whatever the PSN gap),
// AckReq cleared, IPv4 checksum and ICRC fixed.
func (s *Switch) EgressUC(frame []byte, m McastMember) {
	s.mu.Lock()
	rw := s.t.rewrites[m.RID]
	s.countTx(m.Port, len(frame))
	s.mu.Unlock()
	if len(frame) < minRoCE {
		return
	}
	if rw != nil {
		applyRewrite(frame, rw)
	}
	bth := rdma.BTH(frame[offBTH:])
	bth.SetOpcode(rdma.Opcode(byte(bth.Opcode())&0x1F | 0x20))
	bth.SetAckReq(false)
	if ina := offBTH + inaExt(frame[offBTH]); ina >= offBTH && ina+inahdr.Len <= len(frame) {
		bth.SetPSN(inahdr.Header(frame[ina:]).Chunk() & 0xFFFFFF)
	}
	_ = rdma.SetICRC(frame)
}

// FreeINAConfig configures FreeINA's all-reduce-level allocation.
type FreeINAConfig struct {
	// PoolID is the pool leases are carved from; FreeINA jobs are installed
	// in it (JobSpec.PoolID) with PolicyID = the id FreeINA is registered
	// under and FreeINA = true. Leases count aggregators of the pool's
	// stride.
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

// FreeINA is the all-reduce-level allocator: a Policy (register it with
// RegisterPolicy under an id ≥ PolicyCustom) whose Locate maps chunk c of
// an all-reduce holding a lease to Base + c mod Slots, and returns ok=false
// without a lease (the packet goes raw to the PS).
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

// Name implements Policy.
func (f *FreeINA) Name() string { return "freeina" }

// Locate implements Policy: the all-reduce's lease, or ok=false.
func (f *FreeINA) Locate(j *Job, tag Tag) (int, bool) {
	l := f.leases[leaseKey(tag.Job(), tag.AllReduce())]
	if l == nil || l.Slots == 0 {
		return 0, false
	}
	l.LastUse = f.now
	return l.Base + int(tag.Chunk()%uint32(l.Slots))*f.pool.Stride, true
}

// Contend implements Policy (unused by the FreeINA slot stage, which
// decides reuse itself).
func (f *FreeINA) Contend(j *Job, cur Occupant) Verdict { return Collide }

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

// resetSlotsLocked is ResetSlots with s.mu held.
func (s *Switch) resetSlotsLocked(base, n int) {
	for i := base; i < base+n && i < s.cfg.Slots; i++ {
		if i < 0 {
			continue
		}
		s.setState(i, StateFree)
		s.r.owner[i], s.r.bitmap[i], s.r.count[i], s.r.ovf[i] = 0, 0, 0, 0
	}
}
