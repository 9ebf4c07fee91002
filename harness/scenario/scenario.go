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
	"reflect"
	"regexp"
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
// default; durations are Go duration strings ("10us", "1.5ms", "2s").
//
//	name: dynaina-contention        # default: the file name without .yaml
//	description: free text
//	seed: 1                         # default 1; every random draw derives from it
//	time_limit: 120s                # virtual-time cap of the run; default 1h
//	policy: dynaina                 # a registered policy (testbed.Names); default dynaina
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
//	    count: 1                    # parameter servers ps0..; default 1
//	    link_gbps: 100              # PS link rate before rate_scale; default link_gbps
//	jobs:                           # at least one
//	  - name: vgg16-a               # [A-Za-z0-9_.-]+, unique
//	    model: vgg16                # a name in testdata/models/models.yaml
//	    workers: 4                  # 1..32
//	    iterations: 10              # 1..1000000
//	    arrival: 0s                 # default 0
//	    priority: 0                 # optional, 0..255 (higher first)
//	    comm_ratio: 0.5             # optional: compute time := ideal comm time / comm_ratio
//	faults:                         # optional
//	  - {at: 50ms, kind: loss_burst, target: h0, duration: 1ms, value: 0.2}
//	impairments:                    # optional, per host link ("all" = every link)
//	  - {link: all, loss: 0.0001}
//
// Fault kinds, targets and the meaning of duration and value:
//
//	link_down      link (a host name)  duration: down time, 0 = until a link_up; no value
//	link_up        link                no duration, no value
//	loss_burst     link                duration > 0; value: loss probability in (0, 1]
//	corrupt        link                duration > 0; value: corruption probability in (0, 1]
//	delay_spike    link                duration > 0; value: extra delay in µs, > 0
//	switch_reboot  "sw" (default)      duration: down time before the restart (0 = at once); no value
//	node_crash     a host or PS name   duration: down time, 0 = never restarts; no value
//
// Links are named by their host: "h3" is the link between h3 and the switch,
// "ps0" the link between ps0 and the switch.
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
	FreeINAPath string           `yaml:"freeina_path,omitempty" json:"freeina_path,omitempty"`
	Scaling     Scaling          `yaml:"scaling" json:"scaling"`
	Topology    Topology         `yaml:"topology" json:"topology"`
	Jobs        []Job            `yaml:"jobs" json:"jobs"`
	Faults      []Fault          `yaml:"faults,omitempty" json:"faults,omitempty"`
	Impairments []LinkImpairment `yaml:"impairments,omitempty" json:"impairments,omitempty"`

	file  string
	index *nodeIndex
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
}

// Switch sizes the aggregation switch.
type Switch struct {
	Slots           int      `yaml:"slots" json:"slots"`
	ValuesPerPacket int      `yaml:"values_per_packet" json:"values_per_packet"`
	PassTime        Duration `yaml:"pass_time" json:"pass_time"`
	Latency         Duration `yaml:"latency" json:"latency"`
}

// PS describes the parameter servers.
type PS struct {
	Count    int     `yaml:"count" json:"count"`
	LinkGbps float64 `yaml:"link_gbps" json:"link_gbps"`
}

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
}

// Fault is one injected fault; see Scenario for the kinds.
type Fault struct {
	At       Duration `yaml:"at" json:"at"`
	Kind     string   `yaml:"kind" json:"kind"`
	Target   string   `yaml:"target" json:"target"`
	Duration Duration `yaml:"duration" json:"duration"`
	Value    float64  `yaml:"value" json:"value"`
}

// LinkImpairment sets random channel effects on both directions of a link.
type LinkImpairment struct {
	Link         string   `yaml:"link" json:"link"`
	Loss         float64  `yaml:"loss" json:"loss"`
	Duplicate    float64  `yaml:"duplicate" json:"duplicate"`
	Reorder      float64  `yaml:"reorder" json:"reorder"`
	ReorderDelay Duration `yaml:"reorder_delay" json:"reorder_delay"`
	Corrupt      float64  `yaml:"corrupt" json:"corrupt"`
	Jitter       Duration `yaml:"jitter" json:"jitter"`
}

