package up

import (
	"context"
	_ "embed"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/signal"
	"path/filepath"
	"runtime/pprof"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"go.yaml.in/yaml/v3"

	"github.com/inabox/inabox/emu"
	"github.com/inabox/inabox/harness/run"
	"github.com/inabox/inabox/harness/scenario"
	"github.com/inabox/inabox/harness/up/faultctl"
	"github.com/inabox/inabox/harness/up/swctl"
	"github.com/inabox/inabox/host"
	"github.com/inabox/inabox/internal/procnode"
	sw "github.com/inabox/inabox/switch"
)

// SwitchReport is what an inaswitch process writes to its --report file.
type SwitchReport struct {
	procnode.Report
	Switch swctl.Stats  `json:"switch"`
	Node   sw.NodeStats `json:"node"`
	Error  string       `json:"error,omitempty"`
}

// PeerReport is what an inahost or inaps process writes to its --report
// file: the process's counters, and for a worker every all-reduce it
// finished, checked against the reference sum.
type PeerReport struct {
	procnode.Report
	Node string `json:"node"`
	Role string `json:"role"`
	// StartUnixNano is the wall-clock time the node's clock started (its
	// time 0), so runs of several processes can be lined up.
	StartUnixNano int64 `json:"start_unix_ns"`
	// Worker: Job (0-based) and Rank; Done is true if every iteration
	// finished; Iterations are checked bit-exact.
	Job        int                  `json:"job"`
	Rank       int                  `json:"rank"`
	Done       bool                 `json:"done"`
	Iterations []run.IterationCheck `json:"iterations,omitempty"`
	// PS is a FreeINA/DynaINA parameter server's counters (a co-located
	// host's worker reports its PS's).
	PS    *host.PSStats `json:"ps,omitempty"`
	Error string        `json:"error,omitempty"`
}

// signalContext ends on SIGINT/SIGTERM, and when the parent process goes
// away (a backstop to the Pdeathsig the orchestrator sets).
func signalContext() (context.Context, context.CancelFunc) {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	ppid := os.Getppid()
	go func() {
		t := time.NewTicker(200 * time.Millisecond)
		defer t.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-t.C:
				if os.Getppid() != ppid {
					stop()
					return
				}
			}
		}
	}()
	return ctx, stop
}

func writeJSON(path string, v any) error {
	if path == "" {
		return nil
	}
	if path == "-" { // one line on stdout: a pod's log carries it
		b, err := json.Marshal(v)
		if err != nil {
			return err
		}
		_, err = os.Stdout.Write(append(b, '\n'))
		return err
	}
	b, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		return err
	}
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, b, 0o644); err != nil {
		return err
	}
	return os.Rename(tmp, path)
}

// scenarioFlags registers --scenario, --seed and --policy and returns a
// function that prepares the scenario they name.
func scenarioFlags(fs *flag.FlagSet) func() (*run.Prepared, error) {
	file := fs.String("scenario", "", "scenario file (inabox run's format; \"\" = inabox up's embedded default, "+DefaultScenarioName+")")
	seed := fs.Uint64("seed", 0, "seed (0 = the scenario's)")
	policy := fs.String("policy", "", "policy (\"\" = the scenario's)")
	return func() (*run.Prepared, error) {
		return prepareScenario(*file, *seed, *policy)
	}
}

// DefaultScenario is the scenario `inabox up` runs when given none:
// harness/up/testdata/up-multijob.yaml, two DynaINA jobs on links slow and
// long enough for real time on a busy 2-core machine.
//
//go:embed testdata/up-multijob.yaml
var DefaultScenario []byte

// DefaultScenarioName names DefaultScenario in messages.
const DefaultScenarioName = "up-multijob.yaml"

// prepareScenario loads and prepares a scenario ("" = DefaultScenario); every process of a run
// calls it with the same arguments and so builds the same testbed.
func prepareScenario(file string, seed uint64, policy string) (*run.Prepared, error) {
	var s *scenario.Scenario
	var err error
	if file == "" {
		s, err = scenario.Parse(DefaultScenarioName, DefaultScenario, scenario.DefaultModels())
	} else {
		s, err = scenario.Load(file)
	}
	if err != nil {
		return nil, err
	}
	return run.Prepare(s, run.Options{Seed: seed, Policy: policy, Realtime: true})
}

// SwitchMain is the inaswitch process: the aggregation switch serving one
// TAP device per port in a network namespace, with the control API on a
// unix socket or loopback TCP. With --scenario it runs that scenario's
// switch node (policy, pools and jobs as the emulator builds them);
// without, a bare switch configured by --slots and --config. It runs until
// SIGINT/SIGTERM.
func SwitchMain(args []string, stderr io.Writer) int { return switchMain(args, stderr, nil) }

