// Package testbed builds the emulated cluster every policy runs on, and is
// the one place that wires it: a single aggregation switch, the parameter
// servers and the workers of every job, each on its own switch port and
// link (the PSs on the first ports, then the workers job by job; with
// PSCoLocated each job's PS shares its worker rank 0's host, NIC, link and
// port), with the node names, addresses, queue-pair numbers, replication
// ids (plan.go) and the protocol parameters derived from the links
// (defaults.go). It is
// inabox's ns-3-style helper: host/ and host/baseline hold only protocol
// endpoints, and a Policy — one file per policy, registered by name in
// registry.go — says how to program the switch and which endpoints the
// hosts run. It is also the cluster manager: its Events are timed calls on
// a node's state, such as a DynaINA job's registration with the switch at
// the job's arrival.
//
//	t, err := testbed.Build(testbed.Spec{Jobs: []testbed.JobSpec{{Workers: 8}}}, "freeina", tensors)
//	end, err := t.Run(time.Second, 0)
//	t.Worker(0, 3).Endpoint.Result(0)   // worker 3 of job 0's int32 sum of its first all-reduce
//
// Jobs are indexed from 0 in this package's API; on the wire and in the
// switch's tables job j is j+1 (job id 0 is reserved).
package testbed

import (
	"cmp"
	"errors"
	"fmt"
	"math"
	"time"

	"github.com/inabox/inabox/emu"
	"github.com/inabox/inabox/emu/nodes"
	"github.com/inabox/inabox/host"
	"github.com/inabox/inabox/rdma"
	sw "github.com/inabox/inabox/switch"
	"github.com/inabox/inabox/switch/dynaina"
)

// JobSpec is one training job.
type JobSpec struct {
	// Workers is the number of workers, 1..32.
	Workers int
	// Arrival is when the job starts; Compute the compute time before each
	// all-reduce (its first all-reduce begins at Arrival + Compute).
	Arrival, Compute time.Duration
	// Timeline, if set, gives worker rank's timeline (buckets, jitter,
	// start offset: host.Timeline) instead of Arrival and Compute; its
	// Start must include the arrival.
	Timeline func(rank int) host.Timeline
	// Priority orders jobs for ESA (higher preempts lower).
	Priority uint8
	// AllReduces is how many all-reduces each worker performs and
	// GradientBytes the size of each: DynaINA's job profile (0 and 0 for
	// the other policies).
	AllReduces    int
	GradientBytes int64
}

