package emu

import (
	"errors"
	"fmt"
	"hash/fnv"
	"math/rand/v2"
	"sync/atomic"
	"time"
)

// Config configures a Network.
type Config struct {
	// Seed seeds every random source of the run: each link direction and
	// each node gets its own generator derived from Seed and its name.
	Seed uint64
	// Headroom and MaxFrame size the packet buffers (defaults
	// DefaultHeadroom and DefaultMaxFrame).
	Headroom, MaxFrame int
	// PreciseWake makes RunRealtime wake for the next event from a timerfd
	// (Linux; elsewhere it has no effect) instead of a Go timer, whose
	// waits under a millisecond last about a millisecond: every process a
	// packet crosses would add that much to its links' delay. Leave it off
	// inside a testing/synctest bubble, whose fake clock only Go timers
	// follow.
	PreciseWake bool
	// SpinWait: with PreciseWake, the real-time driver busy-waits for an
	// event due sooner than this instead of sleeping (a sleep and wake-up
	// costs tens of µs on a VM). 0 means DefaultSpinWait; negative never
	// spins.
	SpinWait time.Duration
	// GoroutinePorts makes the real-time driver hand every backend's frames
	// to and from reader and writer goroutines, as before the polled driver
	// (for comparison). Without it, with PreciseWake on Linux, ports that
	// implement PollPort are read and written from the run loop itself.
	GoroutinePorts bool
}

// DefaultSpinWait is the default Config.SpinWait.
const DefaultSpinWait = 20 * time.Microsecond

// NodePortStats are the counters of one node port.
type NodePortStats struct {
	TxPackets, TxBytes uint64 // sent by the node on this port
	RxPackets, RxBytes uint64 // delivered to the node on this port
	DropNoLink         uint64 // sent on a port with no link
	DropNodeDown       uint64 // arrived while the node was crashed
	RxFCSErrors        uint64 // arrived with a bad FCS (corrupted on the wire): dropped by the MAC
}

type portState struct {
	out   *linkDir // the direction leaving this port, nil if unconnected
	stats NodePortStats
	cap   *capture
}

type nodeState struct {
	// What every delivery reads comes first, in one cache line with the
	// node and its ports; the timers' table (half a kilobyte) after.
	up bool
	// deferOK: the node takes deferred frames as they are (DeferAware)
	deferOK bool
	gen     uint32
	idx     int
	nports  int
	node    Node
	ports   []portState
	name    string
	rng     *rand.Rand
	timers  timerTable // the armed timers, by key
}

// timerState is an armed timer: its expiry (at, seq: the place it fires
// in) and the one event of the queue that stands for it (gen, at evAt ≤
// at). Re-arming a timer to a later expiry, as a retransmission timer is on
// every packet, changes at and seq and leaves the event where it is; when
// that event comes due it moves on to the timer's expiry (dispatch). So a
// timer puts one event in the queue however often it is re-armed, and
// fires exactly where an event queued at each re-arming would have.
type timerState struct {
	at, evAt int64
	seq      uint64
	gen      uint32
}

// smallTimers is how many timer keys, from 0, a timerTable holds in an
// array: the keys nodes use most (a worker's few, the switch's output
// timer), each found without a map's hashing.
const smallTimers = 16

// timerTable is a node's armed timers by key: keys below smallTimers in an
// array (set marks those armed), the rest in a map made on first use.
type timerTable struct {
	set   uint16
	small [smallTimers]timerState
	big   map[uint64]timerState
}

func (t *timerTable) get(key uint64) (timerState, bool) {
	if key < smallTimers {
		return t.small[key], t.set&(1<<key) != 0
	}
	st, ok := t.big[key]
	return st, ok
}

func (t *timerTable) put(key uint64, st timerState) {
	if key < smallTimers {
		t.small[key] = st
		t.set |= 1 << key
		return
	}
	if t.big == nil {
		t.big = map[uint64]timerState{}
	}
	t.big[key] = st
}

