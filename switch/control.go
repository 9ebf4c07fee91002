package sw

import (
	"errors"
	"fmt"
	"net/netip"

	"github.com/inabox/inabox/switch/inahdr"
)

// Control-plane errors.
var (
	ErrNoPool     = errors.New("sw: no such pool")
	ErrPoolRange  = errors.New("sw: pool outside switch memory or misaligned")
	ErrNoJob      = errors.New("sw: no such job")
	ErrJobID      = errors.New("sw: job id 0 is reserved")
	ErrWorkerID   = errors.New("sw: worker id out of range")
	ErrNoStage    = errors.New("sw: no such slot stage")
	ErrStageInUse = errors.New("sw: slot stage id already in use")
	ErrNoGroup    = errors.New("sw: no such multicast group")
	ErrNoNode     = errors.New("sw: no such multicast node")
	ErrPort       = errors.New("sw: port out of range")
	ErrJobOption  = errors.New("sw: job option out of range or not for its slot stage")
)

// Slot stage ids of the built-in stages (JobSpec.PolicyID, the `policy`
// parameter of the P4 twin's set_job action).
const (
	StageStatic     = 0
	StageHashed     = 1
	StagePreemptive = 2
	// StageCustom is the first id free for RegisterStage.
	StageCustom = 16
)

func (s *Switch) initTables() {
	s.t = tables{
		workers: map[workerKey]WorkerEntry{},
		gone:    map[uint16]JobStats{},
		pools:   map[uint16]*Pool{},
		stages:  map[int]SlotStage{},
		groups:  map[uint16][]int{},
		l2:      map[[6]byte]int{},
		l2Def:   -1,
	}
	s.t.stages[StageStatic] = Static{}
	s.t.stages[StageHashed] = Hashed{}
	s.t.stages[StagePreemptive] = Preemptive{}
}

// RegisterStage installs slot stage st under id (≥ StageCustom), for jobs
// whose PolicyID is id.
func (s *Switch) RegisterStage(id int, st SlotStage) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, ok := s.t.stages[id]; ok || id < StageCustom {
		return fmt.Errorf("%w: %d", ErrStageInUse, id)
	}
	s.t.stages[id] = st
	return nil
}

// SetPool creates or resizes pool id to slots [base, base+slots) with
// aggregators of stride slots. Resizing does not move state: aggregators
// outside the new range keep their contents until ResetSlots.
func (s *Switch) SetPool(id uint16, base, slots, stride int) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if stride <= 0 {
		stride = 1
	}
	if base < 0 || slots < stride || base+slots > s.cfg.Slots || stride > s.cfg.MaxPasses {
		return fmt.Errorf("%w: pool %d [%d,+%d) stride %d", ErrPoolRange, id, base, slots, stride)
	}
	p := s.t.pools[id]
	if p == nil {
		p = &Pool{ID: id}
		s.t.pools[id] = p
	}
	p.Base, p.Slots, p.Stride = base, slots, stride
	return nil
}

// SetJob installs or replaces a job entry.
func (s *Switch) SetJob(js JobSpec) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if js.ID == 0 {
		return ErrJobID
	}
	pool := s.t.pools[js.PoolID]
	if pool == nil {
		return fmt.Errorf("%w: %d", ErrNoPool, js.PoolID)
	}
	st := s.t.stages[js.PolicyID]
	if st == nil {
		return fmt.Errorf("%w: %d", ErrNoStage, js.PolicyID)
	}
	if js.Budget < 0 || js.Budget > pool.Aggregators() {
		return fmt.Errorf("%w: job %d budget %d: must be 0 (the whole pool) or at most pool %d's %d aggregators",
			ErrJobOption, js.ID, js.Budget, js.PoolID, pool.Aggregators())
	}
	if js.Budget > 0 && js.PolicyID != StageHashed && js.PolicyID != StagePreemptive {
		return fmt.Errorf("%w: job %d budget %d: only the hashed and preemptive stages (%d, %d) take a budget, not stage %d",
			ErrJobOption, js.ID, js.Budget, StageHashed, StagePreemptive, js.PolicyID)
	}
	if js.ReclaimHeld && js.PolicyID != StagePreemptive {
		return fmt.Errorf("%w: job %d reclaim held: only the preemptive stage (%d) reclaims held aggregators, not stage %d",
			ErrJobOption, js.ID, StagePreemptive, js.PolicyID)
	}
	for int(js.ID) >= len(s.t.jobs) {
		s.t.jobs = append(s.t.jobs, nil)
	}
	j := s.t.jobs[js.ID]
	if j == nil {
		j = &Job{stats: s.t.gone[js.ID]}
		delete(s.t.gone, js.ID)
		s.t.jobs[js.ID] = j
	}
	win := js.Window
	if win == 0 {
		win = DefaultWindow
	}
	*j = Job{ID: js.ID, Mask: js.Mask, Group: js.Group, PSPort: js.PSPort, ResultToPS: js.ResultToPS,
		Priority: js.Priority, ReclaimHeld: js.ReclaimHeld, Budget: js.Budget, PolicyID: js.PolicyID, Pool: pool,
		Window: win, stage: st, rule: contentionRule(st), stats: j.stats}
	j.pure = j.rule != nil                 // the built-in contention stages locate purely
	s.cache = [maxCachePorts]workerCache{} // entries hold the job and its mask
	return nil
}

