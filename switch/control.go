package sw

import (
	"errors"
	"fmt"
	"net/netip"
)

// Control-plane errors.
var (
	ErrNoPool      = errors.New("sw: no such pool")
	ErrPoolRange   = errors.New("sw: pool outside switch memory or misaligned")
	ErrNoJob       = errors.New("sw: no such job")
	ErrJobID       = errors.New("sw: job id 0 is reserved")
	ErrWorkerID    = errors.New("sw: worker id out of range")
	ErrNoPolicy    = errors.New("sw: no such policy")
	ErrPolicyInUse = errors.New("sw: policy id already registered")
	ErrNoGroup     = errors.New("sw: no such multicast group")
	ErrNoNode      = errors.New("sw: no such multicast node")
	ErrPort        = errors.New("sw: port out of range")
)

// Policy ids of the built-in policies (the `policy` parameter of the P4
// twin's set_job action).
const (
	PolicyStatic     = 0
	PolicyHashed     = 1
	PolicyPreemptive = 2
	// PolicyCustom is the first id free for RegisterPolicy.
	PolicyCustom = 16
)

// Pool is a range of aggregator slots. Stride is the number of slots of one
// aggregator (= passes of the largest packet the pool serves); aggregators
// start at Base + k*Stride, k < Aggregators().
type Pool struct {
	ID     uint16
	Base   int
	Slots  int
	Stride int

	// Counters, read with Switch.PoolStats.
	stats PoolStats
}

// Aggregators returns how many aggregators the pool holds.
func (p *Pool) Aggregators() int { return p.Slots / p.Stride }

// PoolStats are per-pool counters.
type PoolStats struct {
	Claims, Reclaims, Collisions, Preemptions, Completions, Releases uint64
	// CollisionsOnHeld counts the collisions that found the aggregator
	// complete and held for the PS's ACK (ATP/ESA, ResultToPS); the rest
	// found it claimed by an unfinished chunk.
	CollisionsOnHeld uint64
}

// Job is an installed job entry (table ina_job). Policies read it; only the
// control plane changes it.
type Job struct {
	ID uint16
	// Mask is the set of workers whose contributions complete a chunk.
	Mask uint32
	// Group is the multicast group the result goes to.
	Group uint16
	// PSPort is the port towards the job's parameter server: collisions,
	// partial sums and (with ResultToPS) results are sent there.
	PSPort int
	// ResultToPS sends a completed aggregate to the PS instead of the group
	// and holds the aggregator until the PS's ACK (ATP).
	ResultToPS bool
	// Priority orders jobs for the Preemptive policy (higher wins).
	Priority uint8
	// PolicyID selects the allocation Policy.
	PolicyID int
	// Pool is the job's memory pool.
	Pool *Pool
	// FreeINA selects the FreeINA data path (trim and forward, see
	// freeina.go): absorbed contributions go on to the PS trimmed, the
	// completing one carries the result to the PS and is multicast to the
	// workers as UC SEND Only frames.
	FreeINA bool

	policy Policy
	stats  JobStats
}

// JobStats are per-job counters.
type JobStats struct {
	Packets     uint64 // INA packets accepted for the job
	Absorbed    uint64 // contributions added and dropped (not last)
	Results     uint64 // results emitted (completions)
	Resent      uint64 // results re-sent for a retransmission after completion
	Duplicates  uint64 // retransmissions of counted contributions, dropped
	Collisions  uint64 // sent to the PS for lack of an aggregator
	Preempted   uint64 // partial sums of this job evicted to its PS
	Overflows   uint64 // results with the overflow flag
	Acks        uint64 // PS acknowledgements handled
	Foreign     uint64 // packets claiming this job from a wrong port/QP/worker
	ValuesAdded uint64 // int32 values added into registers
}

// JobSpec is the inert description of a job, as installed by SetJob.
type JobSpec struct {
	ID         uint16
	Mask       uint32
	Group      uint16
	PSPort     int
	ResultToPS bool
	Priority   uint8
	PolicyID   int
	PoolID     uint16
	FreeINA    bool
}

