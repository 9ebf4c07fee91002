package up

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"
)

// The network start barrier: processes on different machines start their
// clocks together without shared files or agreeing wall clocks. The
// switch listens (--barrier-listen); every peer connects (--barrier),
// says it is ready once its ports are open, and when the switch's ports
// are open and --barrier-peers distinct peers are ready, the switch
// answers each with a delay and starts its own clock that long after
// sending; each peer starts that long after receiving. The clocks then
// differ by the differences of the one-way latencies of the answers
// (microseconds on a LAN), whatever the machines' wall clocks say.
//
// The protocol is lines of text over TCP, each at most barrierMaxLine
// bytes:
//
//	peer → switch   ready NAME        a peer (counted; NAME identifies it)
//	                watch NAME        an observer (not counted): gets the start too
//	switch → peer   ok                the hello was accepted
//	                start DELAY_NS    start the clock DELAY_NS after receiving this
//	                error TEXT        refused (malformed, replaced, too late); the switch closes
//
// A peer that connects again under the same name replaces its earlier
// connection (which is told so and closed); a connection that closes (or
// says anything) before the start no longer counts.
//
// After the start the peers' connections stay open for the end phase
// (Start and End; Serve and Wait close them at the start instead):
//
//	peer → switch   done NAME         a worker has finished every iteration
//	                report JSON       its final report, one line ≤ 1 MiB, once its run has ended
//	                rejoin NAME       (hello) a process that replaces a crashed peer
//	switch → peer   stop              every worker is done: end the run and report
//	                abort REASON      the run failed (a peer lost, the switch stopped): end and report
//	                ok                the report arrived (the switch then closes); a rejoin was accepted
//	                error TEXT        a malformed line, a refused rejoin; the switch closes
//
// A peer whose connection ends before its report counts as lost: if no
// process rejoins under its name within LostTimeout (a worker crashed and
// nothing replaces it: its job can never finish), the switch aborts the
// run. The switch waits at most ReportTimeout after the stop for the
// reports. A peer whose connection breaks before the stop (the switch
// died) ends its run with an error naming the barrier's address.

// DefaultBarrierDelay is the start delay the switch sends.
const DefaultBarrierDelay = 50 * time.Millisecond

// The end phase's bounds (Barrier.LostTimeout, Barrier.ReportTimeout).
const (
	DefaultBarrierLostTimeout   = 60 * time.Second
	DefaultBarrierReportTimeout = 30 * time.Second
)

const (
	barrierMaxLine = 256
	// barrierMaxReport bounds a line of the end phase: a peer's report.
	barrierMaxReport = 1 << 20
	// barrierHelloTimeout bounds how long a connection may take to say
	// hello.
	barrierHelloTimeout = 10 * time.Second
	barrierWriteTimeout = 2 * time.Second
	// barrierReportWriteTimeout bounds sending a report (up to 1 MiB).
	barrierReportWriteTimeout = 10 * time.Second
)

var errBarrierLineTooLong = fmt.Errorf("a line longer than %d bytes", barrierMaxReport)

// Barrier is the switch's side of the start barrier.
type Barrier struct {
	// Peers is how many distinct peers must be ready.
	Peers int
	// Delay is the start delay sent (0: DefaultBarrierDelay).
	Delay time.Duration
	// Timeout bounds the wait for the peers (0: until ctx ends).
	Timeout time.Duration
	// Logf, if set, gets one line per refused connection.
	Logf func(format string, a ...any)
	// Workers names the peers whose "done" ends the run (End); none:
	// every peer's.
	Workers []string
	// LostTimeout bounds how long End waits for a peer whose connection
	// ended before its report to rejoin (0: DefaultBarrierLostTimeout).
	LostTimeout time.Duration
	// ReportTimeout bounds End's wait for the reports after the stop (0:
	// DefaultBarrierReportTimeout).
	ReportTimeout time.Duration
}

type barrierConn struct {
	name string
	verb string // ready, watch or rejoin
	c    net.Conn
	mu   sync.Mutex // serializes writes
}

func (bc *barrierConn) send(line string) error {
	bc.mu.Lock()
	defer bc.mu.Unlock()
	bc.c.SetWriteDeadline(time.Now().Add(barrierWriteTimeout))
	_, err := io.WriteString(bc.c, line+"\n")
	return err
}

type barrierMsg struct {
	bc   *barrierConn
	line string
}