func (t *timerTable) del(key uint64) {
	if key < smallTimers {
		t.set &^= 1 << key
		return
	}
	delete(t.big, key)
}

// clear disarms every timer.
func (t *timerTable) clear() {
	t.set = 0
	clear(t.big)
}

// Network is a set of nodes joined by links, and the scheduler that runs
// them. Build it (AddNode, Connect, Attach, Capture, fault schedule), then
// run it once with Run, RunUntil or RunRealtime.
//
// A Network is not safe for concurrent use: under the virtual-time driver
// everything happens on the caller's goroutine; under the real-time driver
// use Do to reach it from another goroutine while it runs.
type Network struct {
	cfg    Config
	pool   *Pool
	nodes  []*nodeState
	byName map[string]*nodeState
	links  []*Link
	dirs   []*linkDir
	exts   []*extPort

	events  eventQueue
	slots   []event // the events of the queue's entries with ref ≥ 0
	free    []int32 // slots not in use
	cache   cache   // the pool's packets for the run's goroutine
	qBlocks blockPool[queued]
	waiting int // in-order arrivals behind their direction's first
	seq     uint64
	// timersTo is the latest expiry any timer was ever armed for: until
	// then the run is not over (RunUntil), as if every arming had queued
	// an event of its own.
	timersTo int64
	now      int64
	started  bool
	env      Env
	batch    []*Packet

	// Events counts the events processed so far.
	Events uint64

	rt  *realtime                // the run's own view, used on its goroutine
	rtp atomic.Pointer[realtime] // the same, for Do from other goroutines

	// stop is set by Interrupt, from any goroutine.
	stop atomic.Bool
}

// ErrInterrupted is returned by RunUntil when Interrupt stopped it.
var ErrInterrupted = errors.New("emu: run interrupted")

// Interrupt stops a virtual-time run (RunUntil, Run) after the event it
// is processing: that call returns ErrInterrupted, at the time of the last
// event processed. It may be called from any goroutine (a Ctrl-C handler,
// context.AfterFunc); it stays in effect for later calls, which return at
// once.
func (n *Network) Interrupt() { n.stop.Store(true) }

// NewNetwork returns an empty network.
func NewNetwork(cfg Config) *Network {
	if cfg.Headroom <= 0 {
		cfg.Headroom = DefaultHeadroom
	}
	if cfg.MaxFrame <= 0 {
		cfg.MaxFrame = DefaultMaxFrame
	}
	n := &Network{cfg: cfg, byName: map[string]*nodeState{}}
	n.pool = NewPool(cfg.Headroom, cfg.MaxFrame)
	n.cache.pool = n.pool
	n.env.cache = &n.cache
	return n
}

// Pool returns the network's packet pool.
func (n *Network) Pool() *Pool { return n.pool }

// Now returns the current run time.
func (n *Network) Now() time.Duration { return time.Duration(n.now) }

func (n *Network) rngFor(name string) *rand.Rand {
	h := fnv.New64a()
	h.Write([]byte(name))
	return rand.New(rand.NewPCG(n.cfg.Seed, h.Sum64()))
}

// AddNode adds a node with the given number of ports.
func (n *Network) AddNode(name string, ports int, node Node) error {
	switch {
	case name == "":
		return &ConfigError{"node", "Name", `""`, "must not be empty"}
	case n.byName[name] != nil:
		return &ConfigError{"node " + name, "Name", name, "already used"}
	case ports < 1:
		return &ConfigError{"node " + name, "Ports", ports, "must be ≥ 1"}
	case node == nil:
		return &ConfigError{"node " + name, "Node", nil, "must not be nil"}
	case n.started:
		return errors.New("emu: AddNode after the run started")
	}
	ns := &nodeState{
		name: name, idx: len(n.nodes), nports: ports, node: node,
		rng: n.rngFor("node:" + name), ports: make([]portState, ports),
		up: true,
	}
	if d, ok := node.(DeferAware); ok {
		ns.deferOK = d.AcceptsDeferred()
	}
	n.nodes = append(n.nodes, ns)
	n.byName[name] = ns
	return nil
}

