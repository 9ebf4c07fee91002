package baseline

import (
	"fmt"
	"time"

	"github.com/inabox/inabox/emu"
	"github.com/inabox/inabox/host"
	"github.com/inabox/inabox/rdma"
	sw "github.com/inabox/inabox/switch"
)

// Kinds accepted by New.
const (
	KindPS       = "ps"
	KindRing     = "ring"
	KindSwitchML = "switchml"
	KindATP      = "atp"
	KindESA      = "esa"
)

// Kinds lists every baseline.
var Kinds = []string{KindPS, KindRing, KindSwitchML, KindATP, KindESA}

// Config describes a baseline testbed; it mirrors host.ClusterConfig: one
// switch, the PS on switch port 0, the workers of every job on the
// following ports.
type Config struct {
	Seed uint64
	// Jobs[i] is the number of workers of job i+1.
	Jobs []int
	// Rate and PSRate are the worker and PS link rates (0: 100 Gb/s;
	// PSRate 0: Rate).
	Rate, PSRate int64
	Delay        time.Duration
	// Impair applies to every link (both directions).
	Impair       emu.Impairments
	QueuePackets int
	// Values per chunk (= per packet; 0: 64).
	Values int
	// Slots: ATP/ESA shared pool size in aggregators (0: 16384/stride).
	// SwitchML gives each job its own pool of 2·Window aggregators.
	Slots int
	// PassTime and Latency time the switch pipeline (0: host defaults;
	// negative: untimed).
	PassTime, Latency time.Duration
	// Priority[i] is job i+1's priority (ESA: higher preempts lower).
	Priority []uint8
	// Start[i] is job i+1's arrival; Gap[i] its compute time before each
	// all-reduce.
	Start, Gap []time.Duration
	// Quant is the quantizer template (Workers is filled in per job).
	Quant host.Quantizer
	// Window bounds chunks in flight per worker (0: SwitchML
	// host.PipeSlots, ATP/ESA twice that — their results loop through the
	// PS —, PS-only 256 messages).
	Window int
	// RTO is the INA clients' retransmission timeout (0: SwitchML 50 µs,
	// ATP/ESA 100 µs).
	RTO time.Duration
	// QP is the template of the PS-only and ring RC queue pairs (zero:
	// host.DefaultQP with the ACK timeout host.RCTimeoutExp derives from
	// these links, their queues and Values, and for ps a PSN window of
	// each worker's share of the PS link's round trip, psOnlyWindow).
	QP rdma.Config
}

// Cluster is a built baseline testbed.
type Cluster struct {
	Kind    string
	Net     *emu.Network
	Switch  *sw.Switch
	Node    *RebootNode
	Links   []*emu.Link
	PS      *PS           // switchml, atp, esa (idle for switchml)
	PSOnly  *PSOnlyServer // ps
	Workers [][]Client    // [job-1][rank]
	cfg     Config
}

// Client is what every baseline worker offers.
type Client interface {
	emu.Node
	Done() bool
	Result(i int) []int32
	Dequantized(i int) []float64
	Reports() []Report
}

// RebootNode is the switch node; a crash and restart (emu Crash/Restart)
// reboots it: every register (aggregator values, owners, bitmaps, states)
// is lost, the control plane's tables (jobs, workers, groups, L2) are
// re-installed by the controller as they were.
type RebootNode struct {
	*sw.Node
	// Reboots counts reboots.
	Reboots int
}

// Reset implements emu.Resetter.
func (n *RebootNode) Reset() {
	n.Node.Reset()
	n.S.ResetSlots(0, n.S.Config().Slots)
	n.Reboots++
}