// BarrierRun is a started barrier (Barrier.Start): the peers' connections,
// open for the end phase (End).
type BarrierRun struct {
	b       *Barrier
	logf    func(string, ...any)
	started atomic.Bool
	hello   chan *barrierConn
	gone    chan *barrierConn
	msgs    chan barrierMsg
	done    chan struct{} // closed once the barrier is over: the handlers stop
	once    sync.Once
	conns   map[string]*barrierConn // the peers' connections, by name
	peers   []string                // the peers that started, sorted
	lost    map[string]time.Time    // Resume: every peer, until it rejoins
}

// close closes every connection and ends the handlers.
func (r *BarrierRun) close() {
	r.once.Do(func() {
		for _, bc := range r.conns {
			bc.c.Close()
		}
		close(r.done)
	})
}

// Serve runs the barrier on ln: it returns the start instant (now + Delay,
// taken just before the start is sent) once Peers distinct peers are
// ready, and the caller starts its clock then. It keeps answering late
// connections with an error until ctx ends, and then closes ln. An error
// (ctx ended, the timeout passed) names the peers that were ready. The
// peers' connections are closed after the start: no end phase (Start
// keeps them).
func (b *Barrier) Serve(ctx context.Context, ln net.Listener) (time.Time, error) {
	r, zero, err := b.Start(ctx, ln)
	if err == nil {
		r.close()
	}
	return zero, err
}

func (b *Barrier) newRun() *BarrierRun {
	r := &BarrierRun{b: b, logf: b.Logf, hello: make(chan *barrierConn), gone: make(chan *barrierConn),
		msgs: make(chan barrierMsg), done: make(chan struct{}), conns: map[string]*barrierConn{}}
	if r.logf == nil {
		r.logf = func(string, ...any) {}
	}
	return r
}

// Resume serves the end phase of a run that has started without this
// process (a switch that replaces a crashed one): every one of the named
// peers counts as lost until it rejoins (BarrierClient.RejoinWithin),
// within LostTimeout. The caller then calls End.
func (b *Barrier) Resume(ctx context.Context, ln net.Listener, peers []string) *BarrierRun {
	r := b.newRun()
	r.started.Store(true)
	r.peers = slices.Sorted(slices.Values(peers))
	r.lost = map[string]time.Time{}
	for _, n := range peers {
		r.lost[n] = time.Now()
	}
	r.serve(ctx, ln)
	return r
}

// serve accepts connections on ln (closed when ctx ends).
func (r *BarrierRun) serve(ctx context.Context, ln net.Listener) {
	go func() {
		<-ctx.Done()
		ln.Close()
	}()
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go r.handle(ctx, c)
		}
	}()
}

// Start is Serve, keeping the peers' connections open for the end phase:
// the caller then calls End.
func (b *Barrier) Start(ctx context.Context, ln net.Listener) (*BarrierRun, time.Time, error) {
	delay := b.Delay
	if delay <= 0 {
		delay = DefaultBarrierDelay
	}
	r := b.newRun()
	r.serve(ctx, ln)
	var timeout <-chan time.Time
	if b.Timeout > 0 {
		t := time.NewTimer(b.Timeout)
		defer t.Stop()
		timeout = t.C
	}
	ready := map[string]*barrierConn{}
	var watchers []*barrierConn
	fail := func(err error) (*BarrierRun, time.Time, error) {
		for _, bc := range ready {
			bc.send("error " + err.Error())
		}
		for _, bc := range watchers {
			bc.send("error " + err.Error())
			bc.c.Close()
		}
		r.conns = ready
		r.close()
		return nil, time.Time{}, err
	}
	for {
		if len(ready) >= b.Peers {
			r.started.Store(true)
			zero := time.Now().Add(delay)
			line := "start " + strconv.FormatInt(int64(delay), 10)
			for _, bc := range ready {
				bc.send(line)
			}
			for _, bc := range watchers {
				bc.send(line)
				bc.c.Close()
			}
			r.conns = ready
			for n := range ready {
				r.peers = append(r.peers, n)
			}
			slices.Sort(r.peers)
			return r, zero, nil
		}
		select {
		case bc := <-r.hello:
			if bc.verb == "watch" {
				watchers = append(watchers, bc)
				bc.send("ok")
				continue
			}
			if bc.verb != "ready" { // a rejoin that came before the start
				bc.send("error the run has not started: say ready")
				bc.c.Close()
				continue
			}
			if old := ready[bc.name]; old != nil {
				r.logf("barrier: %s connected again from %s: its earlier connection (%s) is dropped", bc.name, bc.c.RemoteAddr(), old.c.RemoteAddr())
				old.send("error replaced by a newer connection of " + bc.name)
				old.c.Close()
			}
			ready[bc.name] = bc
			bc.send("ok")
		case m := <-r.msgs:
			// Anything a peer says before the start ends its readiness.
			if ready[m.bc.name] == m.bc {
				delete(ready, m.bc.name)
				m.bc.send("error nothing to say before the start")
			}
			m.bc.c.Close()
		case bc := <-r.gone:
			if bc.verb == "watch" {
				for i, w := range watchers {
					if w == bc {
						watchers = append(watchers[:i], watchers[i+1:]...)
						break
					}
				}
			} else if ready[bc.name] == bc {
				delete(ready, bc.name)
			}
		case <-timeout:
			return fail(fmt.Errorf("barrier: %d of %d peers ready after %v (%s)", len(ready), b.Peers, b.Timeout, readyNames(ready)))
		case <-ctx.Done():
			return fail(fmt.Errorf("barrier: stopped with %d of %d peers ready (%s): %w", len(ready), b.Peers, readyNames(ready), ctx.Err()))
		}
	}
}

