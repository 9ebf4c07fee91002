package sw

import "hash/crc32"

// Tag is an aggregator's owner tag: job (16 bits), all-reduce (16) and chunk
// (32). Zero means free (job 0 is reserved).
type Tag uint64

// MakeTag builds a tag.
func MakeTag(job, allreduce uint16, chunk uint32) Tag {
	return Tag(job)<<48 | Tag(allreduce)<<32 | Tag(chunk)
}

func (t Tag) Job() uint16       { return uint16(t >> 48) }
func (t Tag) AllReduce() uint16 { return uint16(t >> 32) }
func (t Tag) Chunk() uint32     { return uint32(t) }

// SlotState is the state of an aggregator.
type SlotState uint8

const (
	// StateFree: no owner.
	StateFree SlotState = iota
	// StateClaimed: owned, some contributions absorbed, not complete.
	StateClaimed
	// StateComplete: all contributions in; the result was sent and is kept
	// for retransmissions until the policy lets another chunk reclaim it.
	StateComplete
	// StateHeld: complete and sent to the PS; held until the PS's ACK (ATP).
	StateHeld
)

func (s SlotState) String() string {
	switch s {
	case StateFree:
		return "free"
	case StateClaimed:
		return "claimed"
	case StateComplete:
		return "complete"
	case StateHeld:
		return "held"
	}
	return "invalid"
}

// Occupant describes the current owner of an aggregator, for Contend.
type Occupant struct {
	Tag      Tag
	State    SlotState // StateClaimed, StateComplete or StateHeld
	Priority uint8     // priority of the owner's job when it claimed
	Bitmap   uint32
}

// Verdict is a policy's decision for a contribution that finds its
// aggregator owned by another chunk.
type Verdict uint8

const (
	// Collide: leave the aggregator alone; the packet is marked
	// (FlagCollision) and forwarded to the job's PS (ATP fallback).
	Collide Verdict = iota
	// Reclaim: the owner is done with it; the packet claims it afresh.
	Reclaim
	// Preempt: evict the owner's partial sum to the owner's PS (the packet
	// carries it out, FlagPartial) and claim the aggregator (ESA).
	Preempt
)

// Policy allocates aggregators to chunks. It is consulted on the hot path,
// once per INA packet, under the switch's lock; it must not allocate or
// block. State it keeps (leases, pool maps) is changed through its own
// control-plane methods, which must take Switch.Lock / Unlock around
// changes if the switch is running.
//
// Plugging in other schemes:
//   - DynaINA pools: jobs are placed in pools with SetJob/SetPool (resize,
//     split, merge = SetPool on new ranges plus SetJob of the affected jobs,
//     then ResetSlots of the freed ranges); within a pool Static or Hashed
//     locate aggregators, or a custom Policy time-shares one pool.
//   - FreeINA all-reduce-level allocation: a custom Policy whose Locate
//     looks up the (job, all-reduce) lease installed by its controller when
//     the all-reduce starts and returns ok=false when there is none (the
//     packet then takes the PS path, FlagCollision); the lease is dropped
//     when the all-reduce ends or times out, followed by ResetSlots.
//     Implement CompletionObserver to learn when chunks complete.
type Policy interface {
	// Name identifies the policy in reports.
	Name() string
	// Locate returns the first slot of the aggregator for chunk tag of job
	// j, or ok=false if the job has no memory for it. The returned slot
	// must lie in j.Pool and be Base + k*Stride for some k.
	Locate(j *Job, tag Tag) (slot int, ok bool)
	// Contend decides what a contribution of job j does at an aggregator
	// owned by another tag.
	Contend(j *Job, cur Occupant) Verdict
}

// CompletionObserver is optionally implemented by a Policy that wants to
// know when an aggregator completes (all workers in) or is released by a
// PS acknowledgement.
type CompletionObserver interface {
	Completed(j *Job, tag Tag, slot int)
	Released(j *Job, tag Tag, slot int)
}

