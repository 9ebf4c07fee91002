// Package up is `inabox up`: it runs a scenario as real processes over TAP
// devices and AF_PACKET sockets in network namespaces it creates. Every
// process prepares the same scenario (run.Prepare) and runs its one
// node of it — the switch, a PS or a worker — so the processes run the
// state machines of the virtual-time emulator, unchanged.
//
//	inabox-sw-ID namespace                         inabox-w1.0-ID namespace
//	┌───────────────────────────────────┐          ┌─────────────────────────┐
//	│ inaswitch ══ TAP swK ─ bridge brK ─ vK ══veth══ eth0 ══ inahost w1.0    │
//	│   (switch node, RunRealtime)      │          │ (AF_PACKET, node w1.0)  │
//	└───────────────────────────────────┘          └─────────────────────────┘
//
// One switch port per peer the scenario links to the switch (PSs and
// workers). The switch process owns its TAPs (they vanish with it); Up owns
// the namespaces, bridges and veth pairs and removes all of them — on
// success, on error, on Ctrl-C and when a process dies. See
// docs/processes.md.
package up

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"net/http"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/vishvananda/netlink"
	"github.com/vishvananda/netns"

	"github.com/inabox/inabox/emu"
	"github.com/inabox/inabox/harness/run"
	"github.com/inabox/inabox/harness/scenario"
	"github.com/inabox/inabox/harness/up/faultctl"
	"github.com/inabox/inabox/harness/up/swctl"
	"github.com/inabox/inabox/internal/procnode"
)

// Config is an `inabox up` run: a scenario (the format of `inabox run`)
// and how to run it as processes.
type Config struct {
	// Scenario is the scenario file; "" runs DefaultScenario. Its
	// impairments apply to both directions of the links they name, each in
	// the process that models it; its faults fire at their times after the
	// run's time 0, through the processes' fault API and signals.
	Scenario string
	// Seed and Policy override the scenario's (0, "": keep).
	Seed   uint64
	Policy string
	// Batch is the backend batch size of every process (0: defaults).
	Batch int
	// PcapDir, if set, receives one pcap per switch port, captured at the
	// switch and named by run.PcapName (sw2-h0-w1.0.pcap, sw0-ps0.pcap).
	PcapDir string
	// Backend is how the switch and the peers meet: "" or "tap" (a TAP per
	// switch port bridged to the peer's veth; the peers on AF_PACKET), or
	// "packet", "ring" or "xdp": the veth setup (veth.go), no bridge and no
	// TAP, the switch and the peers on the veth ends with that backend.
	Backend string
	// XDPMode and XDPFallback are the xdp backend's options
	// (procnode.Attachment's XDPMode and XDPFallback).
	XDPMode, XDPFallback string
	// Timeout bounds the whole run (default 2 minutes).
	Timeout time.Duration
	// LateTolerance: a process whose events ran later than this did not
	// keep up with real time (default 1 ms).
	LateTolerance time.Duration
	// KeepWorkDir keeps the directory with reports and sockets.
	KeepWorkDir bool
	// ProfileDir, if set, receives a CPU profile of the switch and of every PS and worker
	// process (<node>.pprof).
	ProfileDir string
	// Transport is how the processes exchange frames: TransportTAP ("" =
	// it: TAP, bridges, veths, AF_PACKET) or TransportUDP (namespaces as
	// machines on a routed network, every port a UDP socket, the clocks
	// started by the network barrier; udp.go).
	Transport string
	// VsVirtual also runs the scenario, seed and policy in virtual time
	// (after the processes) and reports each job's JCT ÷ its virtual JCT.
	VsVirtual bool

	// Command builds the command for a role ("switch", "host", "ps");
	// the default runs inaswitch, inahost or inaps found next to the
	// running executable or in $PATH.
	Command func(role string, args []string) *exec.Cmd
	// OnRunning, if set, is called once every process has started, with
	// their pids by name (switch and the scenario's node names: ps, w1.0,
	// ...). For tests.
	OnRunning func(pids map[string]int)
	// OnStarted, if set, is called once every process runs, with the
	// run's control index (the fault API's sockets). For tests.
	OnStarted func(ix *faultctl.Index)
	// Hold keeps the namespaces, their devices and the processes still
	// running once the run has ended (succeeded or failed), until ctx ends
	// or SIGINT/SIGTERM, for `inabox exec` (hold.go); OnHold, if set, is
	// called with the run's outcome when the hold begins.
	Hold   bool
	OnHold func(res Result, runErr error)
}

// peerTopo is a run's topology for faultSteps.
type peerTopo struct {
	prep  *run.Prepared
	peers []run.Peer
}

func (t peerTopo) nodesOn(target string) []string {
	var out []string
	for _, pe := range t.peers {
		if pe.Host == target {
			out = append(out, pe.Node)
		}
	}
	return out
}

func (t peerTopo) idle(node string) bool { return t.prep.Idle(node) }

func (t peerTopo) link(target string) string {
	for _, pe := range t.peers {
		if pe.CoLocated != nil && pe.CoLocated.PSLink == target {
			return pe.Host
		}
	}
	return target
}

func (t peerTopo) rateScale() float64 { return t.prep.Scenario().Scaling.RateScale }

func (c *Config) check() (*run.Prepared, *schedule, error) {
	if c.Timeout == 0 {
		c.Timeout = 2 * time.Minute
	}
	if c.LateTolerance == 0 {
		c.LateTolerance = defaultLateTolerance
	}
	switch c.Transport {
	case "", TransportTAP, TransportUDP:
	default:
		return nil, nil, fmt.Errorf("up: transport %q: want %s or %s", c.Transport, TransportTAP, TransportUDP)
	}
	prep, err := prepareScenario(c.Scenario, c.Seed, c.Policy)
	if err != nil {
		return nil, nil, fmt.Errorf("up: %w", err)
	}
	if prep.Switch() == nil {
		return nil, nil, fmt.Errorf("up: policy %s: its testbed has no switch data plane to run as inaswitch", prep.Policy())
	}
	peers, err := prep.Peers()
	if err != nil {
		return nil, nil, fmt.Errorf("up: %w", err)
	}
	sched, err := newSchedule(prep.Scenario(), peerTopo{prep, peers})
	if err != nil {
		return nil, nil, fmt.Errorf("up: %w", err)
	}
	if c.Transport == TransportUDP {
		_, ports, err := prep.Node(prep.SwitchName())
		if err != nil {
			return nil, nil, fmt.Errorf("up: %w", err)
		}
		if err := checkUDP(len(peers), ports); err != nil {
			return nil, nil, err
		}
	}
	return prep, sched, nil
}

