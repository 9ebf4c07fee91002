package faultctl

import (
	"context"
	"encoding/json"
	"errors"
	"net"
	"net/http"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/inabox/inabox/emu"
	"github.com/inabox/inabox/host"
)

// fakeClock is a Clock whose time the test moves; After's calls run when
// it passes their time.
type fakeClock struct {
	now   time.Duration
	calls []timed
}

type timed struct {
	at time.Duration
	fn func()
}

func (c *fakeClock) Now() time.Duration { return c.now }
func (c *fakeClock) After(d time.Duration, fn func()) {
	c.calls = append(c.calls, timed{c.now + d, fn})
}

func (c *fakeClock) advance(d time.Duration) {
	c.now += d
	slices.SortStableFunc(c.calls, func(a, b timed) int { return int(a.at - b.at) })
	for len(c.calls) > 0 && c.calls[0].at <= c.now {
		f := c.calls[0].fn
		c.calls = c.calls[1:]
		f()
	}
}

// testTable is a table of h0 (two directions, as if one process modelled
// both) and h1's up direction, on links of a network that is not run.
func testTable(t *testing.T) (*Table, *fakeClock, *emu.Link) {
	t.Helper()
	n := emu.NewNetwork(emu.Config{})
	for _, name := range []string{"w", "sw", "v"} {
		if err := n.AddNode(name, 2, nopNode{}); err != nil {
			t.Fatal(err)
		}
	}
	base := emu.LinkConfig{BitsPerSecond: 1e8, Delay: 5 * time.Millisecond, MTUBytes: 9000, Impairments: emu.Impairments{Loss: 0.1}}
	l0, err := n.Connect("w", 0, "sw", 0, base)
	if err != nil {
		t.Fatal(err)
	}
	l1, err := n.Connect("v", 0, "sw", 1, base)
	if err != nil {
		t.Fatal(err)
	}
	c := &fakeClock{}
	tb := NewTable(c,
		Direction{Link: "h0", Node: "w1.0", Dir: Up, T: LinkDir{L: l0, D: emu.AtoB}},
		Direction{Link: "h0", Node: "w1.0", Dir: Down, T: LinkDir{L: l0, D: emu.BtoA}},
		Direction{Link: "h1", Node: "w1.1", Dir: Up, T: LinkDir{L: l1, D: emu.AtoB}})
	return tb, c, l0
}

type nopNode struct{}

func (nopNode) Start(*emu.Env)                       {}
func (nopNode) Receive(*emu.Env, int, []*emu.Packet) {}
func (nopNode) Timer(*emu.Env, uint64)               {}

func ptr[T any](v T) *T      { return &v }
func near(a, b float64) bool { return a-b < 1e-12 && b-a < 1e-12 }

func TestTableImpairments(t *testing.T) {
	tb, _, l := testTable(t)
	st, err := tb.SetImpairments("h0", Up, ImpairmentsPatch{Loss: ptr(1.0), Jitter: ptr(Duration(time.Millisecond))})
	if err != nil || len(st) != 1 || st[0].Impairments.Loss != 1 || st[0].Impairments.Jitter != Duration(time.Millisecond) {
		t.Fatalf("set: %+v, %v", st, err)
	}
	if c := l.Config(emu.AtoB); c.Impairments.Loss != 1 || c.Jitter != time.Millisecond || c.Delay != 5*time.Millisecond {
		t.Errorf("the link carries %+v", c)
	}
	if c := l.Config(emu.BtoA); c.Impairments.Loss != 0.1 {
		t.Errorf("the other direction changed: %+v", c)
	}
	// A bad value changes nothing and names the field as the API does.
	_, err = tb.SetImpairments("h0", Both, ImpairmentsPatch{Reorder: ptr(1.5)})
	if err == nil || !strings.Contains(err.Error(), "h0 up: reorder = 1.5: must be a probability") {
		t.Errorf("reorder 1.5: %v", err)
	}
	if l.Config(emu.BtoA).Impairments.Reorder != 0 {
		t.Error("a refused change was applied")
	}
	if _, err := tb.ClearImpairments("h0", Both); err != nil {
		t.Fatal(err)
	}
	if c := l.Config(emu.AtoB); c.Impairments != (emu.Impairments{}) || c.Jitter != 0 || c.BitsPerSecond != 1e8 {
		t.Errorf("cleared: %+v", c)
	}
	if _, err := tb.Reset("all", ""); err != nil {
		t.Fatal(err)
	}
	if c := l.Config(emu.AtoB); c.Impairments.Loss != 0.1 {
		t.Errorf("reset: %+v", c)
	}
}

