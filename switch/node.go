package sw

import (
	"time"

	"github.com/inabox/inabox/emu"
	"github.com/inabox/inabox/rdma"
)

// NodeConfig configures a switch node: the pipeline's timing in the
// emulator and the switch's control plane.
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
	// Control is the switch's control plane (FreeINAControl,
	// DynaINAControl): it gets the control messages addressed to the
	// switch and its own timers. nil means none: every frame goes through
	// the pipeline.
	Control ControlPlane
	// CtlQPN is the destination QP of control frames for the switch and
	// the QP its own control messages come from; 0 means DefaultCtlQPN.
	CtlQPN uint32
	// Addr is the switch's own address, the source of the control
	// messages it sends.
	Addr rdma.Endpoint
}

// DefaultCtlQPN is the destination QP number of control frames addressed
// to the switch's control plane.
const DefaultCtlQPN = 0xC7C7C7

// NodeStats are the node's own counters.
type NodeStats struct {
	Overruns     uint64 // packets dropped because the pipeline queue was full
	CtlBadICRC   uint64 // control frames for the switch dropped for a bad ICRC
	CtlMalformed uint64 // control frames for the switch that do not decode (inahdr.DecodeCtl)
	// CtlForeign counts control messages dropped because they did not come
	// from where their opcode may come from: an ALLOC or FREE not from the
	// job's PS port, a JOIN or LEAVE not from the port of the job's worker
	// of that rank, one for a job the switch does not know, or a message
	// only the switch sends (GRANT, LEFT).
	CtlForeign uint64
	Reboots    uint64 // crashes and restarts (Reset)
}

// Node is a Switch in the emulator (an emu.Node and emu.Resetter) with an
// optional control plane. It recognises control frames for the switch
// (SEND Only, RC or UC, to NodeConfig.CtlQPN, with a control INA header),
// checks their ICRC and hands them decoded to the control plane, and runs
// every other frame through Process, then sends, replicates (env.Clone,
// pooled) or frees it. With timing, outputs leave when the pipeline has
// finished them (a timer releases them in order). A crash and restart
// (Reset) reboots the switch: every register is lost, and the control
// plane loses what it keeps in the data plane. It allocates nothing per
// packet in steady state.
type Node struct {
	s      *Switch
	cfg    NodeConfig
	ctlQPN uint32
	ctl    CtlEnv

	frames  []Frame
	members []McastMember
	reps    []replica // a multicast group's replicas, reused
	keep    []*emu.Packet

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

// Timer keys: the node's output release, and the control plane's keys
// (CtlEnv.SetTimer) with ctlTimer set.
const (
	outputTimer = 1
	ctlTimer    = 1 << 63
)

var (
	_ emu.Node     = (*Node)(nil)
	_ emu.Resetter = (*Node)(nil)
)

// NewNode returns s as a node with an infinitely fast pipeline and no
// control plane.
func NewNode(s *Switch) *Node { return NewTimedNode(s, NodeConfig{}) }

// NewTimedNode returns s as a node configured by cfg: pipeline timing and
// control plane.
func NewTimedNode(s *Switch, cfg NodeConfig) *Node {
	n := &Node{s: s, cfg: cfg, ctlQPN: cfg.CtlQPN}
	if n.ctlQPN == 0 {
		n.ctlQPN = DefaultCtlQPN
	}
	n.ctl.n = n
	return n
}

// Switch returns the data plane.
func (n *Node) Switch() *Switch { return n.s }

// Control returns the control plane (nil: none).
func (n *Node) Control() ControlPlane { return n.cfg.Control }

// Stats returns the node's counters. Call it from the emulator's
// goroutine (or after the run).
func (n *Node) Stats() NodeStats { return n.stats }

// Start implements emu.Node.
func (n *Node) Start(env *emu.Env) {
	// After a crash (Resume keeps the state) every timer is gone: the
	// outputs still queued get theirs again.
	n.armed = false
	n.arm(env)
	if cp := n.cfg.Control; cp != nil {
		c := n.ctlEnv(env)
		cp.Start(c)
		cp.Settle(c)
	}
}

// Reset implements emu.Resetter: a crashed switch reboots. Its queued
// packets' schedule is lost (the emulator reclaims nothing; the packets
// are dropped), every register is reset (aggregator values, owners,
// bitmaps, states), and the control plane's Reset drops what it kept in
// the data plane (leases). The tables stay as the controller installed
// them.
func (n *Node) Reset() {
	n.pending, n.head, n.armed, n.busyUntil = n.pending[:0], 0, false, 0
	n.s.ResetSlots(0, n.s.Config().Slots)
	if cp := n.cfg.Control; cp != nil {
		cp.Reset()
	}
	n.stats.Reboots++
}

// Timer implements emu.Node: the node's own timer releases the outputs
// that are due; the control plane's go to its Timer.
func (n *Node) Timer(env *emu.Env, key uint64) {
	cp := n.cfg.Control
	switch {
	case key&ctlTimer != 0:
		if cp != nil {
			c := n.ctlEnv(env)
			cp.Timer(c, key&^ctlTimer)
			cp.Settle(c)
		}
	case key == outputTimer:
		n.release(env)
		if cp != nil {
			cp.Settle(n.ctlEnv(env))
		}
	}
}

// release sends the outputs that are due.
func (n *Node) release(env *emu.Env) {
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
		env.SetTimer(n.pending[n.head].at, outputTimer)
		n.armed = true
	}
}

