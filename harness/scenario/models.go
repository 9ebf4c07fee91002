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
// iteration and the compute time (forward + backward) of one iteration.
// A training job alternates compute ("on": no traffic) and an all-reduce of
// the whole gradient ("off").
type Model struct {
	Name        string  `yaml:"name" json:"name"`
	ParamsM     float64 `yaml:"params_m" json:"params_m"`         // parameters, millions
	GradientMiB float64 `yaml:"gradient_mib" json:"gradient_mib"` // fp32 gradient, MiB
	ComputeMs   float64 `yaml:"compute_ms" json:"compute_ms"`     // fwd+bwd per iteration, ms
	Source      string  `yaml:"source" json:"source"`
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
		case !(m.GradientMiB > 0) || math.IsInf(m.GradientMiB, 0):
			bad = fmt.Sprintf("gradient_mib: %v: must be > 0", m.GradientMiB)
		case !(m.ComputeMs > 0) || math.IsInf(m.ComputeMs, 0):
			bad = fmt.Sprintf("compute_ms: %v: must be > 0", m.ComputeMs)
		case m.ParamsM < 0:
			bad = fmt.Sprintf("params_m: %v: must be ≥ 0", m.ParamsM)
		}
		if bad != "" {
			return nil, fmt.Errorf("%s: models[%d].%s", file, i, bad)
		}
		ms[m.Name] = m
	}
	return ms, nil
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