func TestTableConfigAndSelection(t *testing.T) {
	tb, _, l := testTable(t)
	st, err := tb.SetConfig("all", Up, ConfigPatch{RateGbps: ptr(0.2), Delay: ptr(Duration(time.Millisecond)), MTU: ptr(1500)})
	if err != nil || len(st) != 2 {
		t.Fatalf("%d states, %v", len(st), err)
	}
	if c := l.Config(emu.AtoB); c.BitsPerSecond != 2e8 || c.Delay != time.Millisecond || c.MTUBytes != 1500 || c.Impairments.Loss != 0.1 {
		t.Errorf("config: %+v", c)
	}
	for _, tc := range []struct {
		p    ConfigPatch
		want string
	}{
		{ConfigPatch{RateGbps: ptr(-1.0)}, "rate_gbps = -1: must be ≥ 0"},
		{ConfigPatch{MTU: ptr(10)}, "mtu = 10: must be 0"},
		{ConfigPatch{Delay: ptr(Duration(-time.Millisecond))}, "delay = -1ms: must be ≥ 0"},
	} {
		if _, err := tb.SetConfig("h0", Up, tc.p); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%+v: %v, want %q", tc.p, err, tc.want)
		}
	}
	var nf *NotFoundError
	if _, err := tb.SetConfig("h9", Up, ConfigPatch{}); !errors.As(err, &nf) || !strings.Contains(err.Error(), "h0 up, h0 down, h1 up") {
		t.Errorf("unknown link: %v", err)
	}
	if _, err := tb.SetConfig("h1", Down, ConfigPatch{}); !errors.As(err, &nf) {
		t.Errorf("a direction the process does not model: %v", err)
	}
	if _, err := tb.SetConfig("h0", "sideways", ConfigPatch{}); err == nil || !strings.Contains(err.Error(), "dir = sideways") {
		t.Errorf("bad dir: %v", err)
	}
}

// Windows add to the configuration and close by themselves; two windows
// of one kind add up, and combine with the configured probability as
// emu's bursts do.
func TestTableWindows(t *testing.T) {
	tb, clock, l := testTable(t)
	if _, err := tb.Open("h0", Up, Window{Kind: WinLoss, Value: 0.2, Duration: Duration(10 * time.Millisecond)}); err != nil {
		t.Fatal(err)
	}
	clock.advance(5 * time.Millisecond)
	st, err := tb.Open("h0", Up, Window{Kind: WinLoss, Value: 0.3, Duration: Duration(10 * time.Millisecond)})
	if err != nil {
		t.Fatal(err)
	}
	if len(st[0].Windows) != 2 || st[0].Windows[0].Remaining != Duration(5*time.Millisecond) {
		t.Errorf("windows %+v", st[0].Windows)
	}
	if got := l.Config(emu.AtoB).Impairments.Loss; !near(got, 1-0.9*0.5) {
		t.Errorf("loss with two windows %v, want %v", got, 1-0.9*0.5)
	}
	tb.Open("h0", Up, Window{Kind: WinDelay, Delay: Duration(2 * time.Millisecond), Duration: Duration(3 * time.Millisecond)})
	tb.Open("h0", Up, Window{Kind: WinRate, Value: 0.05, Duration: Duration(3 * time.Millisecond)})
	if c := l.Config(emu.AtoB); c.Delay != 7*time.Millisecond || c.BitsPerSecond != 5e7 {
		t.Errorf("delay and rate windows: %+v", c)
	}
	clock.advance(5 * time.Millisecond) // the first loss window, the delay and the rate closed
	if c := l.Config(emu.AtoB); !near(c.Impairments.Loss, 1-0.9*0.7) || c.Delay != 5*time.Millisecond || c.BitsPerSecond != 1e8 {
		t.Errorf("after closing three: %+v", c)
	}
	clock.advance(5 * time.Millisecond)
	if c := l.Config(emu.AtoB); c.Impairments.Loss != 0.1 {
		t.Errorf("after every window closed: %+v", c)
	}
	for _, w := range []Window{
		{Kind: WinLoss, Value: 0, Duration: Duration(time.Millisecond)},
		{Kind: WinLoss, Value: 0.1},
		{Kind: "gremlins", Value: 0.1, Duration: Duration(time.Millisecond)},
		{Kind: WinMTU, Value: 12, Duration: Duration(time.Millisecond)},
	} {
		if _, err := tb.Open("h0", Up, w); err == nil {
			t.Errorf("window %+v accepted", w)
		}
	}
}