// SwitchFlagSet returns SwitchMain's flags (for help texts).
func SwitchFlagSet() *flag.FlagSet {
	var fs *flag.FlagSet
	switchMain(nil, io.Discard, &fs)
	return fs
}

// switchMain is SwitchMain; with only set it defines the flags, stores
// the set there and returns.
func switchMain(args []string, stderr io.Writer, only **flag.FlagSet) int {
	fs := flag.NewFlagSet("inaswitch", flag.ContinueOnError)
	fs.SetOutput(stderr)
	netns := fs.String("netns", "", "named network namespace to create the TAP devices in")
	ports := fs.Int("ports", 2, "number of switch ports (without --scenario)")
	taps := fs.String("taps", "", "comma-separated TAP names, one per port (default sw0,sw1,...)")
	devs := fs.String("devs", "", "comma-separated existing interfaces, one per port, opened with --backend instead of creating TAPs")
	swBackend := fs.String("backend", procnode.BackendTAP, "tap (create the --taps), or with --devs: packet (AF_PACKET), ring (AF_PACKET rings) or xdp (AF_XDP)")
	xdpOpts := newXDPFlags(fs)
	control := fs.String("control", "", "control API address: unix socket path, unix:PATH or tcp:127.0.0.1:PORT (required)")
	swProfile := fs.String("cpuprofile", "", "write a CPU profile of the run to this file")
	slots := fs.Int("slots", 0, "aggregator slots (without --scenario; 0 = default)")
	passTime := fs.Duration("pass-time", 0, "pipeline time per pass (without --scenario; 0 = infinitely fast)")
	batch := fs.Int("batch", 0, "TAP read batch (0 = default)")
	cfgFile := fs.String("config", "", "YAML/JSON control-plane entries to install at start (swctl.Config)")
	pcapDir := fs.String("pcap", "", "directory for one pcap per port, captured at the switch (sw3-h0-w1.0.pcap, sw4-ps0.pcap; swK.pcap for a port with no scenario node)")
	report := fs.String("report", "", "file to write the final JSON report to (- = one line on stdout)")
	restarted := fs.Bool("restarted", false, "this process replaces a switch that crashed: it reboots (state lost) and continues the clock of the run's --start file")
	waitRestart := restartAtFlag(fs)
	prepare := scenarioFlags(fs)
	sn := switchNetFlags(fs)
	sn.restarted = restarted
	sync := sn.wrapSync(syncFlags(fs), func(f string, a ...any) { fmt.Fprintf(stderr, "inaswitch: "+f+"\n", a...) })
	if only != nil {
		*only = fs
		return 0
	}
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return 0 // -h: the usage was printed
		}
		return 2
	}
	fail := func(err error) int {
		fmt.Fprintln(stderr, "inaswitch:", err)
		writeJSON(*report, SwitchReport{Error: err.Error()})
		return 1
	}
	if *control == "" {
		return fail(errors.New("--control is required"))
	}
	if err := sn.openBarrier(*netns); err != nil { // the start barrier's, early
		return fail(err)
	}
	var s *sw.Switch
	var node emu.Node
	var seed uint64
	// peers[port] is the scenario's node on each switch port, whose
	// switch→host direction this process models.
	peers := map[int]run.Peer{}
	// schedule puts the cluster manager's timed calls on the switch (the
	// job registrations of DynaINA, each at the job's arrival) on the
	// process's network, as the emulator has them on its own.
	schedule := func(*emu.Network, time.Duration) {}
	var prepared *run.Prepared // nil: a bare switch
	if flagGiven(fs, "scenario") || flagGiven(fs, "policy") || flagGiven(fs, "seed") {
		prep, err := prepare()
		if err != nil {
			return fail(err)
		}
		prepared = prep
		if s = prep.Switch(); s == nil {
			return fail(fmt.Errorf("policy %s: its testbed exposes no switch data plane", prep.Policy()))
		}
		n, np, err := prep.Node(prep.SwitchName())
		if err != nil {
			return fail(err)
		}
		node, *ports, seed = n, np, prep.Seed()
		pl, err := prep.Peers()
		if err != nil {
			return fail(err)
		}
		for _, pe := range pl {
			peers[pe.SwitchPort] = pe
			sn.peerNames = append(sn.peerNames, pe.Node)
			if pe.Role == "worker" {
				sn.workers = append(sn.workers, pe.Node) // their done ends the run (the barrier)
			}
		}
		events := prep.Events(prep.SwitchName())
		schedule = func(net *emu.Network, from time.Duration) {
			for _, e := range events {
				net.At(max(e.At, from), func() { e.Do(net.Now()) })
			}
		}
	} else {
		var err error
		if s, err = sw.New(sw.Config{Slots: *slots, Ports: *ports}); err != nil {
			return fail(err)
		}
		node = sw.NewTimedNode(s, sw.NodeConfig{PassTime: *passTime})
	}
	names := make([]string, *ports)
	for i := range names {
		names[i] = "sw" + strconv.Itoa(i)
	}
	if *taps != "" {
		t := strings.Split(*taps, ",")
		if len(t) != *ports {
			return fail(fmt.Errorf("--taps lists %d names for the switch's %d ports", len(t), *ports))
		}
		names = t
	}
	if *devs != "" || *swBackend != procnode.BackendTAP {
		d := strings.Split(*devs, ",")
		if *devs == "" || *taps != "" || *swBackend == procnode.BackendTAP {
			return fail(errors.New("--devs goes with --backend packet, ring or xdp (and without --taps)"))
		}
		if len(d) != *ports {
			return fail(fmt.Errorf("--devs lists %d names for the switch's %d ports", len(d), *ports))
		}
		names = d
	}
	if *cfgFile != "" {
		b, err := os.ReadFile(*cfgFile)
		if err != nil {
			return fail(err)
		}
		var c swctl.Config
		if err := yaml.Unmarshal(b, &c); err != nil {
			return fail(fmt.Errorf("%s: %w", *cfgFile, err))
		}
		if err := swctl.Apply(s, c); err != nil {
			return fail(err)
		}
	}
	// The adapter's counters, copied on the run goroutine for the API.
	nodeStats := func() sw.NodeStats { return sw.NodeStats{} }
	if ns, ok := node.(interface{ Stats() sw.NodeStats }); ok {
		nodeStats = ns.Stats
	}
	var overruns atomic.Uint64
	var running atomic.Bool // the run goroutine has started the node
	spec := procnode.Spec{Name: "switch", Node: node, Ports: *ports, Netns: *netns, Seed: seed,
		AfterEvent: func() { overruns.Store(nodeStats().Overruns); running.Store(true) }}
	if len(sn.ports) > 0 && *devs != "" {
		return fail(errors.New("--port replaces --devs: give one or the other"))
	}
	backend, portDevs, err := sn.devices(names, *taps != "")
	if err != nil {
		return fail(err)
	}
	var portIdx []int
	for i := range names {
		// The switch→peer direction carries the scenario's link (its
		// transmitter is the switch's egress port, as in the emulator);
		// the peer→switch direction is modelled in the peer's process, so
		// arrivals come in through an ideal link.
		out := ideal
		if pe, ok := peers[i]; ok {
			out = pe.FromSwitch
		}
		a := procnode.Attachment{Port: i, Backend: backend, Dev: portDevs[i], Batch: *batch, MTU: 9000, Link: out, In: &ideal}
		if *devs != "" {
			a.Backend, a.MTU = *swBackend, 0
		}
		if err := xdpOpts.apply(&a); err != nil {
			return fail(err)
		}
		if *pcapDir != "" {
			a.Pcap = filepath.Join(*pcapDir, run.PcapName(run.SwitchEnd(i), peers[i].End()))
		}
		spec.Attach = append(spec.Attach, a)
		portIdx = append(portIdx, i)
	}
	if *restarted {
		// A reboot: the registers and the control plane's data-plane
		// state are lost (emu Restart: Reset, then Start); the tables
		// are installed again from the scenario, as at the start.
		if r, ok := node.(emu.Resetter); ok {
			r.Reset()
		}
	}
	if err := waitRestart(); err != nil {
		return fail(err)
	}
	proc, err := procnode.Open(spec)
	if err != nil {
		return fail(err)
	}
	if !*restarted {
		schedule(proc.Network(), 0)
	}
	var dirs []faultctl.Direction
	for i, l := range proc.Links() {
		pe, ok := peers[i]
		if !ok {
			pe = run.Peer{Host: names[i]} // a bare switch: the port's TAP names it
		}
		dirs = append(dirs, faultctl.Direction{Link: pe.Host, Node: pe.Node, Dir: faultctl.Down, T: faultctl.LinkDir{L: l, D: emu.AtoB}})
	}
	faults := &faultctl.Server{Table: faultctl.NewTable(faultctl.NetClock{N: proc.Network()}, dirs...), Run: proc}
	srv := &swctl.Server{S: s, Ports: portIdx}
	srv.Runtime = func() any { return sw.NodeStats{Overruns: overruns.Load()} }
	srv.Register = registrar(node, proc.Network(), &running)
	ctx, stop := signalContext()
	defer stop()
	ln, err := listenControl(*control)
	if err != nil {
		proc.Run(cancelled()) // closes the TAPs
		return fail(err)
	}
	mux := http.NewServeMux()
	faults.Register(mux)
	mux.Handle("/", srv.Handler())
	hs := &http.Server{Handler: mux, ReadHeaderTimeout: 5 * time.Second}
	go hs.Serve(ln)
	zero, err := sync(ctx)
	if err != nil {
		proc.Run(cancelled())
		hs.Close()
		return fail(err)
	}
	var from time.Duration
	if *restarted {
		proc.SetZero(zero)
		from = time.Since(zero)
		schedule(proc.Network(), from)
	}
	for i, l := range proc.Links() {
		if pe, ok := peers[i]; ok && pe.FlapDown != nil {
			if err := flap(proc.Network(), l, pe.FlapDown, from, untilOf(prepared)); err != nil {
				proc.Run(cancelled())
				hs.Close()
				return fail(err)
			}
		}
	}
	// Over the barrier the run ends when every worker is done (the
	// counters are read then, as inabox up reads them).
	var counters swctl.Stats
	rctx, end := sn.endPhase(ctx, func() { counters = srv.Snapshot() })
	if *swProfile != "" {
		f, err := os.Create(*swProfile)
		if err != nil {
			proc.Run(cancelled())
			hs.Close()
			return fail(err)
		}
		defer f.Close()
		if err := pprof.StartCPUProfile(f); err != nil {
			proc.Run(cancelled())
			hs.Close()
			return fail(err)
		}
		defer pprof.StopCPUProfile()
	}
	rep, err := proc.Run(rctx)
	sctx, scancel := context.WithTimeout(context.Background(), 2*time.Second)
	hs.Shutdown(sctx)
	scancel()
	out := SwitchReport{Report: rep, Switch: srv.Snapshot(), Node: nodeStats()}
	if err != nil {
		out.Error = err.Error()
	}
	if werr := writeJSON(*report, out); werr != nil && err == nil {
		err = werr
	}
	if end != nil { // the peers' reports, then the run's result
		if rerr := sn.writeResult(prepared, <-end, out, counters, time.Since(zero)); rerr != nil && err == nil {
			err = rerr
		}
	}
	if err != nil {
		fmt.Fprintln(stderr, "inaswitch:", err)
		return 1
	}
	return 0
}