// Spec describes a testbed; a zero field takes the default named in
// brackets.
type Spec struct {
	Seed uint64
	Jobs []JobSpec
	// LinkBitsPerSecond is every worker link's rate [DefaultRate],
	// PSLinkBitsPerSecond every PS link's [LinkBitsPerSecond].
	LinkBitsPerSecond, PSLinkBitsPerSecond int64
	// LinkDelay is every link's propagation delay [DefaultDelay].
	LinkDelay time.Duration
	// QueuePackets bounds each link direction's queue
	// [DefaultQueuePackets].
	QueuePackets int
	// Impairments apply to every link (both directions).
	Impairments emu.Impairments
	// ValuesPerPacket is the int32 values per INA packet [DefaultValues].
	ValuesPerPacket int
	// Aggregators is the switch memory the policy shares out, in
	// aggregators of ValuesPerPacket values [sw.DefaultSlots / stride]
	// (SwitchML: left zero, each job gets a pool of twice its window).
	Aggregators int
	// PassTime and Latency time the switch pipeline [DefaultPassTime,
	// DefaultLatency]; negative means untimed.
	PassTime, Latency time.Duration
	// PSPlacement is where the jobs' parameter servers are [PSDedicated:
	// one per job, each on its own host and link]. Every policy gets the
	// same PSs (switchml and none leave theirs idle). With PSCoLocated,
	// PSLinkBitsPerSecond must be zero or LinkBitsPerSecond (the PS uses
	// its worker's link).
	PSPlacement PSPlacement
	// PSCount is the number of parameter servers with PSShared [1]: job j
	// is served by PS j mod PSCount. PSDedicated takes none (0).
	PSCount int
	// SoftwareStack is the cost of the hosts' software network stack under
	// the policies whose endpoints run one (registry Entry.SoftwareStack:
	// ATP and ESA's user-space stack, SwitchML's DPDK client) [zero: not
	// modelled]. The RDMA policies (FreeINA, DynaINA, the ring) offload
	// their transport to the NIC and pay none.
	SoftwareStack SoftwareStack
	// WorkerStack and PSStack, when not nil, are the host costs of the
	// workers' links and of the PSs' own links under any policy, in place
	// of SoftwareStack: a software stack's, or an RDMA NIC's limit. A
	// co-located PS shares its worker's link, and so its WorkerStack.
	WorkerStack, PSStack *SoftwareStack
	// PSCPU is every PS's packet-processing CPU, under every policy (the
	// same capacity for all) [zero: not modelled]: each packet a PS
	// receives waits for one of its cores (nodes.CPU).
	PSCPU nodes.CPUConfig
	// INAPath is FreeINA's and DynaINA's INA path [host.PathUC].
	INAPath host.INAPath
	// Timers are the protocol timeouts [each endpoint's default];
	// ScaledTimers derives them from the links of a scaled scenario.
	Timers Timers
	// RateScale is a scaled scenario's scaling.rate_scale [1]: the RC QPs'
	// ACK timeout is that of the true-scale links (rates / RateScale,
	// delay × RateScale) stretched by 1/RateScale (rdma.Config.TimeoutStretch).
	RateScale float64
	// WantSlots is how many aggregators a FreeINA all-reduce asks for
	// [256].
	WantSlots int
	// Window bounds a baseline client's chunks in flight [SwitchML
	// PipeSlots, ATP/ESA twice that, PS-only 256].
	Window int
	// ATPWindow, if set, caps the ATP and ESA clients' chunks in flight
	// (ATP's congestion control caps its window at 100 packets,
	// in-ATP/ATP common/CC_manager.h; the repository ships it off, so the
	// default is no cap) [0: Window's default].
	ATPWindow int
	// ATPBudget, if set, is every ATP and ESA job's aggregator budget
	// (sw.JobSpec.Budget: chunk c hashes as (job, c mod ATPBudget)) and
	// caps its workers' window; ATP's code gives each application 2800 of
	// its 20000 aggregators (AGTR_TO_USE_PER_APPLICATION, MAX_AGTR_COUNT in
	// in-ATP/ATP common/utils.h) [0: no budget, the whole pool].
	ATPBudget int
	// ATPFirstWait is how long an ATP or ESA worker's chunk waits for a
	// result before it times out while the worker has no result of its
	// all-reduce yet (baseline.INAConfig.FirstWait; ATP's client: 50 ms
	// for the first message of a tensor) [DefaultATPFirstWait; < 0: none,
	// the RTO from the start].
	ATPFirstWait time.Duration
	// ESAReclaimHeld lets ESA's contributions reclaim an aggregator held
	// for another chunk's PS ACK (sw.JobSpec.ReclaimHeld) [false: held
	// until the ACK, as ATP].
	ESAReclaimHeld bool
	// Quant is the quantizer template (Workers is set per job).
	Quant host.Quantizer
	// QP is the RC QP template [DefaultQP with the ACK timeout RCTimeoutExp
	// derives from these links].
	QP rdma.Config
	// Realtime builds FreeINA workers for real-time processes: their UC
	// timeout adapts to measured round trips (host.WorkerConfig.AdaptUCTimeout).
	Realtime bool
	// Scheduler is DynaINA's scheduler configuration [zero
	// LinkBitsPerSecond, ValuesPerSlot and RTT derived from the links: RTT
	// such that a job's demand equals PipeSlots, the window FreeINA's path
	// control aims for; TotalSlots is the switch memory].
	Scheduler dynaina.Config
	// FreeINA adjusts FreeINA's and DynaINA's endpoints after the testbed
	// filled them in (tests; nil: none).
	FreeINA *FreeINAOptions
}

// FreeINAOptions are FreeINA-specific adjustments.
type FreeINAOptions struct {
	// Worker adjusts worker rank of job's configuration.
	Worker func(job, rank int, c *host.WorkerConfig)
}

