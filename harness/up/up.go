// Package up is `inabox up`: it runs a scenario as real processes over TAP
// devices and AF_PACKET sockets in network namespaces it creates, on the
// same state machines as the virtual-time emulator.
//
//	inabox-sw-ID namespace                         inabox-hK-ID namespace
//	┌───────────────────────────────────┐          ┌─────────────────────┐
//	│ inaswitch ══ TAP swK ─ bridge brK ─ vK ══veth══ eth0 ══ inahost K   │
//	│   (sw.Node, RunRealtime)          │          │ (AF_PACKET, agg.Worker)
//	└───────────────────────────────────┘          └─────────────────────┘
//
// One port per worker and one for the PS (namespace inabox-ps-ID). The
// switch process owns its TAPs (they vanish with it); Up owns the
// namespaces, bridges and veth pairs and removes all of them — on success,
// on error, on Ctrl-C and when a process dies. See docs/processes.md.
package up

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/vishvananda/netlink"
	"github.com/vishvananda/netns"
	"go.yaml.in/yaml/v3"

	"inabox/harness/up/agg"
	"inabox/harness/up/swctl"
	"inabox/internal/procnode"
)

// LinkSpec is the emulated link between a host and its switch port. It is
// applied in the host process (both directions), so each link is modelled
// exactly once.
type LinkSpec struct {
	BitsPerSecond float64       `yaml:"bits_per_second" json:"bits_per_second"`
	Delay         time.Duration `yaml:"delay" json:"delay"`
	QueuePackets  int           `yaml:"queue_packets" json:"queue_packets"`
}

// Config is a scenario for Up (the YAML file of `inabox up`).
type Config struct {
	Workers   int    `yaml:"workers"`
	Job       uint16 `yaml:"job"`
	AllReduce uint16 `yaml:"allreduce"`
	// TensorBytes is the all-reduced tensor's size (int32 elements ×4).
	TensorBytes int           `yaml:"tensor_bytes"`
	PerPacket   int           `yaml:"per_packet"` // values per packet
	Window      int           `yaml:"window"`     // chunks in flight per worker
	RTO         time.Duration `yaml:"rto"`
	Policy      string        `yaml:"policy"` // static, hashed, preemptive
	Seed        uint64        `yaml:"seed"`
	Link        LinkSpec      `yaml:"link"`
	// SwitchSlots and PassTime configure the switch (0: defaults).
	SwitchSlots int           `yaml:"switch_slots"`
	PassTime    time.Duration `yaml:"pass_time"`
	// Batch is the backend batch size of every process (0: defaults).
	Batch int `yaml:"batch"`
	// PcapDir, if set, receives one pcap per switch TAP (swK.pcap).
	PcapDir string `yaml:"pcap_dir"`
	// Timeout bounds the whole run (default 2 minutes).
	Timeout time.Duration `yaml:"timeout"`
	// LateTolerance: a process whose events ran later than this did not
	// keep up with real time (default 100 µs).
	LateTolerance time.Duration `yaml:"late_tolerance"`
	// KeepWorkDir keeps the directory with reports and sockets.
	KeepWorkDir bool `yaml:"keep_work_dir"`

	// Command builds the command for a role ("switch", "host", "ps");
	// the default runs inaswitch, inahost or inaps found next to the
	// running executable or in $PATH.
	Command func(role string, args []string) *exec.Cmd `yaml:"-"`
	// OnRunning, if set, is called once every process has started, with
	// their pids by name (switch, ps, worker0, ...). For tests.
	OnRunning func(pids map[string]int) `yaml:"-"`
}

// DefaultConfig is the default scenario: 4 workers, one job, a 16 MB tensor.
var DefaultConfig = Config{Workers: 4, Job: 1, AllReduce: 1, TensorBytes: 16 << 20, PerPacket: 256, Window: 128,
	RTO: 20 * time.Millisecond, Policy: "static", Seed: 1,
	Link: LinkSpec{BitsPerSecond: 10e9, Delay: 5 * time.Microsecond}}

// LoadConfig reads a scenario file; fields it does not set keep
// DefaultConfig's values.
func LoadConfig(path string) (Config, error) {
	c := DefaultConfig
	b, err := os.ReadFile(path)
	if err != nil {
		return c, err
	}
	dec := yaml.NewDecoder(bytes.NewReader(b))
	dec.KnownFields(true)
	if err := dec.Decode(&c); err != nil && !errors.Is(err, io.EOF) {
		return c, fmt.Errorf("up: %s: %w", path, err)
	}
	return c, nil
}