// Static is SwitchML's allocation: each job owns a fixed slot range (its
// pool) and chunk c uses aggregator c mod Aggregators(). Hosts keep at most
// half the pool in flight, so the two halves act as SwitchML's shadow sets:
// a completed aggregator keeps its result (for retransmissions) until the
// chunk one pool-length later reclaims it.
type Static struct{}

func (Static) Name() string { return "static" }

func (Static) Locate(j *Job, tag Tag) (int, bool) {
	p := j.Pool
	n := uint32(p.Slots / p.Stride)
	return p.Base + int(tag.Chunk()%n)*p.Stride, true
}

func (Static) Contend(j *Job, cur Occupant) Verdict {
	if cur.State == StateComplete && cur.Tag.Job() == j.ID {
		return Reclaim
	}
	return Collide
}

// Hashed is ATP's allocation: aggregator = CRC32(job, all-reduce, chunk) mod
// Aggregators() in a pool that jobs may share; claimed by the first packet,
// released on completion (results multicast by the switch) or, with
// Job.ResultToPS, by the PS's ACK. A busy aggregator means a collision: the
// packet is marked and goes to the PS.
type Hashed struct{}

func (Hashed) Name() string { return "hashed" }

func (Hashed) Locate(j *Job, tag Tag) (int, bool) { return hashLocate(j, tag), true }

func (Hashed) Contend(j *Job, cur Occupant) Verdict {
	if cur.State == StateComplete {
		return Reclaim
	}
	return Collide
}

// Preemptive is ESA's allocation: hashed like ATP, but a contribution of a
// higher-priority job preempts a lower-priority partial aggregate, whose
// partial sum is sent to its own PS. Completed aggregators are reclaimable
// by anyone.
type Preemptive struct{}

func (Preemptive) Name() string { return "preemptive" }

func (Preemptive) Locate(j *Job, tag Tag) (int, bool) { return hashLocate(j, tag), true }

func (Preemptive) Contend(j *Job, cur Occupant) Verdict {
	switch {
	case cur.State == StateComplete:
		return Reclaim
	case cur.State == StateClaimed && j.Priority > cur.Priority:
		return Preempt
	}
	return Collide
}

// HashIndex is the aggregator hash shared with the P4 twin: CRC-32 (IEEE,
// as v1model's HashAlgorithm.crc32 on BMv2) over the big-endian bytes of
// job, all-reduce and chunk, modulo n.
func HashIndex(tag Tag, n int) int {
	// Slicing-by-8 over exactly 8 bytes: the eight table lookups are
	// independent (crc32.ChecksumIEEE would make its argument escape).
	t := uint64(tag)
	c := ^uint32(0) ^ uint32(byte(t>>56)) ^ uint32(byte(t>>48))<<8 ^ uint32(byte(t>>40))<<16 ^ uint32(byte(t>>32))<<24
	crc := crc8[7][byte(c)] ^ crc8[6][byte(c>>8)] ^ crc8[5][byte(c>>16)] ^ crc8[4][c>>24] ^
		crc8[3][byte(t>>24)] ^ crc8[2][byte(t>>16)] ^ crc8[1][byte(t>>8)] ^ crc8[0][byte(t)]
	return int(^crc % uint32(n))
}

func hashLocate(j *Job, tag Tag) int {
	p := j.Pool
	return p.Base + HashIndex(tag, p.Slots/p.Stride)*p.Stride
}

// crc8[k][b] is the CRC-32 (IEEE, reflected) state contribution of byte b
// followed by k zero bytes.
var crc8 = func() (t [8][256]uint32) {
	for i := 0; i < 256; i++ {
		t[0][i] = crc32.IEEETable[i]
	}
	for k := 1; k < 8; k++ {
		for i := 0; i < 256; i++ {
			p := t[k-1][i]
			t[k][i] = crc32.IEEETable[byte(p)] ^ p>>8
		}
	}
	return t
}()
