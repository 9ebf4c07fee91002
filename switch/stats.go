package sw

// Reason says what the pipeline did with a frame. It is reported in
// Frame.Reason and counted in Stats.ByReason.
type Reason uint8

const (
	ReasonNone          Reason = iota
	ReasonForward              // non-INA, forwarded by l2_fwd / ipv4_lpm
	ReasonNoRoute              // non-INA, table miss: dropped
	ReasonMalformed            // INA marker but bad header: dropped
	ReasonForeign              // INA from a (port, QP) not installed, or job/worker mismatch: dropped
	ReasonNoJob                // ina_worker hit but ina_job miss: dropped
	ReasonAbsorbed             // contribution added, not last: dropped
	ReasonDuplicate            // contribution already counted: dropped
	ReasonResult               // completing contribution: carries the result
	ReasonResent               // retransmission after completion: result unicast back
	ReasonCollision            // no aggregator: marked, sent to the PS
	ReasonPreempted            // preempted partial sum sent to its PS
	ReasonHostOverflow         // host set FlagOverflow: not aggregated, sent to the PS
	ReasonAck                  // PS result/ACK: releases, multicast to the group
	ReasonTooLong              // needs more than MaxPasses passes: dropped
	ReasonBadICRC              // an INA packet whose ICRC is wrong (damaged past the FCS): dropped before any register
	ReasonSpoofed              // a frame whose source MAC or IPv4 address is not its port's: dropped
	ReasonForgedResult         // an INA result (FlagResult) not from the job's PS port: dropped (only the switch and the PS originate results)
	ReasonForgedControl        // a GRANT or LEFT from a port (only the switch originates them): dropped
	ReasonStale                // a contribution to an all-reduce or chunk older than the job's window: dropped
	ReasonBadBitmap            // a contribution whose bitmap is not exactly its worker's bit: dropped
	ReasonOutOfRange           // a contribution to a chunk beyond its all-reduce's lease: dropped
	ReasonForced               // a retransmission forced its chunk's partial sum out to the PS (ATP), freeing the aggregator
	numReasons
)

var reasonNames = [numReasons]string{"none", "forward", "no-route", "malformed", "foreign", "no-job",
	"absorbed", "duplicate", "result", "resent", "collision", "preempted", "host-overflow", "ack", "too-long",
	"bad-icrc", "spoofed-source", "forged-result", "forged-control", "stale", "bad-bitmap", "out-of-range", "forced"}

// Dropped reports whether the reason is a drop of a frame the switch
// refused (malformed, foreign, damaged, forged, stale), as opposed to
// what it consumed or forwarded.
func (r Reason) Dropped() bool {
	switch r {
	case ReasonNoRoute, ReasonMalformed, ReasonForeign, ReasonNoJob, ReasonTooLong, ReasonBadICRC, ReasonSpoofed,
		ReasonForgedResult, ReasonForgedControl, ReasonStale, ReasonBadBitmap, ReasonOutOfRange:
		return true
	}
	return false
}

// Reasons returns every reason, in order.
func Reasons() []Reason {
	out := make([]Reason, numReasons)
	for i := range out {
		out[i] = Reason(i)
	}
	return out
}

func (r Reason) String() string {
	if r < numReasons {
		return reasonNames[r]
	}
	return "invalid"
}

// Stats are switch-wide counters.
type Stats struct {
	Packets        uint64 // frames processed
	Batches        uint64
	INAPackets     uint64 // frames parsed as INA
	Passes         uint64 // pipeline passes (INA packets: 1 + recirculations)
	Recirculations uint64 // extra passes: each costs one packet slot of pipeline capacity
	Values         uint64 // int32 values processed by value stages
	ByReason       [numReasons]uint64
	// Slot occupancy, in slots (an aggregator of stride k counts k).
	SlotsFree, SlotsClaimed, SlotsComplete int
}

// PortStats are per-port counters.
type PortStats struct {
	RxPackets, RxBytes uint64
	TxPackets, TxBytes uint64
	Drops              uint64 // frames received on the port and dropped
}

// Stats returns a snapshot of the switch counters.
func (s *Switch) Stats() Stats {
	s.mu.Lock()
	defer s.mu.Unlock()
	st := s.stats
	st.SlotsFree = s.stateSlots[StateFree]
	st.SlotsClaimed = s.stateSlots[StateClaimed]
	st.SlotsComplete = s.stateSlots[StateComplete] + s.stateSlots[StateHeld]
	return st
}

// PortStats returns the counters of port p.
func (s *Switch) PortStats(p int) PortStats {
	s.mu.Lock()
	defer s.mu.Unlock()
	if p < 0 || p >= len(s.ports) {
		return PortStats{}
	}
	return s.ports[p]
}

// JobStats returns the counters of job id, installed or removed.
func (s *Switch) JobStats(id uint16) (JobStats, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if int(id) >= len(s.t.jobs) || s.t.jobs[id] == nil {
		st, ok := s.t.gone[id]
		return st, ok
	}
	return s.t.jobs[id].stats, true
}

// PoolStats returns the counters of pool id.
func (s *Switch) PoolStats(id uint16) (PoolStats, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	p := s.t.pools[id]
	if p == nil {
		return PoolStats{}, false
	}
	return p.stats, true
}

// PipelineLoad returns passes per processed INA packet: 1.0 means no
// recirculation; 4.0 means each packet used four packet slots of pipeline
// capacity, so the switch's INA packet rate is a quarter of line rate.
func (st Stats) PipelineLoad() float64 {
	if st.INAPackets == 0 {
		return 0
	}
	return float64(st.Passes) / float64(st.INAPackets)
}
