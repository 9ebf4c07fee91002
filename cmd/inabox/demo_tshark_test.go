package main

import (
	"fmt"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/inabox/inabox/internal/testenv"
	"github.com/inabox/inabox/rdma"
)

// The pcaps the demo writes are real RoCEv2 frames: tshark reads
// every frame of every port's capture and decodes it as RRoCE (InfiniBand BTH
// over UDP 4791) with a good IPv4 checksum, the opcode, destination QP and
// PSN that the frame carries (read back here with our own parser), and no
// malformed-packet or expert warnings — all but the frames the links
// corrupted on purpose.
func TestPcapsDecodeWithTshark(t *testing.T) {
	testenv.LookPath(t, "tshark", "apt-get install tshark")
	cfg := defaultDemo
	cfg.Messages = 3000
	cfg.PcapDir = t.TempDir()
	r, err := runDemo(cfg)
	if err != nil {
		t.Fatal(err)
	}
	var corrupted uint64
	for _, l := range r.Links {
		corrupted += l.Stats.Corrupted
	}
	for _, p := range demoPorts {
		port := fmt.Sprintf("%s:%d", p.node, p.port)
		file := filepath.Join(cfg.PcapDir, p.pcap)
		want := ourView(t, file)
		out, err := testenv.CleanProfile(t, exec.Command("tshark", "-r", file, "-o", "ip.check_checksum:TRUE",
			"-T", "fields", "-E", "separator=|", "-e", "frame.protocols", "-e", "ip.checksum.status",
			"-e", "infiniband.bth.opcode", "-e", "infiniband.bth.destqp", "-e", "infiniband.bth.psn",
			"-e", "_ws.malformed", "-e", "_ws.expert")).Output()
		if err != nil {
			t.Fatalf("tshark %s: %v", file, err)
		}
		lines := strings.Split(strings.TrimSpace(string(out)), "\n")
		ps := r.Ports[port]
		if uint64(len(lines)) != ps.TxPackets+ps.RxPackets || len(lines) != len(want) {
			t.Fatalf("%s: tshark read %d frames, we read %d; the port sent %d and received %d", port, len(lines), len(want), ps.TxPackets, ps.RxPackets)
		}
		bad := 0
		for i, l := range lines {
			if want[i] == "" || l != want[i] {
				bad++
				if bad <= 3 {
					t.Logf("%s frame %d: tshark %q, ours %q", port, i+1, l, want[i])
				}
			}
		}
		if uint64(bad) > corrupted {
			t.Errorf("%s: %d frames where tshark disagrees or warns, but only %d were corrupted on purpose", port, bad, corrupted)
		}
		t.Logf("%s: %d frames, %d anomalies (links corrupted %d)", port, len(lines), bad, corrupted)
	}
}

// ourView parses each frame of a pcap with rdma.Frame and renders the line
// tshark must print for it; "" for a frame that does not parse (corrupted).
func ourView(t *testing.T, file string) []string {
	var out []string
	for _, data := range testenv.ReadFrames(t, file) {
		var fr rdma.Frame
		if fr.Parse(data) != nil || !rdma.CheckICRC(data) {
			out = append(out, "")
			continue
		}
		proto := "eth:ethertype:ip:udp:infiniband"
		if len(fr.Payload) > 0 {
			proto += ":data"
		}
		out = append(out, fmt.Sprintf("%s|1|%d|%#06x|%d||", proto, fr.BTH.Opcode(), fr.BTH.DestQP(), fr.BTH.PSN()))
	}
	return out
}
