package emu

import (
	"fmt"
	"time"
)

// This file is the fault-injection API: faults scheduled at run times, for
// users' own tests. Each call schedules events; nothing happens until the run
// reaches the given time. Windows of the same kind on the same link add up.

// LinkDown takes link l down at run time at (both directions). Packets queued
// or in flight are dropped.
func (n *Network) LinkDown(at time.Duration, l *Link) {
	n.At(at, func() { l.SetUp(false) })
}

// LinkUp brings link l back up at run time at.
func (n *Network) LinkUp(at time.Duration, l *Link) {
	n.At(at, func() { l.SetUp(true) })
}

// LossBurst adds a loss probability to both directions of l for the window
// [at, at+dur). Use loss 1 for a blackout.
func (n *Network) LossBurst(at, dur time.Duration, l *Link, loss float64) error {
	return n.probWindow("loss burst", "loss", at, dur, l, loss, func(d *linkDir) *float64 { return &d.extraLoss })
}

// CorruptWindow adds a per-packet probability of corruption on the wire to
// both directions of l for the window [at, at+dur): like
// Impairments.Corrupt, the receiving MAC drops such a frame (bad FCS).
func (n *Network) CorruptWindow(at, dur time.Duration, l *Link, prob float64) error {
	return n.probWindow("corruption window", "prob", at, dur, l, prob, func(d *linkDir) *float64 { return &d.extraCorrupt })
}

// DuplicateBurst adds a per-packet probability of duplication to both
// directions of l for the window [at, at+dur).
func (n *Network) DuplicateBurst(at, dur time.Duration, l *Link, prob float64) error {
	return n.probWindow("duplication burst", "prob", at, dur, l, prob, func(d *linkDir) *float64 { return &d.extraDuplicate })
}

// ReorderBurst adds a per-packet probability of reordering (held back by
// the link's ReorderDelay) to both directions of l for [at, at+dur).
func (n *Network) ReorderBurst(at, dur time.Duration, l *Link, prob float64) error {
	return n.probWindow("reordering burst", "prob", at, dur, l, prob, func(d *linkDir) *float64 { return &d.extraReorder })
}

// probWindow adds prob to the probability field of both directions of l
// for [at, at+dur); what and param name it in a configuration error.
func (n *Network) probWindow(what, param string, at, dur time.Duration, l *Link, prob float64, field func(*linkDir) *float64) error {
	if err := checkProb(what+" on "+l.name, param, prob); err != nil {
		return err
	}
	n.window(at, dur, l, func(d *linkDir, sign float64) { *field(d) += sign * prob })
	return nil
}

// DelaySpike adds extra propagation delay to both directions of l for
// packets sent in [at, at+dur). Packets keep their order.
func (n *Network) DelaySpike(at, dur time.Duration, l *Link, extra time.Duration) error {
	if extra < 0 {
		return &ConfigError{"delay spike on " + l.name, "extra", extra, "must be ≥ 0"}
	}
	n.window(at, dur, l, func(d *linkDir, sign float64) { d.extraDelay += int64(sign) * int64(extra) })
	return nil
}

func (n *Network) window(at, dur time.Duration, l *Link, apply func(d *linkDir, sign float64)) {
	n.At(at, func() {
		for _, d := range l.dirs {
			apply(d, 1)
		}
	})
	n.At(at+dur, func() {
		for _, d := range l.dirs {
			apply(d, -1)
			if d.extraLoss < 1e-12 {
				d.extraLoss = 0
			}
			if d.extraCorrupt < 1e-12 {
				d.extraCorrupt = 0
			}
			if d.extraDuplicate < 1e-12 {
				d.extraDuplicate = 0
			}
			if d.extraReorder < 1e-12 {
				d.extraReorder = 0
			}
		}
	})
}

// Crash stops node at run time at: its armed timers are cancelled and
// packets arriving while it is down are dropped (NodePortStats.DropNodeDown).
func (n *Network) Crash(at time.Duration, node string) error {
	ns := n.byName[node]
	if ns == nil {
		return fmt.Errorf("emu: Crash: no node named %q", node)
	}
	n.At(at, func() { n.crash(ns) })
	return nil
}

// Restart restarts a crashed node at run time at: if it implements Resetter
// its state is reset (state loss), then Start is called again. Resume keeps
// the state.
func (n *Network) Restart(at time.Duration, node string) error {
	ns := n.byName[node]
	if ns == nil {
		return fmt.Errorf("emu: Restart: no node named %q", node)
	}
	n.At(at, func() { n.restart(ns) })
	return nil
}

// Resume restarts a crashed node at run time at with its state kept (a
// paused process, a switch that lost power to its timers only): Start is
// called again without Reset. Its timers were lost at the crash; Start
// must re-arm what the node still needs.
func (n *Network) Resume(at time.Duration, node string) error {
	ns := n.byName[node]
	if ns == nil {
		return fmt.Errorf("emu: Resume: no node named %q", node)
	}
	n.At(at, func() {
		if ns.up {
			n.crash(ns)
		}
		ns.up = true
		n.callStart(ns)
	})
	return nil
}

func (n *Network) crash(ns *nodeState) {
	if !ns.up {
		return
	}
	ns.up = false
	clear(ns.timers)
}

func (n *Network) restart(ns *nodeState) {
	if ns.up {
		n.crash(ns)
	}
	ns.up = true
	if r, ok := ns.node.(Resetter); ok {
		r.Reset()
	}
	n.callStart(ns)
}

// Inject makes node send a copy of frame on port at run time at, as if
// the node had sent it (port counters, capture, the link and its
// impairments all see it): for tests of what a misbehaving or hostile host
// can do — forged, replayed or spoofed frames — without writing a node.
func (n *Network) Inject(at time.Duration, node string, port int, frame []byte) error {
	ns := n.byName[node]
	if ns == nil {
		return fmt.Errorf("emu: Inject: no node named %q", node)
	}
	if port < 0 || port >= ns.nports {
		return fmt.Errorf("emu: Inject: node %q has no port %d", node, port)
	}
	b := append([]byte(nil), frame...)
	n.At(at, func() {
		p := n.cache.get()
		p.SetBytes(b)
		n.send(ns, port, p)
	})
	return nil
}
