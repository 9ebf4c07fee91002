package up

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"inabox/internal/procnode"
)

// needRoot skips a test that needs namespaces and /dev/net/tun.
func needRoot(t *testing.T) {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("needs root (network namespaces, TAP devices)")
	}
	if _, err := os.Stat("/dev/net/tun"); err != nil {
		t.Skip("needs /dev/net/tun")
	}
}

// checkNothingLeft verifies that no namespace of the run and no process
// remain.
func checkNothingLeft(t *testing.T, res Result, pids map[string]int) {
	t.Helper()
	if res.ID == "" {
		t.Fatal("no run id")
	}
	for _, n := range res.Namespaces {
		if procnode.NetnsExists(n) {
			t.Errorf("namespace %s left behind", n)
		}
	}
	out, err := exec.Command("ip", "netns", "list").CombinedOutput()
	if err != nil {
		t.Fatalf("ip netns list: %v\n%s", err, out)
	}
	if strings.Contains(string(out), res.ID) {
		t.Errorf("ip netns list still shows run %s:\n%s", res.ID, out)
	}
	out, _ = exec.Command("ip", "-o", "link").CombinedOutput()
	if strings.Contains(string(out), res.ID) || strings.Contains(string(out), "inabox") {
		t.Errorf("ip link shows devices of the run:\n%s", out)
	}
	for name, pid := range pids {
		if err := syscall.Kill(pid, 0); err != syscall.ESRCH {
			t.Errorf("process %s (pid %d) still exists: %v", name, pid, err)
		}
	}
}

// goroutinesSettle fails the test if more goroutines run than before Up
// once things had a second to wind down.
func goroutinesSettle(t *testing.T, before int) {
	t.Helper()
	deadline := time.Now().Add(2 * time.Second)
	for runtime.NumGoroutine() > before && time.Now().Before(deadline) {
		time.Sleep(20 * time.Millisecond)
	}
	if n := runtime.NumGoroutine(); n > before {
		buf := make([]byte, 1<<16)
		t.Errorf("%d goroutines after Up, %d before:\n%s", n, before, buf[:runtime.Stack(buf, true)])
	}
}

func testConfig(tensor int) Config {
	c := DefaultConfig
	c.TensorBytes = tensor
	c.Command = testCommand
	c.Timeout = 50 * time.Second
	return c
}

// TestUpExactSum is the acceptance run: 4 worker processes, one job, a
// 16 MB int32 tensor through the switch process over TAP; every worker gets
// the exact sum, tshark decodes the captures as RoCEv2, nothing is left.
func TestUpExactSum(t *testing.T) {
	needRoot(t)
	cfg := testConfig(16 << 20)
	cfg.PcapDir = t.TempDir()
	if d := os.Getenv("INABOX_UP_KEEP_PCAP"); d != "" {
		cfg.PcapDir = d
	}
	var pids map[string]int
	cfg.OnRunning = func(p map[string]int) { pids = p }
	ctx, cancel := context.WithTimeout(context.Background(), 55*time.Second)
	defer cancel()
	var stdout, stderr bytes.Buffer
	before := runtime.NumGoroutine()
	res, err := Up(ctx, cfg, &stdout, &stderr)
	goroutinesSettle(t, before)
	t.Logf("stdout:\n%s", stdout.String())
	if err != nil {
		t.Fatalf("Up: %v\nstderr:\n%s", err, stderr.String())
	}
	checkNothingLeft(t, res, pids)
	if len(res.Workers) != 4 {
		t.Fatalf("%d worker results", len(res.Workers))
	}
	for _, w := range res.Workers {
		if !w.Exact || !w.Stats.Done {
			t.Errorf("%s: exact=%v done=%v", w.Name, w.Exact, w.Stats.Done)
		}
	}
	if len(res.Counters.Jobs) != 1 || res.Counters.Jobs[0].Results < uint64(res.Workers[0].Stats.Chunks) {
		t.Errorf("switch job counters: %+v", res.Counters.Jobs)
	}
	checkPcaps(t, cfg.PcapDir, cfg.Workers)
}

// TestUpWorkerKilled kills a worker mid-run: Up must fail naming it and
// remove every namespace and process.
func TestUpWorkerKilled(t *testing.T) {
	needRoot(t)
	cfg := testConfig(16 << 20)
	var pids map[string]int
	cfg.OnRunning = func(p map[string]int) {
		pids = p
		go func() {
			time.Sleep(300 * time.Millisecond)
			syscall.Kill(p["worker2"], syscall.SIGKILL)
		}()
	}
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Second)
	defer cancel()
	var stderr bytes.Buffer
	before := runtime.NumGoroutine()
	res, err := Up(ctx, cfg, nil, &stderr)
	goroutinesSettle(t, before)
	if err == nil {
		t.Fatalf("Up succeeded although worker2 was killed")
	}
	t.Logf("error: %v", err)
	if !strings.Contains(err.Error(), "worker2") || !strings.Contains(err.Error(), "died") {
		t.Errorf("error does not name the dead worker: %v", err)
	}
	checkNothingLeft(t, res, pids)
}

