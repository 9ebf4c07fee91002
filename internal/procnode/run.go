// Package procnode runs one emu.Node as an operating-system process: the
// node's ports are attached (emu.Network.Attach) to TAP devices or AF_PACKET
// sockets inside a network namespace and the network is driven by
// emu.Network.RunRealtime. The node is the same state machine that runs under
// virtual time; this package only opens the backends, captures, and reports.
package procnode

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"github.com/inabox/inabox/emu"
)

// Backends of an Attachment.
const (
	BackendTAP    = "tap"    // a TAP device the process creates (and deletes on exit)
	BackendPacket = "packet" // an AF_PACKET socket on an existing interface (recvmmsg/sendmmsg)
	BackendRing   = "ring"   // an AF_PACKET socket with mmapped TPACKET_V2 rings
	BackendUDP    = "udp"    // a UDP socket, one frame per datagram: Dev is LOCAL->REMOTE (udp.go)
	BackendXDP    = "xdp"    // an AF_XDP socket and XDP program on an existing interface (xdp.go)
)

// GoroutinePortsEnv set to 1 in a process's environment has it drive its
// backends with the goroutine driver (Spec.GoroutinePorts): for comparing
// the two drivers under inabox up, whose processes inherit it.
const GoroutinePortsEnv = "INABOX_GOROUTINE_PORTS"

// SpinWaitEnv, a duration in a process's environment, sets
// emu.Config.SpinWait (negative: never spin), for experiments.
const SpinWaitEnv = "INABOX_SPIN_WAIT"

// Attachment joins one node port to a backend.
type Attachment struct {
	Port    int    `json:"port"`
	Backend string `json:"backend"`
	Dev     string `json:"dev"`
	// Batch is the backend's batch size (0: its default).
	Batch int `json:"batch,omitempty"`
	// MTU is set on a TAP device the process creates (0: the kernel's).
	MTU int `json:"mtu,omitempty"`
	// Link is the emulated link between the node port and the backend: its
	// rate, delay, queue and impairments hold in real time (in both
	// directions, unless In is set) as long as the machine keeps up.
	Link emu.LinkConfig `json:"link"`
	// In, if set, is the backend→node direction's configuration instead
	// of Link (which then models node→backend only): a link whose other
	// direction is modelled by the process at its far end.
	In *emu.LinkConfig `json:"in,omitempty"`
	// XDPMode is the XDP attach mode of BackendXDP: XDPModeAuto ("":
	// native, else generic), XDPModeNative or XDPModeGeneric.
	XDPMode string `json:"xdp_mode,omitempty"`
	// XDPFallback, if set (BackendPacket or BackendRing), is the backend
	// BackendXDP falls back to when XDP is unavailable on the device;
	// unset, the attachment fails with the reason.
	XDPFallback string `json:"xdp_fallback,omitempty"`
	// Pcap, if set, is a file that receives every frame the node sends and
	// receives on the port (emu.Network.Capture).
	Pcap string `json:"pcap,omitempty"`
}

// Spec describes a node process.
type Spec struct {
	Name  string
	Node  emu.Node
	Ports int
	Seed  uint64
	// Netns is the named network namespace in which the backends are
	// opened ("" = the caller's).
	Netns  string
	Attach []Attachment
	// Inner are nodes that run in the process behind Node, each linked to
	// one of its ports (a host's worker and PS behind its NIC). Done and
	// AfterEvent hold for their callbacks too.
	Inner []InnerNode
	// Done, if set, is checked on the run goroutine after every node
	// callback (Start, Receive, Timer); the run ends when it returns true.
	Done func() bool
	// AfterEvent, if set, runs on the run goroutine after every node
	// callback: the race-free place to copy node counters for readers on
	// other goroutines.
	AfterEvent func()
	// Zero, if set, is the wall-clock instant of run time 0 (it may be
	// past: a process that replaces one that crashed continues its run's
	// clock; emu.Network.RunRealtimeFrom). Unset: Run starts the clock.
	Zero time.Time
	// GoroutinePorts drives the backends from reader and writer
	// goroutines (emu.Config.GoroutinePorts: the driver before the
	// polled one), for comparison.
	GoroutinePorts bool
}

// InnerNode is a node of a process that no backend touches: its port 0 is
// linked to port To of Spec.Node over Link (both directions alike).
type InnerNode struct {
	Name  string
	Node  emu.Node
	Ports int
	To    int
	Link  emu.LinkConfig
}

// hooked wraps a node of the process to run Spec's hooks after each of its
// callbacks on the run goroutine (no emu.Network.Do, whose use from another
// goroutine races with the start and end of a run).
type hooked struct {
	emu.Node
	*hooks
}

