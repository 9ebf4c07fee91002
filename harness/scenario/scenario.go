package scenario

import (
	"bytes"
	"cmp"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"math"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"go.yaml.in/yaml/v3"

	"github.com/inabox/inabox/emu"
	"github.com/inabox/inabox/harness/testbed"
	sw "github.com/inabox/inabox/switch"
	"github.com/inabox/inabox/switch/inahdr"
	"github.com/inabox/inabox/testdata"
)

// A scenario file describes one experiment. Every field but jobs has a
// default; durations are Go duration strings ("10us", "1.5ms", "2s"). The
// reference with every field, default and rule is docs/scenarios.md.
//
//	name: dynaina-contention        # default: the file name without .yaml
//	description: free text
//	seed: 1                         # default 1; every random draw derives from it
//	time_limit: 120s                # virtual-time cap of the run; default 1h
//	policy: dynaina                 # a registered policy (testbed.Names); default dynaina
//	atp: {window: 0, budget: 0}     # optional: cap the atp/esa workers' chunks in flight
//	                                # (ATP's congestion control: 100; default no cap) and
//	                                # each job's aggregators (ATP's code: 2800 of 20000;
//	                                # default 0, the whole pool)
//	esa: {reclaim_held: false}      # optional: esa reclaims aggregators held for the PS's ACK
//	scaling:                        # see Scaling; defaults 1 and 1
//	  tensor_scale: 0.01
//	  rate_scale: 0.01
//	topology:
//	  link_gbps: 100                # worker link rate before rate_scale; default 100
//	  link_delay: 1us               # propagation delay of every link; default 1us
//	  queue_packets: 0              # per link direction; 0 = the emulator default
//	  hosts: 0                      # worker hosts h0..; 0 = one per worker (sum of workers)
//	  switch:
//	    slots: 16384                # aggregator slots; default 16384
//	    values_per_packet: 64       # int32 values per INA packet; default 64
//	    pass_time: 1ns              # pipeline time per pass; default 1ns
//	    latency: 0s                 # parser-to-deparser latency; default 0
//	  ps:
//	    placement: dedicated        # dedicated (default): each job its own PS ps<j>
//	                                # on its own host and link, as ATP runs one per
//	                                # application; shared: `count` PSs serve every
//	                                # job (job j on ps<j mod count>), sharing links;
//	                                # co-located: job j's PS ps<j> on the host of its
//	                                # worker rank 0, sharing that host's one link
//	                                # (no count, no link_gbps; a link fault on the
//	                                # host h<k> or on ps<j> hits both)
//	    count: 1                    # shared only: parameter servers ps0..; default 1
//	    link_gbps: 100              # each PS link's rate before rate_scale; default link_gbps
//	                                # (a PS that sums in software at R Gb/s: link_gbps R)
//	    cpu:                        # optional: every PS's CPU, under every policy; default none
//	      cores: 12                 # each received packet waits for one of the cores
//	      gbps_per_core: 3.8        # per-byte cost: a core moves this many Gb/s (before rate_scale)
//	      per_packet: 0s            # per-packet cost, as run (stretch it like link_delay)
//	      queue_packets: 4096       # packets waiting for a core; beyond: dropped
//	  costs: sourced                # sourced (default): software_stack defaults to each
//	                                # policy's cited figure (atp, esa: 46 Gb/s); none: no
//	                                # host cost at all (the network alone). docs/costs.md
//	  software_stack:               # optional: the hosts' software network stack under the
//	    gbps: 46                    # policies that run one (atp, esa, switchml), before
//	    latency: 0s                 # rate_scale; each field given overrides the sourced default
//	                                # (also tx_gbps, rx_gbps: sending, receiving; default gbps)
//	  host_costs:                   # optional: by policy (any, RDMA ones too) and node type;
//	    atp:                        # each field given overrides software_stack's and the
//	      workers: {gbps: 46}       # sourced default (a variant falls back to its policy's)
//	      ps: {gbps: 40, latency: 1us}
//	jobs:                           # at least one
//	  - name: vgg16-a               # [A-Za-z0-9_.-]+, unique
//	    model: vgg16                # a name in testdata/models/models.yaml
//	    workers: 4                  # 1..32
//	    iterations: 10              # 1..1000000
//	    arrival: 0s                 # default 0
//	    priority: 0                 # optional, 0..255 (higher first)
//	    comm_ratio: 0.5             # optional: compute time := ideal comm time / comm_ratio
//	faults:                         # optional; docs/scenarios.md, "Fault kinds"
//	  - {at: 50ms, kind: loss_burst, target: h0, duration: 1ms, value: 0.2, direction: up}
//	  - {kind: node_crash, target: ps0, duration: 5ms, when: {job: a, allreduce: 3, fraction: 0.5}}
//	impairments:                    # optional, per host link ("all" = every link), per direction
//	  - {link: all, loss: 0.0001}   # also jitter, duplicate, reorder, reorder_delay, corrupt
//	                                # (on the wire: dropped by the MAC, bad FCS),
//	                                # corrupt_undetected (past the FCS: the ICRC checks catch it),
//	                                # burst_loss (Gilbert–Elliott), flap, preset
//	presets:                        # optional: named impairments (built in: Presets)
//
// Fault kinds: link_down, link_up, loss_burst, duplicate_burst,
// reorder_burst, corrupt, corrupt_undetected, delay_spike, jitter_burst,
// rate_change, mtu_change (on a link, named by its host: "h3" is the link
// between h3 and the switch, "ps0" the link between ps0 and the switch;
// both directions or the one direction names), switch_reboot, switch_crash
// (target "sw") and node_crash (a host or PS). docs/scenarios.md has each
// one's duration and value.
type Scenario struct {
	Name        string   `yaml:"name" json:"name"`
	Description string   `yaml:"description,omitempty" json:"description,omitempty"`
	Seed        uint64   `yaml:"seed" json:"seed"`
	TimeLimit   Duration `yaml:"time_limit" json:"time_limit"`
	Policy      string   `yaml:"policy" json:"policy"`
	// FreeINAPath is how FreeINA and DynaINA workers send INA chunks:
	// "uc" (default: best-effort UC through the switch, RC to the PS for
	// recovery and the PS path) or "trim" (every chunk an RC message to the
	// PS, trimmed by the switch); docs/freeina.md §1 and §11.
	FreeINAPath string `yaml:"freeina_path,omitempty" json:"freeina_path,omitempty"`
	// ATP configures the atp and esa baselines.
	ATP ATP `yaml:"atp,omitempty" json:"atp,omitempty"`
	// ESA configures the esa baseline's choice its paper leaves open.
	ESA ESA `yaml:"esa,omitempty" json:"esa,omitempty"`
	// DynaINA configures the dynaina scheduler.
	DynaINA  DynaINA  `yaml:"dynaina,omitempty" json:"dynaina,omitempty"`
	Scaling  Scaling  `yaml:"scaling" json:"scaling"`
	Topology Topology `yaml:"topology" json:"topology"`
	Jobs     []Job    `yaml:"jobs" json:"jobs"`
	// Compute is every job's compute variation unless the job sets its
	// own [none: every worker exactly its profile].
	Compute *Compute `yaml:"compute,omitempty" json:"compute,omitempty"`
	// Models adds model profiles to the embedded ones (or replaces one of
	// the same name), in the format of testdata/models/models.yaml's
	// entries; ModelsFile reads more from a file in that format, relative
	// to the scenario's directory (the file's come first, then Models).
	Models     []Model `yaml:"models,omitempty" json:"models,omitempty"`
	ModelsFile string  `yaml:"models_file,omitempty" json:"models_file,omitempty"`
	// Arrivals generates more jobs (a Poisson process or a trace).
	Arrivals    *Arrivals        `yaml:"arrivals,omitempty" json:"arrivals,omitempty"`
	Faults      []Fault          `yaml:"faults,omitempty" json:"faults,omitempty"`
	Impairments []LinkImpairment `yaml:"impairments,omitempty" json:"impairments,omitempty"`
	// Presets are named impairments of the scenario's own, usable (and
	// extensible) like the built-in ones (Presets); PresetsFile reads more
	// from a file (a mapping of the same form, relative to the scenario's
	// directory), which the scenario's own of the same name replace.
	Presets     map[string]LinkImpairment `yaml:"presets,omitempty" json:"presets,omitempty"`
	PresetsFile string                    `yaml:"presets_file,omitempty" json:"presets_file,omitempty"`

	file  string
	index *nodeIndex
	// listed is how many of Jobs the file lists (the rest come from
	// Arrivals); read reads a file relative to the scenario's directory;
	// own are the profiles of Models and ModelsFile.
	listed int
	read   func(string) ([]byte, error)
	own    Models
	// filePresets are presets_file's presets.
	filePresets map[string]LinkImpairment
}