// Worker is a worker endpoint as the runner sees it: an emu.Node whose
// host.Core holds its tensors, results and reports.
type Worker interface {
	emu.Node
	Done() bool
	Finished() int
	Reports() []host.Report
	Result(i int) []int32
	DropResult(i int)
	Dequantized(i int) []float64
	// Observe calls fn at each step of the worker's all-reduces (host.Core).
	Observe(fn func(host.Step))
	// SetResultSink passes the worker's results to s as they arrive
	// instead of keeping them (host.Core).
	SetResultSink(s host.ResultSink)
	// Values is the int32 values per chunk.
	Values() int
}

// WorkerHandle is one worker of the testbed.
type WorkerHandle struct {
	Name      string // emulator node name
	Job, Rank int
	// Port is its switch port; Link its link (end A the worker, B the
	// switch; with PSCoLocated, rank 0's is its host's link, end A the
	// host's NIC, which its job's PS shares).
	Port     int
	Link     *emu.Link
	Endpoint Worker
	// NIC is the NIC rank 0 shares with its job's PS (PSCoLocated), else
	// nil: the worker is on the link itself.
	NIC *nodes.HostNIC
}

// PSHandle is one parameter server of the testbed.
type PSHandle struct {
	Name  string
	Index int
	// Port is its switch port; Link its link (end A the switch, B the PS).
	// With PSCoLocated, Port and Link are its job's worker rank 0's: the
	// host's link, end A the host's NIC (NIC), B the switch.
	Port int
	Link *emu.Link
	NIC  *nodes.HostNIC
	Node emu.Node
	// CPU is the PS's CPU (Spec.PSCPU) in front of Node, nil if none.
	CPU *nodes.CPU
}

// Testbed is a built cluster, ready to run in virtual time (Run) or node
// by node in processes.
type Testbed struct {
	// Spec is the specification with every default filled in.
	Spec   Spec
	Net    *emu.Network
	Switch *sw.Switch
	// SwitchNode is the node that runs the switch (data plane and the
	// policy's control plane).
	SwitchNode emu.Node
	PSs        []PSHandle
	Workers    [][]WorkerHandle // [job][rank]
	// Stride is the switch slots per aggregator (ValuesPerPacket values).
	Stride int
	policy Policy
	// workerStack and psStack are the host costs of the workers' and the
	// PSs' links under this policy (zero: none).
	workerStack, psStack SoftwareStack
	events               []Event
}

// Event is a call the testbed's cluster manager makes at run time At on
// the state of node Node, e.g. a job's registration with the switch's
// scheduler at the job's arrival. Build schedules every event on Net
// (emu.Network.At, so it runs before any packet or timer of the same
// instant); a process that runs Node on a network of its own (inabox up)
// schedules Node's events there. Do is called on the run's goroutine with
// the run time.
type Event struct {
	At   time.Duration
	Node string
	Do   func(now time.Duration)
}

// Events returns the cluster manager's events, in the order Build
// scheduled them.
func (t *Testbed) Events() []Event { return t.events }

// Stack is the host cost the policy's workers pay (zero: none): Spec's
// WorkerStack, or else its SoftwareStack under the policies the registry
// marks SoftwareStack.
func (t *Testbed) Stack() SoftwareStack { return t.workerStack }

// PSStack is the host cost on the PSs' own links (zero: none): Spec's
// PSStack, or else its SoftwareStack under the policies the registry
// marks SoftwareStack. A co-located PS pays Stack, on its worker's link.
func (t *Testbed) PSStack() SoftwareStack { return t.psStack }

// at adds e to the events Build schedules.
func (t *Testbed) at(e Event) { t.events = append(t.events, e) }

// Build builds the testbed of spec for the registered policy name; tensors
// gives worker rank of job (from 0) its all-reduces.
func Build(spec Spec, name string, tensors func(job, rank int) []host.Tensor) (*Testbed, error) {
	e, ok := Lookup(name)
	if !ok {
		return nil, fmt.Errorf("testbed: no policy %q (policies: %v)", name, Names())
	}
	return BuildWith(spec, e.New(), tensors)
}