// Fault kinds.
const (
	FaultLinkDown     = "link_down"
	FaultLinkUp       = "link_up"
	FaultLossBurst    = "loss_burst"
	FaultDelaySpike   = "delay_spike"
	FaultCorrupt      = "corrupt"
	FaultSwitchReboot = "switch_reboot"
	FaultNodeCrash    = "node_crash"
)

// FaultKinds lists the fault kinds.
var FaultKinds = []string{FaultLinkDown, FaultLinkUp, FaultLossBurst, FaultDelaySpike, FaultCorrupt, FaultSwitchReboot, FaultNodeCrash}

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
	MaxLinkGbps            = 1600
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

// FieldError is one problem in a scenario file, naming the field by its YAML
// path, e.g. "scenario.yaml:14: jobs[2].workers: 0: must be between 1 and 32".
type FieldError struct {
	File  string
	Line  int    // 0 if unknown
	Path  string // e.g. jobs[2].workers
	Value string // the offending value as written; empty if none
	Rule  string
}

func (e *FieldError) Error() string {
	var b strings.Builder
	b.WriteString(e.File)
	if e.Line > 0 {
		fmt.Fprintf(&b, ":%d", e.Line)
	}
	if e.Path != "" {
		b.WriteString(": " + e.Path)
	}
	if e.Value != "" {
		b.WriteString(": " + e.Value)
	}
	b.WriteString(": " + e.Rule)
	return b.String()
}

// Error lists every problem found in a scenario file, in file order.
type Error struct {
	Errs []*FieldError
}

func (e *Error) Error() string {
	s := make([]string, len(e.Errs))
	for i, fe := range e.Errs {
		s[i] = fe.Error()
	}
	return strings.Join(s, "\n")
}

// Unwrap returns the field errors.
func (e *Error) Unwrap() []error {
	out := make([]error, len(e.Errs))
	for i, fe := range e.Errs {
		out[i] = fe
	}
	return out
}

// Load reads, decodes, fills in and validates a scenario file
// against the embedded model profiles.
func Load(file string) (*Scenario, error) {
	data, err := os.ReadFile(file)
	if err != nil {
		return nil, err
	}
	return Parse(file, data, defaultModels)
}

