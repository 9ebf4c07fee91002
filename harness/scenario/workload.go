package scenario

import (
	"bytes"
	"encoding/csv"
	"errors"
	"fmt"
	"io"
	"math"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/inabox/inabox/host"
)

// Limits of the workload fields.
const (
	// MaxGeneratedJobs bounds arrivals.jobs and a trace's rows.
	MaxGeneratedJobs = 1000
	// MaxBucketMiB bounds bucket_mib.
	MaxBucketMiB = 1 << 20
	// MaxTraceBytes bounds a trace file.
	MaxTraceBytes = 1 << 20
)

// expandArrivals appends the jobs s.Arrivals generates for seed to the
// listed ones (s.listed of them). read reads a trace file named relative
// to the scenario's directory.
func (s *Scenario) expandArrivals(seed uint64, models Models, read func(string) ([]byte, error)) error {
	s.Jobs = s.Jobs[:s.listed]
	a := s.Arrivals
	if a == nil {
		return nil
	}
	v := validator{s: s}
	const p = "arrivals."
	prefix := a.Prefix
	if prefix == "" {
		prefix = "job"
	}
	v.check(p+"prefix", prefix, namePattern.MatchString(prefix), "must match [A-Za-z0-9_.-]+")
	v.check(p+"bucket_mib", a.BucketMiB, a.BucketMiB >= 0 && a.BucketMiB <= MaxBucketMiB, fmt.Sprintf("must be in [0, %d]", MaxBucketMiB))
	v.check(p+"start", a.Start, a.Start >= 0, "must be ≥ 0")
	var gen []Job
	switch a.Process {
	case ArrivalsPoisson:
		v.check(p+"jobs", a.Jobs, a.Jobs >= 1 && a.Jobs <= MaxGeneratedJobs, fmt.Sprintf("must be between 1 and %d", MaxGeneratedJobs))
		v.check(p+"mean_interarrival", a.MeanInterarrival, a.MeanInterarrival > 0, "must be > 0")
		v.check(p+"trace", a.Trace, a.Trace == "", "applies to process: trace only")
		if v.check(p+"models", len(a.Models), len(a.Models) > 0, "list at least one model to draw from") {
			for i, m := range a.Models {
				_, ok := models[m]
				v.check(fmt.Sprintf("%smodels[%d]", p, i), m, ok, "unknown model; known: "+strings.Join(models.Names(), ", "))
			}
		}
		if v.check(p+"workers", len(a.Workers), len(a.Workers) > 0, "list at least one worker count to draw from") {
			for i, w := range a.Workers {
				v.check(fmt.Sprintf("%sworkers[%d]", p, i), w, w >= 1 && w <= MaxJobWorkers, fmt.Sprintf("must be between 1 and %d", MaxJobWorkers))
			}
		}
		if v.check(p+"iterations", len(a.Iterations), len(a.Iterations) > 0, "list at least one iteration count to draw from") {
			for i, n := range a.Iterations {
				v.check(fmt.Sprintf("%siterations[%d]", p, i), n, n >= 1 && n <= MaxIterations, fmt.Sprintf("must be between 1 and %d", MaxIterations))
			}
		}
		if len(v.errs) > 0 {
			return &Error{Errs: v.errs}
		}
		gen = poisson(a, seed)
	case ArrivalsTrace:
		for _, f := range []string{"jobs", "mean_interarrival", "models", "workers", "iterations"} {
			v.check(p+f, "", !s.has(p+f), "applies to process: poisson only (the trace gives every job)")
		}
		if !v.check(p+"trace", a.Trace, a.Trace != "", "name the CSV file (relative to the scenario's directory)") {
			return &Error{Errs: v.errs}
		}
		if len(v.errs) > 0 {
			return &Error{Errs: v.errs}
		}
		data, err := read(a.Trace)
		if err != nil {
			v.fail(p+"trace", a.Trace, "cannot read it: "+err.Error())
			return &Error{Errs: v.errs}
		}
		if gen, err = parseTrace(data, models); err != nil {
			v.fail(p+"trace", a.Trace, err.Error())
			return &Error{Errs: v.errs}
		}
		for i := range gen {
			gen[i].Arrival += a.Start
		}
	default:
		v.fail(p+"process", a.Process, "must be poisson or trace")
		return &Error{Errs: v.errs}
	}
	if len(v.errs) > 0 {
		return &Error{Errs: v.errs}
	}
	w := len(strconv.Itoa(max(len(gen)-1, 0)))
	for i := range gen {
		gen[i].Name = fmt.Sprintf("%s%0*d", prefix, w, i)
		if gen[i].BucketMiB == 0 {
			gen[i].BucketMiB = a.BucketMiB
		}
		gen[i].Compute = a.Compute
	}
	s.Jobs = append(s.Jobs, gen...)
	return nil
}

