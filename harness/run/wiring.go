package run

import (
	"fmt"
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

// impairments sets the scenario's impairments on both directions of every
// link they name ("all": every host's and PS's link, in name order).
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
	for _, im := range ims {
		e := emu.Impairments{Loss: im.Loss, Duplicate: im.Duplicate, Reorder: im.Reorder, ReorderDelay: im.ReorderDelay.D(),
			Corrupt: im.Corrupt, CorruptUndetected: im.CorruptUndetected}
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
			for _, d := range []emu.Dir{emu.AtoB, emu.BtoA} {
				c := l.Config(d)
				c.Impairments, c.Jitter = e, im.Jitter.D()
				if err := l.SetConfig(d, c); err != nil {
					return err
				}
			}
		}
	}
	return nil
}

// workersOn is the number of workers on host h.
func (r *runner) workersOn(h string) int {
	n := 0
	for _, p := range r.plans {
		for _, ph := range p.Hosts {
			if ph == h {
				n++
			}
		}
	}
	return n
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

// faults schedules the scenario's faults at their virtual times: link
// faults on every link of the target, crashes on every node of the target.
func (r *runner) faults() error {
	n := r.tb.Net
	for i, f := range r.s.Faults {
		at, dur := f.At.D(), f.Duration.D()
		rec := report.FaultRecord{At: report.Num(at.Seconds()), Kind: f.Kind, Target: f.Target, Duration: report.Num(dur.Seconds()),
			Value: f.Value, LoseState: f.LoseState}
		n.At(at, func() { r.col.Fault(rec) }) // recorded when (if) it fires
		var err error
		switch f.Kind {
		case scenario.FaultSwitchReboot:
			if err = n.Crash(at, testbed.SwitchNode); err == nil {
				err = n.Restart(at+dur, testbed.SwitchNode)
			}
		case scenario.FaultNodeCrash:
			restart := n.Resume
			if f.LoseState {
				restart = n.Restart
			}
			for _, node := range r.hostNodes[f.Target] {
				if err = n.Crash(at, node); err != nil {
					break
				}
				if dur > 0 {
					if err = restart(at+dur, node); err != nil {
						break
					}
				} else if !r.tb.Idle(node) {
					// It never comes back: the run cannot finish.
					node, at := node, at
					n.At(at, func() {
						r.fatal = fmt.Errorf("%s crashed at %v and does not restart: the jobs it serves cannot finish", node, at)
					})
				}
			}
		default:
			for _, l := range r.hostLinks[f.Target] {
				switch f.Kind {
				case scenario.FaultLinkDown:
					n.LinkDown(at, l)
					if dur > 0 {
						n.LinkUp(at+dur, l)
					}
				case scenario.FaultLinkUp:
					n.LinkUp(at, l)
				case scenario.FaultLossBurst:
					err = n.LossBurst(at, dur, l, f.Value)
				case scenario.FaultDupBurst:
					err = n.DuplicateBurst(at, dur, l, f.Value)
				case scenario.FaultReorderBurst:
					err = n.ReorderBurst(at, dur, l, f.Value)
				case scenario.FaultCorrupt:
					err = n.CorruptWindow(at, dur, l, f.Value)
				case scenario.FaultDelaySpike:
					err = n.DelaySpike(at, dur, l, time.Duration(f.Value*float64(time.Microsecond)))
				}
				if err != nil {
					break
				}
			}
		}
		if err != nil {
			return fmt.Errorf("%s: faults[%d]: %w", r.s.File(), i, err)
		}
	}
	return nil
}

// pcap captures every worker's and PS's link at its host end into dir
// (h0.pcap, ps0.pcap; h0-<node>.pcap for a host running several workers)
// and returns the function that closes the files.
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
		f, err := os.Create(filepath.Join(dir, name+".pcap"))
		if err != nil {
			return err
		}
		files = append(files, f)
		return n.Capture(node, 0, f)
	}
	for i, p := range r.plans {
		for w := range p.Workers {
			node := r.tb.Worker(i, w).Name
			name := p.Hosts[w]
			if p.Workers > 0 && r.workersOn(name) > 1 {
				name = fmt.Sprintf("%s-%s", name, node)
			}
			if err := add(name, node); err != nil {
				closeAll()
				return nil, err
			}
		}
	}
	for i := range r.s.PSNames() {
		if i >= len(r.tb.PSs) {
			continue
		}
		if err := add(fmt.Sprintf("ps%d", i), r.tb.PSs[i].Name); err != nil {
			closeAll()
			return nil, err
		}
	}
	return closeAll, nil
}
