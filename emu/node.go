package emu

import (
	"math/rand/v2"
	"time"
)

// Node is a protocol state machine driven by the emulator: a switch, a
// worker, a parameter server. It is handed packets and timer expiries with the
// current time, and answers through its Env (packets to send, timers to arm).
// It must not read a clock, sleep, start goroutines or use global randomness:
// Env.Now and Env.Rand are its only sources of time and chance, so a run is a
// function of its scenario and seed under the virtual-time driver, and the same
// code runs unchanged under the real-time driver.
//
// The driver never calls a Node's methods concurrently.
type Node interface {
	// Start is called once when the run starts, and again after a crashed
	// node restarts.
	Start(env *Env)
	// Receive hands the node a batch of packets that arrived on one port.
	// The node owns every packet in pkts and must Send or Free each one;
	// it must not keep the pkts slice itself, which the driver reuses.
	Receive(env *Env, port int, pkts []*Packet)
	// Timer reports that the timer armed with key has expired.
	Timer(env *Env, key uint64)
}

// Resetter is implemented by nodes that lose their state on a crash. A
// restart calls Reset and then Start.
type Resetter interface {
	Reset()
}

// DeferAware is implemented by nodes that take frames whose check is
// deferred (Packet.Defer) as they are: such a node never reads a sealed
// frame's check bytes (it trusts Sealed, as rdma.CheckSealed does) and
// calls Finish on a frame before it reads them. Every other node receives
// each frame finished.
type DeferAware interface {
	// AcceptsDeferred reports whether the node takes deferred frames.
	AcceptsDeferred() bool
}

// Env is a node's view of the emulator during one callback. Its methods
// record what the node wants done; the driver carries it out after the
// callback returns, in the order recorded. An Env is owned by the driver and
// valid only during the callback it was passed to.
type Env struct {
	now   time.Duration
	node  *nodeState
	sends []pendingSend
	timer []pendingTimer
	cache *cache // the network's packets, on its goroutine
	real  bool   // under the real-time driver
}

type pendingSend struct {
	port int
	pkt  *Packet
}

type pendingTimer struct {
	at   time.Duration
	key  uint64
	stop bool
}

// Defers reports whether a sender gains by deferring a frame's check
// (Packet.Defer): under the virtual-time driver, where a frame that nobody
// inspects never needs it. Under the real-time driver every frame that
// leaves a node is finished on its way out, so there it does not.
func (e *Env) Defers() bool { return !e.real }

// Now returns the current run time: time since the run started.
func (e *Env) Now() time.Duration { return e.now }

// Name returns the node's name.
func (e *Env) Name() string { return e.node.name }

// Ports returns the node's number of ports.
func (e *Env) Ports() int { return e.node.nports }

// Rand returns the node's own random source, seeded from the run seed and the
// node's name.
func (e *Env) Rand() *rand.Rand { return e.node.rng }

// NewPacket returns an empty packet with headroom. The node owns it.
func (e *Env) NewPacket() *Packet { return e.cache.get() }

// Clone returns a copy of p. The node owns the copy.
func (e *Env) Clone(p *Packet) *Packet { return e.cache.clone(p) }

// Free returns a packet the node owns to the pool.
func (e *Env) Free(p *Packet) { e.cache.put(p) }

// Send queues p for transmission on port. Ownership passes to the emulator.
// A packet sent on a port that does not exist or has no link is dropped and
// counted.
func (e *Env) Send(port int, p *Packet) {
	e.sends = append(e.sends, pendingSend{port: port, pkt: p})
}

// SetTimer arms the timer key to expire at run time at (not before now).
// Arming a key that is already armed replaces its expiry.
func (e *Env) SetTimer(at time.Duration, key uint64) {
	if at < e.now {
		at = e.now
	}
	e.timer = append(e.timer, pendingTimer{at: at, key: key})
}

// StopTimer disarms the timer key if it is armed.
func (e *Env) StopTimer(key uint64) {
	e.timer = append(e.timer, pendingTimer{key: key, stop: true})
}
