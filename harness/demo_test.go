package harness

import (
	"bytes"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
)

// The default scenario conserves frames: everything a host sent is either
// received by the other host or accounted for by a counted drop.
func TestDemoConservation(t *testing.T) {
	cfg := DefaultDemo
	cfg.Frames = 5000
	r, err := RunDemo(cfg)
	if err != nil {
		t.Fatal(err)
	}
	links := map[string]int{}
	for i, l := range r.Links {
		links[l.Name] = i
		s := l.Stats
		// Offered = delivered − duplicates + drops (nothing still in flight).
		if s.SentPackets+s.Duplicated != s.DeliveredPackets+s.Drops.Total() {
			t.Errorf("%s: sent %d + dup %d != delivered %d + drops %d", l.Name, s.SentPackets, s.Duplicated, s.DeliveredPackets, s.Drops.Total())
		}
	}
	for _, h := range []string{"h1", "h2"} {
		s := r.Hosts[h]
		if s.Sent != cfg.Frames || s.Unique == 0 || s.Unique >= cfg.Frames {
			t.Errorf("%s: sent %d unique %d: the impairments should lose some but not all", h, s.Sent, s.Unique)
		}
		if s.Received+s.Corrupt != int(r.Ports[h+":0"].RxPackets) {
			t.Errorf("%s: received %d + corrupt %d != port rx %d", h, s.Received, s.Corrupt, r.Ports[h+":0"].RxPackets)
		}
	}
	var out bytes.Buffer
	r.Print(&out)
	for _, want := range []string{"h1:0<->s:0 a→b", "CE-marked", "drop node-down"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("report lacks %q:\n%s", want, out.String())
		}
	}
}

func TestDemoPcapAndDeterminism(t *testing.T) {
	cfg := DefaultDemo
	cfg.Frames = 2000
	d1, d2 := t.TempDir(), t.TempDir()
	cfg.PcapDir = d1
	r1, err := RunDemo(cfg)
	if err != nil {
		t.Fatal(err)
	}
	cfg.PcapDir = d2
	r2, err := RunDemo(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(r1, r2) {
		t.Error("two runs with one seed differ")
	}
	for _, f := range []string{"h1-0.pcap", "s-0.pcap", "s-1.pcap", "h2-0.pcap"} {
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