// isPSPort reports whether port is the port of job id's parameter server:
// the only place the switch takes the job's control messages from.
func (s *Switch) isPSPort(port int, id uint16) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	j := s.jobByID(id)
	return j != nil && j.PSPort == port
}

// isWorkerPort reports whether port is the port of worker rank of job id
// (its ina_worker entry): the only place the switch takes the worker's
// control messages (JOIN, LEAVE) from. The job need not be installed.
func (s *Switch) isWorkerPort(port int, id uint16, rank int) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	for k, w := range s.t.workers {
		if k.port == port && w.Job == id && !w.PS && int(w.Worker) == rank {
			return true
		}
	}
	return false
}

// ctlSenderOK reports whether a control message m for the switch may come
// in on port: ALLOC and FREE from the job's PS port, JOIN and LEAVE from
// the port of the job's worker m.Rank, nothing else from any port.
func (s *Switch) ctlSenderOK(port int, m inahdr.Ctl) bool {
	switch m.Op {
	case inahdr.CtlAlloc, inahdr.CtlFree:
		return s.isPSPort(port, m.Job)
	case inahdr.CtlJoin, inahdr.CtlLeave:
		return s.isWorkerPort(port, m.Job, m.Rank)
	}
	return false
}

// jobByID returns job id's entry, or nil.
func (s *Switch) jobByID(id uint16) *Job {
	if int(id) < len(s.t.jobs) {
		return s.t.jobs[id]
	}
	return nil
}

// jobGroup returns job id's multicast group, if the job is installed.
func (s *Switch) jobGroup(id uint16) (uint16, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if j := s.jobByID(id); j != nil {
		return j.Group, true
	}
	return 0, false
}

// RemoveJob deletes a job entry; its workers' packets become table misses.
// Its counters stay readable (JobStats) and resume if it is installed again.
func (s *Switch) RemoveJob(id uint16) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if int(id) < len(s.t.jobs) && s.t.jobs[id] != nil {
		s.t.gone[id] = s.t.jobs[id].stats
		s.t.jobs[id] = nil
		s.cache = [maxCachePorts]workerCache{} // entries may hold the job
	}
}

// AddWorker installs an ina_worker entry.
func (s *Switch) AddWorker(w WorkerEntry) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if w.Job == 0 {
		return ErrJobID
	}
	if !w.PS && w.Worker >= 32 {
		return ErrWorkerID
	}
	if w.Port < 0 || w.Port >= s.cfg.Ports {
		return ErrPort
	}
	s.t.workers[workerKey{w.Port, w.QP & 0xFFFFFF}] = w
	s.cache = [maxCachePorts]workerCache{}
	return nil
}

// RemoveWorker deletes the ina_worker entry for (port, qp).
func (s *Switch) RemoveWorker(port int, qp uint32) {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.t.workers, workerKey{port, qp & 0xFFFFFF})
	s.cache = [maxCachePorts]workerCache{}
}

// SetRewrite installs the egress rewrite for replication id rid.
func (s *Switch) SetRewrite(rid uint16, r Rewrite) {
	s.mu.Lock()
	defer s.mu.Unlock()
	rr := r
	if int(rid) >= len(s.t.rewrites) {
		s.t.rewrites = append(s.t.rewrites, make([]*Rewrite, int(rid)+1-len(s.t.rewrites))...)
	}
	s.t.rewrites[rid] = &rr
}

// McastNodeCreate creates a PRE node (rid, ports) and returns its handle,
// like simple_switch_CLI's mc_node_create.
func (s *Switch) McastNodeCreate(rid uint16, ports ...int) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, p := range ports {
		if p < 0 || p >= s.cfg.Ports {
			return 0, ErrPort
		}
	}
	s.t.nodes = append(s.t.nodes, mcNode{rid: rid, ports: append([]int(nil), ports...)})
	return len(s.t.nodes) - 1, nil
}

