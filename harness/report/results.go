package report

import (
	"encoding/json"
	"fmt"
	"math"
	"runtime/debug"
	"strconv"
	"strings"
	"time"

	"github.com/inabox/inabox/harness/testbed"
)

// Num is a float64 written to JSON with 12 significant digits (null for
// NaN or ±Inf), so equal runs give byte-identical results.json.
type Num float64

// MarshalJSON implements json.Marshaler.
func (n Num) MarshalJSON() ([]byte, error) {
	f := float64(n)
	if math.IsNaN(f) || math.IsInf(f, 0) {
		return []byte("null"), nil
	}
	f = roundSig(f)
	// As encoding/json: plain decimals unless very small or very large.
	if a := math.Abs(f); a != 0 && (a < 1e-6 || a >= 1e21) {
		return strconv.AppendFloat(nil, f, 'e', -1, 64), nil
	}
	return strconv.AppendFloat(nil, f, 'f', -1, 64), nil
}

// roundSig rounds to 12 significant digits.
func roundSig(f float64) float64 {
	r, _ := strconv.ParseFloat(strconv.FormatFloat(f, 'g', 12, 64), 64)
	return r
}

func seconds(d time.Duration) Num { return Num(d.Seconds()) }

// Point is one sample of a time series or CDF, written as [x, y].
type Point struct{ X, Y Num }

// MarshalJSON writes [x, y].
func (p Point) MarshalJSON() ([]byte, error) {
	x, _ := p.X.MarshalJSON()
	y, _ := p.Y.MarshalJSON()
	return []byte("[" + string(x) + "," + string(y) + "]"), nil
}

// ResultsSchemaVersion is the version of the results format
// (docs/results-format.md, docs/results.schema.json): it changes when a
// field is removed, renamed or changes meaning, not when one is added.
const ResultsSchemaVersion = 1

// Results is what a run measured. Times are virtual seconds.
type Results struct {
	SchemaVersion int `json:"schema_version"`
	// Tool is the program and its version: "inabox v1.2.0" for a release,
	// "inabox (devel)" for a build from source.
	Tool     string `json:"tool"`
	Scenario string `json:"scenario"`
	Policy   string `json:"policy"`
	Seed     uint64 `json:"seed"`
	End      Num    `json:"end_s"`
	// Bin is the width of the time series' bins (throughput, memory), s.
	Bin     Num         `json:"bin_s"`
	Summary Summary     `json:"summary"`
	Jobs    []JobResult `json:"jobs"`
	Memory  Memory      `json:"memory"`
	// Throughput is the aggregation throughput of all jobs over time:
	// (bin start s, elements/s), each all-reduce's elements spread evenly
	// over its duration.
	Throughput []Point `json:"throughput"`
	// CollisionRate is every job's collisions over time: (bin start s,
	// packets that found no aggregator per second), sampled every step of
	// the runner and spread evenly between samples.
	CollisionRate []Point `json:"collision_rate"`
	// PSPathSeries is the PS-path fraction over time: (bin start s, the
	// share of the bin's chunks completed at the PS, null where none
	// completed), each all-reduce's chunks of either path spread evenly
	// over it; empty for a policy without a PS path.
	PSPathSeries []Point `json:"ps_path_fraction_series"`
	// JCTCDF is the empirical CDF of finished jobs' JCT: (s, fraction).
	JCTCDF []Point `json:"jct_cdf"`
	// Faults are the scenario's faults that fired, in time order.
	Faults []FaultRecord `json:"faults,omitempty"`
	// Costs are the host costs the run modelled; absent: none
	// (docs/costs.md).
	Costs *HostCosts `json:"host_costs,omitempty"`
	// PSLayout says where the parameter servers were when not each job's
	// own on its own link (topology.ps.placement dedicated, the default):
	// shared PSs or co-located ones. Absent: dedicated.
	PSLayout string `json:"ps_layout,omitempty"`
	// DynaINA are DynaINA's scheduler decisions over the run (a dynaina
	// policy or ablation variant only; docs/dynaina.md).
	DynaINA *DynaINAStats `json:"dynaina,omitempty"`
	// SwitchML is SwitchML's admission over the run (policy switchml only;
	// host/baseline/README.md).
	SwitchML *SwitchMLStats `json:"switchml,omitempty"`
	// ScenarioAsRun is the scenario as it ran: every default filled in,
	// generated jobs listed, this run's policy and seed (the format of
	// docs/scenarios.md, as JSON).
	ScenarioAsRun json.RawMessage `json:"scenario_as_run,omitempty"`
}

