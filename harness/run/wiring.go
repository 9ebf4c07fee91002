package run

import (
	"fmt"
	"math"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"time"

	"github.com/inabox/inabox/emu"
	"github.com/inabox/inabox/harness/report"
	"github.com/inabox/inabox/harness/scenario"
	"github.com/inabox/inabox/harness/testbed"
)

// impairments sets the scenario's impairments on the directions of every
// link they name ("all": every host's and PS's link, in name order), and
// starts the flapping ones.
func (r *runner) impairments() error {
	// "all" first, so that a link's own entry wins wherever it is listed
	// (as in scenario.LinkConfig).
	ims := slices.Clone(r.s.Impairments)
	rank := func(im scenario.LinkImpairment) int {
		if im.Link == "all" {
			return 0
		}
		return 1
	}
	slices.SortStableFunc(ims, func(a, b scenario.LinkImpairment) int { return rank(a) - rank(b) })
	flaps := map[*emu.Link]map[emu.Dir]*scenario.Flap{}
	for _, im := range ims {
		e := im.Emu()
		var links []*emu.Link
		if im.Link == "all" {
			for _, h := range r.sortedHosts() {
				for _, l := range r.hostLinks[h] {
					if !slices.Contains(links, l) { // a co-located PS's link is its host's
						links = append(links, l)
					}
				}
			}
		} else {
			links = r.hostLinks[im.Link]
		}
		for _, l := range links {
			for _, d := range r.dirs(l, im.Direction) {
				c := l.Config(d)
				c.Impairments, c.Jitter = e, im.Jitter.D()
				if err := l.SetConfig(d, c); err != nil {
					return err
				}
				if flaps[l] == nil {
					flaps[l] = map[emu.Dir]*scenario.Flap{}
				}
				flaps[l][d] = im.Flap // the entry that wins, as for the rest
			}
		}
	}
	r.flaps = flaps
	for _, l := range r.tb.Net.Links() { // in the network's order: deterministic
		byDir := flaps[l]
		if byDir == nil {
			continue
		}
		a, b := byDir[emu.AtoB], byDir[emu.BtoA]
		var err error
		switch {
		case a != nil && a == b:
			err = r.tb.Net.Flap(0, r.s.TimeLimit.D(), l, a.MeanUp.D(), a.MeanDown.D())
		default:
			for _, d := range []emu.Dir{emu.AtoB, emu.BtoA} {
				if f := byDir[d]; f != nil && err == nil {
					err = r.tb.Net.Flap(0, r.s.TimeLimit.D(), l, f.MeanUp.D(), f.MeanDown.D(), d)
				}
			}
		}
		if err != nil {
			return err
		}
	}
	return nil
}

// dirs are the emulator directions of link l that dir names (both for ""
// or both; up: toward the switch; down: from it).
func (r *runner) dirs(l *emu.Link, dir string) []emu.Dir {
	_, b := l.Ends()
	up, down := emu.AtoB, emu.BtoA
	if b.Node != testbed.SwitchNode {
		up, down = emu.BtoA, emu.AtoB
	}
	switch dir {
	case scenario.DirUp:
		return []emu.Dir{up}
	case scenario.DirDown:
		return []emu.Dir{down}
	}
	return []emu.Dir{emu.AtoB, emu.BtoA}
}

// sortedHosts are the hosts and PSs with links, by name.
func (r *runner) sortedHosts() []string {
	hs := make([]string, 0, len(r.hostLinks))
	for h := range r.hostLinks {
		hs = append(hs, h)
	}
	sort.Strings(hs)
	return hs
}

// faults schedules the scenario's faults: at their run times, or when
// the events they are timed from happen (watch). Link faults act on every
// link of the target, crashes on every node of the target.
func (r *runner) faults() error {
	var timed []timedFault
	for i, f := range r.s.Faults {
		sched, err := r.faultAt(i, f)
		if err != nil {
			return fmt.Errorf("%s: faults[%d]: %w", r.s.File(), i, err)
		}
		if f.When == nil {
			if err := sched(f.At.D()); err != nil {
				return fmt.Errorf("%s: faults[%d]: %w", r.s.File(), i, err)
			}
			continue
		}
		timed = append(timed, timedFault{i: i, when: f.When, delay: f.At.D(), sched: sched})
	}
	if len(timed) > 0 {
		r.watch(timed)
	}
	return nil
}

