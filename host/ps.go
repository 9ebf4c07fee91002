package host

import (
	"encoding/binary"
	"maps"
	"slices"
	"time"

	"github.com/inabox/inabox/emu"
	"github.com/inabox/inabox/rdma"
	"github.com/inabox/inabox/switch/inahdr"
)

// Peer is one end of a worker↔PS RC connection, as seen from the other
// side.
type Peer struct {
	Addr rdma.Endpoint
	QPN  uint32 // the peer's RC QP number
}

// PSJob is one job served by the PS: the PS hosts one RC QP per worker.
type PSJob struct {
	Job uint16
	// Workers[r] is worker r's address and RC QPN; LocalQPN[r] is the PS's
	// QPN for that connection.
	Workers  []Peer
	LocalQPN []uint32
	// UCQPN[r] (PathUC) is the PS's UC QP for worker r: the destination
	// QP of its UC contributions, of which the PS sees only those the
	// switch forwards raw (no lease, collision).
	UCQPN []uint32
}

// PSConfig configures a parameter server.
type PSConfig struct {
	Addr rdma.Endpoint
	// CtlQPN is the PS's UC QP for GRANT frames from the switch.
	CtlQPN uint32
	// Switch is the switch's control address; SwitchCtlQPN its control QP
	// (the destination QP of ALLOC and FREE).
	Switch       rdma.Endpoint
	SwitchCtlQPN uint32
	// GrantTimeout is the ALLOC retransmission timeout (0: 50 µs);
	// GrantRetries bounds ALLOC retransmissions before the PS plans the
	// whole all-reduce on the PS path (0: 3).
	GrantTimeout time.Duration
	GrantRetries int
	// QP is the template of the PS's RC QPs (addresses and QPNs are
	// filled in per connection).
	QP rdma.Config
	// Control is the template of each job's path control law.
	Control PathControl
	// INAPath is the workers' INA path (PathUC, the default, or PathTrim).
	INAPath INAPath
	// FreeEvery sends FREE at the end of every all-reduce, also one that
	// got no switch memory (DynaINA: the FREE is the all-reduce's end for
	// the scheduler). Otherwise only an all-reduce with INA chunks frees.
	FreeEvery bool
	// KeepAlive is how often the PS renews the lease of an unfinished
	// all-reduce once one of its INA chunks has come raw (0: never). A
	// worker that gives up waiting for a result stops its UC resends,
	// which were what kept the lease in use; while a peer is late, the
	// lease would otherwise idle out (the switch's LeaseIdle) and every
	// later INA chunk collide. The renewal is an exact ALLOC, which also
	// re-installs a lease lost in a reboot. Set it below LeaseIdle.
	KeepAlive time.Duration
}

// PSStats are the PS's counters.
type PSStats struct {
	Absorbed, Raw, RawDup, SwitchResults, SoftResults, Pulls, Fetches uint64
	ResultsSent, Allocs, Grants, Frees, Stale, AllReduces             uint64
	// Reallocs counts re-ALLOCs sent because INA chunks came raw (the
	// lease is gone, e.g. after a switch reboot).
	Reallocs uint64
	// KeepAlives counts the lease renewals sent (PSConfig.KeepAlive).
	KeepAlives uint64
	// Demotions counts all-reduces whose lease was lost for good (an
	// exact re-ALLOC or renewal answered with no aggregators, PathUC):
	// the rest of each went to the PS path.
	Demotions uint64
	// OutOfRange counts contributions to a chunk beyond their all-reduce
	// (dropped).
	OutOfRange uint64
}

// PS is the parameter server: an emu.Node hosting one RC QP per worker of
// every job it serves.
type PS struct {
	cfg    PSConfig
	jobs   map[uint16]*psJob
	qps    []*rdma.QP
	byQPN  map[uint32]psRef
	byUC   map[uint32]psRef
	timers []rdma.QPTimer // per QP (index = timer key)
	dirty  []bool
	stats  PSStats

	allocArmed bool
	allocAt    time.Duration // when the armed ALLOC timer fires
	now        time.Duration
	postFails  int
	postErr    error
	rx         RxStats
	lost       bool
}