// BuildWith builds the testbed of spec for policy p.
func BuildWith(spec Spec, p Policy, tensors func(job, rank int) []host.Tensor) (*Testbed, error) {
	if err := spec.fill(); err != nil {
		return nil, err
	}
	t := &Testbed{Spec: spec, Net: emu.NewNetwork(emu.Config{Seed: spec.Seed}), policy: p,
		Stride: sw.SlotsPerAggregator(spec.ValuesPerPacket)}
	nps := spec.NumPS()
	var err error
	// Ports: the PSs first, then every job's workers (co-located: the
	// workers only, each job's PS on its worker rank 0's port).
	coloc := spec.PSPlacement == PSCoLocated
	port := nps
	if coloc {
		port = 0
	}
	for i := range nps {
		t.PSs = append(t.PSs, PSHandle{Name: PSNode(i), Index: i, Port: i})
	}
	for j, js := range spec.Jobs {
		var ws []WorkerHandle
		for r := 0; r < js.Workers; r++ {
			ws = append(ws, WorkerHandle{Name: WorkerNode(uint16(j+1), r), Job: j, Rank: r, Port: port})
			port++
		}
		t.Workers = append(t.Workers, ws)
		if coloc {
			t.PSs[j].Port = ws[0].Port
		}
	}
	if e, ok := Lookup(p.Name()); ok && e.SoftwareStack {
		t.workerStack, t.psStack = spec.SoftwareStack, spec.SoftwareStack
	}
	if spec.WorkerStack != nil {
		t.workerStack = *spec.WorkerStack
	}
	if spec.PSStack != nil {
		t.psStack = *spec.PSStack
	}
	if t.SwitchNode, err = p.Switch(t); err != nil {
		return nil, err
	}
	if err := t.Net.AddNode(SwitchNode, port, t.SwitchNode); err != nil {
		return nil, err
	}
	for i := range t.PSs {
		ps := &t.PSs[i]
		if ps.Node, err = p.PS(t, i); err != nil {
			return nil, err
		}
		node := ps.Node
		if spec.PSCPU.Enabled() {
			ps.CPU = nodes.NewCPU(ps.Node, spec.PSCPU)
			node = ps.CPU
		}
		if err := t.Net.AddNode(ps.Name, 1, node); err != nil {
			return nil, err
		}
		if coloc {
			continue // linked to its host's NIC below
		}
		if ps.Link, err = t.hostLink(ps.Name, ps.Port, spec.PSLinkBitsPerSecond, t.psStack, false); err != nil {
			return nil, err
		}
	}
	for j := range t.Workers {
		for r := range t.Workers[j] {
			w := &t.Workers[j][r]
			if w.Endpoint, err = p.Worker(t, j, r, tensors(j, r)); err != nil {
				return nil, err
			}
			if err := t.Net.AddNode(w.Name, 1, w.Endpoint); err != nil {
				return nil, err
			}
			if coloc && r == 0 {
				if err := t.coLocate(w, &t.PSs[t.PSOf(j)]); err != nil {
					return nil, err
				}
				continue
			}
			if w.Link, err = t.hostLink(w.Name, w.Port, spec.LinkBitsPerSecond, t.workerStack, true); err != nil {
				return nil, err
			}
		}
	}
	for _, e := range t.events {
		t.Net.At(e.At, func() { e.Do(t.Net.Now()) })
	}
	return t, nil
}

// coLocate puts worker w and parameter server ps on one host: a NIC node
// (NICNode) on the host's link to the switch, on w's port, and ideal
// internal links from the NIC to w (NIC port 1) and ps (port 2). Both
// endpoints' traffic crosses the host's link.
func (t *Testbed) coLocate(w *WorkerHandle, ps *PSHandle) error {
	name := NICNode(JobID(w.Job), w.Rank)
	nic := nodes.NewHostNIC(WorkerAddr(JobID(w.Job), w.Rank).MAC, PSAddr(ps.Index).MAC)
	if err := t.Net.AddNode(name, 3, nic); err != nil {
		return err
	}
	// Inside the host: infinitely fast, no delay, never a queue drop.
	in := emu.LinkConfig{MTUBytes: DefaultLinkMTU, QueuePackets: 1 << 20}
	if _, err := t.Net.Connect(name, 1, w.Name, 0, in); err != nil {
		return err
	}
	if _, err := t.Net.Connect(name, 2, ps.Name, 0, in); err != nil {
		return err
	}
	l, err := t.hostLink(name, w.Port, t.Spec.LinkBitsPerSecond, t.workerStack, true)
	if err != nil {
		return err
	}
	w.Link, w.NIC, ps.Link, ps.NIC = l, nic, l, nic
	return nil
}

