package emu_test

import (
	"testing"
	"time"

	"github.com/inabox/inabox/emu"
	"github.com/inabox/inabox/emu/nodes"
)

// duplex joins a and b by one link, each sending count 200-byte frames a
// microsecond apart.
func duplex(t *testing.T, count int) (*emu.Network, *emu.Link) {
	n := emu.NewNetwork(emu.Config{Seed: 1})
	return n, duplexOn(t, n, count)
}

func duplexOn(t *testing.T, n *emu.Network, count int) *emu.Link {
	t.Helper()
	tc := nodes.TrafficConfig{Count: count, FrameBytes: 200, Interval: time.Microsecond}
	ta, tb := tc, tc
	ta.Local, ta.Remote = epA, epB
	tb.Local, tb.Remote = epB, epA
	must(t, n.AddNode("a", 1, nodes.NewTraffic(ta)))
	must(t, n.AddNode("b", 1, nodes.NewTraffic(tb)))
	l, err := n.Connect("a", 0, "b", 0, emu.LinkConfig{})
	must(t, err)
	return l
}

// TestImpairOneDirection: a window on one direction acts on the frames
// sent that way in it, and on no other; each overlay kind has its effect.
func TestImpairOneDirection(t *testing.T) {
	for _, c := range []struct {
		name string
		o    emu.Overlay
		hit  func(emu.LinkStats) uint64
	}{
		{"loss", emu.Overlay{Loss: 1}, func(s emu.LinkStats) uint64 { return s.Drops.Loss }},
		{"corrupt", emu.Overlay{Corrupt: 1}, func(s emu.LinkStats) uint64 { return s.Drops.FCS }},
		{"undetected", emu.Overlay{CorruptUndetected: 1}, func(s emu.LinkStats) uint64 { return s.Corrupted }},
		{"duplicate", emu.Overlay{Duplicate: 1}, func(s emu.LinkStats) uint64 { return s.Duplicated }},
		{"reorder", emu.Overlay{Reorder: 1}, func(s emu.LinkStats) uint64 { return s.Reordered }},
	} {
		n, l := duplex(t, 1000)
		// frames 300..399 of each side are sent in the window
		must(t, n.Impair(300*time.Microsecond-500, 100*time.Microsecond, l, c.o, emu.BtoA))
		run(t, n)
		if ab, ba := c.hit(l.Stats(emu.AtoB)), c.hit(l.Stats(emu.BtoA)); ab != 0 || ba != 100 {
			t.Errorf("%s: a→b %d, b→a %d; want 0 and 100", c.name, ab, ba)
		}
	}
}

// TestImpairDelayAndJitter: a delay window delays the frames sent in it by
// exactly its delay; a jitter window spreads them over [0, jitter] without
// reordering.
func TestImpairDelayAndJitter(t *testing.T) {
	n, l, _, b := pair(t, 1, emu.LinkConfig{Delay: time.Microsecond}, nodes.TrafficConfig{Count: 10, FrameBytes: 100, Interval: time.Millisecond})
	must(t, n.Impair(0, time.Second, l, emu.Overlay{Delay: 50 * time.Microsecond}, emu.AtoB))
	run(t, n)
	// the last frame leaves a at 9 ms and arrives 1 µs + 50 µs later
	if want := 9*time.Millisecond + 51*time.Microsecond; b.Stats().LastRx != want || b.Stats().Unique != 10 {
		t.Errorf("delay window: last arrival %v, want %v", b.Stats().LastRx, want)
	}
	n, l, _, b = pair(t, 1, emu.LinkConfig{}, nodes.TrafficConfig{Count: 1000, FrameBytes: 100, Interval: time.Microsecond})
	must(t, n.Impair(0, time.Second, l, emu.Overlay{Jitter: 20 * time.Microsecond}))
	run(t, n)
	if st := b.Stats(); st.Unique != 1000 || st.Reordered != 0 {
		t.Errorf("jitter window: %+v, want 1000 in order", st)
	}
	if err := n.Impair(0, 1, l, emu.Overlay{Jitter: -1}); err == nil {
		t.Error("negative jitter accepted")
	}
}