func (c *Config) fill(kind string) {
	if c.Rate == 0 {
		c.Rate = host.DefaultRate
	}
	if c.PSRate == 0 {
		c.PSRate = c.Rate
	}
	if c.Delay == 0 {
		c.Delay = host.DefaultDelay
	}
	if c.QueuePackets == 0 {
		c.QueuePackets = host.DefaultQueuePackets
	}
	if c.Values == 0 {
		c.Values = 64
	}
	if c.QP.MTU == 0 {
		c.QP = host.DefaultQP
		c.QP.Timeout = host.RCTimeoutExp(min(c.Rate, c.PSRate), c.Delay, c.QueuePackets, host.ChunkWireBytes(c.Values), host.RCHops)
		if kind == KindPS {
			c.QP.MaxUnacked = min(c.QP.MaxUnacked, psOnlyWindow(c))
		}
	}
	if c.PassTime == 0 {
		c.PassTime = host.DefaultPassTime
	}
	if c.Latency == 0 {
		c.Latency = host.DefaultLatency
	}
	if c.Window == 0 {
		ps := host.PipeSlots(c.Rate, c.Delay, max(c.Latency, 0), c.Values)
		switch kind {
		case KindSwitchML:
			c.Window = ps
		case KindATP, KindESA:
			c.Window = 2 * ps
		default:
			c.Window = 256
		}
	}
	if c.RTO == 0 {
		c.RTO = 100 * time.Microsecond
		if kind == KindSwitchML {
			c.RTO = 50 * time.Microsecond
		}
	}
}

// psOnlyWindow is the PSN window of the PS-only QPs: every worker's QP
// (and the PS's QP back to it) shares the PS link, so together they need
// only its round-trip bandwidth-delay product in flight — host.PipeSlots,
// twice a worker↔switch round trip, is one worker↔PS round trip — and
// each QP gets its share. A larger window only queues at the PS port, and
// every go-back-N after a reordering or a loss resends the whole window
// into that queue (8 workers, 4 MB, 2 % reordering: 42 ms with 128 PSNs
// and 631 k queue drops, 10.9 ms with 22; clean 4.66 ms with either).
func psOnlyWindow(c *Config) int {
	n := 0
	for _, w := range c.Jobs {
		n += w
	}
	share := host.PipeSlots(c.PSRate, c.Delay, max(c.Latency, 0), c.Values)
	return max(4, (share+n-1)/max(n, 1))
}