func (n *Network) port(node string, port int) (*nodeState, error) {
	ns := n.byName[node]
	if ns == nil {
		return nil, fmt.Errorf("emu: no node named %q", node)
	}
	if port < 0 || port >= ns.nports {
		return nil, &ConfigError{"node " + node, "port", port, fmt.Sprintf("must be in [0, %d)", ns.nports)}
	}
	if ns.ports[port].out != nil {
		return nil, fmt.Errorf("emu: port %s:%d is already connected", node, port)
	}
	return ns, nil
}

// Connect joins port ap of node a and port bp of node b with a full-duplex
// link whose two directions share cfg.
func (n *Network) Connect(a string, ap int, b string, bp int, cfg LinkConfig) (*Link, error) {
	return n.ConnectAsym(a, ap, b, bp, cfg, cfg)
}

// ConnectAsym is Connect with a configuration per direction.
func (n *Network) ConnectAsym(a string, ap int, b string, bp int, atob, btoa LinkConfig) (*Link, error) {
	if n.started {
		return nil, errors.New("emu: Connect after the run started")
	}
	na, err := n.port(a, ap)
	if err != nil {
		return nil, err
	}
	nb, err := n.port(b, bp)
	if err != nil {
		return nil, err
	}
	if na == nb && ap == bp {
		return nil, fmt.Errorf("emu: cannot connect port %s:%d to itself", a, ap)
	}
	name := fmt.Sprintf("%s:%d<->%s:%d", a, ap, b, bp)
	ea := endpoint{node: na.idx, port: ap}
	eb := endpoint{node: nb.idx, port: bp}
	l, err := n.newLink(name, ea, eb, fmt.Sprintf("%s:%d→%s:%d", a, ap, b, bp), fmt.Sprintf("%s:%d→%s:%d", b, bp, a, ap), atob, btoa)
	if err != nil {
		return nil, err
	}
	na.ports[ap].out = l.dirs[0]
	nb.ports[bp].out = l.dirs[1]
	return l, nil
}

func (n *Network) newLink(name string, ea, eb endpoint, nameAB, nameBA string, atob, btoa LinkConfig) (*Link, error) {
	if err := atob.Validate("link " + nameAB); err != nil {
		return nil, err
	}
	if err := btoa.Validate("link " + nameBA); err != nil {
		return nil, err
	}
	l := &Link{net: n, name: name}
	mk := func(dname string, from, to endpoint, c LinkConfig) *linkDir {
		d := &linkDir{name: "link " + dname, idx: int32(len(n.dirs)), link: l, from: from, to: to, cfg: c, up: true, rng: n.rngFor("link:" + dname)}
		d.refresh()
		n.dirs = append(n.dirs, d)
		return d
	}
	l.dirs[0] = mk(nameAB, ea, eb, atob)
	l.dirs[1] = mk(nameBA, eb, ea, btoa)
	n.links = append(n.links, l)
	return l, nil
}

// Links returns the network's links in the order they were made.
func (n *Network) Links() []*Link { return n.links }

// Node returns the node added under name and its number of ports (nil, 0
// if there is none). The process runtime takes a node from a network built
// for virtual time this way and runs it alone.
func (n *Network) Node(name string) (Node, int) {
	ns := n.byName[name]
	if ns == nil {
		return nil, 0
	}
	return ns.node, ns.nports
}

// Nodes returns the node names in the order they were added.
func (n *Network) Nodes() []string {
	s := make([]string, len(n.nodes))
	for i, ns := range n.nodes {
		s[i] = ns.name
	}
	return s
}

// PortStats returns the counters of a node's port.
func (n *Network) PortStats(node string, port int) (NodePortStats, error) {
	ns := n.byName[node]
	if ns == nil {
		return NodePortStats{}, fmt.Errorf("emu: no node named %q", node)
	}
	if port < 0 || port >= ns.nports {
		return NodePortStats{}, &ConfigError{"node " + node, "port", port, fmt.Sprintf("must be in [0, %d)", ns.nports)}
	}
	return ns.ports[port].stats, nil
}