// withOwn returns models with the scenario's own profiles added.
func (s *Scenario) withOwn(models Models) Models {
	if len(s.own) == 0 {
		return models
	}
	out := make(Models, len(models)+len(s.own))
	for k, v := range models {
		out[k] = v
	}
	for k, v := range s.own {
		out[k] = v
	}
	return out
}

// ModelSet is models with the scenario's own profiles (models,
// models_file) added: what its jobs are resolved against.
func (s *Scenario) ModelSet(models Models) Models { return s.withOwn(models) }

// loadOwn reads the scenario's own model profiles.
func (s *Scenario) loadOwn(read func(string) ([]byte, error)) error {
	own := Models{}
	one := func(path, rule string) error {
		line := 0
		if s.index != nil {
			line = s.index.line(path)
		}
		return &Error{Errs: []*FieldError{{File: s.file, Line: line, Path: path, Rule: rule}}}
	}
	if s.ModelsFile != "" {
		data, err := read(s.ModelsFile)
		if err != nil {
			return one("models_file", fmt.Sprintf("%q: cannot read it: %v", s.ModelsFile, err))
		}
		ms, err := ParseModels(s.ModelsFile, data)
		if err != nil {
			return one("models_file", err.Error())
		}
		for k, v := range ms {
			own[k] = v
		}
	}
	if len(s.Models) > 0 {
		b, err := yaml.Marshal(struct {
			Models []Model `yaml:"models"`
		}{s.Models})
		if err != nil {
			return one("models", err.Error())
		}
		ms, err := ParseModels("models", b)
		if err != nil {
			var me *modelError
			if !errors.As(err, &me) {
				return one("models", err.Error())
			}
			// the problem's field under the scenario's models[i], at its line
			field, rule, _ := strings.Cut(me.problem, ": ")
			return one(fmt.Sprintf("models[%d].%s", me.index, field), rule)
		}
		for k, v := range ms {
			own[k] = v
		}
	}
	s.own = own
	return nil
}