// End runs the end phase of a started barrier:
//
//   - a worker that has finished says "done NAME"; once every worker (the
//     Barrier's Workers, or every peer) is done, End sends every peer
//     "stop" and calls onStop(nil);
//   - every peer then ends its run and sends "report JSON" (its final
//     report, one line of at most 1 MiB), which End answers "ok" before
//     closing the connection;
//   - a peer whose connection ends before its report (it crashed, or its
//     machine did) may connect again with "rejoin NAME" (a process that
//     replaces it); if it has not within LostTimeout, End sends the others
//     "abort REASON" — they end and report as on a stop — and calls
//     onStop(err);
//   - ctx ending (the switch is stopped) aborts the same way.
//
// End returns once every peer has reported, or ReportTimeout after the
// stop, or at once when only peers without a connection have not: the
// reports by peer name, and an error if the run was aborted or reports
// are missing.
func (r *BarrierRun) End(ctx context.Context, onStop func(error)) (map[string]json.RawMessage, error) {
	defer r.close()
	b := r.b
	lostTimeout, reportTimeout := b.LostTimeout, b.ReportTimeout
	if lostTimeout <= 0 {
		lostTimeout = DefaultBarrierLostTimeout
	}
	if reportTimeout <= 0 {
		reportTimeout = DefaultBarrierReportTimeout
	}
	workers := b.Workers
	if len(workers) == 0 {
		workers = r.peers
	}
	isPeer := func(n string) bool { _, ok := slices.BinarySearch(r.peers, n); return ok }
	done := map[string]bool{}
	reports := map[string]json.RawMessage{}
	lost := map[string]time.Time{}
	for n, at := range r.lost {
		lost[n] = at
	}
	var stopping bool
	var stopLine string
	var stopAt time.Time
	var abortErr error
	stop := func(err error) {
		if stopping {
			return
		}
		stopping, stopAt, abortErr, stopLine = true, time.Now(), err, "stop"
		if err != nil {
			stopLine = "abort " + strings.ReplaceAll(err.Error(), "\n", " ")
			if len(stopLine) > barrierMaxLine-1 {
				stopLine = stopLine[:barrierMaxLine-1]
			}
		}
		for _, bc := range r.conns {
			bc.send(stopLine)
		}
		if onStop != nil {
			onStop(err)
		}
	}
	for _, w := range workers {
		if !isPeer(w) {
			stop(fmt.Errorf("barrier: worker %s is not among the peers that started (%s)", w, strings.Join(r.peers, ", ")))
			break
		}
	}
	dropped := func(bc *barrierConn, why string) {
		delete(r.conns, bc.name)
		bc.c.Close()
		if _, ok := reports[bc.name]; !ok {
			lost[bc.name] = time.Now()
			r.logf("barrier: %s's connection ended before its report (%s): waiting up to %v for it to rejoin", bc.name, why, lostTimeout)
		}
	}
	missing := func() []string {
		var m []string
		for _, n := range r.peers {
			if _, ok := reports[n]; !ok {
				m = append(m, n)
			}
		}
		return m
	}
	tick := time.NewTicker(50 * time.Millisecond)
	defer tick.Stop()
	ctxDone := ctx.Done()
	for {
		if !stopping && !slices.ContainsFunc(workers, func(w string) bool { return !done[w] }) {
			stop(nil)
		}
		if m := missing(); stopping && !slices.ContainsFunc(m, func(n string) bool { return r.conns[n] != nil }) {
			if len(m) > 0 {
				return reports, errors.Join(abortErr, fmt.Errorf("barrier: no report from %s (connection lost)", strings.Join(m, ", ")))
			}
			return reports, abortErr
		}
		select {
		case bc := <-r.hello:
			switch {
			case bc.verb != "rejoin":
				bc.send("error the run has started already")
				bc.c.Close()
				continue
			case !isPeer(bc.name):
				bc.send("error " + bc.name + " is not a peer of this run")
				bc.c.Close()
				continue
			}
			if _, ok := reports[bc.name]; ok {
				bc.send("error " + bc.name + " has reported already")
				bc.c.Close()
				continue
			}
			if old := r.conns[bc.name]; old != nil {
				old.send("error replaced by a newer connection of " + bc.name)
				old.c.Close()
			}
			r.conns[bc.name] = bc
			delete(lost, bc.name)
			r.logf("barrier: %s rejoined from %s", bc.name, bc.c.RemoteAddr())
			bc.send("ok")
			if stopping {
				bc.send(stopLine)
			}
		case m := <-r.msgs:
			bc := m.bc
			if r.conns[bc.name] != bc {
				bc.c.Close() // replaced, or reported already
				continue
			}
			verb, arg, _ := strings.Cut(m.line, " ")
			switch {
			case verb == "done" && (arg == "" || arg == bc.name):
				done[bc.name] = true
			case verb == "report" && json.Valid([]byte(arg)):
				reports[bc.name] = json.RawMessage(arg)
				bc.send("ok")
				delete(r.conns, bc.name)
				bc.c.Close()
			default:
				shown := m.line
				if len(shown) > 64 {
					shown = shown[:64] + "…"
				}
				bc.send(fmt.Sprintf("error want \"done %s\" or \"report JSON\", got %q", bc.name, shown))
				dropped(bc, fmt.Sprintf("it said %q", shown))
			}
		case bc := <-r.gone:
			if r.conns[bc.name] == bc {
				dropped(bc, "closed")
			}
		case <-tick.C:
			if stopping {
				if time.Since(stopAt) > reportTimeout {
					return reports, errors.Join(abortErr, fmt.Errorf("barrier: no report from %s within %v of the stop", strings.Join(missing(), ", "), reportTimeout))
				}
				continue
			}
			var gone []string
			for n, at := range lost {
				if time.Since(at) > lostTimeout {
					gone = append(gone, n)
				}
			}
			if len(gone) > 0 {
				slices.Sort(gone)
				stop(fmt.Errorf("barrier: %s's connection ended before the run's end and did not rejoin within %v (crashed?)", strings.Join(gone, ", "), lostTimeout))
			}
		case <-ctxDone:
			ctxDone = nil
			stop(fmt.Errorf("barrier: the switch was stopped (%v) before every worker was done", context.Cause(ctx)))
		}
	}
}

