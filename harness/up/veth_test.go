package up

import (
	"bytes"
	"context"
	"runtime"
	"strings"
	"testing"
	"time"
)

// TestUpXDP runs the 16 MiB FreeINA scenario with --backend xdp: the
// switch on its veth ends and the peers on eth0 through AF_XDP (native
// mode on veth), no bridge, no TAP; every worker gets the exact sum and
// nothing is left.
func TestUpXDP(t *testing.T) {
	needRoot(t)
	cfg := testConfig()
	cfg.Backend = "xdp"
	var pids map[string]int
	cfg.OnRunning = func(p map[string]int) { pids = p }
	ctx, cancel := context.WithTimeout(context.Background(), 55*time.Second)
	defer cancel()
	var stdout, stderr bytes.Buffer
	before := runtime.NumGoroutine()
	res, err := Up(ctx, cfg, &stdout, &stderr)
	goroutinesSettle(t, before)
	if err != nil {
		t.Fatalf("Up: %v\nstderr:\n%s", err, stderr.String())
	}
	checkNothingLeft(t, res, pids)
	const elements = 16 << 20 / 4
	if len(res.Workers) != 4 || !res.Jobs[0].Exact {
		t.Fatalf("%d workers, job %+v", len(res.Workers), res.Jobs[0])
	}
	for _, w := range res.Workers {
		if !w.Exact || len(w.Iterations) != 1 || w.Iterations[0].Elements != elements {
			t.Errorf("%s: exact=%v iterations=%+v", w.Name, w.Exact, w.Iterations)
		}
	}
	for _, want := range []string{"[switch] procnode: xdp:v0 native copy", "[switch] procnode: xdp:v4 native copy", "] procnode: xdp:eth0 native copy"} {
		if !strings.Contains(stderr.String(), want) {
			t.Errorf("stderr lacks %q:\n%s", want, stderr.String())
		}
	}
	if strings.Contains(stderr.String(), "falling back") {
		t.Errorf("a port fell back:\n%s", stderr.String())
	}
}

// TestUpBackendErrors: a bad backend or XDP option fails before anything
// is made.
func TestUpBackendErrors(t *testing.T) {
	for _, c := range []struct {
		cfg  Config
		want string
	}{
		{Config{Backend: "carrier-pigeon"}, "unknown backend"},
		{Config{XDPMode: "native"}, "need --backend xdp"},
		{Config{Backend: "packet", XDPFallback: "packet"}, "need --backend xdp"},
		{Config{Backend: "xdp", XDPMode: "turbo"}, "unknown --xdp-mode"},
		{Config{Backend: "xdp", XDPFallback: "tap"}, "unknown --xdp-fallback"},
	} {
		if err := c.cfg.checkBackend(); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%+v: %v, want %q", c.cfg, err, c.want)
		}
	}
	if err := (&Config{Backend: "xdp", XDPMode: "generic", XDPFallback: "packet"}).checkBackend(); err != nil {
		t.Error(err)
	}
}