// Embedded loads testdata/scenarios/<name> (e.g.
// "freeina-single.yaml") from the embedded copy.
func Embedded(name string) (*Scenario, error) {
	data, err := fs.ReadFile(testdata.Scenarios, path.Join("scenarios", name))
	if err != nil {
		return nil, err
	}
	return Parse(name, data, defaultModels)
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

// DefaultName is the embedded scenario `inabox run` uses when none
// is given.
const DefaultName = "default.yaml"

// Parse decodes a scenario (unknown keys are errors), fills in the
// defaults and validates it against models. file names the source in
// errors. A returned error is a *Error unless the YAML is not
// well-formed.
func Parse(file string, data []byte, models Models) (*Scenario, error) {
	var root yaml.Node
	if err := yaml.Unmarshal(data, &root); err != nil {
		return nil, fmt.Errorf("%s: %w", file, err)
	}
	idx := newNodeIndex(&root)
	s := &Scenario{file: file, index: idx}
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
	if !has("topology.ps.count") {
		t.PS.Count = 1
	}
	if !has("topology.ps.link_gbps") {
		t.PS.LinkGbps = t.LinkGbps
	}
}

var namePattern = regexp.MustCompile(`^[A-Za-z0-9_.-]+$`)

// Validate checks every field; it names the first problem of each field.
// Call it again after changing a loaded scenario (e.g. a --policy or --seed
// override).
func (s *Scenario) Validate(models Models) error {
	v := validator{s: s}
	v.check("name", s.Name, namePattern.MatchString(s.Name), "must match [A-Za-z0-9_.-]+")
	v.check("time_limit", s.TimeLimit, s.TimeLimit > 0, "must be > 0")
	v.check("policy", s.Policy, slices.Contains(testbed.Names(), s.Policy), "must be one of "+strings.Join(testbed.Names(), ", "))
	v.check("freeina_path", s.FreeINAPath, s.FreeINAPath == "uc" || s.FreeINAPath == "trim", "must be uc or trim")
	v.check("scaling.tensor_scale", s.Scaling.TensorScale, s.Scaling.TensorScale > 0 && s.Scaling.TensorScale <= 1, "must be in (0, 1]")
	v.check("scaling.rate_scale", s.Scaling.RateScale, s.Scaling.RateScale > 0 && s.Scaling.RateScale <= 1, "must be in (0, 1]")

	t := s.Topology
	v.check("topology.link_gbps", t.LinkGbps, t.LinkGbps > 0 && t.LinkGbps <= MaxLinkGbps, fmt.Sprintf("must be in (0, %d]", MaxLinkGbps))
	v.check("topology.link_delay", t.LinkDelay, t.LinkDelay >= 0 && t.LinkDelay.D() <= time.Second, "must be in [0, 1s]")
	v.check("topology.queue_packets", t.QueuePackets, t.QueuePackets >= 0, "must be ≥ 0 (0 = the emulator default)")
	maxW := 0
	sumW := 0
	for _, j := range s.Jobs {
		maxW = max(maxW, j.Workers)
		sumW += j.Workers
	}
	if t.Hosts != 0 {
		v.check("topology.hosts", t.Hosts, t.Hosts >= 1 && t.Hosts <= MaxHosts, fmt.Sprintf("must be 0 (one per worker) or between 1 and %d", MaxHosts))
		v.check("topology.hosts", t.Hosts, t.Hosts >= maxW, fmt.Sprintf("must be ≥ the largest job's workers (%d): a job's workers sit on distinct hosts", maxW))
	} else {
		v.check("jobs", sumW, sumW <= MaxHosts, fmt.Sprintf("total workers must be ≤ %d when topology.hosts is 0", MaxHosts))
	}
	v.check("topology.switch.slots", t.Switch.Slots, t.Switch.Slots >= 1 && t.Switch.Slots <= sw.MaxSlots, fmt.Sprintf("must be between 1 and %d", sw.MaxSlots))
	v.check("topology.switch.values_per_packet", t.Switch.ValuesPerPacket, t.Switch.ValuesPerPacket >= 1 && t.Switch.ValuesPerPacket <= inahdr.MaxValues,
		fmt.Sprintf("must be between 1 and %d", inahdr.MaxValues))
	v.check("topology.switch.pass_time", t.Switch.PassTime, t.Switch.PassTime >= 0 && t.Switch.PassTime.D() <= time.Millisecond, "must be in [0, 1ms]")
	v.check("topology.switch.latency", t.Switch.Latency, t.Switch.Latency >= 0 && t.Switch.Latency.D() <= time.Millisecond, "must be in [0, 1ms]")
	v.check("topology.ps.count", t.PS.Count, t.PS.Count >= 1 && t.PS.Count <= MaxPS, fmt.Sprintf("must be between 1 and %d", MaxPS))
	v.check("topology.ps.link_gbps", t.PS.LinkGbps, t.PS.LinkGbps > 0 && t.PS.LinkGbps <= MaxLinkGbps, fmt.Sprintf("must be in (0, %d]", MaxLinkGbps))

	v.check("jobs", len(s.Jobs), len(s.Jobs) > 0, "need at least one job")
	names := map[string]int{}
	for i, j := range s.Jobs {
		p := fmt.Sprintf("jobs[%d].", i)
		if v.check(p+"name", j.Name, namePattern.MatchString(j.Name), "must match [A-Za-z0-9_.-]+") {
			if k, dup := names[j.Name]; dup {
				v.fail(p+"name", j.Name, fmt.Sprintf("duplicate: jobs[%d] has this name", k))
			}
			names[j.Name] = i
		}
		_, known := models[j.Model]
		v.check(p+"model", j.Model, known, "unknown model; known: "+strings.Join(models.Names(), ", "))
		v.check(p+"workers", j.Workers, j.Workers >= 1 && j.Workers <= MaxJobWorkers, fmt.Sprintf("must be between 1 and %d", MaxJobWorkers))
		v.check(p+"iterations", j.Iterations, j.Iterations >= 1 && j.Iterations <= MaxIterations, fmt.Sprintf("must be between 1 and %d", MaxIterations))
		v.check(p+"arrival", j.Arrival, j.Arrival >= 0 && j.Arrival < s.TimeLimit, "must be in [0, time_limit)")
		v.check(p+"priority", j.Priority, j.Priority >= 0 && j.Priority <= 255, "must be between 0 and 255")
		if s.has(p + "comm_ratio") {
			v.check(p+"comm_ratio", j.CommRatio, j.CommRatio > 0 && j.CommRatio <= 1000, "must be in (0, 1000]")
		}
	}

	links := map[string]bool{}
	for _, h := range s.HostNames() {
		links[h] = true
	}
	for _, h := range s.PSNames() {
		links[h] = true
	}
	linkRule := "must name a link by its host: h0..h" + strconv.Itoa(s.NumHosts()-1) + " or ps0..ps" + strconv.Itoa(t.PS.Count-1)
	for i, f := range s.Faults {
		p := fmt.Sprintf("faults[%d].", i)
		v.check(p+"at", f.At, f.At >= 0 && f.At < s.TimeLimit, "must be in [0, time_limit)")
		v.check(p+"duration", f.Duration, f.Duration >= 0, "must be ≥ 0")
		hasValue := s.has(p + "value")
		switch f.Kind {
		case FaultLinkDown, FaultLinkUp, FaultLossBurst, FaultCorrupt, FaultDelaySpike:
			v.check(p+"target", f.Target, links[f.Target], linkRule)
		case FaultSwitchReboot:
			v.check(p+"target", f.Target, f.Target == "" || f.Target == SwitchName, `must be "sw" (or absent)`)
		case FaultNodeCrash:
			v.check(p+"target", f.Target, links[f.Target], "must name a host (h0..) or parameter server (ps0..)")
		default:
			v.fail(p+"kind", f.Kind, "must be one of "+strings.Join(FaultKinds, ", "))
		}
		switch f.Kind {
		case FaultLinkUp:
			v.check(p+"duration", f.Duration, f.Duration == 0, "link_up takes no duration")
		case FaultLossBurst, FaultCorrupt:
			v.check(p+"duration", f.Duration, f.Duration > 0, f.Kind+" needs a duration > 0")
			v.check(p+"value", f.Value, f.Value > 0 && f.Value <= 1, f.Kind+" needs a probability in (0, 1]")
			hasValue = false
		case FaultDelaySpike:
			v.check(p+"duration", f.Duration, f.Duration > 0, "delay_spike needs a duration > 0")
			v.check(p+"value", f.Value, f.Value > 0 && f.Value <= 1e6, "delay_spike needs the extra delay in µs, in (0, 1e6]")
			hasValue = false
		}
		if hasValue && slices.Contains(FaultKinds, f.Kind) {
			v.fail(p+"value", f.Value, f.Kind+" takes no value")
		}
	}
	seen := map[string]int{}
	for i, im := range s.Impairments {
		p := fmt.Sprintf("impairments[%d].", i)
		if v.check(p+"link", im.Link, im.Link == "all" || links[im.Link], linkRule+`, or "all"`) {
			if k, dup := seen[im.Link]; dup {
				v.fail(p+"link", im.Link, fmt.Sprintf("duplicate: impairments[%d] names this link", k))
			}
			seen[im.Link] = i
		}
		for _, pr := range []struct {
			f string
			x float64
		}{{"loss", im.Loss}, {"duplicate", im.Duplicate}, {"reorder", im.Reorder}, {"corrupt", im.Corrupt}} {
			v.check(p+pr.f, pr.x, pr.x >= 0 && pr.x <= 1, "must be a probability in [0, 1]")
		}
		v.check(p+"reorder_delay", im.ReorderDelay, im.ReorderDelay >= 0, "must be ≥ 0")
		v.check(p+"jitter", im.Jitter, im.Jitter >= 0, "must be ≥ 0")
	}
	if len(v.errs) == 0 {
		return nil
	}
	// File order; errors without a line (defaults, derived checks) last.
	slices.SortStableFunc(v.errs, func(a, b *FieldError) int {
		la, lb := a.Line, b.Line
		if la == 0 {
			la = math.MaxInt
		}
		if lb == 0 {
			lb = math.MaxInt
		}
		return cmp.Compare(la, lb)
	})
	return &Error{Errs: v.errs}
}

func (s *Scenario) has(p string) bool { return s.index != nil && s.index.has(p) }

// File is the name the scenario was loaded from.
func (s *Scenario) File() string { return s.file }

type validator struct {
	s    *Scenario
	errs []*FieldError
}

func (v *validator) check(p string, val any, ok bool, rule string) bool {
	if !ok {
		v.fail(p, val, rule)
	}
	return ok
}

func (v *validator) fail(p string, val any, rule string) {
	fe := &FieldError{File: v.s.file, Path: p, Rule: rule}
	switch x := val.(type) {
	case string:
		fe.Value = strconv.Quote(x)
	case float64:
		fe.Value = strconv.FormatFloat(x, 'g', -1, 64)
	default:
		fe.Value = fmt.Sprint(x)
	}
	if v.s.index != nil {
		fe.Line = v.s.index.line(p)
		if _, isString := val.(string); !isString {
			if raw, ok := v.s.index.value(p); ok {
				fe.Value = raw // as written in the file
			}
		}
	}
	v.errs = append(v.errs, fe)
}

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

// HostNames are the worker hosts h0, h1, ….
func (s *Scenario) HostNames() []string {
	out := make([]string, s.NumHosts())
	for i := range out {
		out[i] = "h" + strconv.Itoa(i)
	}
	return out
}

// PSNames are the parameter servers ps0, ps1, ….
func (s *Scenario) PSNames() []string {
	out := make([]string, max(s.Topology.PS.Count, 0))
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
// evenly. Job j uses ps(j mod count).
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
			Arrival: j.Arrival.D(), Priority: j.Priority, PS: "ps" + strconv.Itoa(i%max(s.Topology.PS.Count, 1)),
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

// nodeIndex maps YAML paths ("jobs[2].workers") to their nodes.
type nodeIndex struct {
	keys   map[string]*yaml.Node // the key node of a mapping entry
	values map[string]*yaml.Node
	order  []string
}

func newNodeIndex(root *yaml.Node) *nodeIndex {
	idx := &nodeIndex{keys: map[string]*yaml.Node{}, values: map[string]*yaml.Node{}}
	if root.Kind == yaml.DocumentNode && len(root.Content) > 0 {
		idx.walk("", nil, root.Content[0])
	}
	return idx
}

func (x *nodeIndex) walk(p string, key, n *yaml.Node) {
	if p != "" {
		x.keys[p], x.values[p] = key, n
		x.order = append(x.order, p)
	}
	join := func(k string) string {
		if p == "" {
			return k
		}
		return p + "." + k
	}
	switch n.Kind {
	case yaml.MappingNode:
		for i := 0; i+1 < len(n.Content); i += 2 {
			x.walk(join(n.Content[i].Value), n.Content[i], n.Content[i+1])
		}
	case yaml.SequenceNode:
		for i, c := range n.Content {
			x.walk(fmt.Sprintf("%s[%d]", p, i), nil, c)
		}
	case yaml.AliasNode:
		if n.Alias != nil {
			x.walk(p, key, n.Alias)
		}
	}
}

func (x *nodeIndex) has(p string) bool { _, ok := x.values[p]; return ok }

// line is the line of p, or of its closest present ancestor.
func (x *nodeIndex) line(p string) int {
	for p != "" {
		if n := x.values[p]; n != nil {
			if k := x.keys[p]; k != nil {
				return k.Line
			}
			return n.Line
		}
		i := strings.LastIndexAny(p, ".[")
		if i < 0 {
			break
		}
		p = p[:i]
	}
	return 0
}

func (x *nodeIndex) value(p string) (string, bool) {
	n := x.values[p]
	if n == nil || n.Kind != yaml.ScalarNode {
		return "", false
	}
	return n.Value, true
}

var (
	reUnknown = regexp.MustCompile(`^line (\d+): field (\S+) not found in type (\S+)$`)
	reType    = regexp.MustCompile("^line (\\d+): cannot unmarshal (?:!!\\w+ )?`(.*)` into (.+?)(?:: (.*))?$")
	reTypeAny = regexp.MustCompile(`^line (\d+): cannot unmarshal (\S+) into (.+)$`)
)

// typeErrors converts the decoder's messages into field errors.
func (x *nodeIndex) typeErrors(file string, te *yaml.TypeError) *Error {
	out := &Error{}
	for _, msg := range te.Errors {
		fe := &FieldError{File: file, Rule: msg}
		if m := reUnknown.FindStringSubmatch(msg); m != nil {
			fe.Line, _ = strconv.Atoi(m[1])
			fe.Path = x.find(fe.Line, func(p string, k, v *yaml.Node) bool { return k != nil && k.Value == m[2] })
			fe.Rule = "unknown field"
			if known := knownKeys[m[3]]; known != nil {
				fe.Rule += "; known: " + strings.Join(known, ", ")
			}
		} else if m := reType.FindStringSubmatch(msg); m != nil {
			fe.Line, _ = strconv.Atoi(m[1])
			fe.Path = x.find(fe.Line, func(p string, k, v *yaml.Node) bool { return v.Kind == yaml.ScalarNode && v.Value == m[2] })
			fe.Value = m[2]
			fe.Rule = "want " + typeWord(m[3])
			if m[4] != "" {
				fe.Rule = m[4]
			}
		} else if m := reTypeAny.FindStringSubmatch(msg); m != nil {
			fe.Line, _ = strconv.Atoi(m[1])
			fe.Path = x.find(fe.Line, func(p string, k, v *yaml.Node) bool { return v.Line == fe.Line && v.Tag == m[2] })
			fe.Rule = "want " + typeWord(m[3]) + ", got " + tagWord(m[2])
		}
		out.Errs = append(out.Errs, fe)
	}
	return out
}

// find returns the first path whose key or value is on line and matches.
func (x *nodeIndex) find(line int, match func(p string, k, v *yaml.Node) bool) string {
	for _, p := range x.order {
		k, v := x.keys[p], x.values[p]
		if (k != nil && k.Line == line || v.Line == line) && match(p, k, v) {
			return p
		}
	}
	return ""
}

func typeWord(goType string) string {
	switch {
	case strings.HasPrefix(goType, "int"), strings.HasPrefix(goType, "uint"):
		return "an integer (" + goType + ")"
	case strings.HasPrefix(goType, "float"):
		return "a number"
	case strings.HasPrefix(goType, "[]"):
		return "a list"
	case goType == "string":
		return "a string"
	case strings.HasPrefix(goType, "scenario."):
		return "a mapping"
	}
	return goType
}

func tagWord(tag string) string {
	switch tag {
	case "!!seq":
		return "a list"
	case "!!map":
		return "a mapping"
	case "!!str":
		return "a string"
	}
	return tag
}

// knownKeys maps the decoder's type names to their YAML keys, for "unknown
// field" errors.
var knownKeys = func() map[string][]string {
	out := map[string][]string{}
	for _, v := range []any{Scenario{}, Scaling{}, Topology{}, Switch{}, PS{}, Job{}, Fault{}, LinkImpairment{}} {
		t := reflect.TypeOf(v)
		var keys []string
		for i := 0; i < t.NumField(); i++ {
			if tag := t.Field(i).Tag.Get("yaml"); tag != "" {
				keys = append(keys, strings.Split(tag, ",")[0])
			}
		}
		out[t.String()] = keys
	}
	return out
}()

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

// LinkConfig is the emulator configuration of the link between host (a
// worker host or a PS) and the switch: the scaled rate, link_delay,
// queue_packets, and the impairments of impairments[link: host], else of
// impairments[link: all].
func (s *Scenario) LinkConfig(host string) emu.LinkConfig {
	lc := emu.LinkConfig{BitsPerSecond: s.LinkBitsPerSecond(), Delay: s.Topology.LinkDelay.D(), QueuePackets: s.Topology.QueuePackets}
	if strings.HasPrefix(host, "ps") {
		lc.BitsPerSecond = s.PSLinkBitsPerSecond()
	}
	var pick *LinkImpairment
	for i := range s.Impairments {
		switch s.Impairments[i].Link {
		case host:
			pick = &s.Impairments[i]
		case "all":
			if pick == nil {
				pick = &s.Impairments[i]
			}
		}
	}
	if pick != nil {
		lc.Jitter = pick.Jitter.D()
		lc.Impairments = emu.Impairments{Loss: pick.Loss, Duplicate: pick.Duplicate, Reorder: pick.Reorder,
			ReorderDelay: pick.ReorderDelay.D(), Corrupt: pick.Corrupt}
	}
	return lc
}
