package faultctl

import (
	"encoding/json"
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"

	"github.com/inabox/inabox/emu"
)

// Duration is a time.Duration that JSON carries as a Go duration string
// ("1.5ms"); a number is read as nanoseconds.
type Duration time.Duration

func (d Duration) String() string { return time.Duration(d).String() }

// MarshalJSON writes d as a duration string.
func (d Duration) MarshalJSON() ([]byte, error) { return json.Marshal(time.Duration(d).String()) }

// UnmarshalJSON reads a duration string or a number of nanoseconds.
func (d *Duration) UnmarshalJSON(b []byte) error {
	var s string
	if err := json.Unmarshal(b, &s); err == nil {
		v, err := time.ParseDuration(s)
		if err != nil {
			return fmt.Errorf("%q is not a duration (e.g. 1.5ms)", s)
		}
		*d = Duration(v)
		return nil
	}
	var n float64
	if err := json.Unmarshal(b, &n); err != nil || math.IsNaN(n) || math.IsInf(n, 0) {
		return fmt.Errorf("%s is not a duration (a string such as \"1.5ms\" or nanoseconds)", b)
	}
	*d = Duration(n)
	return nil
}

// GilbertElliott is the two-state bursty loss model (emu.GilbertElliott).
type GilbertElliott struct {
	PGoodToBad float64 `json:"p_good_to_bad"`
	PBadToGood float64 `json:"p_bad_to_good"`
	LossGood   float64 `json:"loss_good"`
	LossBad    float64 `json:"loss_bad"`
}

// Impairments are a direction's random effects in force (emu.Impairments
// and the link's jitter): probabilities in [0, 1].
type Impairments struct {
	Loss              float64         `json:"loss"`
	Duplicate         float64         `json:"duplicate"`
	Reorder           float64         `json:"reorder"`
	ReorderDelay      Duration        `json:"reorder_delay"`
	Corrupt           float64         `json:"corrupt"`
	CorruptUndetected float64         `json:"corrupt_undetected"`
	Jitter            Duration        `json:"jitter"`
	GilbertElliott    *GilbertElliott `json:"gilbert_elliott,omitempty"`
}

// ImpairmentsPatch changes the impairments it gives; nil fields stay.
type ImpairmentsPatch struct {
	Loss              *float64        `json:"loss,omitempty"`
	Duplicate         *float64        `json:"duplicate,omitempty"`
	Reorder           *float64        `json:"reorder,omitempty"`
	ReorderDelay      *Duration       `json:"reorder_delay,omitempty"`
	Corrupt           *float64        `json:"corrupt,omitempty"`
	CorruptUndetected *float64        `json:"corrupt_undetected,omitempty"`
	Jitter            *Duration       `json:"jitter,omitempty"`
	GilbertElliott    *GilbertElliott `json:"gilbert_elliott,omitempty"`
}

func (p ImpairmentsPatch) apply(c *emu.LinkConfig) {
	im := &c.Impairments
	setF := func(dst *float64, v *float64) {
		if v != nil {
			*dst = *v
		}
	}
	setF(&im.Loss, p.Loss)
	setF(&im.Duplicate, p.Duplicate)
	setF(&im.Reorder, p.Reorder)
	setF(&im.Corrupt, p.Corrupt)
	setF(&im.CorruptUndetected, p.CorruptUndetected)
	if p.ReorderDelay != nil {
		im.ReorderDelay = time.Duration(*p.ReorderDelay)
	}
	if p.Jitter != nil {
		c.Jitter = time.Duration(*p.Jitter)
	}
	if g := p.GilbertElliott; g != nil {
		im.GilbertElliott = &emu.GilbertElliott{PGoodToBad: g.PGoodToBad, PBadToGood: g.PBadToGood, LossGood: g.LossGood, LossBad: g.LossBad}
	}
}

func impairmentsOf(c emu.LinkConfig) Impairments {
	im := c.Impairments
	out := Impairments{Loss: im.Loss, Duplicate: im.Duplicate, Reorder: im.Reorder, ReorderDelay: Duration(im.ReorderDelay),
		Corrupt: im.Corrupt, CorruptUndetected: im.CorruptUndetected, Jitter: Duration(c.Jitter)}
	if g := im.GilbertElliott; g != nil {
		out.GilbertElliott = &GilbertElliott{PGoodToBad: g.PGoodToBad, PBadToGood: g.PBadToGood, LossGood: g.LossGood, LossBad: g.LossBad}
	}
	return out
}