// Scaling shrinks an experiment so it runs in minutes on 2 cores.
// tensor_scale multiplies every gradient (fewer packets per all-reduce);
// rate_scale multiplies every link rate. With equal scales an all-reduce
// takes the same virtual time as unscaled, so each job's comm/compute ratio
// and the overlap of jobs' on/off phases are kept while the packet count —
// the emulator's cost — drops by tensor_scale. What is not kept: per-packet
// serialization time grows by 1/rate_scale, so the bandwidth-delay product
// in packets shrinks by rate_scale (use a longer link_delay to keep it) and
// the switch pipeline is relatively faster. Switch memory is not scaled: a
// job holds as many slots per outstanding packet as at full size.
type Scaling struct {
	TensorScale float64 `yaml:"tensor_scale" json:"tensor_scale"`
	RateScale   float64 `yaml:"rate_scale" json:"rate_scale"`
}

// Topology is a single switch with every worker host and parameter server
// attached by one link.
type Topology struct {
	LinkGbps     float64  `yaml:"link_gbps" json:"link_gbps"`
	LinkDelay    Duration `yaml:"link_delay" json:"link_delay"`
	QueuePackets int      `yaml:"queue_packets,omitempty" json:"queue_packets,omitempty"`
	Hosts        int      `yaml:"hosts" json:"hosts"`
	Switch       Switch   `yaml:"switch" json:"switch"`
	PS           PS       `yaml:"ps" json:"ps"`
	// Costs is CostsSourced (the default: the host costs not given default
	// to each policy's cited figure, testbed Entry.Stack) or CostsNone (no
	// host cost but the ones given).
	Costs string `yaml:"costs,omitempty" json:"costs,omitempty"`
	// SoftwareStack is the cost of a software network stack on the hosts
	// of the policies that run one (atp, esa, switchml); the RDMA policies
	// offload to the NIC. Given, it overrides the sourced default.
	SoftwareStack SoftwareStack `yaml:"software_stack,omitempty" json:"software_stack,omitempty"`
	// HostCosts are host costs by policy (a registry name; an ablation
	// variant such as dynaina-pools falls back to its policy's entry) and
	// node type, each field given overriding the same field of
	// SoftwareStack and of the sourced default: under any policy,
	// software stack or RDMA NIC (HostStack).
	HostCosts map[string]HostCost `yaml:"host_costs,omitempty" json:"host_costs,omitempty"`
}

// HostCost is one policy's host costs by node type: its workers' links
// and its PSs' own links (a co-located PS shares its worker's link and
// pays Workers).
type HostCost struct {
	Workers SoftwareStack `yaml:"workers,omitempty" json:"workers,omitempty"`
	PS      SoftwareStack `yaml:"ps,omitempty" json:"ps,omitempty"`
}

// The host cost settings (topology.costs).
const (
	CostsSourced = "sourced"
	CostsNone    = "none"
)

// HostStack is the host cost, before rate_scale, that policy's workers
// (ps false) or PSs (ps true) pay on their links. Each field is, in turn:
//
//  1. topology.host_costs.<policy>.workers (or .ps), when given (the
//     policy's own entry, else an ablation variant's policy's);
//  2. topology.software_stack, when given and the policy's hosts run a
//     software stack (the registry's SoftwareStack: atp, esa, switchml);
//  3. the policy's sourced figure (registry Entry.Stack: ATP's 46 Gb/s
//     for atp and esa), unless topology.costs is none;
//  4. zero: no cost (gbps 0 is the link's rate).
func (s *Scenario) HostStack(policy string, ps bool) SoftwareStack {
	t := &s.Topology
	e, _ := testbed.Lookup(policy)
	var out SoftwareStack
	if t.Costs != CostsNone && e.SoftwareStack {
		out = SoftwareStack{Gbps: float64(e.Stack.BitsPerSecond) / 1e9, Latency: Duration(e.Stack.Latency)}
	}
	take := func(at string, st SoftwareStack) {
		if s.has(at+".gbps") || st.Gbps != 0 {
			out.Gbps = st.Gbps
		}
		if s.has(at+".tx_gbps") || st.TxGbps != 0 {
			out.TxGbps = st.TxGbps
		}
		if s.has(at+".rx_gbps") || st.RxGbps != 0 {
			out.RxGbps = st.RxGbps
		}
		if s.has(at+".latency") || st.Latency != 0 {
			out.Latency = st.Latency
		}
	}
	if e.SoftwareStack {
		take("topology.software_stack", t.SoftwareStack)
	}
	if key, ok := s.hostCostKey(policy); ok {
		node, st := "workers", t.HostCosts[key].Workers
		if ps {
			node, st = "ps", t.HostCosts[key].PS
		}
		take("topology.host_costs."+key+"."+node, st)
	}
	return out
}

// hostCostKey is the key of topology.host_costs that applies to policy:
// its own, or else its policy's when it is an ablation variant
// ("dynaina-pools": "dynaina").
func (s *Scenario) hostCostKey(policy string) (string, bool) {
	if _, ok := s.Topology.HostCosts[policy]; ok {
		return policy, true
	}
	if base, _, cut := strings.Cut(policy, "-"); cut {
		if _, ok := s.Topology.HostCosts[base]; ok {
			return base, true
		}
	}
	return "", false
}

// PSCPU is a parameter server's CPU: each packet it receives waits for
// one of Cores cores, which spends PerPacket plus the packet's bits at
// GbpsPerCore (before rate_scale) on it.
type PSCPU struct {
	Cores        int      `yaml:"cores" json:"cores"`
	GbpsPerCore  float64  `yaml:"gbps_per_core,omitempty" json:"gbps_per_core,omitempty"`
	PerPacket    Duration `yaml:"per_packet,omitempty" json:"per_packet,omitempty"`
	QueuePackets int      `yaml:"queue_packets,omitempty" json:"queue_packets,omitempty"`
}

