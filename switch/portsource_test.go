package sw

import (
	"testing"

	"github.com/inabox/inabox/switch/inahdr"
)

// TestPortSources: a port takes frames from each of its sources (a worker
// and its job's PS on one host) and drops any other source, MAC or IPv4,
// as Spoofed; SetPortSource replaces the sources, AddPortSource adds one.
func TestPortSources(t *testing.T) {
	s := newTestSwitch(t, 16)
	s.AddL2(mac(7), 7)
	const port = 5
	bypass := func(srcMAC, srcIP byte) Reason {
		p := workerPkt(1, 1, 1, 0, []int32{1})
		p.meta.Flags = inahdr.FlagBypass
		p.srcMAC, p.src, p.dstMAC = mac(srcMAC), ip(srcIP), mac(7)
		b := []Frame{{Data: p.build(), InPort: port}}
		s.Process(b)
		return b[0].Reason
	}
	if r := bypass(9, 9); r != ReasonForward {
		t.Fatalf("no port security: %v", r)
	}
	if err := s.SetPortSource(port, PortSource{MAC: mac(1), IP: ip(1)}); err != nil {
		t.Fatal(err)
	}
	if err := s.AddPortSource(port, PortSource{MAC: mac(2), IP: ip(2)}); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		mac, ip byte
		want    Reason
	}{
		{1, 1, ReasonForward}, {2, 2, ReasonForward},
		{3, 3, ReasonSpoofed}, // another host
		{1, 2, ReasonSpoofed}, // one source's MAC with the other's IP
		{2, 1, ReasonSpoofed},
		{1, 3, ReasonSpoofed}, {3, 1, ReasonSpoofed},
	} {
		if r := bypass(c.mac, c.ip); r != c.want {
			t.Errorf("from %d/%d: %v, want %v", c.mac, c.ip, r, c.want)
		}
	}
	if err := s.SetPortSource(port, PortSource{MAC: mac(2), IP: ip(2)}); err != nil {
		t.Fatal(err)
	}
	if r := bypass(1, 1); r != ReasonSpoofed {
		t.Errorf("SetPortSource kept the old source: %v", r)
	}
	if r := bypass(2, 2); r != ReasonForward {
		t.Errorf("SetPortSource: %v", r)
	}
	if err := s.AddPortSource(64, PortSource{}); err != ErrPort {
		t.Errorf("port 64 of 64: %v", err)
	}
}
