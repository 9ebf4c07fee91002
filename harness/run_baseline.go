package harness

import (
	"fmt"
	"time"

	"github.com/inabox/inabox/emu"
	"github.com/inabox/inabox/host"
	"github.com/inabox/inabox/host/baseline"
)

// The baselines of host/baseline as Testbeds: "none" is a ring all-reduce
// (no INA; NCCL's default), "switchml" static per-job pools, "atp" a shared
// hashed pool with results through the PS, "esa" ATP with priority
// preemption. They have one PS (port 0) whatever the scenario's ps.count.

func init() {
	for policy, kind := range map[string]string{"none": baseline.KindRing, "switchml": baseline.KindSwitchML,
		"atp": baseline.KindATP, "esa": baseline.KindESA} {
		RegisterPolicy(policy, baselineBuilder(kind))
	}
}

type baselineBed struct {
	c      *baseline.Cluster
	kind   string
	plans  []JobPlan
	stride int
	pool   int // SwitchML: aggregators per job
	ranks  [][]RankWorker
}

func baselineBuilder(kind string) Builder {
	return func(b *Build) (Testbed, error) {
		s := b.Scenario
		t := s.Topology
		if t.PS.Count > 1 {
			return nil, fmt.Errorf("topology.ps.count = %d: the %s baseline has one parameter server", t.PS.Count, kind)
		}
		fc := clusterConfig(b)
		tmo := timerUnit(fc.Rate, fc.Delay)
		// The ring's RC QPs (QP zero) get the ACK timeout baseline.New
		// derives from these links, like FreeINA's; the INA clients'
		// timeout follows the time scale (1.5 units ↔ ATP's 100 µs at
		// 100 Gb/s).
		cfg := baseline.Config{Seed: b.Seed, Jobs: fc.Jobs, Rate: fc.Rate, PSRate: fc.PSRate, Delay: fc.Delay,
			QueuePackets: fc.QueuePackets, Values: fc.Values, Slots: fc.Slots, PassTime: fc.PassTime, Latency: fc.Latency,
			RTO: tmo * 3 / 2}
		for _, p := range b.Plans {
			cfg.Priority = append(cfg.Priority, uint8(p.Priority))
			cfg.Start = append(cfg.Start, p.Arrival)
			cfg.Gap = append(cfg.Gap, p.Compute)
		}
		stride := strideOf(b)
		bed := &baselineBed{kind: kind, plans: b.Plans, stride: stride}
		if kind == baseline.KindSwitchML {
			// Static partitioning of the scenario's memory: each job a pool
			// of 2·window aggregators, the window at most the pipe.
			win := host.PipeSlots(fc.Rate, fc.Delay, max(fc.Latency, 0), fc.Values)
			if per := fc.Slots / (2 * len(fc.Jobs)); per < win {
				win = max(per, 1)
			}
			cfg.Window = win
			bed.pool = 2 * win
			cfg.RTO = tmo * 3 / 4
		}
		c, err := baseline.New(kind, cfg, b.Tensors)
		if err != nil {
			return nil, err
		}
		bed.c = c
		for _, ws := range c.Workers {
			var rs []RankWorker
			for _, w := range ws {
				rs = append(rs, &baselineRank{w: w})
			}
			bed.ranks = append(bed.ranks, rs)
		}
		return bed, nil
	}
}

type baselineRank struct{ w baseline.Client }

func (r *baselineRank) Finished() int { return len(r.w.Reports()) }
func (r *baselineRank) Span(i int) (time.Duration, time.Duration) {
	rep := r.w.Reports()[i]
	return rep.Start, rep.End
}
func (r *baselineRank) Result(i int) []int32 { return r.w.Result(i) }

func (f *baselineBed) Network() *emu.Network { return f.c.Net }
func (f *baselineBed) SwitchNode() string    { return "switch" }

func (f *baselineBed) WorkerNode(job, rank int) (string, *emu.Link) {
	i := 1
	for j := 0; j < job; j++ {
		i += len(f.c.Workers[j])
	}
	return fmt.Sprintf("w%d.%d", job+1, rank), f.c.Links[i+rank]
}

func (f *baselineBed) PSNode(i int) (string, *emu.Link) {
	if i > 0 {
		return "", nil
	}
	return "ps", f.c.Links[0]
}

func (f *baselineBed) Ranks(job int) []RankWorker { return f.ranks[job] }

// Occupancy: SwitchML holds each job's pool from arrival to finish (static
// partitioning); ATP and ESA hold the aggregators claimed or complete in the
// shared pool (not attributable per job: job -1).
func (f *baselineBed) Occupancy() []Occupied {
	switch f.kind {
	case baseline.KindSwitchML:
		now := f.c.Net.Now()
		var out []Occupied
		for i, p := range f.plans {
			if p.Arrival > now {
				continue
			}
			done := true
			for _, w := range f.c.Workers[i] {
				done = done && w.Done()
			}
			if !done {
				out = append(out, Occupied{Pool: fmt.Sprintf("static%d", i+1), Job: i, Slots: f.pool * f.stride})
			}
		}
		return out
	case baseline.KindATP, baseline.KindESA:
		st := f.c.Switch.Stats()
		if n := int(st.SlotsClaimed + st.SlotsComplete); n > 0 {
			return []Occupied{{Job: -1, Slots: n}}
		}
	}
	return nil
}

func (f *baselineBed) Counters(job int) JobCounters {
	var c JobCounters
	if st, ok := f.c.Switch.JobStats(uint16(job + 1)); ok {
		c.SwitchChunks, c.Collisions = int64(st.Results), int64(st.Collisions)
	}
	t := f.c.Totals(uint16(job + 1))
	c.Retransmissions = int64(t.Retransmits + t.PSResends)
	return c
}

func (f *baselineBed) Check() error { return nil }