// ATP is the ATP baseline as its code can run: Window caps each worker's
// chunks in flight (its congestion control's cap is 100 packets,
// in-ATP/ATP common/CC_manager.h, off in the repository as shipped);
// 0: no cap (twice the pipe's window). Budget is each job's aggregators
// (ATP's code gives an application AGTR_TO_USE_PER_APPLICATION = 2800 of
// MAX_AGTR_COUNT = 20000, in-ATP/ATP common/utils.h): chunk c of every
// all-reduce hashes as (job, c mod Budget), and the window is capped at
// Budget; 0: none, every chunk hashes as (job, all-reduce, chunk) over the
// whole pool. FirstWait is how long a worker's chunk waits for a result
// before it times out while the worker has no result of its all-reduce
// yet (ATP's client waits 50 ms for a tensor's first message, then 200 µs
// between messages: in-ATP/ATP client/p4ml_manager.cc); absent: 50 ms;
// 0: the RTO from the start.
type ATP struct {
	Window    int       `yaml:"window,omitempty" json:"window,omitempty"`
	Budget    int       `yaml:"budget,omitempty" json:"budget,omitempty"`
	FirstWait *Duration `yaml:"first_wait,omitempty" json:"first_wait,omitempty"`
}

// ESA is the choice ESA's paper leaves open: ReclaimHeld lets any
// contribution but a retransmission reclaim an aggregator held for another
// chunk's PS ACK (the held sum is at that PS already, whose ACK brings the
// result to its workers); false: held aggregators wait for their ACK, as
// ATP's.
type ESA struct {
	ReclaimHeld bool `yaml:"reclaim_held,omitempty" json:"reclaim_held,omitempty"`
}

// DynaINA configures the DynaINA scheduler (switch/dynaina.Config).
// MinSlots is the smallest pool it creates, in aggregators [64, or all
// of the switch's if fewer]: a scenario with true link delays at a scaled
// rate has windows of a few aggregators and needs a smaller one.
type DynaINA struct {
	MinSlots int `yaml:"min_slots,omitempty" json:"min_slots,omitempty"`
}

// SoftwareStack is a host's stack: at most Gbps each way (before
// rate_scale; 0: the link's rate), or TxGbps as the host sends and RxGbps
// as it receives where given (0: Gbps), and Latency per packet each way.
type SoftwareStack struct {
	Gbps    float64  `yaml:"gbps,omitempty" json:"gbps,omitempty"`
	TxGbps  float64  `yaml:"tx_gbps,omitempty" json:"tx_gbps,omitempty"`
	RxGbps  float64  `yaml:"rx_gbps,omitempty" json:"rx_gbps,omitempty"`
	Latency Duration `yaml:"latency,omitempty" json:"latency,omitempty"`
}

// String is the stack's non-zero fields as a YAML flow mapping
// ("{gbps: 40, rx_gbps: 20}"; "{}" for none).
func (st SoftwareStack) String() string {
	var f []string
	for _, x := range []struct {
		key string
		v   float64
	}{{"gbps", st.Gbps}, {"tx_gbps", st.TxGbps}, {"rx_gbps", st.RxGbps}} {
		if x.v != 0 {
			f = append(f, fmt.Sprintf("%s: %g", x.key, x.v))
		}
	}
	if st.Latency != 0 {
		f = append(f, fmt.Sprintf("latency: %v", st.Latency.D()))
	}
	return "{" + strings.Join(f, ", ") + "}"
}

// Tx and Rx are the stack's sending and receiving rates, Gb/s before
// rate_scale (0: the link's rate).
func (st SoftwareStack) Tx() float64 { return cmp.Or(st.TxGbps, st.Gbps) }

// Rx: see Tx.
func (st SoftwareStack) Rx() float64 { return cmp.Or(st.RxGbps, st.Gbps) }

// Switch sizes the aggregation switch.
type Switch struct {
	Slots           int      `yaml:"slots" json:"slots"`
	ValuesPerPacket int      `yaml:"values_per_packet" json:"values_per_packet"`
	PassTime        Duration `yaml:"pass_time" json:"pass_time"`
	Latency         Duration `yaml:"latency" json:"latency"`
}

// PS describes the parameter servers: where they are (Placement) and
// their links.
type PS struct {
	// Placement is PlacementDedicated (every job its own PS, on its own
	// host and link: the default), PlacementShared (Count PSs serve
	// every job, job j on ps(j mod Count)) or PlacementCoLocated (job j's
	// PS on the host of job j's worker rank 0, sharing its link).
	Placement string `yaml:"placement" json:"placement"`
	// Count is the number of PSs with placement shared [1]; with
	// placement dedicated or co-located it is the number of jobs.
	Count    int     `yaml:"count" json:"count"`
	LinkGbps float64 `yaml:"link_gbps" json:"link_gbps"`
	// CPU is every PS's CPU, the same under every policy [none].
	CPU *PSCPU `yaml:"cpu,omitempty" json:"cpu,omitempty"`
}

// The PS placements (topology.ps.placement).
const (
	PlacementDedicated = "dedicated"
	PlacementShared    = "shared"
	PlacementCoLocated = "co-located"
)