func (c *Config) check() error {
	d := DefaultConfig
	if c.Workers == 0 {
		c.Workers = d.Workers
	}
	if c.Job == 0 {
		c.Job = d.Job
	}
	if c.AllReduce == 0 {
		c.AllReduce = d.AllReduce
	}
	if c.TensorBytes == 0 {
		c.TensorBytes = d.TensorBytes
	}
	if c.PerPacket == 0 {
		c.PerPacket = d.PerPacket
	}
	if c.Window == 0 {
		c.Window = d.Window
	}
	if c.RTO == 0 {
		c.RTO = d.RTO
	}
	if c.Policy == "" {
		c.Policy = d.Policy
	}
	if c.Timeout == 0 {
		c.Timeout = 2 * time.Minute
	}
	if c.LateTolerance == 0 {
		c.LateTolerance = 100 * time.Microsecond
	}
	switch {
	case c.Workers < 1 || c.Workers > 32:
		return fmt.Errorf("up: workers = %d: must be in [1, 32]", c.Workers)
	case c.TensorBytes%4 != 0 || c.TensorBytes < 4:
		return fmt.Errorf("up: tensor_bytes = %d: must be a positive multiple of 4", c.TensorBytes)
	case c.PerPacket < 1 || c.PerPacket > 1024:
		return fmt.Errorf("up: per_packet = %d: must be in [1, 1024]", c.PerPacket)
	}
	if _, ok := swctl.PolicyByName[c.Policy]; !ok {
		return fmt.Errorf("up: policy = %q: want static, hashed or preemptive", c.Policy)
	}
	l := c.layout()
	if c.Policy == "static" && c.Window > l.Aggregators()/2 {
		return fmt.Errorf("up: window = %d: the static policy needs at most half of the %d aggregators in flight", c.Window, l.Aggregators())
	}
	return nil
}

func (c *Config) layout() agg.Layout {
	return agg.Layout{Job: c.Job, Workers: c.Workers, PerPacket: c.PerPacket, Window: c.Window,
		Policy: swctl.PolicyByName[c.Policy], Slots: c.SwitchSlots}
}

// ProcResult is one process's outcome.
type ProcResult struct {
	Name    string        `json:"name"`
	Pid     int           `json:"pid"`
	Elapsed time.Duration `json:"elapsed_ns"`
	// MaxLate and Late come from emu.RealtimeStats: how late the process
	// ran its events. KeptUp is MaxLate ≤ Config.LateTolerance.
	MaxLate time.Duration `json:"max_late_ns"`
	Late    uint64        `json:"late"`
	Events  uint64        `json:"events"`
	KeptUp  bool          `json:"kept_up"`
}

// WorkerResult is one worker's outcome.
type WorkerResult struct {
	ProcResult
	Stats agg.WorkerStats `json:"stats"`
	// Exact reports that every element equals the reference sum;
	// Mismatches counts those that do not.
	Exact      bool `json:"exact"`
	Mismatches int  `json:"mismatches"`
	// Gbps is the worker's tensor bytes over its all-reduce time.
	Gbps float64 `json:"gbps"`
}

// Result is what Up measured.
type Result struct {
	ID      string         `json:"id"`
	Elapsed time.Duration  `json:"elapsed_ns"`
	Workers []WorkerResult `json:"workers"`
	Switch  ProcResult     `json:"switch"`
	PS      ProcResult     `json:"ps"`
	// Counters are the switch's, read through its control API when the
	// workers finished; SwitchReport and PSReport are the processes' final
	// reports.
	Counters     swctl.Stats  `json:"counters"`
	SwitchReport SwitchReport `json:"switch_report"`
	PSReport     PSReport     `json:"ps_report"`
	// KeptUp is false if any process fell behind real time; Warnings say
	// which and by how much (link rates and delays did not hold then).
	KeptUp   bool     `json:"kept_up"`
	Warnings []string `json:"warnings,omitempty"`
	// Namespaces lists the namespaces the run created (all removed).
	Namespaces []string `json:"namespaces"`
}

type proc struct {
	name, role string
	cmd        *exec.Cmd
	done       chan struct{}
	err        error
	report     string
	tail       *tailWriter
}

type device struct{ ns, name string }

type run struct {
	cfg     Config
	id      string
	dir     string
	ownDir  bool
	stderr  io.Writer
	nsNames []string
	devices []device
	procs   []*proc
	exits   chan *proc
}

