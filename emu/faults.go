package emu

import (
	"fmt"
	"slices"
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
	return n.Impair(at, dur, l, Overlay{Loss: loss})
}

// CorruptWindow adds a per-packet probability of corruption on the wire to
// both directions of l for the window [at, at+dur): like
// Impairments.Corrupt, the receiving MAC drops such a frame (bad FCS).
func (n *Network) CorruptWindow(at, dur time.Duration, l *Link, prob float64) error {
	return n.Impair(at, dur, l, Overlay{Corrupt: prob})
}

// DuplicateBurst adds a per-packet probability of duplication to both
// directions of l for the window [at, at+dur).
func (n *Network) DuplicateBurst(at, dur time.Duration, l *Link, prob float64) error {
	return n.Impair(at, dur, l, Overlay{Duplicate: prob})
}

// ReorderBurst adds a per-packet probability of reordering (held back by
// the link's ReorderDelay) to both directions of l for [at, at+dur).
func (n *Network) ReorderBurst(at, dur time.Duration, l *Link, prob float64) error {
	return n.Impair(at, dur, l, Overlay{Reorder: prob})
}

// DelaySpike adds extra propagation delay to both directions of l for
// packets sent in [at, at+dur). Packets keep their order.
func (n *Network) DelaySpike(at, dur time.Duration, l *Link, extra time.Duration) error {
	return n.Impair(at, dur, l, Overlay{Delay: extra})
}

// Overlay is a temporary impairment added on top of a link direction's
// configuration while a window is open. Probabilities combine with the
// configured ones as independent events; Delay and Jitter add.
type Overlay struct {
	Loss              float64 // lost on the wire
	Duplicate         float64 // arrives twice
	Reorder           float64 // held back by the link's ReorderDelay
	Corrupt           float64 // a bit flipped on the wire (dropped by the MAC: bad FCS)
	CorruptUndetected float64 // a bit flipped past the FCS (delivered damaged)
	Delay             time.Duration
	Jitter            time.Duration // uniform extra delay in [0, Jitter], never reordering
}

// Impair adds o to the directions dirs of l (both if none is given) for
// packets sent in [at, at+dur). Windows on the same direction add up.
func (n *Network) Impair(at, dur time.Duration, l *Link, o Overlay, dirs ...Dir) error {
	where := "impairment window on " + l.name
	for _, p := range []struct {
		f string
		x float64
	}{{"Loss", o.Loss}, {"Duplicate", o.Duplicate}, {"Reorder", o.Reorder}, {"Corrupt", o.Corrupt}, {"CorruptUndetected", o.CorruptUndetected}} {
		if err := checkProb(where, "Overlay."+p.f, p.x); err != nil {
			return err
		}
	}
	if o.Delay < 0 {
		return &ConfigError{where, "Overlay.Delay", o.Delay, "must be ≥ 0"}
	}
	if o.Jitter < 0 {
		return &ConfigError{where, "Overlay.Jitter", o.Jitter, "must be ≥ 0"}
	}
	if dur < 0 {
		return &ConfigError{where, "duration", dur, "must be ≥ 0"}
	}
	ds := l.pick(dirs)
	apply := func(sign float64) {
		for _, d := range ds {
			d.extraLoss += sign * o.Loss
			d.extraCorrupt += sign * o.Corrupt
			d.extraDuplicate += sign * o.Duplicate
			d.extraReorder += sign * o.Reorder
			d.extraUndetect += sign * o.CorruptUndetected
			d.extraDelay += int64(sign) * int64(o.Delay)
			d.extraJitter += int64(sign) * int64(o.Jitter)
			if sign < 0 {
				for _, x := range []*float64{&d.extraLoss, &d.extraCorrupt, &d.extraDuplicate, &d.extraReorder, &d.extraUndetect} {
					if *x < 1e-12 {
						*x = 0
					}
				}
			}
			d.refresh()
		}
	}
	n.At(at, func() { apply(1) })
	n.At(at+dur, func() { apply(-1) })
	return nil
}