// NodeUp reports whether a node is running (not crashed).
func (n *Network) NodeUp(node string) bool {
	ns := n.byName[node]
	return ns != nil && ns.up
}

func (n *Network) schedule(e event) {
	n.seq++
	e.seq = n.seq
	n.push(e)
}

// push puts e, whose seq is set, in the queue.
func (n *Network) push(e event) {
	var i int32
	if k := len(n.free) - 1; k >= 0 {
		i, n.free = n.free[k], n.free[:k]
		n.slots[i] = e
	} else {
		i = int32(len(n.slots))
		n.slots = append(n.slots, e)
	}
	n.events.push(newEntry(e.at, e.seq, i))
}

// scheduleArrival schedules p's arrival at the far end of d at time at. An
// arrival no earlier than the direction's previous in-order one joins its
// in-order list (linkDir.first), whose first has an entry in the queue; an earlier
// one (reordered) is an ordinary event. Either way events fire in (at,
// seq) order, as if all were in the queue.
func (n *Network) scheduleArrival(d *linkDir, at int64, p *Packet, fcs bool) {
	if at < d.inOrderAt {
		n.schedule(event{at: at, kind: evArrive, idx: d.idx, gen: d.epoch, pkt: p, fcs: fcs})
		return
	}
	d.inOrderAt = at
	n.seq++
	p.gen, p.fcs, p.next = d.epoch, fcs, nil
	if d.last == nil {
		d.first, d.last = p, p
		n.events.push(newEntry(at, n.seq, ^d.idx))
		return
	}
	l := d.last
	l.next, l.nextAt, l.nextSeq = p, at, n.seq
	d.last = p
	n.waiting++
}

// pop removes the earliest event and returns it; when it is a direction's
// first in-order arrival, the next of them takes its entry in the queue.
func (n *Network) pop() event {
	ref := n.events.peek().ref
	if ref >= 0 {
		e := n.slots[ref]
		n.slots[ref] = event{} // drop references for the GC
		n.free = append(n.free, ref)
		n.events.pop()
		return e
	}
	top := n.events.peek()
	at, seq := top.time(), top.seq
	d := n.dirs[^ref]
	p := n.popArrival(d)
	return event{at: at, seq: seq, kind: evArrive, idx: d.idx, gen: p.gen, pkt: p, fcs: p.fcs}
}

// popArrival removes the earliest event, the first in-order arrival of
// direction d, and returns its packet; the next of them takes its entry.
func (n *Network) popArrival(d *linkDir) *Packet {
	p := d.first
	d.first, p.next = p.next, nil
	if d.first == nil {
		d.last = nil
		n.events.pop()
	} else {
		n.waiting--
		n.events.replaceTop(newEntry(p.nextAt, p.nextSeq, ^d.idx))
	}
	return p
}

// nextJoins reports whether the earliest event is an arrival at time at on
// direction idx of epoch gen, with a good FCS: one that joins the batch of
// an arrival there at that time.
func (n *Network) nextJoins(at int64, idx int32, gen uint32) bool {
	top := n.events.peek()
	if top.time() != at {
		return false
	}
	if top.ref < 0 {
		f := n.dirs[^top.ref].first
		return ^top.ref == idx && f.gen == gen && !f.fcs
	}
	e := &n.slots[top.ref]
	return e.kind == evArrive && e.idx == idx && e.gen == gen && !e.fcs
}

// At schedules fn to run at run time at, on the run's goroutine, in order
// with packet and timer events. Use it for faults and checks of your own.
func (n *Network) At(at time.Duration, fn func()) {
	n.schedule(event{at: int64(at), kind: evFunc, fn: fn})
}

// start calls every node's Start at time 0, once.
func (n *Network) start() {
	if n.started {
		return
	}
	n.started = true
	for _, ns := range n.nodes {
		n.callStart(ns)
	}
}

