package up

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"syscall"

	"github.com/vishvananda/netns"

	"github.com/inabox/inabox/internal/procnode"
)

// SessionDir holds one file per running `inabox up` (<id>.json, a
// Session), so that `inabox exec` finds its nodes' namespaces. Up writes
// it once the namespaces exist and removes it with them; CleanStale removes
// the files of runs whose orchestrator died.
var SessionDir = "/run/inabox"

// Session is a running `inabox up`: its id, orchestrator and the namespace
// of every node (the switch is "switch", the others are the scenario's
// node names: ps, w1.0, ...).
type Session struct {
	ID       string `json:"id"`
	Pid      int    `json:"pid"`
	Scenario string `json:"scenario"`
	Policy   string `json:"policy"`
	// Held: the run has ended and Up keeps its namespaces (--hold) until
	// SIGINT/SIGTERM.
	Held  bool              `json:"held"`
	Dir   string            `json:"dir"`
	Nodes map[string]string `json:"nodes"`
}

func (r *session) sessionFile() string { return filepath.Join(SessionDir, r.id+".json") }

// writeSession writes (or rewrites) the run's Session file.
func (r *session) writeSession(held bool) error {
	s := Session{ID: r.id, Pid: os.Getpid(), Scenario: r.prep.Scenario().Name, Policy: r.prep.Policy(), Held: held, Dir: r.dir,
		Nodes: map[string]string{switchProc: r.swNS()}}
	for i, pe := range r.peers {
		s.Nodes[pe.Node] = r.peerNS(i)
		if c := pe.CoLocated; c != nil { // its host's namespace
			s.Nodes[c.PS] = r.peerNS(i)
		}
	}
	if err := os.MkdirAll(SessionDir, 0o755); err != nil {
		return fmt.Errorf("up: session file: %w", err)
	}
	if err := writeJSON(r.sessionFile(), s); err != nil {
		return fmt.Errorf("up: session file: %w", err)
	}
	return nil
}

func (r *session) removeSession() error {
	if err := os.Remove(r.sessionFile()); err != nil && !errors.Is(err, os.ErrNotExist) {
		return err
	}
	return nil
}

// hold keeps the run's namespaces, devices and whatever processes still
// run, after the run ended (runErr), until ctx ends (SIGINT, SIGTERM): it
// says once what it holds and how to enter it.
func (r *session) hold(ctx context.Context, res Result, runErr error) {
	if ctx.Err() != nil {
		return // stopped by a signal: nothing to hold for
	}
	if err := r.writeSession(true); err != nil {
		r.logf("not holding: %v", err)
		return
	}
	nodes := []string{switchProc + " " + r.swNS()}
	for i, pe := range r.peers {
		nodes = append(nodes, pe.Node+" "+r.peerNS(i))
		if c := pe.CoLocated; c != nil {
			nodes = append(nodes, c.PS+" "+r.peerNS(i)+" (co-located)")
		}
	}
	var alive []string
	for n, p := range r.current {
		if !isDone(p) {
			alive = append(alive, n)
		}
	}
	slices.Sort(alive)
	procs := "no process runs any more"
	if len(alive) > 0 {
		procs = "still running: " + strings.Join(alive, ", ")
	}
	if runErr != nil {
		r.logf("the run failed: %v", runErr)
	}
	r.logf("holding the namespaces until Ctrl-C (SIGINT or SIGTERM), %s: %s", procs, strings.Join(nodes, ", "))
	r.logf("a command in a node's namespace: inabox exec --run %s NODE -- CMD (e.g. inabox exec --run %s %s -- ip -br link)", r.id, r.id, r.peers[len(r.peers)-1].Node)
	if r.cfg.OnHold != nil {
		r.cfg.OnHold(res, runErr)
	}
	<-ctx.Done()
	r.logf("%v: removing what the run made", context.Cause(ctx))
}

// Sessions returns the sessions whose orchestrator is alive, by id.
func Sessions() ([]Session, error) {
	files, err := filepath.Glob(filepath.Join(SessionDir, "*.json"))
	if err != nil {
		return nil, err
	}
	var out []Session
	for _, f := range files {
		var s Session
		b, err := os.ReadFile(f)
		if err != nil || json.Unmarshal(b, &s) != nil || s.ID == "" {
			continue
		}
		if s.Pid <= 0 || syscall.Kill(s.Pid, 0) == syscall.ESRCH {
			continue // its orchestrator died: inabox up --clean removes it
		}
		out = append(out, s)
	}
	slices.SortFunc(out, func(a, b Session) int { return strings.Compare(a.ID, b.ID) })
	return out, nil
}