// pick returns the directions dirs names, both if none.
func (l *Link) pick(dirs []Dir) []*linkDir {
	if len(dirs) == 0 {
		return l.dirs[:]
	}
	ds := make([]*linkDir, 0, 2)
	for _, d := range dirs {
		if ld := l.dirs[d&1]; !slices.Contains(ds, ld) {
			ds = append(ds, ld)
		}
	}
	return ds
}

// Reconfigure changes the directions dirs of l (both if none) at run time
// at: change gets each direction's configuration to modify (a rate or MTU
// change, say); with dur > 0 the previous configuration is restored at
// at+dur. Packets queued or in flight keep their fate.
func (n *Network) Reconfigure(at, dur time.Duration, l *Link, change func(*LinkConfig), dirs ...Dir) error {
	ds := l.pick(dirs)
	for _, d := range ds { // validate the change on the initial configuration
		c := d.cfg
		change(&c)
		if err := c.Validate(d.name); err != nil {
			return err
		}
	}
	saved := make([]LinkConfig, len(ds))
	n.At(at, func() {
		for i, d := range ds {
			saved[i] = d.cfg
			change(&d.cfg)
			d.refresh()
		}
	})
	if dur > 0 {
		n.At(at+dur, func() {
			for i, d := range ds {
				d.cfg = saved[i]
				d.refresh()
			}
		})
	}
	return nil
}

// DirDown takes the directions dirs of l (both if none) down at run time
// at and, with dur > 0, up again at at+dur.
func (n *Network) DirDown(at, dur time.Duration, l *Link, dirs ...Dir) {
	ds := dirs
	if len(ds) == 0 {
		ds = []Dir{AtoB, BtoA}
	}
	n.At(at, func() {
		for _, d := range ds {
			l.SetDirUp(d, false)
		}
	})
	if dur > 0 {
		n.At(at+dur, func() {
			for _, d := range ds {
				l.SetDirUp(d, true)
			}
		})
	}
}

// DirUp brings the directions dirs of l (both if none) up at run time at.
func (n *Network) DirUp(at time.Duration, l *Link, dirs ...Dir) {
	ds := dirs
	if len(ds) == 0 {
		ds = []Dir{AtoB, BtoA}
	}
	n.At(at, func() {
		for _, d := range ds {
			l.SetDirUp(d, true)
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
	ns.timers.clear()
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

// Flap makes the directions dirs of l (both if none) fail and recover at
// random from run time from until until: up for exponentially distributed
// times of mean meanUp, then down for exponentially distributed times of
// mean meanDown (an alternating renewal process, the usual model of a
// flapping link). Its draws come from a generator of its own, seeded from
// the run seed and the link's name, so they do not perturb the link's
// other random effects.
func (n *Network) Flap(from, until time.Duration, l *Link, meanUp, meanDown time.Duration, dirs ...Dir) error {
	where := "flapping on " + l.name
	if meanUp <= 0 {
		return &ConfigError{where, "meanUp", meanUp, "must be > 0"}
	}
	if meanDown <= 0 {
		return &ConfigError{where, "meanDown", meanDown, "must be > 0"}
	}
	rng := n.rngFor("flap " + l.name)
	ds := dirs
	if len(ds) == 0 {
		ds = []Dir{AtoB, BtoA}
	}
	draw := func(mean time.Duration) time.Duration {
		return max(time.Duration(rng.ExpFloat64()*float64(mean)), 1)
	}
	var toggle func(at time.Duration, down bool)
	toggle = func(at time.Duration, down bool) {
		if at >= until {
			return
		}
		n.At(at, func() {
			for _, d := range ds {
				l.SetDirUp(d, !down)
			}
			mean := meanDown
			if !down {
				mean = meanUp
			}
			toggle(at+draw(mean), !down)
		})
	}
	toggle(from+draw(meanUp), true)
	return nil
}
