package sw

import (
	"time"

	"github.com/inabox/inabox/emu"
)

// NodeConfig sets the timing of a switch in the emulator.
type NodeConfig struct {
	// PassTime is the time one pipeline pass occupies the pipeline: the
	// inverse of the pipe's packet rate. A packet with k passes (k-1
	// recirculations) holds the pipeline for k*PassTime, so recirculation
	// costs capacity. 0 means an infinitely fast pipeline.
	PassTime time.Duration
	// Latency is added to every output (parser-to-deparser latency).
	Latency time.Duration
	// QueueLimit bounds the packets waiting for the pipeline; arrivals
	// beyond it are dropped and counted in NodeStats.Overruns. 0 means
	// no bound.
	QueueLimit int
}

// NodeStats are the adapter's own counters.
type NodeStats struct {
	Overruns uint64 // packets dropped because the pipeline queue was full
}

// Node adapts a Switch to the emulator: it implements emu.Node, runs each
// received batch through Process and sends, replicates (env.Clone, pooled)
// or frees every packet. With a NodeConfig that has timing, outputs leave
// when the pipeline has finished them (a timer releases them in order).
// It allocates nothing per packet in steady state.
type Node struct {
	S   *Switch
	cfg NodeConfig

	frames  []Frame
	members []McastMember

	busyUntil time.Duration // pipeline occupied until this run time
	pending   []pendingOut  // FIFO, release times non-decreasing
	head      int
	armed     bool
	stats     NodeStats
}

type pendingOut struct {
	at   time.Duration
	port int
	pkt  *emu.Packet
}

const nodeTimerKey = 1

var _ emu.Node = (*Node)(nil)

// NewNode wraps s with an infinitely fast pipeline.
func NewNode(s *Switch) *Node { return &Node{S: s} }

// NewTimedNode wraps s with pipeline timing.
func NewTimedNode(s *Switch, cfg NodeConfig) *Node { return &Node{S: s, cfg: cfg} }

// Stats returns the adapter's counters. Call it from the emulator's
// goroutine (or after the run).
func (n *Node) Stats() NodeStats { return n.stats }

// Start implements emu.Node.
func (n *Node) Start(env *emu.Env) {}

// Reset implements emu.Resetter: a crashed switch loses its queued packets'
// schedule (the emulator reclaims nothing; packets are dropped).
func (n *Node) Reset() {
	n.pending, n.head, n.armed, n.busyUntil = n.pending[:0], 0, false, 0
}

// Timer implements emu.Node: it releases the outputs that are due.
func (n *Node) Timer(env *emu.Env, key uint64) {
	if key != nodeTimerKey {
		return
	}
	n.armed = false
	now := env.Now()
	for n.head < len(n.pending) && n.pending[n.head].at <= now {
		o := n.pending[n.head]
		n.pending[n.head] = pendingOut{}
		n.head++
		env.Send(o.port, o.pkt)
	}
	if n.head == len(n.pending) {
		n.pending, n.head = n.pending[:0], 0
	} else {
		n.arm(env)
	}
}

func (n *Node) arm(env *emu.Env) {
	if !n.armed && n.head < len(n.pending) {
		env.SetTimer(n.pending[n.head].at, nodeTimerKey)
		n.armed = true
	}
}

func (n *Node) timed() bool { return n.cfg.PassTime > 0 || n.cfg.Latency > 0 }

// Receive implements emu.Node.
func (n *Node) Receive(env *emu.Env, port int, pkts []*emu.Packet) {
	if n.cfg.QueueLimit > 0 {
		// Admission: drop what does not fit in the pipeline queue.
		room := n.cfg.QueueLimit - (len(n.pending) - n.head)
		if room < 0 {
			room = 0
		}
		if len(pkts) > room {
			for _, p := range pkts[room:] {
				env.Free(p)
				n.stats.Overruns++
			}
			pkts = pkts[:room]
		}
	}
	if cap(n.frames) < len(pkts) {
		n.frames = make([]Frame, len(pkts))
	}
	fr := n.frames[:len(pkts)]
	for i, p := range pkts {
		fr[i] = Frame{Data: p.Bytes(), InPort: port}
	}
	n.S.Process(fr)
	timed := n.timed()
	for i, p := range pkts {
		f := &fr[i]
		if f.Len > 0 {
			p.SetLen(f.Len)
		}
		var at time.Duration
		if timed {
			if n.busyUntil < env.Now() {
				n.busyUntil = env.Now()
			}
			n.busyUntil += time.Duration(f.Passes) * n.cfg.PassTime
			at = n.busyUntil + n.cfg.Latency
		}
		switch f.Action {
		case ActForward:
			n.out(env, timed, at, f.OutPort, p)
		case ActMulticast:
			n.members = n.S.AppendMembers(n.members[:0], f.Group)
			if len(n.members) == 0 {
				env.Free(p)
				break
			}
			for _, m := range n.members[1:] {
				c := env.Clone(p)
				n.S.Egress(c.Bytes(), m)
				n.out(env, timed, at, m.Port, c)
			}
			n.S.Egress(p.Bytes(), n.members[0])
			n.out(env, timed, at, n.members[0].Port, p)
		case ActForwardMulticast:
			n.members = n.S.AppendMembers(n.members[:0], f.Group)
			for _, m := range n.members {
				c := env.Clone(p)
				n.S.EgressUC(c.Bytes(), m)
				n.out(env, timed, at, m.Port, c)
			}
			n.out(env, timed, at, f.OutPort, p)
		default:
			env.Free(p)
		}
		fr[i].Data = nil
	}
	if timed {
		n.arm(env)
	}
}

func (n *Node) out(env *emu.Env, timed bool, at time.Duration, port int, p *emu.Packet) {
	if !timed || at <= env.Now() {
		env.Send(port, p)
		return
	}
	if n.head > 0 && len(n.pending) == cap(n.pending) {
		// compact the FIFO instead of growing it
		k := copy(n.pending, n.pending[n.head:])
		clear(n.pending[k:])
		n.pending, n.head = n.pending[:k], 0
	}
	n.pending = append(n.pending, pendingOut{at: at, port: port, pkt: p})
}
