package up

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// freePort returns a loopback port nothing listens on (network "tcp4" or
// "udp4"), below the kernel's ephemeral range: the processes bind it only
// later, and a port from that range may meanwhile go to any socket the
// kernel numbers itself (a connect, a bind to port 0), here or in another
// package's test. Each port is handed out once per test binary.
func freePort(t *testing.T, network string) int {
	t.Helper()
	lo := 32768 // Linux's default first ephemeral port
	if b, err := os.ReadFile("/proc/sys/net/ipv4/ip_local_port_range"); err == nil {
		if f := strings.Fields(string(b)); len(f) == 2 {
			if v, err := strconv.Atoi(f[0]); err == nil && v > 2048 {
				lo = v
			}
		}
	}
	portsMu.Lock()
	defer portsMu.Unlock()
	for range 1000 {
		p := 1024 + rand.IntN(lo-1024)
		if portsGiven[p] {
			continue
		}
		var err error
		if network == "tcp4" {
			var ln net.Listener
			if ln, err = net.Listen(network, fmt.Sprintf("127.0.0.1:%d", p)); err == nil {
				ln.Close()
			}
		} else {
			var c net.PacketConn
			if c, err = net.ListenPacket(network, fmt.Sprintf("127.0.0.1:%d", p)); err == nil {
				c.Close()
			}
		}
		if err == nil {
			portsGiven[p] = true
			return p
		}
	}
	t.Fatalf("no free %s port below %d in 1,000 tries", network, lo)
	return 0
}

var (
	portsMu    sync.Mutex
	portsGiven = map[int]bool{}
)

type roleProc struct {
	name           string
	cmd            *exec.Cmd
	stdout, stderr bytes.Buffer
	done           chan struct{}
}

// startRoles starts the scenario's switch, PSs and workers as the roles
// run on several machines (the "By hand" commands of docs/processes.md):
// UDP ports on loopback, the start barrier and its end, no orchestrator,
// no namespace. The switch prints its --result on stdout.
func startRoles(t *testing.T, switchExtra ...string) (map[string]*roleProc, string) {
	t.Helper()
	prep, err := prepareScenario(udpScenario, 0, "")
	if err != nil {
		t.Fatal(err)
	}
	peers, err := prep.Peers()
	if err != nil {
		t.Fatal(err)
	}
	_, ports, err := prep.Node(prep.SwitchName())
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	barrier := fmt.Sprintf("127.0.0.1:%d", freePort(t, "tcp4"))
	swPort := make([]int, ports)
	for k := range swPort {
		swPort[k] = freePort(t, "udp4")
	}
	procs := map[string]*roleProc{}
	start := func(name, role string, args ...string) {
		p := &roleProc{name: name, cmd: testCommand(role, args), done: make(chan struct{})}
		p.cmd.Stdout, p.cmd.Stderr = &p.stdout, &p.stderr
		p.cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
		if err := p.cmd.Start(); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() {
			p.cmd.Process.Kill()
			<-p.done
		})
		go func() { p.cmd.Wait(); close(p.done) }()
		procs[name] = p
	}
	scen := []string{"--scenario", udpScenario}
	swArgs := append(append([]string{}, scen...), "--control", "unix:"+filepath.Join(dir, "sw.sock"),
		"--barrier-listen", barrier, "--barrier-peers", fmt.Sprint(len(peers)), "--barrier-timeout", "30s", "--result", "-", "--report", filepath.Join(dir, "switch.json"))
	peerPort := map[string]int{}
	for _, pe := range peers {
		peerPort[pe.Node] = freePort(t, "udp4")
	}
	for k := range swPort {
		remote := "127.0.0.1:9"
		for _, pe := range peers {
			if pe.SwitchPort == k {
				remote = fmt.Sprintf("127.0.0.1:%d", peerPort[pe.Node])
			}
		}
		swArgs = append(swArgs, "--port", fmt.Sprintf("%d=udp:127.0.0.1:%d->%s", k, swPort[k], remote))
	}
	start(switchProc, "switch", append(swArgs, switchExtra...)...)
	for _, pe := range peers {
		role := "host"
		if pe.Role == "ps" {
			role = "ps"
		}
		start(pe.Node, role, append(append([]string{}, scen...), "--node", pe.Node,
			"--port", fmt.Sprintf("udp:127.0.0.1:%d->127.0.0.1:%d", peerPort[pe.Node], swPort[pe.SwitchPort]),
			"--barrier", barrier, "--barrier-timeout", "30s", "--ready", filepath.Join(dir, pe.Node+".ready"),
			"--report", filepath.Join(dir, pe.Node+".json"))...)
	}
	return procs, dir
}

func waitRoles(t *testing.T, procs map[string]*roleProc, d time.Duration) {
	t.Helper()
	deadline := time.After(d)
	for n, p := range procs {
		select {
		case <-p.done:
		case <-deadline:
			t.Fatalf("%s still runs %v after the start (no end through the barrier?)\nstderr: %s", n, d, p.stderr.String())
		}
	}
}

