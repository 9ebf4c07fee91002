package up

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/inabox/inabox/harness/run"
	"github.com/inabox/inabox/internal/testenv"
)

// checkPcaps runs tshark over every frame of the captures of the given
// switch TAPs: each must decode as RRoCE (eth:ethertype:ip:udp:infiniband)
// with no malformed or expert-error flags, and each must hold at least
// minFrames frames.
func checkPcaps(t *testing.T, dir string, ports []int, minFrames int) {
	t.Helper()
	tshark, err := exec.LookPath("tshark")
	if err != nil {
		if os.Getenv(testenv.NoSkipVar) != "" {
			t.Fatalf("tshark not installed (%s is set: the captures must be decoded)", testenv.NoSkipVar)
		}
		t.Log("tshark not installed; skipping the decode check of the captures")
		return
	}
	for _, p := range ports {
		path := switchPcap(t, dir, p)
		args := []string{"-n", "-r", path, "--disable-heuristic", "rpcrdma_infiniband",
			"-T", "fields", "-E", "separator=|", "-e", "frame.protocols", "-e", "infiniband.bth.opcode", "-e", "_ws.malformed", "-e", "_ws.expert.severity"}
		var stderr bytes.Buffer
		cmd := testenv.CleanProfile(t, exec.Command(tshark, args...))
		cmd.Stderr = &stderr
		out, err := cmd.Output()
		if err != nil {
			t.Fatalf("tshark %v: %v\n%s", args, err, stderr.Bytes())
		}
		lines := strings.Split(strings.TrimSpace(string(out)), "\n")
		if len(lines) < minFrames {
			t.Fatalf("%s: only %d frames", path, len(lines))
		}
		for i, l := range lines {
			f := strings.Split(l, "|")
			if len(f) != 4 || !strings.HasPrefix(f[0], "eth:ethertype:ip:udp:infiniband") || f[1] == "" || f[2] != "" || f[3] != "" {
				t.Fatalf("%s frame %d: %q", path, i+1, l)
			}
		}
		t.Logf("%s: tshark decoded %d frames as RRoCE, none malformed", path, len(lines))
	}
}

// switchPcap is the capture of switch port p in dir: the one file named
// sw<p>-<node>.pcap (run.PcapName), or sw<p>.pcap for a port with no node.
func switchPcap(t *testing.T, dir string, p int) string {
	t.Helper()
	end := run.SwitchEnd(p)
	m, _ := filepath.Glob(filepath.Join(dir, end+"-*.pcap"))
	if _, err := os.Stat(filepath.Join(dir, end+".pcap")); err == nil {
		m = append(m, filepath.Join(dir, end+".pcap"))
	}
	if len(m) != 1 {
		t.Fatalf("port %d: %d captures in %s (%v), want 1", p, len(m), dir, m)
	}
	return m[0]
}
