package scenario

import (
	"bytes"
	"fmt"
	"math"
	"sort"
	"time"

	"go.yaml.in/yaml/v3"

	"github.com/inabox/inabox/testdata"
)

// Model is one model profile: the gradient one worker all-reduces per
// iteration and the compute time (forward + backward) of one iteration,
// and optionally the same per layer (group), which lets a job reduce its
// gradient in buckets during the backward pass (Job.BucketMiB). Without
// buckets a job alternates compute ("on": no traffic) and an all-reduce of
// the whole gradient ("off").
type Model struct {
	Name        string  `yaml:"name" json:"name"`
	ParamsM     float64 `yaml:"params_m" json:"params_m"`         // parameters, millions
	GradientMiB float64 `yaml:"gradient_mib" json:"gradient_mib"` // fp32 gradient, MiB
	ComputeMs   float64 `yaml:"compute_ms" json:"compute_ms"`     // fwd+bwd per iteration, ms
	Source      string  `yaml:"source" json:"source"`
	// Layers are the model's layers (or layer groups) in forward order:
	// input first. When given, their parameters must add up to params_m
	// and gradient_mib and their times to compute_ms.
	Layers []Layer `yaml:"layers,omitempty" json:"-"`
}

// Layer is one layer (group) of a model profile: its parameters and its
// forward and backward compute time on one worker.
type Layer struct {
	Params     int64   `yaml:"params" json:"params"`
	ForwardUs  float64 `yaml:"forward_us" json:"forward_us"`
	BackwardUs float64 `yaml:"backward_us" json:"backward_us"`
}

// Bucket is one all-reduce of a bucketed iteration: Params gradient
// elements, ready Backward after the previous bucket (or the forward
// pass's end).
type Bucket struct {
	Params   int64
	Backward time.Duration
}

// BackwardShare is the share of an iteration's compute spent in the
// backward pass for a model without layers (the median of the profiled
// models' backward/(forward+backward), testdata/models/models.yaml: 0.66,
// the common "backward ≈ 2× forward").
const BackwardShare = 2.0 / 3

// Buckets splits one iteration of m into all-reduces of at least capBytes
// of fp32 gradient each, as data-parallel frameworks bucket gradients
// (PyTorch DDP's bucket_cap_mb): layers are taken in reverse order (the
// backward pass computes the last layer's gradient first) and a bucket is
// closed once it holds capBytes or more, so a layer larger than capBytes is
// a bucket of its own; the last bucket holds what is left. It returns the
// forward pass and the buckets in the order they become ready. A model
// without layers is cut into ⌈gradient / capBytes⌉ equal buckets, its
// backward time (BackwardShare of compute_ms) split by size. capBytes ≤ 0
// gives one bucket: the whole gradient after the whole compute.
func (m Model) Buckets(capBytes int64) (forward time.Duration, buckets []Bucket) {
	ms := func(x float64) time.Duration { return time.Duration(math.Round(x * float64(time.Millisecond))) }
	us := func(x float64) time.Duration { return time.Duration(math.Round(x * float64(time.Microsecond))) }
	if capBytes <= 0 {
		return m.Compute(), []Bucket{{Params: m.Elements()}}
	}
	if len(m.Layers) == 0 {
		total := m.Elements()
		n := max((4*total+capBytes-1)/capBytes, 1)
		bwd := ms(m.ComputeMs * BackwardShare)
		forward = m.Compute() - bwd
		var doneP int64
		var doneB time.Duration
		for i := int64(1); i <= n; i++ {
			p := total * i / n
			b := time.Duration(float64(bwd) * float64(p) / float64(total))
			buckets = append(buckets, Bucket{Params: p - doneP, Backward: b - doneB})
			doneP, doneB = p, b
		}
		return forward, buckets
	}
	for _, l := range m.Layers {
		forward += us(l.ForwardUs)
	}
	var cur Bucket
	for i := len(m.Layers) - 1; i >= 0; i-- {
		l := m.Layers[i]
		cur.Params += l.Params
		cur.Backward += us(l.BackwardUs)
		if 4*cur.Params >= capBytes || i == 0 {
			buckets = append(buckets, cur)
			cur = Bucket{}
		}
	}
	return forward, buckets
}