type psRef struct {
	job  *psJob
	rank int
	qp   int
}

type psJob struct {
	id    uint16
	n     int
	mask  uint32
	qps   []int // index into PS.qps by rank
	ars   map[uint16]*psAR
	ctl   PathControl
	plans []Plan // history, for reports
}

type psAR struct {
	id         uint16
	chunks     uint32
	want       int
	plan       Plan
	planned    bool
	tries      int
	allocAt    time.Duration
	start      time.Duration
	ch         []psChunk
	results    uint32
	done       uint32
	finished   bool
	inaLast    time.Duration
	psLast     time.Duration
	fallbacks  uint32
	inaResults uint32
	reallocAt  time.Duration
	// keepAt is when the next lease renewal is due (0: none,
	// PSConfig.KeepAlive).
	keepAt time.Duration
	// demoted: the lease is lost for good (PS.demote); plan stays the
	// plan the chunks were sent under.
	demoted bool
	// res holds the chunks' result copies, sums their partial sums.
	res  Slab[byte]
	sums Slab[int32]
}

type psChunk struct {
	absorbed, raw, fetch uint32
	sum                  []int32
	res                  []byte
	exp                  int8
	ovf                  bool
	pulled               bool
}

const allocTimerKey = 1 << 40

var (
	_ emu.Node     = (*PS)(nil)
	_ emu.Resetter = (*PS)(nil)
)

// NewPS returns a PS serving jobs.
func NewPS(cfg PSConfig, jobs ...PSJob) (*PS, error) {
	if cfg.GrantTimeout == 0 {
		cfg.GrantTimeout = 50 * time.Microsecond
	}
	if cfg.GrantRetries == 0 {
		cfg.GrantRetries = 3
	}
	if cfg.INAPath == PathTrim && cfg.Control.PSShareMax == 0 {
		cfg.Control.PSShareMax = 0.5
	}
	// PathUC: PS chunks per round a multiple of n, so INA chunk i of every
	// round uses aggregator i and a slot is reused exactly n INA chunks
	// later (the window argument, docs/freeina.md §11).
	cfg.Control.WholeRounds = cfg.INAPath == PathUC
	p := &PS{cfg: cfg, jobs: map[uint16]*psJob{}, byQPN: map[uint32]psRef{}, byUC: map[uint32]psRef{}}
	for _, j := range jobs {
		pj := &psJob{id: j.Job, n: len(j.Workers), mask: uint32(1)<<len(j.Workers) - 1, ars: map[uint16]*psAR{}, ctl: cfg.Control}
		if pj.ctl.Workers == 0 {
			pj.ctl.Workers = len(j.Workers)
		}
		for r, w := range j.Workers {
			qc := cfg.QP
			qc.Local, qc.Remote, qc.QPN, qc.RemoteQPN = cfg.Addr, w.Addr, j.LocalQPN[r], w.QPN
			qc.SendPSN, qc.RecvPSN = InitialPSN(j.LocalQPN[r]), InitialPSN(w.QPN)
			q, err := rdma.NewQP(qc)
			if err != nil {
				return nil, err
			}
			p.byQPN[j.LocalQPN[r]] = psRef{job: pj, rank: r, qp: len(p.qps)}
			if r < len(j.UCQPN) {
				p.byUC[j.UCQPN[r]] = psRef{job: pj, rank: r, qp: len(p.qps)}
			}
			pj.qps = append(pj.qps, len(p.qps))
			p.qps = append(p.qps, q)
		}
		p.jobs[j.Job] = pj
	}
	p.timers = make([]rdma.QPTimer, len(p.qps))
	p.dirty = make([]bool, len(p.qps))
	return p, nil
}