func (s *Spec) fill() error {
	if len(s.Jobs) == 0 {
		return errors.New("testbed: no jobs")
	}
	for i, j := range s.Jobs {
		if j.Workers < 1 || j.Workers > 32 {
			return fmt.Errorf("testbed: job %d: a job needs 1..32 workers, not %d", i, j.Workers)
		}
	}
	if s.LinkBitsPerSecond == 0 {
		s.LinkBitsPerSecond = DefaultRate
	}
	if s.PSPlacement == PSCoLocated && s.PSLinkBitsPerSecond != 0 && s.PSLinkBitsPerSecond != s.LinkBitsPerSecond {
		return fmt.Errorf("testbed: PSLinkBitsPerSecond = %d: a co-located PS uses its worker's link (%d b/s)", s.PSLinkBitsPerSecond, s.LinkBitsPerSecond)
	}
	if s.PSLinkBitsPerSecond == 0 {
		s.PSLinkBitsPerSecond = s.LinkBitsPerSecond
	}
	if s.LinkDelay == 0 {
		s.LinkDelay = DefaultDelay
	}
	if s.QueuePackets == 0 {
		s.QueuePackets = DefaultQueuePackets
	}
	if s.ValuesPerPacket == 0 {
		s.ValuesPerPacket = DefaultValues
	}
	if s.PassTime == 0 {
		s.PassTime = DefaultPassTime
	}
	if s.Latency == 0 {
		s.Latency = DefaultLatency
	}
	switch s.PSPlacement {
	case PSDedicated:
		if s.PSCount != 0 {
			return fmt.Errorf("testbed: PSCount = %d: a count applies to PSShared (PSDedicated gives each job one PS)", s.PSCount)
		}
	case PSShared:
		if s.PSCount <= 0 {
			s.PSCount = 1
		}
	case PSCoLocated:
		if s.PSCount != 0 {
			return fmt.Errorf("testbed: PSCount = %d: a count applies to PSShared (PSCoLocated gives each job one PS)", s.PSCount)
		}
	default:
		return fmt.Errorf("testbed: PSPlacement = %d: not PSDedicated, PSShared or PSCoLocated", s.PSPlacement)
	}
	return nil
}

// SoftwareStack is a software network stack's cost at a host, modelled
// on the host's link, both directions: the stack moves at most
// BitsPerSecond (0: the link's rate) and adds Latency per packet each
// way. ATP's own code notes its user-space stack runs at about 46 Gb/s
// against a 100 Gb/s NIC (in-ATP/ATP common/window_manager.h).
//
// TxBitsPerSecond and RxBitsPerSecond, where not 0, are its rates as the
// host sends and as it receives, in place of BitsPerSecond.
type SoftwareStack struct {
	BitsPerSecond                    int64
	TxBitsPerSecond, RxBitsPerSecond int64
	Latency                          time.Duration
}

// Tx and Rx are the stack's sending and receiving rates (0: the link's).
func (s SoftwareStack) Tx() int64 { return cmp.Or(s.TxBitsPerSecond, s.BitsPerSecond) }

// Rx: see Tx.
func (s SoftwareStack) Rx() int64 { return cmp.Or(s.RxBitsPerSecond, s.BitsPerSecond) }

// PSPlacement is where the jobs' parameter servers are.
type PSPlacement int

const (
	// PSDedicated gives every job its own PS on its own host and link (as
	// ATP runs one per application).
	PSDedicated PSPlacement = iota
	// PSShared has Spec.PSCount PSs serve every job: job j on PS j mod
	// PSCount, the PS links shared by the jobs on them.
	PSShared
	// PSCoLocated puts every job's PS on the host of the job's worker rank
	// 0: the two share the host's NIC (nodes.HostNIC), its one link and its
	// switch port, so the PS's traffic competes with the worker's for the
	// link, as on a real machine. The switch has a port per worker only.
	PSCoLocated
)

// String is the placement's scenario name.
func (p PSPlacement) String() string {
	switch p {
	case PSDedicated:
		return "dedicated"
	case PSShared:
		return "shared"
	case PSCoLocated:
		return "co-located"
	}
	return fmt.Sprintf("PSPlacement(%d)", int(p))
}

