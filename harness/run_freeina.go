package harness

import (
	"fmt"
	"time"

	"github.com/inabox/inabox/emu"
	"github.com/inabox/inabox/host"
	"github.com/inabox/inabox/rdma"
	sw "github.com/inabox/inabox/switch"
	"github.com/inabox/inabox/switch/dynaina"
)

// FreeINA and DynaINA testbeds (host.Cluster): one worker node per job
// worker, each on its own switch port and link (a scenario's shared hosts
// name the links of the workers placed on them), the PSs on the first
// ports, job i served by ps(i mod count).

// freeinaBed is a host.Cluster as a Testbed.
type freeinaBed struct {
	c      *host.Cluster
	dyn    *sw.DynaINANode
	stride int // switch slots per aggregator
	ranks  [][]RankWorker
}

// clusterConfig derives the FreeINA testbed from the scenario.
func clusterConfig(b *Build) host.ClusterConfig {
	s := b.Scenario
	t := s.Topology
	values := t.Switch.ValuesPerPacket
	stride := (values + sw.DefaultValuesPerPass - 1) / sw.DefaultValuesPerPass
	cfg := host.ClusterConfig{Seed: b.Seed, Rate: b.Rate, PSRate: b.PSRate, Delay: t.LinkDelay.D(),
		QueuePackets: t.QueuePackets, Values: values, Slots: max(t.Switch.Slots/stride, 1), PSCount: t.PS.Count,
		PassTime: t.Switch.PassTime.D(), Latency: t.Switch.Latency.D()}
	if cfg.Delay == 0 {
		cfg.Delay = time.Nanosecond // 0 means the 1 µs default in host
	}
	if s.FreeINAPath == "trim" {
		cfg.INAPath = host.PathTrim
	} else {
		cfg.INAPath = host.PathUC
	}
	if cfg.PassTime == 0 {
		cfg.PassTime = -1
	}
	if cfg.Latency == 0 {
		cfg.Latency = -1
	}
	for _, p := range b.Plans {
		cfg.Jobs = append(cfg.Jobs, p.Workers)
	}
	// Every all-reduce asks for the window that keeps a worker link busy
	// (FreeINA's path control needs no PS share then); DynaINA's demand is
	// the same number (host.DemandRTT).
	want := host.PipeSlots(cfg.Rate, cfg.Delay, max(cfg.Latency, 0), values)
	// The RC QPs are host.NewCluster's: host.DefaultQP with the ACK timeout
	// derived from these links (host.RCTimeoutExp). The PSN window stays
	// host.DefaultQP's 128: a window of twice the scaled RC round trip
	// (≈570 packets at 1 Gb/s and 200 µs links) made 16 workers overflow
	// the PS port's queue, and the go-back-N storms exhausted RC's retry
	// count (measured on freeina-multi: a stall).
	tmo := timerUnit(cfg.Rate, cfg.Delay)
	cfg.PS.GrantTimeout = tmo
	cfg.LeaseIdle = 2*time.Millisecond + 10*cfg.Delay + tmo
	cfg.Tune = func(job uint16, rank int, wc *host.WorkerConfig) {
		wc.AdaptUCTimeout = b.Realtime
		p := b.Plans[job-1]
		wc.Gap = p.Compute
		wc.Delay = p.Arrival + p.Compute
		wc.WantSlots = want
		wc.ResultTimeout = 3 * tmo
	}
	return cfg
}

// timerUnit is the unit of the protocol timers a scenario's time scale
// stretches: the PS's ALLOC retransmission (1 unit), the workers' result
// timeout (3), ATP's and ESA's retransmission timeout (1.5) and
// SwitchML's (0.75). It is 65.5 µs at 100 Gb/s times the time scale
// 100 Gb/s / rate (a queue of the same packets drains that much slower),
// plus two round trips of propagation (a scaled scenario lengthens the
// links to keep the bandwidth-delay product), rounded up to a power-of-two
// multiple of 4.096 µs like an RC ACK timeout.
func timerUnit(rate int64, delay time.Duration) time.Duration {
	const exp100G = 4 // 4.096 µs × 2^4 = 65.5 µs
	k := max(1, float64(host.DefaultRate)/float64(rate))
	need := time.Duration(float64(rdma.LocalACKTimeout(exp100G))*k) + 4*delay
	exp := uint8(exp100G)
	for exp < 31 && rdma.LocalACKTimeout(exp) < need {
		exp++
	}
	return rdma.LocalACKTimeout(exp)
}

