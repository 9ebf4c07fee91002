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
// `inabox run` does) and sets every job's VirtualJCT and JCTVsVirtual.
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
	vr, err := run.Run(s, run.Options{Seed: prep.Seed(), Policy: prep.Policy(), Context: ctx})
	if err != nil {
		return fmt.Errorf("up: --vs-virtual: %w", err)
	}
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
