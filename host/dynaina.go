package host

import (
	"time"

	"github.com/inabox/inabox/emu"
	sw "github.com/inabox/inabox/switch"
	"github.com/inabox/inabox/switch/dynaina"
)

// The DynaINA client side (docs/dynaina.md). The FreeINA workers and PS run
// unchanged; the PS is the job's DynaINA client:
//
//   - register: each job's profile (workers, gradient bytes, compute time)
//     reaches the switch's scheduler at the job's arrival;
//   - phase reports: the PS's ALLOC at an all-reduce's first BEGIN is the
//     all-reduce start, its FREE at the all-reduce's end the phase end; an
//     all-reduce that got no memory frees nothing, so its end is reported
//     from the PS's OnAllReduce hook;
//   - the pool: the GRANT carries the job's pool (or 0: the PS path), which
//     the PS turns into the plan every worker follows.

// DynaINAConfig configures the scheduler of a DynaINA testbed.
type DynaINAConfig struct {
	// Sched is the scheduler's configuration; TotalSlots is the FreeINA
	// pool, and zero LinkBitsPerSecond, ValuesPerSlot and RTT are taken
	// from the cluster (RTT such that a job's demand equals PipeSlots, the
	// window FreeINA's path control aims for).
	Sched dynaina.Config
	// Jobs[i] describes job i+1 (Profile.ID is filled in).
	Jobs []sw.DynaINAJob
}

// DemandRTT is the RTT that makes DynaINA's demand B·RTT/(8·(4V+80)) equal
// to PipeSlots(rate, delay, latency, values).
func DemandRTT(rate int64, delay, latency time.Duration, values int) time.Duration {
	n := PipeSlots(rate, delay, latency, values)
	return time.Duration(float64(n) * float64(8*(4*values+80)) / float64(rate) * 1e9)
}

// NewDynaINACluster builds the FreeINA testbed with the DynaINA scheduler
// deciding every ALLOC. The PS keeps re-sending a queued ALLOC (every
// GrantTimeout) until the scheduler answers.
func NewDynaINACluster(cfg ClusterConfig, dc DynaINAConfig, tensors func(job uint16, rank int) []Tensor) (*Cluster, *sw.DynaINANode, error) {
	if cfg.Rate == 0 {
		cfg.Rate = DefaultRate
	}
	if cfg.Delay == 0 {
		cfg.Delay = DefaultDelay
	}
	if cfg.Values == 0 {
		cfg.Values = 64
	}
	lat := cfg.Latency
	if lat == 0 {
		lat = DefaultLatency
	}
	sc := dc.Sched
	if sc.LinkBitsPerSecond == 0 {
		sc.LinkBitsPerSecond = cfg.Rate
	}
	if sc.ValuesPerSlot == 0 {
		sc.ValuesPerSlot = cfg.Values
	}
	if sc.RTT == 0 {
		sc.RTT = DemandRTT(cfg.Rate, cfg.Delay, max(lat, 0), cfg.Values)
	}
	if cfg.PS.GrantRetries == 0 {
		cfg.PS.GrantRetries = 1 << 30
	}
	jobs := make([]sw.DynaINAJob, len(dc.Jobs))
	for i, j := range dc.Jobs {
		j.Profile.ID = uint16(i + 1)
		jobs[i] = j
	}
	var node *sw.DynaINANode
	var werr error
	cfg.WrapSwitch = func(n *sw.FreeINANode) emu.Node {
		node, werr = sw.NewDynaINANode(n, sc, jobs...)
		if werr != nil {
			return n
		}
		return node
	}
	c, err := NewCluster(cfg, tensors)
	if err != nil {
		return nil, nil, err
	}
	if werr != nil {
		return nil, nil, werr
	}
	for _, ps := range c.PSs {
		prev := ps.OnAllReduce
		ps.OnAllReduce = func(job, ar uint16, plan Plan, m Measure) {
			if plan.INA == 0 {
				node.ReportEnd(c.Net.Now(), job, ar)
			}
			if prev != nil {
				prev(job, ar, plan, m)
			}
		}
	}
	return c, node, nil
}