func strideOf(b *Build) int {
	return (b.Scenario.Topology.Switch.ValuesPerPacket + sw.DefaultValuesPerPass - 1) / sw.DefaultValuesPerPass
}

func buildFreeINA(b *Build) (Testbed, error) {
	c, err := host.NewCluster(clusterConfig(b), b.Tensors)
	if err != nil {
		return nil, err
	}
	return newFreeINABed(c, nil, b), nil
}

func buildDynaINA(b *Build) (Testbed, error) {
	cfg := clusterConfig(b)
	var dc host.DynaINAConfig
	for _, p := range b.Plans {
		dc.Jobs = append(dc.Jobs, sw.DynaINAJob{Arrival: p.Arrival, AllReduces: p.Iterations,
			Profile: dynaina.JobProfile{Workers: p.Workers, GradientBytes: p.Bytes, Compute: p.Compute}})
	}
	c, node, err := host.NewDynaINACluster(cfg, dc, b.Tensors)
	if err != nil {
		return nil, err
	}
	return newFreeINABed(c, node, b), nil
}

func (f *freeinaBed) Network() *emu.Network { return f.c.Net }
func (f *freeinaBed) SwitchNode() string    { return "switch" }

func (f *freeinaBed) WorkerNode(job, rank int) (string, *emu.Link) {
	i := len(f.c.PSs)
	for j := 0; j < job; j++ {
		i += len(f.c.Workers[j])
	}
	return fmt.Sprintf("w%d.%d", job+1, rank), f.c.Links[i+rank]
}

func (f *freeinaBed) PSNode(i int) (string, *emu.Link) {
	if i >= len(f.c.PSs) {
		return "", nil
	}
	return host.PSNodeName(i), f.c.Links[i]
}

func (f *freeinaBed) Ranks(job int) []RankWorker {
	return f.ranks[job]
}

// hostRank adapts a FreeINA worker: a result is dropped once read.
type hostRank struct{ w *host.Worker }

func (h hostRank) Finished() int { return len(h.w.Reports()) }
func (h hostRank) Span(i int) (time.Duration, time.Duration) {
	r := h.w.Reports()[i]
	return r.Start, r.End
}
func (h hostRank) Result(i int) []int32 {
	r := h.w.Result(i)
	h.w.DropResult(i)
	return r
}

func newFreeINABed(c *host.Cluster, dyn *sw.DynaINANode, b *Build) *freeinaBed {
	f := &freeinaBed{c: c, dyn: dyn, stride: strideOf(b)}
	for _, ws := range c.Workers {
		var rs []RankWorker
		for _, w := range ws {
			rs = append(rs, hostRank{w})
		}
		f.ranks = append(f.ranks, rs)
	}
	return f
}

// Occupancy: the aggregators each lease holds; with DynaINA, labelled with
// the pool they lie in.
func (f *freeinaBed) Occupancy() []Occupied {
	var out []Occupied
	var pools []dynaina.PoolInfo
	stride := f.stride
	if f.dyn != nil {
		pools = f.dyn.Sched.Pools()
	}
	for _, l := range f.c.FreeINA.Leases() {
		o := Occupied{Job: int(l.Job) - 1, Slots: l.Slots * stride}
		if f.dyn != nil {
			agg := l.Base / stride // the FreeINA pool starts at slot 0
			for _, p := range pools {
				if agg >= p.Range.Base && agg < p.Range.End() {
					o.Pool = fmt.Sprintf("pool%d", p.ID)
				}
			}
		}
		out = append(out, o)
	}
	return out
}

func (f *freeinaBed) Counters(job int) JobCounters {
	var c JobCounters
	if st, ok := f.c.Switch.JobStats(uint16(job + 1)); ok {
		c.SwitchChunks, c.Collisions = int64(st.Results), int64(st.Collisions)
	}
	for _, w := range f.c.Workers[job] {
		// RC retransmissions, plus UC contributions resent after a timeout
		// (the UC INA path's own loss recovery).
		c.Retransmissions += int64(w.QP().Stats().TxRetransmits)
		for _, r := range w.Reports() {
			c.Retransmissions += int64(r.UCRetx)
		}
	}
	return c
}

func (f *freeinaBed) Check() error {
	if f.dyn != nil {
		if err := f.dyn.Err(); err != nil {
			return err
		}
		if st := f.dyn.Stats(); st.Outside != 0 {
			return fmt.Errorf("dynaina: %d grants outside the job's pool", st.Outside)
		}
	}
	return nil
}
