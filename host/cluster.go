package host

import (
	"fmt"
	"net/netip"
	"time"

	"github.com/inabox/inabox/emu"
	"github.com/inabox/inabox/rdma"
	sw "github.com/inabox/inabox/switch"
)

// Constants of the FreeINA testbed (one place; see docs/freeina.md).
const (
	// DefaultRate is every link's rate: 100 Gb/s.
	DefaultRate = 100e9
	// DefaultDelay is every link's propagation delay (a rack: 1 µs incl.
	// NIC latency).
	DefaultDelay = time.Microsecond
	// DefaultOverhead is Ethernet's preamble+SFD (8), FCS (4) and IFG (12),
	// added to every frame on the wire.
	DefaultOverhead = 24
	// DefaultPassTime is one pipeline pass (≈1 Gpass/s per pipe, Tofino-1
	// order of magnitude); DefaultLatency the parser-to-deparser latency.
	DefaultPassTime = time.Nanosecond
	DefaultLatency  = 500 * time.Nanosecond
	// FreeINAPolicyID is the id the FreeINA policy is registered under.
	FreeINAPolicyID = sw.PolicyCustom
	// PSCtlQPN is the PS's UC QP for GRANT frames.
	PSCtlQPN = 0x400000
)

// ClusterConfig describes a FreeINA testbed: one switch, one PS on switch
// port 0, and the workers of every job on the following ports.
type ClusterConfig struct {
	Seed uint64
	// Jobs[i] is the number of workers of job i+1.
	Jobs []int
	// Rate and PSRate are the worker and PS link rates (0: DefaultRate).
	Rate, PSRate int64
	Delay        time.Duration
	// Impair applies to every link (both directions).
	Impair emu.Impairments
	// QueuePackets bounds each link queue (0: 4096).
	QueuePackets int
	// Values per chunk (0: 64); the FreeINA pool's stride follows.
	Values int
	// Slots is the FreeINA pool in aggregators (0: 16384/stride).
	Slots int
	// PassTime and Latency time the switch pipeline (0: defaults; negative:
	// untimed).
	PassTime, Latency time.Duration
	LeaseIdle         time.Duration
	// PSCount is the number of parameter servers (0: 1) on switch ports
	// 0..PSCount-1; job i+1 is served by PS i mod PSCount.
	PSCount int
	// Worker is the template for every worker (Job, Rank, addresses and
	// QPNs are filled in).
	Worker WorkerConfig
	// PS is the template for the PS (addresses filled in).
	PS PSConfig
	// Tune, if set, adjusts each worker's configuration after the template
	// is filled in (per-job compute gap, first all-reduce time).
	Tune func(job uint16, rank int, wc *WorkerConfig)
	// INAPath selects the INA path of every job: PathUC (the default,
	// docs/freeina.md §11) or PathTrim (§1–§10).
	INAPath INAPath
	// WrapSwitch, if set, returns the node that runs as the switch in place
	// of the FreeINA node (e.g. the DynaINA control plane wrapping it).
	WrapSwitch func(n *sw.FreeINANode) emu.Node
}

// Cluster is a built testbed.
type Cluster struct {
	Net     *emu.Network
	Switch  *sw.Switch
	Node    *sw.FreeINANode
	FreeINA *sw.FreeINA
	PS      *PS         // the first PS
	PSs     []*PS       // every PS; job j is served by PSs[(j-1) mod len(PSs)]
	Workers [][]*Worker // [job-1][rank]
	Links   []*emu.Link
}

// Addressing.
var (
	SwitchAddr = rdma.Endpoint{MAC: [6]byte{2, 0, 0, 0, 0xFE, 1}, IP: netip.AddrFrom4([4]byte{10, 255, 0, 1})}
	PSAddr     = rdma.Endpoint{MAC: [6]byte{2, 0, 0, 0, 0xFE, 2}, IP: netip.AddrFrom4([4]byte{10, 255, 0, 2})}
)

// PSAddrN is the address of PS i (PSAddr for i = 0).
func PSAddrN(i int) rdma.Endpoint {
	if i == 0 {
		return PSAddr
	}
	return rdma.Endpoint{MAC: [6]byte{2, 0, 0, 0, 0xFE, byte(2 + i)}, IP: netip.AddrFrom4([4]byte{10, 255, 0, byte(2 + i)})}
}

// PSNodeName is the emulator node name of PS i ("ps", "ps1", ...).
func PSNodeName(i int) string {
	if i == 0 {
		return "ps"
	}
	return fmt.Sprintf("ps%d", i)
}

// WorkerAddr is the address of worker rank of job.
func WorkerAddr(job uint16, rank int) rdma.Endpoint {
	return rdma.Endpoint{MAC: [6]byte{2, 0, byte(job >> 8), byte(job), byte(rank), 1},
		IP: netip.AddrFrom4([4]byte{10, byte(job), byte(rank), 1})}
}

