package main

import (
	"bytes"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
)

// In the demo RC recovers every loss, duplicate, reorder,
// corruption, the link flap and the switch crash: each host receives every
// message of the other exactly once, in order, intact, and the link counters
// conserve packets.
func TestDemoExactlyOnceInOrder(t *testing.T) {
	cfg := defaultDemo
	cfg.Messages = 5000
	r, err := runDemo(cfg)
	if err != nil {
		t.Fatal(err)
	}
	for _, l := range r.Links {
		s := l.Stats
		if s.SentPackets+s.Duplicated != s.DeliveredPackets+s.Drops.Total() {
			t.Errorf("%s: sent %d + dup %d != delivered %d + drops %d", l.Name, s.SentPackets, s.Duplicated, s.DeliveredPackets, s.Drops.Total())
		}
	}
	var faults uint64
	for _, l := range r.Links {
		faults += l.Stats.Drops.Total() + l.Stats.Corrupted + l.Stats.Duplicated + l.Stats.Reordered
	}
	if faults == 0 {
		t.Fatal("no impairment happened: the scenario tests nothing")
	}
	for _, h := range []string{"h1", "h2"} {
		s := r.Hosts[h]
		if s.Sent != cfg.Messages || s.Completed != cfg.Messages || s.Received != cfg.Messages || s.InOrder != cfg.Messages || s.BadPayload != 0 {
			t.Errorf("%s: %+v", h, s)
		}
		if s.QP.TxRetransmits == 0 {
			t.Errorf("%s: no retransmissions despite loss", h)
		}
	}
	var out bytes.Buffer
	r.Print(&out)
	for _, want := range []string{"h1:0<->s:0 a→b", "retransmits", "drop node-down"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("report lacks %q:\n%s", want, out.String())
		}
	}
}

func TestDemoPcapAndDeterminism(t *testing.T) {
	cfg := defaultDemo
	cfg.Messages = 2000
	d1, d2 := t.TempDir(), t.TempDir()
	cfg.PcapDir = d1
	r1, err := runDemo(cfg)
	if err != nil {
		t.Fatal(err)
	}
	cfg.PcapDir = d2
	r2, err := runDemo(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(r1, r2) {
		t.Error("two runs with one seed differ")
	}
	for _, f := range []string{"h1-sw0.pcap", "sw0-h1.pcap", "sw1-h2.pcap", "h2-sw1.pcap"} {
		a, err := os.ReadFile(filepath.Join(d1, f))
		if err != nil {
			t.Fatal(err)
		}
		b, _ := os.ReadFile(filepath.Join(d2, f))
		if len(a) < 100000 || !bytes.Equal(a, b) {
			t.Errorf("%s: %d bytes, identical %v", f, len(a), bytes.Equal(a, b))
		}
	}
}

func TestDemoBadConfig(t *testing.T) {
	cfg := defaultDemo
	cfg.Values = 0
	if _, err := runDemo(cfg); err == nil || !strings.Contains(err.Error(), "Values = 0") {
		t.Errorf("Values 0: %v", err)
	}
}