func TestTableDown(t *testing.T) {
	tb, clock, l := testTable(t)
	st, err := tb.SetUp("h0", Both, false, 10*time.Millisecond)
	if err != nil || len(st) != 2 || st[0].Up || st[1].Up || l.DirUp(emu.AtoB) || l.DirUp(emu.BtoA) {
		t.Fatalf("down: %+v, %v", st, err)
	}
	clock.advance(10 * time.Millisecond)
	if !l.DirUp(emu.AtoB) || !l.DirUp(emu.BtoA) {
		t.Error("not up again after its duration")
	}
	tb.SetUp("h0", Down, false, 0)
	if !l.DirUp(emu.AtoB) || l.DirUp(emu.BtoA) {
		t.Error("down on one direction")
	}
	tb.SetUp("h0", Down, true, 0)
	if !l.DirUp(emu.BtoA) {
		t.Error("up")
	}
}

func TestParseImpairments(t *testing.T) {
	p, err := ParseImpairments([]string{"loss=0.5", "jitter=1ms", "ge.p_good_to_bad=0.01", "gilbert_elliott.loss_bad=1"})
	if err != nil || *p.Loss != 0.5 || *p.Jitter != Duration(time.Millisecond) || p.GilbertElliott == nil ||
		*p.GilbertElliott != (GilbertElliott{PGoodToBad: 0.01, LossBad: 1}) {
		t.Fatalf("%+v, %v", p, err)
	}
	for _, bad := range []string{"loss", "loss=x", "jitter=5", "colour=red"} {
		if _, err := ParseImpairments([]string{bad}); err == nil {
			t.Errorf("%q accepted", bad)
		}
	}
}

// inline runs changes on the caller's goroutine (the network is not run).
type inline struct{}

func (inline) Do(fn func()) error { fn(); return nil }

// The HTTP API on a unix socket, through Client and Index: list, set, a bad
// value (400 naming it), an unknown link (404).
func TestServerAndClient(t *testing.T) {
	tb, _, _ := testTable(t)
	mux := http.NewServeMux()
	(&Server{Table: tb, Run: inline{}, Progress: func() Progress { return Progress{Node: "w1.0", Finished: 2} }}).Register(mux)
	dir := t.TempDir()
	sock := filepath.Join(dir, "w.sock")
	ln, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	hs := &http.Server{Handler: mux}
	go hs.Serve(ln)
	defer hs.Close()
	ctx := context.Background()
	c := NewClient("unix:" + sock)
	st, err := c.List(ctx)
	if err != nil || len(st) != 3 {
		t.Fatalf("list: %d, %v", len(st), err)
	}
	st, err = c.SetImpairments(ctx, "h0", Down, ImpairmentsPatch{Loss: ptr(0.5)})
	if err != nil || len(st) != 1 || st[0].Impairments.Loss != 0.5 || st[0].Dir != Down {
		t.Fatalf("set: %+v, %v", st, err)
	}
	_, err = c.SetImpairments(ctx, "h0", Down, ImpairmentsPatch{Loss: ptr(2.0)})
	var se *StatusError
	if !errors.As(err, &se) || se.Code != 400 || !strings.Contains(se.Msg, "loss = 2") {
		t.Errorf("loss 2: %v", err)
	}
	if _, err = c.SetUp(ctx, "h7", Up, false, 0); !errors.As(err, &se) || se.Code != 404 {
		t.Errorf("unknown link: %v", err)
	}
	// Unknown JSON fields are refused.
	if err := c.do(ctx, "POST", "/links/h0/up/config", map[string]any{"rate": 1}, nil); !errors.As(err, &se) || se.Code != 400 || !strings.Contains(se.Msg, "rate") {
		t.Errorf("unknown field: %v", err)
	}
	if p, err := c.Progress(ctx); err != nil || p.Finished != 2 {
		t.Errorf("progress %+v, %v", p, err)
	}
	// An index of one process modelling both directions of h0 and h1's up.
	ix := &Index{ID: "test", Dir: dir, Sockets: map[string]string{"w1.0": sock, "switch": sock},
		Links: []IndexLink{{Link: "h0", Node: "w1.0", Up: "w1.0", Down: "switch"}}}
	if err := ix.Write(dir); err != nil {
		t.Fatal(err)
	}
	rix, err := FindRun(dir)
	if err != nil || rix.ID != "test" {
		t.Fatalf("FindRun: %+v, %v", rix, err)
	}
	calls, err := rix.Calls("h0", Both)
	if err != nil || len(calls) != 2 || calls[0].Dir != Up || calls[1].Dir != Down {
		t.Errorf("calls %+v, %v", calls, err)
	}
	st, err = rix.Each(ctx, "h0", Both, func(ctx context.Context, c *Client, link, dir string) ([]DirState, error) {
		return c.SetUp(ctx, link, dir, false, 0)
	})
	if err != nil || len(st) != 2 || st[0].Up || st[1].Up {
		t.Errorf("each: %+v, %v", st, err)
	}
	if _, err := rix.Calls("h5", Up); err == nil || !strings.Contains(err.Error(), "links: h0") {
		t.Errorf("unknown link: %v", err)
	}
	var b strings.Builder
	all, _ := rix.List(ctx)
	WriteTable(&b, all)
	if !strings.Contains(b.String(), "LINK") || !strings.Contains(b.String(), "DOWN") || !strings.Contains(b.String(), "loss=0.5") {
		t.Errorf("table:\n%s", b.String())
	}
	js, _ := json.Marshal(all[0].Config)
	if !strings.Contains(string(js), `"delay":"5ms"`) {
		t.Errorf("config JSON %s", js)
	}
}