// InitialPSN is the initial PSN of a QP's requester, derived from its QP number
// (deterministic, and shared by every client so peers agree on it).
func InitialPSN(qpn uint32) uint32 { return (qpn * 2654435761) & rdma.PSNMask }

// Stats returns the PS's counters.
func (p *PS) Stats() PSStats { return p.stats }

// QPs returns the hosted QPs.
func (p *PS) QPs() []*rdma.QP { return p.qps }

// Plans returns the plans the PS made for job, in order.
func (p *PS) Plans(job uint16) []Plan {
	if j := p.jobs[job]; j != nil {
		return append([]Plan(nil), j.plans...)
	}
	return nil
}

// Reset implements emu.Resetter: a crash that loses the PS's state (every
// all-reduce's and its RC connections'), which the jobs cannot recover
// from mid-run (StateLost).
func (p *PS) Reset() {
	for _, j := range p.jobs {
		j.ars = map[uint16]*psAR{}
	}
	p.lost = true
}

// StateLost reports whether the PS lost its state in a crash.
func (p *PS) StateLost() bool { return p.lost }

// Start implements emu.Node.
func (p *PS) Start(env *emu.Env) {
	// (after a crash every timer is gone: each QP's and the ALLOC
	// retransmission timer are armed anew)
	p.now = env.Now()
	clear(p.timers)
	p.allocArmed = false
	for i := range p.dirty {
		p.dirty[i] = true
	}
	p.armAlloc(env)
	p.flush(env)
}

// AcceptsDeferred implements emu.DeferAware: the PS trusts a sealed
// frame's ICRC (UCFrame, rdma.QP.ReceiveSealed).
func (p *PS) AcceptsDeferred() bool { return true }

// Receive implements emu.Node.
func (p *PS) Receive(env *emu.Env, port int, pkts []*emu.Packet) {
	p.now = env.Now()
	for _, pk := range pkts {
		b := pk.Bytes()
		qpn := destQP(b)
		if qpn == p.cfg.CtlQPN { // GRANTs: from the switch only
			if pl, ok := UCFrame(&p.rx, pk, p.cfg.Switch); ok {
				p.grant(env, pl)
			}
			env.Free(pk)
			continue
		}
		if ref, ok := p.byUC[qpn]; ok {
			// PathUC: a contribution the switch forwarded raw, from
			// that worker.
			if pl, ok := UCFrame(&p.rx, pk, p.qps[ref.qp].Config().Remote); ok {
				p.message(env, ref, pl)
			}
			env.Free(pk)
			continue
		}
		ref, ok := p.byQPN[qpn]
		if ok {
			q := p.qps[ref.qp]
			_ = q.ReceiveSealed(p.now, b, pk.Sealed)
			p.dirty[ref.qp] = true
			p.drain(env, ref, q)
		}
		env.Free(pk)
	}
	p.flush(env)
}

// Timer implements emu.Node.
func (p *PS) Timer(env *emu.Env, key uint64) {
	p.now = env.Now()
	if key == allocTimerKey {
		p.allocArmed = false
		p.allocTimer(env)
	} else if key < uint64(len(p.qps)) {
		p.timers[key].Expired()
		p.qps[key].HandleTimeout(p.now)
		p.dirty[key] = true
		p.drain(env, p.byQPN[p.qps[key].Config().QPN], p.qps[key])
	}
	p.flush(env)
}

func (p *PS) drain(env *emu.Env, ref psRef, q *rdma.QP) {
	for {
		c, ok := q.PollCompletion()
		if !ok {
			return
		}
		if c.Opcode == rdma.CompRecv {
			p.message(env, ref, c.Data)
		}
	}
}

func (p *PS) flush(env *emu.Env) {
	for i, d := range p.dirty {
		if !d {
			continue
		}
		p.dirty[i] = false
		rdma.FlushQP(env, 0, p.qps[i], uint64(i), &p.timers[i])
	}
}

