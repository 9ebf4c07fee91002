package emu_test

import (
	"context"
	"testing"
	"testing/synctest"
	"time"

	"github.com/inabox/inabox/emu"
	"github.com/inabox/inabox/emu/nodes"
)

// SetDirUp takes one direction down as SetUp takes both: what it holds is
// dropped, what is offered meanwhile too; the other direction carries on.
func TestSetDirUp(t *testing.T) {
	n, l, _, b := pair(t, 1, emu.LinkConfig{Delay: 10 * time.Microsecond},
		nodes.TrafficConfig{Count: 100, FrameBytes: 100, Interval: time.Microsecond})
	n.At(30*time.Microsecond+500, func() { l.SetDirUp(emu.AtoB, false) })
	n.At(50*time.Microsecond+500, func() { l.SetDirUp(emu.AtoB, true) })
	var backUp bool
	n.At(40*time.Microsecond, func() { backUp = l.DirUp(emu.BtoA) && !l.DirUp(emu.AtoB) && !l.Up() })
	run(t, n)
	if st := l.Stats(emu.AtoB); st.Drops.LinkDown != 30 || b.Stats().Unique != 70 {
		t.Errorf("link-down drops %d, delivered %d; want 30 and 70 (as TestLinkDownUpDropsInFlight)", st.Drops.LinkDown, b.Stats().Unique)
	}
	if !backUp {
		t.Error("while a→b was down: b→a not up, or a→b not down")
	}
}

// RunRealtimeFrom continues a clock that started before the run: Start sees
// the time since zero, timed calls already due run at once.
func TestRunRealtimeFrom(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		n, _, _, _ := pair(t, 1, emu.LinkConfig{}, nodes.TrafficConfig{Count: 1, FrameBytes: 100})
		var at, late time.Duration
		n.At(time.Millisecond, func() { at = n.Now() })
		n.At(5*time.Millisecond, func() { late = n.Now() })
		zero := time.Now().Add(-3 * time.Millisecond)
		if _, err := n.RunRealtimeFrom(context.Background(), zero, 6*time.Millisecond); err != nil {
			t.Fatal(err)
		}
		if at != 3*time.Millisecond || late != 5*time.Millisecond {
			t.Errorf("a call due at 1 ms ran at %v (want 3 ms: the run's start), one due at 5 ms at %v", at, late)
		}
	})
}

// DoPrompt runs between events while the run is behind real time, where
// Do waits for the loop to go idle.
func TestDoPromptWhileBehind(t *testing.T) {
	n := emu.NewNetwork(emu.Config{})
	must(t, n.AddNode("busy", 1, &busyNode{left: 300}))
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		n.RunRealtime(ctx, 0)
	}()
	time.Sleep(5 * time.Millisecond)
	got := make(chan struct{})
	go func() { n.DoPrompt(func() {}); close(got) }()
	select {
	case <-got:
	case <-time.After(200 * time.Millisecond):
		t.Error("DoPrompt not served while the run is behind")
	}
	cancel()
	<-done
}

// busyNode works 200 µs on each timer and re-arms it 100 µs later, left
// times: its run falls behind and does not idle until then.
type busyNode struct{ left int }

func (b *busyNode) Start(env *emu.Env) { env.SetTimer(0, 1) }
func (b *busyNode) Receive(env *emu.Env, port int, pkts []*emu.Packet) {
	for _, p := range pkts {
		env.Free(p)
	}
}
func (b *busyNode) Timer(env *emu.Env, key uint64) {
	time.Sleep(200 * time.Microsecond)
	if b.left--; b.left > 0 {
		env.SetTimer(env.Now()+100*time.Microsecond, 1) // due in 100 µs, after 200 µs of work
	}
}