func readyNames(ready map[string]*barrierConn) string {
	if len(ready) == 0 {
		return "none"
	}
	var names []string
	for n := range ready {
		names = append(names, n)
	}
	slices.Sort(names)
	return "ready: " + strings.Join(names, ", ")
}

// handle reads one connection's hello and then its lines, until it ends.
func (r *BarrierRun) handle(ctx context.Context, c net.Conn) {
	bc := &barrierConn{c: c}
	refuse := func(why string) {
		r.logf("barrier: connection from %s refused: %s", c.RemoteAddr(), why)
		bc.send("error " + why)
		c.Close()
	}
	c.SetReadDeadline(time.Now().Add(barrierHelloTimeout))
	br := bufio.NewReaderSize(c, barrierMaxLine)
	line, err := br.ReadSlice('\n')
	if err != nil {
		if errors.Is(err, bufio.ErrBufferFull) {
			refuse(fmt.Sprintf("line longer than %d bytes", barrierMaxLine))
			return
		}
		c.Close() // closed or silent: nothing to answer
		return
	}
	verb, name, ok := strings.Cut(strings.TrimSpace(string(line)), " ")
	if !ok || (verb != "ready" && verb != "watch" && verb != "rejoin") || !validBarrierName(name) {
		refuse(fmt.Sprintf("want \"ready NAME\", \"watch NAME\" or \"rejoin NAME\" (NAME: 1-64 of [A-Za-z0-9._-]), got %q", strings.TrimSpace(string(line))))
		return
	}
	if started := r.started.Load(); started && verb != "rejoin" {
		refuse("the run has started already")
		return
	}
	bc.name, bc.verb = name, verb
	select {
	case r.hello <- bc:
	case <-r.done:
		refuse("the barrier is over")
		return
	case <-ctx.Done():
		c.Close()
		return
	}
	// From here on only the barrier's end (r.done) stops the handler, not
	// ctx: a switch that is stopped still collects the reports (End).
	c.SetReadDeadline(time.Time{})
	for {
		line, err := readBoundedLine(br, barrierMaxReport)
		if err != nil {
			if errors.Is(err, errBarrierLineTooLong) {
				bc.send("error " + err.Error())
			}
			select {
			case r.gone <- bc:
			case <-r.done:
			}
			c.Close()
			return
		}
		select {
		case r.msgs <- barrierMsg{bc, line}:
		case <-r.done:
			c.Close()
			return
		}
	}
}