// TestUpInterrupted sends SIGINT (Ctrl-C) mid-run: Up stops with an error
// and removes everything.
func TestUpInterrupted(t *testing.T) {
	needRoot(t)
	cfg := testConfig(16 << 20)
	var pids map[string]int
	cfg.OnRunning = func(p map[string]int) {
		pids = p
		go func() {
			time.Sleep(200 * time.Millisecond)
			syscall.Kill(os.Getpid(), syscall.SIGINT)
		}()
	}
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Second)
	defer cancel()
	res, err := Up(ctx, cfg, nil, nil)
	if err == nil || !strings.Contains(err.Error(), "stopped") {
		t.Fatalf("Up after SIGINT: %v", err)
	}
	t.Logf("error: %v", err)
	checkNothingLeft(t, res, pids)
}

// TestUpSwitchKilled: the switch dying is named too.
func TestUpSwitchKilled(t *testing.T) {
	needRoot(t)
	cfg := testConfig(16 << 20)
	var pids map[string]int
	cfg.OnRunning = func(p map[string]int) {
		pids = p
		go func() {
			time.Sleep(200 * time.Millisecond)
			syscall.Kill(p["switch"], syscall.SIGKILL)
		}()
	}
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Second)
	defer cancel()
	res, err := Up(ctx, cfg, nil, nil)
	if err == nil || !strings.Contains(err.Error(), "switch (pid") {
		t.Fatalf("Up after killing the switch: %v", err)
	}
	t.Logf("error: %v", err)
	checkNothingLeft(t, res, pids)
}

// TestUpBadBinary: a process that cannot start fails the run cleanly.
func TestUpBadBinary(t *testing.T) {
	needRoot(t)
	cfg := testConfig(1 << 20)
	cfg.Command = func(role string, args []string) *exec.Cmd { return exec.Command("/nonexistent/ina" + role) }
	res, err := Up(context.Background(), cfg, nil, nil)
	if err == nil || !strings.Contains(err.Error(), "starting switch") {
		t.Fatalf("Up with a missing binary: %v", err)
	}
	checkNothingLeft(t, res, nil)
}

// TestCleanStale: namespaces of a run whose orchestrator is gone are
// removed; those of a live one are not.
func TestCleanStale(t *testing.T) {
	needRoot(t)
	mk := func(pid int) (string, string) {
		dir, err := os.MkdirTemp("", "inabox-up-test-")
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { os.RemoveAll(dir) })
		ns := NamePrefix + "stale-" + filepath.Base(dir)[len("inabox-up-test-"):]
		if err := procnode.CreateNetns(ns); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { procnode.DeleteNetns(ns) })
		os.WriteFile(filepath.Join(dir, ownerFile), []byte(strconv.Itoa(pid)+"\n"+ns+"\n"), 0o644)
		return dir, ns
	}
	// A pid that is certainly gone: a child we started and reaped.
	c := exec.Command("true")
	if err := c.Run(); err != nil {
		t.Fatal(err)
	}
	_, dead := mk(c.Process.Pid)
	_, alive := mk(os.Getpid())
	removed, err := CleanStale()
	if err != nil {
		t.Fatal(err)
	}
	if procnode.NetnsExists(dead) || !slices.Contains(removed, dead) {
		t.Errorf("stale namespace %s not removed (removed %v)", dead, removed)
	}
	if !procnode.NetnsExists(alive) {
		t.Errorf("namespace %s of a live run was removed", alive)
	}
}

func TestLoadConfig(t *testing.T) {
	c, err := LoadConfig("testdata/scenario.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if c.Workers != 4 || c.TensorBytes != 16<<20 || c.Link.Delay != 5*time.Microsecond || c.Link.BitsPerSecond != 10e9 || c.Policy != "static" {
		t.Fatalf("%+v", c)
	}
	if err := c.check(); err != nil {
		t.Fatal(err)
	}
	bad := filepath.Join(t.TempDir(), "bad.yaml")
	os.WriteFile(bad, []byte("workers: 4\nwokers: 3\n"), 0o644)
	if _, err := LoadConfig(bad); err == nil || !strings.Contains(err.Error(), "wokers") {
		t.Fatalf("unknown field: %v", err)
	}
	c.Window = 5000
	if err := c.check(); err == nil || !strings.Contains(err.Error(), "window") {
		t.Fatalf("window beyond half the aggregators: %v", err)
	}
}
