package scenario

import (
	"fmt"
	"math"
	"strconv"
	"time"
)

// JobPlan is a job resolved against its model, the scaling and the
// topology: what the runner builds.
type JobPlan struct {
	Index      int // position in jobs; the switch job id is Index+1
	Name       string
	Model      Model
	Workers    int
	Iterations int
	Arrival    time.Duration
	Priority   int
	// Hosts[i] runs worker i; PS aggregates what the switch does not.
	Hosts []string
	PS    string
	// Per all-reduce, after tensor_scale: int32 elements, payload bytes and
	// INA packets per worker.
	Elements, Bytes, Packets int64
	// Compute is the per-iteration compute time (the model's, or derived
	// from comm_ratio).
	Compute time.Duration
	// CommIdeal is the all-reduce lower bound at the scaled link rate with
	// INA headers; CommRatio is CommIdeal / Compute.
	CommIdeal time.Duration
	CommRatio float64
}

// Plan resolves every job. The scenario must be valid for models.
// Worker placement: with topology.hosts 0 each worker has its own host,
// jobs taking consecutive hosts; otherwise job j's workers start at host
// (sum of earlier jobs' workers) mod hosts, wrapping, so jobs share hosts
// evenly. Job j uses ps<PSOf(j)>.
func (s *Scenario) Plan(models Models) []JobPlan {
	hosts := s.HostNames()
	vpp := int64(s.Topology.Switch.ValuesPerPacket)
	eff := WireEfficiency(int(vpp), INAHeaderBytes)
	rate := float64(s.LinkBitsPerSecond())
	out := make([]JobPlan, len(s.Jobs))
	off := 0
	for i, j := range s.Jobs {
		m := models[j.Model]
		elems := max(int64(math.Ceil(float64(m.Elements())*s.Scaling.TensorScale)), 1)
		p := JobPlan{Index: i, Name: j.Name, Model: m, Workers: j.Workers, Iterations: j.Iterations,
			Arrival: j.Arrival.D(), Priority: j.Priority, PS: "ps" + strconv.Itoa(s.PSOf(i)),
			Elements: elems, Bytes: 4 * elems, Packets: (elems + vpp - 1) / vpp, Compute: m.Compute()}
		for w := 0; w < j.Workers; w++ {
			p.Hosts = append(p.Hosts, hosts[(off+w)%len(hosts)])
		}
		off += j.Workers
		if rate > 0 {
			p.CommIdeal = time.Duration(math.Round(float64(p.Bytes) * 8 / (rate * eff) * 1e9))
		}
		if j.CommRatio > 0 {
			p.Compute = time.Duration(math.Round(float64(p.CommIdeal) / j.CommRatio))
		}
		if p.Compute > 0 {
			p.CommRatio = float64(p.CommIdeal) / float64(p.Compute)
		}
		out[i] = p
	}
	return out
}

// Estimate is a rough cost of a scenario for the emulator.
type Estimate struct {
	// WorkerPackets is the INA packets all workers send over the run (no
	// retransmissions); the emulator handles about 3 packet events per
	// worker packet (to the switch, result multicast, RC ACK).
	WorkerPackets int64
	// VirtualTime is a lower bound on the makespan: the latest of arrival +
	// iterations × (compute + ideal all-reduce) over the jobs.
	VirtualTime time.Duration
}

// Estimate computes the cost estimate. The scenario must be valid for
// models.
func (s *Scenario) Estimate(models Models) Estimate {
	var e Estimate
	for _, p := range s.Plan(models) {
		e.WorkerPackets += p.Packets * int64(p.Workers) * int64(p.Iterations)
		e.VirtualTime = max(e.VirtualTime, p.Arrival+time.Duration(p.Iterations)*(p.Compute+p.CommIdeal))
	}
	return e
}

// FixedTraversals is the most link traversals an all-reduce of the shipped
// policies waits for beyond its transfer: FreeINA's BEGIN → PS, ALLOC →
// switch, GRANT → PS, PLAN → worker, then the last chunk's round trip
// (../shared review: SwitchML 2, ATP 4, FreeINA 8).
const FixedTraversals = 8

// LatencyShareWarn is the share of a job's ideal all-reduce that fixed
// latencies may take before Warnings says so.
const LatencyShareWarn = 0.05

// Warnings are what makes the scenario's comparisons suspect though it is
// valid: fixed per-all-reduce latencies (FixedTraversals link delays) that
// are a large share of a job's ideal all-reduce, as when link delays are
// stretched by 1/rate_scale to keep the bandwidth-delay product while the
// transfer keeps its length. Each names the field, the job and the share.
func (s *Scenario) Warnings(models Models) []string {
	var out []string
	fixed := time.Duration(FixedTraversals) * s.Topology.LinkDelay.D()
	for _, p := range s.Plan(models) {
		if p.CommIdeal <= 0 {
			continue
		}
		share := float64(fixed) / float64(p.CommIdeal)
		if share <= LatencyShareWarn {
			continue
		}
		w := fmt.Sprintf("topology.link_delay: %v: %d link traversals (%v) are %.0f %% of job %s's ideal all-reduce (%v); "+
			"fixed latencies weigh far more on policies with more round trips than at true scale",
			s.Topology.LinkDelay, FixedTraversals, fixed, 100*share, p.Name, p.CommIdeal.Round(time.Microsecond))
		if rs := s.Scaling.RateScale; rs < 1 {
			w += fmt.Sprintf(" (%.2g %% there if the delay was stretched by 1/rate_scale)", 100*share*rs)
		}
		out = append(out, w)
	}
	return out
}