func (p *PS) post(j *psJob, rank int, data []byte) {
	i := j.qps[rank]
	if err := p.qps[i].PostSend(rdma.WorkRequest{Op: rdma.WRSend, Data: data}); err != nil {
		// Counted and kept, never dropped silently: the run fails naming
		// the PS instead of stalling.
		p.postFails++
		if p.postErr == nil {
			p.postErr = err
		}
	}
	p.dirty[i] = true
}

// Rx returns the counters of the frames the PS dropped on arrival (its RC
// QPs count their own); Stale includes the contributions to all-reduces
// it has finished or never began (PSStats.Stale), Malformed those to
// chunks beyond their all-reduce (PSStats.OutOfRange).
func (p *PS) Rx() RxStats {
	rx := p.rx
	rx.Stale += p.stats.Stale
	rx.Malformed += p.stats.OutOfRange
	return rx
}

// PostErr returns how many messages the PS could not post on its RC QPs
// and the first reason, or 0 and nil.
func (p *PS) PostErr() (int, error) { return p.postFails, p.postErr }

// Phi returns job's current PS-share estimate (PathControl.Phi), or 0.
func (p *PS) Phi(job uint16) float64 {
	if j := p.jobs[job]; j != nil {
		return j.ctl.Phi()
	}
	return 0
}

// message handles one RC message from worker ref.rank of ref.job.
func (p *PS) message(env *emu.Env, ref psRef, data []byte) {
	if len(data) < inahdr.Len || data[0] != inahdr.Version {
		return
	}
	h := inahdr.Header(data)
	j := ref.job
	if h.Job() != j.id {
		p.stats.Stale++
		return
	}
	if h.IsCtl() {
		if c, err := inahdr.DecodeCtl(h); err == nil {
			p.control(env, j, ref.rank, c)
		}
		return
	}
	a := j.ars[h.AllReduce()]
	switch {
	case a == nil:
		p.stats.Stale++ // late retransmission of a finished all-reduce
		return
	case h.Chunk() >= a.chunks:
		p.stats.OutOfRange++ // beyond the all-reduce: no worker sends it
		return
	}
	c := &a.ch[h.Chunk()]
	bit := uint32(1) << ref.rank
	switch {
	case h.Has(inahdr.FlagCtl): // absorbed by the switch
		p.stats.Absorbed++
		c.absorbed |= bit
	case h.Has(inahdr.FlagResult):
		if c.res == nil && h.Count() > 0 && len(data) >= h.Size() {
			p.stats.SwitchResults++
			c.res = a.res.Take(h.Size())
			copy(c.res, data[:h.Size()])
			inahdr.Header(c.res).SetFlags(flagResultPS | h.Flags()&inahdr.FlagOverflow)
			p.resolved(env, j, a, h.Chunk(), c, false)
			return
		}
		c.absorbed |= bit
	default: // raw contribution: collision, PS path or pulled
		if h.Count() == 0 || len(data) < h.Size() {
			return
		}
		if c.raw&bit != 0 || c.res != nil {
			p.stats.RawDup++
			return
		}
		p.stats.Raw++
		c.raw |= bit
		if a.planned && a.plan.OnINA(h.Chunk()) && p.cfg.KeepAlive > 0 && a.keepAt == 0 && !a.finished && !a.demoted {
			// A worker gave up on the chunk, or it found no aggregator:
			// the lease may go unused while a peer is late. Keep it.
			a.keepAt = p.now + p.cfg.KeepAlive
			p.armAlloc(env)
		}
		if h.Has(inahdr.FlagCollision) && a.planned && a.plan.INA > 0 && a.plan.OnINA(h.Chunk()) && p.now >= a.reallocAt && !a.demoted {
			// An INA chunk found no aggregator: the lease may be gone
			// (reboot). Ask again for exactly the planned aggregators; an
			// existing lease is simply re-granted (ALLOC is idempotent).
			p.stats.Reallocs++
			a.reallocAt = p.now + p.cfg.GrantTimeout
			p.toSwitch(env, inahdr.Ctl{Op: inahdr.CtlAlloc, Job: j.id, AllReduce: a.id, Want: a.plan.INA, Chunks: a.chunks, Exact: true})
		}
		if c.sum == nil {
			c.sum = a.sums.Take(h.Count())
			c.exp = h.Exponent()
		}
		if h.Exponent() > c.exp {
			c.exp = h.Exponent()
		}
		if len(c.sum) == h.Count() && SatAdd(c.sum, data[inahdr.Len:]) {
			c.ovf = true
		}
	}
	p.check(env, j, a, h.Chunk(), c)
}