// NumPS is the number of parameter servers of spec s (filled).
func (s *Spec) NumPS() int {
	if s.PSPlacement == PSShared {
		return s.PSCount
	}
	return len(s.Jobs)
}

// PSOf is the index of job j's parameter server.
func (t *Testbed) PSOf(j int) int {
	if t.Spec.PSPlacement == PSShared {
		return j % t.Spec.PSCount
	}
	return j
}

// jobsOf are the jobs parameter server i serves.
func (t *Testbed) jobsOf(i int) []int {
	var out []int
	for j := range t.Spec.Jobs {
		if t.PSOf(j) == i {
			out = append(out, j)
		}
	}
	return out
}

func (t *Testbed) link(rate int64) emu.LinkConfig {
	return emu.LinkConfig{BitsPerSecond: rate, Delay: t.Spec.LinkDelay, OverheadBytes: DefaultOverhead, MTUBytes: DefaultLinkMTU,
		QueuePackets: t.Spec.QueuePackets, Impairments: t.Spec.Impairments}
}

// hostLink connects host (port 0) and the switch (port) by a link at
// rate, slowed each way to its host cost s's sending and receiving rates
// and delayed by s's latency; hostFirst puts the host at the link's A end.
func (t *Testbed) hostLink(host string, port int, rate int64, s SoftwareStack, hostFirst bool) (*emu.Link, error) {
	dir := func(stack int64) emu.LinkConfig {
		l := t.link(rate)
		if stack > 0 {
			l.BitsPerSecond = min(l.BitsPerSecond, stack)
		}
		l.Delay += s.Latency
		return l
	}
	tx, rx := dir(s.Tx()), dir(s.Rx())
	if hostFirst {
		return t.Net.ConnectAsym(host, 0, SwitchNode, port, tx, rx)
	}
	return t.Net.ConnectAsym(SwitchNode, port, host, 0, rx, tx)
}

// Latency is the switch's pipeline latency (0 if untimed).
func (t *Testbed) latency() time.Duration { return max(t.Spec.Latency, 0) }

// PipeSlots is PipeSlots for the testbed's worker links.
func (t *Testbed) PipeSlots() int {
	return PipeSlots(t.Spec.LinkBitsPerSecond, t.Spec.LinkDelay, t.latency(), t.Spec.ValuesPerPacket)
}

// rcQP is the RC QP template: Spec.QP, or DefaultQP with the ACK timeout
// derived from the true-scale links and stretched by 1/RateScale.
func (t *Testbed) rcQP() rdma.Config {
	if t.Spec.QP.MTU != 0 {
		return t.Spec.QP
	}
	q := DefaultQP
	s := &t.Spec
	rs := s.RateScale
	if !(rs > 0 && rs < 1) {
		rs = 1
	}
	q.Timeout = RCTimeoutExp(int64(math.Round(float64(min(s.LinkBitsPerSecond, s.PSLinkBitsPerSecond))/rs)),
		time.Duration(math.Round(float64(s.LinkDelay)*rs)), s.QueuePackets, ChunkWireBytes(s.ValuesPerPacket), RCHops)
	if rs < 1 {
		q.TimeoutStretch = 1 / rs
	}
	return q
}

// aggregators is Spec.Aggregators or the default share of the switch.
func (t *Testbed) aggregators() int {
	if t.Spec.Aggregators > 0 {
		return t.Spec.Aggregators
	}
	return sw.DefaultSlots / t.Stride
}

// newSwitch returns a switch of slots slots with a port per node, the
// L2 entries and port security for every PS and worker installed, and its
// timed adapter configuration.
func (t *Testbed) newSwitch(slots int) (*sw.Switch, sw.NodeConfig, error) {
	s, err := sw.New(sw.Config{Slots: slots, Ports: t.ports()})
	if err != nil {
		return nil, sw.NodeConfig{}, err
	}
	t.Switch = s
	// L2 forwarding to every host, and port security: each port takes
	// frames only from its own host's addresses (a co-located PS's and
	// its worker's on their shared port).
	host := func(a rdma.Endpoint, port int) error {
		if err := s.AddL2(a.MAC, port); err != nil {
			return err
		}
		return s.AddPortSource(port, sw.PortSource{MAC: a.MAC, IP: a.IP})
	}
	for i, ps := range t.PSs {
		if err := host(PSAddr(i), ps.Port); err != nil {
			return nil, sw.NodeConfig{}, err
		}
	}
	for j := range t.Workers {
		for _, w := range t.Workers[j] {
			if err := host(WorkerAddr(uint16(j+1), w.Rank), w.Port); err != nil {
				return nil, sw.NodeConfig{}, err
			}
		}
	}
	return s, sw.NodeConfig{PassTime: max(t.Spec.PassTime, 0), Latency: t.latency()}, nil
}