// Job is one training job.
type Job struct {
	Name       string   `yaml:"name" json:"name"`
	Model      string   `yaml:"model" json:"model"`
	Workers    int      `yaml:"workers" json:"workers"`
	Iterations int      `yaml:"iterations" json:"iterations"`
	Arrival    Duration `yaml:"arrival" json:"arrival"`
	Priority   int      `yaml:"priority,omitempty" json:"priority,omitempty"`
	// CommRatio, if > 0, overrides the model's compute time so that ideal
	// all-reduce time / compute time equals it.
	CommRatio float64 `yaml:"comm_ratio,omitempty" json:"comm_ratio,omitempty"`
	// BucketMiB, if > 0, reduces each iteration's gradient in buckets of
	// at least this many MiB during the backward pass (Model.Buckets; DDP's
	// default is 25); 0: one all-reduce of the whole gradient after the
	// iteration's compute.
	BucketMiB float64 `yaml:"bucket_mib,omitempty" json:"bucket_mib,omitempty"`
	// Compute is how the job's workers' compute times vary [the
	// scenario's compute].
	Compute *Compute `yaml:"compute,omitempty" json:"compute,omitempty"`
}

// Compute is how a job's workers' compute times vary: every worker's
// iteration i takes its profile's compute times × the draw X_i (mean 1,
// coefficient of variation cv, independent per worker and iteration) ×
// its straggler factor × (with probability slow_probability) slow_factor.
// Each worker also starts its first iteration a uniform draw in
// [0, start_offset] after the job's arrival. Every draw derives from the
// run's seed.
type Compute struct {
	// Distribution is normal (truncated at 0.05) or lognormal [none].
	Distribution string  `yaml:"distribution,omitempty" json:"distribution,omitempty"`
	CV           float64 `yaml:"cv,omitempty" json:"cv,omitempty"`
	// StartOffset bounds each worker's start after the job's arrival.
	StartOffset Duration `yaml:"start_offset,omitempty" json:"start_offset,omitempty"`
	// Stragglers are persistently slow workers.
	Stragglers []Straggler `yaml:"stragglers,omitempty" json:"stragglers,omitempty"`
	// SlowProbability is the chance that one worker's iteration is
	// slow_factor times slower (an occasional hiccup).
	SlowProbability float64 `yaml:"slow_probability,omitempty" json:"slow_probability,omitempty"`
	SlowFactor      float64 `yaml:"slow_factor,omitempty" json:"slow_factor,omitempty"`
}

// Straggler is a worker (by rank) whose compute is Slow times slower.
type Straggler struct {
	Rank int     `yaml:"rank" json:"rank"`
	Slow float64 `yaml:"slow" json:"slow"`
}

// Arrivals generates jobs beyond the listed ones: Jobs jobs arriving as a
// Poisson process of mean interarrival MeanInterarrival (process poisson),
// each drawing its model, workers and iterations uniformly from the
// lists; or one job per row of a CSV trace (process trace). Generated jobs
// are named Prefix + a number from 0 and take BucketMiB and Compute; they
// derive from the run's seed, so --seed draws another cluster.
type Arrivals struct {
	Process          string   `yaml:"process" json:"process"`
	Jobs             int      `yaml:"jobs,omitempty" json:"jobs,omitempty"`
	MeanInterarrival Duration `yaml:"mean_interarrival,omitempty" json:"mean_interarrival,omitempty"`
	// Start is the earliest arrival [0].
	Start      Duration `yaml:"start,omitempty" json:"start,omitempty"`
	Models     []string `yaml:"models,omitempty" json:"models,omitempty"`
	Workers    []int    `yaml:"workers,omitempty" json:"workers,omitempty"`
	Iterations []int    `yaml:"iterations,omitempty" json:"iterations,omitempty"`
	// Trace is a CSV file (process trace), relative to the scenario's
	// directory: a header naming the columns arrival, model, workers,
	// iterations and optionally priority and bucket_mib, then one job per
	// row (arrival a Go duration).
	Trace     string   `yaml:"trace,omitempty" json:"trace,omitempty"`
	Prefix    string   `yaml:"prefix,omitempty" json:"prefix,omitempty"`
	BucketMiB float64  `yaml:"bucket_mib,omitempty" json:"bucket_mib,omitempty"`
	Compute   *Compute `yaml:"compute,omitempty" json:"compute,omitempty"`
}

// The arrival processes (arrivals.process).
const (
	ArrivalsPoisson = "poisson"
	ArrivalsTrace   = "trace"
)

// Fault is one injected fault; see Scenario for the kinds. It happens At
// (run time), or At after the event When names.
type Fault struct {
	At       Duration `yaml:"at" json:"at"`
	Kind     string   `yaml:"kind" json:"kind"`
	Target   string   `yaml:"target" json:"target"`
	Duration Duration `yaml:"duration" json:"duration"`
	Value    float64  `yaml:"value" json:"value"`
	// LoseState (node_crash) restarts the node with its state lost
	// (emu Restart: a worker rejoins from its last finished iteration, or
	// the run stops naming it); without it the node resumes with its state
	// (a paused process: emu Resume).
	LoseState bool `yaml:"lose_state,omitempty" json:"lose_state,omitempty"`
	// Direction is the link direction a link fault acts on [both].
	Direction string `yaml:"direction,omitempty" json:"direction,omitempty"`
	// When times the fault from a job's progress instead of from the
	// run's start.
	When *When `yaml:"when,omitempty" json:"when,omitempty"`
}