// check completes chunk k in software or pulls raw data when no switch
// result can arrive any more.
func (p *PS) check(env *emu.Env, j *psJob, a *psAR, k uint32, c *psChunk) {
	if c.res != nil {
		return
	}
	if c.raw == j.mask {
		p.stats.SoftResults++
		res := a.res.Take(inahdr.Len + 4*len(c.sum))
		fl := uint8(flagResultPS)
		if c.ovf {
			fl |= inahdr.FlagOverflow
		}
		inahdr.Header(res).Encode(inahdr.Meta{Flags: fl, Job: j.id, AllReduce: a.id, Count: len(c.sum),
			Chunk: k, Exponent: c.exp, Bitmap: j.mask})
		for i, v := range c.sum {
			binary.BigEndian.PutUint32(res[inahdr.Len+4*i:], uint32(v))
		}
		c.res, c.sum = res, nil
		p.resolved(env, j, a, k, c, true)
		return
	}
	// PathUC: the PS never learns what the switch absorbed. The first raw
	// contribution of an INA chunk (collision, no lease, or a worker's
	// fallback after its timeouts) means the switch may never complete it:
	// pull raw data from every other worker and finish in software.
	if p.cfg.INAPath == PathUC && c.raw != 0 && !c.pulled && a.plan.OnINA(k) && !a.demoted {
		c.pulled = true
		for r := 0; r < j.n; r++ {
			if c.raw&(1<<r) == 0 {
				p.stats.Pulls++
				p.post(j, r, ctl(inahdr.Ctl{Op: inahdr.CtlPull, Job: j.id, AllReduce: a.id, Chunk: k}))
			}
		}
		return
	}
	// Every worker's message for k has been delivered and none carried the
	// aggregate: the switch will never send it (collision, reclaimed or
	// rebooted). Pull raw data from the absorbed workers.
	if c.absorbed|c.raw == j.mask && !c.pulled {
		c.pulled = true
		for r := 0; r < j.n; r++ {
			if (c.absorbed&^c.raw)&(1<<r) != 0 {
				p.stats.Pulls++
				p.post(j, r, ctl(inahdr.Ctl{Op: inahdr.CtlPull, Job: j.id, AllReduce: a.id, Chunk: k}))
			}
		}
	}
}

// resolved: chunk k has its result. Software results go to every worker
// (no multicast carried them); switch results only to workers that asked.
func (p *PS) resolved(env *emu.Env, j *psJob, a *psAR, k uint32, c *psChunk, soft bool) {
	to := c.fetch
	if soft {
		to = j.mask
	}
	c.fetch = 0
	for r := 0; r < j.n; r++ {
		if to&(1<<r) != 0 {
			p.stats.ResultsSent++
			p.post(j, r, c.res)
		}
	}
	a.results++
	ina := a.plan.OnINA(k)
	if ina {
		a.inaLast = p.now
		a.inaResults++
		if soft {
			a.fallbacks++
		}
	} else {
		a.psLast = p.now
	}
	if a.results == a.chunks && !a.finished {
		p.finish(env, j, a)
	}
}