func (n *Network) beginEnv(ns *nodeState) *Env {
	e := &n.env
	e.now = time.Duration(n.now)
	e.node = ns
	e.sends = e.sends[:0]
	e.timer = e.timer[:0]
	return e
}

// finishEnv carries out what a node asked for during a callback.
func (n *Network) finishEnv(ns *nodeState) {
	e := &n.env
	for i := range e.sends {
		s := e.sends[i]
		e.sends[i] = pendingSend{}
		n.send(ns, s.port, s.pkt)
	}
	for _, t := range e.timer {
		if t.stop {
			ns.timers.del(t.key)
			continue
		}
		at := int64(t.at)
		n.seq++
		n.timersTo = max(n.timersTo, at)
		if st, ok := ns.timers.get(t.key); ok && st.evAt <= at { // its event comes first and moves on
			st.at, st.seq = at, n.seq
			ns.timers.put(t.key, st)
			continue
		}
		ns.gen++
		ns.timers.put(t.key, timerState{at: at, evAt: at, seq: n.seq, gen: ns.gen})
		n.push(event{at: at, seq: n.seq, kind: evTimer, idx: int32(ns.idx), key: t.key, gen: ns.gen})
	}
	e.node = nil
}

func (n *Network) callStart(ns *nodeState) {
	env := n.beginEnv(ns)
	ns.node.Start(env)
	n.finishEnv(ns)
}

// send takes a packet a node sent on one of its ports.
func (n *Network) send(ns *nodeState, port int, p *Packet) {
	if port < 0 || port >= ns.nports || ns.ports[port].out == nil {
		if port >= 0 && port < ns.nports {
			ns.ports[port].stats.DropNoLink++
		}
		n.cache.put(p)
		return
	}
	ps := &ns.ports[port]
	ps.stats.TxPackets++
	ps.stats.TxBytes += uint64(p.Len())
	if ps.cap != nil || !p.Sealed {
		p.Finish() // seen, or no longer trusted: its check is written now
	}
	if ps.cap != nil {
		ps.cap.write(n, p.Bytes())
	}
	n.enqueue(ps.out, p)
}

// enqueue offers a packet to a link direction at the current time. The
// packet's whole fate (queue, serialization, loss, delay, duplication,
// corruption) is decided here, so each hop costs one event: its arrival.
func (n *Network) enqueue(d *linkDir, p *Packet) {
	now := n.now
	st := &d.stats
	size := p.Len()
	st.SentPackets++
	st.SentBytes += uint64(size)
	if !d.up {
		st.Drops.LinkDown++
		n.cache.put(p)
		return
	}
	if size-etherHdrLen > d.mtu() {
		st.Drops.MTU++
		n.cache.put(p)
		return
	}
	d.drain(now, &n.qBlocks)
	start := now
	if d.busyUntil > now {
		start = d.busyUntil
		maxPkts, maxBytes := d.limits()
		qp := d.q.len()
		if (maxPkts > 0 && qp+1 > maxPkts) || (maxBytes > 0 && d.qBytes+size > maxBytes) {
			st.Drops.Queue++
			n.cache.put(p)
			return
		}
		if d.cfg.ECNThresholdBytes > 0 && d.qBytes > d.cfg.ECNThresholdBytes && markECN(p.Bytes()) {
			st.ECNMarked++
		}
		d.q.push(queued{start: start, bytes: size}, &n.qBlocks)
		d.qBytes += size
		if qp+1 > st.QueueHighWaterPackets {
			st.QueueHighWaterPackets = qp + 1
		}
		if d.qBytes > st.QueueHighWaterBytes {
			st.QueueHighWaterBytes = d.qBytes
		}
	} else {
		d.rem = 0 // an idle transmitter starts afresh
	}
	txEnd := start + d.serialization(size)
	d.busyUntil = txEnd
	if d.plain { // what follows, with every probability 0: nothing drawn
		arr := max(txEnd+int64(d.cfg.Delay)+d.extraDelay, d.lastArr)
		d.lastArr = arr
		n.scheduleArrival(d, arr, p, false)
		return
	}

	im := &d.cfg.Impairments
	if d.lost() {
		st.Drops.Loss++
		n.cache.put(p)
		return
	}
	arr := txEnd + int64(d.cfg.Delay) + d.extraDelay
	if j := int64(d.cfg.Jitter) + d.extraJitter; j > 0 {
		arr += d.rng.Int64N(j + 1)
	}
	if d.chance(either(im.Reorder, d.extraReorder)) {
		rd := im.ReorderDelay
		if rd == 0 {
			rd = 10 * time.Microsecond
		}
		arr += int64(rd)
		st.Reordered++
	} else {
		arr = max(arr, d.lastArr)
		d.lastArr = arr
	}
	pc := im.Corrupt
	if d.extraCorrupt > 0 {
		pc = 1 - (1-pc)*(1-d.extraCorrupt)
	}
	fcs := false // the receiving MAC will find a bad FCS
	if d.chance(pc) && size > 0 {
		flipBit(d, p)
		st.Corrupted++
		fcs = true
	}
	if d.chance(either(im.CorruptUndetected, d.extraUndetect)) && size > 0 {
		flipBit(d, p)
		st.Corrupted++
	}
	n.scheduleArrival(d, arr, p, fcs)
	if d.chance(either(im.Duplicate, d.extraDuplicate)) {
		st.Duplicated++
		n.scheduleArrival(d, arr, n.cache.clone(p), fcs)
	}
}