// registrar returns the control API's registration call for node's
// scheduler (a DynaINA control plane), or nil if it has none. The
// registration runs on the run goroutine (emu.Network.Do) once the node has
// started.
func registrar(node emu.Node, net *emu.Network, running *atomic.Bool) func(swctl.Registration) error {
	n, ok := node.(*sw.Node)
	if !ok {
		return nil
	}
	d, ok := n.Control().(*sw.DynaINAControl)
	if !ok {
		return nil
	}
	var mu sync.Mutex
	return func(r swctl.Registration) error {
		if !running.Load() {
			return errors.New("the switch is not running yet")
		}
		mu.Lock()
		defer mu.Unlock()
		var err error
		net.Do(func() { err = d.Register(net.Now(), r.Profile(), r.AllReduces) })
		return err
	}
}

// syncFlags registers --ready and --start: a process that has its ports
// open creates the --ready file, then waits for the --start file, which
// holds the wall-clock time (Unix ns) at which every process of a run
// starts its clock, so their time 0s agree as they do in virtual time.
//
// The function it returns does both and returns the start time (now
// without --start).
func syncFlags(fs *flag.FlagSet) func(ctx context.Context) (time.Time, error) {
	ready := fs.String("ready", "", "file to create once the ports are open")
	start := fs.String("start", "", "file to wait for: the wall-clock start time in Unix ns")
	return func(ctx context.Context) (time.Time, error) {
		if *ready != "" {
			if err := os.WriteFile(*ready, []byte("ready\n"), 0o644); err != nil {
				return time.Time{}, err
			}
		}
		if *start == "" {
			return time.Now(), nil
		}
		tick := time.NewTicker(500 * time.Microsecond)
		defer tick.Stop()
		for {
			b, err := os.ReadFile(*start)
			if err == nil {
				ns, err := strconv.ParseInt(strings.TrimSpace(string(b)), 10, 64)
				if err != nil {
					return time.Time{}, fmt.Errorf("--start %s: %q is not a Unix time in ns", *start, b)
				}
				at := time.Unix(0, ns)
				select {
				case <-time.After(time.Until(at)):
					return at, nil
				case <-ctx.Done():
					return time.Time{}, ctx.Err()
				}
			}
			select {
			case <-tick.C:
			case <-ctx.Done():
				return time.Time{}, fmt.Errorf("stopped while waiting for %s: %w", *start, ctx.Err())
			}
		}
	}
}