// finish ends an all-reduce whose every result exists: the control law's
// measurement and FREE.
func (p *PS) finish(env *emu.Env, j *psJob, a *psAR) {
	a.finished, a.keepAt = true, 0
	p.stats.AllReduces++
	if !a.demoted { // else the INA path's span measures the lost lease, not the path
		ni, np := a.plan.Count()
		m := Measure{INAChunks: ni, PSChunks: np, INASpan: a.inaLast - a.start, PSSpan: a.psLast - a.start, Fallbacks: a.fallbacks}
		j.ctl.Observe(m)
	}
	if a.plan.INA > 0 || p.cfg.FreeEvery {
		p.stats.Frees++
		p.toSwitch(env, inahdr.Ctl{Op: inahdr.CtlFree, Job: j.id, AllReduce: a.id})
	}
}

func (p *PS) control(env *emu.Env, j *psJob, rank int, c inahdr.Ctl) {
	switch c.Op {
	case inahdr.CtlBegin:
		a := j.ars[c.AllReduce]
		if a == nil {
			a = &psAR{id: c.AllReduce, chunks: c.Chunks, want: c.Want, start: p.now}
			a.ch = make([]psChunk, a.chunks)
			j.ars[a.id] = a
			p.stats.Allocs++
			a.tries = 1
			a.allocAt = p.now + p.cfg.GrantTimeout
			p.toSwitch(env, p.alloc(j, a))
			p.armAlloc(env)
		} else if a.planned {
			p.post(j, rank, p.planMsg(j, a))
		}
	case inahdr.CtlFetch:
		a := j.ars[c.AllReduce]
		if a == nil || c.Chunk >= a.chunks {
			return
		}
		p.stats.Fetches++
		ch := &a.ch[c.Chunk]
		if ch.res != nil {
			p.stats.ResultsSent++
			p.post(j, rank, ch.res)
		} else {
			ch.fetch |= 1 << rank
		}
	case inahdr.CtlDone:
		a := j.ars[c.AllReduce]
		if a == nil {
			return
		}
		a.done |= 1 << rank
		if p.cfg.INAPath == PathUC && a.done == j.mask && !a.finished && a.planned {
			// PathUC: switch results never reach the PS; every worker
			// holding every result is how the PS learns the end.
			if a.plan.INA > 0 {
				a.inaLast = max(a.inaLast, p.now)
			}
			p.finish(env, j, a)
		}
		if a.done == j.mask && a.finished {
			delete(j.ars, a.id) // every worker has everything: forget it
		}
	}
}

// planMsg is all-reduce a's PLAN: no aggregators once it is demoted.
func (p *PS) planMsg(j *psJob, a *psAR) []byte {
	if a.demoted {
		return ctl(inahdr.Ctl{Op: inahdr.CtlPlan, Job: j.id, AllReduce: a.id, Chunks: a.chunks})
	}
	return ctl(inahdr.Ctl{Op: inahdr.CtlPlan, Job: j.id, AllReduce: a.id, Chunks: a.chunks, Slots: a.plan.INA, PSChunks: a.plan.PS})
}

// alloc is all-reduce a's ALLOC.
func (p *PS) alloc(j *psJob, a *psAR) inahdr.Ctl {
	return inahdr.Ctl{Op: inahdr.CtlAlloc, Job: j.id, AllReduce: a.id, Want: a.want, Chunks: a.chunks}
}

// grant handles a GRANT frame from the switch.
func (p *PS) grant(env *emu.Env, pl []byte) {
	if len(pl) < inahdr.Len || pl[0] != inahdr.Version {
		return
	}
	c, err := inahdr.DecodeCtl(inahdr.Header(pl))
	if err != nil || c.Op != inahdr.CtlGrant {
		return
	}
	j := p.jobs[c.Job]
	if j == nil {
		return
	}
	a := j.ars[c.AllReduce]
	if a == nil {
		return
	}
	if a.planned {
		if c.Slots == 0 {
			p.demote(j, a)
		}
		return
	}
	p.stats.Grants++
	p.makePlan(j, a, c.Slots)
}