// numBuckets is len(m.Buckets(capBytes)), without making them.
func (m Model) numBuckets(capBytes int64) int64 {
	if capBytes <= 0 {
		return 1
	}
	if len(m.Layers) == 0 {
		return max((4*m.Elements()+capBytes-1)/capBytes, 1)
	}
	var n, cur int64
	for i := len(m.Layers) - 1; i >= 0; i-- {
		cur += m.Layers[i].Params
		if 4*cur >= capBytes || i == 0 {
			n, cur = n+1, 0
		}
	}
	return n
}

// GradientBytes is the size of the fp32 gradient in bytes.
func (m Model) GradientBytes() int64 { return int64(math.Round(m.GradientMiB * (1 << 20))) }

// Elements is the number of gradient elements (4 bytes each) one
// all-reduce aggregates.
func (m Model) Elements() int64 { return m.GradientBytes() / 4 }

// Compute is the per-iteration compute time.
func (m Model) Compute() time.Duration {
	return time.Duration(math.Round(m.ComputeMs * float64(time.Millisecond)))
}

// CommTime is the ideal time to push the gradient once through a link of
// bitsPerSecond with the given wire efficiency (payload bytes / wire bytes,
// in (0, 1]; 1 ignores headers). It is the lower bound of an INA all-reduce:
// each worker sends its gradient once and receives the result once, on the
// two directions of its link.
func (m Model) CommTime(bitsPerSecond, efficiency float64) time.Duration {
	if bitsPerSecond <= 0 || efficiency <= 0 {
		return 0
	}
	return time.Duration(math.Round(float64(m.GradientBytes()) * 8 / (bitsPerSecond * efficiency) * 1e9))
}

// CommRatio is CommTime / Compute: above about 0.2 a model is
// communication-intensive (VGG, BERT, GPT-2), below it compute-bound
// (ResNet50, Inception, GoogLeNet).
func (m Model) CommRatio(bitsPerSecond, efficiency float64) float64 {
	if m.ComputeMs <= 0 {
		return math.Inf(1)
	}
	return float64(m.CommTime(bitsPerSecond, efficiency)) / float64(m.Compute())
}

// WireEfficiency is payload / wire bytes of an INA packet carrying
// valuesPerPacket int32 values behind headerBytes of headers.
func WireEfficiency(valuesPerPacket, headerBytes int) float64 {
	p := float64(4 * valuesPerPacket)
	return p / (p + float64(headerBytes))
}

// Models is a set of model profiles by name.
type Models map[string]Model

// Names returns the model names, sorted.
func (ms Models) Names() []string {
	out := make([]string, 0, len(ms))
	for n := range ms {
		out = append(out, n)
	}
	sort.Strings(out)
	return out
}

// ParseModels decodes a models file (the format of
// testdata/models/models.yaml). file names the source in errors.
func ParseModels(file string, data []byte) (Models, error) {
	var doc struct {
		Models []Model `yaml:"models"`
	}
	dec := yaml.NewDecoder(bytes.NewReader(data))
	dec.KnownFields(true)
	if err := dec.Decode(&doc); err != nil {
		return nil, fmt.Errorf("%s: %w", file, err)
	}
	if len(doc.Models) == 0 {
		return nil, fmt.Errorf("%s: models: no models", file)
	}
	ms := Models{}
	for i, m := range doc.Models {
		var bad string
		switch {
		case m.Name == "":
			bad = fmt.Sprintf("name: %q: must not be empty", m.Name)
		case ms[m.Name].Name != "":
			bad = fmt.Sprintf("name: %q: duplicate model", m.Name)
		case !(m.GradientMiB > 0 && m.GradientMiB <= MaxGradientMiB):
			bad = fmt.Sprintf("gradient_mib: %v: must be in (0, %d]", m.GradientMiB, MaxGradientMiB)
		case !(m.ComputeMs > 0 && m.ComputeMs <= MaxComputeMs):
			bad = fmt.Sprintf("compute_ms: %v: must be in (0, %d] (one hour)", m.ComputeMs, MaxComputeMs)
		case !(m.ParamsM >= 0) || math.IsInf(m.ParamsM, 0):
			bad = fmt.Sprintf("params_m: %v: must be ≥ 0", m.ParamsM)
		default:
			bad = m.checkLayers()
		}
		if bad != "" {
			return nil, &modelError{file: file, index: i, problem: bad}
		}
		ms[m.Name] = m
	}
	return ms, nil
}