// readBoundedLine reads a line of at most max bytes (its newline and
// surrounding space removed).
func readBoundedLine(br *bufio.Reader, max int) (string, error) {
	var buf []byte
	for {
		part, err := br.ReadSlice('\n')
		if len(buf)+len(part) > max {
			return "", errBarrierLineTooLong
		}
		buf = append(buf, part...)
		if err == nil {
			return strings.TrimSpace(string(buf)), nil
		}
		if !errors.Is(err, bufio.ErrBufferFull) {
			return "", err
		}
	}
}

func validBarrierName(s string) bool {
	if s == "" || len(s) > 64 {
		return false
	}
	for _, r := range s {
		if !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '.' || r == '_' || r == '-') {
			return false
		}
	}
	return true
}

// BarrierClient is a peer's (or an observer's) side of the start barrier.
type BarrierClient struct {
	// Addr is the switch's barrier, HOST:PORT (a host name is looked up
	// at each attempt).
	Addr string
	// Name identifies the peer (its node); Watch makes it an observer.
	Name  string
	Watch bool
	// Rejoin connects a process that replaces a crashed peer after the
	// start (its clock is the run's start file's): Join then returns once
	// the switch accepted it, with no start.
	Rejoin bool
	// RejoinWithin, if positive, makes a joined peer whose connection
	// breaks before the stop (the switch crashed and a process replacing
	// it listens again) rejoin, retrying that long before its run ends with
	// the error; 0: the error at once.
	RejoinWithin time.Duration
	// ConnectTimeout bounds the attempts to connect, every 100 ms (0: 60 s).
	ConnectTimeout time.Duration
	// WaitTimeout bounds the wait for the start once connected (0: until
	// ctx ends).
	WaitTimeout time.Duration
	// Dial connects to a literal address (default: a TCP dial).
	Dial func(ctx context.Context, addr string) (net.Conn, error)
	// Connected, if set, is called once the switch has accepted the hello.
	Connected func()
}

// Wait connects, says ready (or watch) and returns the start instant:
// when the start arrived plus the delay it carries. It does not sleep
// until then. The connection is closed: no end phase (Join keeps it).
func (c BarrierClient) Wait(ctx context.Context) (time.Time, error) {
	p, zero, err := c.Join(ctx)
	if err == nil {
		p.Close()
	}
	return zero, err
}

// Join is Wait, keeping the connection for the end phase (BarrierPeer).
func (c BarrierClient) Join(ctx context.Context) (*BarrierPeer, time.Time, error) {
	conn, lr, zero, err := c.connect(ctx)
	if err != nil {
		return nil, time.Time{}, err
	}
	p := &BarrierPeer{client: c, addr: c.Addr, name: c.Name, conn: conn, end: make(chan struct{}), acked: make(chan struct{}), eof: make(chan struct{})}
	go p.read(lr)
	return p, zero, nil
}