// flipBit flips one random bit of p; its ICRC is no longer to be trusted.
func flipBit(d *linkDir, p *Packet) {
	p.Finish() // the flip corrupts the frame as it would be on the wire
	bit := d.rng.IntN(p.Len() * 8)
	p.Bytes()[bit/8] ^= 1 << (bit % 8)
	p.Sealed = false
}

// dropFCS drops a packet that arrived with a bad FCS, counting it on the
// link direction and at the receiving port.
func (n *Network) dropFCS(d *linkDir, p *Packet) {
	d.stats.Drops.FCS++
	if d.to.ext == nil {
		n.nodes[d.to.node].ports[d.to.port].stats.RxFCSErrors++
	}
	n.cache.put(p)
}

// dispatch fires one event (already popped), with n.now set to its time.
func (n *Network) dispatch(e *event) {
	n.Events++
	switch e.kind {
	case evArrive:
		n.arrive(n.dirs[e.idx], e.at, e.pkt, e.gen, e.fcs)
	case evTimer:
		ns := n.nodes[e.idx]
		st, ok := ns.timers.get(e.key)
		if !ns.up || !ok || st.gen != e.gen {
			return // stopped, fired, or re-armed earlier (by another event)
		}
		if st.at != e.at || st.seq != e.seq { // re-armed later: on to its expiry
			st.evAt = st.at
			ns.timers.put(e.key, st)
			n.push(event{at: st.at, seq: st.seq, kind: evTimer, idx: e.idx, key: e.key, gen: e.gen})
			return
		}
		ns.timers.del(e.key)
		env := n.beginEnv(ns)
		ns.node.Timer(env, e.key)
		n.finishEnv(ns)
	case evFunc:
		e.fn()
	}
}

// arrive fires the arrival of p at the far end of d at time at: p was
// sent in d's epoch gen; fcs is whether it came with a bad FCS.
func (n *Network) arrive(d *linkDir, at int64, p *Packet, gen uint32, fcs bool) {
	if gen != d.epoch {
		d.stats.Drops.LinkDown++
		n.cache.put(p)
		return
	}
	if fcs {
		n.dropFCS(d, p)
		return
	}
	d.stats.DeliveredPackets++
	d.stats.DeliveredBytes += uint64(p.Len())
	if d.to.ext != nil {
		p.Finish()
		d.to.ext.deliver(n, p)
		return
	}
	ns := n.nodes[d.to.node]
	b := append(n.batch[:0], p)
	// Coalesce packets arriving at the same port at the same instant
	// into one batch.
	for n.events.Len() > 0 && n.nextJoins(at, d.idx, d.epoch) {
		x := n.pop()
		n.Events++
		d.stats.DeliveredPackets++
		d.stats.DeliveredBytes += uint64(x.pkt.Len())
		b = append(b, x.pkt)
	}
	n.batch = b
	n.deliver(ns, d.to.port, b)
	if len(b) == 1 { // mostly; clear (or a loop the compiler turns into it) calls the runtime
		b[0] = nil
	} else {
		clear(b)
	}
}