// LinkImpairment sets standing random effects on a link: both directions,
// or the one Direction names. Preset names a preset whose effects the
// entry starts from; the fields it gives replace the preset's.
type LinkImpairment struct {
	Link         string   `yaml:"link" json:"link"`
	Loss         float64  `yaml:"loss" json:"loss"`
	Duplicate    float64  `yaml:"duplicate" json:"duplicate"`
	Reorder      float64  `yaml:"reorder" json:"reorder"`
	ReorderDelay Duration `yaml:"reorder_delay" json:"reorder_delay"`
	// Corrupt damages frames on the wire: the receiving port's MAC drops
	// them (bad FCS), so they behave like loss. CorruptUndetected damages
	// frames past the FCS (a NIC or switch buffer): they are delivered, and
	// only the ICRC checks of the switch and the hosts catch them.
	Corrupt           float64  `yaml:"corrupt" json:"corrupt"`
	CorruptUndetected float64  `yaml:"corrupt_undetected,omitempty" json:"corrupt_undetected,omitempty"`
	Jitter            Duration `yaml:"jitter" json:"jitter"`
	// BurstLoss adds Gilbert–Elliott bursty loss.
	BurstLoss *BurstLoss `yaml:"burst_loss,omitempty" json:"burst_loss,omitempty"`
	// Flap makes the link fail and recover at random.
	Flap      *Flap  `yaml:"flap,omitempty" json:"flap,omitempty"`
	Direction string `yaml:"direction,omitempty" json:"direction,omitempty"`
	Preset    string `yaml:"preset,omitempty" json:"preset,omitempty"`
}

// Emu is the emulator's form of im's random effects.
func (im *LinkImpairment) Emu() emu.Impairments {
	e := emu.Impairments{Loss: im.Loss, Duplicate: im.Duplicate, Reorder: im.Reorder, ReorderDelay: im.ReorderDelay.D(),
		Corrupt: im.Corrupt, CorruptUndetected: im.CorruptUndetected}
	if im.BurstLoss != nil {
		e.GilbertElliott = im.BurstLoss.Model()
	}
	return e
}

// Covers reports whether im applies to direction dir (DirUp or DirDown).
func (im *LinkImpairment) Covers(dir string) bool {
	return im.Direction == "" || im.Direction == DirBoth || im.Direction == dir
}

// Fault kinds.
const (
	FaultLinkDown          = "link_down"
	FaultLinkUp            = "link_up"
	FaultLossBurst         = "loss_burst"
	FaultDupBurst          = "duplicate_burst"
	FaultReorderBurst      = "reorder_burst"
	FaultDelaySpike        = "delay_spike"
	FaultJitterBurst       = "jitter_burst"
	FaultCorrupt           = "corrupt"
	FaultCorruptUndetected = "corrupt_undetected"
	FaultRateChange        = "rate_change"
	FaultMTUChange         = "mtu_change"
	FaultSwitchReboot      = "switch_reboot"
	FaultSwitchCrash       = "switch_crash"
	FaultNodeCrash         = "node_crash"
)

// FaultKinds lists the fault kinds.
var FaultKinds = []string{FaultLinkDown, FaultLinkUp, FaultLossBurst, FaultDupBurst, FaultReorderBurst, FaultDelaySpike,
	FaultJitterBurst, FaultCorrupt, FaultCorruptUndetected, FaultRateChange, FaultMTUChange,
	FaultSwitchReboot, FaultSwitchCrash, FaultNodeCrash}

// SwitchName is the name of the switch node.
const SwitchName = "sw"

// Defaults and limits.
const (
	DefaultSeed            = 1
	DefaultTimeLimit       = time.Hour
	DefaultPolicy          = "dynaina"
	DefaultLinkGbps        = 100
	DefaultLinkDelay       = time.Microsecond
	DefaultValuesPerPacket = 64
	DefaultPassTime        = time.Nanosecond // Tofino: about one packet per clock (~1.2 GHz) per pipe
	MaxJobWorkers          = inahdr.MaxWorkers
	MaxIterations          = 1_000_000
	MaxHosts               = 1024
	MaxPS                  = 64
	MaxPSCores             = 1024
	MaxLinkGbps            = 1600
	MaxQueuePackets        = 1 << 24
	// MaxMTU is the largest MTU an mtu_change may set: the jumbo frames
	// of every link.
	MaxMTU = 9000 // testbed.DefaultLinkMTU (TestMaxMTU)
	// MinLinkBitsPerSecond is the slowest link a scaled scenario may make
	// (link_gbps × rate_scale); MinCommRatio the smallest comm_ratio (a
	// compute time of 1000× the all-reduce).
	MinLinkBitsPerSecond = 1000
	MinCommRatio         = 1e-3
	// INAHeaderBytes is the wire overhead of one INA packet besides its
	// values: Ethernet 14 + IPv4 20 + UDP 8 + BTH 12 + INA header + ICRC 4.
	INAHeaderBytes = 14 + 20 + 8 + 12 + inahdr.Len + 4
)

// Duration is a time.Duration written in YAML and JSON as a Go duration
// string.
type Duration time.Duration

// D returns d as a time.Duration.
func (d Duration) D() time.Duration { return time.Duration(d) }

func (d Duration) String() string { return time.Duration(d).String() }

// UnmarshalYAML parses a Go duration string; a bare 0 is accepted.
func (d *Duration) UnmarshalYAML(n *yaml.Node) error {
	if n.Kind == yaml.ScalarNode {
		if n.Value == "0" {
			*d = 0
			return nil
		}
		if v, err := time.ParseDuration(n.Value); err == nil {
			*d = Duration(v)
			return nil
		}
	}
	return &yaml.TypeError{Errors: []string{fmt.Sprintf("line %d: cannot unmarshal `%s` into duration: want a Go duration such as 10us, 1.5ms or 2s", n.Line, n.Value)}}
}

// MarshalYAML writes d as a duration string.
func (d Duration) MarshalYAML() (any, error) { return d.String(), nil }