func (t *Testbed) ports() int {
	n := len(t.PSs)
	if t.Spec.PSPlacement == PSCoLocated {
		n = 0 // on their workers' ports
	}
	for _, ws := range t.Workers {
		n += len(ws)
	}
	return n
}

// JobID is job j's id on the wire and in the switch's tables.
func JobID(j int) uint16 { return uint16(j + 1) }

// Worker returns worker rank of job.
func (t *Testbed) Worker(job, rank int) *WorkerHandle { return &t.Workers[job][rank] }

// Policy returns the policy the testbed runs.
func (t *Testbed) Policy() Policy { return t.policy }

// Done reports whether every worker has finished every all-reduce.
func (t *Testbed) Done() bool {
	for _, ws := range t.Workers {
		for _, w := range ws {
			if !w.Endpoint.Done() {
				return false
			}
		}
	}
	return true
}

// Finish returns the latest all-reduce end over all workers.
func (t *Testbed) Finish() time.Duration {
	var end time.Duration
	for _, ws := range t.Workers {
		for _, w := range ws {
			for _, r := range w.Endpoint.Reports() {
				end = max(end, r.End)
			}
		}
	}
	return end
}

// JobEnd returns the latest all-reduce end of job's workers.
func (t *Testbed) JobEnd(job int) time.Duration {
	var end time.Duration
	for _, w := range t.Workers[job] {
		for _, r := range w.Endpoint.Reports() {
			end = max(end, r.End)
		}
	}
	return end
}

// Totals sums the reports of every worker of job.
func (t *Testbed) Totals(job int) host.Report {
	var s host.Report
	for _, w := range t.Workers[job] {
		for _, r := range w.Endpoint.Reports() {
			s.Chunks += r.Chunks
			s.Clipped += r.Clipped
			s.Sent += r.Sent
			s.SwitchResults += r.SwitchResults
			s.PSResults += r.PSResults
			s.Dups += r.Dups
			s.Retransmits += r.Retransmits
			s.PSResends += r.PSResends
			s.Fallbacks += r.Fallbacks
			s.Fetches += r.Fetches
			s.Pulls += r.Pulls
			s.Grants += r.Grants
			s.PeerRequests += r.PeerRequests
			s.ReContribs += r.ReContribs
		}
	}
	return s
}

// Run runs until every worker is done (checked every step of virtual time;
// 0: 100 µs), a node fails (Failed) or deadline; it returns the latest
// all-reduce end.
func (t *Testbed) Run(deadline, step time.Duration) (time.Duration, error) {
	if step <= 0 {
		step = 100 * time.Microsecond
	}
	for at := step; ; at += step {
		if _, err := t.Net.RunUntil(min(at, deadline)); err != nil {
			return t.Finish(), err
		}
		if err := t.Failed(); err != nil {
			return t.Finish(), err
		}
		if t.Done() {
			return t.Finish(), nil
		}
		if at >= deadline {
			return t.Finish(), fmt.Errorf("testbed %s: not done at %v", t.policy.Name(), deadline)
		}
	}
}

// Occupied is switch memory a job holds now.
type Occupied struct {
	Pool  string // "" for a policy without pools
	Job   int    // job index (from 0); -1: not attributable
	Slots int    // reserved: held by the job, aggregating or not
}

// Counters are a job's counters at the end of a run.
type Counters struct {
	// SwitchChunks completed in the switch; Collisions are packets that
	// found no aggregator; Retransmissions are retransmitted packets.
	SwitchChunks, Collisions, Retransmissions int64
	// Drops are the frames of the job dropped on the way, by cause.
	Drops Drops
}