// QP numbers: the PS's QP for (job, rank), the worker's RC and UC QPs.
func PSQPN(job uint16, rank int) uint32     { return 0x100000 | uint32(job&0xFFF)<<8 | uint32(rank) }
func WorkerQPN(job uint16, rank int) uint32 { return 0x200000 | uint32(job&0xFFF)<<8 | uint32(rank) }
func WorkerUCQPN(job uint16, rank int) uint32 {
	return 0x300000 | uint32(job&0xFFF)<<8 | uint32(rank)
}

// PSUCQPN is the PS's UC QP for worker rank of job (PathUC contributions).
func PSUCQPN(job uint16, rank int) uint32 { return 0x500000 | uint32(job&0xFFF)<<8 | uint32(rank) }

// DefaultQP is the RC QP template: 4 KiB MTU, 7 retries, 128 PSNs in
// flight (≥ 2 × the bandwidth-delay product of a worker link at 256 values
// per packet; a larger window makes every go-back-N after a loss or a
// reordering longer, and puts more duplicates into the queue it resends
// into), and the local ACK timeout RCTimeoutExp gives for the default
// testbed (100 Gb/s, 1 µs, 4096-packet queues, 64 values per packet):
// exponent 7, 524 µs. NewCluster and the baselines derive the timeout from
// their own links instead (RCTimeoutExp).
var DefaultQP = rdma.Config{MTU: 4096, RetryCount: 7, MaxUnacked: 128, TOS: 2,
	Timeout: RCTimeoutExp(DefaultRate, DefaultDelay, DefaultQueuePackets, ChunkWireBytes(64), RCHops)}

// DefaultQueuePackets bounds every link queue (per direction) unless a
// testbed says otherwise.
const DefaultQueuePackets = 4096

// RCHops is the number of links an RC round trip crosses in the testbeds'
// star: requester → switch → responder, then the ACK back.
const RCHops = 4

// RCTimeoutExp returns the local ACK timeout exponent (rdma.Config.Timeout,
// 4.096 µs × 2^exp) for an RC connection over hops links of rate bit/s
// (the slowest on the path) and delay each, whose drop-tail queues hold
// queuePackets frames of at most frameBytes on the wire: the smallest
// exponent whose timeout exceeds by 1/16 (switch latency and reordering
// delays, not in the bound) the longest round trip,
//
//	hops × (delay + (queuePackets + 1) × frameBytes × 8 / rate),
//
// every queue on the way full when the request and then its ACK reach it.
// A shorter timeout fires while the ACK is still queued: go-back-N then
// resends the whole window into the queues that are already full, they
// drop, and the retransmissions feed on themselves until the retry count
// is exhausted (8 PS-only workers on one 100 Gb/s PS port with 2 %
// reordering: exponent 4, 65.5 µs, failed with 2 M queue drops).
func RCTimeoutExp(rate int64, delay time.Duration, queuePackets, frameBytes, hops int) uint8 {
	perHop := float64(delay) + float64(queuePackets+1)*float64(frameBytes)*8/float64(rate)*1e9
	need := time.Duration(float64(hops) * perHop * 17 / 16)
	exp := uint8(1)
	for exp < 31 && rdma.LocalACKTimeout(exp) <= need {
		exp++
	}
	return exp
}