// ProcResult is one process's outcome.
type ProcResult struct {
	Name    string  `json:"name"`
	Pid     int     `json:"pid"`
	Elapsed Seconds `json:"elapsed_s"`
	// MaxLate and Late come from emu.RealtimeStats: how late the process
	// ran its events. KeptUp is MaxLate ≤ Config.LateTolerance.
	MaxLate Seconds `json:"max_late_s"`
	Late    uint64  `json:"late"`
	Events  uint64  `json:"events"`
	KeptUp  bool    `json:"kept_up"`
	// RateFraction is the fraction of its links' configured rate the
	// process achieved while the workers all-reduced (measures.go,
	// docs/processes.md "Measured"); 0 if it has no such window.
	RateFraction float64 `json:"rate_fraction"`
	// VirtualRateFraction is the same measure of the same node in the
	// same scenario, seed and policy run in virtual time, and
	// RateVsVirtual is RateFraction ÷ VirtualRateFraction
	// (Config.VsVirtual; 0 without it): the share of what the emulated
	// links carry that the process achieved. Protocol pauses keep
	// VirtualRateFraction below 1.
	VirtualRateFraction float64 `json:"virtual_rate_fraction,omitempty"`
	RateVsVirtual       float64 `json:"rate_vs_virtual,omitempty"`
	// In names the worker whose process runs this node, for a PS
	// co-located with it (topology.ps.placement: co-located): the measures
	// are that process's, and its rate fraction is the worker's.
	In string `json:"in,omitempty"`
}

// WorkerResult is one worker's outcome.
type WorkerResult struct {
	ProcResult
	Job  string `json:"job"`
	Rank int    `json:"rank"`
	// Iterations are the worker's all-reduces (times on its own clock),
	// each checked element by element against the reference sum.
	Iterations []run.IterationCheck `json:"iterations"`
	// Exact: every iteration finished and equals the reference.
	Exact bool `json:"exact"`
	// Gbps is the worker's all-reduced bytes over the time its
	// all-reduces took (compute phases excluded).
	Gbps float64 `json:"gbps"`
}

// JobResult is one job's outcome.
type JobResult struct {
	Name       string `json:"name"`
	Workers    int    `json:"workers"`
	Iterations int    `json:"iterations"`
	// JCT is the job completion time: its last all-reduce's end minus its
	// arrival, on its workers' clocks (each starts with its process).
	JCT   Seconds `json:"jct_s"`
	Exact bool    `json:"exact"`
	// VirtualJCT is the job's JCT in virtual time, same scenario, seed and
	// policy, and JCTVsVirtual JCT ÷ VirtualJCT (Config.VsVirtual).
	VirtualJCT   Seconds `json:"virtual_jct_s,omitempty"`
	JCTVsVirtual float64 `json:"jct_vs_virtual,omitempty"`
}

// Result is what Up measured.
type Result struct {
	ID       string         `json:"id"`
	Scenario string         `json:"scenario"`
	Policy   string         `json:"policy"`
	Seed     uint64         `json:"seed"`
	Elapsed  Seconds        `json:"elapsed_s"`
	Jobs     []JobResult    `json:"jobs"`
	Workers  []WorkerResult `json:"workers"`
	Switch   ProcResult     `json:"switch"`
	PSs      []ProcResult   `json:"ps"`
	// Counters are the switch's, read through its control API when the
	// workers finished; SwitchReport and PSReports are the processes'
	// final reports.
	Counters     swctl.Stats  `json:"counters"`
	SwitchReport SwitchReport `json:"switch_report"`
	PSReports    []PeerReport `json:"ps_reports"`
	// StartSkew is how far apart the worker processes' clocks started.
	StartSkew Seconds `json:"start_skew_s"`
	// KeptUp is false if any process fell behind real time; Warnings say
	// which and by how much (link rates and delays did not hold then).
	KeptUp   bool     `json:"kept_up"`
	Warnings []string `json:"warnings,omitempty"`
	// Namespaces lists the namespaces the run created (all removed).
	Namespaces []string `json:"namespaces"`
	// Faults are the scenario's faults that fired, with their times.
	Faults []FaultRecord `json:"faults,omitempty"`
	// Links are the counters of every link direction, from the process
	// that modelled it (its last incarnation, if a fault restarted it).
	Links []LinkResult `json:"links"`
}

// LinkResult is one link direction's counters at the end of the run.
type LinkResult struct {
	Link  string        `json:"link"` // the scenario's name: h0, ps0
	Node  string        `json:"node"`
	Dir   string        `json:"dir"` // up: host→switch, down: switch→host
	Stats emu.LinkStats `json:"stats"`
	// RateFraction is Stats.DeliveredBytes ÷ (the direction's configured
	// rate × Window), Window the all-reduce time of the link's worker (a
	// PS's link: all workers' all-reduce span).
	RateFraction float64 `json:"rate_fraction"`
	Window       Seconds `json:"window_s"`
}

// proc is one process of a node; a node whose process a fault killed and
// started again has one proc per incarnation.
type proc struct {
	name, role string
	args       []string // without --report: for a restart
	cmd        *exec.Cmd
	done       chan struct{}
	err        error
	report     string
	tail       *tailWriter
	// killed: a fault killed it (its exit is expected); stopped: a fault
	// paused it (SIGSTOP); faulted: a fault paused or restarted it.
	killed, stopped, faulted bool
	// restartedAt is when a fault's restart started it (since time 0).
	restartedAt time.Duration
}

type device struct{ ns, name string }

// session is one run of Up: its processes and the namespaces and devices
// it made for them.
type session struct {
	cfg     Config
	prep    *run.Prepared
	peers   []run.Peer
	id      string
	dir     string
	ownDir  bool
	stderr  io.Writer
	nsNames []string
	devices []device
	procs   []*proc          // every process started, for the cleanup
	current map[string]*proc // the running incarnation of each node's process
	exits   chan *proc

	sched *schedule
	zero  time.Time // the run's time 0 (the start file's instant)
	index *faultctl.Index
	taps  []string
	// triggered gets the events the faults timed from the workload wait
	// for (watchTriggers).
	triggered chan triggered
	// barrierCh gets the start of the switch's barrier (TransportUDP).
	barrierCh chan barrierResult
}

// triggered is the event a fault is timed from, seen on a worker.
type triggered struct {
	rec int           // the fault's record
	at  time.Duration // when, since time 0 (the worker's clock)
}

// NamePrefix starts the name of every namespace Up creates.
const NamePrefix = "inabox-"

