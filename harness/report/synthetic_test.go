package report

import (
	"encoding/json"
	"os"
	"testing"
	"time"

	"github.com/inabox/inabox/harness/scenario"
)

// synthetic feeds a collector with an idealized run of a scenario: each job
// alternates its compute time and its ideal all-reduce, holding a fixed
// share of the switch while it communicates. No network: it exercises the
// metrics and outputs on realistic shapes.
func synthetic(t *testing.T, name, policy string) *Results {
	t.Helper()
	s, err := scenario.Embedded(name)
	if err != nil {
		t.Fatal(err)
	}
	ms := scenario.DefaultModels()
	asRun, err := json.Marshal(s)
	if err != nil {
		t.Fatal(err)
	}
	c := NewCollector(CollectorConfig{Scenario: s.Name, Policy: policy, Seed: s.Seed, TotalSlots: s.Topology.Switch.Slots, ScenarioAsRun: asRun})
	type ev struct {
		at time.Duration
		f  func()
	}
	var evs []ev
	for _, p := range s.Plan(ms) {
		c.AddJob(p.Name, p.Model.Name, p.Workers, p.Arrival)
		pool := "pool" + itoa(p.Index%3)
		inUse, coll := 0.0, int64(0)
		evs = append(evs, ev{p.Arrival, func() { c.JobArrived(p.Arrival, p.Name) }})
		at := p.Arrival
		for i := 0; i < p.Iterations; i++ {
			start, ar := at, at+p.Compute
			end := ar + p.CommIdeal*3/2
			evs = append(evs,
				ev{start, func() { c.IterationStart(start, p.Name, i) }},
				ev{ar, func() { c.AllReduceStart(ar, p.Name, i); c.Occupancy(ar, pool, p.Name, 256*(1+p.Index%3)) }},
				ev{end, func() {
					// in use: 9/10 of what it holds; a collision per 100 packets
					inUse += 0.9 * float64(256*(1+p.Index%3)) * (end - ar).Seconds()
					coll += p.Packets / 100
					c.InUseAt(end, p.Name, inUse)
					c.CollisionsAt(end, p.Name, coll)
					c.AllReduceChunks(ar, end, p.Name, p.Packets*9/10, p.Packets-p.Packets*9/10)
					c.AllReduceEnd(end, p.Name, i, p.Bytes, p.Elements)
					c.Occupancy(end, pool, p.Name, 0)
					c.IterationEnd(end, p.Name, i)
					c.Aggregations(end, p.Name, p.Packets)
					c.Chunks(end, p.Name, p.Packets*9/10, p.Packets/10)
				}})
			at = end
		}
		evs = append(evs, ev{at, func() { c.JobFinished(at, p.Name) }})
	}
	// Stable order by time (ties in insertion order), as a runner's event
	// loop would deliver them.
	for i := 1; i < len(evs); i++ {
		for k := i; k > 0 && evs[k].at < evs[k-1].at; k-- {
			evs[k], evs[k-1] = evs[k-1], evs[k]
		}
	}
	for _, e := range evs {
		e.f()
	}
	return c.Results(0)
}

func TestSyntheticRunOutputs(t *testing.T) {
	r := synthetic(t, "dynaina-contention.yaml", "dynaina")
	if r.Summary.JobsFinished != 6 || r.Summary.MemUtilPeak <= 0 || r.Summary.AggThroughput <= 0 {
		t.Errorf("%+v", r.Summary)
	}
	dir := os.Getenv("INABOX_PLOT_DIR") // set to look at the plots
	if dir == "" {
		dir = t.TempDir()
	}
	if _, err := WriteOutputs(dir, r); err != nil {
		t.Fatal(err)
	}
}
