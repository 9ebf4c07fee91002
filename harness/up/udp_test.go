package up

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"runtime"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/inabox/inabox/harness/run"
	"github.com/inabox/inabox/harness/up/faultctl"
)

// udpScenario is the smallest scenario of testdata: two DynaINA jobs of
// two workers and a PS, three all-reduces each (1 and 5 MiB).
const udpScenario = "testdata/up-multijob.yaml"

// checks is a worker's result without its times: what must be the same
// over any transport (the all-reduces are exact by construction; times
// are not compared).
type checks struct {
	Name, Job  string
	Rank       int
	Exact      bool
	Iterations []run.IterationCheck
}

func workerChecks(res Result) []checks {
	var out []checks
	for _, w := range res.Workers {
		c := checks{Name: w.Name, Job: w.Job, Rank: w.Rank, Exact: w.Exact}
		for _, it := range w.Iterations {
			it.Start, it.End = 0, 0
			c.Iterations = append(c.Iterations, it)
		}
		out = append(out, c)
	}
	return out
}

// linksOf lists the devices of a namespace with their kinds.
func linksOf(t *testing.T, ns string) string {
	out, err := exec.Command("ip", "-n", ns, "-d", "-o", "link").CombinedOutput()
	if err != nil {
		t.Errorf("ip -n %s link: %v\n%s", ns, err, out)
	}
	return string(out)
}

// udpChecks is the expectation of TestUpUDP: the workers' checks of
// udpScenario over TAP (whose own tests run it there), without times.
// INABOX_WRITE_CHECKS=1 go test -run 'TestUpUDP$' ./harness/up runs the
// scenario over TAP instead and writes it.
const udpChecks = "testdata/up-multijob.checks.json"