// Up runs the scenario: it creates the namespaces and links, starts the
// switch, the PS and the workers, waits for every worker's all-reduce,
// gathers results and counters and removes everything it made. It returns an
// error naming the process if one dies, and stops on ctx, SIGINT or SIGTERM.
// Progress and the processes' output go to stderr; stdout gets a summary.
func Up(ctx context.Context, cfg Config, stdout, stderr io.Writer) (res Result, err error) {
	prep, sched, err := cfg.check()
	if err != nil {
		return res, err
	}
	// Every process runs on this machine (a deployment spreads them:
	// EmitK8s).
	if err := prep.Scenario().CheckProcesses(scenario.DefaultModels()); err != nil {
		return res, fmt.Errorf("up: %w", err)
	}
	if cfg.Scenario != "" {
		if cfg.Scenario, err = filepath.Abs(cfg.Scenario); err != nil {
			return res, err
		}
	}
	if cfg.Command == nil {
		cfg.Command = defaultCommand
	}
	if stderr == nil {
		stderr = io.Discard
	}
	// The processes' output (one copying goroutine each) and the
	// orchestrator's log lines share stderr.
	stderr = &lockedWriter{w: stderr}
	ctx, stop := signal.NotifyContext(ctx, os.Interrupt, syscall.SIGTERM)
	defer stop()
	holdCtx := ctx // --hold: until a signal, without the run's timeout
	ctx, cancel := context.WithTimeout(ctx, cfg.Timeout)
	defer cancel()
	var idb [4]byte
	rand.Read(idb[:])
	r := &session{cfg: cfg, prep: prep, id: hex.EncodeToString(idb[:]), stderr: stderr, exits: make(chan *proc, 256),
		current: map[string]*proc{}, sched: sched, triggered: make(chan triggered, 64)}
	r.peers, _ = prep.Peers() // checked
	res.ID, res.Scenario, res.Policy, res.Seed = r.id, prep.Scenario().Name, prep.Policy(), prep.Seed()
	defer func() {
		if cerr := r.cleanup(); cerr != nil {
			err = errors.Join(err, cerr)
		}
		res.Namespaces = r.nsNames
		res.Faults = r.sched.fired()
	}()
	start := time.Now()
	setup := r.setupBackend
	if r.udp() {
		if r.vethMode() {
			return res, fmt.Errorf("up: --transport udp carries every port in UDP sockets: it takes no --backend %s", r.cfg.Backend)
		}
		setup = r.setupUDP
	}
	if err := setup(); err != nil {
		return res, err
	}
	if err := r.writeSession(false); err != nil {
		return res, err
	}
	if cfg.Hold { // once the run has ended, before the cleanup (hold.go)
		defer func() {
			if p := recover(); p != nil {
				panic(p) // no hold: on to the cleanup
			}
			res.Namespaces = r.nsNames
			r.hold(holdCtx, res, err)
		}()
	}
	if err := r.runAll(ctx, &res); err != nil {
		return res, err
	}
	res.Elapsed = Seconds(time.Since(start))
	res.Faults = r.sched.fired()
	if cfg.VsVirtual {
		r.logf("running %s in virtual time (--vs-virtual)", prep.Scenario().Name)
		if err := vsVirtual(ctx, cfg.Scenario, prep, &res); err != nil {
			return res, err
		}
	}
	if stdout != nil {
		res.Print(stdout)
	}
	return res, nil
}

func defaultCommand(role string, args []string) *exec.Cmd {
	bin := "ina" + role
	if exe, err := os.Executable(); err == nil {
		if p := filepath.Join(filepath.Dir(exe), bin); fileExists(p) {
			return exec.Command(p, args...)
		}
	}
	if p, err := exec.LookPath(bin); err == nil {
		return exec.Command(p, args...)
	}
	return exec.Command(bin, args...) // fails in Start with a clear error
}

func fileExists(p string) bool { _, err := os.Stat(p); return err == nil }

func (r *session) swNS() string { return NamePrefix + "sw-" + r.id }

// peerNS returns the namespace of switch peer i (a worker or PS node).
func (r *session) peerNS(i int) string { return NamePrefix + r.peers[i].Node + "-" + r.id }

func (r *session) logf(format string, a ...any) {
	fmt.Fprintf(r.stderr, "inabox up %s: "+format+"\n", append([]any{r.id}, a...)...)
}

// setup creates the work directory, the namespaces, and per switch port a
// bridge and a veth pair whose far end is eth0 in the host's namespace.
//
// noLearning: the bridge's ports learn no addresses, so every frame crosses
// it. A learning bridge would drop a frame a co-located host sends to its
// own PS (its NIC sends it up, VEPA-style, for the switch to aggregate):
// it would have learned the PS's address on the very port the frame came
// in by.
func (r *session) setup() error {
	if err := r.workDir(); err != nil {
		return err
	}
	if err := r.createNetns(); err != nil {
		return err
	}
	if _, err := bridgeNetfilterOff(r.swNS()); err != nil {
		return err
	}
	swh, err := handleAt(r.swNS())
	if err != nil {
		return err
	}
	defer swh.Close()
	for i, pe := range r.peers {
		p := pe.SwitchPort
		fns, err := netns.GetFromName(r.peerNS(i))
		if err != nil {
			return err
		}
		off := false // no IGMP snooping: the bridge then joins no groups and sends no reports
		br := &netlink.Bridge{LinkAttrs: netlink.LinkAttrs{Name: "br" + strconv.Itoa(p), MTU: 9000}, MulticastSnooping: &off}
		if err := swh.LinkAdd(br); err != nil {
			fns.Close()
			return fmt.Errorf("up: bridge %s in %s: %w", br.Name, r.swNS(), err)
		}
		r.devices = append(r.devices, device{r.swNS(), br.Name})
		v := &netlink.Veth{LinkAttrs: netlink.LinkAttrs{Name: "v" + strconv.Itoa(p), MTU: 9000},
			PeerName: "eth0", PeerNamespace: netlink.NsFd(int(fns))}
		err = swh.LinkAdd(v)
		fns.Close()
		if err != nil {
			return fmt.Errorf("up: veth %s in %s: %w", v.Name, r.swNS(), err)
		}
		r.devices = append(r.devices, device{r.swNS(), v.Name})
		if err := swh.LinkSetMaster(v, br); err != nil {
			return fmt.Errorf("up: %s master %s: %w", v.Name, br.Name, err)
		}
		if err := swh.LinkSetLearning(v, false); err != nil { // noLearning
			return fmt.Errorf("up: %s learning off: %w", v.Name, err)
		}
		for _, l := range []netlink.Link{br, v} {
			// No multicast: the kernel then sends no IGMP reports into
			// the emulated network.
			if err := swh.LinkSetMulticastOff(l); err != nil {
				return fmt.Errorf("up: %s multicast off: %w", l.Attrs().Name, err)
			}
			if err := swh.LinkSetUp(l); err != nil {
				return fmt.Errorf("up: %s up: %w", l.Attrs().Name, err)
			}
		}
		hh, err := handleAt(r.peerNS(i))
		if err != nil {
			return err
		}
		err = setUp(hh, "eth0", 9000)
		hh.Close()
		if err != nil {
			return fmt.Errorf("up: eth0 in %s: %w", r.peerNS(i), err)
		}
	}
	return nil
}

