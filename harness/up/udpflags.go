package up

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"net"
	"os"
	"os/signal"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/inabox/inabox/emu"
	"github.com/inabox/inabox/harness/run"
	"github.com/inabox/inabox/harness/up/swctl"
	"github.com/inabox/inabox/internal/procnode"
)

// The roles' flags for nodes on several machines (docs/processes.md,
// "Across machines (UDP)"): emulated ports carried in UDP (--port), host
// names resolved with retries (--resolve-timeout), and the network start
// barrier (--barrier-listen/--barrier-peers on the switch, --barrier on a
// peer).

// DefaultResolveTimeout bounds how long a role retries a host name (a
// --port's remote, a --barrier's host) and connecting to the barrier.
const DefaultResolveTimeout = 60 * time.Second

// DefaultBarrierTimeout bounds a role's wait at the start barrier.
const DefaultBarrierTimeout = 10 * time.Minute

// udpSpecFlag parses a --port value: emu's port spec, UDP only.
func udpSpecFlag(flagName, v string) (emu.PortSpec, error) {
	spec, err := emu.ParsePortSpec(v)
	if err != nil {
		return spec, fmt.Errorf("%s %s: %w", flagName, v, err)
	}
	if spec.Backend != "udp" {
		return spec, fmt.Errorf("%s %s: want udp:LOCAL->REMOTE (e.g. udp:0.0.0.0:7000->inabox-switch:7003)", flagName, v)
	}
	return spec, nil
}

// resolveSpec looks the spec's remote host name up, every 100 ms until it
// resolves or timeout passes, and returns the attachment's Dev
// (LOCAL->REMOTE, literal addresses).
func resolveSpec(ctx context.Context, flagName string, spec emu.PortSpec, timeout time.Duration) (string, error) {
	deadline := time.Now().Add(timeout)
	for {
		r, err := spec.Resolve()
		if err == nil {
			return r.Local.String() + "->" + r.Remote.String(), nil
		}
		if time.Now().After(deadline) {
			return "", fmt.Errorf("%s %s: host %s did not resolve within --resolve-timeout %v: %w", flagName, spec, spec.RemoteHost, timeout, err)
		}
		select {
		case <-time.After(100 * time.Millisecond):
		case <-ctx.Done():
			return "", fmt.Errorf("%s %s: stopped while resolving %s", flagName, spec, spec.RemoteHost)
		}
	}
}

// signalsCtx ends on SIGINT/SIGTERM (before the run's own signal context
// exists).
func signalsCtx() (context.Context, context.CancelFunc) {
	return signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
}

// peerNet is a PS's or worker's --port, --resolve-timeout and --barrier.
type peerNet struct {
	fs             *flag.FlagSet
	port           *string
	resolveTimeout *time.Duration
	barrier        *string
	barrierTimeout *time.Duration
	rejoin         *time.Duration
	bp             *BarrierPeer // the barrier's connection after the start: the end phase
}

func peerNetFlags(fs *flag.FlagSet) *peerNet {
	return &peerNet{fs: fs,
		port:           fs.String("port", "", "the node's port carried in UDP instead of --backend/--dev: udp:LOCAL->REMOTE, e.g. udp:0.0.0.0:7000->inabox-switch:7003 (REMOTE: the switch's socket for this node's switch port; a host name is resolved, retried until --resolve-timeout)"),
		resolveTimeout: fs.Duration("resolve-timeout", DefaultResolveTimeout, "how long to retry resolving host names (--port, --barrier) and connecting to --barrier"),
		barrier:        fs.String("barrier", "", "start barrier HOST:PORT (the switch's --barrier-listen): start the clock when the switch says, instead of --start"),
		barrierTimeout: fs.Duration("barrier-timeout", DefaultBarrierTimeout, "how long to wait at --barrier for the start once connected"),
		rejoin:         fs.Duration("barrier-rejoin", 0, "if the --barrier connection breaks before the run's end (the switch crashed), retry rejoining a switch that replaces it this long before ending with the error (0: at once)"),
	}
}

// backend returns the attachment's backend and device: --backend and --dev
// as given, or with --port the UDP socket it names (its remote resolved).
func (n *peerNet) backend(backend, dev string) (string, string, error) {
	if *n.port == "" {
		return backend, dev, nil
	}
	if flagGiven(n.fs, "backend") || flagGiven(n.fs, "dev") {
		return "", "", errors.New("--port replaces --backend and --dev: give one or the other")
	}
	spec, err := udpSpecFlag("--port", *n.port)
	if err != nil {
		return "", "", err
	}
	ctx, stop := signalsCtx()
	defer stop()
	d, err := resolveSpec(ctx, "--port", spec, *n.resolveTimeout)
	if err != nil {
		return "", "", err
	}
	return procnode.BackendUDP, d, nil
}