// connect connects, says hello and returns the connection once started
// (or, for a rejoin, accepted).
func (c BarrierClient) connect(ctx context.Context) (net.Conn, *lineReader, time.Time, error) {
	if !validBarrierName(c.Name) {
		return nil, nil, time.Time{}, fmt.Errorf("barrier: name %q: want 1-64 of [A-Za-z0-9._-]", c.Name)
	}
	timeout := c.ConnectTimeout
	if timeout <= 0 {
		timeout = 60 * time.Second
	}
	dial := c.Dial
	if dial == nil {
		dial = func(ctx context.Context, addr string) (net.Conn, error) {
			var d net.Dialer
			return d.DialContext(ctx, "tcp4", addr)
		}
	}
	deadline := time.Now().Add(timeout)
	var conn net.Conn
	var last error
	for {
		addr, err := resolveHostPort(ctx, c.Addr)
		if err == nil {
			dctx, cancel := context.WithTimeout(ctx, time.Until(deadline))
			conn, err = dial(dctx, addr)
			cancel()
		}
		if err == nil {
			break
		}
		if last == nil || !time.Now().After(deadline) {
			last = err // not the attempt the deadline cut short: the reason, "connection refused"
		}
		if ctx.Err() != nil {
			return nil, nil, time.Time{}, fmt.Errorf("barrier %s: stopped while connecting: %w", c.Addr, ctx.Err())
		}
		if time.Now().After(deadline) {
			return nil, nil, time.Time{}, fmt.Errorf("barrier %s: could not connect within %v: %w", c.Addr, timeout, last)
		}
		select {
		case <-time.After(100 * time.Millisecond):
		case <-ctx.Done():
		}
	}
	joined := false
	defer func() {
		if !joined {
			conn.Close()
		}
	}()
	stop := context.AfterFunc(ctx, func() { conn.Close() })
	defer stop()
	verb := "ready"
	if c.Watch {
		verb = "watch"
	} else if c.Rejoin {
		verb = "rejoin"
	}
	lr := newLineReader(conn) // receive timestamps on before anything arrives
	conn.SetWriteDeadline(time.Now().Add(barrierWriteTimeout))
	if _, err := io.WriteString(conn, verb+" "+c.Name+"\n"); err != nil {
		return nil, nil, time.Time{}, fmt.Errorf("barrier %s: %w", c.Addr, err)
	}
	if c.WaitTimeout > 0 {
		conn.SetReadDeadline(time.Now().Add(c.WaitTimeout))
	}
	join := func(zero time.Time) (net.Conn, *lineReader, time.Time, error) {
		if !stop() {
			return nil, nil, time.Time{}, fmt.Errorf("barrier %s: stopped while waiting for the start: %w", c.Addr, ctx.Err())
		}
		conn.SetReadDeadline(time.Time{})
		joined = true
		return conn, lr, zero, nil
	}
	for {
		line, at, err := lr.readLine()
		if err != nil {
			if ctx.Err() != nil {
				return nil, nil, time.Time{}, fmt.Errorf("barrier %s: stopped while waiting for the start: %w", c.Addr, ctx.Err())
			}
			var ne net.Error
			if errors.As(err, &ne) && ne.Timeout() {
				return nil, nil, time.Time{}, fmt.Errorf("barrier %s: no start within %v", c.Addr, c.WaitTimeout)
			}
			return nil, nil, time.Time{}, fmt.Errorf("barrier %s: connection ended before the start: %w", c.Addr, err)
		}
		verb, arg, _ := strings.Cut(strings.TrimSpace(line), " ")
		switch verb {
		case "ok":
			if c.Connected != nil {
				c.Connected()
			}
			if c.Rejoin {
				return join(time.Time{})
			}
		case "start":
			d, err := strconv.ParseInt(arg, 10, 64)
			if err != nil || d < 0 || time.Duration(d) > time.Minute {
				return nil, nil, time.Time{}, fmt.Errorf("barrier %s: bad start %q", c.Addr, arg)
			}
			return join(at.Add(time.Duration(d)))
		case "error":
			return nil, nil, time.Time{}, fmt.Errorf("barrier %s: refused: %s", c.Addr, arg)
		default:
			return nil, nil, time.Time{}, fmt.Errorf("barrier %s: unexpected answer %q", c.Addr, strings.TrimSpace(line))
		}
	}
}

// BarrierPeer is a peer's connection to the barrier after the start: the
// end phase (Barrier's End). Done says the worker has finished; End ends
// when the switch says stop or abort, or the connection breaks; Report
// sends the final report.
type BarrierPeer struct {
	client     BarrierClient
	addr, name string
	mu         sync.Mutex // writes, and conn
	conn       net.Conn
	sentDone   bool
	closing    atomic.Bool
	once       sync.Once
	end        chan struct{} // closed: stop, abort, or the connection ended
	err        error         // why it ended (nil: stop); set before end closes
	reported   atomic.Bool
	acked      chan struct{} // the switch acknowledged the report
	eof        chan struct{} // the reader has returned
}

func (p *BarrierPeer) finish(err error) {
	p.once.Do(func() {
		p.err = err
		close(p.end)
	})
}