// demote moves the rest of all-reduce a to the PS path (PathUC) when a
// GRANT says it holds no aggregators after its plan gave it some: the
// answer to an exact re-ALLOC or renewal (PSConfig.KeepAlive) once the
// lease is lost for good (a reboot, or an idle expiry, and the memory
// taken by other all-reduces meanwhile). Every INA chunk would otherwise
// collide at the switch, reach the PS raw and make it pull the others'
// contributions. Each worker sends the chunks it has not sent yet raw
// over RC (Worker: the plan without aggregators); its contributions in
// flight still come raw through the switch, or over RC after its UC
// retries. The PS stops pulling, renewing and re-ALLOCating for a.
func (p *PS) demote(j *psJob, a *psAR) {
	if a.demoted || a.finished || a.plan.INA == 0 || p.cfg.INAPath != PathUC {
		return
	}
	a.demoted, a.keepAt = true, 0
	p.stats.Demotions++
	for r := 0; r < j.n; r++ {
		p.post(j, r, p.planMsg(j, a))
	}
}

func (p *PS) makePlan(j *psJob, a *psAR, n int) {
	a.planned = true
	a.plan = j.ctl.Plan(a.chunks, n)
	a.start = p.now
	j.plans = append(j.plans, a.plan)
	for r := 0; r < j.n; r++ {
		p.post(j, r, p.planMsg(j, a))
	}
}

// armAlloc arms the ALLOC timer for the earliest ALLOC retransmission or
// lease renewal due, unless it is armed for earlier.
func (p *PS) armAlloc(env *emu.Env) {
	next := time.Duration(-1)
	for _, j := range p.jobs {
		for _, a := range j.ars {
			if !a.planned && (next < 0 || a.allocAt < next) {
				next = a.allocAt
			}
			if a.keepAt > 0 && (next < 0 || a.keepAt < next) {
				next = a.keepAt
			}
		}
	}
	if next >= 0 && (!p.allocArmed || next < p.allocAt) {
		env.SetTimer(next, allocTimerKey)
		p.allocArmed, p.allocAt = true, next
	}
}

func (p *PS) allocTimer(env *emu.Env) {
	for _, k := range slices.Sorted(maps.Keys(p.jobs)) {
		j := p.jobs[k]
		for _, id := range slices.Sorted(maps.Keys(j.ars)) {
			a := j.ars[id]
			if a.keepAt > 0 && a.keepAt <= p.now {
				p.stats.KeepAlives++
				a.keepAt = p.now + p.cfg.KeepAlive
				p.toSwitch(env, inahdr.Ctl{Op: inahdr.CtlAlloc, Job: j.id, AllReduce: a.id, Want: a.plan.INA, Chunks: a.chunks, Exact: true})
			}
			if a.planned || a.allocAt > p.now {
				continue
			}
			if a.tries > p.cfg.GrantRetries {
				p.makePlan(j, a, 0) // no switch answer: PS path only
				continue
			}
			a.tries++
			a.allocAt = p.now + p.cfg.GrantTimeout
			p.toSwitch(env, p.alloc(j, a))
		}
	}
	p.armAlloc(env)
}

// toSwitch sends control message c to the switch (a UC SEND Only).
func (p *PS) toSwitch(env *emu.Env, c inahdr.Ctl) {
	var hb [inahdr.Len]byte
	c.Encode(hb[:])
	fh := rdma.FrameHeader{Src: p.cfg.Addr, Dst: p.cfg.Switch, Opcode: rdma.OpUCSendOnly, DestQP: p.cfg.SwitchCtlQPN,
		SrcPort: rdma.SourcePort(p.cfg.CtlQPN)}
	pk := env.NewPacket()
	pk.SetLen(fh.Len(inahdr.Len))
	if _, err := fh.Encode(pk.Bytes(), hb[:]); err != nil {
		env.Free(pk)
		return
	}
	pk.Sealed = true
	env.Send(0, pk)
}
