package report

import (
	"encoding/json"
	"math"
	"testing"
	"time"
)

const ms = time.Millisecond

// feed plays a small two-job run (plus an unfinished third job) into a
// collector.
func feed(c *Collector) {
	c.AddJob("a", "vgg16", 2, 0)
	c.AddJob("b", "resnet50", 2, 5*ms)
	c.JobArrived(0, "a")
	c.IterationStart(0, "a", 0)
	c.JobArrived(5*ms, "b")
	c.IterationStart(5*ms, "b", 0)
	c.AllReduceStart(10*ms, "a", 0)
	c.Occupancy(10*ms, "p0", "a", 10)
	c.AllReduceStart(15*ms, "b", 0)
	c.Occupancy(15*ms, "p1", "b", 20)
	c.AllReduceEnd(20*ms, "a", 0, 4000, 1000)
	c.Occupancy(20*ms, "p0", "a", 0)
	c.IterationEnd(20*ms, "a", 0)
	c.IterationStart(20*ms, "a", 1)
	c.AllReduceEnd(25*ms, "b", 0, 8000, 2000)
	c.Occupancy(25*ms, "p1", "b", 0)
	c.IterationEnd(25*ms, "b", 0)
	c.JobFinished(25*ms, "b")
	c.AllReduceStart(30*ms, "a", 1)
	c.Occupancy(30*ms, "p0", "a", 10)
	c.JobArrived(30*ms, "c")
	c.AllReduceEnd(40*ms, "a", 1, 4000, 1000)
	c.Occupancy(40*ms, "p0", "a", 0)
	c.IterationEnd(40*ms, "a", 1)
	c.JobFinished(40*ms, "a")
	c.Aggregations(40*ms, "a", 50)
	c.Aggregations(40*ms, "b", 40)
	c.Chunks(40*ms, "a", 90, 10)
	c.Collisions(40*ms, "b", 5)
	c.Retransmissions(40*ms, "a", 3)
}

func near(a Num, b float64) bool { return math.Abs(float64(a)-b) <= 1e-9*math.Max(1, math.Abs(b)) }

func TestCollector(t *testing.T) {
	c := NewCollector(CollectorConfig{Scenario: "s", Policy: "atp", Seed: 7, TotalSlots: 100})
	feed(c)
	r := c.Results(40 * ms)
	s := r.Summary
	checks := []struct {
		name string
		got  Num
		want float64
	}{
		{"end", r.End, 0.040},
		{"makespan", s.Makespan, 0.040},
		{"jct mean", s.JCTMean, 0.030},
		{"jct p50", s.JCTP50, 0.030},
		{"jct p95", s.JCTP95, 0.039},
		{"jct max", s.JCTMax, 0.040},
		{"iter mean", s.IterMean, 0.020},
		{"agg throughput", s.AggThroughput, 4000 / 0.025},
		{"mem util mean", s.MemUtilMean, 0.4 / 0.04 / 100},
		{"mem util peak", s.MemUtilPeak, 0.3},
		{"useful per slot-s", s.UsefulPerSlotSecond, 90 / 0.4},
		{"ps fraction", s.PSFraction, 0.1},
		{"a jct", r.Jobs[0].JCT, 0.040},
		{"a agg throughput", r.Jobs[0].AggThroughput, 2000 / 0.020},
		{"a comm", r.Jobs[0].CommTime, 0.020},
		{"a slot-s", r.Jobs[0].SlotSeconds, 0.2},
		{"a useful per slot-s", r.Jobs[0].UsefulPerSlotSecond, 250},
		{"b jct", r.Jobs[1].JCT, 0.020},
		{"b iter p99", r.Jobs[1].IterP99, 0.020},
		{"c jct (unfinished)", r.Jobs[2].JCT, 0.010},
		{"throughput at 16 ms", r.Throughput[16].Y, 1000/0.010 + 2000/0.010},
		{"throughput at 35 ms", r.Throughput[35].Y, 1000 / 0.010},
		{"utilization at 17 ms", r.Memory.Utilization[17].Y, 0.3},
		{"utilization at 27 ms", r.Memory.Utilization[27].Y, 0},
		{"p1/b slots at 20 ms", r.Memory.Series[1].Slots[20].Y, 20},
	}
	for _, ch := range checks {
		if !near(ch.got, ch.want) {
			t.Errorf("%s = %v, want %v", ch.name, ch.got, ch.want)
		}
	}
	if s.Jobs != 3 || s.JobsFinished != 2 || s.Elements != 4000 || s.Collisions != 5 || s.Retransmissions != 3 ||
		s.SwitchChunks != 90 || s.PSChunks != 10 || r.Memory.UsefulAggregations != 90 {
		t.Errorf("summary counts %+v", s)
	}
	if r.Jobs[2].Finished || r.Jobs[0].Name != "a" || r.Jobs[2].Name != "c" || r.Jobs[0].Iterations != 2 || r.Jobs[0].Model != "vgg16" {
		t.Errorf("jobs %+v", r.Jobs)
	}
	if len(r.JCTCDF) != 2 || !near(r.JCTCDF[0].X, 0.020) || !near(r.JCTCDF[1].Y, 1) {
		t.Errorf("cdf %v", r.JCTCDF)
	}
	if len(r.Memory.Series) != 2 || r.Memory.Series[0].Pool != "p0" || r.Memory.Series[0].PeakSlots != 10 {
		t.Errorf("series %+v", r.Memory.Series)
	}
	if it := r.Jobs[0].Iters[1]; !near(it.Duration(), 0.020) || !near(it.CommTime(), 0.010) || it.Elements != 1000 {
		t.Errorf("iteration %+v", it)
	}
	if len(r.Throughput) != 40 {
		t.Errorf("%d throughput points", len(r.Throughput))
	}
}