// TestUDPRolesEnd: the roles on "several machines" (loopback UDP, no
// orchestrator, as the pods of --emit k8s run) end by themselves through
// the barrier once every worker is done: every process exits 0, and the
// switch prints the run's Result on stdout — every worker exact, the
// jobs' JCTs, every PS's report — built from the reports the peers sent
// it.
func TestUDPRolesEnd(t *testing.T) {
	procs, _ := startRoles(t)
	waitRoles(t, procs, 60*time.Second)
	for n, p := range procs {
		if code := p.cmd.ProcessState.ExitCode(); code != 0 {
			t.Errorf("%s exited %d: %s", n, code, p.stderr.String())
		}
	}
	sw := procs[switchProc]
	lines := strings.Split(strings.TrimSpace(sw.stdout.String()), "\n")
	if len(lines) != 1 {
		t.Fatalf("the switch printed %d lines, want its result's one:\n%s", len(lines), sw.stdout.String())
	}
	var res Result
	if err := json.Unmarshal([]byte(lines[0]), &res); err != nil {
		t.Fatal(err)
	}
	if len(res.Workers) != 4 || len(res.Jobs) != 2 || len(res.PSReports) != 2 {
		t.Fatalf("result: %d workers, %d jobs, %d PS reports", len(res.Workers), len(res.Jobs), len(res.PSReports))
	}
	for _, w := range res.Workers {
		if !w.Exact || len(w.Iterations) != 3 {
			t.Errorf("%s: exact=%v, %d iterations", w.Name, w.Exact, len(w.Iterations))
		}
	}
	for _, j := range res.Jobs {
		if !j.Exact || j.JCT <= 0 {
			t.Errorf("job %+v", j)
		}
	}
	if len(res.Counters.Reason) == 0 || len(res.SwitchReport.Ports) == 0 {
		t.Errorf("the switch's counters or report missing: %+v", res.Counters)
	}
	var want []checks
	if b, err := os.ReadFile(udpChecks); err == nil && json.Unmarshal(b, &want) == nil {
		if got := workerChecks(res); fmt.Sprint(got) != fmt.Sprint(want) {
			t.Errorf("the workers' checks differ from %s:\n%+v\n%+v", udpChecks, got, want)
		}
	}
}

// TestUDPRolesLost: a worker SIGKILLed mid-run (nothing replaces it)
// makes the switch abort the run after --barrier-lost-timeout: every
// other peer ends with exit 1 saying the switch aborted the run, naming
// the lost worker; the switch still prints the result of what finished,
// naming it, and exits 1. Nothing waits forever.
func TestUDPRolesLost(t *testing.T) {
	procs, dir := startRoles(t, "--barrier-lost-timeout", "1s")
	for deadline := time.Now().Add(40 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		n := 0
		for name := range procs {
			if _, err := os.Stat(filepath.Join(dir, name+".ready")); err == nil {
				n++
			}
		}
		if n == len(procs)-1 {
			break
		}
		for name, p := range procs {
			select {
			case <-p.done:
				t.Fatalf("%s exited %d before every peer was ready: %s", name, p.cmd.ProcessState.ExitCode(), p.stderr.String())
			default:
			}
		}
		if time.Now().After(deadline) {
			var late []string
			for name := range procs {
				if _, err := os.Stat(filepath.Join(dir, name+".ready")); err != nil && name != switchProc {
					late = append(late, name) // still running: its stderr is not ours to read yet
				}
			}
			t.Fatalf("not ready within 40 s: %s", strings.Join(late, ", "))
		}
	}
	time.Sleep(500 * time.Millisecond) // running
	procs["w1.1"].cmd.Process.Signal(syscall.SIGKILL)
	waitRoles(t, procs, 30*time.Second)
	for n, p := range procs {
		code := p.cmd.ProcessState.ExitCode()
		switch {
		case n == "w1.1":
		case code != 1:
			t.Errorf("%s exited %d, want 1: %s", n, code, p.stderr.String())
		case n != switchProc && !(strings.Contains(p.stderr.String(), "aborted the run") && strings.Contains(p.stderr.String(), "w1.1")):
			t.Errorf("%s: %s, want the abort naming w1.1", n, p.stderr.String())
		}
	}
	sw := procs[switchProc]
	var res Result
	if err := json.Unmarshal(bytes.TrimSpace(sw.stdout.Bytes()), &res); err != nil {
		t.Fatalf("the switch's result: %v\n%s", err, sw.stdout.String())
	}
	if !strings.Contains(strings.Join(res.Warnings, "\n"), "w1.1") {
		t.Errorf("the result's warnings do not name w1.1: %q", res.Warnings)
	}
	for _, w := range res.Workers {
		if w.Name == "w1.1" && w.Exact {
			t.Error("the killed w1.1 is exact in the result")
		}
	}
	t.Logf("switch: %s", strings.TrimSpace(sw.stderr.String()))
}