// New builds a testbed for kind; tensors(job, rank) gives each worker's
// all-reduces (every worker of a job the same sizes and ids).
func New(kind string, cfg Config, tensors func(job uint16, rank int) []host.Tensor) (*Cluster, error) {
	cfg.fill(kind)
	var ik inaKind
	switch kind {
	case KindPS, KindRing:
	case KindSwitchML:
		ik = kindSwitchML
	case KindATP:
		ik = kindATP
	case KindESA:
		ik = kindESA
	default:
		return nil, fmt.Errorf("baseline: unknown kind %q", kind)
	}
	ina := kind == KindSwitchML || kind == KindATP || kind == KindESA
	stride := (cfg.Values + sw.DefaultValuesPerPass - 1) / sw.DefaultValuesPerPass
	nports := 1
	for _, n := range cfg.Jobs {
		if n < 1 || n > 32 {
			return nil, fmt.Errorf("baseline: a job needs 1..32 workers, not %d", n)
		}
		nports += n
	}
	slots := sw.DefaultSlots
	if kind == KindATP || kind == KindESA {
		if cfg.Slots == 0 {
			cfg.Slots = sw.DefaultSlots / stride
		}
		slots = cfg.Slots * stride
	}
	if kind == KindSwitchML && len(cfg.Jobs)*2*cfg.Window*stride > sw.DefaultSlots {
		return nil, fmt.Errorf("baseline: %d jobs × 2 × window %d × stride %d exceed the switch's %d slots",
			len(cfg.Jobs), cfg.Window, stride, sw.DefaultSlots)
	}
	s, err := sw.New(sw.Config{Slots: slots, Ports: nports})
	if err != nil {
		return nil, err
	}
	c := &Cluster{Kind: kind, Net: emu.NewNetwork(emu.Config{Seed: cfg.Seed}), Switch: s, cfg: cfg}
	c.Node = &RebootNode{Node: sw.NewTimedNode(s, sw.NodeConfig{PassTime: max(cfg.PassTime, 0), Latency: max(cfg.Latency, 0)})}
	if err := c.Net.AddNode("switch", nports, c.Node); err != nil {
		return nil, err
	}
	if err := s.AddL2(host.PSAddr.MAC, 0); err != nil {
		return nil, err
	}
	if kind == KindATP || kind == KindESA {
		if err := s.SetPool(1, 0, slots, stride); err != nil {
			return nil, err
		}
	}
	port := 1
	psJobs := map[uint16]int{}
	for ji, n := range cfg.Jobs {
		job := uint16(ji + 1)
		psJobs[job] = n
		var members []sw.McastMember
		for r := 0; r < n; r++ {
			wa := host.WorkerAddr(job, r)
			if err := s.AddL2(wa.MAC, port); err != nil {
				return nil, err
			}
			if ina {
				rid := job<<8 | uint16(r)
				if err := s.AddWorker(sw.WorkerEntry{Port: port, QP: host.PSQPN(job, r), Job: job, Worker: uint8(r), RID: rid}); err != nil {
					return nil, err
				}
				s.SetRewrite(rid, sw.Rewrite{SrcMAC: host.SwitchAddr.MAC, DstMAC: wa.MAC, SrcIP: host.SwitchAddr.IP,
					DstIP: wa.IP, DstQP: host.WorkerUCQPN(job, r)})
				members = append(members, sw.McastMember{RID: rid, Port: port})
			}
			port++
		}
		if !ina {
			continue
		}
		if err := s.AddMcastGroup(job, members...); err != nil {
			return nil, err
		}
		spec := sw.JobSpec{ID: job, Mask: uint32(1)<<n - 1, Group: job, PSPort: 0}
		switch kind {
		case KindSwitchML:
			base := ji * 2 * cfg.Window * stride
			if err := s.SetPool(job, base, 2*cfg.Window*stride, stride); err != nil {
				return nil, err
			}
			spec.PolicyID, spec.PoolID = sw.PolicyStatic, job
		default:
			spec.PolicyID, spec.PoolID, spec.ResultToPS = sw.PolicyHashed, 1, true
			if kind == KindESA {
				spec.PolicyID = sw.PolicyPreemptive
			}
			if ji < len(cfg.Priority) {
				spec.Priority = cfg.Priority[ji]
			}
			if err := s.AddWorker(sw.WorkerEntry{Port: 0, QP: PSAckQPN(job), Job: job, PS: true, RID: job<<8 | 0xFF}); err != nil {
				return nil, err
			}
		}
		if err := s.SetJob(spec); err != nil {
			return nil, err
		}
	}
	var psNode emu.Node
	switch kind {
	case KindPS:
		p, err := newPSOnlyServer(cfg.QP, cfg.Jobs)
		if err != nil {
			return nil, err
		}
		c.PSOnly, psNode = p, p
	default:
		p := NewPS(psJobs)
		c.PS, psNode = p, p
	}
	if err := c.Net.AddNode("ps", 1, psNode); err != nil {
		return nil, err
	}
	link := func(rate int64) emu.LinkConfig {
		return emu.LinkConfig{BitsPerSecond: rate, Delay: cfg.Delay, OverheadBytes: host.DefaultOverhead,
			QueuePackets: cfg.QueuePackets, Impairments: cfg.Impair}
	}
	l, err := c.Net.Connect("switch", 0, "ps", 0, link(cfg.PSRate))
	if err != nil {
		return nil, err
	}
	c.Links = append(c.Links, l)
	port = 1
	for ji, n := range cfg.Jobs {
		job := uint16(ji + 1)
		var ws []Client
		for r := 0; r < n; r++ {
			ts := tensors(job, r)
			var w Client
			switch kind {
			case KindPS:
				w, err = newPSOnlyWorker(cfg.QP, job, r, n, cfg.Values, cfg.Quant, cfg.Window, ts)
			case KindRing:
				w, err = newRingWorker(cfg.QP, job, r, n, cfg.Values, cfg.Quant, ts)
			default:
				w = newINAWorker(ik, job, r, n, cfg.Values, cfg.Quant, cfg.Window, cfg.RTO, ts)
			}
			if err != nil {
				return nil, err
			}
			setTiming(w, at(cfg.Start, ji), at(cfg.Gap, ji))
			name := fmt.Sprintf("w%d.%d", job, r)
			if err := c.Net.AddNode(name, 1, w); err != nil {
				return nil, err
			}
			l, err := c.Net.Connect(name, 0, "switch", port, link(cfg.Rate))
			if err != nil {
				return nil, err
			}
			c.Links = append(c.Links, l)
			ws = append(ws, w)
			port++
		}
		c.Workers = append(c.Workers, ws)
	}
	return c, nil
}

func at(d []time.Duration, i int) time.Duration {
	if i < len(d) {
		return d[i]
	}
	return 0
}

