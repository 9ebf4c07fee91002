package run

import (
	"bytes"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/inabox/inabox/harness/report"
	"github.com/inabox/inabox/harness/scenario"
	"github.com/inabox/inabox/harness/testbed"
)

// bucketScenario: a bucketed VGG16 job and a bucketed BERT-large job with
// compute jitter, stragglers and start offsets, small enough for a test.
const bucketScenario = `
name: buckets
seed: 9
time_limit: 60s
scaling: {tensor_scale: 0.0004, rate_scale: 0.01}
topology: {link_delay: 1us, switch: {slots: 4096}}
compute: {distribution: lognormal, cv: 0.05, start_offset: 2ms}
jobs:
  - {name: vgg, model: vgg16, workers: 3, iterations: 2, bucket_mib: 25}
  - {name: bert, model: bert-large, workers: 2, iterations: 2, bucket_mib: 100, arrival: 30ms,
     compute: {stragglers: [{rank: 1, slow: 1.5}], slow_probability: 0.5, slow_factor: 2}}
`

// TestBucketTimeline runs the bucketed scenario loss-free under every
// policy and checks every worker's every all-reduce against its timeline
// exactly: bucket b of iteration i begins at the later of its ready time
// (iteration start + jittered forward + backward up to b) and the end of
// the worker's previous all-reduce; iteration i+1 starts when iteration
// i's last bucket ended; the reference sums are checked by the run.
func TestBucketTimeline(t *testing.T) {
	for _, policy := range append(testbed.Names(), testbed.Variants()...) {
		t.Run(policy, func(t *testing.T) {
			s, err := scenario.Parse("buckets.yaml", []byte(bucketScenario), scenario.DefaultModels())
			if err != nil {
				t.Fatal(err)
			}
			r, err := prepare(s, Options{Policy: policy}, false)
			if err != nil {
				t.Fatal(err)
			}
			if _, err := r.run(r.step, noProgress{}); err != nil {
				t.Fatal(err)
			}
			for i, p := range r.plans {
				nb := len(p.Buckets)
				if nb < 2 {
					t.Fatalf("job %s: %d buckets, want several", p.Name, nb)
				}
				for rank, w := range r.tb.Workers[i] {
					tl := p.Timeline(r.seed, rank)
					reps := w.Endpoint.Reports()
					if len(reps) != p.AllReduces() {
						t.Fatalf("job %s worker %d: %d all-reduces, want %d", p.Name, rank, len(reps), p.AllReduces())
					}
					iterStart, prevEnd := tl.Start, time.Duration(0)
					for k, rep := range reps {
						it, b := k/nb, k%nb
						if b == 0 && k > 0 {
							iterStart = reps[k-1].End
						}
						f := tl.Jitter.Factor(it)
						d := p.Forward
						for _, bk := range p.Buckets[:b+1] {
							d += bk.Backward
						}
						ready := iterStart + time.Duration(math.Round(float64(d)*f))
						if want := max(ready, prevEnd); rep.Start != want {
							t.Fatalf("job %s worker %d iteration %d bucket %d: began at %v, want %v (ready %v, previous end %v)",
								p.Name, rank, it, b, rep.Start, want, ready, prevEnd)
						}
						if rep.End < rep.Start {
							t.Fatalf("all-reduce %d ends before it begins", k)
						}
						prevEnd = rep.End
					}
				}
			}
		})
	}
}

// TestBucketPlan checks the bucketing rule on VGG16's profile: layers
// from the last, a bucket closed once it holds bucket_mib or more.
func TestBucketPlan(t *testing.T) {
	m := scenario.DefaultModels()["vgg16"]
	fwd, bs := m.Buckets(25 << 20)
	// layers (params): 555328 7079936 7079424 102764544 16781312 4097000
	want := []int64{16781312 + 4097000, 102764544, 7079424, 7079936, 555328}
	if len(bs) != len(want) {
		t.Fatalf("%d buckets, want %d", len(bs), len(want))
	}
	var sum time.Duration
	for i, b := range bs {
		if b.Params != want[i] {
			t.Errorf("bucket %d: %d params, want %d", i, b.Params, want[i])
		}
		sum += b.Backward
	}
	if got := (fwd + sum).Seconds() * 1000; math.Abs(got-m.ComputeMs) > 0.5 {
		t.Errorf("forward + backward = %.1f ms, want the profile's %v ms", got, m.ComputeMs)
	}
	// One bucket of everything: the old rhythm.
	if f, one := m.Buckets(0); len(one) != 1 || f != m.Compute() || one[0].Backward != 0 {
		t.Errorf("no buckets: forward %v, %d buckets", f, len(one))
	}
	// A model without layers: equal buckets.
	g := scenario.DefaultModels()["gpt2-small"]
	_, gb := g.Buckets(25 << 20)
	if n := int((g.GradientBytes() + 25<<20 - 1) / (25 << 20)); len(gb) != n {
		t.Errorf("gpt2-small: %d buckets, want %d", len(gb), n)
	}
}