// workDir creates the pcap directory, if any, and the run's work
// directory.
func (r *session) workDir() error {
	if r.cfg.PcapDir != "" {
		if err := os.MkdirAll(r.cfg.PcapDir, 0o755); err != nil {
			return err
		}
	}
	dir, err := os.MkdirTemp("", "inabox-up-"+r.id+"-")
	if err != nil {
		return err
	}
	r.dir, r.ownDir = dir, true
	return nil
}

// createNetns creates the switch's namespace, then each peer's, then the
// extra ones (the UDP transport's router), each recorded in the owner file
// before it is made, so a half-made run is removed too. A name that
// exists already is an error (never ours to remove).
func (r *session) createNetns(extra ...string) error {
	names := append(extra, r.swNS())
	for i := range r.peers {
		names = append(names, r.peerNS(i))
	}
	for _, n := range names {
		if procnode.NetnsExists(n) {
			return fmt.Errorf("up: netns %s already exists", n) // never ours to remove
		}
		r.nsNames = append(r.nsNames, n) // recorded first: a half-made namespace is removed too
		if err := r.writeOwner(); err != nil {
			return err
		}
		if err := procnode.CreateNetns(n); err != nil {
			return err
		}
	}
	return nil
}

func handleAt(ns string) (*netlink.Handle, error) {
	h, err := netns.GetFromName(ns)
	if err != nil {
		return nil, fmt.Errorf("up: netns %s: %w", ns, err)
	}
	defer h.Close()
	nh, err := netlink.NewHandleAt(h)
	if err != nil {
		return nil, fmt.Errorf("up: netlink in %s: %w", ns, err)
	}
	return nh, nil
}

func setUp(h *netlink.Handle, name string, mtu int) error {
	l, err := h.LinkByName(name)
	if err != nil {
		return err
	}
	if err := h.LinkSetMulticastOff(l); err != nil {
		return err
	}
	if mtu > 0 && l.Attrs().MTU != mtu {
		if err := h.LinkSetMTU(l, mtu); err != nil {
			return err
		}
	}
	return h.LinkSetUp(l)
}

func (r *session) start(name, role string, args []string) (*proc, error) {
	p := &proc{name: name, role: role, args: args, done: make(chan struct{}), report: filepath.Join(r.dir, name+".json")}
	p.cmd = r.cfg.Command(role, append(slices.Clone(args), "--report", p.report))
	p.cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL, Setpgid: true}
	p.tail = &tailWriter{w: r.stderr, prefix: "[" + name + "] "}
	p.cmd.Stdout, p.cmd.Stderr = p.tail, p.tail
	if err := p.cmd.Start(); err != nil {
		return nil, fmt.Errorf("up: starting %s: %w", name, err)
	}
	r.procs = append(r.procs, p)
	r.current[name] = p
	go func() {
		p.err = p.cmd.Wait()
		close(p.done)
		r.exits <- p
	}()
	return p, nil
}

// died formats a process's unexpected exit.
func (p *proc) died() error {
	why := "exited"
	if p.err != nil {
		why = p.err.Error()
	}
	msg := fmt.Sprintf("up: %s (pid %d) died: %s", p.name, p.cmd.Process.Pid, why)
	if t := p.tail.last(); t != "" {
		msg += "; last output: " + t
	}
	return errors.New(msg)
}

func (r *session) scenArgs() []string {
	return []string{"--scenario", r.cfg.Scenario, "--seed", strconv.FormatUint(r.prep.Seed(), 10), "--policy", r.prep.Policy()}
}

func (r *session) syncArgs(name string) []string {
	if r.udp() {
		return r.udpSyncArgs(name)
	}
	return []string{"--ready", filepath.Join(r.dir, name+".ready"), "--start", filepath.Join(r.dir, "start")}
}

func (r *session) swControl() string { return filepath.Join(r.dir, "sw.sock") }

func (r *session) peerControl(node string) string { return filepath.Join(r.dir, node+".sock") }

// startSwitch starts the switch process (args: its command line, kept for a
// restart), waits for its control API and joins each of its TAPs to its
// port's bridge.
func (r *session) startSwitch(ctx context.Context, args []string) (*proc, error) {
	swp, err := r.start(switchProc, "switch", args)
	if err != nil {
		return nil, err
	}
	return swp, r.attachSwitch(ctx, swp)
}

// attachSwitch waits for the switch process's control API (its TAPs then
// exist) and joins each TAP to its port's bridge.
func (r *session) attachSwitch(ctx context.Context, swp *proc) error {
	client := swctl.NewClient("unix:" + r.swControl())
	if err := r.waitHealthy(ctx, swp, client.WaitHealthy); err != nil {
		return err
	}
	if r.udp() {
		return nil // its ports are UDP sockets: nothing to join
	}
	if r.vethMode() {
		return nil // the switch opened the veth ends themselves
	}
	// Join each TAP to its port's bridge (the switch is programmed as the
	// scenario says already).
	swh, err := handleAt(r.swNS())
	if err != nil {
		return err
	}
	defer swh.Close()
	for _, pe := range r.peers {
		p := pe.SwitchPort
		tl, err := swh.LinkByName(r.taps[p])
		if err == nil {
			var bl netlink.Link
			if bl, err = swh.LinkByName("br" + strconv.Itoa(p)); err == nil {
				if err = swh.LinkSetMulticastOff(tl); err == nil {
					if err = swh.LinkSetMaster(tl, bl); err == nil {
						err = swh.LinkSetLearning(tl, false) // noLearning
					}
				}
			}
		}
		if err != nil {
			return fmt.Errorf("up: joining %s to br%d: %w", r.taps[p], p, err)
		}
	}
	return nil
}

// waitHealthy waits (up to 20 s) for p's control API to answer; p exiting
// first is an error naming it.
func (r *session) waitHealthy(ctx context.Context, p *proc, wait func(context.Context) error) error {
	hctx, hcancel := context.WithTimeout(ctx, 20*time.Second)
	defer hcancel()
	herr := make(chan error, 1)
	go func() { herr <- wait(hctx) }()
	var err error
	select {
	case err = <-herr:
	case <-p.done:
		err = r.died(p)
	}
	if err != nil {
		if isDone(p) {
			return diedError{r.died(p)}
		}
		return fmt.Errorf("up: %s control API: %w", p.name, err)
	}
	return nil
}

// diedError is a process's exit, which a fault step met: the run's error
// as it is.
type diedError struct{ error }

func (e diedError) Unwrap() error { return e.error }