func (p *BarrierPeer) read(lr *lineReader) {
	defer close(p.eof)
	for {
		line, _, err := lr.readLine()
		if err != nil {
			err = fmt.Errorf("barrier %s: the connection to the switch ended before the run's end: %w", p.addr, err)
			select {
			case <-p.end:
			default:
				if p.client.RejoinWithin > 0 && !p.closing.Load() && !p.reported.Load() {
					nlr, rerr := p.rejoin()
					if rerr == nil {
						lr = nlr
						continue
					}
					err = fmt.Errorf("%w; no rejoin within %v: %v", err, p.client.RejoinWithin, rerr)
				}
			}
			p.finish(err)
			return
		}
		verb, arg, _ := strings.Cut(strings.TrimSpace(line), " ")
		switch verb {
		case "stop":
			p.finish(nil)
		case "abort":
			p.finish(fmt.Errorf("barrier %s: the switch aborted the run: %s", p.addr, arg))
		case "ok":
			if p.reported.Load() {
				close(p.acked)
				return
			}
		case "error":
			p.finish(fmt.Errorf("barrier %s: the switch refused: %s", p.addr, arg))
			return
		default:
			p.finish(fmt.Errorf("barrier %s: unexpected %q from the switch", p.addr, line))
			return
		}
	}
}

// rejoin connects again (a switch that replaces a crashed one) and says
// done again if it had.
func (p *BarrierPeer) rejoin() (*lineReader, error) {
	c := p.client
	c.Rejoin, c.Connected = true, nil
	deadline := time.Now().Add(c.RejoinWithin)
	var conn net.Conn
	var lr *lineReader
	for {
		// A connection the dying switch's listener took is reset: try
		// again, until the deadline or the switch refuses.
		c.ConnectTimeout = max(time.Until(deadline), time.Millisecond)
		var err error
		conn, lr, _, err = c.connect(context.Background())
		if err == nil {
			break
		}
		if strings.Contains(err.Error(), ": refused: ") || time.Now().After(deadline) || p.closing.Load() {
			return nil, err
		}
		time.Sleep(100 * time.Millisecond)
	}
	p.mu.Lock()
	old := p.conn
	p.conn = conn
	done := p.sentDone
	p.mu.Unlock()
	old.Close()
	if p.closing.Load() {
		conn.Close()
	}
	if done {
		p.Done()
	}
	return lr, nil
}

func (p *BarrierPeer) send(line string, timeout time.Duration) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if strings.HasPrefix(line, "done") {
		p.sentDone = true
	}
	p.conn.SetWriteDeadline(time.Now().Add(timeout))
	_, err := io.WriteString(p.conn, line+"\n")
	return err
}

// Done tells the switch this worker has finished every iteration.
func (p *BarrierPeer) Done() error { return p.send("done "+p.name, barrierWriteTimeout) }

// End is closed when the run ends: the switch said stop (Err nil) or
// abort, or the connection broke (Err says which, naming the barrier).
func (p *BarrierPeer) End() <-chan struct{} { return p.end }

// Err is why End closed (nil: a stop, or not yet).
func (p *BarrierPeer) Err() error {
	select {
	case <-p.end:
		return p.err
	default:
		return nil
	}
}

// Report sends the peer's final report (a JSON value on one line; larger
// than barrierMaxReport it is replaced by a short one saying so), waits
// until the switch has it, and closes the connection.
func (p *BarrierPeer) Report(v any) error {
	defer p.Close()
	b, err := json.Marshal(v)
	if err != nil {
		return err
	}
	if len(b)+len("report ") > barrierMaxReport {
		b, _ = json.Marshal(map[string]string{"node": p.name, "error": fmt.Sprintf("the report of %d bytes exceeds the barrier's %d", len(b), barrierMaxReport)})
	}
	select {
	case <-p.end:
		if p.err != nil && strings.Contains(p.err.Error(), "connection to the switch ended") {
			return p.err
		}
	default:
	}
	p.reported.Store(true)
	if err := p.send("report "+string(b), barrierReportWriteTimeout); err != nil {
		return fmt.Errorf("barrier %s: sending the report: %w", p.addr, err)
	}
	select {
	case <-p.acked:
		return nil
	case <-p.eof:
		select {
		case <-p.acked:
			return nil
		default:
		}
		return fmt.Errorf("barrier %s: the connection to the switch ended before it acknowledged the report", p.addr)
	case <-time.After(barrierReportWriteTimeout):
		return fmt.Errorf("barrier %s: the switch did not acknowledge the report within %v", p.addr, barrierReportWriteTimeout)
	}
}