// wrapSync returns the process's start: the --ready/--start files (sync),
// or with --barrier the network barrier (the --ready file, if given, is
// still created). node names the peer at the barrier; netns is the
// namespace to connect from. With --barrier the connection stays open for
// the end phase (runContext, done, report). A process that replaces a
// crashed one (--restarted) continues the clock of the --start file and
// rejoins the barrier for the end.
func (n *peerNet) wrapSync(sync func(context.Context) (time.Time, error), node, netns *string, restarted *bool) func(context.Context) (time.Time, error) {
	return func(ctx context.Context) (time.Time, error) {
		if *n.barrier == "" {
			return sync(ctx)
		}
		rejoin := flagGiven(n.fs, "start")
		if rejoin && !*restarted {
			return time.Time{}, errors.New("--barrier and --start: give one or the other (both only with --restarted: the clock is the start file's, the barrier is rejoined for the end)")
		}
		zero, err := sync(ctx) // the --ready file; with --restarted the start file's clock
		if err != nil {
			return time.Time{}, err
		}
		c := BarrierClient{Addr: *n.barrier, Name: *node, Rejoin: rejoin, RejoinWithin: *n.rejoin,
			ConnectTimeout: *n.resolveTimeout, WaitTimeout: *n.barrierTimeout, Dial: dialIn(*netns)}
		bp, z, err := c.Join(ctx)
		if err != nil {
			return time.Time{}, fmt.Errorf("--barrier %s: %w", *n.barrier, err)
		}
		n.bp = bp
		if rejoin {
			return zero, nil
		}
		return z, sleepUntil(ctx, z)
	}
}

// runContext is ctx, ended also by the barrier's end (a stop, an abort,
// the connection breaking); its function returns why the barrier ended
// the run (nil: a stop, or no barrier).
func (n *peerNet) runContext(ctx context.Context) (context.Context, func() error) {
	if n.bp == nil {
		return ctx, func() error { return nil }
	}
	rctx, cancel := context.WithCancel(ctx)
	go func() {
		select {
		case <-n.bp.End():
			cancel()
		case <-rctx.Done():
		}
	}()
	return rctx, n.bp.Err
}

// done tells the barrier this worker is done (nothing without one).
func (n *peerNet) done() {
	if n.bp != nil {
		n.bp.Done()
	}
}

// report sends the final report to the barrier (nothing without one).
func (n *peerNet) report(v any) error {
	if n.bp == nil {
		return nil
	}
	return n.bp.Report(v)
}

// dialIn dials TCP from a namespace ("" = the process's own).
func dialIn(ns string) func(context.Context, string) (net.Conn, error) {
	return func(ctx context.Context, addr string) (net.Conn, error) {
		var c net.Conn
		err := procnode.InNetns(ns, func() error {
			var d net.Dialer
			var err error
			c, err = d.DialContext(ctx, "tcp4", addr) // a literal: one socket, on this thread
			return err
		})
		return c, err
	}
}

// portSpecs is the switch's --port K=SPEC, repeatable.
type portSpecs map[int]emu.PortSpec

func (p portSpecs) String() string {
	var ks []int
	for k := range p {
		ks = append(ks, k)
	}
	slices.Sort(ks)
	var out []string
	for _, k := range ks {
		out = append(out, strconv.Itoa(k)+"="+p[k].String())
	}
	return strings.Join(out, " ")
}

func (p portSpecs) Set(v string) error {
	ks, s, ok := strings.Cut(v, "=")
	k, err := strconv.Atoi(ks)
	if !ok || err != nil || k < 0 {
		return fmt.Errorf("%q: want K=udp:LOCAL->REMOTE, K the switch port (0, 1, ...)", v)
	}
	if _, dup := p[k]; dup {
		return fmt.Errorf("switch port %d given twice", k)
	}
	spec, err := udpSpecFlag("port "+ks, s)
	if err != nil {
		return err
	}
	p[k] = spec
	return nil
}

