package emu_test

// This file is the example shown in README.md: a test a user can paste into
// their own project. Keep the two in step.

import (
	"net/netip"
	"testing"
	"time"

	"github.com/inabox/inabox/emu"
	"github.com/inabox/inabox/emu/nodes"
)

func TestExampleFaultInjection(t *testing.T) {
	n := emu.NewNetwork(emu.Config{Seed: 1})
	a := nodes.Endpoint{MAC: [6]byte{2, 0, 0, 0, 0, 1}, IP: netip.MustParseAddr("10.0.0.1"), Port: 9}
	b := nodes.Endpoint{MAC: [6]byte{2, 0, 0, 0, 0, 2}, IP: netip.MustParseAddr("10.0.0.2"), Port: 9}
	tx := nodes.NewTraffic(nodes.TrafficConfig{Local: a, Remote: b, Count: 1000, FrameBytes: 1500, Interval: time.Microsecond})
	rx := nodes.NewTraffic(nodes.TrafficConfig{Local: b, Remote: a})
	if err := n.AddNode("tx", 1, tx); err != nil {
		t.Fatal(err)
	}
	if err := n.AddNode("rx", 1, rx); err != nil {
		t.Fatal(err)
	}
	link, err := n.Connect("tx", 0, "rx", 0, emu.LinkConfig{
		BitsPerSecond: 100e9, Delay: 2 * time.Microsecond,
		Impairments: emu.Impairments{Loss: 0.01, Reorder: 0.01},
	})
	if err != nil {
		t.Fatal(err)
	}
	// Faults at virtual times: a 100 µs outage and a window of corruption
	// on the wire (the receiving MAC drops those frames: bad FCS).
	n.LinkDown(300*time.Microsecond, link)
	n.LinkUp(400*time.Microsecond, link)
	if err := n.CorruptWindow(600*time.Microsecond, 50*time.Microsecond, link, 0.5); err != nil {
		t.Fatal(err)
	}
	if _, err := n.RunUntil(10 * time.Millisecond); err != nil {
		t.Fatal(err)
	}
	st := link.Stats(emu.AtoB)
	got := rx.Stats()
	if st.Drops.LinkDown < 100 || st.Drops.FCS == 0 {
		t.Errorf("outage dropped %d, bad FCS %d", st.Drops.LinkDown, st.Drops.FCS)
	}
	// Every frame is accounted for: delivered intact, or dropped (lost,
	// link down, bad FCS, ...).
	if uint64(got.Unique)+st.Drops.Total() != 1000 {
		t.Errorf("unique %d + drops %d != 1000", got.Unique, st.Drops.Total())
	}
}
