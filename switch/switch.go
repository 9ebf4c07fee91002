package sw

import (
	"errors"
	"sync"
	"time"

	"github.com/inabox/inabox/internal/hugemem"
	"github.com/inabox/inabox/switch/inahdr"
)

// Defaults, modelled on Tofino-1 (see docs: SwitchML configuration.p4 uses
// 16384-entry 64-bit registers; 32 SALUs x 2 x 32 bit = 64 values per pass).
const (
	DefaultSlots         = 16384 // aggregator slots per pipe
	DefaultValuesPerPass = 64    // int32 values one pass reads-modifies-writes
	DefaultMaxPasses     = 16    // 1 pass + up to 15 recirculations
	DefaultPorts         = 64
	MaxSlots             = 1 << 16 // the INA header's slot field is 16 bits
)

// SlotsPerAggregator is how many slots an aggregator of values int32
// values takes in a switch with DefaultValuesPerPass values a slot: one a
// pass, at least one.
func SlotsPerAggregator(values int) int {
	return max((values+DefaultValuesPerPass-1)/DefaultValuesPerPass, 1)
}

// Config sizes a switch.
type Config struct {
	// Slots is the number of aggregator slots (each ValuesPerPass values).
	Slots int
	// ValuesPerPass is how many values a pipeline pass aggregates; a packet
	// with more values takes ceil(count/ValuesPerPass) passes.
	ValuesPerPass int
	// MaxPasses bounds passes per packet; packets needing more are malformed.
	MaxPasses int
	// Ports is the number of front-panel ports.
	Ports int
}

func (c *Config) fill() error {
	if c.Slots == 0 {
		c.Slots = DefaultSlots
	}
	if c.ValuesPerPass == 0 {
		c.ValuesPerPass = DefaultValuesPerPass
	}
	if c.MaxPasses == 0 {
		c.MaxPasses = DefaultMaxPasses
	}
	if c.Ports == 0 {
		c.Ports = DefaultPorts
	}
	if c.Slots < 1 || c.Slots > MaxSlots || c.ValuesPerPass < 1 || c.MaxPasses < 1 || c.Ports < 1 {
		return errors.New("sw: invalid config")
	}
	return nil
}

// regs are the register arrays. Per-aggregator metadata lives at the
// aggregator's first slot; values of pass k at slot head+k.
type regs struct {
	agg    []aggRegs // per slot; read at an aggregator's head
	values []uint32  // Slots*ValuesPerPass, in register form (regOf, lanes.go)
}

// aggRegs are one slot's entries of the per-aggregator register arrays
// (owner, bitmap, ...; a P4 register array each), kept together so that a
// slot stage's accesses to an aggregator touch one cache line, not one per
// array.
type aggRegs struct {
	owner  Tag
	bitmap uint32
	// vals is the value count of the owner's chunk (its packets' Count):
	// a contribution preempts only a chunk of its own size, since the
	// evicted sum leaves in its packet.
	vals  uint16
	count uint8
	state SlotState
	span  uint8 // slots covered by the aggregator at this head (its stride)
	prio  uint8
	exp   int8
	ovf   uint8
	// acct is the job a busy aggregator's slots count for in jobSlots
	// (setState); not a register of the data plane.
	acct uint16
}

const maxCachePorts = 256

// workerCache is a port's last ina_worker hit, and what express matches
// a frame from that worker against.
type workerCache struct {
	valid bool
	qp    uint32
	e     WorkerEntry
	// express's eight words, masked, must equal want (expressWords);
	// with sources, the port's security takes sourceOK's loop.
	mask, want [8]uint64
	sources    bool
	// job is the worker's job if its mask has the worker (express's);
	// SetJob and RemoveJob clear the cache.
	job *Job
}

// newWorkerCache is port's cache entry for worker entry e on QP qp.
func (s *Switch) newWorkerCache(port int, qp uint32, e WorkerEntry) workerCache {
	c := workerCache{valid: true, qp: qp, e: e}
	var src []PortSource
	if port >= 0 && port < len(s.t.sources) {
		src = s.t.sources[port]
	}
	c.mask, c.want, c.sources = expressWords(qp, e, src)
	if j := s.jobByID(e.Job); j != nil && j.Mask&(1<<e.Worker) != 0 {
		c.job = j
	}
	return c
}