// listenControl is swctl.Listen, after removing the unix socket a killed
// process of the same node left behind (a restart after a crash).
func listenControl(addr string) (net.Listener, error) {
	path, isUnix := strings.CutPrefix(addr, "unix:")
	if isUnix || strings.HasPrefix(addr, "/") {
		if fi, err := os.Lstat(path); err == nil && fi.Mode()&os.ModeSocket != 0 {
			os.Remove(path)
		}
	}
	return swctl.Listen(addr)
}

// restartAtFlag registers --restart-at and returns the function that
// waits until it (a process replacing a crashed one is started at the
// crash, builds its node meanwhile and runs from the crash's end).
func restartAtFlag(fs *flag.FlagSet) func() error {
	at := fs.Int64("restart-at", 0, "with --restarted: open the ports and start at this wall-clock instant (Unix ns)")
	return func() error {
		if *at == 0 {
			return nil
		}
		ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
		defer stop()
		select {
		case <-time.After(time.Until(time.Unix(0, *at))):
			return nil
		case <-ctx.Done():
			return errors.New("stopped while waiting for --restart-at")
		}
	}
}

// flap makes the modelled direction (node→backend) of attachment link l
// fail and recover at random as f says (impairments[].flap), from run time
// from to until (emu.Network.Flap).
func flap(net *emu.Network, l *emu.Link, f *scenario.Flap, from, until time.Duration) error {
	return net.Flap(from, until, l, f.MeanUp.D(), f.MeanDown.D(), emu.AtoB)
}

