package up

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/inabox/inabox/harness/up/faultctl"
)

// TestUpFaults runs up-faults.yaml — a FreeINA job hit by a loss burst on
// h0, a delay spike on h1, a paused worker process (node_crash of h2
// without state loss), jitter on h1's down direction from half of the
// first all-reduce and a rate cut on ps0's up direction after the first
// packet — and meanwhile drives the fault API by hand: loss 1
// on h3's up direction and back (the counters show the loss, then
// delivery again), h3 down and up, a bad value refused with its field,
// `inabox fault list`. Every all-reduce is still exact and the result
// records the faults that fired.
func TestUpFaults(t *testing.T) {
	needRoot(t)
	cfg := Config{Scenario: "testdata/up-faults.yaml", Command: testCommand, Timeout: 50 * time.Second}
	var pids map[string]int
	cfg.OnRunning = func(p map[string]int) { pids = p }
	api := make(chan error, 1)
	var listOut string
	cfg.OnStarted = func(ix *faultctl.Index) {
		go func() {
			var err error
			listOut, err = driveAPI(ix)
			api <- err
		}()
	}
	var stdout, stderr bytes.Buffer
	res, err := Up(context.Background(), cfg, &stdout, &stderr)
	t.Logf("stdout:\n%s", stdout.String())
	select {
	case aerr := <-api:
		if aerr != nil {
			t.Error(aerr)
		}
	case <-time.After(25 * time.Second):
		t.Error("the fault API calls did not return")
	}
	if err != nil {
		t.Fatalf("Up: %v\nstderr:\n%s", err, stderr.String())
	}
	checkNothingLeft(t, res, pids)
	for _, w := range res.Workers {
		if !w.Exact || len(w.Iterations) != 1 {
			t.Errorf("%s: exact=%v, %d iterations", w.Name, w.Exact, len(w.Iterations))
		}
	}
	var kinds []string
	for _, f := range res.Faults {
		kinds = append(kinds, f.Kind)
		// A fault timed from an event waits for the worker's report of it
		// too (an HTTP answer from a busy process).
		tol := 50 * time.Millisecond
		if f.When != "" {
			tol = 150 * time.Millisecond
		}
		if late := (f.Fired - f.Planned).D(); late < 0 || late > tol || f.Error != "" {
			t.Errorf("fault %d (%s) planned at %v fired at %v (error %q)", f.Index, f.Kind, f.Planned, f.Fired, f.Error)
		}
	}
	if strings.Join(kinds, ",") != "loss_burst,delay_spike,node_crash,jitter_burst,rate_change" || len(res.Faults[2].Steps) != 2 {
		t.Errorf("faults fired: %+v", res.Faults)
	}
	// Timed from the job's progress: the first packet leaves after its
	// compute phase; half the first all-reduce's chunks come later.
	if f := res.Faults[4]; f.When != "job googlenet's first packet" || f.Planned.D() < 100*time.Millisecond ||
		!strings.HasPrefix(f.Steps[0].What, "rate 0.05 Gb/s on ps0 (up)") {
		t.Errorf("rate_change: %+v", f)
	}
	if f := res.Faults[3]; !strings.Contains(f.When, "all-reduce 0 at 50 %") || f.Planned <= res.Faults[4].Planned {
		t.Errorf("jitter_burst: %+v", f)
	}
	if !strings.Contains(stdout.String(), "fault 2  node_crash h2 (at 600ms): +") || !strings.Contains(stdout.String(), "cont w1.2") {
		t.Errorf("the summary does not list the faults:\n%s", stdout.String())
	}
	if listOut != "" {
		lines := strings.Split(strings.TrimSpace(listOut), "\n")
		// A header, then both directions of h0..h3 and ps0.
		if len(lines) != 11 || !strings.HasPrefix(lines[0], "LINK") || !strings.HasPrefix(lines[1], "h0    w1.0  up") ||
			!strings.HasPrefix(lines[10], "ps0   ps    down") {
			t.Errorf("inabox fault list:\n%s", listOut)
		}
	}
}

