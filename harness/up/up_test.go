package up

import (
	"bytes"
	"context"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"

	"github.com/inabox/inabox/harness/scenario"
	"time"

	"github.com/inabox/inabox/internal/procnode"
	"github.com/inabox/inabox/internal/testenv"
)

// needRoot skips a test that needs namespaces and /dev/net/tun.
func needRoot(t *testing.T) {
	t.Helper()
	testenv.NeedRoot(t, "network namespaces, TAP devices")
	if _, err := os.Stat("/dev/net/tun"); err != nil {
		testenv.Skip(t, "needs /dev/net/tun")
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

func testConfig() Config {
	return Config{Scenario: "testdata/up-16mb.yaml", Command: testCommand, Timeout: 50 * time.Second}
}

// TestUpExactSum is the acceptance run: 4 FreeINA worker processes, one job,
// a 16 MiB tensor through the switch process over TAP; every worker gets
// the exact sum, tshark decodes the captures as RoCEv2, nothing is left.
func TestUpExactSum(t *testing.T) {
	needRoot(t)
	cfg := testConfig()
	cfg.VsVirtual = true
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
	if len(res.Workers) != 4 || len(res.Jobs) != 1 || res.Policy != "freeina" {
		t.Fatalf("%d worker results, %d jobs, policy %s", len(res.Workers), len(res.Jobs), res.Policy)
	}
	const elements = 16 << 20 / 4
	for _, w := range res.Workers {
		if !w.Exact || len(w.Iterations) != 1 || w.Iterations[0].Elements != elements {
			t.Errorf("%s: exact=%v iterations=%+v", w.Name, w.Exact, w.Iterations)
		}
	}
	if !res.Jobs[0].Exact || res.Jobs[0].JCT <= 0 {
		t.Errorf("job: %+v", res.Jobs[0])
	}
	// The honest measures: JCT against the same run in virtual time, and
	// the share of the links' rate each process achieved.
	if j := res.Jobs[0]; j.VirtualJCT <= 0 || j.JCTVsVirtual < 0.5 || j.JCTVsVirtual > 10 {
		t.Errorf("vs virtual: JCT %v, virtual %v, ratio %v", j.JCT, j.VirtualJCT, j.JCTVsVirtual)
	}
	for _, pr := range append(workerProcs(res.Workers), res.Switch) {
		if pr.RateFraction <= 0.05 || pr.RateFraction > 1.2 {
			t.Errorf("%s achieved %.3f of its links' rate", pr.Name, pr.RateFraction)
		}
		// In virtual time the links run at their rate but for protocol
		// pauses (virtualFractions).
		if v := pr.VirtualRateFraction; v <= 0.5 || v > 1.01 || math.Abs(pr.RateVsVirtual*v-pr.RateFraction) > 1e-9 {
			t.Errorf("%s: %.3f of its links' rate in virtual time, ratio %.3f", pr.Name, v, pr.RateVsVirtual)
		}
	}
	// Every chunk went through the switch's INA pipeline at least once
	// per worker (256 values a packet).
	if c := res.Counters.Switch.INAPackets; c < 4*elements/256 {
		t.Errorf("switch INA packets = %d, want ≥ %d", c, 4*elements/256)
	}
	// Port 0 is the PS's (a few control frames: ALLOC, GRANT, plan);
	// ports 1-4 the workers'.
	checkPcaps(t, cfg.PcapDir, []int{0}, 1)
	checkPcaps(t, cfg.PcapDir, []int{1, 2, 3, 4}, 2*elements/256) // a contribution and a result per chunk
}

// TestUpMultiJob runs inabox up's default scenario (two jobs of two
// workers, three all-reduces each, staggered arrivals) as processes, under
// its own policy (DynaINA) and under SwitchML, whose workers, each in its
// own process, JOIN the switch process's controller over the emulated
// links, wait for its GRANT before their first all-reduce, and LEAVE at
// the end: every all-reduce of every worker is exact.
func TestUpMultiJob(t *testing.T) {
	needRoot(t)
	for _, policy := range []string{"dynaina", "switchml"} {
		t.Run(policy, func(t *testing.T) {
			res, pids := upOK(t, Config{Command: testCommand, Timeout: 50 * time.Second, Policy: policy})
			checkNothingLeft(t, res, pids)
			if res.Policy != policy || len(res.Jobs) != 2 || len(res.Workers) != 4 {
				t.Fatalf("policy %s, %d jobs, %d workers", res.Policy, len(res.Jobs), len(res.Workers))
			}
			for _, w := range res.Workers {
				if !w.Exact || len(w.Iterations) != 3 {
					t.Errorf("%s: exact=%v, %d iterations", w.Name, w.Exact, len(w.Iterations))
				}
			}
		})
	}
}

// upOK runs Up with cfg, logging its output, and returns its result and
// the processes it ran; an error fails the test.
func upOK(t *testing.T, cfg Config) (Result, map[string]int) {
	t.Helper()
	var pids map[string]int
	cfg.OnRunning = func(p map[string]int) { pids = p }
	var stdout, stderr bytes.Buffer
	res, err := Up(context.Background(), cfg, &stdout, &stderr)
	t.Logf("stdout:\n%s", stdout.String())
	if err != nil {
		t.Fatalf("Up: %v\nstderr:\n%s", err, stderr.String())
	}
	return res, pids
}

// upDisrupted runs the test scenario and, once every process runs, does
// act after the given delay (mid-run: the all-reduce takes seconds). It
// returns Up's result and error, checks that nothing is left behind and
// that no goroutine leaks.
func upDisrupted(t *testing.T, after time.Duration, act func(pids map[string]int)) (Result, error) {
	t.Helper()
	cfg := testConfig()
	var pids map[string]int
	cfg.OnRunning = func(p map[string]int) {
		pids = p
		go func() {
			time.Sleep(after)
			act(p)
		}()
	}
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Second)
	defer cancel()
	var stderr bytes.Buffer
	before := runtime.NumGoroutine()
	res, err := Up(ctx, cfg, nil, &stderr)
	goroutinesSettle(t, before)
	t.Logf("error: %v", err)
	checkNothingLeft(t, res, pids)
	return res, err
}

// TestUpDisrupted: a worker killed mid-run, the switch killed mid-run, and
// SIGINT (Ctrl-C) mid-run each end Up with an error that says what
// happened (naming the dead process), and remove every namespace and
// process.
func TestUpDisrupted(t *testing.T) {
	needRoot(t)
	for _, tc := range []struct {
		name  string
		after time.Duration
		act   func(pids map[string]int)
		want  []string
	}{
		{"worker killed", 300 * time.Millisecond, func(p map[string]int) { syscall.Kill(p["w1.2"], syscall.SIGKILL) }, []string{"w1.2", "died"}},
		{"switch killed", 200 * time.Millisecond, func(p map[string]int) { syscall.Kill(p["switch"], syscall.SIGKILL) }, []string{"switch (pid", "died"}},
		{"SIGINT", 200 * time.Millisecond, func(map[string]int) { syscall.Kill(os.Getpid(), syscall.SIGINT) }, []string{"stopped"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := upDisrupted(t, tc.after, tc.act)
			if err == nil {
				t.Fatal("Up succeeded")
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error does not say %q: %v", w, err)
				}
			}
		})
	}
}