// Switch is the aggregation switch. Its methods are safe for concurrent
// use: Process holds the switch's lock for a batch, control-plane calls and
// counter reads take it between batches.
type Switch struct {
	mu    sync.Mutex
	cfg   Config
	t     tables
	r     regs
	cache [maxCachePorts]workerCache // last ina_worker hit per port
	meta  []pmeta
	// passTable[n] is ⌈n / ValuesPerPass⌉, the passes n values take
	// (passesFor).
	passTable [inahdr.MaxValues + 1]uint16

	stats      Stats
	ports      []PortStats
	stateSlots [4]int
	// jobSlots[id] are the slots of job id's aggregators in each state
	// but free, and their integral over time (aggRegs.acct is the job a
	// busy aggregator counts for); now is the time of the batch (SetNow).
	jobSlots []jobSlots
	now      time.Duration
}

// jobSlots are one job's aggregator slots by state, and slot-nanoseconds
// by state up to last.
type jobSlots struct {
	n    [4]int
	ns   [4]int64
	last time.Duration
}

// advance integrates the slots up to now.
func (js *jobSlots) advance(now time.Duration) {
	if now > js.last {
		for st, n := range js.n {
			js.ns[st] += int64(n) * int64(now-js.last)
		}
		js.last = now
	}
}

// passesFor returns the pipeline passes n values take: ⌈n / ValuesPerPass⌉.
func (s *Switch) passesFor(n int) int {
	if uint(n) < uint(len(s.passTable)) {
		return int(s.passTable[n])
	}
	return (n + s.cfg.ValuesPerPass - 1) / s.cfg.ValuesPerPass
}

// New returns a switch with empty tables.
func New(cfg Config) (*Switch, error) {
	if err := cfg.fill(); err != nil {
		return nil, err
	}
	s := &Switch{cfg: cfg}
	for n := range s.passTable {
		s.passTable[n] = uint16((n + cfg.ValuesPerPass - 1) / cfg.ValuesPerPass)
	}
	s.initTables()
	n := cfg.Slots
	s.r = regs{agg: make([]aggRegs, n), values: hugemem.Make[uint32](n * cfg.ValuesPerPass)} // values filled below: huge pages spare 1000 faults
	for i := range s.r.values {
		s.r.values[i] = regOf(0)
	}
	for i := range s.r.agg {
		s.r.agg[i].span = 1
	}
	s.stateSlots[StateFree] = n
	s.ports = make([]PortStats, cfg.Ports)
	return s, nil
}

// Config returns the switch's configuration.
func (s *Switch) Config() Config { return s.cfg }

// Lock and Unlock take the switch's lock, for slot stages whose
// control-plane state must change between batches.
func (s *Switch) Lock()   { s.mu.Lock() }
func (s *Switch) Unlock() { s.mu.Unlock() }

// setState moves aggregator head h to st, keeping the slot-state counters.
func (s *Switch) setState(h int, st SlotState) {
	a := &s.r.agg[h]
	old := a.state
	if old == st {
		return
	}
	sp := int(a.span)
	s.stateSlots[old] -= sp
	s.stateSlots[st] += sp
	a.state = st
	// Per job: a free aggregator becomes its owner's; a busy one stays
	// with the job it counts for until it is free again.
	j := a.acct
	if old == StateFree {
		j = a.owner.Job()
		a.acct = j
	}
	js := s.jobState(j)
	js.advance(s.now)
	if old != StateFree {
		js.n[old] -= sp
	}
	if st == StateFree {
		a.acct = 0
	} else {
		js.n[st] += sp
	}
}

// jobState returns job id's slots, growing the table for a new id (once
// per id).
func (s *Switch) jobState(id uint16) *jobSlots {
	if int(id) >= len(s.jobSlots) {
		s.jobSlots = append(s.jobSlots, make([]jobSlots, int(id)+1-len(s.jobSlots))...)
	}
	return &s.jobSlots[id]
}

// SetNow sets the time of the next batches (the node's clock), against
// which the per-job slot-seconds are integrated (0 if never set).
func (s *Switch) SetNow(now time.Duration) {
	s.mu.Lock()
	s.now = max(s.now, now)
	s.mu.Unlock()
}

