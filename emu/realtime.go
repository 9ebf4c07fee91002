package emu

import (
	"context"
	"errors"
	"fmt"
	"net"
	"sync"
	"sync/atomic"
	"time"
)

// writeOffset is the headroom handed to a backend's Write in front of each
// frame (enough for a virtio-net header).
const writeOffset = 32

// The pool's default headroom holds what a backend's Write gets in front of
// each frame, so no frame is copied to make room (writeBuf).
const _ = uint(DefaultHeadroom - writeOffset)

// extPort is a link end outside the emulator: a Port backend driven by a
// reader and a writer goroutine during a real-time run.
type extPort struct {
	name string
	port Port
	in   *linkDir // backend → node
	out  *linkDir // node → backend

	pending []*Packet      // arrivals for the backend, flushed once per loop turn
	toW     chan []*Packet // batches for the writer
	freeW   chan []*Packet // batch slices back from the writer
	freeR   chan []*Packet // batch slices back to the reader

	mu    sync.Mutex
	stats ExtStats

	// A port the polled driver reads and writes itself (PollPort, Linux).
	poll PollPort
	pl   *pollState
}

// ExtStats counts what crossed an attached backend port.
type ExtStats struct {
	ReadPackets, WritePackets uint64
	WriteErrors               uint64
	// DropBackpressure counts frames dropped because the writer could not
	// keep up with the emulator.
	DropBackpressure uint64
	ReadErr          string // why the reader stopped, if it did before the run ended
}

type ingress struct {
	ext  *extPort
	pkts []*Packet
	at   int64 // when the reader got them, as run time
}

// RealtimeStats tell how well the machine kept up with a real-time run.
type RealtimeStats struct {
	Events uint64
	// MaxLate is the largest delay between an event's due time and when it
	// ran. Link rates and delays hold only while this stays small compared
	// with the links' serialization and propagation delays; Late counts
	// events more than 100 µs late.
	MaxLate time.Duration
	Late    uint64
}

type realtime struct {
	wallStart time.Time
	ingress   chan ingress
	calls     chan func()
	prompt    chan func()   // DoPrompt's calls, served on every loop turn
	ended     chan struct{} // closed when the run has returned
	stats     RealtimeStats

	// The polled driver sleeps in epoll, not in a select: whoever hands it
	// work (a reader goroutine's batch, a Do) wakes it through wakeFn once
	// the work is visible. callers counts Do calls about to be received:
	// the loop does not sleep while one is.
	wakeFn  func()
	callers atomic.Int32
}

// wakeup wakes the polled driver (no-op for the goroutine driver).
func (rt *realtime) wakeup() {
	if rt.wakeFn != nil {
		rt.wakeFn()
	}
}

// Attach joins a node's port to a backend Port (in-memory pipe, UDP socket,
// TAP device) with a link that has cfg in both directions. The network takes
// ownership of p: the run reads and writes it from goroutines of its own and
// closes it when the run ends. Networks with attached ports run only in real
// time.
func (n *Network) Attach(node string, port int, p Port, cfg LinkConfig) (*Link, error) {
	if n.started {
		return nil, errors.New("emu: Attach after the run started")
	}
	if p == nil {
		return nil, &ConfigError{"attach to " + node, "Port", nil, "must not be nil"}
	}
	ns, err := n.port(node, port)
	if err != nil {
		return nil, err
	}
	x := &extPort{name: p.Name(), port: p}
	ea := endpoint{node: ns.idx, port: port}
	eb := endpoint{node: -1, ext: x}
	l, err := n.newLink(fmt.Sprintf("%s:%d<->%s", node, port, x.name), ea, eb,
		fmt.Sprintf("%s:%d→%s", node, port, x.name), fmt.Sprintf("%s→%s:%d", x.name, node, port), cfg, cfg)
	if err != nil {
		return nil, err
	}
	x.out, x.in = l.dirs[0], l.dirs[1]
	ns.ports[port].out = l.dirs[0]
	n.exts = append(n.exts, x)
	return l, nil
}

// ExtStats returns the counters of the backend attached with Attach under
// the given name (Port.Name()).
func (n *Network) ExtStats(name string) (ExtStats, bool) {
	for _, x := range n.exts {
		if x.name == name {
			x.mu.Lock()
			defer x.mu.Unlock()
			return x.stats, true
		}
	}
	return ExtStats{}, false
}

