package up

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"net"
	"strings"
	"testing"
	"time"
)

func listenLoopback(t *testing.T) net.Listener {
	t.Helper()
	ln, err := net.Listen("tcp4", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	return ln
}

func serveBarrier(ctx context.Context, b *Barrier, ln net.Listener) chan barrierResult {
	ch := make(chan barrierResult, 1)
	go func() { z, err := b.Serve(ctx, ln); ch <- barrierResult{z, err} }()
	return ch
}

func waitBarrier(ctx context.Context, c BarrierClient) chan barrierResult {
	ch := make(chan barrierResult, 1)
	go func() { z, err := c.Wait(ctx); ch <- barrierResult{z, err} }()
	return ch
}

func recvWithin(t *testing.T, ch chan barrierResult, d time.Duration, what string) barrierResult {
	t.Helper()
	select {
	case r := <-ch:
		return r
	case <-time.After(d):
		t.Fatalf("%s: nothing within %v", what, d)
		return barrierResult{}
	}
}

// rawLine connects, writes s and returns the first line answered ("" if
// the connection ended without one).
func rawLine(t *testing.T, addr, s string) string {
	t.Helper()
	c, err := net.Dial("tcp4", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(5 * time.Second))
	if _, err := c.Write([]byte(s)); err != nil {
		return ""
	}
	line, _ := bufio.NewReader(c).ReadString('\n')
	return strings.TrimSpace(line)
}

// TestBarrier: N peers and an observer start within a few ms of the
// switch's start instant; garbage, over-long lines, silent and closed
// connections, a peer connecting twice and a peer leaving before the start
// neither crash nor hang the barrier nor count as ready; a connection
// after the start is refused; every timeout is bounded. Loopback, no root.
func TestBarrier(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	ln := listenLoopback(t)
	addr := ln.Addr().String()
	const delay = 100 * time.Millisecond
	srv := serveBarrier(ctx, &Barrier{Peers: 3, Delay: delay, Timeout: 15 * time.Second, Logf: t.Logf}, ln)

	// Garbage of every kind, answered with an error (or nothing) and not
	// counted.
	for _, g := range []string{"hello\n", "ready\n", "ready a b\n", "ready " + strings.Repeat("x", 65) + "\n", "\x00\xff\x01\n", strings.Repeat("y", 1000)} {
		if got := rawLine(t, addr, g); !strings.HasPrefix(got, "error ") {
			t.Errorf("%q answered %q, want an error", g, got)
		}
	}
	silent, err := net.Dial("tcp4", addr) // says nothing: holds only its own goroutine
	if err != nil {
		t.Fatal(err)
	}
	defer silent.Close()
	if c, err := net.Dial("tcp4", addr); err == nil {
		c.Close() // connects and leaves at once
	}
	// A peer that is ready and then leaves before the start does not count.
	leaver, err := net.Dial("tcp4", addr)
	if err != nil {
		t.Fatal(err)
	}
	fmt.Fprintf(leaver, "ready gone\n")
	if l, _ := bufio.NewReader(leaver).ReadString('\n'); strings.TrimSpace(l) != "ok" {
		t.Fatalf("leaver got %q", l)
	}
	leaver.Close()
	// One that is ready and then talks before the start (a done, a
	// report: the end phase's lines) is dropped and does not count either.
	talker, err := net.Dial("tcp4", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer talker.Close()
	fmt.Fprintf(talker, "ready talker\n")
	tr := bufio.NewReader(talker)
	if l, _ := tr.ReadString('\n'); strings.TrimSpace(l) != "ok" {
		t.Fatalf("talker got %q", l)
	}
	fmt.Fprintf(talker, "done talker\n")
	if l, _ := tr.ReadString('\n'); !strings.HasPrefix(l, "error ") {
		t.Errorf("a done before the start: %q, want an error", l)
	}
	// A rejoin before the start is refused.
	if got := rawLine(t, addr, "rejoin w1.0\n"); !strings.Contains(got, "not started") {
		t.Errorf("a rejoin before the start: %q", got)
	}

	client := func(name string, watch bool) BarrierClient {
		return BarrierClient{Addr: addr, Name: name, Watch: watch, ConnectTimeout: 5 * time.Second, WaitTimeout: 15 * time.Second}
	}
	watcher := waitBarrier(ctx, client("inabox-up", true))
	first := waitBarrier(ctx, client("w1.0", false))
	time.Sleep(100 * time.Millisecond)
	again := waitBarrier(ctx, client("w1.0", false)) // the same peer again: replaces the first
	if r := recvWithin(t, first, 5*time.Second, "replaced connection"); r.err == nil || !strings.Contains(r.err.Error(), "replaced") {
		t.Errorf("the replaced connection's Wait: %v, want an error saying it was replaced", r.err)
	}
	p2 := waitBarrier(ctx, client("w1.1", false))
	time.Sleep(200 * time.Millisecond)
	select {
	case r := <-srv:
		t.Fatalf("the barrier started with 2 of 3 peers (gone, a duplicate and garbage counted?): %v %v", r.zero, r.err)
	default:
	}
	p3 := waitBarrier(ctx, client("ps", false))
	s := recvWithin(t, srv, 5*time.Second, "Serve")
	if s.err != nil {
		t.Fatal(s.err)
	}
	for name, ch := range map[string]chan barrierResult{"watcher": watcher, "w1.0": again, "w1.1": p2, "ps": p3} {
		r := recvWithin(t, ch, 5*time.Second, name)
		if r.err != nil {
			t.Errorf("%s: %v", name, r.err)
			continue
		}
		// Loopback: the start's one-way latency is microseconds; the
		// bound allows for a loaded machine.
		if skew := r.zero.Sub(s.zero); skew < 0 || skew > 30*time.Millisecond {
			t.Errorf("%s starts %v after the switch, want 0-30 ms", name, skew)
		}
		if until := time.Until(r.zero); until > delay {
			t.Errorf("%s: start %v ahead, more than the delay %v", name, until, delay)
		}
	}
	// After the start: refused, at once.
	if got := rawLine(t, addr, "ready late\n"); !strings.Contains(got, "started already") && !strings.Contains(got, "barrier is over") {
		t.Errorf("a connection after the start got %q", got)
	}
	cancel() // closes the listener
	time.Sleep(50 * time.Millisecond)
	if c, err := net.Dial("tcp4", addr); err == nil {
		c.Close()
		t.Error("the listener is still open after ctx ended")
	}
}

// TestBarrierTimeouts: a barrier missing a peer, a client with nothing to
// connect to, and a client whose start never comes each fail within their
// bounds, naming what they waited for.
func TestBarrierTimeouts(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	ln := listenLoopback(t)
	addr := ln.Addr().String()
	sctx, scancel := context.WithCancel(ctx)
	defer scancel()
	srv := serveBarrier(sctx, &Barrier{Peers: 2, Timeout: 500 * time.Millisecond}, ln)
	peer := waitBarrier(ctx, BarrierClient{Addr: addr, Name: "w1.0", WaitTimeout: 5 * time.Second})
	t0 := time.Now()
	r := recvWithin(t, srv, 3*time.Second, "Serve with a peer missing")
	if r.err == nil || !strings.Contains(r.err.Error(), "1 of 2 peers ready") || !strings.Contains(r.err.Error(), "w1.0") {
		t.Errorf("Serve: %v", r.err)
	}
	if d := time.Since(t0); d > 2*time.Second {
		t.Errorf("Serve's 500 ms timeout took %v", d)
	}
	if r := recvWithin(t, peer, 3*time.Second, "the waiting peer"); r.err == nil || !strings.Contains(r.err.Error(), "refused") {
		t.Errorf("the peer of a barrier that gave up: %v", r.err)
	}
	scancel()

	// Nothing listens: a bounded number of attempts.
	dead := listenLoopback(t)
	deadAddr := dead.Addr().String()
	dead.Close()
	t0 = time.Now()
	_, err := BarrierClient{Addr: deadAddr, Name: "w1.0", ConnectTimeout: 300 * time.Millisecond}.Wait(ctx)
	if err == nil || !strings.Contains(err.Error(), "could not connect within 300ms") {
		t.Errorf("connect to nothing: %v", err)
	}
	if d := time.Since(t0); d > 2*time.Second {
		t.Errorf("a 300 ms connect timeout took %v", d)
	}
	// A name that does not resolve: the same bound, the name in the error.
	_, err = BarrierClient{Addr: "inabox-no-such-host.invalid:7100", Name: "w1.0", ConnectTimeout: 300 * time.Millisecond}.Wait(ctx)
	if err == nil || !strings.Contains(err.Error(), "inabox-no-such-host.invalid") {
		t.Errorf("unresolvable name: %v", err)
	}
	// A server that accepts and never answers.
	mute := listenLoopback(t)
	go func() {
		for {
			c, err := mute.Accept()
			if err != nil {
				return
			}
			defer c.Close()
		}
	}()
	t0 = time.Now()
	_, err = BarrierClient{Addr: mute.Addr().String(), Name: "w1.0", WaitTimeout: 300 * time.Millisecond}.Wait(ctx)
	if err == nil || !strings.Contains(err.Error(), "no start within 300ms") {
		t.Errorf("mute server: %v", err)
	}
	if d := time.Since(t0); d > 2*time.Second {
		t.Errorf("a 300 ms wait timeout took %v", d)
	}
	// ctx ending stops a wait at once.
	cctx, ccancel := context.WithCancel(ctx)
	ch := waitBarrier(cctx, BarrierClient{Addr: mute.Addr().String(), Name: "w1.0"})
	time.Sleep(50 * time.Millisecond)
	ccancel()
	if r := recvWithin(t, ch, 2*time.Second, "cancelled wait"); r.err == nil || !strings.Contains(r.err.Error(), "stopped") {
		t.Errorf("cancelled wait: %v", r.err)
	}
}

// TestBarrierArrivalTime: a peer dates the start by the kernel's receive
// timestamp, not by when it got round to reading it, so a peer that
// wakes late does not start late.
func TestBarrierArrivalTime(t *testing.T) {
	ln := listenLoopback(t)
	go func() {
		c, err := ln.Accept()
		if err != nil {
			return
		}
		defer c.Close()
		var b [1]byte
		c.Read(b[:]) // the client has its reader: timestamps are on
		c.Write([]byte("start 0\n"))
		time.Sleep(time.Second)
	}()
	c, err := net.Dial("tcp4", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	lr := newLineReader(c)
	if lr.rc == nil {
		t.Fatal("no SO_TIMESTAMPNS on a TCP socket")
	}
	// The kernel turns receive timestamps on asynchronously (a static key
	// flipped from a work queue) the first time a socket asks: in a run
	// the start comes tens of ms after the connection, as here.
	time.Sleep(20 * time.Millisecond)
	c.Write([]byte("x"))
	time.Sleep(100 * time.Millisecond) // the line waits in the socket
	line, at, err := lr.readLine()
	if err != nil || line != "start 0" {
		t.Fatalf("readLine: %q %v", line, err)
	}
	if late := time.Since(at); late < 80*time.Millisecond || late > 5*time.Second {
		t.Errorf("the line is dated %v before it was read, want ≈ 100 ms (the kernel's arrival time)", late)
	}
}

type endResult struct {
	reports map[string]json.RawMessage
	err     error
}

// startEnd starts a barrier of the named peers (the workers those that
// start with w) on loopback, joins them all, and runs End; onStop's calls
// go to stops.
func startEnd(t *testing.T, ctx context.Context, b *Barrier, names []string) (string, map[string]*BarrierPeer, chan endResult, chan error) {
	t.Helper()
	ln := listenLoopback(t)
	addr := ln.Addr().String()
	b.Peers, b.Logf = len(names), t.Logf
	type started struct {
		run *BarrierRun
		err error
	}
	sch := make(chan started, 1)
	go func() { r, _, err := b.Start(ctx, ln); sch <- started{r, err} }()
	peers := map[string]*BarrierPeer{}
	type joined struct {
		name string
		p    *BarrierPeer
		err  error
	}
	jch := make(chan joined, len(names))
	for _, n := range names {
		go func() {
			p, _, err := BarrierClient{Addr: addr, Name: n, ConnectTimeout: 5 * time.Second, WaitTimeout: 10 * time.Second}.Join(ctx)
			jch <- joined{n, p, err}
		}()
	}
	for range names {
		j := <-jch
		if j.err != nil {
			t.Fatalf("%s: %v", j.name, j.err)
		}
		peers[j.name] = j.p
		t.Cleanup(j.p.Close)
	}
	s := <-sch
	if s.err != nil {
		t.Fatal(s.err)
	}
	stops := make(chan error, 4)
	ech := make(chan endResult, 1)
	go func() {
		reps, err := s.run.End(ctx, func(err error) { stops <- err })
		ech <- endResult{reps, err}
	}()
	return addr, peers, ech, stops
}

func endWithin(t *testing.T, ch chan endResult, d time.Duration) endResult {
	t.Helper()
	select {
	case r := <-ch:
		return r
	case <-time.After(d):
		t.Fatalf("End: nothing within %v", d)
		return endResult{}
	}
}

func endedWithin(t *testing.T, p *BarrierPeer, d time.Duration, what string) {
	t.Helper()
	select {
	case <-p.End():
	case <-time.After(d):
		t.Fatalf("%s: not ended within %v", what, d)
	}
}

// TestBarrierEnd: the end phase. The workers say done; once all have,
// every peer is told stop (not before), each sends its report and the
// switch has them all, acknowledged; garbage and over-long lines after
// the start, a done under another name and a second hello are refused
// without ending the run.
func TestBarrierEnd(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	addr, peers, ech, stops := startEnd(t, ctx, &Barrier{Workers: []string{"w1.0", "w1.1"}}, []string{"ps", "w1.0", "w1.1"})
	// After the start: a new peer, an early rejoin of an unknown name and
	// garbage hellos are refused.
	for hello, want := range map[string]string{"ready late\n": "started already", "rejoin nobody\n": "not a peer", "watch x\n": "started already", "junk\n": "want"} {
		if got := rawLine(t, addr, hello); !strings.Contains(got, want) {
			t.Errorf("%q after the start: %q, want %q", hello, got, want)
		}
	}
	if err := peers["w1.0"].Done(); err != nil {
		t.Fatal(err)
	}
	peers["ps"].Done() // a PS's done: recorded, ends nothing
	select {
	case err := <-stops:
		t.Fatalf("stopped with w1.1 not done: %v", err)
	case <-peers["ps"].End():
		t.Fatalf("ps ended with w1.1 not done: %v", peers["ps"].Err())
	case <-time.After(200 * time.Millisecond):
	}
	if err := peers["w1.1"].Done(); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-stops:
		if err != nil {
			t.Fatalf("onStop(%v), want nil", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("no stop within 5 s of every worker's done")
	}
	for n, p := range peers {
		endedWithin(t, p, 5*time.Second, n)
		if p.Err() != nil {
			t.Errorf("%s: %v, want a stop", n, p.Err())
		}
		if err := p.Report(map[string]string{"node": n}); err != nil {
			t.Errorf("%s's report: %v", n, err)
		}
	}
	r := endWithin(t, ech, 5*time.Second)
	if r.err != nil {
		t.Fatal(r.err)
	}
	for n := range peers {
		if got := string(r.reports[n]); got != `{"node":"`+n+`"}` {
			t.Errorf("%s's report: %s", n, got)
		}
	}
}

// TestBarrierEndGarbage: a peer's malformed line or over-long report
// after the start drops its connection (answered with an error); it is
// then lost, and a process rejoining under its name takes its place.
func TestBarrierEndGarbage(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	addr, peers, ech, _ := startEnd(t, ctx, &Barrier{LostTimeout: 5 * time.Second}, []string{"w1.0", "w1.1"})
	// Garbage from w1.0: answered, dropped.
	if err := peers["w1.0"].send("done w9.9", time.Second); err != nil {
		t.Fatal(err)
	}
	endedWithin(t, peers["w1.0"], 5*time.Second, "w1.0 after a done under another name")
	if err := peers["w1.0"].Err(); err == nil || !strings.Contains(err.Error(), "refused") {
		t.Errorf("w1.0: %v, want the switch's refusal", err)
	}
	// An over-long report from w1.1: answered, dropped.
	big := strings.Repeat("x", barrierMaxReport+10)
	peers["w1.1"].send("report \""+big+"\"", 10*time.Second)
	endedWithin(t, peers["w1.1"], 5*time.Second, "w1.1 after an over-long line")
	if err := peers["w1.1"].Err(); err == nil || !strings.Contains(err.Error(), "longer than") {
		t.Errorf("w1.1: %v, want the line's refusal", err)
	}
	// Both rejoin (a report that is not JSON is refused too), finish and report.
	re := map[string]*BarrierPeer{}
	for _, n := range []string{"w1.0", "w1.1"} {
		p, zero, err := BarrierClient{Addr: addr, Name: n, Rejoin: true, ConnectTimeout: 5 * time.Second, WaitTimeout: 5 * time.Second}.Join(ctx)
		if err != nil || !zero.IsZero() {
			t.Fatalf("%s rejoins: %v %v", n, zero, err)
		}
		defer p.Close()
		re[n] = p
	}
	for _, p := range re {
		p.Done()
	}
	for n, p := range re {
		endedWithin(t, p, 5*time.Second, n+" rejoined")
		if err := p.Report([]int{1, 2}); err != nil {
			t.Errorf("%s: %v", n, err)
		}
	}
	r := endWithin(t, ech, 5*time.Second)
	if r.err != nil || len(r.reports) != 2 {
		t.Fatalf("End: %v %v", r.reports, r.err)
	}
}

// TestBarrierEndLost: a worker whose connection ends before its report
// (crashed) and that nothing replaces aborts the run after LostTimeout:
// the others are told abort, report, and End returns their reports and
// an error naming the lost one; the switch dying instead ends every
// peer's run with an error naming the barrier's address, at once.
func TestBarrierEndLost(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	_, peers, ech, stops := startEnd(t, ctx, &Barrier{LostTimeout: 300 * time.Millisecond}, []string{"ps", "w1.0", "w1.1"})
	peers["w1.0"].Done()
	t0 := time.Now()
	peers["w1.1"].Close() // crashed
	for _, n := range []string{"ps", "w1.0"} {
		endedWithin(t, peers[n], 5*time.Second, n)
		if err := peers[n].Err(); err == nil || !strings.Contains(err.Error(), "aborted") || !strings.Contains(err.Error(), "w1.1") {
			t.Errorf("%s: %v, want an abort naming w1.1", n, err)
		}
		peers[n].Report(n)
	}
	if d := time.Since(t0); d < 300*time.Millisecond || d > 3*time.Second {
		t.Errorf("aborted %v after the loss, want ≈ the 300 ms LostTimeout", d)
	}
	if err := <-stops; err == nil {
		t.Error("onStop(nil) on an abort")
	}
	r := endWithin(t, ech, 5*time.Second)
	if r.err == nil || !strings.Contains(r.err.Error(), "w1.1") || len(r.reports) != 2 {
		t.Errorf("End: %d reports, %v; want 2 and an error naming w1.1", len(r.reports), r.err)
	}

	// The switch dies after the start: the peer's run ends at once with
	// an error naming the barrier's address, and its report is not lost
	// silently (Report says it could not be sent).
	fake := listenLoopback(t)
	go func() {
		c, err := fake.Accept()
		if err != nil {
			return
		}
		bufio.NewReader(c).ReadString('\n')
		c.Write([]byte("ok\nstart 0\n"))
		time.Sleep(100 * time.Millisecond)
		c.Close() // died
	}()
	p, _, err := BarrierClient{Addr: fake.Addr().String(), Name: "w1.0", ConnectTimeout: 5 * time.Second, WaitTimeout: 5 * time.Second}.Join(ctx)
	if err != nil {
		t.Fatal(err)
	}
	endedWithin(t, p, 5*time.Second, "a peer whose switch died")
	if err := p.Err(); err == nil || !strings.Contains(err.Error(), fake.Addr().String()) || !strings.Contains(err.Error(), "ended before the run's end") {
		t.Errorf("a peer whose switch died: %v, want an error naming %s", err, fake.Addr())
	}
	if err := p.Report("x"); err == nil {
		t.Error("a report to a dead switch: no error")
	}
}

// TestBarrierEndStopped: the switch stopped (SIGTERM, kubectl delete)
// before every worker is done aborts the run: the peers are told abort,
// still report, and End returns their reports and an error saying so.
func TestBarrierEndStopped(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	sctx, stop := context.WithCancel(ctx)
	_, peers, ech, stops := startEnd(t, sctx, &Barrier{}, []string{"ps", "w1.0"})
	stop()
	for n, p := range peers {
		endedWithin(t, p, 5*time.Second, n)
		if err := p.Err(); err == nil || !strings.Contains(err.Error(), "aborted") || !strings.Contains(err.Error(), "stopped") {
			t.Errorf("%s: %v, want an abort saying the switch was stopped", n, err)
		}
		if err := p.Report(n); err != nil {
			t.Errorf("%s's report after the abort: %v", n, err)
		}
	}
	if err := <-stops; err == nil {
		t.Error("onStop(nil) on a stop of the switch")
	}
	r := endWithin(t, ech, 5*time.Second)
	if r.err == nil || !strings.Contains(r.err.Error(), "stopped") || len(r.reports) != 2 {
		t.Errorf("End: %d reports, %v; want both and the stop", len(r.reports), r.err)
	}
}
