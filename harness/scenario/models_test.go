package scenario

import (
	"strings"
	"testing"
	"time"
)

func TestDefaultModels(t *testing.T) {
	ms := DefaultModels()
	if len(ms) < 10 {
		t.Fatalf("%d models", len(ms))
	}
	r50, vgg := ms["resnet50"], ms["vgg16"]
	if r50.Compute() != 307700*time.Microsecond || r50.GradientBytes() != 102236160 || r50.Elements() != 25559040 {
		t.Errorf("resnet50 = %+v: compute %v bytes %d", r50, r50.Compute(), r50.GradientBytes())
	}
	// At 100 Gb/s: VGG16 is communication-intensive, ResNet50 compute-bound
	// (research notes §5.2).
	eff := WireEfficiency(64, 52)
	if rv, rr := vgg.CommRatio(100e9, eff), r50.CommRatio(100e9, eff); rv < 0.09 || rr > 0.05 || rv < 3*rr {
		t.Errorf("comm ratios: vgg16 %.3f resnet50 %.3f", rv, rr)
	}
	if got := vgg.CommTime(100e9, 1); got < 44*time.Millisecond || got > 45*time.Millisecond {
		t.Errorf("vgg16 comm time at 100G = %v", got)
	}
	names := ms.Names()
	for i := 1; i < len(names); i++ {
		if names[i-1] >= names[i] {
			t.Fatalf("names not sorted: %v", names)
		}
	}
}

func TestParseModelsErrors(t *testing.T) {
	cases := []struct{ src, want string }{
		{"models: []", "m.yaml: models: no models"},
		{"models:\n  - {name: a, gradient_mib: 0, compute_ms: 1}", "m.yaml: models[0].gradient_mib: 0: must be in (0, 1048576]"},
		{"models:\n  - {name: a, gradient_mib: 1e300, compute_ms: 1}", "m.yaml: models[0].gradient_mib: 1e+300: must be in (0, 1048576]"},
		{"models:\n  - {name: a, gradient_mib: .nan, compute_ms: 1}", "m.yaml: models[0].gradient_mib: NaN: must be in (0, 1048576]"},
		{"models:\n  - {name: a, gradient_mib: 1, compute_ms: -1}", "m.yaml: models[0].compute_ms: -1: must be in (0, 3600000] (one hour)"},
		{"models:\n  - {name: a, gradient_mib: 1, compute_ms: 1e300}", "m.yaml: models[0].compute_ms: 1e+300: must be in (0, 3600000] (one hour)"},
		{"models:\n  - {name: a, gradient_mib: 1, compute_ms: 1, params_m: .nan}", "m.yaml: models[0].params_m: NaN: must be ≥ 0"},
		{"models:\n  - {name: a, gradient_mib: 1, compute_ms: 1, layers: [{params: 9223372036854775807, forward_us: 1, backward_us: 1}]}",
			"m.yaml: models[0].layers[0].params: 9223372036854775807: must be between 1 and 274877906944"},
		{"models:\n  - {name: a, gradient_mib: 1, compute_ms: 1, layers: [{params: 1, forward_us: .inf, backward_us: 1}]}",
			"m.yaml: models[0].layers[0].forward_us: +Inf: must be in [0, 3600000000]"},
		{"models:\n  - {name: a, gradient_mib: 1, compute_ms: 1}\n  - {name: a, gradient_mib: 1, compute_ms: 1}", `models[1].name: "a": duplicate`},
		{"models:\n  - {name: '', gradient_mib: 1, compute_ms: 1}", `models[0].name: "": must not be empty`},
		{"models:\n  - {name: a, gradient: 1}", "field gradient not found"},
	}
	for _, c := range cases {
		_, err := ParseModels("m.yaml", []byte(c.src))
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%q: error %v, want %q", c.src, err, c.want)
		}
	}
}

// TestNumBuckets: numBuckets counts what Buckets makes, with and without
// layers, for caps from a byte to more than the gradient.
func TestNumBuckets(t *testing.T) {
	ms := DefaultModels()
	ms["flat"] = Model{Name: "flat", GradientMiB: 0.03, ComputeMs: 1}
	for _, m := range ms {
		for _, c := range []int64{-1, 0, 1, 1000, 1 << 20, 25 << 20, 1 << 40} {
			if c < 1<<20 && c > 0 && len(m.Layers) == 0 && m.Name != "flat" {
				continue // hundreds of millions of buckets
			}
			_, bs := m.Buckets(c)
			if n := m.numBuckets(c); n != int64(len(bs)) {
				t.Errorf("%s, cap %d: numBuckets %d, Buckets %d", m.Name, c, n, len(bs))
			}
		}
	}
}