// deliver queues a packet that reached the backend end of its link.
func (x *extPort) deliver(n *Network, p *Packet) {
	if n.rt == nil { // cannot happen: RunUntil refuses external ports
		n.cache.put(p)
		return
	}
	if x.pl != nil && len(x.pending) >= pollMaxPending {
		x.mu.Lock()
		x.stats.DropBackpressure++
		x.mu.Unlock()
		n.cache.put(p)
		return
	}
	x.pending = append(x.pending, p)
}

// flush hands the pending packets to the writer without blocking.
func (x *extPort) flush(n *Network) {
	for len(x.pending) > 0 {
		k := min(len(x.pending), x.port.BatchSize())
		var b []*Packet
		select {
		case b = <-x.freeW:
		default:
			b = make([]*Packet, 0, x.port.BatchSize())
		}
		b = append(b[:0], x.pending[:k]...)
		select {
		case x.toW <- b:
		default:
			x.mu.Lock()
			x.stats.DropBackpressure += uint64(k)
			x.mu.Unlock()
			for _, p := range b {
				n.cache.put(p)
			}
		}
		x.pending = x.pending[:copy(x.pending, x.pending[k:])]
	}
	clear(x.pending[len(x.pending):cap(x.pending)])
}

// writeBuf returns p's frame with writeOffset bytes of headroom in front,
// moving the frame if a node used up the headroom; false if it cannot fit.
func writeBuf(p *Packet) ([]byte, bool) {
	if p.off < writeOffset { // rare: a node used up the headroom
		l := p.Len()
		if writeOffset+l > p.cap() {
			return nil, false
		}
		if writeOffset+l > len(p.buf) {
			p.grow(writeOffset + l)
		}
		copy(p.buf[writeOffset:], p.Bytes())
		p.off, p.end = writeOffset, writeOffset+l
	}
	return p.buf[p.off-writeOffset : p.end], true
}

func (x *extPort) writer(pool *Pool, wg *sync.WaitGroup) {
	defer wg.Done()
	bs := x.port.BatchSize()
	bufs := make([][]byte, 0, bs)
	for b := range x.toW {
		bufs = bufs[:0]
		for _, p := range b {
			if f, ok := writeBuf(p); ok {
				bufs = append(bufs, f)
			}
		}
		for len(bufs) > 0 {
			k, err := x.port.Write(bufs, writeOffset)
			x.mu.Lock()
			x.stats.WritePackets += uint64(k)
			if err != nil {
				x.stats.WriteErrors += uint64(len(bufs) - k)
			}
			x.mu.Unlock()
			if err != nil || k == 0 {
				break
			}
			bufs = bufs[k:]
		}
		for i, p := range b {
			pool.Put(p)
			b[i] = nil
		}
		select {
		case x.freeW <- b[:0]:
		default:
		}
	}
}

func (x *extPort) reader(pool *Pool, in chan<- ingress, start time.Time, done <-chan struct{}, wake func(), wg *sync.WaitGroup) {
	defer wg.Done()
	bs := x.port.BatchSize()
	bufs := make([][]byte, bs)
	sizes := make([]int, bs)
	for {
		var b []*Packet
		select {
		case b = <-x.freeR:
		default:
			b = make([]*Packet, 0, bs)
		}
		b = b[:bs]
		for i := range b {
			b[i] = pool.Get()
			bufs[i], _ = b[i].Buffer() // the full size: a frame's length is not known before the read
		}
		k, err := x.port.Read(bufs, sizes, pool.headroom)
		for i := k; i < bs; i++ {
			pool.Put(b[i])
			b[i] = nil
		}
		b = b[:k]
		for i, p := range b {
			p.SetFrame(pool.headroom, sizes[i])
			p.Sealed = false // from outside: every check applies
		}
		if k > 0 {
			x.mu.Lock()
			x.stats.ReadPackets += uint64(k)
			x.mu.Unlock()
			select {
			case in <- ingress{ext: x, pkts: b, at: int64(time.Since(start))}:
				if wake != nil {
					wake()
				}
			case <-done:
				for _, p := range b {
					pool.Put(p)
				}
				return
			}
		}
		if err != nil {
			if !errors.Is(err, net.ErrClosed) {
				x.mu.Lock()
				x.stats.ReadErr = err.Error()
				x.mu.Unlock()
			}
			return
		}
	}
}

