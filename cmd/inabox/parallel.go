package main

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"runtime"
	"strconv"
	"sync"

	"github.com/inabox/inabox/harness/report"
	"github.com/inabox/inabox/harness/run"
	"github.com/inabox/inabox/harness/scenario"
)

// parallelUsage is the --parallel flag's usage, for compare and sweep.
const parallelUsage = "run `N` runs at a time (0: as many as there are CPUs, fewer where the memory available would not hold them); the results do not depend on it"

// runTask is one run of a comparison or a sweep: a scenario under one
// policy and seed. Each run is a deterministic function of its scenario,
// policy and seed, so running tasks side by side changes none of their
// results, only when each ends.
type runTask struct {
	label string
	// load returns the task's own scenario (a run never shares one with
	// another running beside it).
	load func() (*scenario.Scenario, error)
	opts run.Options // without Progress and Context

	r       *report.Results
	err     error
	started bool // false: not run (the command was interrupted first)
}

// runTasks runs tasks, at most par at a time (par ≥ 1), each on a
// goroutine of its own with its own scenario, and leaves each one's
// result or error in it. Once ctx is done no further task starts; those
// running stop at their next event (run.ErrInterrupted). One at a time,
// each run draws its own progress bar, as `inabox run` does; several at
// a time share one line.
func runTasks(ctx context.Context, tasks []*runTask, par int, stderr io.Writer, progress bool) {
	do := func(t *runTask, p report.Progress) {
		t.started = true
		prog := &onceDone{Progress: p}
		defer prog.Done() // also for a run that fails before it starts
		s, err := t.load()
		if err != nil {
			t.err = err
			return
		}
		o := t.opts
		o.Progress, o.Context = prog, ctx
		o.ChecksInline = par > 1 // the runs side by side keep the CPUs busy
		t.r, t.err = run.Run(s, o)
	}
	if par <= 1 {
		for _, t := range tasks {
			if ctx.Err() != nil {
				return
			}
			do(t, report.NewProgress(stderr, t.label, progress))
			if errors.Is(t.err, run.ErrInterrupted) {
				return
			}
		}
		return
	}
	mp := report.NewMultiProgress(stderr, len(tasks), progress)
	defer mp.Close()
	next := make(chan *runTask)
	var wg sync.WaitGroup
	for range min(par, len(tasks)) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for t := range next {
				if ctx.Err() != nil { // as one at a time: none starts once interrupted
					continue
				}
				do(t, mp.Run(t.label))
			}
		}()
	}
feed:
	for _, t := range tasks {
		if ctx.Err() != nil { // select picks at random when both are ready
			break
		}
		select {
		case next <- t:
		case <-ctx.Done():
			break feed
		}
	}
	close(next)
	wg.Wait()
}

// onceDone is a Progress whose Done acts once.
type onceDone struct {
	report.Progress
	done bool
}

func (p *onceDone) Done() {
	if !p.done {
		p.done = true
		p.Progress.Done()
	}
}

// parallelRuns is how many of n runs to run at a time: want when it is
// set (≥ 1), otherwise as many as there are CPUs (GOMAXPROCS), but no
// more than 3/4 of the memory the system has available holds at per
// bytes a run (runMemory), and at least one. It also says why, for the
// command's line on stderr.
func parallelRuns(want, n int, per int64) (int, string) {
	if want >= 1 {
		return min(want, max(n, 1)), "--parallel"
	}
	par := min(runtime.GOMAXPROCS(0), max(n, 1))
	why := fmt.Sprintf("%d CPUs", runtime.GOMAXPROCS(0))
	if avail, ok := memAvailable(); ok && per > 0 {
		if fit := int(avail * 3 / 4 / per); fit < par {
			par = max(fit, 1)
			why = fmt.Sprintf("%.1f GiB of memory available, about %.1f GiB a run", float64(avail)/(1<<30), float64(per)/(1<<30))
		}
	}
	return par, why
}

// runMemory is a rough upper bound on the peak memory in bytes of one run
// of scenario s under any of policies: 256 MiB, plus, over every job (as
// if all ran at once), the gradients and reference sums the runner holds
// for a small job (4 bytes an element after tensor_scale, 2 per worker and
// 2), and what the policy holds per element for any job: the ring
// (none) a quantized gradient per worker and its messages, a parameter
// server the results of its chunks (ATP, ESA; FreeINA and DynaINA on the
// PS path), SwitchML nothing. Results are checked as they arrive and not
// kept (harness/run). Measured peaks at true scale (docs/emulator.md),
// with what this gives in brackets: one VGG-11 job of 4 workers 0.35 GB
// under FreeINA and DynaINA (1.86), 1.12 GB under ATP and ESA (1.86), 3.78
// GB under none (8.77), 0.07 GB under SwitchML (0.27); three ResNet-50
// jobs of 2 workers 0.29 / 0.92 / 1.80 / 0.04 GB under FreeINA / ESA /
// none / SwitchML (1.19, 1.19, 2.72, 0.27).
func runMemory(s *scenario.Scenario, policies []string) int64 {
	var most int64
	plans := s.Plan(scenario.DefaultModels())
	for _, pol := range policies {
		m := int64(256 << 20)
		for _, p := range plans {
			if held := scenario.HeldGradientBytes(p.Elements, p.Workers); held <= scenario.LazyGradientBytes {
				m += held
			}
			switch pol {
			case "none":
				m += 16 * p.Elements * int64(p.Workers)
			case "switchml":
			default:
				m += scenario.PSResultBytesPerElement * p.Elements
			}
		}
		most = max(most, m)
	}
	return most
}

// memAvailable is the memory the system can give new work without
// swapping (Linux's MemAvailable), in bytes.
func memAvailable() (int64, bool) {
	f, err := os.Open("/proc/meminfo")
	if err != nil {
		return 0, false
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		k, v, ok := bytes.Cut(sc.Bytes(), []byte(":"))
		if !ok || string(k) != "MemAvailable" {
			continue
		}
		f := bytes.Fields(v) // "24000000 kB"
		if len(f) != 2 || string(f[1]) != "kB" {
			return 0, false
		}
		kb, err := strconv.ParseInt(string(f[0]), 10, 64)
		return kb << 10, err == nil && kb > 0
	}
	return 0, false
}