// TestReconfigureRestores: a rate or MTU change holds for its window and the
// direction's configuration is restored after it; an invalid change is
// refused at once.
func TestReconfigureRestores(t *testing.T) {
	n, l := duplex(t, 1000)
	must(t, n.Reconfigure(300*time.Microsecond-500, 100*time.Microsecond, l, func(c *emu.LinkConfig) { c.MTUBytes = 100 }, emu.AtoB))
	run(t, n)
	if ab, ba := l.Stats(emu.AtoB).Drops.MTU, l.Stats(emu.BtoA).Drops.MTU; ab != 100 || ba != 0 {
		t.Errorf("MTU drops a→b %d, b→a %d; want 100 and 0", ab, ba)
	}
	if c := l.Config(emu.AtoB); c.MTUBytes != 0 {
		t.Errorf("MTU after the window %d, want the configured 0", c.MTUBytes)
	}
	if err := n.Reconfigure(0, 0, l, func(c *emu.LinkConfig) { c.MTUBytes = 10 }); err == nil {
		t.Error("an MTU below the IPv4 minimum accepted")
	}
	// Impairments set on a clean link for a window apply in it only.
	n, l = duplex(t, 1000)
	must(t, n.Reconfigure(300*time.Microsecond-500, 100*time.Microsecond, l, func(c *emu.LinkConfig) { c.Impairments.Loss = 1 }, emu.AtoB))
	run(t, n)
	if ab, ba := l.Stats(emu.AtoB).Drops.Loss, l.Stats(emu.BtoA).Drops.Loss; ab != 100 || ba != 0 {
		t.Errorf("losses a→b %d, b→a %d; want 100 and 0", ab, ba)
	}
	// And removed from a lossy link for a window, they apply again after.
	n, l = duplex(t, 1000)
	must(t, l.SetImpairments(emu.AtoB, emu.Impairments{Loss: 1}))
	must(t, n.Reconfigure(300*time.Microsecond-500, 100*time.Microsecond, l, func(c *emu.LinkConfig) { c.Impairments.Loss = 0 }, emu.AtoB))
	run(t, n)
	if ab := l.Stats(emu.AtoB).Drops.Loss; ab != 900 {
		t.Errorf("losses a→b %d, want 900 (all but the window's 100)", ab)
	}
}

// TestDirDown: one direction down drops what is sent that way only.
func TestDirDown(t *testing.T) {
	n, l := duplex(t, 1000)
	n.DirDown(300*time.Microsecond-500, 100*time.Microsecond, l, emu.AtoB)
	run(t, n)
	if ab, ba := l.Stats(emu.AtoB).Drops.LinkDown, l.Stats(emu.BtoA).Drops.LinkDown; ab != 100 || ba != 0 {
		t.Errorf("link-down drops a→b %d, b→a %d; want 100 and 0", ab, ba)
	}
	if !l.Up() || !l.DirUp(emu.BtoA) {
		t.Error("not up again")
	}
}

// TestFlap: a flapping direction is down about mean_down/(mean_up+mean_down)
// of the time, the same way for the same seed, and differently for another.
func TestFlap(t *testing.T) {
	down := func(seed uint64) uint64 {
		n := emu.NewNetwork(emu.Config{Seed: seed})
		l := duplexOn(t, n, 30000)
		must(t, n.Flap(0, time.Second, l, 900*time.Microsecond, 100*time.Microsecond, emu.AtoB))
		run(t, n)
		if d := l.Stats(emu.BtoA).Drops.LinkDown; d != 0 { // b→a does not flap
			t.Errorf("b→a dropped %d", d)
		}
		return l.Stats(emu.AtoB).Drops.LinkDown
	}
	a, again, other := down(1), down(1), down(2)
	// 30 ms of traffic, ~30 cycles of 1 ms: ~10 % down (3000 frames; a
	// standard deviation of about 550)
	if a < 1000 || a > 5000 {
		t.Errorf("%d of 30000 frames lost to the flapping, want about 3000", a)
	}
	if a != again || a == other {
		t.Errorf("seed 1: %d then %d; seed 2: %d", a, again, other)
	}
}