// TestUpUDP is the multi-host path on one machine: the scenario's switch,
// PS and workers each in a namespace that stands in for a machine, joined
// only by routed UDP through a router namespace (no bridge, no TAP),
// started by the network barrier and ended by its end phase (no SIGTERM).
// Every worker is exact, and its checks equal those of the same scenario
// over TAP (stored: udpChecks); the switch's combined result (--result,
// from the reports the peers sent over the barrier) equals Up's; the
// captures (taken in the emulator) hold the frames; nothing is left.
func TestUpUDP(t *testing.T) {
	needRoot(t)
	runOver := func(transport string, pcap string) (Result, Result) {
		t.Helper()
		cfg := Config{Scenario: udpScenario, Command: testCommand, Timeout: 40 * time.Second, Transport: transport, PcapDir: pcap, KeepWorkDir: true}
		var pids map[string]int
		var layout []string // the namespaces' devices, read while the run runs
		var dir string
		cfg.OnRunning = func(p map[string]int) { pids = p }
		cfg.OnStarted = func(ix *faultctl.Index) {
			dir = ix.Dir
			t.Cleanup(func() { os.RemoveAll(ix.Dir) })
			if transport != TransportUDP {
				return
			}
			out, _ := exec.Command("ip", "netns", "list").CombinedOutput()
			for _, l := range strings.Split(string(out), "\n") {
				if f := strings.Fields(l); len(f) > 0 && strings.HasSuffix(f[0], ix.ID) {
					layout = append(layout, f[0]+": "+linksOf(t, f[0]))
				}
			}
		}
		var stdout, stderr bytes.Buffer
		before := runtime.NumGoroutine()
		res, err := Up(context.Background(), cfg, &stdout, &stderr)
		goroutinesSettle(t, before)
		t.Logf("%s stdout:\n%s", transport, stdout.String())
		if err != nil {
			t.Fatalf("Up over %s: %v\nstderr:\n%s", transport, err, stderr.String())
		}
		checkNothingLeft(t, res, pids)
		var sw Result
		if transport == TransportUDP {
			if err := readJSON(filepath.Join(dir, "result.json"), &sw); err != nil {
				t.Fatalf("the switch's result: %v", err)
			}
			for _, l := range layout {
				if strings.Contains(l, "bridge") || strings.Contains(l, " tun ") || strings.Contains(l, "tap") {
					t.Errorf("a bridge or TAP in the UDP layout: %s", l)
				}
			}
			if want := 2 + len(pids) - 1; len(layout) != want { // router + switch + peers
				t.Errorf("%d namespaces while running, want %d (router, switch, %d peers):\n%s", len(layout), want, len(pids)-1, strings.Join(layout, "\n"))
			}
			for _, p := range res.SwitchReport.Ports {
				if !strings.HasPrefix(p.Backend, "udp:10.77.0.2:") {
					t.Errorf("switch port %d over %s, want a UDP socket", p.Port, p.Backend)
				}
			}
			for _, r := range res.PSReports {
				if len(r.Ports) != 1 || !strings.HasPrefix(r.Ports[0].Backend, "udp:10.77.") {
					t.Errorf("PS %s ports %+v, want one UDP socket", r.Node, r.Ports)
				}
			}
		}
		return res, sw
	}
	if os.Getenv("INABOX_WRITE_CHECKS") != "" {
		tap, _ := runOver(TransportTAP, "")
		b, err := json.MarshalIndent(workerChecks(tap), "", "  ")
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(udpChecks, append(b, '\n'), 0o644); err != nil {
			t.Fatal(err)
		}
		t.Skipf("wrote %s from a run over TAP", udpChecks)
	}
	var want []checks
	if b, err := os.ReadFile(udpChecks); err != nil {
		t.Fatal(err)
	} else if err := json.Unmarshal(b, &want); err != nil {
		t.Fatalf("%s: %v", udpChecks, err)
	}
	pcaps := t.TempDir()
	udp, sw := runOver(TransportUDP, pcaps)
	if len(udp.Workers) != 4 || len(udp.Jobs) != 2 {
		t.Fatalf("udp: %d workers, %d jobs", len(udp.Workers), len(udp.Jobs))
	}
	for _, w := range udp.Workers {
		if !w.Exact || len(w.Iterations) != 3 {
			t.Errorf("udp %s: exact=%v, %d iterations", w.Name, w.Exact, len(w.Iterations))
		}
	}
	for _, j := range udp.Jobs {
		if !j.Exact || j.JCT <= 0 {
			t.Errorf("udp job %+v", j)
		}
	}
	if u := workerChecks(udp); !reflect.DeepEqual(u, want) {
		t.Errorf("the workers' checks differ from TAP's (%s):\nudp %+v\ntap %+v", udpChecks, u, want)
	}
	// The switch's result: the same reports, sent over the barrier, built
	// by the same code.
	for _, c := range []struct {
		what    string
		sw, udp any
	}{
		{"jobs", sw.Jobs, udp.Jobs}, {"PS reports", sw.PSReports, udp.PSReports}, {"workers' checks", workerChecks(sw), workerChecks(udp)},
		{"links", sw.Links, udp.Links}, {"start skew", sw.StartSkew, udp.StartSkew}, {"counters", sw.Counters, udp.Counters},
	} {
		if !reflect.DeepEqual(c.sw, c.udp) {
			t.Errorf("the switch's result differs from Up's in its %s:\nswitch %+v\nup     %+v", c.what, c.sw, c.udp)
		}
	}
	for i, w := range sw.Workers {
		if !reflect.DeepEqual(w.Iterations, udp.Workers[i].Iterations) || w.MaxLate != udp.Workers[i].MaxLate {
			t.Errorf("the switch's %s differs from Up's", w.Name)
		}
	}
	for _, j := range udp.Jobs {
		t.Logf("job %s: JCT %v over UDP", j.Name, j.JCT)
	}
	t.Logf("udp worker clocks started within %v", udp.StartSkew)
	// The captures are the emulator's (the switch's ports), whatever the
	// transport, each named by the port and the node on it: up-multijob has
	// its PSs ps0 and ps1 on ports 0 and 1 (a few allocation frames each),
	// the workers on 2-5.
	for _, name := range []string{"sw0-ps0.pcap", "sw1-ps1.pcap", "sw2-h0-w1.0.pcap", "sw3-h1-w1.1.pcap", "sw4-h2-w2.0.pcap", "sw5-h3-w2.1.pcap"} {
		fi, err := os.Stat(filepath.Join(pcaps, name))
		if err != nil || fi.Size() <= 24 {
			t.Errorf("capture %s: %v", name, err)
		}
	}
	checkPcaps(t, pcaps, []int{2, 3, 4, 5}, 100)
}

// TestUpUDPKilled: a worker SIGKILLed mid-run over the UDP transport ends
// Up with an error naming it, and no namespace (router's included), veth
// or process of the run remains.
func TestUpUDPKilled(t *testing.T) {
	needRoot(t)
	cfg := Config{Scenario: udpScenario, Command: testCommand, Timeout: 40 * time.Second, Transport: TransportUDP}
	var pids map[string]int
	cfg.OnRunning = func(p map[string]int) {
		pids = p
		go func() {
			time.Sleep(300 * time.Millisecond)
			syscall.Kill(p["w1.1"], syscall.SIGKILL)
		}()
	}
	var stderr bytes.Buffer
	before := runtime.NumGoroutine()
	res, err := Up(context.Background(), cfg, nil, &stderr)
	goroutinesSettle(t, before)
	t.Logf("error: %v", err)
	if err == nil || !strings.Contains(err.Error(), "w1.1") || !strings.Contains(err.Error(), "died") {
		t.Fatalf("Up with w1.1 killed: %v, want an error naming it\nstderr:\n%s", err, stderr.String())
	}
	checkNothingLeft(t, res, pids)
	if len(res.Namespaces) != 2+len(pids)-1 {
		t.Errorf("namespaces %v, want router, switch and %d peers", res.Namespaces, len(pids)-1)
	}
	for _, n := range res.Namespaces {
		if out, err := exec.Command("ip", "-n", n, "link").CombinedOutput(); err == nil {
			t.Errorf("namespace %s still answers: %s", n, out)
		}
	}
}