// The bounds of a model profile: a gradient of at most 1 TiB (so its
// bytes and elements fit an int64), an iteration's compute of at most an
// hour (so a million of them fit a time.Duration), and layers within the
// same.
const (
	MaxGradientMiB = 1 << 20
	MaxComputeMs   = 3_600_000
	MaxLayerParams = MaxGradientMiB << 20 / 4
	MaxLayerTimeUs = MaxComputeMs * 1000
)

// modelError is the first problem of a models file: "FILE:
// models[INDEX].FIELD: VALUE: RULE".
type modelError struct {
	file    string
	index   int
	problem string // "FIELD: VALUE: RULE"
}

func (e *modelError) Error() string {
	return fmt.Sprintf("%s: models[%d].%s", e.file, e.index, e.problem)
}

// checkLayers names the first layer field that is invalid or that does
// not add up to the model's totals, or returns "".
func (m Model) checkLayers() string {
	if len(m.Layers) == 0 {
		return ""
	}
	var params int64
	var us float64
	for i, l := range m.Layers {
		switch {
		case l.Params <= 0 || l.Params > MaxLayerParams:
			return fmt.Sprintf("layers[%d].params: %d: must be between 1 and %d", i, l.Params, int64(MaxLayerParams))
		case !(l.ForwardUs >= 0 && l.ForwardUs <= MaxLayerTimeUs):
			return fmt.Sprintf("layers[%d].forward_us: %v: must be in [0, %d]", i, l.ForwardUs, int64(MaxLayerTimeUs))
		case !(l.BackwardUs >= 0 && l.BackwardUs <= MaxLayerTimeUs):
			return fmt.Sprintf("layers[%d].backward_us: %v: must be in [0, %d]", i, l.BackwardUs, int64(MaxLayerTimeUs))
		}
		params += l.Params
		us += l.ForwardUs + l.BackwardUs
	}
	mib := float64(4*params) / (1 << 20)
	switch {
	case math.Abs(mib-m.GradientMiB) > 1:
		return fmt.Sprintf("gradient_mib: %v: the layers hold %d parameters (%.1f MiB of fp32)", m.GradientMiB, params, mib)
	case m.ParamsM > 0 && math.Abs(float64(params)/1e6-m.ParamsM) > 0.1:
		return fmt.Sprintf("params_m: %v: the layers hold %.2f M parameters", m.ParamsM, float64(params)/1e6)
	case math.Abs(us/1000-m.ComputeMs) > 0.5:
		return fmt.Sprintf("compute_ms: %v: the layers' forward and backward times add up to %.1f ms", m.ComputeMs, us/1000)
	}
	return ""
}

var defaultModels = func() Models {
	ms, err := ParseModels("testdata/models/models.yaml", testdata.Models)
	if err != nil {
		panic(err)
	}
	return ms
}()

// DefaultModels returns the embedded profiles of testdata/models/models.yaml.
// The caller may modify the returned map.
func DefaultModels() Models {
	out := make(Models, len(defaultModels))
	for k, v := range defaultModels {
		out[k] = v
	}
	return out
}
