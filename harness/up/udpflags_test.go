package up

import (
	"bytes"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestUDPRoleFlags: the roles' multi-host flags refuse what cannot work,
// naming the flag (and the port K or the host name); no root, nothing is
// opened.
func TestUDPRoleFlags(t *testing.T) {
	const s = "testdata/up-multijob.yaml" // 2 PSs and 4 workers: switch ports 0-5; small tensors, quick to prepare
	ctl := filepath.Join(t.TempDir(), "sw.sock")
	port := func(k int) string { return "--port=" + string(rune('0'+k)) + "=udp:127.0.0.1:0->127.0.0.1:9" }
	for _, tc := range []struct {
		name string
		main func([]string, *bytes.Buffer) int
		args []string
		want string
	}{
		{"switch port missing", switchMainT, []string{"--scenario", s, "--control", ctl, port(0), port(1), port(3), port(4), port(5)}, "switch port 2 is missing"},
		{"switch port out of range", switchMainT, []string{"--scenario", s, "--control", ctl, port(0), port(1), port(2), port(3), port(4), port(5), port(7)}, "--port 7: the switch has 6 ports"},
		{"switch port twice", switchMainT, []string{"--scenario", s, "--control", ctl, port(0), port(0)}, "switch port 0 given twice"},
		{"switch port not udp", switchMainT, []string{"--scenario", s, "--control", ctl, "--port", "0=tap:x"}, "want udp:LOCAL->REMOTE"},
		{"switch port and taps", switchMainT, []string{"--scenario", s, "--control", ctl, "--taps", "a,b,c,d,e,f", port(0), port(1), port(2), port(3), port(4), port(5)}, "--port replaces --taps"},
		{"switch peers without listen", switchMainT, []string{"--scenario", s, "--control", ctl, "--barrier-peers", "3"}, "--barrier-peers without --barrier-listen"},
		{"switch barrier and start", switchMainT, []string{"--scenario", s, "--control", ctl, "--barrier-listen", "127.0.0.1:0", "--barrier-peers", "3", "--start", "x"}, "--barrier-listen and --start"},
		{"switch result without listen", switchMainT, []string{"--scenario", s, "--control", ctl, "--result", "-"}, "--result without --barrier-listen"},
		{"switch result without scenario", switchMainT, []string{"--control", ctl, "--barrier-listen", "127.0.0.1:0", "--barrier-peers", "3", "--result", "-"}, "--result needs --scenario"},
		{"switch barrier without peers", switchMainT, []string{"--scenario", s, "--control", ctl, "--barrier-listen", "127.0.0.1:0"}, "--barrier-peers N ≥ 1"},
		{"host port and dev", hostMain, []string{"--scenario", s, "--node", "w1.0", "--dev", "eth0", "--port", "udp:127.0.0.1:0->127.0.0.1:9"}, "--port replaces --backend and --dev"},
		{"host bad spec", hostMain, []string{"--scenario", s, "--node", "w1.0", "--port", "udp:127.0.0.1:0"}, "--port udp:127.0.0.1:0"},
		{"host name does not resolve", hostMain, []string{"--scenario", s, "--node", "w1.0", "--resolve-timeout", "300ms", "--port", "udp:127.0.0.1:0->inabox-no-such-host.invalid:7003"},
			"--port udp:127.0.0.1:0->inabox-no-such-host.invalid:7003: host inabox-no-such-host.invalid:7003 did not resolve within --resolve-timeout 300ms"},
		{"co-located ps", psMainT, []string{"--scenario", "testdata/up-colocated.yaml", "--node", "ps1"},
			`--node "ps1": co-located with worker w2.0 on host h2 (topology.ps.placement: co-located): inahost --node w2.0 runs it`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var stderr bytes.Buffer
			t0 := time.Now()
			code := tc.main(tc.args, &stderr)
			if code == 0 || !strings.Contains(stderr.String(), tc.want) {
				t.Errorf("exit %d, stderr %q; want it to say %q", code, stderr.String(), tc.want)
			}
			if d := time.Since(t0); d > 10*time.Second {
				t.Errorf("took %v", d)
			}
		})
	}
}

func switchMainT(args []string, stderr *bytes.Buffer) int { return SwitchMain(args, stderr) }
func hostMain(args []string, stderr *bytes.Buffer) int    { return HostMain(args, stderr) }
func psMainT(args []string, stderr *bytes.Buffer) int     { return PSMain(args, stderr) }
