package harness

import (
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// The pcaps the emulator writes are real frames: tshark reads every frame of
// every port's capture, decodes it as Ethernet/IPv4/UDP with good IPv4 and UDP
// checksums and no malformed-packet or expert warnings — all but the frames
// the links corrupted on purpose.
func TestPcapsDecodeWithTshark(t *testing.T) {
	if _, err := exec.LookPath("tshark"); err != nil {
		t.Skip("tshark not installed (apt-get install tshark; CI installs it)")
	}
	cfg := DefaultDemo
	cfg.Frames = 3000
	cfg.PcapDir = t.TempDir()
	r, err := RunDemo(cfg)
	if err != nil {
		t.Fatal(err)
	}
	var corrupted uint64
	for _, l := range r.Links {
		corrupted += l.Stats.Corrupted
	}
	for _, port := range []string{"h1:0", "s:0", "s:1", "h2:0"} {
		file := filepath.Join(cfg.PcapDir, strings.Replace(port, ":", "-", 1)+".pcap")
		out, err := exec.Command("tshark", "-r", file, "-o", "ip.check_checksum:TRUE", "-o", "udp.check_checksum:TRUE",
			"-T", "fields", "-E", "separator=|", "-e", "frame.protocols", "-e", "ip.checksum.status", "-e", "udp.checksum.status",
			"-e", "_ws.malformed", "-e", "_ws.expert").Output()
		if err != nil {
			t.Fatalf("tshark %s: %v", file, err)
		}
		lines := strings.Split(strings.TrimSpace(string(out)), "\n")
		ps := r.Ports[port]
		if uint64(len(lines)) != ps.TxPackets+ps.RxPackets {
			t.Errorf("%s: tshark read %d frames, the port sent %d and received %d", port, len(lines), ps.TxPackets, ps.RxPackets)
		}
		bad := 0
		for _, l := range lines {
			if l != "eth:ethertype:ip:udp:data|1|1||" {
				bad++
			}
		}
		if uint64(bad) > corrupted {
			t.Errorf("%s: %d frames with anomalies, but only %d were corrupted on purpose; first lines:\n%s", port, bad, corrupted, strings.Join(lines[:min(5, len(lines))], "\n"))
		}
		t.Logf("%s: %d frames, %d with anomalies (links corrupted %d)", port, len(lines), bad, corrupted)
	}
}