// The watcher wakes a wait when its trigger holds, at once if it already
// did, with the time it happened.
func TestWatcher(t *testing.T) {
	c := &fakeClock{}
	w := NewWatcher(c)
	k := func(v int) *int { return &v }
	begun1, _ := w.Wait(Trigger{Begun: k(1)})
	half0, _ := w.Wait(Trigger{AllReduce: k(0), Fraction: 0.5})
	fin2, _ := w.Wait(Trigger{Finished: k(2)})
	if _, err := w.Wait(Trigger{}); err == nil {
		t.Error("an empty trigger accepted")
	}
	if _, err := w.Wait(Trigger{Begun: k(1), Fraction: 0.5}); err == nil {
		t.Error("a fraction without allreduce accepted")
	}
	got := func(ch <-chan Event) (Event, bool) {
		select {
		case ev := <-ch:
			return ev, true
		default:
			return Event{}, false
		}
	}
	c.now = 10 * time.Millisecond
	w.Step(host.Step{Kind: host.StepBegin, Index: 0, Chunks: 4})
	for i := range 2 {
		c.now += time.Millisecond
		if _, ok := got(half0); ok {
			t.Fatalf("half of all-reduce 0 after %d of 4 chunks", i)
		}
		w.Step(host.Step{Kind: host.StepChunk, Index: 0, Chunks: 4, Chunk: uint32(i)})
	}
	if ev, ok := got(half0); !ok || ev.At != Duration(12*time.Millisecond) {
		t.Errorf("half of all-reduce 0: %+v, %v", ev, ok)
	}
	c.now = 20 * time.Millisecond
	w.Step(host.Step{Kind: host.StepEnd, Index: 0, Chunks: 4})
	c.now = 25 * time.Millisecond
	w.Step(host.Step{Kind: host.StepBegin, Index: 1, Chunks: 4})
	if ev, ok := got(begun1); !ok || ev.At != Duration(25*time.Millisecond) || ev.Finished != 1 {
		t.Errorf("all-reduce 1 begun: %+v, %v", ev, ok)
	}
	c.now = 30 * time.Millisecond
	w.Step(host.Step{Kind: host.StepEnd, Index: 1, Chunks: 4})
	if ev, ok := got(fin2); !ok || ev.At != Duration(30*time.Millisecond) {
		t.Errorf("2 finished: %+v, %v", ev, ok)
	}
	// Already happened: at once, with its time.
	c.now = 40 * time.Millisecond
	late, _ := w.Wait(Trigger{AllReduce: k(0), Fraction: 1})
	if ev, ok := got(late); !ok || ev.At != Duration(20*time.Millisecond) {
		t.Errorf("all-reduce 0 ended, asked late: %+v, %v", ev, ok)
	}
	// A restored checkpoint counts as finished.
	w2 := NewWatcher(c)
	w2.Restored([]host.Report{{Start: time.Millisecond, End: 2 * time.Millisecond}})
	if ev, ok := got(mustWait(t, w2, Trigger{Finished: k(1)})); !ok || ev.At != Duration(2*time.Millisecond) {
		t.Errorf("restored: %+v, %v", ev, ok)
	}
}

func mustWait(t *testing.T, w *Watcher, tr Trigger) <-chan Event {
	t.Helper()
	ch, err := w.Wait(tr)
	if err != nil {
		t.Fatal(err)
	}
	return ch
}