// Tool is this program's name and version for Results.Tool: the main
// module's version when it is a release (a tag, not a pseudo-version or a
// modified tree), else (devel), so that two builds of the same source write
// the same results.
func Tool() string {
	v := "(devel)"
	if bi, ok := debug.ReadBuildInfo(); ok {
		// a release vX.Y.Z: no pre-release or pseudo-version part, no +dirty
		if m := bi.Main.Version; strings.HasPrefix(m, "v") && !strings.ContainsAny(m, "-+") {
			v = m
		}
	}
	return "inabox " + v
}

// DynaINAStats count DynaINA's scheduler decisions over a run: ALLOC
// requests (Allocs: one per all-reduce, and again when its PS asks anew
// after a collision or a reboot),
// all-reduces granted memory (Grants; Loans of them
// out of another job's idle pool), waited in a queue (Queued), ran on the
// PS path (PSPath; Expired of them after waiting out their queue's bound),
// and the grants refused for falling outside the job's pool (Outside:
// always 0, else the run fails).
type DynaINAStats struct {
	Allocs  uint64 `json:"allocs"`
	Grants  uint64 `json:"grants"`
	Loans   uint64 `json:"loans"`
	Queued  uint64 `json:"queued"`
	PSPath  uint64 `json:"ps_path"`
	Expired uint64 `json:"expired"`
	Outside uint64 `json:"outside"`
	// LendTried counts the all-reduces idle-pool lending considered (only
	// with lending on), and the others why those without a loan got none
	// (dynaina.LendRefusals): no other pool idle, none larger than the
	// borrower's own, no return prediction, predicted back too soon.
	LendTried       uint64 `json:"lend_tried"`
	LendNoIdle      uint64 `json:"lend_no_idle"`
	LendTooSmall    uint64 `json:"lend_too_small"`
	LendUnpredicted uint64 `json:"lend_unpredicted"`
	LendTooSoon     uint64 `json:"lend_too_soon"`
}

// SwitchMLStats count SwitchML's admissions over a run: jobs admitted
// (granted a pool), Waited of them after finding too little memory free,
// and how long admitted jobs waited from their first JOIN to their pool,
// in all (WaitS) and at most (WaitMaxS).
type SwitchMLStats struct {
	Admitted uint64 `json:"admitted"`
	Waited   uint64 `json:"waited"`
	WaitS    Num    `json:"wait_s"`
	WaitMaxS Num    `json:"wait_max_s"`
}

// HostCosts are a run's modelled host costs, at true scale (before the
// scenario's rate_scale). A zero field is a cost not modelled.
type HostCosts struct {
	// SoftwareStackGbps and SoftwareStackLatency are the workers' host
	// stack, and the PSs' unless PSStackGiven: the software network stack
	// of the policies that run one, or the limit a scenario gives an RDMA
	// policy's NICs (topology.host_costs).
	// SoftwareStackTxGbps and SoftwareStackRxGbps are its rates as the
	// host sends and receives where they differ from SoftwareStackGbps.
	SoftwareStackGbps    float64 `json:"software_stack_gbps,omitempty"`
	SoftwareStackTxGbps  float64 `json:"software_stack_tx_gbps,omitempty"`
	SoftwareStackRxGbps  float64 `json:"software_stack_rx_gbps,omitempty"`
	SoftwareStackLatency Num     `json:"software_stack_latency_s,omitempty"`
	// PSStackGbps, PSStackTxGbps, PSStackRxGbps and PSStackLatency are
	// the PSs' own links' host stack when it differs from the workers'
	// (PSStackGiven).
	PSStackGbps    float64 `json:"ps_stack_gbps,omitempty"`
	PSStackTxGbps  float64 `json:"ps_stack_tx_gbps,omitempty"`
	PSStackRxGbps  float64 `json:"ps_stack_rx_gbps,omitempty"`
	PSStackLatency Num     `json:"ps_stack_latency_s,omitempty"`
	PSStackGiven   bool    `json:"ps_stack_given,omitempty"`
	// NIC marks a policy whose hosts offload to an RDMA NIC: its stack
	// cost is the NIC's (printed as such).
	NIC bool `json:"-"`
	// PSCores, PSGbpsPerCore and PSPerPacket are every PS's CPU.
	PSCores       int     `json:"ps_cpu_cores,omitempty"`
	PSGbpsPerCore float64 `json:"ps_cpu_gbps_per_core,omitempty"`
	PSPerPacket   Num     `json:"ps_cpu_per_packet_s,omitempty"`
}