// hooks are Spec's hooks, shared by the process's nodes.
type hooks struct {
	after   func()
	done    func() bool
	stop    atomic.Pointer[context.CancelFunc]
	started chan struct{} // closed by the first Start: the run goroutine owns the network
	once    sync.Once
}

func (h *hooks) hook() {
	if h.after != nil {
		h.after()
	}
	if h.done != nil && h.done() {
		if c := h.stop.Load(); c != nil {
			(*c)()
		}
	}
}

func (h *hooked) Start(env *emu.Env) {
	h.once.Do(func() { close(h.started) })
	h.Node.Start(env)
	h.hook()
}
func (h *hooked) Receive(env *emu.Env, port int, pkts []*emu.Packet) {
	h.Node.Receive(env, port, pkts)
	h.hook()
}
func (h *hooked) Timer(env *emu.Env, key uint64) { h.Node.Timer(env, key); h.hook() }

// Reset forwards emu.Resetter.
func (h *hooked) Reset() {
	if r, ok := h.Node.(emu.Resetter); ok {
		r.Reset()
	}
}

// PortReport is one attachment's counters.
type PortReport struct {
	Port    int               `json:"port"`
	Backend string            `json:"backend"`
	Node    emu.NodePortStats `json:"node"`
	Ext     emu.ExtStats      `json:"ext"`
	// ToBackend and FromBackend are the emulated link's two directions.
	ToBackend   emu.LinkStats `json:"to_backend"`
	FromBackend emu.LinkStats `json:"from_backend"`
}

// Report is what a node process measured.
type Report struct {
	Name     string            `json:"name"`
	Elapsed  time.Duration     `json:"elapsed_ns"`
	Realtime emu.RealtimeStats `json:"realtime"`
	Ports    []PortReport      `json:"ports"`
}

// Proc is a node process's network, built and with its backends open.
type Proc struct {
	spec  Spec
	hook  *hooked
	net   *emu.Network
	links []*emu.Link
	names []string
	pcaps []*bufio.Writer
	files []*os.File

	// mu orders Do against the start and the end of the run: phase is
	// idle before Run, running during it and ended after it.
	mu    sync.Mutex
	phase int
	ended chan struct{}
}

// Phases of a Proc.
const (
	phaseIdle = iota
	phaseRunning
	phaseEnded
)

// ErrEnded is Do's error once the run has ended.
var ErrEnded = errors.New("procnode: the run has ended")