// McastGroupCreate creates an empty multicast group (mc_mgrp_create).
func (s *Switch) McastGroupCreate(group uint16) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, ok := s.t.groups[group]; !ok {
		s.t.groups[group] = nil
	}
	s.rebuildMembers(group)
}

// McastNodeAssociate adds node handle h to group (mc_node_associate).
func (s *Switch) McastNodeAssociate(group uint16, h int) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, ok := s.t.groups[group]; !ok {
		return ErrNoGroup
	}
	if h < 0 || h >= len(s.t.nodes) {
		return ErrNoNode
	}
	s.t.groups[group] = append(s.t.groups[group], h)
	s.rebuildMembers(group)
	return nil
}

// AddMcastGroup is a shortcut: one node per member, all in group.
func (s *Switch) AddMcastGroup(group uint16, members ...McastMember) error {
	s.McastGroupCreate(group)
	for _, m := range members {
		h, err := s.McastNodeCreate(m.RID, m.Port)
		if err != nil {
			return err
		}
		if err := s.McastNodeAssociate(group, h); err != nil {
			return err
		}
	}
	return nil
}

func (s *Switch) rebuildMembers(group uint16) {
	var ms []McastMember
	for _, h := range s.t.groups[group] {
		n := s.t.nodes[h]
		for _, p := range n.ports {
			ms = append(ms, McastMember{RID: n.rid, Port: p})
		}
	}
	if int(group) >= len(s.t.members) {
		s.t.members = append(s.t.members, make([][]McastMember, int(group)+1-len(s.t.members))...)
	}
	s.t.members[group] = ms
}

// SetPortSource installs port security on port: from now on a frame
// arriving there must come from src (its Ethernet source MAC and, if IPv4,
// its source address), else it is dropped (ReasonSpoofed). A host cannot
// then impersonate another tenant's worker, a PS or the switch. It
// replaces the port's sources (AddPortSource adds one).
func (s *Switch) SetPortSource(port int, src PortSource) error {
	return s.portSource(port, src, false)
}

// AddPortSource adds src to the sources port security accepts on port: a
// host whose several endpoints share one link (a worker and its job's PS
// on one machine) sends from each of their addresses, and a frame from
// any other is still dropped (ReasonSpoofed). On a port without port
// security it installs it, as SetPortSource.
func (s *Switch) AddPortSource(port int, src PortSource) error {
	return s.portSource(port, src, true)
}

func (s *Switch) portSource(port int, src PortSource, add bool) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if port < 0 || port >= s.cfg.Ports {
		return ErrPort
	}
	if s.t.sources == nil {
		s.t.sources = make([][]PortSource, s.cfg.Ports)
	}
	if !add {
		s.t.sources[port] = s.t.sources[port][:0]
	}
	s.t.sources[port] = append(s.t.sources[port], src)
	if port < maxCachePorts {
		s.cache[port] = workerCache{} // its express words check the sources
	}
	return nil
}

// AddL2 installs l2_fwd: frames to mac leave on port.
func (s *Switch) AddL2(mac [6]byte, port int) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if port < 0 || port >= s.cfg.Ports {
		return ErrPort
	}
	s.t.l2[mac] = port
	return nil
}

// AddRoute installs ipv4_lpm: IPv4 frames to prefix leave on port.
func (s *Switch) AddRoute(prefix netip.Prefix, port int) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if port < 0 || port >= s.cfg.Ports || !prefix.Addr().Is4() {
		return ErrPort
	}
	prefix = prefix.Masked()
	rs := append(s.t.routes, route{prefix, port})
	// insertion sort, longest prefix first
	for i := len(rs) - 1; i > 0 && rs[i].prefix.Bits() > rs[i-1].prefix.Bits(); i-- {
		rs[i], rs[i-1] = rs[i-1], rs[i]
	}
	s.t.routes = rs
	return nil
}

// SetDefaultPort sets the default action of ipv4_lpm: forward misses to
// port, or drop them if port < 0 (the initial default).
func (s *Switch) SetDefaultPort(port int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.t.l2Def = port
}

// ResetSlots frees slots [base, base+n): owner, bitmap, counter and state
// are cleared (values are overwritten by the next first writer).
func (s *Switch) ResetSlots(base, n int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.resetSlotsLocked(base, n)
}

// resetSlotsLocked is ResetSlots with s.mu held.
func (s *Switch) resetSlotsLocked(base, n int) {
	for i := base; i < base+n && i < s.cfg.Slots; i++ {
		if i < 0 {
			continue
		}
		s.setState(i, StateFree)
		s.r.agg[i].owner, s.r.agg[i].bitmap, s.r.agg[i].count, s.r.agg[i].ovf = 0, 0, 0, 0
	}
}