// switchNet is the switch's --port K=SPEC, --resolve-timeout and the
// barrier's server flags.
type switchNet struct {
	fs             *flag.FlagSet
	ln             net.Listener // the barrier's, opened early (openBarrier)
	ports          portSpecs
	resolveTimeout *time.Duration
	listen         *string
	peers          *int
	delay          *time.Duration
	barrierTimeout *time.Duration
	lostTimeout    *time.Duration
	result         *string
	// workers are the peers whose done ends the run (the scenario's
	// workers; none: every peer), peers all of them (a restarted switch
	// waits for them to rejoin); run is the barrier once started.
	workers, peerNames []string
	restarted          *bool
	run                *BarrierRun
}

func switchNetFlags(fs *flag.FlagSet) *switchNet {
	n := &switchNet{fs: fs, ports: portSpecs{}}
	fs.Var(n.ports, "port", "switch port K carried in UDP, instead of --taps: K=udp:LOCAL->REMOTE (e.g. 3=udp:0.0.0.0:7003->inabox-w1-2:7000; REMOTE the node's socket); once per port")
	n.resolveTimeout = fs.Duration("resolve-timeout", DefaultResolveTimeout, "how long to retry resolving the --port remotes' host names")
	n.listen = fs.String("barrier-listen", "", "start barrier: listen on this TCP address (e.g. :7100) for --barrier-peers peers, then start every clock together, instead of --start")
	n.peers = fs.Int("barrier-peers", 0, "how many peers (PSs and workers) must be ready at --barrier-listen")
	n.delay = fs.Duration("barrier-delay", DefaultBarrierDelay, "the start delay the barrier sends: every process starts that long after the start message")
	n.barrierTimeout = fs.Duration("barrier-timeout", DefaultBarrierTimeout, "how long to wait for the --barrier-peers")
	n.lostTimeout = fs.Duration("barrier-lost-timeout", DefaultBarrierLostTimeout, "the end phase: how long to wait for a peer whose barrier connection ended before its report (it crashed) to rejoin before aborting the run")
	n.result = fs.String("result", "", "with --barrier-listen and --scenario: write the run's combined result (inabox up's JSON Result: every job's JCT, every worker's all-reduces checked, lateness), built from the reports every peer sends at the barrier's end, to this file (- = one line on stdout)")
	return n
}

// devices returns the switch's attachments' backend and devices, one per
// port: the TAPs (names), or with --port the UDP sockets (remotes
// resolved). Every port must be given once.
func (n *switchNet) devices(names []string, tapsGiven bool) (string, []string, error) {
	if len(n.ports) == 0 {
		return procnode.BackendTAP, names, nil
	}
	if tapsGiven {
		return "", nil, errors.New("--port replaces --taps: give one or the other")
	}
	var errs []error
	for k := range n.ports {
		if k >= len(names) {
			errs = append(errs, fmt.Errorf("--port %d: the switch has %d ports (0 to %d)", k, len(names), len(names)-1))
		}
	}
	for k := range names {
		if _, ok := n.ports[k]; !ok {
			errs = append(errs, fmt.Errorf("--port: switch port %d is missing (the switch has %d ports: give --port K=udp:LOCAL->REMOTE for each)", k, len(names)))
		}
	}
	if len(errs) > 0 {
		return "", nil, errors.Join(errs...)
	}
	ctx, stop := signalsCtx()
	defer stop()
	devs := make([]string, len(names))
	for k := range names {
		d, err := resolveSpec(ctx, "--port "+strconv.Itoa(k), n.ports[k], *n.resolveTimeout)
		if err != nil {
			return "", nil, err
		}
		devs[k] = d
	}
	return procnode.BackendUDP, devs, nil
}

// openBarrier opens the barrier's listener (with --barrier-listen; in netns)
// as soon as the flags are parsed, before the scenario is prepared and
// the ports' names resolved: peers that connect meanwhile wait in the
// listen backlog instead of retrying against a closed port, and the
// barrier still starts no clock before the switch's ports are open.
func (n *switchNet) openBarrier(netns string) error {
	if *n.listen == "" {
		if flagGiven(n.fs, "barrier-peers") {
			return errors.New("--barrier-peers without --barrier-listen")
		}
		if *n.result != "" {
			return errors.New("--result without --barrier-listen (the result is built from the reports the peers send at the barrier's end)")
		}
		return nil
	}
	if *n.result != "" && !flagGiven(n.fs, "scenario") {
		return errors.New("--result needs --scenario")
	}
	if flagGiven(n.fs, "start") && !*n.restarted {
		return errors.New("--barrier-listen and --start: give one or the other (both only with --restarted: the clock is the start file's, the peers rejoin for the end)")
	}
	if *n.peers < 1 {
		return errors.New("--barrier-listen needs --barrier-peers N ≥ 1 (the PSs and workers)")
	}
	err := procnode.InNetns(netns, func() error {
		var err error
		n.ln, err = net.Listen("tcp", *n.listen)
		return err
	})
	if err != nil {
		return fmt.Errorf("--barrier-listen %s: %w", *n.listen, err)
	}
	return nil
}