// TestUpBadBinary: a process that cannot start fails the run cleanly.
func TestUpBadBinary(t *testing.T) {
	needRoot(t)
	cfg := testConfig()
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

// TestConfigErrors: what inabox up cannot run is refused before anything
// is created, with an error naming the problem.
func TestConfigErrors(t *testing.T) {
	t.Setenv(scenario.RunMemoryEnv, "") // the default bound, whatever the environment says
	dir := t.TempDir()
	big := filepath.Join(dir, "big.yaml") // fits a run in virtual time, not the processes
	if err := os.WriteFile(big, []byte("jobs:\n  - {name: a, model: vgg16, workers: 16, iterations: 1}\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name string
		cfg  Config
		want string
	}{
		{"missing file", Config{Scenario: filepath.Join(dir, "nope.yaml")}, "nope.yaml"},
		{"unknown policy", Config{Scenario: "testdata/up-16mb.yaml", Policy: "bogus"}, `policy "bogus"`},
		{"unknown transport", Config{Scenario: "testdata/up-16mb.yaml", Transport: "pigeon"}, `transport "pigeon": want tap or udp`},
		{"results too large", Config{Scenario: big}, `big.yaml:2: jobs[0]: "vgg16 × 16 workers": inabox up's processes would hold 9.80 GiB`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Up(context.Background(), tc.cfg, nil, nil)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("Up: %v; want an error containing %q", err, tc.want)
			}
		})
	}
}

// TestCommandArgs: the command line's own errors, before anything runs.
func TestCommandArgs(t *testing.T) {
	var out, errb bytes.Buffer
	if err := Command(context.Background(), []string{"-h"}, &out, &errb); err != nil || !strings.Contains(errb.String(), "usage: inabox up") {
		t.Errorf("-h: %v, %q", err, errb.String())
	}
	err := Command(context.Background(), []string{"a.yaml", "--seed", "2", "b.yaml"}, &out, &errb)
	if err == nil || !strings.Contains(err.Error(), "at most one scenario file") {
		t.Errorf("two scenario files: %v", err)
	}
	err = Command(context.Background(), []string{"--policy", "bogus", "testdata/up-16mb.yaml"}, &out, &errb)
	if err == nil || !strings.Contains(err.Error(), `policy "bogus"`) {
		t.Errorf("unknown policy: %v", err)
	}
}