// Close closes the connection.
func (p *BarrierPeer) Close() {
	p.closing.Store(true)
	p.mu.Lock()
	defer p.mu.Unlock()
	p.conn.Close()
}

// resolveHostPort looks a HOST:PORT's host name up (IPv4) and returns a
// literal address; a literal is returned as it is.
func resolveHostPort(ctx context.Context, hp string) (string, error) {
	h, p, err := net.SplitHostPort(hp)
	if err != nil {
		return "", err
	}
	if net.ParseIP(h) != nil {
		return hp, nil
	}
	ips, err := net.DefaultResolver.LookupIP(ctx, "ip4", h)
	if err != nil {
		return "", err
	}
	return net.JoinHostPort(ips[0].String(), p), nil
}

// sleepUntil waits until t or ctx's end.
func sleepUntil(ctx context.Context, t time.Time) error {
	d := time.Until(t)
	if d <= 0 {
		return nil
	}
	tm := time.NewTimer(d)
	defer tm.Stop()
	select {
	case <-tm.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// lineReader reads a barrier connection's lines, each with the time its
// last bytes arrived: the kernel's receive timestamp (SO_TIMESTAMPNS) on a
// TCP socket, so that how late the process wakes to read the start does
// not shift its clock; time.Now() after the read elsewhere.
type lineReader struct {
	conn net.Conn
	rc   syscall.RawConn // nil: no kernel timestamps
	buf  []byte          // read, not yet returned
	at   time.Time       // when buf's last bytes arrived
}

func newLineReader(conn net.Conn) *lineReader {
	lr := &lineReader{conn: conn}
	if tc, ok := conn.(*net.TCPConn); ok {
		if rc, err := tc.SyscallConn(); err == nil {
			var serr error
			rc.Control(func(fd uintptr) { serr = unix.SetsockoptInt(int(fd), unix.SOL_SOCKET, unix.SO_TIMESTAMPNS, 1) })
			if serr == nil {
				lr.rc = rc
			}
		}
	}
	return lr
}

// readLine returns the next line (without its newline) and when it
// arrived; a line longer than barrierMaxLine is an error.
func (lr *lineReader) readLine() (string, time.Time, error) {
	for {
		if i := bytes.IndexByte(lr.buf, '\n'); i >= 0 {
			line := string(lr.buf[:i])
			lr.buf = lr.buf[i+1:]
			return line, lr.at, nil
		}
		if len(lr.buf) >= barrierMaxLine {
			return "", time.Time{}, fmt.Errorf("a line longer than %d bytes", barrierMaxLine)
		}
		var chunk [barrierMaxLine]byte
		n, at, err := lr.read(chunk[:barrierMaxLine-len(lr.buf)])
		if n > 0 {
			lr.buf = append(lr.buf, chunk[:n]...)
			lr.at = at
		}
		if err != nil {
			return "", time.Time{}, err
		}
	}
}

func (lr *lineReader) read(p []byte) (int, time.Time, error) {
	if lr.rc == nil {
		n, err := lr.conn.Read(p)
		return n, time.Now(), err
	}
	var n int
	var at time.Time
	var rerr error
	oob := make([]byte, unix.CmsgSpace(16))
	err := lr.rc.Read(func(fd uintptr) bool {
		var oobn int
		n, oobn, _, _, rerr = unix.Recvmsg(int(fd), p, oob, 0)
		if rerr == unix.EAGAIN {
			return false // wait for readiness (the conn's deadline holds)
		}
		at = time.Now()
		if rerr == nil {
			if ts, ok := rxTimestamp(oob[:oobn]); ok {
				at = ts
			}
		}
		return true
	})
	if err != nil {
		return 0, time.Time{}, err
	}
	if rerr != nil {
		return 0, time.Time{}, rerr
	}
	if n == 0 {
		return 0, time.Time{}, io.EOF
	}
	return n, at, nil
}

// rxTimestamp finds SCM_TIMESTAMPNS in a control message.
func rxTimestamp(oob []byte) (time.Time, bool) {
	msgs, err := unix.ParseSocketControlMessage(oob)
	if err != nil {
		return time.Time{}, false
	}
	for _, m := range msgs {
		if m.Header.Level == unix.SOL_SOCKET && m.Header.Type == unix.SCM_TIMESTAMPNS && len(m.Data) >= int(unsafe.Sizeof(unix.Timespec{})) {
			ts := *(*unix.Timespec)(unsafe.Pointer(&m.Data[0]))
			return time.Unix(ts.Unix()), true
		}
	}
	return time.Time{}, false
}