// untilOf is the scenario's time limit (flapping stops there, as in the
// emulator).
func untilOf(prep *run.Prepared) time.Duration {
	if prep == nil {
		return 0
	}
	return prep.Scenario().TimeLimit.D()
}

// ideal is the configuration of a direction another process models: no
// rate, delay or impairment, and the veths' MTU.
var ideal = emu.LinkConfig{MTUBytes: 9000}

// serveControl serves the fault API (and GET /healthz) of a PS or worker
// process on its --control socket ("" = none); the returned function
// shuts it down.
func serveControl(addr string, faults *faultctl.Server) (func(), error) {
	if addr == "" {
		return func() {}, nil
	}
	ln, err := listenControl(addr)
	if err != nil {
		return nil, err
	}
	mux := http.NewServeMux()
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "ok\n") })
	faults.Register(mux)
	hs := &http.Server{Handler: mux, ReadHeaderTimeout: 5 * time.Second}
	hs.RegisterOnShutdown(faults.Stop) // waits end: the shutdown does not wait for them
	go hs.Serve(ln)
	return func() {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		hs.Shutdown(ctx)
		cancel()
	}, nil
}

func flagGiven(fs *flag.FlagSet, name string) bool {
	given := false
	fs.Visit(func(f *flag.Flag) { given = given || f.Name == name })
	return given
}

func cancelled() context.Context {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	return ctx
}

// HostMain is the inahost process: one worker node of a scenario, sending
// and receiving RoCEv2 frames on its own interface (AF_PACKET) inside a
// network namespace, its link to the switch emulated in the process. When
// the worker has finished every iteration it creates the --done file and
// keeps serving its peers (a late PULL) until SIGINT/SIGTERM; it then
// checks each result against the reference sum and writes --report.
func HostMain(args []string, stderr io.Writer) int {
	return peerMain("inahost", "worker", args, stderr, nil)
}

// PSMain is the inaps process: a scenario's parameter server node on its
// own interface in a namespace, until SIGINT/SIGTERM.
func PSMain(args []string, stderr io.Writer) int { return peerMain("inaps", "ps", args, stderr, nil) }

// HostFlagSet and PSFlagSet return HostMain's and PSMain's flags (for help
// texts).
func HostFlagSet() *flag.FlagSet { return peerFlagSet("inahost", "worker") }
func PSFlagSet() *flag.FlagSet   { return peerFlagSet("inaps", "ps") }

func peerFlagSet(cmd, role string) *flag.FlagSet {
	var fs *flag.FlagSet
	peerMain(cmd, role, nil, io.Discard, &fs)
	return fs
}