func TestCollectorDeterministicJSON(t *testing.T) {
	run := func() []byte {
		c := NewCollector(CollectorConfig{TotalSlots: 100, MaxPoints: 10})
		feed(c)
		b, err := json.Marshal(c.Results(0))
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	a, b := run(), run()
	if string(a) != string(b) {
		t.Error("same events, different JSON")
	}
	var r Results
	if err := json.Unmarshal(a, &struct{ Summary *Summary }{&r.Summary}); err != nil {
		t.Fatal(err)
	}
}

func TestCollectorMergesBins(t *testing.T) {
	c := NewCollector(CollectorConfig{TotalSlots: 10, MaxPoints: 10})
	c.Occupancy(0, "", "j", 5)
	c.AllReduceStart(0, "j", 0)
	c.AllReduceEnd(40*ms, "j", 0, 0, 4000)
	r := c.Results(40 * ms) // 40 bins of 1 ms → 10 points of 4 ms
	if len(r.Memory.Utilization) != 10 || len(r.Throughput) != 10 {
		t.Fatalf("%d, %d points", len(r.Memory.Utilization), len(r.Throughput))
	}
	for i, p := range r.Memory.Utilization {
		if !near(p.X, float64(i)*0.004) || !near(p.Y, 0.5) || !near(r.Throughput[i].Y, 100000) {
			t.Errorf("point %d: %v %v", i, p, r.Throughput[i])
		}
	}
	// Still held at the end: counted up to end.
	if !near(r.Memory.OccupiedSlotSeconds, 0.2) || !near(r.Memory.MeanUtilization, 0.5) {
		t.Errorf("memory %+v", r.Memory)
	}
}

func TestCollectorEmpty(t *testing.T) {
	r := NewCollector(CollectorConfig{}).Results(0)
	if _, err := json.Marshal(r); err != nil {
		t.Fatal(err)
	}
	if !math.IsNaN(float64(r.Summary.JCTMean)) || r.Summary.Jobs != 0 {
		t.Errorf("%+v", r.Summary)
	}
}

func TestNumJSON(t *testing.T) {
	for _, c := range []struct {
		n    Num
		want string
	}{{0.1 + 0.2, "0.3"}, {Num(math.NaN()), "null"}, {Num(math.Inf(1)), "null"}, {1e20, "100000000000000000000"},
		{123456789.123456789, "123456789.123"}, {-0.5, "-0.5"}, {2.5e-7, "2.5e-07"}, {2.5e-5, "0.000025"}} {
		b, _ := c.n.MarshalJSON()
		if string(b) != c.want {
			t.Errorf("%v → %s, want %s", float64(c.n), b, c.want)
		}
	}
	b, _ := json.Marshal(Point{1, 0.5})
	if string(b) != "[1,0.5]" {
		t.Errorf("point %s", b)
	}
}

func TestCollectorLongRunCoarsens(t *testing.T) {
	c := NewCollector(CollectorConfig{TotalSlots: 10})
	c.Occupancy(0, "", "j", 10)
	c.AllReduceStart(time.Hour-time.Second, "j", 0)
	c.AllReduceEnd(time.Hour, "j", 0, 0, 1000)
	c.Occupancy(time.Hour/2, "", "j", 0)
	r := c.Results(time.Hour)
	if c.cfg.Resolution < time.Hour/maxBins || len(c.tput.v) > maxBins || len(r.Throughput) > 400 {
		t.Errorf("resolution %v, %d bins, %d points", c.cfg.Resolution, len(c.tput.v), len(r.Throughput))
	}
	if !near(r.Memory.MeanUtilization, 0.5) || !near(r.Summary.AggThroughput, 1000) {
		t.Errorf("util %v, throughput %v", r.Memory.MeanUtilization, r.Summary.AggThroughput)
	}
	sum := 0.0
	for _, p := range r.Memory.Utilization {
		sum += float64(p.Y)
	}
	if avg := sum / float64(len(r.Memory.Utilization)); avg < 0.49 || avg > 0.51 {
		t.Errorf("mean of utilization series %v", avg)
	}
}

// TestCollectorSeries: the sampled in-use memory and collisions and the
// per-all-reduce chunks by path give time series whose sums are the
// samples' totals, without extending the run; a policy without a PS path
// has an empty PS-path series.
func TestCollectorSeries(t *testing.T) {
	for _, noPS := range []bool{false, true} {
		c := NewCollector(CollectorConfig{Scenario: "s", Policy: "p", TotalSlots: 100, NoPSPath: noPS})
		feed(c)
		// a holds 10 slots in use over [10, 20) ms: 0.1 slot-s, sampled at
		// 10, 15 and 20 ms (each growth spread since the previous sample)
		c.InUseAt(10*ms, "a", 0)
		c.InUseAt(15*ms, "a", 0.05)
		c.InUseAt(20*ms, "a", 0.1)
		c.InUseAt(19*ms, "a", 5) // back in time: ignored
		c.CollisionsAt(12*ms, "b", 2)
		c.CollisionsAt(50*ms, "b", 5) // past the run's end: not in the series
		c.AllReduceChunks(10*ms, 20*ms, "a", 90, 10)
		r := c.Results(40 * ms)
		if r.End != 0.04 {
			t.Errorf("end %v: the samples extended the run", r.End)
		}
		sum := func(ps []Point) float64 {
			s := 0.0
			for _, p := range ps {
				if !math.IsNaN(float64(p.Y)) {
					s += float64(p.Y) * float64(r.Bin)
				}
			}
			return s
		}
		if got := sum(r.Jobs[0].InUseSlots); math.Abs(got-0.1) > 1e-9 {
			t.Errorf("in-use slot-s %v, want 0.1", got)
		}
		if got := r.Jobs[0].InUseSlots[12].Y; !near(got, 10) {
			t.Errorf("in use at 12 ms: %v slots, want 10", got)
		}
		// 2 by 12 ms, then 3 spread over [12, 50) ms: 2 + 3·28/38 before 40 ms
		if got := sum(r.CollisionRate); math.Abs(got-(2+3*28.0/38)) > 1e-9 {
			t.Errorf("collisions %v", got)
		}
		if noPS {
			if len(r.PSPathSeries) != 0 {
				t.Errorf("no PS path: %d points", len(r.PSPathSeries))
			}
			continue
		}
		if got := r.PSPathSeries[15].Y; !near(got, 0.1) {
			t.Errorf("PS-path fraction at 15 ms %v, want 0.1", got)
		}
		if got := r.PSPathSeries[30].Y; !math.IsNaN(float64(got)) {
			t.Errorf("PS-path fraction without chunks %v, want null", got)
		}
		b, _ := json.Marshal(r.PSPathSeries[30])
		if string(b) != "[0.03,null]" {
			t.Errorf("json %s", b)
		}
	}
}

// TestCollectorReservedAt: a pair's exact readings replace what its
// sampled slot counts give — in its total, the run's, the utilization and
// the series — while the counts still give the peak, and a pair without
// readings is untouched.
func TestCollectorReservedAt(t *testing.T) {
	c := NewCollector(CollectorConfig{Scenario: "s", Policy: "atp", TotalSlots: 100})
	c.AddJob("a", "vgg16", 2, 0)
	c.AddJob("b", "vgg16", 2, 0)
	c.JobArrived(0, "a")
	c.JobArrived(0, "b")
	// b: sampled only, 5 slots over [0, 40) ms = 0.2 slot-s
	c.Occupancy(0, "", "b", 5)
	// a: sampled 10 slots over [10, 20) ms = 0.1 slot-s, but the switch
	// integrated 0.07 (0.02 by 15 ms); nothing reserved at 5 ms
	c.ReservedAt(5*ms, "", "a", 0)
	c.Occupancy(10*ms, "", "a", 10)
	c.ReservedAt(10*ms, "", "a", 0)
	c.ReservedAt(15*ms, "", "a", 0.02)
	c.Occupancy(20*ms, "", "a", 0)
	c.ReservedAt(20*ms, "", "a", 0.07)
	c.ReservedAt(19*ms, "", "a", 1) // back in time: ignored
	c.InUseSlotSeconds("a", 0.07)
	c.Occupancy(40*ms, "", "b", 0)
	r := c.Results(40 * ms)
	var ja, jb JobResult
	for _, j := range r.Jobs {
		switch j.Name {
		case "a":
			ja = j
		case "b":
			jb = j
		}
	}
	if !near(ja.SlotSeconds, 0.07) || !near(ja.InUseShare, 1) {
		t.Errorf("job a: reserved %v slot-s, in-use share %v; want 0.07 (the readings), 1", ja.SlotSeconds, ja.InUseShare)
	}
	if !near(jb.SlotSeconds, 0.2) {
		t.Errorf("job b: reserved %v slot-s, want 0.2 (sampled)", jb.SlotSeconds)
	}
	if !near(r.Memory.OccupiedSlotSeconds, 0.27) || !near(r.Memory.MeanUtilization, 0.27/0.040/100) {
		t.Errorf("run: %v slot-s, mean %v; want 0.27, %v", r.Memory.OccupiedSlotSeconds, r.Memory.MeanUtilization, 0.27/0.040/100)
	}
	if !near(r.Memory.PeakUtilization, 0.15) {
		t.Errorf("peak %v, want 0.15 (sampled counts)", r.Memory.PeakUtilization)
	}
	for _, s := range r.Memory.Series {
		sum := 0.0
		for _, p := range s.Slots {
			sum += float64(p.Y) * float64(r.Bin)
		}
		if !near(Num(sum), float64(s.SlotSeconds)) {
			t.Errorf("series %q: sums to %v slot-s, total says %v", s.Job, sum, s.SlotSeconds)
		}
		if s.Job == "a" && len(s.Slots) > 0 {
			// 0.02 over [10, 15) ms, 0.05 over [15, 20) ms: 4 and 10 slots
			for _, p := range s.Slots {
				at := float64(p.X)
				want := 0.0
				switch {
				case at >= 0.010 && at < 0.015:
					want = 4
				case at >= 0.015 && at < 0.020:
					want = 10
				}
				if !near(p.Y, want) {
					t.Errorf("series a at %v s: %v slots, want %v", at, p.Y, want)
				}
			}
		}
	}
}