// Do runs fn on the run's goroutine and waits for it: the way to read
// counters or change links while a real-time run is going. Before or after a
// run (and under virtual time) it simply calls fn.
func (n *Network) Do(fn func()) { n.call(fn, false) }

// DoPrompt is Do, served sooner: Do's fn waits until the run loop is idle
// (no event or arrival overdue), which a run behind real time may not be
// for long; DoPrompt's runs at the next turn of the loop, between events.
func (n *Network) DoPrompt(fn func()) { n.call(fn, true) }

// call runs fn on the run's goroutine (through the prompt queue if prompt)
// and waits for it; without a run, it calls fn.
func (n *Network) call(fn func(), prompt bool) {
	rt := n.rtp.Load()
	if rt == nil {
		fn()
		return
	}
	q := rt.calls
	if prompt {
		q = rt.prompt
	}
	done := make(chan struct{})
	rt.callers.Add(1)
	rt.wakeup()
	select {
	case q <- func() { fn(); close(done) }:
		rt.callers.Add(-1)
		<-done
	case <-rt.ended:
		rt.callers.Add(-1)
		fn() // the run has ended
	}
}

// RunRealtime runs the network against the wall clock until ctx is done or
// run time reaches until (0 means no limit), then closes every attached port
// and returns. The same nodes, links and faults as under virtual time apply;
// link rates and delays are kept by pacing events on a timer. Backend ports
// are read and written by goroutines at the edges; nodes still run one at a
// time on the calling goroutine. See RealtimeStats for how late events ran.
func (n *Network) RunRealtime(ctx context.Context, until time.Duration) (RealtimeStats, error) {
	return n.runRealtime(ctx, time.Now(), false, until)
}

// RunRealtimeFrom is RunRealtime with run time 0 at the wall-clock instant
// zero, which may lie in the past: the run then begins at run time
// time.Since(zero), where the nodes' Start sees it (a process that replaces
// one that crashed continues the clock of the run it rejoins). Timed calls
// (At) already due run at once, in order. until is a run time, as for
// RunRealtime.
func (n *Network) RunRealtimeFrom(ctx context.Context, zero time.Time, until time.Duration) (RealtimeStats, error) {
	return n.runRealtime(ctx, zero, true, until)
}

func (n *Network) runRealtime(ctx context.Context, zero time.Time, catchUp bool, until time.Duration) (RealtimeStats, error) {
	if n.started {
		return RealtimeStats{}, errors.New("emu: the network has already run")
	}
	if n.cfg.PreciseWake && !n.cfg.GoroutinePorts && pollSupported {
		return n.runPolled(ctx, zero, catchUp, until)
	}
	var timer waker = newGoWaker()
	if n.cfg.PreciseWake {
		w, err := newPreciseWaker()
		if err != nil {
			return RealtimeStats{}, err
		}
		timer = w
	}
	defer timer.Close()
	rt := &realtime{wallStart: zero, ingress: make(chan ingress, 64), calls: make(chan func()),
		prompt: make(chan func()), ended: make(chan struct{})}
	if since := int64(time.Since(zero)); catchUp && since > n.now {
		n.now = since // a clock that started before this run (RunRealtimeFrom)
	}
	n.rt, n.env.real = rt, true
	n.rtp.Store(rt)
	done := make(chan struct{})
	var wgR, wgW sync.WaitGroup
	for _, x := range n.exts {
		x.toW = make(chan []*Packet, 256)
		x.freeW = make(chan []*Packet, 256)
		x.freeR = make(chan []*Packet, 64)
		wgR.Add(1)
		wgW.Add(1)
		go x.reader(n.pool, rt.ingress, rt.wallStart, done, nil, &wgR)
		go x.writer(n.pool, &wgW)
	}
	n.start()
	n.flushExts()

	// Arrivals wait in backlog (in arrival order) until every event due
	// before them has run: after the process was descheduled, a timer due
	// at t must not run before a frame that arrived before t.
	var backlog []ingress
	var err error
loop:
	for {
		now := int64(time.Since(rt.wallStart))
		if until > 0 && now >= int64(until) {
			now = int64(until)
		}
	collect:
		for {
			select {
			case in := <-rt.ingress:
				backlog = append(backlog, in)
			case fn := <-rt.prompt:
				fn() // at n.now: the events overdue run after it, at their times
			default:
				break collect
			}
		}
		backlog = n.runDue(rt, backlog, now)
		n.flushExts()
		if until > 0 && now >= int64(until) {
			break
		}
		wait := n.nextWait(rt.wallStart, until)
		if wait <= 0 {
			continue
		}
		timer.Reset(wait)
		select {
		case <-ctx.Done():
			err = ctx.Err()
			break loop
		case <-timer.C():
		case in := <-rt.ingress:
			backlog = append(backlog, in)
		case fn := <-rt.calls:
			n.now = max(n.now, int64(time.Since(rt.wallStart)))
			fn()
		case fn := <-rt.prompt:
			n.now = max(n.now, int64(time.Since(rt.wallStart)))
			fn()
		}
	}
	for _, in := range backlog {
		for _, p := range in.pkts {
			n.cache.put(p)
		}
	}
	// Shut down the edges: close the ports (unblocking readers), let the
	// writers drain, and return every buffer to the pool.
	// Closing a port first unblocks a writer stuck on back-pressure; frames
	// still queued for a backend at that point are dropped.
	close(done)
	for _, x := range n.exts {
		close(x.toW)
		if cerr := x.port.Close(); cerr != nil && err == nil && !errors.Is(cerr, net.ErrClosed) {
			err = fmt.Errorf("emu: closing %s: %w", x.name, cerr)
		}
	}
	return n.endRealtime(rt, &wgW, &wgR, err)
}