// Config is a direction's transmitter and wire (emu.LinkConfig without
// the impairments): rate 0 is unlimited, MTU 0 emu's default (1500).
type Config struct {
	RateGbps          float64  `json:"rate_gbps"`
	Delay             Duration `json:"delay"`
	MTU               int      `json:"mtu"`
	QueuePackets      int      `json:"queue_packets"`
	QueueBytes        int      `json:"queue_bytes"`
	OverheadBytes     int      `json:"overhead_bytes"`
	ECNThresholdBytes int      `json:"ecn_threshold_bytes"`
}

func configOf(c emu.LinkConfig) Config {
	return Config{RateGbps: float64(c.BitsPerSecond) / 1e9, Delay: Duration(c.Delay), MTU: c.MTUBytes, QueuePackets: c.QueuePackets,
		QueueBytes: c.QueueBytes, OverheadBytes: c.OverheadBytes, ECNThresholdBytes: c.ECNThresholdBytes}
}

// ConfigPatch changes the fields it gives; nil fields stay.
type ConfigPatch struct {
	RateGbps     *float64  `json:"rate_gbps,omitempty"`
	Delay        *Duration `json:"delay,omitempty"`
	MTU          *int      `json:"mtu,omitempty"`
	QueuePackets *int      `json:"queue_packets,omitempty"`
	QueueBytes   *int      `json:"queue_bytes,omitempty"`
}

func (p ConfigPatch) apply(c *emu.LinkConfig) error {
	if r := p.RateGbps; r != nil {
		if math.IsNaN(*r) || math.IsInf(*r, 0) {
			return &FieldError{Where: "config", Field: "rate_gbps", Value: *r, Why: "must be a number of Gb/s (0: unlimited)"}
		}
		c.BitsPerSecond = bps(*r)
	}
	if p.Delay != nil {
		c.Delay = time.Duration(*p.Delay)
	}
	if p.MTU != nil {
		c.MTUBytes = *p.MTU
	}
	if p.QueuePackets != nil {
		c.QueuePackets = *p.QueuePackets
	}
	if p.QueueBytes != nil {
		c.QueueBytes = *p.QueueBytes
	}
	return nil
}

// Drops are a direction's drops by cause (emu.Drops).
type Drops struct {
	LinkDown uint64 `json:"link_down"`
	MTU      uint64 `json:"mtu"`
	Queue    uint64 `json:"queue"`
	Loss     uint64 `json:"loss"`
	FCS      uint64 `json:"fcs"`
}

// Counters are a direction's counters (emu.LinkStats).
type Counters struct {
	SentPackets      uint64 `json:"sent_packets"`
	SentBytes        uint64 `json:"sent_bytes"`
	DeliveredPackets uint64 `json:"delivered_packets"`
	DeliveredBytes   uint64 `json:"delivered_bytes"`
	Drops            Drops  `json:"drops"`
	Duplicated       uint64 `json:"duplicated"`
	Reordered        uint64 `json:"reordered"`
	Corrupted        uint64 `json:"corrupted"`
	ECNMarked        uint64 `json:"ecn_marked"`
	QueueHighPackets int    `json:"queue_high_packets"`
	QueueHighBytes   int    `json:"queue_high_bytes"`
}

func countersOf(s emu.LinkStats) Counters {
	d := s.Drops
	return Counters{SentPackets: s.SentPackets, SentBytes: s.SentBytes, DeliveredPackets: s.DeliveredPackets, DeliveredBytes: s.DeliveredBytes,
		Drops:      Drops{LinkDown: d.LinkDown, MTU: d.MTU, Queue: d.Queue, Loss: d.Loss, FCS: d.FCS},
		Duplicated: s.Duplicated, Reordered: s.Reordered, Corrupted: s.Corrupted, ECNMarked: s.ECNMarked,
		QueueHighPackets: s.QueueHighWaterPackets, QueueHighBytes: s.QueueHighWaterBytes}
}