func peerMain(cmd, role string, args []string, stderr io.Writer, only **flag.FlagSet) int {
	fs := flag.NewFlagSet(cmd, flag.ContinueOnError)
	fs.SetOutput(stderr)
	netns := fs.String("netns", "", "named network namespace of the interface")
	dev := fs.String("dev", "eth0", "interface for RoCEv2 frames")
	backend := fs.String("backend", procnode.BackendPacket, "packet (AF_PACKET on --dev), ring (AF_PACKET rings), xdp (AF_XDP on --dev) or tap (create TAP --dev)")
	xdpOpts := newXDPFlags(fs)
	nodeName := fs.String("node", "", "the scenario's node to run (e.g. w1.0, ps; required)")
	batch := fs.Int("batch", 0, "backend batch (0 = default)")
	pcap := fs.String("pcap", "", "pcap file of the port")
	report := fs.String("report", "", "file to write the final JSON report to (- = one line on stdout)")
	doneFile := fs.String("done", "", "worker: file created once every iteration finished")
	cpuProfile := fs.String("cpuprofile", "", "write a CPU profile of the run to this file")
	control := fs.String("control", "", "fault API address: unix socket path or unix:PATH (docs/processes.md)")
	ckptFile := fs.String("checkpoint", "", "worker: keep a checkpoint in this file, each all-reduce checked as it finishes (--restarted resumes from it)")
	restarted := fs.Bool("restarted", false, "this process replaces one that crashed: its node restarts with its state lost (emu Restart) and continues the clock of the run's --start file")
	waitRestart := restartAtFlag(fs)
	prepare := scenarioFlags(fs)
	pn := peerNetFlags(fs)
	sync := pn.wrapSync(syncFlags(fs), nodeName, netns, restarted)
	if only != nil {
		*only = fs
		return 0
	}
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return 0 // -h: the usage was printed
		}
		return 2
	}
	out := PeerReport{Node: *nodeName, Role: role}
	say := func(err error) { // "inahost w1.0: why", the node named once
		msg := err.Error()
		if !strings.HasPrefix(msg, *nodeName+": ") {
			msg = *nodeName + ": " + msg
		}
		fmt.Fprintf(stderr, "%s %s\n", cmd, msg)
	}
	fail := func(err error) int {
		say(err)
		out.Error = err.Error()
		writeJSON(*report, out)
		return 1
	}
	if *nodeName == "" {
		return fail(errors.New("--node is required"))
	}
	prep, err := prepare()
	if err != nil {
		return fail(err)
	}
	peers, err := prep.Peers()
	if err != nil {
		return fail(err)
	}
	var me *run.Peer
	for i := range peers {
		if peers[i].Node == *nodeName {
			me = &peers[i]
		}
	}
	if me == nil || me.Role != role {
		var names []string
		for _, p := range peers {
			if p.Role == role {
				names = append(names, p.Node)
			}
			if c := p.CoLocated; c != nil && c.PS == *nodeName {
				return fail(fmt.Errorf("--node %q: co-located with worker %s on host %s (topology.ps.placement: co-located): inahost --node %s runs it", *nodeName, p.Node, p.Host, p.Node))
			}
		}
		return fail(fmt.Errorf("--node %q: not a %s of the scenario (its %ss: %s)", *nodeName, role, role, strings.Join(names, ", ")))
	}
	out.Job, out.Rank = me.Job, me.Rank
	node, nports, err := prep.Node(me.Node)
	if err != nil {
		return fail(err)
	}
	// The process's nodes, the one on the link first: the peer's node, or
	// a co-located host's NIC with the worker and the PS behind it.
	onLink, onLinkName, onLinkPorts := node, me.Node, nports
	all := []emu.Node{node}
	var inner []procnode.InnerNode
	var psNode emu.Node = node
	if c := me.CoLocated; c != nil {
		if onLink, onLinkPorts, err = prep.Node(c.NIC); err != nil {
			return fail(err)
		}
		onLinkName, all = c.NIC, []emu.Node{onLink}
		for _, in := range prep.Inside(*me) {
			n, np, err := prep.Node(in.Node)
			if err != nil {
				return fail(err)
			}
			inner = append(inner, procnode.InnerNode{Name: in.Node, Node: n, Ports: np, To: in.NICPort, Link: in.Link})
			all = append(all, n)
			if in.Node == c.PS {
				psNode = n
			}
		}
	}
	*backend, *dev, err = pn.backend(*backend, *dev) // --port: a UDP socket
	if err != nil {
		return fail(err)
	}
	// The host→switch direction carries the scenario's link (the peer's
	// NIC is its transmitter); the switch process models switch→host.
	spec := procnode.Spec{Name: onLinkName, Node: onLink, Ports: onLinkPorts, Inner: inner, Netns: *netns, Seed: prep.Seed(),
		Attach: []procnode.Attachment{{Port: 0, Backend: *backend, Dev: *dev, Batch: *batch, Link: me.ToSwitch, In: &ideal, Pcap: *pcap}}}
	if err := xdpOpts.apply(&spec.Attach[0]); err != nil {
		return fail(err)
	}
	// A node whose transport gave up (an RC queue pair out of retries) can
	// never finish: end the run at once and say why.
	spec.Done = func() bool { return prep.Failed() != nil }
	finished := make(chan struct{})
	// A replacement process has built its node; it runs from the end of
	// the crash (its checkpoint is final: the process it replaces is gone).
	if err := waitRestart(); err != nil {
		return fail(err)
	}
	ck := &checkpointer{file: *ckptFile}
	if role == "worker" && *restarted && ck.file != "" {
		// A worker that lost its state rejoins from its checkpoint, as
		// in the emulator its finished all-reduces are what it keeps.
		if err := ck.restore(prep, me); err != nil {
			return fail(err)
		}
	}
	if *restarted {
		// State lost: the node restarts as the emulator restarts it (emu
		// Restart: Reset, then Start). A policy that cannot re-admit it
		// says so through prep.Failed, naming the node, and the run ends.
		for _, n := range all { // a co-located host's NIC and PS restart with it
			if r, ok := n.(emu.Resetter); ok {
				r.Reset()
			}
		}
		if ck.lost > 0 && prep.Failed() == nil {
			return fail(fmt.Errorf("restarted: policy %s takes no checkpoint, and the worker does not fail on losing its state: it cannot rejoin from its %d finished all-reduces", prep.Policy(), ck.lost))
		}
	}
	if role == "worker" {
		var once bool
		ck.start(prep, me)
		spec.AfterEvent = func() {
			ck.after(prep, me)
			if !once && prep.WorkerDone(me.Job, me.Rank) {
				once = true
				close(finished)
			}
		}
	}
	proc, err := procnode.Open(spec)
	if err != nil {
		return fail(err)
	}
	faults := &faultctl.Server{Run: proc, Table: faultctl.NewTable(faultctl.NetClock{N: proc.Network()},
		faultctl.Direction{Link: me.Host, Node: me.Node, Dir: faultctl.Up, T: faultctl.LinkDir{L: proc.Links()[0], D: emu.AtoB}})}
	if role == "worker" {
		// Faults timed from the workers' progress (faults[].when) wait on
		// it: POST /progress/wait.
		faults.Watcher = faultctl.NewWatcher(faultctl.NetClock{N: proc.Network()})
		faults.Watcher.Restored(ck.ck.Reports)
		prep.Observe(me.Job, me.Rank, faults.Watcher.Step)
		faults.Progress = func() faultctl.Progress {
			ps, _ := proc.Network().PortStats(me.Node, 0)
			return faultctl.Progress{Node: me.Node, Role: role, Job: me.Job, Rank: me.Rank, Finished: prep.Finished(me.Job, me.Rank),
				AllReduces: prep.Plans()[me.Job].AllReduces(), Received: ps.RxPackets, Done: prep.WorkerDone(me.Job, me.Rank)}
		}
	}
	stopControl, err := serveControl(*control, faults)
	if err != nil {
		proc.Run(cancelled())
		return fail(err)
	}
	defer stopControl()
	ctx, stop := signalContext()
	defer stop()
	if *doneFile != "" || *pn.barrier != "" {
		go func() {
			select {
			case <-finished:
				if *doneFile != "" {
					os.WriteFile(*doneFile, []byte("done\n"), 0o644)
				}
				pn.done() // the barrier's end phase: after the file (inabox up's observer)
			case <-ctx.Done():
			}
		}()
	}
	zero, err := sync(ctx)
	if err != nil {
		proc.Run(cancelled())
		return fail(err)
	}
	var from time.Duration
	if *restarted {
		proc.SetZero(zero)
		from = time.Since(zero)
	}
	if me.FlapUp != nil {
		if err := flap(proc.Network(), proc.Links()[0], me.FlapUp, from, untilOf(prep)); err != nil {
			proc.Run(cancelled())
			return fail(err)
		}
	}
	if *cpuProfile != "" {
		f, err := os.Create(*cpuProfile)
		if err != nil {
			return fail(err)
		}
		defer f.Close()
		if err := pprof.StartCPUProfile(f); err != nil {
			return fail(err)
		}
		defer pprof.StopCPUProfile()
	}
	out.StartUnixNano = time.Now().UnixNano()
	if *restarted {
		out.StartUnixNano = zero.UnixNano() // the clock it continues
	}
	rctx, barrierErr := pn.runContext(ctx) // the barrier's stop ends the run as SIGTERM does
	rep, err := proc.Run(rctx)
	if berr := barrierErr(); berr != nil && err == nil {
		err = berr
	}
	out.Report = rep
	if ferr := prep.Failed(); ferr != nil && err == nil {
		err = ferr
	}
	switch role {
	case "worker":
		out.Done = prep.WorkerDone(me.Job, me.Rank)
		if ck.file != "" {
			out.Iterations = ck.wait() // checked as each finished
		} else {
			out.Iterations = prep.CheckWorker(me.Job, me.Rank)
		}
		if err == nil && !out.Done {
			err = fmt.Errorf("stopped after %d of %d all-reduces", len(out.Iterations), prep.Plans()[me.Job].AllReduces())
		}
	}
	for { // under its CPU model (topology.costs)
		w, ok := psNode.(interface{ Inner() emu.Node })
		if !ok {
			break
		}
		psNode = w.Inner()
	}
	if ps, ok := psNode.(*host.PS); ok && (role == "ps" || me.CoLocated != nil) {
		st := ps.Stats()
		out.PS = &st
	}
	if err != nil {
		out.Error = err.Error()
	}
	if werr := writeJSON(*report, out); werr != nil && err == nil {
		err = werr
	}
	if berr := pn.report(out); berr != nil && err == nil {
		err = berr
	}
	if err != nil {
		say(err)
		return 1
	}
	return 0
}