// endRealtime ends a real-time run whose ports are closed: it waits for
// the backends' writers and readers, returns the packets they delivered
// too late to the pool, detaches rt, and returns the run's statistics and
// err (nil if the run was stopped by its context, the normal way to end
// it).
func (n *Network) endRealtime(rt *realtime, wgW, wgR *sync.WaitGroup, err error) (RealtimeStats, error) {
	wgW.Wait()
	wgR.Wait()
	for {
		select {
		case in := <-rt.ingress:
			for _, p := range in.pkts {
				n.cache.put(p)
			}
			continue
		default:
		}
		break
	}
	rt.stats.Events = n.Events
	stats := rt.stats
	n.rtp.Store(nil)
	n.rt, n.env.real = nil, false
	close(rt.ended)
	if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		err = nil
	}
	return stats, err
}

// runDue runs, merged in time order, the arrivals of backlog (sorted by
// arrival time) and the events due by now: an arrival goes before an event
// due after it; each runs at its own time (an arrival read after now was
// taken at now at the latest). It counts late events in rt's stats and
// returns backlog emptied. Both real-time drivers run their turns with it.
func (n *Network) runDue(rt *realtime, backlog []ingress, now int64) []ingress {
	head := 0
	for {
		due := n.events.Len() > 0 && n.events.peek().time() <= now
		if head < len(backlog) && (!due || backlog[head].at <= n.events.peek().time()) {
			backlog[head].at = min(backlog[head].at, now)
			n.ingest(backlog[head])
			backlog[head] = ingress{}
			head++
			continue
		}
		if !due {
			break
		}
		e := n.pop()
		if late := time.Duration(now - e.at); late > rt.stats.MaxLate {
			rt.stats.MaxLate = late
		}
		if now-e.at > int64(100*time.Microsecond) {
			rt.stats.Late++
		}
		n.now = max(n.now, e.at)
		n.dispatch(&e)
	}
	return backlog[:0]
}

// nextWait is how long a real-time driver may sleep from now: until the
// next event, and no later than until (0: no end), with run time 0 at zero.
func (n *Network) nextWait(zero time.Time, until time.Duration) time.Duration {
	wait := time.Duration(1<<62 - 1)
	if n.events.Len() > 0 {
		wait = time.Duration(n.events.peek().time() - int64(time.Since(zero)))
	}
	if until > 0 {
		wait = min(wait, until-time.Since(zero))
	}
	return wait
}

// ingest puts frames a backend delivered on their link into the node,
// at the time they arrived.
func (n *Network) ingest(in ingress) {
	n.now = max(n.now, in.at)
	for i, p := range in.pkts {
		n.enqueue(in.ext.in, p)
		in.pkts[i] = nil
	}
	select {
	case in.ext.freeR <- in.pkts[:0]:
	default:
	}
}

func (n *Network) flushExts() {
	for _, x := range n.exts {
		switch {
		case len(x.pending) == 0:
		case x.pl != nil:
			n.pollWrite(x)
		default:
			x.flush(n)
		}
	}
}