// MarshalJSON writes d as a duration string.
func (d Duration) MarshalJSON() ([]byte, error) { return []byte(strconv.Quote(d.String())), nil }

// Load reads, decodes, fills in and validates a scenario file against the
// embedded model profiles.
func Load(file string) (*Scenario, error) {
	data, err := os.ReadFile(file)
	if err != nil {
		return nil, err
	}
	return Parse(file, data, defaultModels)
}

// Embedded loads testdata/scenarios/<name> (e.g. "freeina-single.yaml")
// from the embedded copy; a trace it names is read from there too.
func Embedded(name string) (*Scenario, error) {
	data, err := fs.ReadFile(testdata.Scenarios, path.Join("scenarios", name))
	if err != nil {
		return nil, err
	}
	read := func(f string) ([]byte, error) {
		return fs.ReadFile(testdata.Scenarios, path.Join("scenarios", path.Dir(name), f))
	}
	return parse(name, data, defaultModels, read)
}

// diskReader reads regular files of at most MaxTraceBytes relative to the
// directory of file.
func diskReader(file string) func(string) ([]byte, error) {
	return func(f string) ([]byte, error) {
		if !filepath.IsAbs(f) {
			f = filepath.Join(filepath.Dir(file), f)
		}
		fh, err := os.Open(f)
		if err != nil {
			return nil, err
		}
		defer fh.Close()
		if st, err := fh.Stat(); err != nil {
			return nil, err
		} else if !st.Mode().IsRegular() {
			return nil, fmt.Errorf("%s: not a regular file", f)
		}
		return io.ReadAll(io.LimitReader(fh, MaxTraceBytes+1))
	}
}

// EmbeddedNames lists the valid embedded scenarios.
func EmbeddedNames() []string {
	ents, _ := fs.ReadDir(testdata.Scenarios, "scenarios")
	var out []string
	for _, e := range ents {
		if !e.IsDir() && strings.HasSuffix(e.Name(), ".yaml") {
			out = append(out, e.Name())
		}
	}
	return out
}

// DefaultName is the embedded scenario `inabox run` uses when none is
// given.
const DefaultName = "default.yaml"

// Parse decodes a scenario (unknown keys are errors), fills in the defaults
// and validates it against models. file names the source in errors. A
// returned error is an *Error unless the YAML is not well-formed.
func Parse(file string, data []byte, models Models) (*Scenario, error) {
	return parse(file, data, models, diskReader(file))
}

func parse(file string, data []byte, models Models, read func(string) ([]byte, error)) (*Scenario, error) {
	one := func(line int, path, rule string) error {
		return &Error{Errs: []*FieldError{{File: file, Line: line, Path: path, Rule: rule}}}
	}
	if len(data) > MaxFileBytes {
		return nil, one(0, "", fmt.Sprintf("%d bytes: a scenario file may have at most %d", len(data), MaxFileBytes))
	}
	var root yaml.Node
	if err := yaml.Unmarshal(data, &root); err != nil {
		return nil, fmt.Errorf("%s: %w", file, err)
	}
	idx := newNodeIndex(&root)
	if idx.over != "" {
		return nil, one(idx.line(idx.over), idx.over, idx.why)
	}
	s := &Scenario{file: file, index: idx, read: read}
	dec := yaml.NewDecoder(bytes.NewReader(data))
	dec.KnownFields(true)
	if err := dec.Decode(s); err != nil {
		var te *yaml.TypeError
		if errors.As(err, &te) {
			return nil, idx.typeErrors(file, te)
		}
		if errors.Is(err, io.EOF) {
			return nil, &Error{Errs: []*FieldError{{File: file, Rule: "empty file: want a mapping with at least jobs"}}}
		}
		return nil, fmt.Errorf("%s: %w", file, err)
	}
	var next yaml.Node
	if err := dec.Decode(&next); err == nil {
		return nil, one(next.Line, "", "a second YAML document: a scenario file holds one")
	} else if !errors.Is(err, io.EOF) {
		return nil, fmt.Errorf("%s: %w", file, err)
	}
	if err := idx.strictInts(file, s); err != nil {
		return nil, err
	}
	if err := s.resolvePresets(); err != nil {
		return nil, err
	}
	s.listed = len(s.Jobs)
	if err := s.loadOwn(read); err != nil {
		return nil, err
	}
	models = s.withOwn(models)
	seed := uint64(DefaultSeed)
	if s.has("seed") {
		seed = s.Seed
	}
	if err := s.expandArrivals(seed, models, read); err != nil {
		return nil, err
	}
	s.fillDefaults(file)
	if err := s.Validate(models); err != nil {
		return nil, err
	}
	return s, nil
}