// String is the costs in a few words ("none" if none).
func (h *HostCosts) String() string {
	if h == nil {
		return "no host cost"
	}
	var parts []string
	stack := func(name string, gbps, tx, rx float64, latency Num) string {
		s := name
		if gbps > 0 {
			s += fmt.Sprintf(" %g Gb/s", gbps)
		}
		if tx > 0 {
			s += fmt.Sprintf(" sending %g Gb/s", tx)
		}
		if rx > 0 {
			s += fmt.Sprintf(" receiving %g Gb/s", rx)
		}
		if latency > 0 {
			s += " +" + FormatSeconds(latency) + "/packet"
		}
		if gbps <= 0 && tx <= 0 && rx <= 0 && latency <= 0 {
			s += " none"
		}
		return s
	}
	name := "software stack"
	if h.NIC {
		name = "NIC"
	}
	if h.SoftwareStackGbps > 0 || h.SoftwareStackTxGbps > 0 || h.SoftwareStackRxGbps > 0 || h.SoftwareStackLatency > 0 || h.PSStackGiven {
		if h.PSStackGiven {
			name = "workers' " + name
		}
		parts = append(parts, stack(name, h.SoftwareStackGbps, h.SoftwareStackTxGbps, h.SoftwareStackRxGbps, h.SoftwareStackLatency))
	}
	if h.PSStackGiven {
		ps := "PSs' software stack"
		if h.NIC {
			ps = "PSs' NIC"
		}
		parts = append(parts, stack(ps, h.PSStackGbps, h.PSStackTxGbps, h.PSStackRxGbps, h.PSStackLatency))
	}
	if h.PSCores > 0 {
		s := fmt.Sprintf("PS CPU %d cores", h.PSCores)
		if h.PSGbpsPerCore > 0 {
			s += fmt.Sprintf(" × %g Gb/s", h.PSGbpsPerCore)
		}
		if h.PSPerPacket > 0 {
			s += " +" + FormatSeconds(h.PSPerPacket) + "/packet"
		}
		parts = append(parts, s)
	}
	if len(parts) == 0 {
		return "no host cost"
	}
	return strings.Join(parts, ", ")
}

// FaultRecord is one fault that fired: at At (virtual seconds), of Kind on
// Target (a link's host, a node, or "sw"), for Duration seconds (0: none or
// for good), with Value where the kind takes one.
type FaultRecord struct {
	At        Num     `json:"at_s"`
	Kind      string  `json:"kind"`
	Target    string  `json:"target,omitempty"`
	Duration  Num     `json:"duration_s"`
	Value     float64 `json:"value,omitempty"`
	LoseState bool    `json:"lose_state,omitempty"`
	// Direction is the link direction (up: toward the switch, down: from
	// it) of a link fault on one direction only.
	Direction string `json:"direction,omitempty"`
	// When is the event the fault was timed from, if any.
	When string `json:"when,omitempty"`
}

// Summary aggregates over jobs. Undefined values (no data) are null.
type Summary struct {
	Jobs         int `json:"jobs"`
	JobsFinished int `json:"jobs_finished"`
	// Makespan is the last finish (or the end of the run if a job did not
	// finish) minus the first arrival.
	Makespan Num `json:"makespan_s"`
	JCTMean  Num `json:"jct_mean_s"`
	JCTP50   Num `json:"jct_p50_s"`
	JCTP95   Num `json:"jct_p95_s"`
	JCTMax   Num `json:"jct_max_s"`
	// IterMean is the mean over jobs of each job's mean iteration time.
	IterMean Num `json:"iter_time_mean_s"`
	// AggThroughput is all elements aggregated / the time at least one
	// all-reduce was running (elements/s).
	AggThroughput Num   `json:"agg_throughput_eps"`
	Elements      int64 `json:"elements"`
	// MemUtilMean and MemUtilPeak are Memory's, repeated for the table:
	// reserved memory. MemInUseMean is the time-averaged share of the
	// switch in use by a chunk (holding its partial or complete sum);
	// MemInUseShare the share of the reserved slot-seconds in use (the
	// rest is reserved but idle).
	MemUtilMean         Num   `json:"mem_util_mean"`
	MemUtilPeak         Num   `json:"mem_util_peak"`
	MemInUseMean        Num   `json:"mem_in_use_mean"`
	MemInUseShare       Num   `json:"mem_in_use_share"`
	UsefulPerSlotSecond Num   `json:"useful_aggs_per_slot_s"`
	Collisions          int64 `json:"collisions"`
	SwitchChunks        int64 `json:"switch_chunks"`
	PSChunks            int64 `json:"ps_chunks"`
	PSFraction          Num   `json:"ps_path_fraction"`
	Retransmissions     int64 `json:"retransmissions"`
	// Drops are every frame dropped on the way in the run, by cause
	// (whoever it claimed to be; a job's own are in its JobResult).
	Drops testbed.Drops `json:"drops"`
}