// poisson draws a's jobs for seed: exponential interarrivals, model,
// workers and iterations uniform over their lists.
func poisson(a *Arrivals, seed uint64) []Job {
	key := seed*0x9E3779B97F4A7C15 ^ 0xA5A5_0000_A11C
	t := float64(a.Start)
	out := make([]Job, a.Jobs)
	pick := func(i, k, n int) int { return min(int(host.Uniform(key+uint64(k), uint64(i))*float64(n)), n-1) }
	for i := range out {
		u := host.Uniform(key, uint64(i))
		t += -float64(a.MeanInterarrival) * math.Log1p(-u)
		out[i] = Job{Model: a.Models[pick(i, 1, len(a.Models))], Workers: a.Workers[pick(i, 2, len(a.Workers))],
			Iterations: a.Iterations[pick(i, 3, len(a.Iterations))], Arrival: Duration(math.Round(t))}
	}
	return out
}

// traceColumns are a trace's columns; the first four are required.
var traceColumns = []string{"arrival", "model", "workers", "iterations", "priority", "bucket_mib"}

// parseTrace reads a job trace: a CSV header naming its columns (any
// order; arrival, model, workers and iterations required, priority and
// bucket_mib optional), then one job per row. Errors name the line,
// column and value.
func parseTrace(data []byte, models Models) ([]Job, error) {
	if len(data) > MaxTraceBytes {
		return nil, fmt.Errorf("more than %d bytes: a trace may have at most that", MaxTraceBytes)
	}
	r := csv.NewReader(bytes.NewReader(data))
	r.Comment = '#'
	r.TrimLeadingSpace = true
	head, err := r.Read()
	if errors.Is(err, io.EOF) {
		return nil, fmt.Errorf("empty: want a header (%s) and one job per row", strings.Join(traceColumns, ","))
	}
	if err != nil {
		return nil, err
	}
	col := map[string]int{}
	for i, h := range head {
		h = strings.TrimSpace(h)
		if !slices.Contains(traceColumns, h) {
			return nil, fmt.Errorf("line 1: column %q: unknown; the columns are %s", h, strings.Join(traceColumns, ", "))
		}
		if _, dup := col[h]; dup {
			return nil, fmt.Errorf("line 1: column %q: given twice", h)
		}
		col[h] = i
	}
	for _, c := range traceColumns[:4] {
		if _, ok := col[c]; !ok {
			return nil, fmt.Errorf("line 1: no %q column: a trace needs arrival, model, workers and iterations", c)
		}
	}
	var out []Job
	last := time.Duration(-1)
	for {
		rec, err := r.Read()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return nil, err
		}
		line, _ := r.FieldPos(0)
		if len(out) == MaxGeneratedJobs {
			return nil, fmt.Errorf("line %d: more than %d jobs", line, MaxGeneratedJobs)
		}
		bad := func(c, rule string) error {
			return fmt.Errorf("line %d: %s: %q: %s", line, c, rec[col[c]], rule)
		}
		var j Job
		at, err := time.ParseDuration(strings.TrimSpace(rec[col["arrival"]]))
		if rec[col["arrival"]] == "0" {
			at, err = 0, nil
		}
		switch {
		case err != nil:
			return nil, bad("arrival", "want a Go duration such as 0s, 150ms or 1.5s")
		case at < 0:
			return nil, bad("arrival", "must be ≥ 0")
		case at < last:
			return nil, bad("arrival", fmt.Sprintf("before the previous row's %v: rows must be in arrival order", last))
		}
		last = at
		j.Arrival = Duration(at)
		j.Model = strings.TrimSpace(rec[col["model"]])
		if _, ok := models[j.Model]; !ok {
			return nil, bad("model", "unknown model; known: "+strings.Join(models.Names(), ", "))
		}
		ints := []struct {
			c      string
			dst    *int
			lo, hi int
		}{{"workers", &j.Workers, 1, MaxJobWorkers}, {"iterations", &j.Iterations, 1, MaxIterations}, {"priority", &j.Priority, 0, 255}}
		for _, f := range ints {
			i, ok := col[f.c]
			if !ok {
				continue
			}
			n, err := strconv.Atoi(strings.TrimSpace(rec[i]))
			if err != nil || n < f.lo || n > f.hi {
				return nil, bad(f.c, fmt.Sprintf("must be an integer between %d and %d", f.lo, f.hi))
			}
			*f.dst = n
		}
		if i, ok := col["bucket_mib"]; ok {
			x, err := strconv.ParseFloat(strings.TrimSpace(rec[i]), 64)
			if err != nil || !(x >= 0 && x <= MaxBucketMiB) {
				return nil, bad("bucket_mib", fmt.Sprintf("must be a number in [0, %d]", MaxBucketMiB))
			}
			j.BucketMiB = x
		}
		out = append(out, j)
	}
	if len(out) == 0 {
		return nil, errors.New("no jobs: want a header and one job per row")
	}
	return out, nil
}

