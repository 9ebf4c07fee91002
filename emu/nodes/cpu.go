package nodes

import (
	"time"

	"github.com/inabox/inabox/emu"
)

// CPUConfig is a host's packet-processing CPU: Cores cores, each spending
// PerPacket plus the packet's length at BitsPerSecond on every packet the
// host receives. A zero BitsPerSecond means no per-byte cost.
type CPUConfig struct {
	Cores         int
	PerPacket     time.Duration
	BitsPerSecond int64 // per core
	// QueuePackets bounds the packets waiting for a core (the receive
	// ring); an arrival that finds it full is dropped and counted. 0 means
	// DefaultCPUQueue.
	QueuePackets int
}

// DefaultCPUQueue is CPUConfig.QueuePackets when it is zero: a common NIC
// receive-ring size.
const DefaultCPUQueue = 4096

// Enabled reports whether c costs anything.
func (c CPUConfig) Enabled() bool {
	return c.Cores > 0 && (c.PerPacket > 0 || c.BitsPerSecond > 0)
}

// Service is the time one core spends on an n-byte packet.
func (c CPUConfig) Service(n int) time.Duration {
	d := c.PerPacket
	if c.BitsPerSecond > 0 {
		d += time.Duration((int64(n)*8*int64(time.Second) + c.BitsPerSecond - 1) / c.BitsPerSecond)
	}
	return d
}

// CPUStats is what a CPU did.
type CPUStats struct {
	Packets uint64 // handed to the inner node
	Dropped uint64 // arrivals that found the queue full
	Lost    uint64 // queued or in service when the host crashed
	// Busy is the core time spent, summed over the cores.
	Busy time.Duration
	// MaxQueue is the longest the queue has been.
	MaxQueue int
}

// CPUTimerKey is the timer key a CPU arms on its inner node's Env; the
// inner node must not use it.
const CPUTimerKey = 1 << 62

// CPU puts a packet-processing CPU in front of a node: a packet that
// arrives waits (first in, first out) for one of the cores, which works
// on it for Service(len) and then hands it to the inner node. The inner
// node's own timers and sends pass through unchanged; its work is charged
// on receive only (what it sends is the outcome of that work). It is a
// deterministic emu.Node; a crash loses the packets waiting or in service.
//
// Buffers: a CPU owns every packet from Receive until it hands it to the
// inner node, which then owns it as emu.Node says.
type CPU struct {
	inner emu.Node
	cfg   CPUConfig
	queue []job // FIFO ring, head at q0
	q0    int
	qn    int
	cores []core
	armed bool
	at    time.Duration
	one   [1]*emu.Packet
	stats CPUStats
}

type job struct {
	port int
	pkt  *emu.Packet
}

type core struct {
	job
	done time.Duration
}

// NewCPU returns inner behind a CPU of cfg (at least one core).
func NewCPU(inner emu.Node, cfg CPUConfig) *CPU {
	cfg.Cores = max(cfg.Cores, 1)
	if cfg.QueuePackets <= 0 {
		cfg.QueuePackets = DefaultCPUQueue
	}
	return &CPU{inner: inner, cfg: cfg, cores: make([]core, cfg.Cores), queue: make([]job, 64)}
}

// Inner returns the node behind the CPU.
func (c *CPU) Inner() emu.Node { return c.inner }

// Stats returns what the CPU has done.
func (c *CPU) Stats() CPUStats { return c.stats }

// Start implements emu.Node: packets left from before a crash are lost.
func (c *CPU) Start(env *emu.Env) {
	for i := range c.cores {
		if p := c.cores[i].pkt; p != nil {
			env.Free(p)
			c.cores[i] = core{}
			c.stats.Lost++
		}
	}
	for c.qn > 0 {
		env.Free(c.pop().pkt)
		c.stats.Lost++
	}
	c.armed = false
	c.inner.Start(env)
}

// Reset implements emu.Resetter for an inner node that loses its state.
func (c *CPU) Reset() {
	if r, ok := c.inner.(emu.Resetter); ok {
		r.Reset()
	}
}

// Receive implements emu.Node: the packets queue for the cores.
func (c *CPU) Receive(env *emu.Env, port int, pkts []*emu.Packet) {
	for _, p := range pkts {
		if c.qn >= c.cfg.QueuePackets {
			env.Free(p)
			c.stats.Dropped++
			continue
		}
		c.push(job{port: port, pkt: p})
	}
	c.stats.MaxQueue = max(c.stats.MaxQueue, c.qn)
	c.run(env)
}

// AcceptsDeferred implements emu.DeferAware: a CPU takes deferred frames
// where its inner node does (it only queues them).
func (c *CPU) AcceptsDeferred() bool {
	d, ok := c.inner.(emu.DeferAware)
	return ok && d.AcceptsDeferred()
}

// Timer implements emu.Node.
func (c *CPU) Timer(env *emu.Env, key uint64) {
	if key != CPUTimerKey {
		c.inner.Timer(env, key)
		return
	}
	c.armed = false
	c.run(env)
}

// run hands the inner node every packet whose service is done (in order
// of completion, then of core), starts waiting packets on free cores and
// arms the timer for the next completion.
func (c *CPU) run(env *emu.Env) {
	now := env.Now()
	for {
		// The finished core that finished first.
		k := -1
		for i := range c.cores {
			if cr := &c.cores[i]; cr.pkt != nil && cr.done <= now && (k < 0 || cr.done < c.cores[k].done) {
				k = i
			}
		}
		if k < 0 {
			break
		}
		cr := &c.cores[k]
		j := cr.job
		cr.job = job{}
		c.one[0] = j.pkt
		c.stats.Packets++
		c.inner.Receive(env, j.port, c.one[:])
		c.one[0] = nil
	}
	next := time.Duration(-1)
	for i := range c.cores {
		cr := &c.cores[i]
		if cr.pkt == nil && c.qn > 0 {
			cr.job = c.pop()
			d := c.cfg.Service(cr.pkt.Len())
			cr.done = now + d
			c.stats.Busy += d
		}
		if cr.pkt != nil && (next < 0 || cr.done < next) {
			next = cr.done
		}
	}
	if next >= 0 && next <= now {
		// A zero service time: hand it over now.
		c.run(env)
		return
	}
	switch {
	case next >= 0 && (!c.armed || c.at != next):
		env.SetTimer(next, CPUTimerKey)
		c.armed, c.at = true, next
	case next < 0 && c.armed:
		env.StopTimer(CPUTimerKey)
		c.armed = false
	}
}

func (c *CPU) push(j job) {
	if c.qn == len(c.queue) {
		q := make([]job, 2*len(c.queue))
		for i := range c.qn {
			q[i] = c.queue[(c.q0+i)%len(c.queue)]
		}
		c.queue, c.q0 = q, 0
	}
	c.queue[(c.q0+c.qn)%len(c.queue)] = j
	c.qn++
}

func (c *CPU) pop() job {
	j := c.queue[c.q0]
	c.queue[c.q0] = job{}
	c.q0 = (c.q0 + 1) % len(c.queue)
	c.qn--
	return j
}
