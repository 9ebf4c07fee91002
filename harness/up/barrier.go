package up

import (
	"bufio"
	"bytes"
	"context"
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
// connection (which is told so and closed); a connection that closes
// before the start no longer counts.

// DefaultBarrierDelay is the start delay the switch sends.
const DefaultBarrierDelay = 50 * time.Millisecond

const (
	barrierMaxLine = 256
	// barrierHelloTimeout bounds how long a connection may take to say
	// hello.
	barrierHelloTimeout = 10 * time.Second
	barrierWriteTimeout = 2 * time.Second
)

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
}

type barrierConn struct {
	name  string
	watch bool
	c     net.Conn
	mu    sync.Mutex // serializes writes
}

func (bc *barrierConn) send(line string) error {
	bc.mu.Lock()
	defer bc.mu.Unlock()
	bc.c.SetWriteDeadline(time.Now().Add(barrierWriteTimeout))
	_, err := io.WriteString(bc.c, line+"\n")
	return err
}

// Serve runs the barrier on ln: it returns the start instant (now + Delay,
// taken just before the start is sent) once Peers distinct peers are
// ready, and the caller starts its clock then. It keeps answering late
// connections with an error until ctx ends, and then closes ln. An error
// (ctx ended, the timeout passed) names the peers that were ready.
func (b *Barrier) Serve(ctx context.Context, ln net.Listener) (time.Time, error) {
	delay := b.Delay
	if delay <= 0 {
		delay = DefaultBarrierDelay
	}
	logf := b.Logf
	if logf == nil {
		logf = func(string, ...any) {}
	}
	var started atomic.Bool
	hello := make(chan *barrierConn)
	gone := make(chan *barrierConn)
	done := make(chan struct{}) // Serve's loop has returned
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
			go b.handle(ctx, c, &started, hello, gone, done, logf)
		}
	}()
	var timeout <-chan time.Time
	if b.Timeout > 0 {
		t := time.NewTimer(b.Timeout)
		defer t.Stop()
		timeout = t.C
	}
	ready := map[string]*barrierConn{}
	var watchers []*barrierConn
	defer close(done)
	fail := func(err error) (time.Time, error) {
		for _, bc := range ready {
			bc.send("error " + err.Error())
			bc.c.Close()
		}
		for _, bc := range watchers {
			bc.send("error " + err.Error())
			bc.c.Close()
		}
		return time.Time{}, err
	}
	for {
		if len(ready) >= b.Peers {
			started.Store(true)
			zero := time.Now().Add(delay)
			line := "start " + strconv.FormatInt(int64(delay), 10)
			for _, bc := range ready {
				bc.send(line)
				bc.c.Close()
			}
			for _, bc := range watchers {
				bc.send(line)
				bc.c.Close()
			}
			return zero, nil
		}
		select {
		case bc := <-hello:
			if bc.watch {
				watchers = append(watchers, bc)
				bc.send("ok")
				continue
			}
			if old := ready[bc.name]; old != nil {
				logf("barrier: %s connected again from %s: its earlier connection (%s) is dropped", bc.name, bc.c.RemoteAddr(), old.c.RemoteAddr())
				old.send("error replaced by a newer connection of " + bc.name)
				old.c.Close()
			}
			ready[bc.name] = bc
			bc.send("ok")
		case bc := <-gone:
			if bc.watch {
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

// handle reads one connection's hello and then watches for its end.
func (b *Barrier) handle(ctx context.Context, c net.Conn, started *atomic.Bool, hello, gone chan<- *barrierConn, done <-chan struct{}, logf func(string, ...any)) {
	bc := &barrierConn{c: c}
	refuse := func(why string) {
		logf("barrier: connection from %s refused: %s", c.RemoteAddr(), why)
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
	if !ok || (verb != "ready" && verb != "watch") || !validBarrierName(name) {
		refuse(fmt.Sprintf("want \"ready NAME\" or \"watch NAME\" (NAME: 1-64 of [A-Za-z0-9._-]), got %q", strings.TrimSpace(string(line))))
		return
	}
	if started.Load() {
		refuse("the run has started already")
		return
	}
	bc.name, bc.watch = name, verb == "watch"
	select {
	case hello <- bc:
	case <-done:
		refuse("the barrier is over")
		return
	case <-ctx.Done():
		c.Close()
		return
	}
	// Anything more, or the end of the connection, ends its readiness.
	c.SetReadDeadline(time.Time{})
	var one [1]byte
	c.Read(one[:])
	select {
	case gone <- bc:
	case <-done:
	case <-ctx.Done():
	}
	c.Close()
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
// until then.
func (c BarrierClient) Wait(ctx context.Context) (time.Time, error) {
	if !validBarrierName(c.Name) {
		return time.Time{}, fmt.Errorf("barrier: name %q: want 1-64 of [A-Za-z0-9._-]", c.Name)
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
			return time.Time{}, fmt.Errorf("barrier %s: stopped while connecting: %w", c.Addr, ctx.Err())
		}
		if time.Now().After(deadline) {
			return time.Time{}, fmt.Errorf("barrier %s: could not connect within %v: %w", c.Addr, timeout, last)
		}
		select {
		case <-time.After(100 * time.Millisecond):
		case <-ctx.Done():
		}
	}
	defer conn.Close()
	stop := context.AfterFunc(ctx, func() { conn.Close() })
	defer stop()
	verb := "ready"
	if c.Watch {
		verb = "watch"
	}
	lr := newLineReader(conn) // receive timestamps on before anything arrives
	conn.SetWriteDeadline(time.Now().Add(barrierWriteTimeout))
	if _, err := io.WriteString(conn, verb+" "+c.Name+"\n"); err != nil {
		return time.Time{}, fmt.Errorf("barrier %s: %w", c.Addr, err)
	}
	if c.WaitTimeout > 0 {
		conn.SetReadDeadline(time.Now().Add(c.WaitTimeout))
	}
	for {
		line, at, err := lr.readLine()
		if err != nil {
			if ctx.Err() != nil {
				return time.Time{}, fmt.Errorf("barrier %s: stopped while waiting for the start: %w", c.Addr, ctx.Err())
			}
			var ne net.Error
			if errors.As(err, &ne) && ne.Timeout() {
				return time.Time{}, fmt.Errorf("barrier %s: no start within %v", c.Addr, c.WaitTimeout)
			}
			return time.Time{}, fmt.Errorf("barrier %s: connection ended before the start: %w", c.Addr, err)
		}
		verb, arg, _ := strings.Cut(strings.TrimSpace(line), " ")
		switch verb {
		case "ok":
			if c.Connected != nil {
				c.Connected()
			}
		case "start":
			d, err := strconv.ParseInt(arg, 10, 64)
			if err != nil || d < 0 || time.Duration(d) > time.Minute {
				return time.Time{}, fmt.Errorf("barrier %s: bad start %q", c.Addr, arg)
			}
			return at.Add(time.Duration(d)), nil
		case "error":
			return time.Time{}, fmt.Errorf("barrier %s: refused: %s", c.Addr, arg)
		default:
			return time.Time{}, fmt.Errorf("barrier %s: unexpected answer %q", c.Addr, strings.TrimSpace(line))
		}
	}
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