// Open builds the network: one node, its attachments opened in spec.Netns.
// On error everything opened so far is closed.
func Open(spec Spec) (_ *Proc, err error) {
	if spec.Name == "" || spec.Node == nil || spec.Ports < 1 {
		return nil, errors.New("procnode: Spec needs Name, Node and Ports")
	}
	cfg := emu.Config{Seed: spec.Seed, PreciseWake: true, GoroutinePorts: spec.GoroutinePorts || os.Getenv(GoroutinePortsEnv) == "1"}
	if d, err := time.ParseDuration(os.Getenv(SpinWaitEnv)); err == nil {
		cfg.SpinWait = d
	}
	p := &Proc{spec: spec, net: emu.NewNetwork(cfg), ended: make(chan struct{})}
	p.hook = &hooked{Node: spec.Node, hooks: &hooks{after: spec.AfterEvent, done: spec.Done, started: make(chan struct{})}}
	if err := p.net.AddNode(spec.Name, spec.Ports, p.hook); err != nil {
		return nil, err
	}
	for _, in := range spec.Inner {
		if err := p.net.AddNode(in.Name, in.Ports, &hooked{Node: in.Node, hooks: p.hook.hooks}); err != nil {
			return nil, err
		}
		if _, err := p.net.Connect(spec.Name, in.To, in.Name, 0, in.Link); err != nil {
			return nil, fmt.Errorf("procnode: inner node %s: %w", in.Name, err)
		}
	}
	var ports []emu.Port
	defer func() {
		if err != nil {
			for _, pt := range ports {
				pt.Close()
			}
			p.closeFiles()
		}
	}()
	err = InNetns(spec.Netns, func() error {
		for _, a := range spec.Attach {
			var pt emu.Port
			switch a.Backend {
			case BackendTAP:
				t, err := emu.NewTAPPort(emu.TAPConfig{Name: a.Dev, BatchSize: a.Batch, MTU: a.MTU})
				if err != nil {
					return err
				}
				pt = t
			case BackendPacket:
				s, err := NewPacketPort(PacketConfig{Dev: a.Dev, BatchSize: a.Batch})
				if err != nil {
					return err
				}
				pt = s
			case BackendRing:
				s, err := NewRingPort(PacketConfig{Dev: a.Dev, BatchSize: a.Batch})
				if err != nil {
					return err
				}
				pt = s
			case BackendUDP:
				u, err := openUDP(a)
				if err != nil {
					return err
				}
				pt = u
			case BackendXDP:
				s, err := openXDP(a)
				if err != nil {
					return err
				}
				pt = s
			default:
				return fmt.Errorf("procnode: port %d: unknown backend %q (want %q, %q, %q, %q or %q)", a.Port, a.Backend, BackendTAP, BackendPacket, BackendRing, BackendUDP, BackendXDP)
			}
			ports = append(ports, pt)
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	for i, a := range spec.Attach {
		name := ports[i].Name() // the network's name for it (ExtStats): "xdp:dev" or its fallback's, "udp:…", …
		l, err := p.net.Attach(spec.Name, a.Port, ports[i], a.Link)
		if err != nil {
			return nil, err
		}
		ports[i] = nil // owned by the network now (closed when the run ends)
		if a.In != nil {
			if err := l.SetConfig(emu.BtoA, *a.In); err != nil {
				return nil, err
			}
		}
		p.links = append(p.links, l)
		p.names = append(p.names, name)
		if a.Pcap != "" {
			f, err := os.Create(a.Pcap)
			if err != nil {
				return nil, err
			}
			w := bufio.NewWriterSize(f, 1<<20)
			p.files = append(p.files, f)
			p.pcaps = append(p.pcaps, w)
			if err := p.net.Capture(spec.Name, a.Port, w); err != nil {
				return nil, err
			}
		}
	}
	return p, nil
}

// Network returns the process's network.
func (p *Proc) Network() *emu.Network { return p.net }

// SetZero sets Spec.Zero (before Run): the wall-clock instant of run
// time 0.
func (p *Proc) SetZero(t time.Time) { p.spec.Zero = t }

// Links returns the attachments' links, in Spec.Attach order: direction
// emu.AtoB is node→backend, emu.BtoA backend→node. Change them only on
// the run goroutine (Do).
func (p *Proc) Links() []*emu.Link { return p.links }

// Do runs fn where it may touch the network, and waits for it: before Run
// on the caller's goroutine (Run waits), during the run on the run
// goroutine (emu.Network.DoPrompt, once the node has started: between two
// events, also while the run is behind real time). After the run it
// returns ErrEnded without calling fn.
func (p *Proc) Do(fn func()) error {
	p.mu.Lock()
	switch p.phase {
	case phaseIdle:
		defer p.mu.Unlock()
		fn()
		return nil
	case phaseEnded:
		p.mu.Unlock()
		return ErrEnded
	}
	p.mu.Unlock()
	select {
	case <-p.hook.started:
	case <-p.ended:
		return ErrEnded
	}
	p.mu.Lock()
	defer p.mu.Unlock() // Run's end waits for fn: the network is never touched by two
	if p.phase == phaseEnded {
		return ErrEnded
	}
	p.net.DoPrompt(fn)
	return nil
}

func (p *Proc) closeFiles() error {
	var first error
	for _, w := range p.pcaps {
		if err := w.Flush(); err != nil && first == nil {
			first = err
		}
	}
	for _, f := range p.files {
		if err := f.Close(); err != nil && first == nil {
			first = err
		}
	}
	p.pcaps, p.files = nil, nil
	return first
}

// Run drives the network in real time until ctx is done or spec.Done
// reports true (checked after every node callback), closes the backends (a TAP the process created is deleted)
// and flushes the captures.
func (p *Proc) Run(ctx context.Context) (Report, error) {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	p.hook.stop.Store(&cancel)
	p.mu.Lock()
	p.phase = phaseRunning
	p.mu.Unlock()
	start := time.Now()
	var rt emu.RealtimeStats
	var err error
	if p.spec.Zero.IsZero() {
		rt, err = p.net.RunRealtime(ctx, 0)
	} else {
		rt, err = p.net.RunRealtimeFrom(ctx, p.spec.Zero, 0)
	}
	p.mu.Lock()
	p.phase = phaseEnded
	close(p.ended)
	p.mu.Unlock()
	rep := Report{Name: p.spec.Name, Elapsed: time.Since(start), Realtime: rt}
	for i, a := range p.spec.Attach {
		pr := PortReport{Port: a.Port, Backend: p.names[i]}
		pr.Node, _ = p.net.PortStats(p.spec.Name, a.Port)
		pr.Ext, _ = p.net.ExtStats(p.names[i])
		pr.ToBackend = p.links[i].Stats(emu.AtoB)
		pr.FromBackend = p.links[i].Stats(emu.BtoA)
		rep.Ports = append(rep.Ports, pr)
	}
	if cerr := p.closeFiles(); cerr != nil && err == nil {
		err = cerr
	}
	return rep, err
}