// wrapSync returns the switch's start: the --ready/--start files, or with
// --barrier-listen the network barrier (on the listener openBarrier opened).
func (n *switchNet) wrapSync(sync func(context.Context) (time.Time, error), logf func(string, ...any)) func(context.Context) (time.Time, error) {
	return func(ctx context.Context) (time.Time, error) {
		if n.ln == nil {
			return sync(ctx)
		}
		zero, err := sync(ctx) // the --ready file; restarted, the start file's clock
		if err != nil {
			return time.Time{}, err
		}
		ln := n.ln
		// The listener lives as long as the process: late peers are told
		// the run has started.
		b := &Barrier{Peers: *n.peers, Delay: *n.delay, Timeout: *n.barrierTimeout, Logf: logf, Workers: n.workers, LostTimeout: *n.lostTimeout}
		if *n.restarted && flagGiven(n.fs, "start") {
			// A switch that replaces a crashed one: the run has started;
			// the peers rejoin (--barrier-rejoin) for its end.
			if len(n.peerNames) == 0 {
				return time.Time{}, errors.New("--restarted with --barrier-listen needs --scenario (the peers to wait for)")
			}
			n.run = b.Resume(ctx, ln, n.peerNames)
			return zero, nil
		}
		run, zero, err := b.Start(ctx, ln)
		if err != nil {
			return time.Time{}, fmt.Errorf("--barrier-listen %s: %w", *n.listen, err)
		}
		n.run = run
		return zero, sleepUntil(ctx, zero)
	}
}

// barrierEnd is the outcome of the barrier's end phase.
type barrierEnd struct {
	reports map[string]json.RawMessage
	err     error
}

// endPhase runs the barrier's end phase (once it has started): the
// context it returns ends when every worker is done (or the run is
// aborted), after onStop ran; the channel gets the peers' reports once
// they have all come. Without a barrier: ctx, and a nil channel.
func (n *switchNet) endPhase(ctx context.Context, onStop func()) (context.Context, <-chan barrierEnd) {
	if n.run == nil {
		return ctx, nil
	}
	rctx, cancel := context.WithCancel(ctx)
	ch := make(chan barrierEnd, 1)
	go func() {
		reps, err := n.run.End(ctx, func(error) {
			onStop()
			cancel()
		})
		cancel()
		ch <- barrierEnd{reps, err}
	}()
	return rctx, ch
}

// writeResult builds the run's combined result from the switch's report
// and the peers' (buildResult, as inabox up builds its own) and writes it
// to --result; the error is the end phase's, or a worker's that does not
// hold the reference sum.
func (n *switchNet) writeResult(prep *run.Prepared, end barrierEnd, sw SwitchReport, counters swctl.Stats, elapsed time.Duration) error {
	if *n.result == "" || prep == nil {
		return end.err
	}
	res := Result{Scenario: prep.Scenario().Name, Policy: prep.Policy(), Seed: prep.Seed(), Elapsed: Seconds(elapsed), Counters: counters}
	rp := reports{Switch: sw, Peers: map[string]PeerReport{}, Tolerance: defaultLateTolerance}
	var errs []error
	if end.err != nil {
		errs = append(errs, end.err)
	}
	for name, raw := range end.reports {
		var pr PeerReport
		if err := json.Unmarshal(raw, &pr); err != nil {
			errs = append(errs, fmt.Errorf("barrier: %s's report: %w", name, err))
			continue
		}
		rp.Peers[name] = pr
		if pr.Error != "" {
			res.Warnings = append(res.Warnings, name+": "+pr.Error)
		}
	}
	buildResult(prep, rp, nil, &res)
	if err := res.checkExact(prep); err != nil {
		errs = append(errs, err)
	}
	for _, e := range errs {
		res.Warnings = append(res.Warnings, e.Error())
	}
	if err := writeJSON(*n.result, res); err != nil {
		errs = append(errs, fmt.Errorf("--result %s: %w", *n.result, err))
	}
	return errors.Join(errs...)
}