func setTiming(w Client, start, gap time.Duration) {
	var b *clientBase
	switch x := w.(type) {
	case *INAWorker:
		b = &x.clientBase
	case *PSOnlyWorker:
		b = &x.clientBase
	case *RingWorker:
		b = &x.clientBase
	}
	b.start, b.gap = start, gap
}

// Done reports whether every worker has finished every all-reduce.
func (c *Cluster) Done() bool {
	for _, ws := range c.Workers {
		for _, w := range ws {
			if !w.Done() {
				return false
			}
		}
	}
	return true
}

// Run runs until every worker is done (checked every 50 µs of virtual
// time) or deadline; it returns the latest all-reduce end.
func (c *Cluster) Run(deadline time.Duration) (time.Duration, error) {
	const step = 50 * time.Microsecond
	for t := step; ; t += step {
		if _, err := c.Net.RunUntil(min(t, deadline)); err != nil {
			return c.Finish(), err
		}
		if c.Done() {
			return c.Finish(), nil
		}
		if err := c.qpErr(); err != nil {
			return c.Finish(), err
		}
		if t >= deadline {
			return c.Finish(), fmt.Errorf("baseline %s: not done at %v", c.Kind, deadline)
		}
	}
}

// qpSets returns the RC QP sets of the PS-only server and of every RC
// worker (ps, ring).
func (c *Cluster) qpSets() []*qpSet {
	var sets []*qpSet
	if c.PSOnly != nil {
		sets = append(sets, &c.PSOnly.qs)
	}
	for _, ws := range c.Workers {
		for _, w := range ws {
			switch x := w.(type) {
			case *PSOnlyWorker:
				sets = append(sets, &x.qs)
			case *RingWorker:
				sets = append(sets, &x.qs)
			}
		}
	}
	return sets
}

func (c *Cluster) qpErr() error {
	for _, s := range c.qpSets() {
		if err := s.err(); err != nil {
			return fmt.Errorf("baseline %s: %w", c.Kind, err)
		}
	}
	return nil
}

// Finish returns the latest all-reduce end over all workers.
func (c *Cluster) Finish() time.Duration {
	var t time.Duration
	for _, ws := range c.Workers {
		for _, w := range ws {
			for _, r := range w.Reports() {
				t = max(t, r.End)
			}
		}
	}
	return t
}

// Result returns worker rank of job's int32 sum of its all-reduce number
// i (index into its tensors).
func (c *Cluster) Result(job uint16, rank, i int) []int32 { return c.Workers[job-1][rank].Result(i) }

// Dequantized returns the same result in float64.
func (c *Cluster) Dequantized(job uint16, rank, i int) []float64 {
	return c.Workers[job-1][rank].Dequantized(i)
}

// Reports returns worker rank of job's per-all-reduce reports.
func (c *Cluster) Reports(job uint16, rank int) []Report { return c.Workers[job-1][rank].Reports() }

// Totals sums the reports of every worker of job.
func (c *Cluster) Totals(job uint16) Report {
	var t Report
	for _, w := range c.Workers[job-1] {
		for _, r := range w.Reports() {
			t.Chunks += r.Chunks
			t.Clipped += r.Clipped
			t.Sent += r.Sent
			t.Retransmits += r.Retransmits
			t.PSResends += r.PSResends
			t.PeerRequests += r.PeerRequests
			t.ReContribs += r.ReContribs
			t.SwitchResults += r.SwitchResults
			t.PSResults += r.PSResults
			t.Dups += r.Dups
		}
	}
	return t
}

// PSLink returns the switch↔PS link (Links[0]).
func (c *Cluster) PSLink() *emu.Link { return c.Links[0] }

// JobEnd returns the latest all-reduce end of job's workers.
func (c *Cluster) JobEnd(job uint16) time.Duration {
	var t time.Duration
	for _, w := range c.Workers[job-1] {
		for _, r := range w.Reports() {
			t = max(t, r.End)
		}
	}
	return t
}

// BusySlots returns the switch slots not free (claimed, complete or held).
// After an ATP/ESA run they are the aggregators leaked by loss or a
// reboot: a partial aggregate whose missing contribution went to the PS
// instead, or a stale retransmission's claim; the switch releases only
// held/complete aggregators on the PS's ACK, so these stay until a
// control-plane ResetSlots (later chunks that hash onto them collide and
// take the PS path, still exactly).
func (c *Cluster) BusySlots() int {
	return c.Switch.Config().Slots - c.Switch.Stats().SlotsFree
}