// JobSlots returns the slots job id's aggregators hold now: claimed (a
// partial sum: aggregating) and busy (claimed, complete or held for an ACK).
func (s *Switch) JobSlots(id uint16) (claimed, busy int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if int(id) >= len(s.jobSlots) {
		return 0, 0
	}
	n := s.jobSlots[id].n
	return n[StateClaimed], n[StateClaimed] + n[StateComplete] + n[StateHeld]
}

// JobSlotTime returns job id's aggregating (claimed) and busy slot-time
// integrated up to now (as slot × duration: 1 s is one slot-second).
func (s *Switch) JobSlotTime(id uint16, now time.Duration) (claimed, busy time.Duration) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if int(id) >= len(s.jobSlots) {
		return 0, 0
	}
	js := s.jobSlots[id]
	js.advance(max(now, s.now))
	ns := js.ns
	return time.Duration(ns[StateClaimed]), time.Duration(ns[StateClaimed] + ns[StateComplete] + ns[StateHeld])
}

// SlotInfo is the register state of one aggregator head, for tests and
// tools (register_read in STF).
type SlotInfo struct {
	Owner    Tag
	State    SlotState
	Bitmap   uint32
	Count    int
	Priority uint8
	Exponent int8
	Overflow bool
}

// Slot returns aggregator metadata at slot i.
func (s *Switch) Slot(i int) SlotInfo {
	s.mu.Lock()
	defer s.mu.Unlock()
	a := &s.r.agg[i]
	return SlotInfo{Owner: a.owner, State: a.state, Bitmap: a.bitmap,
		Count: int(a.count), Priority: a.prio, Exponent: a.exp, Overflow: a.ovf != 0}
}

// Values copies the ValuesPerPass register values of slot i into dst.
func (s *Switch) Values(dst []int32, i int) []int32 {
	s.mu.Lock()
	defer s.mu.Unlock()
	v := s.cfg.ValuesPerPass
	for _, r := range s.r.values[i*v : (i+1)*v] {
		dst = append(dst, valueOf(r))
	}
	return dst
}

// ReadRegister reads a register by its P4 twin name (as in STF
// register_read): per aggregator ina_owner, ina_bitmap, ina_count,
// ina_state, ina_prio, ina_exp, ina_ovf, ina_size, or ina_vNN (value lane
// NN); per job (idx is the job id) ina_ar_high and ina_ar_seen, the
// newest all-reduce a worker of the job contributed to (Job.stale).
func (s *Switch) ReadRegister(name string, idx int) (uint64, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	switch name {
	case "ina_ar_high", "ina_ar_seen":
		if idx < 0 || idx > 0xFFFF {
			return 0, false
		}
		j := s.jobByID(uint16(idx))
		switch {
		case j == nil || !j.arSeen:
			return 0, true
		case name == "ina_ar_seen":
			return 1, true
		}
		return uint64(j.arHigh), true
	}
	if idx < 0 || idx >= s.cfg.Slots {
		return 0, false
	}
	switch name {
	case "ina_owner":
		return uint64(s.r.agg[idx].owner), true
	case "ina_bitmap":
		return uint64(s.r.agg[idx].bitmap), true
	case "ina_count":
		return uint64(s.r.agg[idx].count), true
	case "ina_state":
		return uint64(s.r.agg[idx].state), true
	case "ina_prio":
		return uint64(s.r.agg[idx].prio), true
	case "ina_exp":
		return uint64(uint8(s.r.agg[idx].exp)), true
	case "ina_ovf":
		return uint64(s.r.agg[idx].ovf), true
	case "ina_size":
		return uint64(s.r.agg[idx].vals), true
	}
	if lane, err := parseLane(name); err == nil && lane < s.cfg.ValuesPerPass {
		return uint64(uint32(valueOf(s.r.values[idx*s.cfg.ValuesPerPass+lane]))), true
	}
	return 0, false
}

func parseLane(name string) (int, error) {
	const p = "ina_v"
	if len(name) <= len(p) || name[:len(p)] != p {
		return 0, errors.New("not a lane")
	}
	n := 0
	for _, c := range name[len(p):] {
		if c < '0' || c > '9' {
			return 0, errors.New("not a lane")
		}
		n = n*10 + int(c-'0')
	}
	return n, nil
}
