package up

import (
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"time"

	"go.yaml.in/yaml/v3"

	"inabox/emu"
	"inabox/harness/up/agg"
	"inabox/harness/up/swctl"
	"inabox/internal/procnode"
	sw "inabox/switch"
)

// SwitchReport is what an inaswitch process writes to its --report file.
type SwitchReport struct {
	procnode.Report
	Switch swctl.Stats  `json:"switch"`
	Node   sw.NodeStats `json:"node"`
	Error  string       `json:"error,omitempty"`
}

// HostReport is what an inahost process writes to its --report file.
type HostReport struct {
	procnode.Report
	Worker agg.WorkerStats `json:"worker"`
	Error  string          `json:"error,omitempty"`
}

// PSReport is what an inaps process writes to its --report file.
type PSReport struct {
	procnode.Report
	PS    agg.PSStats `json:"ps"`
	Error string      `json:"error,omitempty"`
}

// linkFlags registers --rate and --delay.
func linkFlags(fs *flag.FlagSet) func() emu.LinkConfig {
	rate := fs.Float64("rate", 0, "link rate in bits/s (0 = unlimited)")
	delay := fs.Duration("delay", 0, "link propagation delay")
	queue := fs.Int("queue", 0, "link queue bound in packets (0 = default)")
	return func() emu.LinkConfig {
		return emu.LinkConfig{BitsPerSecond: int64(*rate), Delay: *delay, QueuePackets: *queue, MTUBytes: 9000}
	}
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

// SwitchMain is the inaswitch process: the aggregation switch serving one
// TAP device per port in a network namespace, with the control API on a
// unix socket or loopback TCP. It runs until SIGINT/SIGTERM.
func SwitchMain(args []string, stderr io.Writer) int {
	fs := flag.NewFlagSet("inaswitch", flag.ContinueOnError)
	fs.SetOutput(stderr)
	netns := fs.String("netns", "", "named network namespace to create the TAP devices in")
	ports := fs.Int("ports", 2, "number of switch ports")
	taps := fs.String("taps", "", "comma-separated TAP names, one per port (default sw0,sw1,...)")
	control := fs.String("control", "", "control API address: unix socket path, unix:PATH or tcp:127.0.0.1:PORT (required)")
	slots := fs.Int("slots", 0, "aggregator slots (0 = default)")
	passTime := fs.Duration("pass-time", 0, "pipeline time per pass (0 = infinitely fast)")
	batch := fs.Int("batch", 0, "TAP read batch (0 = default)")
	cfgFile := fs.String("config", "", "YAML/JSON control-plane entries to install at start (swctl.Config)")
	pcapDir := fs.String("pcap", "", "directory for one pcap per port (<tap>.pcap)")
	report := fs.String("report", "", "file to write the final JSON report to")
	if err := fs.Parse(args); err != nil {
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
	names := make([]string, *ports)
	for i := range names {
		names[i] = "sw" + strconv.Itoa(i)
	}
	if *taps != "" {
		t := strings.Split(*taps, ",")
		if len(t) != *ports {
			return fail(fmt.Errorf("--taps lists %d names for %d ports", len(t), *ports))
		}
		names = t
	}
	s, err := sw.New(sw.Config{Slots: *slots, Ports: *ports})
	if err != nil {
		return fail(err)
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
	node := sw.NewTimedNode(s, sw.NodeConfig{PassTime: *passTime})
	var overruns atomic.Uint64 // node counters for the control API, copied on the run goroutine
	spec := procnode.Spec{Name: "switch", Node: node, Ports: *ports, Netns: *netns,
		AfterEvent: func() { overruns.Store(node.Stats().Overruns) }}
	var portIdx []int
	for i, n := range names {
		a := procnode.Attachment{Port: i, Backend: procnode.BackendTAP, Dev: n, Batch: *batch, MTU: 9000, Link: emu.LinkConfig{MTUBytes: 9000}}
		if *pcapDir != "" {
			a.Pcap = filepath.Join(*pcapDir, n+".pcap")
		}
		spec.Attach = append(spec.Attach, a)
		portIdx = append(portIdx, i)
	}
	proc, err := procnode.Open(spec)
	if err != nil {
		return fail(err)
	}
	srv := &swctl.Server{S: s, Ports: portIdx}
	srv.Runtime = func() any { return sw.NodeStats{Overruns: overruns.Load()} }
	ctx, stop := signalContext()
	defer stop()
	ln, err := swctl.Listen(*control)
	if err != nil {
		proc.Run(cancelled()) // closes the TAPs
		return fail(err)
	}
	hs := &http.Server{Handler: srv.Handler(), ReadHeaderTimeout: 5 * time.Second}
	go hs.Serve(ln)
	rep, err := proc.Run(ctx)
	sctx, scancel := context.WithTimeout(context.Background(), 2*time.Second)
	hs.Shutdown(sctx)
	scancel()
	out := SwitchReport{Report: rep, Switch: srv.Snapshot(), Node: node.Stats()}
	if err != nil {
		out.Error = err.Error()
	}
	if werr := writeJSON(*report, out); werr != nil && err == nil {
		err = werr
	}
	if err != nil {
		fmt.Fprintln(stderr, "inaswitch:", err)
		return 1
	}
	return 0
}

func cancelled() context.Context {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	return ctx
}

// HostMain is the inahost process: one aggregation worker sending and
// receiving RoCEv2 frames on its own interface (AF_PACKET) inside a network
// namespace. It exits 0 once it holds every chunk's sum (the tensor goes to
// --result as little-endian int32), or on SIGINT/SIGTERM with status 1.
func HostMain(args []string, stderr io.Writer) int {
	fs := flag.NewFlagSet("inahost", flag.ContinueOnError)
	fs.SetOutput(stderr)
	netns := fs.String("netns", "", "named network namespace of the interface")
	dev := fs.String("dev", "eth0", "interface for RoCEv2 frames (AF_PACKET)")
	backend := fs.String("backend", procnode.BackendPacket, "packet (AF_PACKET on --dev) or tap (create TAP --dev)")
	job := fs.Uint("job", 1, "job id")
	ar := fs.Uint("allreduce", 1, "all-reduce id")
	worker := fs.Uint("worker", 0, "worker rank")
	values := fs.Int("values", 1<<20, "tensor length in int32 values")
	per := fs.Int("per-packet", 256, "values per packet")
	window := fs.Int("window", 64, "chunks in flight")
	rto := fs.Duration("rto", 20*time.Millisecond, "retransmission timeout")
	seed := fs.Uint64("seed", 1, "tensor seed (agg.Value)")
	batch := fs.Int("batch", 0, "backend batch (0 = default)")
	pcap := fs.String("pcap", "", "pcap file of the port")
	report := fs.String("report", "", "file to write the final JSON report to")
	result := fs.String("result", "", "file to write the all-reduced tensor to")
	link := linkFlags(fs)
	if err := fs.Parse(args); err != nil {
		return 2
	}
	name := fmt.Sprintf("worker%d", *worker)
	fail := func(err error) int {
		fmt.Fprintf(stderr, "inahost %s: %v\n", name, err)
		writeJSON(*report, HostReport{Error: err.Error()})
		return 1
	}
	w := agg.NewWorker(agg.WorkerConfig{Job: uint16(*job), AllReduce: uint16(*ar), Worker: uint8(*worker), Seed: *seed,
		Values: *values, PerPacket: *per, Window: *window, RTO: *rto})
	proc, err := procnode.Open(procnode.Spec{Name: name, Node: w, Ports: 1, Netns: *netns, Done: w.Done,
		Attach: []procnode.Attachment{{Port: 0, Backend: *backend, Dev: *dev, Batch: *batch, Link: link(), Pcap: *pcap}}})
	if err != nil {
		return fail(err)
	}
	ctx, stop := signalContext()
	defer stop()
	rep, err := proc.Run(ctx)
	out := HostReport{Report: rep, Worker: w.Stats()}
	if err == nil && !out.Worker.Done {
		err = fmt.Errorf("stopped before the all-reduce finished (%d of %d chunks)", out.Worker.Results, out.Worker.Chunks)
	}
	if err == nil && *result != "" {
		b := make([]byte, 4*len(w.Result))
		for i, v := range w.Result {
			binary.LittleEndian.PutUint32(b[4*i:], uint32(v))
		}
		err = os.WriteFile(*result, b, 0o644)
	}
	if err != nil {
		out.Error = err.Error()
	}
	if werr := writeJSON(*report, out); werr != nil && err == nil {
		err = werr
	}
	if err != nil {
		fmt.Fprintf(stderr, "inahost %s: %v\n", name, err)
		return 1
	}
	return 0
}

// PSMain is the inaps process: the parameter server on its own interface
// in a namespace, until SIGINT/SIGTERM.
func PSMain(args []string, stderr io.Writer) int {
	fs := flag.NewFlagSet("inaps", flag.ContinueOnError)
	fs.SetOutput(stderr)
	netns := fs.String("netns", "", "named network namespace of the interface")
	dev := fs.String("dev", "eth0", "interface (AF_PACKET)")
	backend := fs.String("backend", procnode.BackendPacket, "packet or tap")
	pcap := fs.String("pcap", "", "pcap file of the port")
	batch := fs.Int("batch", 0, "backend batch (0 = default)")
	report := fs.String("report", "", "file to write the final JSON report to")
	link := linkFlags(fs)
	if err := fs.Parse(args); err != nil {
		return 2
	}
	fail := func(err error) int {
		fmt.Fprintln(stderr, "inaps:", err)
		writeJSON(*report, PSReport{Error: err.Error()})
		return 1
	}
	ps := &agg.PS{}
	proc, err := procnode.Open(procnode.Spec{Name: "ps", Node: ps, Ports: 1, Netns: *netns,
		Attach: []procnode.Attachment{{Port: 0, Backend: *backend, Dev: *dev, Batch: *batch, Link: link(), Pcap: *pcap}}})
	if err != nil {
		return fail(err)
	}
	ctx, stop := signalContext()
	defer stop()
	rep, err := proc.Run(ctx)
	out := PSReport{Report: rep, PS: ps.Stats()}
	if err != nil {
		out.Error = err.Error()
	}
	if werr := writeJSON(*report, out); werr != nil && err == nil {
		err = werr
	}
	if err != nil {
		fmt.Fprintln(stderr, "inaps:", err)
		return 1
	}
	return 0
}