// fillDefaults sets every absent field to its documented default.
func (s *Scenario) fillDefaults(file string) {
	has := func(p string) bool { return s.index != nil && s.index.has(p) }
	if s.Name == "" {
		s.Name = strings.TrimSuffix(path.Base(file), path.Ext(file))
	}
	if !has("seed") {
		s.Seed = DefaultSeed
	}
	if !has("time_limit") {
		s.TimeLimit = Duration(DefaultTimeLimit)
	}
	if !has("policy") {
		s.Policy = DefaultPolicy
	}
	if !has("freeina_path") {
		s.FreeINAPath = "uc"
	}
	if !has("scaling.tensor_scale") {
		s.Scaling.TensorScale = 1
	}
	if !has("scaling.rate_scale") {
		s.Scaling.RateScale = 1
	}
	t := &s.Topology
	if !has("topology.link_gbps") {
		t.LinkGbps = DefaultLinkGbps
	}
	if !has("topology.link_delay") {
		t.LinkDelay = Duration(DefaultLinkDelay)
	}
	if !has("topology.switch.slots") {
		t.Switch.Slots = sw.DefaultSlots
	}
	if !has("topology.switch.values_per_packet") {
		t.Switch.ValuesPerPacket = DefaultValuesPerPacket
	}
	if !has("topology.switch.pass_time") {
		t.Switch.PassTime = Duration(DefaultPassTime)
	}
	if !has("topology.ps.placement") {
		t.PS.Placement = PlacementDedicated
	}
	if !has("topology.ps.count") {
		t.PS.Count = 1
		if t.PS.Placement == PlacementDedicated || t.PS.Placement == PlacementCoLocated {
			t.PS.Count = len(s.Jobs)
		}
	}
	if !has("topology.ps.link_gbps") {
		t.PS.LinkGbps = t.LinkGbps
	}
}

func (s *Scenario) has(p string) bool { return s.index != nil && s.index.has(p) }

// File is the name the scenario was loaded from.
func (s *Scenario) File() string { return s.file }

// NumHosts is the number of worker hosts: topology.hosts, or the sum of
// the jobs' workers when it is 0.
func (s *Scenario) NumHosts() int {
	if s.Topology.Hosts > 0 {
		return s.Topology.Hosts
	}
	n := 0
	for _, j := range s.Jobs {
		n += j.Workers
	}
	return n
}

// HostNames are the worker hosts h0, h1, … (at most MaxHosts, and none
// for a negative count, so that an invalid scenario can still be checked).
func (s *Scenario) HostNames() []string {
	out := make([]string, min(max(s.NumHosts(), 0), MaxHosts))
	for i := range out {
		out[i] = "h" + strconv.Itoa(i)
	}
	return out
}

// PSOf is the index of job j's parameter server.
func (s *Scenario) PSOf(j int) int {
	if s.Topology.PS.Placement == PlacementShared {
		return j % max(s.Topology.PS.Count, 1)
	}
	return j
}

// PSNames are the parameter servers ps0, ps1, ….
func (s *Scenario) PSNames() []string {
	out := make([]string, min(max(s.Topology.PS.Count, 0), MaxPS))
	for i := range out {
		out[i] = "ps" + strconv.Itoa(i)
	}
	return out
}

// LinkBitsPerSecond is the worker link rate after rate_scale.
func (s *Scenario) LinkBitsPerSecond() int64 {
	return int64(math.Round(s.Topology.LinkGbps * 1e9 * s.Scaling.RateScale))
}

// PSLinkBitsPerSecond is the PS link rate after rate_scale.
func (s *Scenario) PSLinkBitsPerSecond() int64 {
	return int64(math.Round(s.Topology.PS.LinkGbps * 1e9 * s.Scaling.RateScale))
}

// WithSeed returns a copy of s with another seed: the jobs its arrivals
// generate are drawn again (a trace's stay), validated against models.
func (s *Scenario) WithSeed(seed uint64, models Models) (*Scenario, error) {
	models = s.withOwn(models)
	c, err := s.WithPolicy(s.Policy, models)
	if err != nil {
		return nil, err
	}
	c.Seed = seed
	if c.Arrivals != nil && c.Arrivals.Process == ArrivalsPoisson {
		if err := c.expandArrivals(seed, models, s.read); err != nil {
			return nil, err
		}
		if !c.has("topology.ps.count") && c.Topology.PS.Placement != PlacementShared {
			c.Topology.PS.Count = len(c.Jobs)
		}
		if err := c.Validate(models); err != nil {
			return nil, err
		}
	}
	return c, nil
}

// WithPolicy returns a copy of s under another policy (for `compare` and
// --policy), validated against models.
func (s *Scenario) WithPolicy(policy string, models Models) (*Scenario, error) {
	c := *s
	c.Jobs = slices.Clone(s.Jobs)
	c.Faults = slices.Clone(s.Faults)
	c.Impairments = slices.Clone(s.Impairments)
	c.Policy = policy
	if err := c.Validate(models); err != nil {
		return nil, err
	}
	return &c, nil
}

// LinkConfig is the emulator configuration of direction dir (DirUp: host
// → switch, DirDown: switch → host) of the link between host (a worker
// host or a PS) and the switch: the scaled rate, link_delay,
// queue_packets, and the impairments of impairments[link: host] for that
// direction, else of impairments[link: all].
func (s *Scenario) LinkConfig(host, dir string) emu.LinkConfig {
	lc := emu.LinkConfig{BitsPerSecond: s.LinkBitsPerSecond(), Delay: s.Topology.LinkDelay.D(), QueuePackets: s.Topology.QueuePackets}
	if strings.HasPrefix(host, "ps") {
		lc.BitsPerSecond = s.PSLinkBitsPerSecond()
	}
	if im := s.ImpairmentOf(host, dir); im != nil {
		lc.Jitter = im.Jitter.D()
		lc.Impairments = im.Emu()
	}
	return lc
}

// ImpairmentOf is the impairment of direction dir of host's link: its own
// entry's, else the "all" entry's for that direction, or nil.
func (s *Scenario) ImpairmentOf(host, dir string) *LinkImpairment {
	var pick *LinkImpairment
	for i := range s.Impairments {
		im := &s.Impairments[i]
		if !im.Covers(dir) {
			continue
		}
		switch im.Link {
		case host:
			return im
		case "all":
			if pick == nil {
				pick = im
			}
		}
	}
	return pick
}