func (r *session) runAll(ctx context.Context, res *Result) error {
	cfg := r.cfg
	_, ports, err := r.prep.Node(r.prep.SwitchName())
	if err != nil {
		return err
	}
	// 1. The switch, with one TAP per port (or its veth ends, or UDP sockets).
	swArgs := append([]string{"--netns", r.swNS()}, r.switchPortArgs(ports)...)
	if r.udp() {
		swArgs = r.udpSwitchArgs(ports)
	}
	swArgs = append(append(swArgs, "--control", "unix:"+r.swControl(), "--batch", strconv.Itoa(cfg.Batch)), r.scenArgs()...)
	if cfg.PcapDir != "" {
		swArgs = append(swArgs, "--pcap", cfg.PcapDir)
	}
	swArgs = append(swArgs, r.syncArgs(switchProc)...)
	if cfg.ProfileDir != "" {
		swArgs = append(swArgs, "--cpuprofile", filepath.Join(cfg.ProfileDir, switchProc+".pprof"))
	}
	if _, err := r.startSwitch(ctx, swArgs); err != nil {
		return err
	}
	if r.udp() {
		if err := r.watchBarrier(ctx); err != nil {
			return err
		}
	}
	// 2. The PSs, then the workers, each with its fault API's socket.
	var psNames, workerNames []string
	for _, role := range []string{"ps", "worker"} {
		for i, pe := range r.peers {
			if pe.Role != role {
				continue
			}
			args := append([]string{"--netns", r.peerNS(i), "--dev", "eth0"}, r.peerBackendArgs()...)
			if r.udp() {
				args = r.udpPeerArgs(i)
			}
			args = append(append(args, "--node", pe.Node, "--batch", strconv.Itoa(cfg.Batch),
				"--control", "unix:"+r.peerControl(pe.Node)), r.scenArgs()...)
			args = append(args, r.syncArgs(pe.Node)...)
			if cfg.ProfileDir != "" {
				args = append(args, "--cpuprofile", filepath.Join(cfg.ProfileDir, pe.Node+".pprof"))
			}
			if role == "ps" {
				if _, err := r.start(pe.Node, "ps", args); err != nil {
					return err
				}
				psNames = append(psNames, pe.Node)
				continue
			}
			args = append(args, "--done", filepath.Join(r.dir, pe.Node+".done"))
			if r.losesState(pe) {
				args = append(args, "--checkpoint", filepath.Join(r.dir, pe.Node+".ckpt.json"))
			}
			if _, err := r.start(pe.Node, "host", args); err != nil {
				return err
			}
			workerNames = append(workerNames, pe.Node)
		}
	}
	// 3. Once every process has its ports open, start all their clocks
	// at the same wall-clock instant.
	if r.udp() {
		if err := r.udpStartClocks(ctx); err != nil {
			return err
		}
	} else {
		if err := r.waitFiles(ctx, ".ready", "ready"); err != nil {
			return err
		}
		r.zero = time.Now().Add(20 * time.Millisecond)
		if err := r.writeStart(); err != nil {
			return err
		}
	}
	if err := r.writeIndex(); err != nil {
		return err
	}
	coloc := ""
	for _, pe := range r.peers {
		if c := pe.CoLocated; c != nil {
			coloc += fmt.Sprintf(", %s in %s's", c.PS, pe.Node)
		}
	}
	if coloc != "" {
		coloc = " (co-located" + coloc + ")"
	}
	r.logf("running %s (policy %s): switch, %d PS and %d worker processes%s in namespaces %s",
		r.prep.Scenario().Name, r.prep.Policy(), len(psNames), len(workerNames), coloc, strings.Join(r.nsNames, " "))
	r.logf("fault API: %s (inabox fault --run %s list)", filepath.Join(r.dir, faultctl.IndexFile), r.dir)
	if cfg.OnRunning != nil {
		pids := map[string]int{}
		for _, p := range r.procs {
			pids[p.name] = p.cmd.Process.Pid
		}
		cfg.OnRunning(pids)
	}
	if cfg.OnStarted != nil {
		cfg.OnStarted(r.index)
	}
	// 4. Watchdog: every worker must finish (it says so with its done
	// file and keeps running for its peers); any exit a fault did not
	// cause is fatal. The scenario's faults fire meanwhile, those timed
	// from the workload when the workers report their events.
	tctx, tcancel := context.WithCancel(ctx)
	var twg sync.WaitGroup
	stopTriggers := func() { tcancel(); twg.Wait() }
	defer stopTriggers()
	r.watchTriggers(tctx, &twg)
	if err := r.waitFiles(ctx, ".done", "unfinished", workerNames...); err != nil {
		return err
	}
	stopTriggers()
	// A fault still pending ends (a paused process resumes, a killed one
	// restarts), so every process can report.
	if err := r.settleFaults(ctx); err != nil {
		return err
	}
	// 5. Counters, then stop every process and read the reports. Over
	// UDP the processes end by themselves, through the barrier's end
	// phase, and the switch's combined result has the counters.
	var swResult Result
	if r.udp() {
		if err := r.udpWaitEnd(ctx, &swResult); err != nil {
			return err
		}
		res.Counters = swResult.Counters
	} else {
		if res.Counters, err = swctl.NewClient("unix:" + r.swControl()).Stats(ctx); err != nil {
			return fmt.Errorf("up: reading switch counters: %w", err)
		}
		all := append(append([]string{switchProc}, psNames...), workerNames...)
		for _, n := range all {
			r.current[n].cmd.Process.Signal(syscall.SIGTERM)
		}
		for _, n := range all {
			p := r.current[n]
			select {
			case <-p.done:
			case <-time.After(10 * time.Second):
				return fmt.Errorf("up: %s did not stop within 10 s of SIGTERM", p.name)
			}
			if p.err != nil {
				return p.died()
			}
		}
	}
	// 6. Every worker's all-reduces, checked in its process against the
	// reference sum; jobs' completion times (buildResult, as the switch
	// builds its result at the barrier's end).
	rp := reports{Peers: map[string]PeerReport{}, Tolerance: cfg.LateTolerance,
		Pid: func(n string) int { return r.current[n].cmd.Process.Pid }}
	if err := readJSON(r.current[switchProc].report, &rp.Switch); err != nil {
		return err
	}
	for _, n := range append(slices.Clone(psNames), workerNames...) {
		var pr PeerReport
		if err := readJSON(r.current[n].report, &pr); err != nil {
			return err
		}
		rp.Peers[n] = pr
	}
	buildResult(r.prep, rp, r.faulted, res)
	for _, f := range r.sched.fired() {
		for _, st := range f.Steps {
			if st.Error != "" {
				res.Warnings = append(res.Warnings, fmt.Sprintf("fault %d (%s on %s): %s: %s", f.Index, f.Kind, f.Target, st.What, st.Error))
			}
		}
	}
	return res.checkExact(r.prep)
}

// losesState reports whether a fault crashes pe with its state lost: its
// process then keeps a checkpoint, from which its restart rejoins (where
// the policy's workers can).
func (r *session) losesState(pe run.Peer) bool {
	for _, f := range r.prep.Scenario().Faults {
		if f.Kind == scenario.FaultNodeCrash && f.LoseState && f.Target == pe.Host {
			return true
		}
	}
	return false
}