// driveAPI works h3 through the fault API while the run goes on and
// returns `inabox fault list`'s output ("" without the inabox binary).
func driveAPI(ix *faultctl.Index) (string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	errf := func(format string, a ...any) error { return fmt.Errorf("fault API: "+format, a...) }
	h3up := func() (faultctl.DirState, error) {
		st, err := ix.Each(ctx, "h3", faultctl.Up, func(ctx context.Context, c *faultctl.Client, l, d string) ([]faultctl.DirState, error) {
			return c.List(ctx) // the process's every direction: h3 up only
		})
		if err != nil || len(st) != 1 {
			return faultctl.DirState{}, errf("h3 up: %d directions, %v", len(st), err)
		}
		return st[0], nil
	}
	// Whatever happens, h3 is as the scenario made it when this returns
	// (a link left lossy would end the run: RC gives up).
	defer ix.Each(context.Background(), "h3", faultctl.Both, func(ctx context.Context, c *faultctl.Client, l, d string) ([]faultctl.DirState, error) {
		return c.Reset(ctx, l, d)
	})
	// poll samples h3 up every 5 ms until ok holds, for at most limit.
	poll := func(limit time.Duration, ok func(faultctl.DirState) bool) (faultctl.DirState, error) {
		end := time.Now().Add(limit)
		for {
			st, err := h3up()
			if err != nil || ok(st) || time.Now().After(end) {
				return st, err
			}
			time.Sleep(5 * time.Millisecond)
		}
	}
	// Wait until h3 sends (the all-reduce is running): on a loaded machine
	// the processes start and compute later than planned.
	first, err := h3up()
	if err != nil {
		return "", err
	}
	if _, err := poll(5*time.Second, func(st faultctl.DirState) bool {
		return st.Counters.SentPackets > first.Counters.SentPackets+64
	}); err != nil {
		return "", err
	}
	all, err := ix.List(ctx)
	if err != nil || len(all) != 10 {
		return "", errf("list: %d directions, %v", len(all), err)
	}
	set := func(p faultctl.ImpairmentsPatch) error {
		_, err := ix.Each(ctx, "h3", faultctl.Up, func(ctx context.Context, c *faultctl.Client, l, d string) ([]faultctl.DirState, error) {
			return c.SetImpairments(ctx, l, d, p)
		})
		return err
	}
	one := 1.0
	if err := set(faultctl.ImpairmentsPatch{Loss: &one}); err != nil {
		return "", errf("set loss 1: %v", err)
	}
	before, err := h3up()
	if err != nil {
		return "", err
	}
	// Short: a blackout of about as long as an RC queue pair's retries
	// (FreeINA's worker to PS) would end the run; over as soon as a frame
	// is lost (at most 60 ms).
	during, err := poll(60*time.Millisecond, func(st faultctl.DirState) bool {
		return st.Counters.Drops.Loss > before.Counters.Drops.Loss
	})
	if err != nil {
		return "", err
	}
	// (What was queued before keeps its fate: it is still delivered.)
	if during.Impairments.Loss != 1 || during.Counters.Drops.Loss <= before.Counters.Drops.Loss {
		return "", errf("with loss 1: before %+v, during %+v", before.Counters, during.Counters)
	}
	if _, err := ix.Each(ctx, "h3", faultctl.Up, func(ctx context.Context, c *faultctl.Client, l, d string) ([]faultctl.DirState, error) {
		return c.ClearImpairments(ctx, l, d)
	}); err != nil {
		return "", errf("clear: %v", err)
	}
	after, err := poll(time.Second, func(st faultctl.DirState) bool {
		return st.Counters.DeliveredPackets > during.Counters.DeliveredPackets
	})
	if err != nil {
		return "", err
	}
	if after.Impairments.Loss != 0 || after.Counters.DeliveredPackets <= during.Counters.DeliveredPackets {
		return "", errf("cleared: during %+v, after %+v", during.Counters, after.Counters)
	}
	two := 2.0
	var se *faultctl.StatusError
	if err := set(faultctl.ImpairmentsPatch{Loss: &two}); !errors.As(err, &se) || se.Code != 400 || !strings.Contains(se.Msg, "loss = 2") {
		return "", errf("loss 2: %v", err)
	}
	// Down, in both processes, then up.
	st, err := ix.Each(ctx, "h3", faultctl.Both, func(ctx context.Context, c *faultctl.Client, l, d string) ([]faultctl.DirState, error) {
		return c.SetUp(ctx, l, d, false, 0)
	})
	if err != nil || len(st) != 2 || st[0].Up || st[1].Up || st[0].Dir != faultctl.Up || st[1].Dir != faultctl.Down {
		return "", errf("down: %+v, %v", st, err)
	}
	time.Sleep(10 * time.Millisecond)
	if st, err = ix.Each(ctx, "h3", faultctl.Both, func(ctx context.Context, c *faultctl.Client, l, d string) ([]faultctl.DirState, error) {
		return c.SetUp(ctx, l, d, true, 0)
	}); err != nil || len(st) != 2 || !st[0].Up || !st[1].Up {
		return "", errf("up: %+v, %v", st, err)
	}
	if binDir == "" {
		return "", nil
	}
	out, err := exec.CommandContext(ctx, filepath.Join(binDir, "inabox"), "fault", "--run", ix.Dir, "list").CombinedOutput()
	if err != nil {
		return "", errf("inabox fault list: %v\n%s", err, out)
	}
	// The CLI sees h3 up again, with its counters.
	if !slices.ContainsFunc(strings.Split(string(out), "\n"), func(l string) bool { return strings.HasPrefix(l, "h3    w1.3  up    up") }) {
		return "", errf("inabox fault list:\n%s", out)
	}
	return string(out), nil
}

