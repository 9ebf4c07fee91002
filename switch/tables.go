package sw

import "net/netip"

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
	mod   aggMod // hashed stages' index mod Aggregators()
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
	// ReclaimsHeld counts the reclaims (among Reclaims) of an aggregator
	// held for another chunk's PS ACK (ESA with JobSpec.ReclaimHeld).
	ReclaimsHeld uint64
}

// Job is an installed job entry (table ina_job). Slot stages read it; only
// the control plane changes it.
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
	// and holds the aggregator until the PS's ACK (ATP; contention stages).
	ResultToPS bool
	// Priority orders jobs for the Preemptive stage (higher wins).
	Priority uint8
	// ReclaimHeld lets the job's contributions reclaim an aggregator held
	// for another chunk's PS ACK (Preemptive stage; JobSpec.ReclaimHeld).
	ReclaimHeld bool
	// Budget is how many aggregators the job's chunks hash into, 0 for
	// the whole pool (Hashed and Preemptive stages; JobSpec.Budget).
	Budget int
	// PolicyID is the id of the job's slot stage (StageStatic, ... or one
	// registered with RegisterStage).
	PolicyID int
	// Pool is the job's memory pool.
	Pool *Pool

	// Window is how many of the job's all-reduces may be in flight (see
	// JobSpec.Window); arHigh is the newest seen, once arSeen.
	Window uint16
	arHigh uint16
	arSeen bool

	stage   SlotStage
	stats   JobStats
	perm    permCache // HashIndex's permutation for the newest all-reduce located
	rule    contender // the stage's rule if it is a built-in contention stage (contentionRule)
	pure    bool      // the stage locates purely (a built-in contention stage: contentionRule)
	located located   // with pure: the last tag located, and where
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
	Forced      uint64 // partial sums a retransmission forced out to the PS (ATP), freeing the aggregator
	Overflows   uint64 // results with the overflow flag
	Acks        uint64 // PS acknowledgements handled
	Foreign     uint64 // packets claiming this job from a wrong port/QP/worker
	ValuesAdded uint64 // int32 values added into registers
	// Refused counts, by cause, the frames claiming this job that the switch
	// dropped before they touched a register: a bad ICRC, a forged result,
	// a stale all-reduce or chunk, a bad bitmap, a chunk out of range.
	BadICRC, ForgedResult, Stale, BadBitmap, OutOfRange uint64
}

// JobSpec is the inert description of a job, as installed by SetJob; the
// fields are Job's. PolicyID selects the slot stage (the name is the P4
// twin's set_job parameter `policy`).
type JobSpec struct {
	ID         uint16
	Mask       uint32
	Group      uint16
	PSPort     int
	ResultToPS bool
	Priority   uint8
	PolicyID   int
	PoolID     uint16
	// Window is how many of the job's all-reduces may be in flight at once
	// (0: DefaultWindow): a contribution to an all-reduce Window or more
	// behind the newest one seen is stale and dropped, so a replay of an
	// earlier all-reduce cannot claim an aggregator.
	Window uint16
	// ReclaimHeld (Preemptive stage only: ESA) lets a contribution of the
	// job that is not a retransmission reclaim an aggregator held for
	// another chunk's PS ACK, whatever the holder's priority: the held sum
	// is already on its way to the holder's PS, whose ACK brings the
	// result to the holder's workers and, the aggregator's tag no longer
	// being the holder's, frees nothing. False: held aggregators wait for
	// their ACK (ATP's rule).
	ReclaimHeld bool
	// Budget (Hashed and Preemptive stages only: ATP's per-application
	// aggregators, AGTR_TO_USE_PER_APPLICATION) bounds the aggregators the
	// job uses: with Budget > 0, chunk c of every all-reduce uses the
	// aggregator HashIndex(MakeTag(job, 0, c mod Budget)), so the job
	// touches at most Budget aggregators, the same ones all run long. 0:
	// HashIndex(MakeTag(job, all-reduce, c)) over the whole pool. At most
	// the pool's aggregators.
	Budget int
}

// DefaultWindow is the all-reduces of a job in flight at once unless its
// JobSpec says otherwise: a synchronous job's workers are at most one
// all-reduce apart (one finishes all-reduce k only once every worker has
// contributed to it), so two are in flight.
const DefaultWindow = 2

// PortSource is the address a port's host sends from (port security): a
// frame arriving on the port from another source MAC or IPv4 address is
// dropped (ReasonSpoofed). A port without one accepts any source.
type PortSource struct {
	MAC [6]byte
	IP  netip.Addr
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
	jobs     []*Job              // indexed by job id
	gone     map[uint16]JobStats // counters of removed jobs, by id
	pools    map[uint16]*Pool
	stages   map[int]SlotStage // by stage id
	rewrites []*Rewrite        // by replication id (nil: none)
	nodes    []mcNode          // by node handle
	groups   map[uint16][]int
	members  [][]McastMember // by group, derived from groups+nodes
	l2       map[[6]byte]int
	routes   []route        // sorted by prefix length, longest first
	l2Def    int            // default egress port for misses, -1 drop
	sources  [][]PortSource // by port: port security (none: any source)
}