// checkCompute validates a compute block at path p (e.g. "compute." or
// "jobs[2].compute.") for jobs of workers workers (0: any).
func (v *validator) checkCompute(p string, c *Compute, workers int, limit Duration) {
	if c == nil {
		return
	}
	v.check(p+"distribution", c.Distribution, c.Distribution == host.JitterNone || c.Distribution == host.JitterNormal || c.Distribution == host.JitterLognormal,
		"must be normal or lognormal")
	v.check(p+"cv", c.CV, c.CV >= 0 && c.CV <= 10, "must be in [0, 10]")
	if c.CV > 0 {
		v.check(p+"distribution", c.Distribution, c.Distribution != host.JitterNone, "must be given with cv: normal or lognormal")
	}
	v.check(p+"start_offset", c.StartOffset, c.StartOffset >= 0 && c.StartOffset < limit, "must be in [0, time_limit)")
	v.check(p+"slow_probability", c.SlowProbability, c.SlowProbability >= 0 && c.SlowProbability <= 1, "must be a probability in [0, 1]")
	if c.SlowProbability > 0 || v.s.has(p+"slow_factor") {
		v.check(p+"slow_factor", c.SlowFactor, c.SlowFactor > 0 && c.SlowFactor <= 1000, "must be in (0, 1000] (with slow_probability)")
	}
	seen := map[int]int{}
	for i, st := range c.Stragglers {
		q := fmt.Sprintf("%sstragglers[%d].", p, i)
		rule := "must be ≥ 0"
		if workers > 0 {
			rule = fmt.Sprintf("must be a worker rank of the job: 0..%d", workers-1)
		}
		if v.check(q+"rank", st.Rank, st.Rank >= 0 && (workers == 0 || st.Rank < workers), rule) {
			if k, dup := seen[st.Rank]; dup {
				v.fail(q+"rank", st.Rank, fmt.Sprintf("duplicate: stragglers[%d] has this rank", k))
			}
			seen[st.Rank] = i
		}
		v.check(q+"slow", st.Slow, st.Slow > 0 && st.Slow <= 1000, "must be in (0, 1000] (1.5: 50 % slower)")
	}
}

// ComputeOf is job i's compute variation: its own, else the scenario's.
func (s *Scenario) ComputeOf(i int) *Compute {
	if c := s.Jobs[i].Compute; c != nil {
		return c
	}
	return s.Compute
}

// Timeline is worker rank's timeline in job plan p for seed: the job's
// arrival plus the worker's start offset, its forward pass and buckets,
// and its compute jitter, every draw a function of (seed, job, rank).
func (p *JobPlan) Timeline(seed uint64, rank int) host.Timeline {
	t := host.Timeline{Start: p.Arrival, Forward: p.Forward}
	if len(p.Buckets) > 1 || (len(p.Buckets) == 1 && p.Buckets[0].Backward > 0) {
		t.Backward = make([]time.Duration, len(p.Buckets))
		for i, b := range p.Buckets {
			t.Backward[i] = b.Backward
		}
	}
	c := p.ComputeVar
	if c == nil {
		return t
	}
	key := seed*0xBF58476D1CE4E5B9 ^ uint64(p.Index+1)<<32 ^ uint64(rank+1)
	t.Jitter = host.Jitter{Dist: c.Distribution, CV: c.CV, HiccupP: c.SlowProbability, HiccupSlow: c.SlowFactor, Key: key}
	for _, st := range c.Stragglers {
		if st.Rank == rank {
			t.Jitter.Slow = st.Slow
		}
	}
	if c.StartOffset > 0 {
		t.Start += time.Duration(host.Uniform(key^0x5851F42D4C957F2D, 0) * float64(c.StartOffset))
	}
	return t
}