// TestSeedsDrawDifferentRuns: with compute jitter, another seed gives
// another run and the same seed the same bytes.
func TestSeedsDrawDifferentRuns(t *testing.T) {
	s, err := scenario.Parse("buckets.yaml", []byte(bucketScenario), scenario.DefaultModels())
	if err != nil {
		t.Fatal(err)
	}
	_, a := runJSON(t, s, Options{Policy: "freeina"})
	_, b := runJSON(t, s, Options{Policy: "freeina"})
	_, c := runJSON(t, s, Options{Policy: "freeina", Seed: 10})
	if !bytes.Equal(a, b) {
		t.Error("same seed: results differ")
	}
	if bytes.Equal(a, c) {
		t.Error("seeds 9 and 10: identical results despite compute jitter")
	}
}

// TestPoissonArrivals: a generated cluster draws its jobs from the seed,
// runs, and another seed draws another cluster.
func TestPoissonArrivals(t *testing.T) {
	const sc = `
name: cluster
time_limit: 60s
scaling: {tensor_scale: 0.0005, rate_scale: 0.01}
topology: {link_delay: 1us, switch: {slots: 512}}
arrivals: {process: poisson, jobs: 6, mean_interarrival: 50ms, models: [resnet50, vgg11, googlenet],
           workers: [2, 3], iterations: [1, 2], bucket_mib: 25}
jobs: []
`
	s, err := scenario.Parse("cluster.yaml", []byte(sc), scenario.DefaultModels())
	if err != nil {
		t.Fatal(err)
	}
	if len(s.Jobs) != 6 || s.Topology.PS.Count != 6 {
		t.Fatalf("%d jobs, %d PSs; want 6 and 6", len(s.Jobs), s.Topology.PS.Count)
	}
	var last time.Duration
	for _, j := range s.Jobs {
		if j.Arrival.D() < last || !strings.HasPrefix(j.Name, "job") || j.BucketMiB != 25 {
			t.Fatalf("generated job %+v", j)
		}
		last = j.Arrival.D()
	}
	res, err := Run(s, Options{Policy: "dynaina"})
	if err != nil {
		t.Fatal(err)
	}
	if res.Summary.JobsFinished != 6 {
		t.Errorf("%d of 6 jobs finished", res.Summary.JobsFinished)
	}
	o, err := s.WithSeed(2, scenario.DefaultModels())
	if err != nil {
		t.Fatal(err)
	}
	same := true
	for i := range o.Jobs {
		same = same && o.Jobs[i] == s.Jobs[i]
	}
	if same {
		t.Error("seed 2 drew the same cluster as seed 1")
	}
	var b bytes.Buffer
	if err := report.WriteResultsJSON(&b, res); err != nil {
		t.Fatal(err)
	}
}

// TestSeedOptionRedrawsCluster: Options.Seed draws the generated jobs again.
func TestSeedOptionRedrawsCluster(t *testing.T) {
	const sc = `
time_limit: 60s
scaling: {tensor_scale: 0.0005, rate_scale: 0.01}
topology: {link_delay: 1us}
arrivals: {process: poisson, jobs: 3, mean_interarrival: 20ms, models: [resnet50, googlenet], workers: [2, 3], iterations: [1]}
jobs: []
`
	s, err := scenario.Parse("c.yaml", []byte(sc), scenario.DefaultModels())
	if err != nil {
		t.Fatal(err)
	}
	a, err := Run(s, Options{Policy: "freeina"})
	if err != nil {
		t.Fatal(err)
	}
	b, err := Run(s, Options{Policy: "freeina", Seed: 77})
	if err != nil {
		t.Fatal(err)
	}
	same := true
	for i := range a.Jobs {
		same = same && a.Jobs[i].Arrival == b.Jobs[i].Arrival && a.Jobs[i].Model == b.Jobs[i].Model
	}
	if same {
		t.Error("--seed 77 ran the same cluster as seed 1")
	}
}