// FindSession is the running session id, or with id "" the only one.
func FindSession(id string) (*Session, error) {
	all, err := Sessions()
	if err != nil {
		return nil, err
	}
	var list []string
	for _, s := range all {
		if s.ID == id || id == "" && len(all) == 1 {
			return &s, nil
		}
		state := "running"
		if s.Held {
			state = "held"
		}
		list = append(list, fmt.Sprintf("%s (%s, %s, pid %d)", s.ID, s.Scenario, state, s.Pid))
	}
	switch {
	case len(all) == 0 && id == "":
		return nil, errors.New("no inabox up session is running (start one: sudo inabox up --hold)")
	case len(all) == 0:
		return nil, fmt.Errorf("no inabox up session %s is running (none is)", id)
	case id == "":
		return nil, fmt.Errorf("%d inabox up sessions are running: %s; choose one with --run ID", len(all), strings.Join(list, ", "))
	}
	return nil, fmt.Errorf("no inabox up session %s is running (running: %s)", id, strings.Join(list, ", "))
}

// Namespace returns the network namespace of node.
func (s *Session) Namespace(node string) (string, error) {
	if ns, ok := s.Nodes[node]; ok {
		return ns, nil
	}
	names := make([]string, 0, len(s.Nodes))
	for n := range s.Nodes {
		names = append(names, n)
	}
	slices.Sort(names)
	return "", fmt.Errorf("session %s has no node %q (its nodes: %s)", s.ID, node, strings.Join(names, ", "))
}

// Exec runs argv in the named network namespace ns with the given standard
// streams and returns its exit code (128+N for a process killed by signal
// N). It needs root. The command starts from a thread locked into ns (a
// child inherits its forking thread's namespace), which is then thrown
// away; the mount namespace is the caller's (as nsenter --net: /sys shows
// the caller's devices, netlink and /proc/net the namespace's). SIGINT is
// left to the command (the terminal sends it to both), SIGTERM and SIGHUP
// are passed on.
func Exec(ns string, argv []string, stdin io.Reader, stdout, stderr io.Writer) (int, error) {
	if len(argv) == 0 {
		return 0, errors.New("no command given")
	}
	if os.Geteuid() != 0 {
		return 0, errors.New("entering a network namespace needs root (CAP_SYS_ADMIN): run it with sudo")
	}
	path, err := exec.LookPath(argv[0])
	if err != nil {
		return 0, err
	}
	cmd := exec.Command(path, argv[1:]...)
	cmd.Args[0] = argv[0]
	cmd.Stdin, cmd.Stdout, cmd.Stderr = stdin, stdout, stderr
	sigs := make(chan os.Signal, 4)
	signal.Notify(sigs, os.Interrupt, syscall.SIGTERM, syscall.SIGHUP)
	defer signal.Stop(sigs)
	started := make(chan error, 1)
	go func() {
		runtime.LockOSThread() // never unlocked: the thread ends with the goroutine
		h, err := netns.GetFromPath(filepath.Join(procnode.NetnsDir, ns))
		if err != nil {
			started <- fmt.Errorf("netns %s: %w", ns, err)
			return
		}
		defer h.Close()
		if err := netns.Set(h); err != nil {
			started <- fmt.Errorf("entering netns %s: %w", ns, err)
			return
		}
		started <- cmd.Start()
	}()
	if err := <-started; err != nil {
		return 0, err
	}
	done := make(chan struct{})
	go func() {
		for {
			select {
			case s := <-sigs:
				if s != os.Interrupt {
					cmd.Process.Signal(s)
				}
			case <-done:
				return
			}
		}
	}()
	err = cmd.Wait()
	close(done)
	if st, ok := cmd.ProcessState.Sys().(syscall.WaitStatus); ok && st.Signaled() {
		return 128 + int(st.Signal()), nil
	}
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		return ee.ExitCode(), nil
	}
	if err != nil {
		return 0, err
	}
	return 0, nil
}

// cleanSessions removes the session files of runs whose orchestrator
// died, and the namespaces they name that still exist.
func cleanSessions() (removed []string, errs []error) {
	files, _ := filepath.Glob(filepath.Join(SessionDir, "*.json"))
	for _, f := range files {
		var s Session
		b, err := os.ReadFile(f)
		if err != nil || json.Unmarshal(b, &s) != nil || s.Pid <= 0 || syscall.Kill(s.Pid, 0) != syscall.ESRCH {
			continue // alive, or not a session file
		}
		for _, ns := range s.Nodes {
			if !strings.HasPrefix(ns, NamePrefix) || !procnode.NetnsExists(ns) {
				continue
			}
			if err := deleteNetns(ns); err != nil {
				errs = append(errs, err)
			} else {
				removed = append(removed, ns)
			}
		}
		os.Remove(f)
	}
	return removed, errs
}
