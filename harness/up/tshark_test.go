package up

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

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
		path := filepath.Join(dir, fmt.Sprintf("sw%d.pcap", p))
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
