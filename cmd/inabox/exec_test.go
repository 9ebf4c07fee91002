package main

import (
	"bytes"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/inabox/inabox/harness/up"
)

// TestExecLookup: inabox exec finds the one running session or the one
// --run names, and otherwise says which are running; a node the session
// does not have is named with the nodes it has. Sessions whose
// orchestrator died do not count.
func TestExecLookup(t *testing.T) {
	old := up.SessionDir
	up.SessionDir = t.TempDir()
	t.Cleanup(func() { up.SessionDir = old })
	write := func(id string, pid int) {
		b, _ := json.Marshal(up.Session{ID: id, Pid: pid, Scenario: "s", Nodes: map[string]string{"switch": "inabox-sw-" + id, "w1.0": "inabox-w1.0-" + id}})
		if err := os.WriteFile(filepath.Join(up.SessionDir, id+".json"), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	gone := exec.Command("true")
	if err := gone.Run(); err != nil {
		t.Fatal(err)
	}
	write("dead0001", gone.Process.Pid) // its orchestrator is gone
	run := func(args ...string) (int, string) {
		var out, errb bytes.Buffer
		code := cli(append([]string{"exec"}, args...), &out, &errb)
		return code, errb.String()
	}
	for _, c := range []struct {
		code int
		args []string
		want string
	}{
		{2, nil, "want NODE -- CMD"},
		{2, []string{"w1.0"}, "no command to run in w1.0"},
		{2, []string{"w1.0", "--"}, "no command to run in w1.0"},
		{2, []string{"--bogus", "w1.0", "--", "true"}, "exec: flag provided but not defined: -bogus"},
		{1, []string{"w1.0", "--", "true"}, "no inabox up session is running (start one: sudo inabox up --hold)"},
		{1, []string{"--run", "dead0001", "w1.0", "--", "true"}, "no inabox up session dead0001 is running (none is)"},
	} {
		if code, errs := run(c.args...); code != c.code || !strings.Contains(errs, c.want) || strings.Count(errs, "inabox:") != 1 {
			t.Errorf("exec %q: exit %d, stderr %q; want %d and %q", c.args, code, errs, c.code, c.want)
		}
	}
	write("aaaa0001", os.Getpid())
	write("bbbb0002", os.Getpid())
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"w1.0", "--", "true"}, "2 inabox up sessions are running: aaaa0001 (s, running, pid "},
		{[]string{"w1.0", "--", "true"}, "choose one with --run ID"},
		{[]string{"--run", "cccc0003", "w1.0", "--", "true"}, "no inabox up session cccc0003 is running (running: aaaa0001 (s, running"},
		{[]string{"--run", "aaaa0001", "w9.9", "--", "true"}, `session aaaa0001 has no node "w9.9" (its nodes: switch, w1.0)`},
	} {
		if code, errs := run(c.args...); code != 1 || !strings.Contains(errs, c.want) {
			t.Errorf("exec %q: exit %d, stderr %q; want 1 and %q", c.args, code, errs, c.want)
		}
	}
	// The node is found: without root, the error says so; as root, the
	// namespace (never made) does not exist.
	want := "inabox-w1.0-aaaa0001"
	if os.Geteuid() != 0 {
		want = "needs root"
	}
	if code, errs := run("--run", "aaaa0001", "w1.0", "--", "true"); code != 1 || !strings.Contains(errs, want) {
		t.Errorf("exec in a missing namespace: exit %d, stderr %q; want %q", code, errs, want)
	}
}