// TestUpCrashLoseState: a process killed and replaced with its node's
// state lost does what the emulator's Restart does for its policy. The
// switch reboots and an ATP worker rejoins from its checkpoint
// (up-atp-crash.yaml): every all-reduce is exact; a FreeINA worker cannot
// be re-admitted and the run stops with the emulator's error, naming it.
func TestUpCrashLoseState(t *testing.T) {
	needRoot(t)
	t.Run("atp rejoins", func(t *testing.T) {
		res, pids := upOK(t, Config{Scenario: "testdata/up-atp-crash.yaml", Command: testCommand, Timeout: 50 * time.Second})
		if len(res.Faults) != 2 || len(res.Faults[1].Steps) != 2 || res.Faults[1].Steps[1].What != "restart w1.1" ||
			res.Faults[0].Kind != "switch_reboot" || len(res.Faults[0].Steps) != 2 {
			t.Fatalf("faults: %+v", res.Faults)
		}
		if res.Switch.Pid == pids["switch"] {
			t.Error("the switch reports from the process that was killed")
		}
		pids["switch (restarted)"] = res.Switch.Pid
		crash := res.Faults[1].Steps[0].At.D()
		for _, w := range res.Workers {
			if !w.Exact || len(w.Iterations) != 3 {
				t.Errorf("%s: exact=%v, %d iterations", w.Name, w.Exact, len(w.Iterations))
			}
			if w.Name == "w1.1" && w.Pid == pids["w1.1"] {
				t.Error("w1.1 reports from the process that was killed")
			}
			pids[w.Name+" (restarted)"] = w.Pid
			// The restarted w1.1 kept what it had finished before the crash
			// (its checkpoint): at least the first all-reduce.
			if w.Name == "w1.1" && (len(w.Iterations) == 0 || w.Iterations[0].End > crash) {
				t.Errorf("w1.1's first all-reduce ended at %v, after the crash at %v: the test did not restore a checkpoint", w.Iterations[0].End, crash)
			}
		}
		checkNothingLeft(t, res, pids)
	})
	t.Run("freeina cannot", func(t *testing.T) {
		b, err := os.ReadFile("testdata/up-faults.yaml")
		if err != nil {
			t.Fatal(err)
		}
		s, _, _ := strings.Cut(string(b), "faults:")
		file := filepath.Join(t.TempDir(), "lose.yaml")
		os.WriteFile(file, []byte(s+"faults:\n  - {at: 300ms, kind: node_crash, target: h1, duration: 50ms, lose_state: true}\n"), 0o644)
		cfg := Config{Scenario: file, Command: testCommand, Timeout: 50 * time.Second}
		var pids map[string]int
		cfg.OnRunning = func(p map[string]int) { pids = p }
		res, err := Up(context.Background(), cfg, nil, nil)
		want := "up: up-faults: policy freeina: at "
		why := ": w1.1 restarted with its state lost: freeina cannot re-admit a worker mid-job"
		if err == nil || !strings.HasPrefix(err.Error(), want) || !strings.Contains(err.Error(), why) {
			t.Errorf("Up: %v; want %q…%q", err, want, why)
		}
		checkNothingLeft(t, res, pids)
	})
}
