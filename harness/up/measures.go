package up

import (
	"context"
	"fmt"
	"time"

	"github.com/inabox/inabox/harness/run"
	"github.com/inabox/inabox/harness/scenario"
	"github.com/inabox/inabox/harness/up/faultctl"
)

// rateFractions fills LinkResult.RateFraction and ProcResult.RateFraction
// (docs/processes.md, "Measured"): a link direction's delivered bytes ÷
// (its configured rate × its window), the window being the all-reduce
// time of the worker on the link (the sum of its iterations' durations,
// compute phases excluded) or, for a PS's link, the span from the first
// all-reduce's start to the last one's end. A worker's and a PS's
// fraction is that of its link toward the switch, the switch's the lowest
// of its directions toward the workers.
func rateFractions(peers []run.Peer, res *Result) {
	busy := map[string]time.Duration{}
	var first, last time.Duration
	seen := false
	for _, wr := range res.Workers {
		for _, it := range wr.Iterations {
			busy[wr.Name] += it.End - it.Start
			if !seen || it.Start < first {
				first = it.Start
			}
			last = max(last, it.End)
			seen = true
		}
	}
	role := map[string]run.Peer{}
	for _, pe := range peers {
		role[pe.Node] = pe
	}
	frac := map[string]float64{} // node's up link
	var swMin float64 = -1
	for i := range res.Links {
		l := &res.Links[i]
		pe, ok := role[l.Node]
		if !ok {
			continue
		}
		cfg := pe.ToSwitch
		if l.Dir != faultctl.Up {
			cfg = pe.FromSwitch
		}
		w := busy[l.Node]
		if pe.Role == "ps" {
			w = last - first
		}
		if cfg.BitsPerSecond <= 0 || w <= 0 {
			continue
		}
		l.Window = Seconds(w)
		l.RateFraction = float64(8*l.Stats.DeliveredBytes) / (float64(cfg.BitsPerSecond) * w.Seconds())
		switch {
		case l.Dir == faultctl.Up:
			frac[l.Node] = l.RateFraction
		case pe.Role == "worker" && (swMin < 0 || l.RateFraction < swMin):
			swMin = l.RateFraction
		}
	}
	for i := range res.Workers {
		res.Workers[i].RateFraction = frac[res.Workers[i].Name]
	}
	for i := range res.PSs {
		n := res.PSs[i].Name
		if res.PSs[i].In != "" {
			n = res.PSs[i].In // its host's link
		}
		res.PSs[i].RateFraction = frac[n]
	}
	if swMin >= 0 {
		res.Switch.RateFraction = swMin
	}
}

// vsVirtual runs the scenario, seed and policy of prep in virtual time (as
// `inabox run` does) and sets every job's VirtualJCT and JCTVsVirtual and
// every process's VirtualRateFraction and RateVsVirtual.
func vsVirtual(ctx context.Context, file string, prep *run.Prepared, res *Result) error {
	var s *scenario.Scenario
	var err error
	if file == "" {
		s, err = scenario.Parse(DefaultScenarioName, DefaultScenario, scenario.DefaultModels())
	} else {
		s, err = scenario.Load(file)
	}
	if err != nil {
		return err
	}
	var m run.Measures
	vr, err := run.Run(s, run.Options{Seed: prep.Seed(), Policy: prep.Policy(), Context: ctx, Measures: &m})
	if err != nil {
		return fmt.Errorf("up: --vs-virtual: %w", err)
	}
	peers, err := prep.Peers()
	if err != nil {
		return fmt.Errorf("up: --vs-virtual: %w", err)
	}
	virtualFractions(peers, res, &m)
	for i := range res.Jobs {
		for _, vj := range vr.Jobs {
			if vj.Name == res.Jobs[i].Name && vj.Finished {
				res.Jobs[i].VirtualJCT = Seconds(float64(vj.JCT) * float64(time.Second))
				if vj.JCT > 0 {
					res.Jobs[i].JCTVsVirtual = res.Jobs[i].JCT.D().Seconds() / float64(vj.JCT)
				}
			}
		}
	}
	return nil
}

// virtualFractions sets every process's VirtualRateFraction: its rate
// fraction (rateFractions, the same definition) in the run in virtual
// time that m describes, and RateVsVirtual, its RateFraction ÷ that.
func virtualFractions(peers []run.Peer, res *Result, m *run.Measures) {
	type jobRank struct {
		job  string
		rank int
	}
	spans := map[jobRank][]run.Span{}
	for _, wm := range m.Workers {
		spans[jobRank{wm.Job, wm.Rank}] = wm.AllReduces
	}
	v := Result{Workers: make([]WorkerResult, len(res.Workers)), PSs: make([]ProcResult, len(res.PSs))}
	for i, wr := range res.Workers {
		v.Workers[i].Name = wr.Name
		for k, sp := range spans[jobRank{wr.Job, wr.Rank}] {
			v.Workers[i].Iterations = append(v.Workers[i].Iterations, run.IterationCheck{Iteration: k, Start: sp.Start, End: sp.End})
		}
	}
	for i, pr := range res.PSs {
		v.PSs[i].Name, v.PSs[i].In = pr.Name, pr.In
	}
	for _, pe := range peers {
		lm, ok := m.Links[pe.Node]
		if !ok {
			continue
		}
		v.Links = append(v.Links,
			LinkResult{Link: pe.Host, Node: pe.Node, Dir: faultctl.Up, Stats: lm.ToSwitch},
			LinkResult{Link: pe.Host, Node: pe.Node, Dir: faultctl.Down, Stats: lm.FromSwitch})
	}
	rateFractions(peers, &v)
	set := func(p *ProcResult, virtual float64) {
		p.VirtualRateFraction, p.RateVsVirtual = virtual, 0
		if virtual > 0 {
			p.RateVsVirtual = p.RateFraction / virtual
		}
	}
	for i := range res.Workers {
		set(&res.Workers[i].ProcResult, v.Workers[i].RateFraction)
	}
	for i := range res.PSs {
		set(&res.PSs[i], v.PSs[i].RateFraction)
	}
	set(&res.Switch, v.Switch.RateFraction)
}

// vsVirtualRate is how Print follows a process's rate fraction with its
// virtual-time counterpart: "; 94.6 % in virtual time: ×0.917", or nothing
// without one.
func vsVirtualRate(p ProcResult) string {
	if p.VirtualRateFraction <= 0 {
		return ""
	}
	return fmt.Sprintf("; %.1f %% in virtual time: ×%.3f", 100*p.VirtualRateFraction, p.RateVsVirtual)
}