// DropsTotal is the sum of every drop cause.
func (c Counters) DropsTotal() uint64 {
	d := c.Drops
	return d.LinkDown + d.MTU + d.Queue + d.Loss + d.FCS
}

// WindowState is an open window and the run time left until it closes.
type WindowState struct {
	Window
	Remaining Duration `json:"remaining"`
}

// DirState is one direction as GET /links reports it: what it carries
// now (windows included), whether it is up, and its counters.
type DirState struct {
	Link        string        `json:"link"`
	Node        string        `json:"node"`
	Dir         string        `json:"dir"`
	Up          bool          `json:"up"`
	Config      Config        `json:"config"`
	Impairments Impairments   `json:"impairments"`
	Windows     []WindowState `json:"windows,omitempty"`
	Counters    Counters      `json:"counters"`
}

// Progress is a worker's progress (GET /progress), for faults timed by
// the workload: all-reduces finished of how many.
type Progress struct {
	Node       string `json:"node"`
	Role       string `json:"role"`
	Job        int    `json:"job"`
	Rank       int    `json:"rank"`
	Finished   int    `json:"finished"`
	AllReduces int    `json:"all_reduces"`
	// Received counts the frames the node has received (its first
	// packet: > 0).
	Received uint64 `json:"received"`
	Done     bool   `json:"done"`
}

// ImpairmentKeys are the keys ParseImpairments takes.
var ImpairmentKeys = []string{"loss", "duplicate", "reorder", "reorder_delay", "corrupt", "corrupt_undetected", "jitter",
	"gilbert_elliott.p_good_to_bad", "gilbert_elliott.p_bad_to_good", "gilbert_elliott.loss_good", "gilbert_elliott.loss_bad"}

// ParseImpairments reads key=value pairs (ImpairmentKeys; durations as Go
// durations, "ge." short for "gilbert_elliott.") into a patch. Any
// gilbert_elliott key sets the model, its other parameters 0.
func ParseImpairments(kvs []string) (ImpairmentsPatch, error) {
	var p ImpairmentsPatch
	for _, kv := range kvs {
		k, v, ok := strings.Cut(kv, "=")
		if !ok {
			return p, fmt.Errorf("%q: want key=value (keys: %s)", kv, strings.Join(ImpairmentKeys, ", "))
		}
		if rest, ok := strings.CutPrefix(k, "ge."); ok {
			k = "gilbert_elliott." + rest
		}
		num := func() (*float64, error) {
			f, err := strconv.ParseFloat(v, 64)
			if err != nil || math.IsNaN(f) || math.IsInf(f, 0) {
				return nil, fmt.Errorf("%s=%s: not a number", k, v)
			}
			return &f, nil
		}
		dur := func() (*Duration, error) {
			d, err := time.ParseDuration(v)
			if err != nil {
				return nil, fmt.Errorf("%s=%s: not a duration (e.g. 500us)", k, v)
			}
			x := Duration(d)
			return &x, nil
		}
		var err error
		switch k {
		case "loss":
			p.Loss, err = num()
		case "duplicate":
			p.Duplicate, err = num()
		case "reorder":
			p.Reorder, err = num()
		case "corrupt":
			p.Corrupt, err = num()
		case "corrupt_undetected":
			p.CorruptUndetected, err = num()
		case "reorder_delay":
			p.ReorderDelay, err = dur()
		case "jitter":
			p.Jitter, err = dur()
		case "gilbert_elliott.p_good_to_bad", "gilbert_elliott.p_bad_to_good", "gilbert_elliott.loss_good", "gilbert_elliott.loss_bad":
			var f *float64
			if f, err = num(); err == nil {
				if p.GilbertElliott == nil {
					p.GilbertElliott = &GilbertElliott{}
				}
				g := p.GilbertElliott
				*map[string]*float64{"gilbert_elliott.p_good_to_bad": &g.PGoodToBad, "gilbert_elliott.p_bad_to_good": &g.PBadToGood,
					"gilbert_elliott.loss_good": &g.LossGood, "gilbert_elliott.loss_bad": &g.LossBad}[k] = *f
			}
		default:
			return p, fmt.Errorf("%q: unknown key %q (keys: %s)", kv, k, strings.Join(ImpairmentKeys, ", "))
		}
		if err != nil {
			return p, err
		}
	}
	return p, nil
}
