//go:build linux

package procnode

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/inabox/inabox/emu"
	sw "github.com/inabox/inabox/switch"
)

// helperEnv makes the test binary a switch process for
// BenchmarkRealtimeSyscalls: "netns,backend,dev0,dev1,driver".
const helperEnv = "INABOX_BENCH_SWITCH"

func TestMain(m *testing.M) {
	if h := os.Getenv(helperEnv); h != "" {
		os.Exit(switchHelper(h))
	}
	os.Exit(m.Run())
}

// switchHelper runs the switch node (l2_fwd from port 0 to port 1) until
// its stdin closes, after printing "ready", then prints its Report.
func switchHelper(h string) int {
	f := strings.Split(h, ",")
	if len(f) != 5 {
		fmt.Fprintln(os.Stderr, "bad", helperEnv, h)
		return 2
	}
	s, err := sw.New(sw.Config{Ports: 2})
	if err == nil {
		err = s.AddL2([6]byte{2, 0xbe, 0, 0, 0, 2}, 1)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	p, err := Open(Spec{Name: "switch", Node: sw.NewNode(s), Ports: 2, Netns: f[0], GoroutinePorts: f[4] == "goroutine",
		Attach: []Attachment{{Port: 0, Backend: f[1], Dev: f[2]}, {Port: 1, Backend: f[1], Dev: f[3]}}})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	ctx, cancel := context.WithCancel(context.Background())
	go func() { io.Copy(io.Discard, os.Stdin); cancel() }()
	fmt.Println("ready")
	rep, err := p.Run(ctx)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	json.NewEncoder(os.Stdout).Encode(rep)
	return 0
}

// perfCount counts the system calls and context switches of every thread
// of pid with perf stat until stop is called.
func perfCount(tb testing.TB, pid int) (stop func() (syscalls, ctxsw float64)) {
	var out bytes.Buffer
	cmd := exec.Command("perf", "stat", "-x,", "-e", "raw_syscalls:sys_enter,context-switches", "-p", strconv.Itoa(pid))
	cmd.Stderr = &out
	if err := cmd.Start(); err != nil {
		tb.Skip("perf:", err)
	}
	time.Sleep(200 * time.Millisecond) // perf has attached to every thread
	return func() (float64, float64) {
		cmd.Process.Signal(syscall.SIGINT)
		cmd.Wait()
		var sc, cs float64 = -1, -1
		for _, line := range strings.Split(out.String(), "\n") {
			f := strings.Split(line, ",")
			if len(f) < 3 {
				continue
			}
			v, err := strconv.ParseFloat(f[0], 64)
			if err != nil {
				continue
			}
			switch f[2] {
			case "raw_syscalls:sys_enter":
				sc = v
			case "context-switches":
				cs = v
			}
		}
		if sc < 0 || cs < 0 {
			tb.Skipf("perf stat gave no counts: %s", out.String())
		}
		return sc, cs
	}
}

// openUDPIn opens a UDP port "LOCAL->REMOTE" in namespace ns.
func openUDPIn(tb testing.TB, ns, spec string) emu.Port {
	tb.Helper()
	var p emu.Port
	err := InNetns(ns, func() error {
		var err error
		p, err = openUDP(Attachment{Dev: spec, Batch: 64})
		return err
	})
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { p.Close() })
	return p
}

// BenchmarkRealtimeSyscalls measures what the switch process costs the
// kernel per forwarded frame: system calls and context switches of all
// its threads (perf stat on a child process running the switch node),
// with the goroutine driver and the polled one, on TAP devices, on
// AF_PACKET veth ends, on AF_XDP veth ends and on UDP sockets (the
// --transport udp path), at saturation and paced (one frame every 50 µs:
// the per-frame wake-ups of a lightly loaded link).
//
//	go test -run '^$' -bench RealtimeSyscalls -benchtime 100000x ./internal/procnode
func BenchmarkRealtimeSyscalls(b *testing.B) {
	needNetAdmin(b)
	if _, err := exec.LookPath("perf"); err != nil {
		b.Skip("needs perf")
	}
	frame := benchFrame(b)
	for _, load := range []struct {
		name     string
		interval time.Duration
	}{{"paced-50us", 50 * time.Microsecond}, {"saturated", 0}} {
		for _, backend := range []string{BackendTAP, BackendPacket, BackendUDP, BackendXDP} {
			for _, driver := range []string{"goroutine", "polled"} {
				b.Run(fmt.Sprintf("load=%s/backend=%s/driver=%s", load.name, backend, driver), func(b *testing.B) {
					ns := benchNS(b)
					h := nsHandle(b, ns)
					dev0, dev1, g0, g1 := "t0", "t1", "t0", "t1"
					if backend == BackendUDP { // the switch's ports are loopback sockets of the namespace
						linkUp(b, h, "lo")
						dev0, dev1, g0, g1 = "127.0.0.1:7100->127.0.0.1:7200", "127.0.0.1:7101->127.0.0.1:7201", "127.0.0.1:7200->127.0.0.1:7100", "127.0.0.1:7201->127.0.0.1:7101"
					}
					if backend == BackendPacket || backend == BackendXDP {
						dev0, dev1, g0, g1 = "s0", "s1", "g0", "g1"
						benchVeths(b, ns) // one queue each: an AF_XDP port serves one queue
					}
					cmd := exec.Command(os.Args[0], "-test.run=^$")
					cmd.Env = append(os.Environ(), helperEnv+"="+strings.Join([]string{ns, backend, dev0, dev1, driver}, ","))
					cmd.Stderr = os.Stderr
					stdin, err := cmd.StdinPipe()
					if err != nil {
						b.Fatal(err)
					}
					stdout, err := cmd.StdoutPipe()
					if err != nil {
						b.Fatal(err)
					}
					if err := cmd.Start(); err != nil {
						b.Fatal(err)
					}
					defer cmd.Wait()
					defer stdin.Close()
					rd := bufio.NewReader(stdout)
					if l, err := rd.ReadString('\n'); err != nil || l != "ready\n" {
						b.Fatalf("switch process: %q %v", l, err)
					}
					if backend == BackendTAP {
						linkUp(b, h, "t0")
						linkUp(b, h, "t1")
					}
					var gen, sink emu.Port
					if backend == BackendUDP {
						gen, sink = openUDPIn(b, ns, g0), openUDPIn(b, ns, g1)
					} else {
						gen, sink = openPacket(b, ns, g0, 64), openPacket(b, ns, g1, 64)
					}
					stop := perfCount(b, cmd.Process.Pid)
					fwd := pumpPaced(b, gen, sink, frame, load.interval)
					sc, cs := stop()
					stdin.Close()
					var rep Report
					if err := json.NewDecoder(rd).Decode(&rep); err != nil {
						b.Fatal("switch report:", err)
					}
					b.ReportMetric(sc/float64(fwd), "syscalls/frame")
					b.ReportMetric(cs/float64(fwd), "ctxsw/frame")
					b.ReportMetric(float64(rep.Realtime.MaxLate.Microseconds()), "max-late-µs")
				})
			}
		}
	}
}