// NewCluster builds the testbed; tensors(job, rank) gives each worker's
// all-reduces.
func NewCluster(cfg ClusterConfig, tensors func(job uint16, rank int) []Tensor) (*Cluster, error) {
	if cfg.Rate == 0 {
		cfg.Rate = DefaultRate
	}
	if cfg.PSRate == 0 {
		cfg.PSRate = cfg.Rate
	}
	if cfg.Delay == 0 {
		cfg.Delay = DefaultDelay
	}
	if cfg.QueuePackets == 0 {
		cfg.QueuePackets = DefaultQueuePackets
	}
	if cfg.Values == 0 {
		cfg.Values = 64
	}
	qpTpl := DefaultQP
	qpTpl.Timeout = RCTimeoutExp(min(cfg.Rate, cfg.PSRate), cfg.Delay, cfg.QueuePackets, ChunkWireBytes(cfg.Values), RCHops)
	if cfg.PassTime == 0 {
		cfg.PassTime = DefaultPassTime
	}
	if cfg.Latency == 0 {
		cfg.Latency = DefaultLatency
	}
	stride := (cfg.Values + sw.DefaultValuesPerPass - 1) / sw.DefaultValuesPerPass
	if cfg.Slots == 0 {
		cfg.Slots = sw.DefaultSlots / stride
	}
	if cfg.PSCount <= 0 {
		cfg.PSCount = 1
	}
	nps := cfg.PSCount
	nports := nps
	for _, n := range cfg.Jobs {
		nports += n
	}
	s, err := sw.New(sw.Config{Slots: cfg.Slots * stride, Ports: nports})
	if err != nil {
		return nil, err
	}
	if err := s.SetPool(1, 0, cfg.Slots*stride, stride); err != nil {
		return nil, err
	}
	fi, err := sw.NewFreeINA(s, sw.FreeINAConfig{PoolID: 1, LeaseIdle: cfg.LeaseIdle, Addr: SwitchAddr})
	if err != nil {
		return nil, err
	}
	if err := s.RegisterPolicy(FreeINAPolicyID, fi); err != nil {
		return nil, err
	}
	for i := 0; i < nps; i++ {
		if err := s.AddL2(PSAddrN(i).MAC, i); err != nil {
			return nil, err
		}
	}
	nc := sw.NodeConfig{PassTime: max(cfg.PassTime, 0), Latency: max(cfg.Latency, 0)}
	c := &Cluster{Net: emu.NewNetwork(emu.Config{Seed: cfg.Seed}), Switch: s, FreeINA: fi}
	c.Node = sw.NewFreeINANode(sw.NewTimedNode(s, nc), fi)
	var swNode emu.Node = c.Node
	if cfg.WrapSwitch != nil {
		swNode = cfg.WrapSwitch(c.Node)
	}
	if err := c.Net.AddNode("switch", nports, swNode); err != nil {
		return nil, err
	}
	link := func(rate int64) emu.LinkConfig {
		return emu.LinkConfig{BitsPerSecond: rate, Delay: cfg.Delay, OverheadBytes: DefaultOverhead,
			QueuePackets: cfg.QueuePackets, Impairments: cfg.Impair}
	}
	psJobs := make([][]PSJob, nps)
	port := nps
	for ji, n := range cfg.Jobs {
		job := uint16(ji + 1)
		psi := ji % nps
		pj := PSJob{Job: job}
		var members []sw.McastMember
		for r := 0; r < n; r++ {
			wa := WorkerAddr(job, r)
			rid := uint16(job)<<8 | uint16(r)
			if err := s.AddL2(wa.MAC, port); err != nil {
				return nil, err
			}
			if err := s.AddWorker(sw.WorkerEntry{Port: port, QP: PSQPN(job, r), Job: job, Worker: uint8(r), RID: rid}); err != nil {
				return nil, err
			}
			if cfg.INAPath == PathUC {
				if err := s.AddWorker(sw.WorkerEntry{Port: port, QP: PSUCQPN(job, r), Job: job, Worker: uint8(r), RID: rid}); err != nil {
					return nil, err
				}
				pj.UCQPN = append(pj.UCQPN, PSUCQPN(job, r))
			}
			s.SetRewrite(rid, sw.Rewrite{SrcMAC: SwitchAddr.MAC, DstMAC: wa.MAC, SrcIP: SwitchAddr.IP, DstIP: wa.IP, DstQP: WorkerUCQPN(job, r)})
			members = append(members, sw.McastMember{RID: rid, Port: port})
			pj.Workers = append(pj.Workers, Peer{Addr: wa, QPN: WorkerQPN(job, r)})
			pj.LocalQPN = append(pj.LocalQPN, PSQPN(job, r))
			port++
		}
		psRID := uint16(job)<<8 | 0xFF
		pa := PSAddrN(psi)
		s.SetRewrite(psRID, sw.Rewrite{SrcMAC: SwitchAddr.MAC, DstMAC: pa.MAC, SrcIP: SwitchAddr.IP, DstIP: pa.IP, DstQP: PSCtlQPN})
		if err := s.AddMcastGroup(job, members...); err != nil {
			return nil, err
		}
		if err := s.SetJob(sw.JobSpec{ID: job, Mask: uint32(1)<<n - 1, Group: job, PSPort: psi, PolicyID: FreeINAPolicyID, PoolID: 1}); err != nil {
			return nil, err
		}
		fi.AddJob(sw.FreeINAJob{Job: job, PSPort: psi, PSRID: psRID})
		psJobs[psi] = append(psJobs[psi], pj)
	}
	for i := 0; i < nps; i++ {
		pcfg := cfg.PS
		pcfg.Addr, pcfg.CtlQPN, pcfg.Switch = PSAddrN(i), PSCtlQPN, SwitchAddr
		pcfg.INAPath = cfg.INAPath
		if pcfg.Control.PipeSlots == 0 {
			pcfg.Control.PipeSlots = PipeSlots(cfg.Rate, cfg.Delay, cfg.Latency, cfg.Values)
		}
		if pcfg.QP.MTU == 0 {
			pcfg.QP = qpTpl
			// The PS's requester sends plans, pulls and results: short bursts;
			// a small window keeps a go-back-N after reordering short.
			pcfg.QP.MaxUnacked = 64
		}
		ps, err := NewPS(pcfg, psJobs[i]...)
		if err != nil {
			return nil, err
		}
		c.PSs = append(c.PSs, ps)
		if err := c.Net.AddNode(PSNodeName(i), 1, ps); err != nil {
			return nil, err
		}
		l, err := c.Net.Connect("switch", i, PSNodeName(i), 0, link(cfg.PSRate))
		if err != nil {
			return nil, err
		}
		c.Links = append(c.Links, l)
	}
	c.PS = c.PSs[0]
	port = nps
	for ji, n := range cfg.Jobs {
		job := uint16(ji + 1)
		var ws []*Worker
		for r := 0; r < n; r++ {
			wc := cfg.Worker
			wc.Job, wc.Rank, wc.Workers = job, uint8(r), n
			wc.Addr, wc.PS = WorkerAddr(job, r), Peer{Addr: PSAddrN(ji % nps), QPN: PSQPN(job, r)}
			wc.QPN, wc.UCQPN = WorkerQPN(job, r), WorkerUCQPN(job, r)
			wc.Values = cfg.Values
			wc.INAPath, wc.PSUCQPN = cfg.INAPath, PSUCQPN(job, r)
			if wc.QP.MTU == 0 {
				wc.QP = qpTpl
			}
			wc.Quant.Workers = n
			if cfg.Tune != nil {
				cfg.Tune(job, r, &wc)
			}
			if wc.UCTimeout == 0 && wc.INAPath == PathUC {
				wc.UCTimeout = UCTimeout(cfg.Rate, cfg.Delay, max(cfg.Latency, 0), cfg.Values, wc.WantSlots)
			}
			if wc.UCRetries == 0 && wc.INAPath == PathUC && wc.QP.Timeout != 0 {
				wc.UCRetries = UCRetries(wc.UCTimeout, rdma.LocalACKTimeout(wc.QP.Timeout))
			}
			w, err := NewWorker(wc, tensors(job, r)...)
			if err != nil {
				return nil, err
			}
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

// ChunkWireBytes is the bytes a chunk of values int32 occupies on a link:
// headers, INA header, values, ICRC and Ethernet overhead.
func ChunkWireBytes(values int) int {
	return rdma.HeadersLen + rdma.BTHLen + 20 + 4*values + rdma.ICRCLen + DefaultOverhead
}

// PipeSlots is the number of aggregators that keeps a worker link busy for
// two slot round trips (worker → switch → worker, 2 × delay + pipeline
// latency): twice the bandwidth-delay product in chunks.
func PipeSlots(rate int64, delay, latency time.Duration, values int) int {
	rtt := 2*delay + latency + time.Duration(float64(ChunkWireBytes(values)*8)/float64(rate)*1e9)
	return int(2*rtt.Seconds()*float64(rate)/float64(8*ChunkWireBytes(values))) + 1
}

// UCTimeout is PathUC's retransmission timeout: 1.5 × (a slot round trip
// plus the time a worker link takes to send half the aggregators wanted,
// the most a contribution can queue behind), at least 10 µs. (Measured:
// 3× costs 1.7× the time at 0.1 % loss; 1× fires spuriously.)
func UCTimeout(rate int64, delay, latency time.Duration, values, want int) time.Duration {
	if want == 0 {
		want = 256
	}
	ser := float64(ChunkWireBytes(values)*8) / float64(rate) * 1e9
	rtt := 2*delay + latency + time.Duration(ser*float64(want/2+1))
	return max(3*rtt/2, 10*time.Microsecond)
}

// UCRetries is how many PathUC timeouts of ucTimeout a worker waits before
// it sends the chunk over RC instead: enough to span four RC ACK timeouts
// of ackTimeout, at least 16. A fallback that comes sooner than RC
// recovers a loss (a PLAN or a pull lost twice) puts chunks on the RC path
// while it is stalled: they hold every worker's window, the next chunks
// time out and fall back too, and the all-reduce ends on the PS path
// (measured in docs/freeina.md §11.4: two timeouts' worth still cascaded
// at 5 % loss, four did not).
func UCRetries(ucTimeout, ackTimeout time.Duration) int {
	if ucTimeout <= 0 {
		return 16
	}
	return min(maxUCRetries, max(16, int((4*ackTimeout+ucTimeout-1)/ucTimeout)))
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

// Run runs until every worker is done (checked every step) or deadline.
func (c *Cluster) Run(deadline, step time.Duration) (time.Duration, error) {
	if step <= 0 {
		step = 100 * time.Microsecond
	}
	for t := step; ; t += step {
		if e, err := c.Net.RunUntil(min(t, deadline)); err != nil {
			return e, err
		}
		if c.Done() {
			return c.Finish(), nil
		}
		if t >= deadline {
			return c.Finish(), fmt.Errorf("host: not done at %v", deadline)
		}
	}
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