// Checkpoint is a worker's checkpoint (--checkpoint): the all-reduces it
// has finished, each with its report and its check against the reference
// sum, written as each finishes. A process restarted after a crash that
// lost the worker's state resumes from it, as a training framework
// restarts a worker from its last finished iteration (and as the
// emulator's Restart keeps a worker's finished all-reduces).
type Checkpoint struct {
	Node       string               `json:"node"`
	Reports    []host.Report        `json:"reports"`
	Iterations []run.IterationCheck `json:"iterations"`
}

// checkpointer keeps a worker's checkpoint: the run goroutine hands it
// each all-reduce as it finishes (after), a goroutine of its own checks it
// against the reference and writes the file. Off without a file.
type checkpointer struct {
	file string
	ck   Checkpoint
	seen int // all-reduces handed over (restored ones included)
	lost int // finished all-reduces of a checkpoint the policy cannot take
	ch   chan finishedAR
	done chan struct{}
}

type finishedAR struct {
	k   int
	res []int32
	rep host.Report
}

// restore reads the checkpoint, if any, and puts the worker where it left
// it (run.Prepared.RestoreWorker).
func (c *checkpointer) restore(prep *run.Prepared, me *run.Peer) error {
	b, err := os.ReadFile(c.file)
	if errors.Is(err, os.ErrNotExist) {
		return nil // it had finished nothing
	}
	if err == nil {
		err = json.Unmarshal(b, &c.ck)
	}
	if err != nil {
		return fmt.Errorf("--checkpoint %s: %w", c.file, err)
	}
	ok, err := prep.RestoreWorker(me.Job, me.Rank, c.ck.Reports)
	if err != nil {
		return err
	}
	if !ok {
		c.lost, c.ck = len(c.ck.Reports), Checkpoint{}
		return nil
	}
	c.seen = len(c.ck.Reports)
	return nil
}

