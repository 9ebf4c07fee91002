package up

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/inabox/inabox/internal/procnode"
)

// holdScenario is a small up-16mb: 2 workers, 1 MiB.
const holdScenario = `name: up-hold
seed: 1
policy: freeina
time_limit: 30s
scaling: {tensor_scale: 0.04, rate_scale: 0.001}
topology:
  link_gbps: 100
  link_delay: 5ms
  switch: {slots: 4096, values_per_packet: 256}
jobs:
  - {name: googlenet, model: googlenet, workers: 2, iterations: 1, arrival: 0s}
`

// TestUpHoldExec: with Hold, Up keeps the namespaces after the run until
// its context ends; the session file names them, Exec runs commands in a
// worker's namespace (its eth0 is the veth to the switch) and the switch's
// (its bridges), with their exit codes; once the context ends everything
// is removed, the session file too. A session file of a dead orchestrator
// and its namespace go with CleanStale.
func TestUpHoldExec(t *testing.T) {
	needRoot(t)
	old := SessionDir
	SessionDir = t.TempDir()
	t.Cleanup(func() { SessionDir = old })
	file := filepath.Join(t.TempDir(), "hold.yaml")
	if err := os.WriteFile(file, []byte(holdScenario), 0o644); err != nil {
		t.Fatal(err)
	}
	cfg := Config{Scenario: file, Command: testCommand, Timeout: 30 * time.Second, Hold: true}
	var pids map[string]int
	cfg.OnRunning = func(p map[string]int) { pids = p }
	type outcome struct {
		res Result
		err error
	}
	held := make(chan outcome, 1)
	cfg.OnHold = func(res Result, err error) { held <- outcome{res, err} }
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var stdout, stderr bytes.Buffer
	lw := &lockedWriter{w: &stderr}
	logged := func() string { lw.mu.Lock(); defer lw.mu.Unlock(); return stderr.String() }
	done := make(chan outcome, 1)
	finished := make(chan struct{})
	go func() {
		defer close(finished)
		res, err := Up(ctx, cfg, &stdout, lw)
		done <- outcome{res, err}
	}()
	// On any failure too: Up removes what it made once its context ends.
	t.Cleanup(func() { cancel(); <-finished })
	var h outcome
	select {
	case h = <-held:
	case o := <-done:
		t.Fatalf("Up returned without holding: %v\n%s", o.err, logged())
	case <-time.After(40 * time.Second):
		cancel()
		<-done
		t.Fatal("no hold within 40 s")
	}
	if h.err != nil {
		cancel()
		<-done
		t.Fatalf("run: %v", h.err)
	}
	s, err := FindSession(h.res.ID)
	if err != nil || !s.Held || len(s.Nodes) != 4 { // switch, ps, w1.0, w1.1
		t.Errorf("session: %+v, %v", s, err)
	}
	if only, err := FindSession(""); err != nil || only.ID != h.res.ID {
		t.Errorf("the only session: %+v, %v", only, err)
	}
	run := func(node string, argv ...string) (int, string) {
		t.Helper()
		ns, err := s.Namespace(node)
		if err != nil {
			t.Fatal(err)
		}
		var out, errb bytes.Buffer
		code, err := Exec(ns, argv, nil, &out, &errb)
		if err != nil {
			t.Fatalf("exec %v in %s: %v", argv, node, err)
		}
		return code, out.String() + errb.String()
	}
	if s != nil {
		if code, out := run("w1.0", "ip", "-d", "-o", "link", "show", "dev", "eth0"); code != 0 || !strings.Contains(out, "veth") {
			t.Errorf("w1.0: ip link show eth0: exit %d:\n%s", code, out)
		}
		if code, out := run("switch", "ip", "-br", "link"); code != 0 || !strings.Contains(out, "br1") || strings.Contains(out, "eth0") {
			t.Errorf("switch: ip -br link: exit %d:\n%s", code, out)
		}
		if code, _ := run("w1.1", "sh", "-c", "exit 3"); code != 3 {
			t.Errorf("exit 3: exit code %d", code)
		}
	}
	for _, ns := range h.res.Namespaces {
		if !procnode.NetnsExists(ns) {
			t.Errorf("namespace %s not held", ns)
		}
	}
	if !strings.Contains(logged(), "inabox exec --run "+h.res.ID) {
		t.Errorf("stderr does not say how to exec:\n%s", logged())
	}
	cancel()
	var o outcome
	select {
	case o = <-done:
	case <-time.After(20 * time.Second):
		t.Fatal("Up did not end within 20 s of the cancel")
	}
	if o.err != nil {
		t.Errorf("Up: %v", o.err)
	}
	checkNothingLeft(t, o.res, pids)
	if _, err := os.Stat(filepath.Join(SessionDir, h.res.ID+".json")); !os.IsNotExist(err) {
		t.Errorf("session file left: %v", err)
	}

	// A held session whose orchestrator was SIGKILLed: CleanStale removes
	// its namespace and its file.
	gone := exec.Command("true")
	if err := gone.Run(); err != nil {
		t.Fatal(err)
	}
	ns := NamePrefix + "held-" + strconv.Itoa(gone.Process.Pid)
	if err := procnode.CreateNetns(ns); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { procnode.DeleteNetns(ns) })
	b, _ := json.Marshal(Session{ID: "dead", Pid: gone.Process.Pid, Held: true, Nodes: map[string]string{"w1.0": ns}})
	sf := filepath.Join(SessionDir, "dead.json")
	os.WriteFile(sf, b, 0o644)
	removed, err := CleanStale()
	if err != nil || procnode.NetnsExists(ns) || !strings.Contains(strings.Join(removed, " "), ns) {
		t.Errorf("CleanStale: removed %v, %v; %s exists: %v", removed, err, ns, procnode.NetnsExists(ns))
	}
	if _, err := os.Stat(sf); !os.IsNotExist(err) {
		t.Errorf("stale session file left: %v", err)
	}
}
