package main

import (
	"bytes"
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/inabox/inabox/harness/run"
	"github.com/inabox/inabox/harness/scenario"
)

// TestParallelRunsSameOutputs: compare (one seed and several) and sweep
// print the same bytes and write the same files whether their runs go one
// at a time or three at a time (each run is a function of its scenario,
// policy and seed; under -race this also runs the policies side by side).
func TestParallelRunsSameOutputs(t *testing.T) {
	f := smallContention(t)
	for _, c := range []struct {
		name string
		args []string
	}{
		{"compare", []string{"compare", "--json", f}},
		{"compare-seeds", []string{"compare", "--seeds", "2", "--policies", "freeina,atp,switchml", f}},
		{"sweep", []string{"sweep", "--set", "topology.software_stack.gbps=100,30", "--policies", "atp,freeina"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			var outs [2]string
			var files [2]map[string]string
			for k, par := range []string{"1", "3"} {
				dir := filepath.Join(t.TempDir(), "out")
				args := append([]string{c.args[0], "--parallel", par, "--out", dir}, c.args[1:]...)
				var out, errb bytes.Buffer
				if err := runCLI(args, &out, &errb); err != nil {
					t.Fatalf("--parallel %s: %v\n%s", par, err, errb.String())
				}
				if said := strings.Contains(errb.String(), "at a time"); said != (par != "1") {
					t.Errorf("--parallel %s: stderr %q", par, errb.String())
				}
				outs[k] = out.String()
				files[k] = readDir(t, dir)
			}
			if outs[0] != outs[1] {
				t.Fatalf("stdout differs:\n--parallel 1:\n%s\n--parallel 3:\n%s", outs[0], outs[1])
			}
			if len(files[0]) == 0 || len(files[0]) != len(files[1]) {
				t.Fatalf("%d files one at a time, %d three at a time", len(files[0]), len(files[1]))
			}
			for name, b := range files[0] {
				if files[1][name] != b {
					t.Errorf("%s differs", name)
				}
			}
		})
	}
}

// readDir returns every file under dir by its path in dir.
func readDir(t *testing.T, dir string) map[string]string {
	t.Helper()
	out := map[string]string{}
	err := filepath.WalkDir(dir, func(p string, d os.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		b, err := os.ReadFile(p)
		rel, _ := filepath.Rel(dir, p)
		out[rel] = string(b)
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// TestRunTasksInterrupted: once the context is done no task starts, and
// the ones running end with run.ErrInterrupted, one at a time or several.
func TestRunTasksInterrupted(t *testing.T) {
	for _, par := range []int{1, 2} {
		ctx, cancel := context.WithCancel(context.Background())
		cancel()
		var tasks []*runTask
		for range 4 {
			tasks = append(tasks, &runTask{label: "t", load: func() (*scenario.Scenario, error) { return scenario.Embedded(scenario.DefaultName) },
				opts: run.Options{Policy: "freeina"}})
		}
		runTasks(ctx, tasks, par, nil, false)
		for i, task := range tasks {
			if task.started && !errors.Is(task.err, run.ErrInterrupted) {
				t.Fatalf("--parallel %d: task %d started and ended with %v, want interrupted", par, i, task.err)
			}
			if task.r != nil {
				t.Fatalf("--parallel %d: task %d has results", par, i)
			}
		}
	}
}

// TestParallelRuns: an explicit --parallel holds (up to the runs there
// are); the default is at least one and no more than the runs, and memory
// for less than one run still gives one.
func TestParallelRuns(t *testing.T) {
	if n, why := parallelRuns(5, 3, 1<<30); n != 3 || why != "--parallel" {
		t.Errorf("--parallel 5 of 3 runs: %d (%s)", n, why)
	}
	if n, _ := parallelRuns(0, 1, 1<<20); n != 1 {
		t.Errorf("one run: %d at a time", n)
	}
	if n, _ := parallelRuns(0, 100, 1<<62); n != 1 {
		t.Errorf("runs of 4 EiB each: %d at a time", n)
	}
	if _, ok := memAvailable(); !ok {
		t.Log("no /proc/meminfo MemAvailable here: the default ignores memory")
	}
}

// TestRunMemory: the estimate follows what each policy holds per element
// (SwitchML nothing, a PS its results, the ring a gradient per worker),
// takes the largest of the policies compared, and counts a small job's
// held gradients, not a large one's (made on demand).
func TestRunMemory(t *testing.T) {
	// resnet50 × 2 workers at scale
	at := func(scale string) *scenario.Scenario {
		s, err := scenario.Parse("s.yaml", []byte("name: s\nseed: 1\nscaling: {tensor_scale: "+scale+", rate_scale: "+scale+"}\n"+
			"jobs:\n  - {name: a, model: resnet50, workers: 2, iterations: 1}\n"), scenario.DefaultModels())
		if err != nil {
			t.Fatal(err)
		}
		return s
	}
	big := at("1")
	const base, elems = 256 << 20, 25559040 // resnet50, one bucket
	for _, c := range []struct {
		policies []string
		want     int64
	}{
		{[]string{"switchml"}, base},
		{[]string{"freeina"}, base + 12*elems},
		{[]string{"atp", "switchml"}, base + 12*elems},
		{[]string{"none"}, base + 16*2*elems},
		{[]string{"switchml", "none", "esa"}, base + 16*2*elems},
	} {
		if got := runMemory(big, c.policies); got != c.want {
			t.Errorf("%v: %d bytes, want %d", c.policies, got, c.want)
		}
	}
	small := at("0.01")
	n := small.Plan(scenario.DefaultModels())[0].Elements
	if got, want := runMemory(small, []string{"switchml"}), base+4*n*6; got != want {
		t.Errorf("a small job: %d bytes, want %d (its gradients and sums held)", got, want)
	}
}