// WorkerEntry is an entry of table ina_worker: packets from (Port, QP) belong
// to Job as Worker; RID names the worker's egress rewrite (for unicast
// results) and PS marks the job's parameter server.
type WorkerEntry struct {
	Port   int
	QP     uint32
	Job    uint16
	Worker uint8
	RID    uint16
	PS     bool
}

// Rewrite is an egress rewrite (table ina_egress, keyed by replication id):
// a result copy to a worker gets these addresses and destination QP.
type Rewrite struct {
	SrcMAC, DstMAC [6]byte
	SrcIP, DstIP   netip.Addr
	DstQP          uint32
}

// McastMember is one replica of a multicast group.
type McastMember struct {
	RID  uint16
	Port int
}

type mcNode struct {
	rid   uint16
	ports []int
}

type route struct {
	prefix netip.Prefix
	port   int
}

type workerKey struct {
	port int
	qp   uint32
}

// tables holds everything the control plane installs. Guarded by Switch.mu.
type tables struct {
	workers  map[workerKey]WorkerEntry
	jobs     []*Job // indexed by job id
	pools    map[uint16]*Pool
	policies map[int]Policy
	rewrites map[uint16]*Rewrite
	nodes    []mcNode // by node handle
	groups   map[uint16][]int
	members  map[uint16][]McastMember // derived from groups+nodes
	l2       map[[6]byte]int
	routes   []route // sorted by prefix length, longest first
	l2Def    int     // default egress port for misses, -1 drop
}

func (s *Switch) initTables() {
	s.t = tables{
		workers:  map[workerKey]WorkerEntry{},
		pools:    map[uint16]*Pool{},
		policies: map[int]Policy{},
		rewrites: map[uint16]*Rewrite{},
		groups:   map[uint16][]int{},
		members:  map[uint16][]McastMember{},
		l2:       map[[6]byte]int{},
		l2Def:    -1,
	}
	s.t.policies[PolicyStatic] = Static{}
	s.t.policies[PolicyHashed] = Hashed{}
	s.t.policies[PolicyPreemptive] = Preemptive{}
}

// RegisterPolicy installs a policy under id (≥ PolicyCustom), for jobs
// whose PolicyID is id.
func (s *Switch) RegisterPolicy(id int, p Policy) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, ok := s.t.policies[id]; ok || id < PolicyCustom {
		return fmt.Errorf("%w: %d", ErrPolicyInUse, id)
	}
	s.t.policies[id] = p
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
	pol := s.t.policies[js.PolicyID]
	if pol == nil {
		return fmt.Errorf("%w: %d", ErrNoPolicy, js.PolicyID)
	}
	for int(js.ID) >= len(s.t.jobs) {
		s.t.jobs = append(s.t.jobs, nil)
	}
	j := s.t.jobs[js.ID]
	if j == nil {
		j = &Job{}
		s.t.jobs[js.ID] = j
	}
	st := j.stats
	*j = Job{ID: js.ID, Mask: js.Mask, Group: js.Group, PSPort: js.PSPort, ResultToPS: js.ResultToPS,
		Priority: js.Priority, PolicyID: js.PolicyID, Pool: pool, FreeINA: js.FreeINA, policy: pol, stats: st}
	return nil
}

// RemoveJob deletes a job entry; its workers' packets become table misses.
func (s *Switch) RemoveJob(id uint16) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if int(id) < len(s.t.jobs) {
		s.t.jobs[id] = nil
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
	s.t.members[group] = ms
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
	for i := base; i < base+n && i < s.cfg.Slots; i++ {
		if i < 0 {
			continue
		}
		s.setState(i, StateFree)
		s.r.owner[i], s.r.bitmap[i], s.r.count[i], s.r.ovf[i] = 0, 0, 0, 0
	}
}
