package scenario

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// FuzzParseTrace: any trace either parses into jobs every field of which
// is in range, or fails with an error naming a line or the whole file.
func FuzzParseTrace(f *testing.F) {
	f.Add([]byte("arrival,model,workers,iterations\n0s,resnet50,4,10\n100ms,vgg16,8,3\n"))
	f.Add([]byte("model,iterations,arrival,workers,priority,bucket_mib\n# c\nvgg16,2,0,2,7,25\n"))
	f.Add([]byte("arrival,model,workers,iterations\n1s,resnet50,4,10\n0s,vgg16,8,3\n"))
	f.Add([]byte("arrival,model\n\"unterminated\n"))
	ms := DefaultModels()
	f.Fuzz(func(t *testing.T, data []byte) {
		jobs, err := parseTrace(data, ms)
		if err != nil {
			if err.Error() == "" {
				t.Fatal("empty error")
			}
			return
		}
		if len(jobs) == 0 || len(jobs) > MaxGeneratedJobs {
			t.Fatalf("%d jobs", len(jobs))
		}
		for i, j := range jobs {
			if _, ok := ms[j.Model]; !ok || j.Workers < 1 || j.Workers > MaxJobWorkers || j.Iterations < 1 ||
				j.Iterations > MaxIterations || j.Arrival < 0 || j.Priority < 0 || j.Priority > 255 || j.BucketMiB < 0 ||
				(i > 0 && j.Arrival < jobs[i-1].Arrival) {
				t.Fatalf("job %d out of range: %+v", i, j)
			}
		}
	})
}

func TestTraceErrors(t *testing.T) {
	ms := DefaultModels()
	for _, c := range []struct{ in, want string }{
		{"", "empty"},
		{"arrival,model,workers\n", `no "iterations" column`},
		{"arrival,model,workers,iterations,gpu\n", `column "gpu": unknown`},
		{"arrival,model,workers,iterations\n", "no jobs"},
		{"arrival,model,workers,iterations\n5,resnet50,2,2\n", `line 2: arrival: "5": want a Go duration`},
		{"arrival,model,workers,iterations\n1s,resnet50,2,2\n0s,resnet50,2,2\n", "line 3: arrival"},
		{"arrival,model,workers,iterations\n0s,resnet5,2,2\n", `line 2: model: "resnet5": unknown model`},
		{"arrival,model,workers,iterations\n0s,resnet50,2,2.5\n", `line 2: iterations: "2.5": must be an integer`},
		{"arrival,model,workers,iterations\n0s,resnet50,2\n", "wrong number of fields"},
	} {
		_, err := parseTrace([]byte(c.in), ms)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%q: error %v, want it to contain %q", c.in, err, c.want)
		}
	}
}

// TestOwnModels: a scenario's own profiles (models_file, then models)
// resolve its jobs, replace an embedded one of the same name, and a bad one
// is refused naming the field.
func TestOwnModels(t *testing.T) {
	dir := t.TempDir()
	file := dir + "/s.yaml"
	mf := "models:\n  - {name: resnet50, params_m: 1, gradient_mib: 4, compute_ms: 9, source: mine}\n"
	if err := os.WriteFile(dir+"/m.yaml", []byte(mf), 0o644); err != nil {
		t.Fatal(err)
	}
	src := `models_file: m.yaml
models:
  - {name: tiny, params_m: 1, gradient_mib: 3.815, compute_ms: 10, source: test,
     layers: [{params: 500000, forward_us: 2000, backward_us: 4000}, {params: 500000, forward_us: 1000, backward_us: 3000}]}
jobs:
  - {name: a, model: tiny, workers: 2, iterations: 1, bucket_mib: 1}
  - {name: b, model: resnet50, workers: 2, iterations: 1}
`
	s, err := Parse(file, []byte(src), DefaultModels())
	if err != nil {
		t.Fatal(err)
	}
	ps := s.Plan(DefaultModels())
	if len(ps[0].Buckets) != 2 || ps[0].Forward != 3*time.Millisecond || ps[1].Compute != 9*time.Millisecond {
		t.Errorf("plans: %d buckets, forward %v; resnet50 compute %v", len(ps[0].Buckets), ps[0].Forward, ps[1].Compute)
	}
	for bad, want := range map[string]string{
		strings.Replace(src, "compute_ms: 10", "compute_ms: 12", 1): "models[0].compute_ms: 12: the layers' forward and backward times add up to 10.0 ms",
		strings.Replace(src, "m.yaml", "nope.yaml", 1):              `models_file: "nope.yaml": cannot read it`,
		strings.Replace(src, "model: tiny,", "model: tinny,", 1):    "jobs[0].model",
	} {
		if _, err := Parse(file, []byte(bad), DefaultModels()); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("error %v, want %q", err, want)
		}
	}
}

// TestShippedRegimes: every experiment file under docs/results parses.
func TestShippedRegimes(t *testing.T) {
	files, _ := filepath.Glob("../../docs/results/ablation/*.yaml")
	more, _ := filepath.Glob("../../docs/results/*.yaml")
	if len(files) < 5 {
		t.Fatalf("%d ablation regimes", len(files))
	}
	for _, f := range append(files, more...) {
		if _, err := Load(f); err != nil {
			t.Error(err)
		}
	}
}