// Occupancy reports the switch memory held now.
func (t *Testbed) Occupancy() []Occupied { return t.policy.Occupancy(t) }

// InUseSlotTime is the slot-time job's aggregators spent in use by a
// chunk — holding its partial or complete sum, until freed — up to now,
// integrated exactly by the switch (sw.Switch.JobSlotTime; one second is
// one slot-second). Reserved memory not in use is idle.
func (t *Testbed) InUseSlotTime(job int) time.Duration {
	_, busy := t.Switch.JobSlotTime(JobID(job), t.Net.Now())
	return busy
}

// ReservedSlotTime is the slot-time job held switch memory (reserved,
// aggregating or not) up to now, and whether it is integrated exactly: so
// it is where a job reserves an aggregator exactly while using it (ATP's
// and ESA's shared pool: claimed, complete or held for the PS's ACK, as
// InUseSlotTime). Elsewhere the reserved memory is Occupancy, sampled.
func (t *Testbed) ReservedSlotTime(job int) (time.Duration, bool) {
	if r, ok := t.policy.(interface {
		reservedSlotTime(t *Testbed, job int) (time.Duration, bool)
	}); ok {
		return r.reservedSlotTime(t, job)
	}
	return 0, false
}

// SwitchCounts are job's chunks completed in the switch and its packets
// that found no aggregator so far: Counters' SwitchChunks and Collisions,
// cheap enough to sample every step.
func (t *Testbed) SwitchCounts(job int) (chunks, collisions int64) {
	c := t.switchJobCounters(job)
	return c.SwitchChunks, c.Collisions
}

// Counters returns job's counters.
func (t *Testbed) Counters(job int) Counters {
	c := t.policy.Counters(t, job)
	c.Drops = t.JobDrops(job)
	return c
}

// Check returns an internal invariant the run broke, or nil.
func (t *Testbed) Check() error { return t.policy.Check(t) }

// Reboots returns how many times the switch rebooted (crashed and
// restarted).
func (t *Testbed) Reboots() int {
	if n, ok := t.SwitchNode.(*sw.Node); ok {
		return int(n.Stats().Reboots)
	}
	return 0
}

// Failed returns why the testbed can no longer finish — a queue pair in
// the error state, or messages an endpoint could not post — naming the
// node, or nil. In a process (inabox up) only the process's own node runs,
// so it names that node's failure.
func (t *Testbed) Failed() error {
	if err := t.lostState(); err != nil {
		return err
	}
	return t.policy.Failed(t)
}

// Idle reports whether node does nothing the jobs need: the PS of a policy
// that does not use one (switchml, none).
func (t *Testbed) Idle(node string) bool {
	r, ok := t.policy.(interface{ lostState(role string) string })
	if !ok {
		return false
	}
	for _, ps := range t.PSs {
		if ps.Name == node {
			return r.lostState("ps") == ""
		}
	}
	return false
}

// lostState names an endpoint that lost its state in a crash and why its
// policy cannot recover from that, or returns nil. (A policy's lostState
// says why, or "" for a role whose loss is harmless: an idle PS.)
func (t *Testbed) lostState() error {
	why := func(role string) string {
		if r, ok := t.policy.(interface{ lostState(role string) string }); ok {
			return r.lostState(role)
		}
		return "the policy cannot recover it"
	}
	for _, ps := range t.PSs {
		if l, ok := ps.Node.(interface{ StateLost() bool }); ok && l.StateLost() {
			if w := why("ps"); w != "" {
				return fmt.Errorf("%s restarted with its state lost: %s", ps.Name, w)
			}
		}
	}
	for _, ws := range t.Workers {
		for _, w := range ws {
			if l, ok := w.Endpoint.(interface{ StateLost() bool }); ok && l.StateLost() {
				return fmt.Errorf("%s restarted with its state lost: %s", w.Name, why("worker"))
			}
		}
	}
	return nil
}

// switchJobCounters fills SwitchChunks and Collisions from the switch's
// job counters.
func (t *Testbed) switchJobCounters(job int) Counters {
	var c Counters
	if st, ok := t.Switch.JobStats(JobID(job)); ok {
		c.SwitchChunks, c.Collisions = int64(st.Results), int64(st.Collisions)
	}
	return c
}
