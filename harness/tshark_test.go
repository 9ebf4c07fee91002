package harness

import (
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// The pcaps the default scenario writes are real RoCEv2 frames: tshark reads
// every frame of every port's capture and decodes it as RRoCE (InfiniBand BTH
// over UDP 4791) with a good IPv4 checksum and no malformed-packet or expert
// warnings — all but the frames the links corrupted on purpose.
func TestPcapsDecodeWithTshark(t *testing.T) {
	if _, err := exec.LookPath("tshark"); err != nil {
		t.Skip("tshark not installed (apt-get install tshark; CI installs it)")
	}
	cfg := DefaultDemo
	cfg.Messages = 3000
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
		out, err := exec.Command("tshark", "-r", file, "-o", "ip.check_checksum:TRUE",
			"-T", "fields", "-E", "separator=|", "-e", "frame.protocols", "-e", "ip.checksum.status",
			"-e", "infiniband.bth.opcode", "-e", "_ws.malformed", "-e", "_ws.expert").Output()
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
			// SEND Only (4) carrying an INA header, or an ACK (17).
			if l != "eth:ethertype:ip:udp:infiniband:data|1|4||" && l != "eth:ethertype:ip:udp:infiniband|1|17||" {
				bad++
			}
		}
		if uint64(bad) > corrupted {
			t.Errorf("%s: %d frames with anomalies, but only %d were corrupted on purpose; first lines:\n%s", port, bad, corrupted, strings.Join(lines[:min(5, len(lines))], "\n"))
		}
		t.Logf("%s: %d frames, %d with anomalies (links corrupted %d)", port, len(lines), bad, corrupted)
	}
}