func (n *Node) timed() bool { return n.cfg.PassTime > 0 || n.cfg.Latency > 0 }

// Receive implements emu.Node: control frames for the switch go to the
// control plane, the others through the pipeline.
func (n *Node) Receive(env *emu.Env, port int, pkts []*emu.Packet) {
	cp := n.cfg.Control
	if cp == nil {
		n.process(env, port, pkts)
		return
	}
	c := n.ctlEnv(env)
	cp.Frames(c)
	keep := n.keep[:0]
	for _, p := range pkts {
		m, door := n.s.admitCtl(p.Bytes(), p.Sealed, port, n.ctlQPN)
		switch door {
		case ctlNotMine:
			keep = append(keep, p)
			continue
		case ctlBadICRC:
			n.stats.CtlBadICRC++
		case ctlMalformed:
			n.stats.CtlMalformed++
		case ctlForeign:
			n.stats.CtlForeign++
		default:
			cp.Control(c, port, m)
		}
		env.Free(p)
	}
	if len(keep) > 0 {
		n.process(env, port, keep)
	}
	if len(keep) == 1 { // mostly; clear (or a loop the compiler turns into it) calls the runtime
		keep[0] = nil
	} else {
		clear(keep)
	}
	n.keep = keep[:0]
	cp.Settle(c)
}

// process runs pkts through the pipeline and sends, replicates or frees
// each one.
func (n *Node) process(env *emu.Env, port int, pkts []*emu.Packet) {
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
	deferred := env.Defers() // in virtual time each ICRC is written where its frame is seen
	for i, p := range pkts {
		fr[i] = Frame{Data: p.Bytes(), InPort: port, Sealed: p.Sealed, DeferICRC: deferred}
	}
	n.s.processAt(env.Now(), fr)
	timed := n.timed()
	for i, p := range pkts {
		f := &fr[i]
		if f.Len > 0 {
			p.SetLen(f.Len)
		}
		if f.Deferred {
			p.Defer(rdma.SealICRC)
		} else {
			p.Sealed = f.Sealed
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
			n.reps = n.s.appendReplicas(n.reps[:0], f.Group, p.Len())
			if len(n.reps) == 0 {
				env.Free(p)
				break
			}
			// In virtual time each replica's ICRC is left to be written
			// where it is seen (emu.Packet.Defer); otherwise one ICRC over
			// the result, then each replica's updated for its rewritten
			// headers.
			if deferred {
				p.Defer(rdma.SealICRC)
			} else {
				p.Sealed = rdma.SetICRC(p.Bytes()) == nil
			}
			for _, r := range n.reps[1:] {
				c := env.Clone(p)
				egress(c, r)
				n.out(env, timed, at, r.m.Port, c)
			}
			egress(p, n.reps[0])
			n.out(env, timed, at, n.reps[0].m.Port, p)
		case ActForwardMulticast:
			n.reps = n.s.appendReplicas(n.reps[:0], f.Group, p.Len())
			for _, r := range n.reps {
				c := env.Clone(p)
				egressUC(c, r)
				n.out(env, timed, at, r.m.Port, c)
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

// egress and egressUC finish replica p for r (Switch.Egress, EgressUC;
// appendReplicas counted it), updating a sealed replica's ICRC for its
// rewritten headers instead of recomputing it; p is sealed afterwards.
// A deferred replica (emu.Packet.Defer) stays deferred, its ICRC written
// where it is seen.
func egress(p *emu.Packet, r replica) {
	switch {
	case p.Deferred():
		finishReplica(p.Bytes(), r.rw, icrcDeferred)
		return
	case p.Sealed:
		finishReplica(p.Bytes(), r.rw, icrcPatch)
	default:
		finishReplica(p.Bytes(), r.rw, icrcFull)
	}
	p.Sealed = rdma.CheckSealed(p.Bytes(), true) // a RoCE frame: its ICRC was written
}

func egressUC(p *emu.Packet, r replica) {
	switch {
	case p.Deferred():
		finishReplicaUC(p.Bytes(), r.rw, icrcDeferred)
		return
	case p.Sealed:
		finishReplicaUC(p.Bytes(), r.rw, icrcPatch)
	default:
		finishReplicaUC(p.Bytes(), r.rw, icrcFull)
	}
	p.Sealed = rdma.CheckSealed(p.Bytes(), true)
}

// AcceptsDeferred implements emu.DeferAware: the switch trusts a sealed
// frame's ICRC (rdma.CheckSealed) and keeps a deferred one deferred.
func (n *Node) AcceptsDeferred() bool { return true }

func (n *Node) out(env *emu.Env, timed bool, at time.Duration, port int, p *emu.Packet) {
	if !timed || at <= env.Now() {
		env.Send(port, p)
		return
	}
	if len(n.pending) == cap(n.pending) && 2*n.head >= len(n.pending) {
		// compact the FIFO instead of growing it, where that frees half of
		// it or more: otherwise append doubles it, so that each entry is
		// moved a bounded number of times
		k := copy(n.pending, n.pending[n.head:])
		clear(n.pending[k:])
		n.pending, n.head = n.pending[:k], 0
	}
	n.pending = append(n.pending, pendingOut{at: at, port: port, pkt: p})
}