// JobResult is one job's measurements.
type JobResult struct {
	Name     string `json:"name"`
	Model    string `json:"model"`
	Workers  int    `json:"workers"`
	Arrival  Num    `json:"arrival_s"`
	Finished bool   `json:"finished"`
	// Finish is the completion time, or the end of the run if unfinished;
	// JCT is Finish − Arrival (a lower bound if unfinished).
	Finish     Num `json:"finish_s"`
	JCT        Num `json:"jct_s"`
	Iterations int `json:"iterations"` // completed
	IterMean   Num `json:"iter_time_mean_s"`
	IterP50    Num `json:"iter_time_p50_s"`
	IterP95    Num `json:"iter_time_p95_s"`
	IterP99    Num `json:"iter_time_p99_s"`
	// CommTime is the total time in all-reduce; AggThroughput is elements /
	// CommTime.
	CommTime            Num   `json:"comm_time_s"`
	Elements            int64 `json:"elements"`
	AggThroughput       Num   `json:"agg_throughput_eps"`
	Aggregations        int64 `json:"useful_aggs"`
	SlotSeconds         Num   `json:"occupied_slot_s"`
	UsefulPerSlotSecond Num   `json:"useful_aggs_per_slot_s"`
	// InUseSlotSeconds are the job's slot-seconds in use by a chunk (a
	// part of SlotSeconds, reserved); InUseShare their share of it.
	InUseSlotSeconds Num   `json:"in_use_slot_s"`
	InUseShare       Num   `json:"in_use_share"`
	Collisions       int64 `json:"collisions"`
	SwitchChunks     int64 `json:"switch_chunks"`
	PSChunks         int64 `json:"ps_chunks"`
	PSFraction       Num   `json:"ps_path_fraction"`
	Retransmissions  int64 `json:"retransmissions"`
	// Drops are the job's frames dropped on the way, by cause: on its
	// workers' links, by its workers, and by the switch for packets that
	// claimed the job.
	Drops testbed.Drops `json:"drops"`
	// Throughput is the job's aggregation throughput over time.
	Throughput []Point `json:"throughput"`
	// InUseSlots are the job's slots in use by a chunk over time: (bin
	// start s, mean over the bin), sampled every step of the runner (a part
	// of what the job reserves, memory.series).
	InUseSlots []Point           `json:"in_use_slots"`
	Iters      []IterationResult `json:"iteration_log"`
}

// IterationResult is one iteration; times are -1 when not seen.
type IterationResult struct {
	Iteration      int   `json:"iteration"`
	Start          Num   `json:"start_s"`
	AllReduceStart Num   `json:"allreduce_start_s"`
	AllReduceEnd   Num   `json:"allreduce_end_s"`
	End            Num   `json:"end_s"`
	Bytes          int64 `json:"bytes"`
	Elements       int64 `json:"elements"`
}

// Duration is End − Start, or -1 if either is missing.
func (it IterationResult) Duration() Num {
	if it.Start < 0 || it.End < 0 {
		return -1
	}
	return it.End - it.Start
}

// CommTime is AllReduceEnd − AllReduceStart, or -1 if either is missing.
func (it IterationResult) CommTime() Num {
	if it.AllReduceStart < 0 || it.AllReduceEnd < 0 {
		return -1
	}
	return it.AllReduceEnd - it.AllReduceStart
}

// Memory is switch memory use over the run.
type Memory struct {
	TotalSlots int `json:"total_slots"`
	// MeanUtilization is the time average over [0, end] of occupied /
	// total slots; PeakUtilization its maximum.
	MeanUtilization Num `json:"mean_utilization"`
	PeakUtilization Num `json:"peak_utilization"`
	// OccupiedSlotSeconds integrates occupied slots over time;
	// UsefulPerSlotSecond is useful aggregations / OccupiedSlotSeconds.
	OccupiedSlotSeconds Num `json:"occupied_slot_s"`
	// InUseSlotSeconds integrates the slots in use by a chunk (holding
	// its partial or complete sum) over time, every job.
	InUseSlotSeconds    Num   `json:"in_use_slot_s"`
	UsefulAggregations  int64 `json:"useful_aggs"`
	UsefulPerSlotSecond Num   `json:"useful_aggs_per_slot_s"`
	// Utilization is occupied / total over time: (bin start s, mean over
	// the bin).
	Utilization []Point `json:"utilization"`
	// Series is each (pool, job)'s mean occupied slots per bin, sorted by
	// pool then job.
	Series []OccupancySeries `json:"series"`
}

// OccupancySeries is one (pool, job) pair's occupancy.
type OccupancySeries struct {
	Pool        string  `json:"pool"`
	Job         string  `json:"job"`
	PeakSlots   int     `json:"peak_slots"`
	SlotSeconds Num     `json:"occupied_slot_s"`
	Slots       []Point `json:"slots"`
}