// faultAt returns the function that schedules fault i (f) at run time at.
// It checks what it can at once, so that a trigger cannot fail later.
func (r *runner) faultAt(i int, f scenario.Fault) (func(at time.Duration) error, error) {
	n := r.tb.Net
	dur := f.Duration.D()
	record := func(at time.Duration) {
		rec := report.FaultRecord{At: report.Num(at.Seconds()), Kind: f.Kind, Target: f.Target, Duration: report.Num(dur.Seconds()),
			Value: f.Value, LoseState: f.LoseState, Direction: f.Direction}
		if f.When != nil {
			rec.When = f.When.String()
		}
		n.At(at, func() { r.col.Fault(rec) }) // recorded when (if) it fires
	}
	switch f.Kind {
	case scenario.FaultSwitchReboot:
		return func(at time.Duration) error {
			record(at)
			if err := n.Crash(at, testbed.SwitchNode); err != nil {
				return err
			}
			return n.Restart(at+dur, testbed.SwitchNode)
		}, nil
	case scenario.FaultSwitchCrash:
		return func(at time.Duration) error {
			record(at)
			if err := n.Crash(at, testbed.SwitchNode); err != nil {
				return err
			}
			n.At(at, func() {
				r.fatal = fmt.Errorf("the switch crashed at %v and does not restart (faults[%d]): no job can finish", at, i)
			})
			return nil
		}, nil
	case scenario.FaultNodeCrash:
		restart := n.Resume
		if f.LoseState {
			restart = n.Restart
		}
		return func(at time.Duration) error {
			record(at)
			for _, node := range r.hostNodes[f.Target] {
				if err := n.Crash(at, node); err != nil {
					return err
				}
				if dur > 0 {
					if err := restart(at+dur, node); err != nil {
						return err
					}
				} else if !r.tb.Idle(node) {
					// It never comes back: the run cannot finish.
					node, at := node, at
					n.At(at, func() {
						r.fatal = fmt.Errorf("%s crashed at %v and does not restart: the jobs it serves cannot finish", node, at)
					})
				}
			}
			return nil
		}, nil
	}
	var o emu.Overlay
	var change func(*emu.LinkConfig)
	switch f.Kind {
	case scenario.FaultLossBurst:
		o.Loss = f.Value
	case scenario.FaultDupBurst:
		o.Duplicate = f.Value
	case scenario.FaultReorderBurst:
		o.Reorder = f.Value
	case scenario.FaultCorrupt:
		o.Corrupt = f.Value
	case scenario.FaultCorruptUndetected:
		o.CorruptUndetected = f.Value
	case scenario.FaultDelaySpike:
		o.Delay = time.Duration(f.Value * float64(time.Microsecond))
	case scenario.FaultJitterBurst:
		o.Jitter = time.Duration(f.Value * float64(time.Microsecond))
	case scenario.FaultRateChange:
		bps := int64(math.Round(f.Value * 1e9 * r.s.Scaling.RateScale))
		change = func(c *emu.LinkConfig) { c.BitsPerSecond = bps }
	case scenario.FaultMTUChange:
		mtu := int(f.Value)
		change = func(c *emu.LinkConfig) { c.MTUBytes = mtu }
	case scenario.FaultLinkDown, scenario.FaultLinkUp:
	default:
		return nil, fmt.Errorf("kind %q: not a fault kind", f.Kind)
	}
	links := r.hostLinks[f.Target]
	return func(at time.Duration) error {
		record(at)
		for _, l := range links {
			ds := r.dirs(l, f.Direction)
			var err error
			switch f.Kind {
			case scenario.FaultLinkDown:
				n.DirDown(at, dur, l, ds...)
			case scenario.FaultLinkUp:
				n.DirUp(at, l, ds...)
			case scenario.FaultRateChange, scenario.FaultMTUChange:
				err = n.Reconfigure(at, dur, l, change, ds...)
			default:
				err = n.Impair(at, dur, l, o, ds...)
			}
			if err != nil {
				return err
			}
		}
		return nil
	}, nil
}

// pcap captures every worker's and PS's link at its host end into dir,
// one file each named by PcapName (h0-w1.0-sw3.pcap, ps0-sw4.pcap), and
// returns the function that closes the files.
func (r *runner) pcap(dir string) (func(), error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	var files []*os.File
	closeAll := func() {
		for _, f := range files {
			f.Close()
		}
	}
	n := r.tb.Net
	add := func(name, node string) error {
		f, err := os.Create(filepath.Join(dir, name))
		if err != nil {
			return err
		}
		files = append(files, f)
		return n.Capture(node, 0, f)
	}
	for i, p := range r.plans {
		for w := range p.Workers {
			wh := r.tb.Worker(i, w)
			end := Peer{Role: "worker", Host: p.Hosts[w], Node: wh.Name}.End()
			if err := add(PcapName(end, SwitchEnd(wh.Port)), wh.Name); err != nil {
				closeAll()
				return nil, err
			}
		}
	}
	for i := range r.s.PSNames() {
		if i >= len(r.tb.PSs) {
			continue
		}
		ps := r.tb.PSs[i]
		if err := add(PcapName(fmt.Sprintf("ps%d", i), SwitchEnd(ps.Port)), ps.Name); err != nil {
			closeAll()
			return nil, err
		}
	}
	return closeAll, nil
}