// faulted reports whether a fault paused or restarted a process of node.
func (r *session) faulted(node string) bool {
	for _, p := range r.procs {
		if p.name == node && p.faulted {
			return true
		}
	}
	return false
}

// writeIndex writes the run's control index (faultctl.Index) into the work
// directory: every process's fault API socket and which process models
// each link direction.
func (r *session) writeIndex() error {
	ix := &faultctl.Index{ID: r.id, Pid: os.Getpid(), Dir: r.dir, Scenario: r.prep.Scenario().Name, Policy: r.prep.Policy(),
		StartUnixNano: r.zero.UnixNano(), Sockets: map[string]string{switchProc: r.swControl()}}
	for _, pe := range r.peers {
		ix.Sockets[pe.Node] = r.peerControl(pe.Node)
		ix.Links = append(ix.Links, faultctl.IndexLink{Link: pe.Host, Node: pe.Node, Up: pe.Node, Down: switchProc})
	}
	r.index = ix
	return ix.Write(r.dir)
}

// waitFiles waits until the process of every node named (all if none are
// given) has created its file <work dir>/<name><suffix>, firing the
// scenario's faults when they are due (once the clocks started); a process
// exiting first — unless a fault killed it — is fatal, and ctx ending names
// those still pending.
func (r *session) waitFiles(ctx context.Context, suffix, pendingWord string, names ...string) error {
	if len(names) == 0 {
		for n := range r.current {
			names = append(names, n)
		}
		slices.Sort(names)
	}
	tick := time.NewTicker(5 * time.Millisecond)
	defer tick.Stop()
	for {
		var pending []string
		for _, n := range names {
			if !fileExists(filepath.Join(r.dir, n+suffix)) {
				pending = append(pending, n)
			}
		}
		if len(pending) == 0 {
			return nil
		}
		var fire <-chan time.Time
		if at, ok := r.sched.next(); ok && !r.zero.IsZero() {
			t := time.NewTimer(time.Until(r.zero.Add(at)))
			defer t.Stop()
			fire = t.C
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("up: stopped (%v) with %s %s", context.Cause(ctx), strings.Join(pending, ", "), pendingWord)
		case p := <-r.exits:
			// Over UDP a process that exits 0 has ended through the
			// barrier: every worker said done (after creating its file).
			if !p.killed && !(r.udp() && p.err == nil && suffix == ".done") {
				return r.died(p)
			}
		case <-tick.C:
		case tg := <-r.triggered:
			r.sched.trigger(tg.rec, tg.at)
		case <-fire:
			if err := r.fireDue(ctx, time.Since(r.zero)); err != nil {
				return err
			}
		}
	}
}

// died is the error of a process's unexpected exit. A process a fault
// restarted that stops because its node cannot rejoin (its policy cannot
// recover a node whose state was lost) fails the run as the emulator
// does, with the same message.
func (r *session) died(p *proc) error {
	if p.restartedAt > 0 {
		var rep PeerReport
		if readJSON(p.report, &rep) == nil && rep.Error != "" {
			return fmt.Errorf("up: %s: policy %s: at %v: %s", r.prep.Scenario().Name, r.prep.Policy(), p.restartedAt.Round(time.Millisecond), rep.Error)
		}
	}
	return p.died()
}

// watchTriggers starts, for every fault timed from the workload
// (faults[].when), what waits for its event on the workers' fault API
// (POST /progress/wait) and reports it on r.triggered; all end with ctx
// (wg). The events are the emulator's (harness/run: watch): first_packet
// is any worker of the job beginning its first all-reduce, iteration and
// allreduce are rank 0's, run_fraction counts the all-reduces every job's
// rank 0 has finished.
func (r *session) watchTriggers(ctx context.Context, wg *sync.WaitGroup) {
	plans := r.prep.Plans()
	jobOf := map[string]int{}
	total := 0
	for j, p := range plans {
		jobOf[p.Name] = j
		total += p.AllReduces()
	}
	node := func(job, rank int) string {
		for _, pe := range r.peers {
			if pe.Role == "worker" && pe.Job == job && pe.Rank == rank {
				return pe.Node
			}
		}
		return ""
	}
	faults := r.prep.Scenario().Faults
	for rec := range r.sched.later {
		w := faults[r.sched.records[rec].Index].When
		send := func(at time.Duration) {
			select {
			case r.triggered <- triggered{rec, at}:
			case <-ctx.Done():
			}
		}
		wait := func(n string, t faultctl.Trigger) {
			wg.Add(1)
			go func() {
				defer wg.Done()
				if at, ok := r.waitOn(ctx, n, t); ok {
					send(at)
				}
			}()
		}
		k := func(v int) *int { return &v }
		j := jobOf[w.Job]
		switch w.Form() {
		case scenario.WhenFirstPacket:
			for rank := range plans[j].Workers {
				wait(node(j, rank), faultctl.Trigger{Begun: k(0)})
			}
		case scenario.WhenIteration:
			wait(node(j, 0), faultctl.Trigger{Begun: k(w.Iteration * len(plans[j].Buckets))})
		case scenario.WhenAllReduce:
			wait(node(j, 0), faultctl.Trigger{AllReduce: k(w.AllReduce), Fraction: w.Fraction})
		case scenario.WhenRunFraction:
			need := max(int(math.Ceil(w.RunFraction*float64(total))), 1)
			ended := make(chan time.Duration)
			for j, p := range plans {
				wg.Add(1)
				go func() {
					defer wg.Done()
					for n := 1; n <= p.AllReduces(); n++ {
						at, ok := r.waitOn(ctx, node(j, 0), faultctl.Trigger{Finished: k(n)})
						if !ok {
							return
						}
						select {
						case ended <- at:
						case <-ctx.Done():
							return
						}
					}
				}()
			}
			wg.Add(1)
			go func() {
				defer wg.Done()
				// The answers of different jobs arrive in any order: the
				// event is the need-th earliest end among those reported.
				var ends []time.Duration
				for {
					select {
					case at := <-ended:
						ends = append(ends, at)
						if len(ends) >= need {
							slices.Sort(ends)
							send(ends[need-1])
							return
						}
					case <-ctx.Done():
						return
					}
				}
			}()
		}
	}
}