// deliver hands a batch of packets that arrived on a port to its node.
func (n *Network) deliver(ns *nodeState, port int, b []*Packet) {
	ps := &ns.ports[port]
	if !ns.up {
		ps.stats.DropNodeDown += uint64(len(b))
		for _, p := range b {
			n.cache.put(p)
		}
		return
	}
	for _, p := range b {
		ps.stats.RxPackets++
		ps.stats.RxBytes += uint64(p.Len())
		p.Port = port
		p.Arrival = time.Duration(n.now)
		if ps.cap != nil || !ns.deferOK {
			p.Finish()
		}
		if ps.cap != nil {
			ps.cap.write(n, p.Bytes())
		}
	}
	env := n.beginEnv(ns)
	ns.node.Receive(env, port, b)
	n.finishEnv(ns)
}

// Run runs the network in virtual time until no event is left, and returns
// the final run time. Nodes whose timers re-arm forever never let it end:
// use RunUntil for them.
func (n *Network) Run() (time.Duration, error) {
	return n.RunUntil(time.Duration(1<<63 - 1))
}

// RunUntil runs the network in virtual time until no event is left or the
// next one is later than deadline, or Interrupt is called. It may be called
// again with a later deadline to continue the run. Virtual time is exact
// and independent of the machine's speed: a 400 Gbps link is modelled as
// precisely as a 1 Mbps one.
func (n *Network) RunUntil(deadline time.Duration) (time.Duration, error) {
	if len(n.exts) > 0 {
		return n.Now(), errors.New("emu: the network has external ports (Attach); run it with RunRealtime")
	}
	n.start()
	dl := int64(deadline)
	for n.events.Len() > 0 && n.events.peek().time() <= dl {
		if n.stop.Load() {
			return n.Now(), ErrInterrupted
		}
		top := n.events.peek()
		n.now = top.time()
		if top.ref < 0 { // the most common event, without an event made of it
			at, d := n.now, n.dirs[^top.ref]
			p := n.popArrival(d)
			if nx := n.events.peek(); n.events.Len() > 0 && nx.ref < 0 {
				// The next arrival's packet was asked for one event ago:
				// now its frame's first lines, and the packet after it.
				if f := n.dirs[^nx.ref].first; f != nil {
					prefetchFrame(f)
				}
				if r, ok := n.events.second(); ok && r.ref < 0 {
					prefetchPacket(n.dirs[^r.ref].first)
				}
			}
			n.Events++
			n.arrive(d, at, p, p.gen, p.fcs)
			continue
		}
		e := n.pop()
		n.dispatch(&e)
	}
	if n.stop.Load() {
		return n.Now(), ErrInterrupted
	}
	// A timer armed and then stopped or re-armed still keeps the run going
	// until its expiry (timersTo), as it did when every arming queued an
	// event.
	switch {
	case (n.events.Len() > 0 || n.timersTo > dl) && dl > n.now:
		n.now = dl
	case n.events.Len() == 0 && n.timersTo <= dl && n.timersTo > n.now:
		n.now = n.timersTo
	}
	for _, ns := range n.nodes {
		for _, ps := range ns.ports {
			if ps.cap != nil && ps.cap.err != nil {
				return n.Now(), ps.cap.err
			}
		}
	}
	return n.Now(), nil
}

// Pending returns the number of scheduled events.
func (n *Network) Pending() int { return n.events.Len() + n.waiting }