// NamePrefix starts the name of every namespace Up creates.
const NamePrefix = "inabox-"

// Up runs the scenario: it creates the namespaces and links, starts the
// switch, the PS and the workers, waits for every worker's all-reduce,
// gathers results and counters and removes everything it made. It returns an
// error naming the process if one dies, and stops on ctx, SIGINT or SIGTERM.
// Progress and the processes' output go to stderr; stdout gets a summary.
func Up(ctx context.Context, cfg Config, stdout, stderr io.Writer) (res Result, err error) {
	if err := cfg.check(); err != nil {
		return res, err
	}
	if cfg.Command == nil {
		cfg.Command = defaultCommand
	}
	if stderr == nil {
		stderr = io.Discard
	}
	ctx, stop := signal.NotifyContext(ctx, os.Interrupt, syscall.SIGTERM)
	defer stop()
	ctx, cancel := context.WithTimeout(ctx, cfg.Timeout)
	defer cancel()
	var idb [4]byte
	rand.Read(idb[:])
	r := &run{cfg: cfg, id: hex.EncodeToString(idb[:]), stderr: stderr, exits: make(chan *proc, 64)}
	res.ID = r.id
	defer func() {
		if cerr := r.cleanup(); cerr != nil {
			err = errors.Join(err, cerr)
		}
		res.Namespaces = r.nsNames
	}()
	start := time.Now()
	if err := r.setup(); err != nil {
		return res, err
	}
	if err := r.runAll(ctx, &res); err != nil {
		return res, err
	}
	res.Elapsed = time.Since(start)
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

func (r *run) swNS() string        { return NamePrefix + "sw-" + r.id }
func (r *run) psNS() string        { return NamePrefix + "ps-" + r.id }
func (r *run) hostNS(w int) string { return NamePrefix + "h" + strconv.Itoa(w) + "-" + r.id }

// portNS returns the namespace at the far end of switch port p.
func (r *run) portNS(p int) string {
	if p == r.cfg.Workers {
		return r.psNS()
	}
	return r.hostNS(p)
}

func (r *run) logf(format string, a ...any) {
	fmt.Fprintf(r.stderr, "inabox up %s: "+format+"\n", append([]any{r.id}, a...)...)
}

// setup creates the work directory, the namespaces, and per switch port a
// bridge and a veth pair whose far end is eth0 in the host's namespace.
func (r *run) setup() error {
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
	ports := r.cfg.Workers + 1
	names := []string{r.swNS()}
	for p := 0; p < ports; p++ {
		names = append(names, r.portNS(p))
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
	swh, err := handleAt(r.swNS())
	if err != nil {
		return err
	}
	defer swh.Close()
	for p := 0; p < ports; p++ {
		fns, err := netns.GetFromName(r.portNS(p))
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
		hh, err := handleAt(r.portNS(p))
		if err != nil {
			return err
		}
		err = setUp(hh, "eth0", 9000)
		hh.Close()
		if err != nil {
			return fmt.Errorf("up: eth0 in %s: %w", r.portNS(p), err)
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

func (r *run) start(name, role string, args []string) (*proc, error) {
	p := &proc{name: name, role: role, done: make(chan struct{}), report: filepath.Join(r.dir, name+".json")}
	args = append(args, "--report", p.report)
	p.cmd = r.cfg.Command(role, args)
	p.cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL, Setpgid: true}
	p.tail = &tailWriter{w: r.stderr, prefix: "[" + name + "] "}
	p.cmd.Stdout, p.cmd.Stderr = p.tail, p.tail
	if err := p.cmd.Start(); err != nil {
		return nil, fmt.Errorf("up: starting %s: %w", name, err)
	}
	r.procs = append(r.procs, p)
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

func (r *run) runAll(ctx context.Context, res *Result) error {
	cfg := r.cfg
	l := cfg.layout()
	ports := l.Ports()
	// 1. The switch, with one TAP per port.
	ctl := "unix:" + filepath.Join(r.dir, "sw.sock")
	var taps []string
	for p := 0; p < ports; p++ {
		taps = append(taps, "sw"+strconv.Itoa(p))
	}
	swArgs := []string{"--netns", r.swNS(), "--ports", strconv.Itoa(ports), "--taps", strings.Join(taps, ","),
		"--control", ctl, "--slots", strconv.Itoa(cfg.SwitchSlots), "--pass-time", cfg.PassTime.String(), "--batch", strconv.Itoa(cfg.Batch)}
	if cfg.PcapDir != "" {
		swArgs = append(swArgs, "--pcap", cfg.PcapDir)
	}
	swp, err := r.start("switch", "switch", swArgs)
	if err != nil {
		return err
	}
	client := swctl.NewClient(ctl)
	hctx, hcancel := context.WithTimeout(ctx, 20*time.Second)
	herr := make(chan error, 1)
	go func() { herr <- client.WaitHealthy(hctx) }()
	select {
	case err = <-herr:
	case <-swp.done:
		err = swp.died()
	}
	hcancel()
	if err != nil {
		if isDone(swp) {
			return swp.died()
		}
		return fmt.Errorf("up: switch control API: %w", err)
	}
	// 2. Join each TAP to its port's bridge, then program the switch.
	swh, err := handleAt(r.swNS())
	if err != nil {
		return err
	}
	for p, t := range taps {
		tl, err := swh.LinkByName(t)
		if err == nil {
			var bl netlink.Link
			if bl, err = swh.LinkByName("br" + strconv.Itoa(p)); err == nil {
				if err = swh.LinkSetMulticastOff(tl); err == nil {
					err = swh.LinkSetMaster(tl, bl)
				}
			}
		}
		if err != nil {
			swh.Close()
			return fmt.Errorf("up: joining %s to br%d: %w", t, p, err)
		}
	}
	swh.Close()
	if err := client.Configure(ctx, l.SwitchConfig()); err != nil {
		return err
	}
	// 3. The PS and the workers.
	link := []string{"--rate", strconv.FormatFloat(cfg.Link.BitsPerSecond, 'g', -1, 64), "--delay", cfg.Link.Delay.String(),
		"--queue", strconv.Itoa(cfg.Link.QueuePackets), "--batch", strconv.Itoa(cfg.Batch)}
	psp, err := r.start("ps", "ps", append([]string{"--netns", r.psNS(), "--dev", "eth0"}, link...))
	if err != nil {
		return err
	}
	values := cfg.TensorBytes / 4
	workers := make([]*proc, cfg.Workers)
	for w := range workers {
		args := append([]string{"--netns", r.hostNS(w), "--dev", "eth0", "--job", strconv.Itoa(int(cfg.Job)),
			"--allreduce", strconv.Itoa(int(cfg.AllReduce)), "--worker", strconv.Itoa(w), "--values", strconv.Itoa(values),
			"--per-packet", strconv.Itoa(cfg.PerPacket), "--window", strconv.Itoa(cfg.Window), "--rto", cfg.RTO.String(),
			"--seed", strconv.FormatUint(cfg.Seed, 10), "--result", filepath.Join(r.dir, fmt.Sprintf("worker%d.bin", w))}, link...)
		if workers[w], err = r.start(fmt.Sprintf("worker%d", w), "host", args); err != nil {
			return err
		}
	}
	r.logf("running: switch, ps and %d workers in namespaces %s", cfg.Workers, strings.Join(r.nsNames, " "))
	if cfg.OnRunning != nil {
		pids := map[string]int{}
		for _, p := range r.procs {
			pids[p.name] = p.cmd.Process.Pid
		}
		cfg.OnRunning(pids)
	}
	// 4. Watchdog: every worker must finish; any other exit is fatal.
	left := cfg.Workers
	for left > 0 {
		select {
		case <-ctx.Done():
			var pending []string
			for _, w := range workers {
				if !isDone(w) {
					pending = append(pending, w.name)
				}
			}
			return fmt.Errorf("up: stopped (%v) with %s unfinished", context.Cause(ctx), strings.Join(pending, ", "))
		case p := <-r.exits:
			if p.role == "host" && p.err == nil {
				left--
				continue
			}
			return p.died()
		}
	}
	// 5. Counters, then stop the switch and the PS and read their reports.
	if res.Counters, err = client.Stats(ctx); err != nil {
		return fmt.Errorf("up: reading switch counters: %w", err)
	}
	for _, p := range []*proc{swp, psp} {
		p.cmd.Process.Signal(syscall.SIGTERM)
	}
	for _, p := range []*proc{swp, psp} {
		select {
		case <-p.done:
		case <-time.After(10 * time.Second):
			return fmt.Errorf("up: %s did not stop within 10 s of SIGTERM", p.name)
		}
		if p.err != nil {
			return p.died()
		}
	}
	if err := readJSON(swp.report, &res.SwitchReport); err != nil {
		return err
	}
	if err := readJSON(psp.report, &res.PSReport); err != nil {
		return err
	}
	res.Switch = r.procResult(swp, res.SwitchReport.Report)
	res.PS = r.procResult(psp, res.PSReport.Report)
	// 6. Check every worker's tensor against the reference sum.
	ref := make([]int32, values)
	for i := range ref {
		var s int32
		for w := 0; w < cfg.Workers; w++ {
			s += agg.Value(cfg.Seed, w, i)
		}
		ref[i] = s
	}
	for w, p := range workers {
		var hr HostReport
		if err := readJSON(p.report, &hr); err != nil {
			return err
		}
		wr := WorkerResult{ProcResult: r.procResult(p, hr.Report), Stats: hr.Worker}
		b, err := os.ReadFile(filepath.Join(r.dir, fmt.Sprintf("worker%d.bin", w)))
		if err != nil {
			return fmt.Errorf("up: %s result: %w", p.name, err)
		}
		if len(b) != 4*values {
			return fmt.Errorf("up: %s result has %d bytes, want %d", p.name, len(b), 4*values)
		}
		for i, v := range ref {
			if int32(binary.LittleEndian.Uint32(b[4*i:])) != v {
				wr.Mismatches++
			}
		}
		wr.Exact = wr.Mismatches == 0
		if d := hr.Worker.DoneAt - hr.Worker.FirstSendAt; d > 0 {
			wr.Gbps = float64(cfg.TensorBytes) * 8 / d.Seconds() / 1e9
		}
		res.Workers = append(res.Workers, wr)
	}
	res.KeptUp = true
	for _, pr := range append([]ProcResult{res.Switch, res.PS}, workerProcs(res.Workers)...) {
		if !pr.KeptUp {
			res.KeptUp = false
			res.Warnings = append(res.Warnings, fmt.Sprintf("%s did not keep up with real time: events ran up to %v late (%d more than 100µs late); link rate %.3g b/s and delay %v did not hold",
				pr.Name, pr.MaxLate, pr.Late, cfg.Link.BitsPerSecond, cfg.Link.Delay))
		}
	}
	for _, wr := range res.Workers {
		if !wr.Exact {
			return fmt.Errorf("up: %s: %d of %d values differ from the reference sum", wr.Name, wr.Mismatches, values)
		}
	}
	return nil
}

func workerProcs(ws []WorkerResult) []ProcResult {
	var out []ProcResult
	for _, w := range ws {
		out = append(out, w.ProcResult)
	}
	return out
}

func (r *run) procResult(p *proc, rep procnode.Report) ProcResult {
	return ProcResult{Name: p.name, Pid: p.cmd.Process.Pid, Elapsed: rep.Elapsed, MaxLate: rep.Realtime.MaxLate,
		Late: rep.Realtime.Late, Events: rep.Realtime.Events, KeptUp: rep.Realtime.MaxLate <= r.cfg.LateTolerance}
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
func (r *run) cleanup() error {
	var errs []error
	for _, p := range r.procs {
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
	fmt.Fprintf(w, "inabox up %s: %d workers, done in %v\n", res.ID, len(res.Workers), res.Elapsed.Round(time.Millisecond))
	for _, wr := range res.Workers {
		fmt.Fprintf(w, "  %-8s exact=%v chunks=%d sent=%d resent=%d dup-results=%d  %.3f Gb/s  max-late=%v late=%d\n",
			wr.Name, wr.Exact, wr.Stats.Chunks, wr.Stats.Sent, wr.Stats.Resent, wr.Stats.DupResults, wr.Gbps, wr.MaxLate, wr.Late)
	}
	c := res.Counters
	fmt.Fprintf(w, "  switch   packets=%d ina=%d passes=%d recirc=%d  max-late=%v late=%d\n",
		c.Switch.Packets, c.Switch.INAPackets, c.Switch.Passes, c.Switch.Recirculations, res.Switch.MaxLate, res.Switch.Late)
	fmt.Fprintf(w, "  switch   by reason: %v\n", c.Reason)
	for _, j := range c.Jobs {
		fmt.Fprintf(w, "  job %-4d %+v\n", j.ID, j.JobStats)
	}
	fmt.Fprintf(w, "  ps       %+v\n", res.PSReport.PS)
	if res.KeptUp {
		fmt.Fprintln(w, "  real time: every process kept up")
	}
	for _, s := range res.Warnings {
		fmt.Fprintln(w, "  WARNING:", s)
	}
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