func (c *checkpointer) start(prep *run.Prepared, me *run.Peer) {
	if c.file == "" {
		return
	}
	c.ck.Node = me.Node
	c.ch = make(chan finishedAR, prep.Plans()[me.Job].AllReduces()+1) // never blocks the run goroutine
	c.done = make(chan struct{})
	go func() {
		defer close(c.done)
		for f := range c.ch {
			it := prep.Check(me.Job, f.k, f.res)
			it.Start, it.End = f.rep.Start, f.rep.End
			c.ck.Reports = append(c.ck.Reports, f.rep)
			c.ck.Iterations = append(c.ck.Iterations, it)
			writeJSON(c.file, c.ck)
		}
	}()
}

// after runs on the run goroutine after every event.
func (c *checkpointer) after(prep *run.Prepared, me *run.Peer) {
	if c.ch == nil {
		return
	}
	for n := prep.Finished(me.Job, me.Rank); c.seen < n; c.seen++ {
		res, rep, _ := prep.Result(me.Job, me.Rank, c.seen)
		c.ch <- finishedAR{c.seen, res, rep}
	}
}

// wait ends the checkpointing (the run has ended) and returns every
// all-reduce's check.
func (c *checkpointer) wait() []run.IterationCheck {
	if c.ch == nil {
		return nil
	}
	close(c.ch)
	<-c.done
	return c.ck.Iterations
}