// waitOn waits for trigger t on node's fault API; after an error (a
// process a fault restarted answers on the same socket) it asks again,
// until ctx ends.
func (r *session) waitOn(ctx context.Context, node string, t faultctl.Trigger) (time.Duration, bool) {
	c := faultctl.NewClient(r.peerControl(node))
	for {
		ev, err := c.Wait(ctx, t)
		if err == nil {
			return time.Duration(ev.At), true
		}
		var se *faultctl.StatusError
		if errors.As(err, &se) && se.Code == http.StatusBadRequest {
			r.logf("waiting for %s on %s: %v", t, node, err)
			return 0, false
		}
		select {
		case <-ctx.Done():
			return 0, false
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// fireDue runs the fault steps due at now (since time 0) and records them.
func (r *session) fireDue(ctx context.Context, now time.Duration) error {
	for _, pd := range r.sched.due(now) {
		rec := &r.sched.records[pd.fault]
		if rec.Fired < 0 {
			rec.Fired = Seconds(time.Since(r.zero))
		}
		done, err := r.runStep(ctx, pd.at, pd.step)
		fs := FaultStep{At: Seconds(done.Sub(r.zero)), What: pd.step.what}
		if err != nil {
			fs.Error = err.Error()
			rec.Error = err.Error()
		}
		rec.Steps = append(rec.Steps, fs)
		if pd.step.fatal != nil {
			return fmt.Errorf("up: %s: policy %s: %w", r.prep.Scenario().Name, r.prep.Policy(), pd.step.fatal(pd.at))
		}
		if err != nil {
			r.logf("fault %d (%s) at %v: %s: %v", rec.Index, rec.Kind, fs.At.Round(time.Microsecond), fs.What, err)
			if pd.step.call == nil { // a process that could not be restarted
				var de diedError
				if errors.As(err, &de) {
					return de.error // it ran and stopped: why is its own error
				}
				return fmt.Errorf("up: fault %d (%s on %s): %s: %w", rec.Index, rec.Kind, rec.Target, fs.What, err)
			}
			continue
		}
		r.logf("fault %d (%s) at %v: %s", rec.Index, rec.Kind, fs.At.Round(time.Microsecond), fs.What)
	}
	return nil
}

// settleFaults ends what fired faults left pending once the workers have
// finished — a paused process resumes, a killed one starts again — so
// every process can report; faults not yet fired are dropped.
func (r *session) settleFaults(ctx context.Context) error {
	var rest []pending
	for _, pd := range r.sched.steps {
		if r.sched.records[pd.fault].Fired >= 0 && pd.step.call == nil && (pd.step.act == actCont || pd.step.act == actRestart) {
			pd.at = 0
			rest = append(rest, pd)
		}
	}
	r.sched.steps = rest
	if err := r.fireDue(ctx, 0); err != nil {
		return err
	}
	for _, p := range r.current {
		if p.stopped { // paused for good (an idle PS): let it stop
			syscall.Kill(-p.cmd.Process.Pid, syscall.SIGCONT)
			p.stopped = false
		}
	}
	return nil
}

// runStep does one fault step, due at (since time 0), and returns when it
// took effect: a link call once the processes applied it, a signal once
// sent (a killed process's replacement starts after that), a restart once
// the new process runs.
func (r *session) runStep(ctx context.Context, at time.Duration, st step) (time.Time, error) {
	if st.fatal != nil {
		return time.Now(), nil
	}
	if st.call != nil {
		cctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		defer cancel()
		_, err := r.index.Each(cctx, st.link, st.dir, st.call)
		return time.Now(), err
	}
	var errs []error
	done := time.Now()
	for _, n := range st.nodes {
		p := r.current[n]
		if p == nil {
			errs = append(errs, fmt.Errorf("no process %s", n))
			continue
		}
		pid := p.cmd.Process.Pid
		switch st.act {
		case actKill:
			p.killed, p.faulted = true, true
			syscall.Kill(-pid, syscall.SIGKILL) // the process group: a role may have children
			p.cmd.Process.Kill()
			done = time.Now()
			if st.respawn {
				errs = append(errs, r.respawn(p, r.zero.Add(at+st.restartAfter)))
			}
		case actStop:
			p.stopped, p.faulted = true, true
			errs = append(errs, syscall.Kill(-pid, syscall.SIGSTOP))
		case actCont:
			p.stopped = false
			errs = append(errs, syscall.Kill(-pid, syscall.SIGCONT))
		case actRestart:
			errs = append(errs, r.restarted(ctx, p))
		}
		if st.act != actKill {
			done = time.Now()
		}
	}
	return done, errors.Join(errs...)
}

// respawn starts the process that replaces p, which a fault has just
// killed: it builds its node at once (that takes a while: the whole
// testbed) and opens its ports and starts at the instant restart, its
// node's state lost, continuing the run's clock (--restarted).
func (r *session) respawn(p *proc, restart time.Time) error {
	select {
	case <-p.done:
	case <-time.After(5 * time.Second):
		return fmt.Errorf("%s (pid %d) has not exited after SIGKILL", p.name, p.cmd.Process.Pid)
	}
	var args []string
	for i := 0; i < len(p.args); i++ { // without the flags of an earlier restart
		switch p.args[i] {
		case "--restarted":
		case "--restart-at":
			i++
		default: // --barrier(-listen) kept: the clock is the start file's, the barrier's end phase is rejoined
			args = append(args, p.args[i])
		}
	}
	if r.udp() && !slices.Contains(args, "--start") {
		args = append(args, "--start", filepath.Join(r.dir, "start"))
	}
	args = append(args, "--restarted", "--restart-at", strconv.FormatInt(restart.UnixNano(), 10))
	np, err := r.start(p.name, p.role, args)
	if err != nil {
		return err
	}
	np.faulted, np.restartedAt = true, restart.Sub(r.zero)
	return nil
}

// restarted waits until the process that replaces p's node runs (its
// control API answers) and, for the switch, joins its new TAPs to the
// bridges.
func (r *session) restarted(ctx context.Context, p *proc) error {
	if p.role == "switch" {
		return r.attachSwitch(ctx, p)
	}
	return r.waitHealthy(ctx, p, faultctl.NewClient(r.peerControl(p.name)).WaitHealthy)
}

func workerProcs(ws []WorkerResult) []ProcResult {
	var out []ProcResult
	for _, w := range ws {
		out = append(out, w.ProcResult)
	}
	return out
}

func deleteNetns(name string) error { return procnode.DeleteNetns(name) }

func isDone(p *proc) bool {
	select {
	case <-p.done:
		return true
	default:
		return false
	}
}

func readJSON(path string, v any) error {
	b, err := os.ReadFile(path)
	if err != nil {
		return fmt.Errorf("up: report: %w", err)
	}
	if err := json.Unmarshal(b, v); err != nil {
		return fmt.Errorf("up: report %s: %w", path, err)
	}
	return nil
}

// cleanup kills every process still running, waits for it, deletes the
// devices and namespaces the run created and its work directory.
func (r *session) cleanup() error {
	var errs []error
	// SIGTERM first, so processes flush their captures and reports (kept
	// with --keep); SIGKILL whatever has not exited within 3 s.
	for _, p := range r.procs {
		if !isDone(p) {
			if p.stopped { // a process a fault paused handles no signal until it resumes
				syscall.Kill(-p.cmd.Process.Pid, syscall.SIGCONT)
			}
			p.cmd.Process.Signal(syscall.SIGTERM)
		}
	}
	grace := time.After(3 * time.Second)
	for _, p := range r.procs {
		select {
		case <-p.done:
		case <-grace:
		}
		if !isDone(p) {
			// The whole process group: a role may have children of its own.
			syscall.Kill(-p.cmd.Process.Pid, syscall.SIGKILL)
			p.cmd.Process.Kill()
		}
	}
	for _, p := range r.procs {
		select {
		case <-p.done:
		case <-time.After(10 * time.Second):
			errs = append(errs, fmt.Errorf("up: %s (pid %d) did not exit after SIGKILL", p.name, p.cmd.Process.Pid))
		}
	}
	for i := len(r.devices) - 1; i >= 0; i-- {
		d := r.devices[i]
		h, err := handleAt(d.ns)
		if err != nil {
			continue // namespace already gone
		}
		if l, err := h.LinkByName(d.name); err == nil {
			if err := h.LinkDel(l); err != nil {
				errs = append(errs, fmt.Errorf("up: deleting %s in %s: %w", d.name, d.ns, err))
			}
		}
		h.Close()
	}
	for i := len(r.nsNames) - 1; i >= 0; i-- {
		if err := deleteNetns(r.nsNames[i]); err != nil {
			errs = append(errs, fmt.Errorf("up: deleting netns %s: %w", r.nsNames[i], err))
		}
	}
	if err := r.removeSession(); err != nil {
		errs = append(errs, err)
	}
	if r.ownDir && !r.cfg.KeepWorkDir {
		if err := os.RemoveAll(r.dir); err != nil {
			errs = append(errs, err)
		}
	} else if r.dir != "" {
		r.logf("work directory kept: %s", r.dir)
	}
	return errors.Join(errs...)
}

// Print writes a summary.
func (res *Result) Print(w io.Writer) {
	fmt.Fprintf(w, "inabox up %s: scenario %s, policy %s, seed %d: %d workers done in %v\n",
		res.ID, res.Scenario, res.Policy, res.Seed, len(res.Workers), res.Elapsed.Round(time.Millisecond))
	for _, j := range res.Jobs {
		fmt.Fprintf(w, "  job %-12s workers=%d iterations=%d exact=%v JCT=%v", j.Name, j.Workers, j.Iterations, j.Exact, j.JCT.Round(time.Microsecond))
		if j.VirtualJCT > 0 {
			fmt.Fprintf(w, "  virtual JCT=%v  ×%.3f", j.VirtualJCT.Round(time.Microsecond), j.JCTVsVirtual)
		}
		fmt.Fprintln(w)
	}
	for _, wr := range res.Workers {
		fmt.Fprintf(w, "  %-8s %s/%d exact=%v iterations=%d  %.3f Gb/s while all-reducing (%.1f %% of its link's rate%s)  max-late=%v late=%d\n",
			wr.Name, wr.Job, wr.Rank, wr.Exact, len(wr.Iterations), wr.Gbps, 100*wr.RateFraction, vsVirtualRate(wr.ProcResult), wr.MaxLate, wr.Late)
	}
	c := res.Counters
	fmt.Fprintf(w, "  switch   packets=%d ina=%d passes=%d recirc=%d  max-late=%v late=%d  %.1f %% of the rate toward the workers (lowest%s)\n",
		c.Switch.Packets, c.Switch.INAPackets, c.Switch.Passes, c.Switch.Recirculations, res.Switch.MaxLate, res.Switch.Late, 100*res.Switch.RateFraction, vsVirtualRate(res.Switch))
	fmt.Fprintf(w, "  switch   by reason: %v\n", c.Reason)
	for _, j := range c.Jobs {
		fmt.Fprintf(w, "  job %-4d %+v\n", j.ID, j.JobStats)
	}
	for i, p := range res.PSReports {
		if p.PS != nil {
			in := ""
			if res.PSs[i].In != "" {
				in = " (in " + res.PSs[i].In + "'s process)"
			}
			fmt.Fprintf(w, "  %-8s %+v%s\n", res.PSs[i].Name, *p.PS, in)
		}
	}
	for _, l := range res.Links {
		if d := l.Stats.Drops; d.Total() > 0 {
			fmt.Fprintf(w, "  link %-3s %-4s %-4s sent=%d delivered=%d dropped: down=%d mtu=%d queue=%d loss=%d fcs=%d\n", l.Link, l.Dir, l.Node,
				l.Stats.SentPackets, l.Stats.DeliveredPackets, d.LinkDown, d.MTU, d.Queue, d.Loss, d.FCS)
		}
	}
	for _, f := range res.Faults {
		var steps []string
		for _, st := range f.Steps {
			s := fmt.Sprintf("+%v %s", st.At.Round(time.Millisecond), st.What)
			if st.Error != "" {
				s += " (FAILED: " + st.Error + ")"
			}
			steps = append(steps, s)
		}
		at := f.Planned.String()
		if f.When != "" {
			at = fmt.Sprintf("%v: after %s", f.Planned.Round(time.Millisecond), f.When)
		}
		fmt.Fprintf(w, "  fault %-2d %s %s (at %s): %s\n", f.Index, f.Kind, f.Target, at, strings.Join(steps, "; "))
	}
	fmt.Fprintf(w, "  worker clocks started within %v of each other\n", res.StartSkew.Round(time.Microsecond))
	if res.KeptUp {
		fmt.Fprintln(w, "  real time: every process kept up")
	}
	for _, s := range res.Warnings {
		fmt.Fprintln(w, "  WARNING:", s)
	}
}

// lockedWriter serializes writes to w.
type lockedWriter struct {
	mu sync.Mutex
	w  io.Writer
}

func (l *lockedWriter) Write(b []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(b)
}

// tailWriter forwards a child's output line by line with a prefix and keeps
// the last line for error messages.
type tailWriter struct {
	mu     sync.Mutex
	w      io.Writer
	prefix string
	buf    []byte
	lastLn string
}

func (t *tailWriter) Write(b []byte) (int, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.buf = append(t.buf, b...)
	for {
		i := bytes.IndexByte(t.buf, '\n')
		if i < 0 {
			break
		}
		line := string(t.buf[:i])
		t.buf = t.buf[i+1:]
		if strings.TrimSpace(line) != "" {
			t.lastLn = line
		}
		if t.w != nil {
			fmt.Fprintf(t.w, "%s%s\n", t.prefix, line)
		}
	}
	return len(b), nil
}

func (t *tailWriter) last() string {
	t.mu.Lock()
	defer t.mu.Unlock()
	if len(t.buf) > 0 {
		return strings.TrimSpace(string(t.buf))
	}
	return t.lastLn
}
