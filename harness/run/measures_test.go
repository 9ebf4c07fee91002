package run

import (
	"bytes"
	"testing"
	"time"

	"github.com/inabox/inabox/harness/scenario"
)

// TestRunMeasures: Options.Measures gets every link to the switch and
// every worker's all-reduces, which fit the results (one span per
// iteration, inside the run) and the links' physics (a worker's link
// toward the switch carried its gradient, at no more than its rate over
// its all-reduces, and loss toward the switch shows on that direction
// only), its packet-hops are the links' delivered packets, and asking for
// them changes no result.
func TestRunMeasures(t *testing.T) {
	s := tiny(t, "")
	var m Measures
	_, with := runJSON(t, s, Options{Measures: &m})
	res, without := runJSON(t, s, Options{})
	if !bytes.Equal(with, without) {
		t.Error("results.json differs with Options.Measures")
	}
	if len(m.Workers) != 5 || len(m.Links) != 5+2 {
		t.Fatalf("%d workers, %d links; want 5 and 7 (5 workers, 2 PSs)", len(m.Workers), len(m.Links))
	}
	rate := s.Topology.LinkGbps * 1e9 * s.Scaling.RateScale // bits/s
	end := time.Duration(float64(res.End) * float64(time.Second))
	for _, w := range m.Workers {
		var jr = res.Jobs[0]
		for _, j := range res.Jobs {
			if j.Name == w.Job {
				jr = j
			}
		}
		if len(w.AllReduces) != len(jr.Iters) {
			t.Errorf("%s (%s/%d): %d all-reduces, %d iterations", w.Node, w.Job, w.Rank, len(w.AllReduces), len(jr.Iters))
		}
		var busy time.Duration
		var gradient int64
		for k, sp := range w.AllReduces {
			if sp.Start < 0 || sp.End <= sp.Start || sp.End > end {
				t.Errorf("%s: all-reduce %d at [%v, %v], run ended at %v", w.Node, k, sp.Start, sp.End, end)
			}
			busy += sp.End - sp.Start
			gradient += jr.Iters[k].Bytes
		}
		lm, ok := m.Links[w.Node]
		if !ok {
			t.Errorf("%s: no link", w.Node)
			continue
		}
		up := lm.ToSwitch.DeliveredBytes
		if int64(up) < gradient || lm.FromSwitch.DeliveredBytes < up/2 {
			t.Errorf("%s: %d bytes toward the switch, %d from it, for a gradient of %d", w.Node, up, lm.FromSwitch.DeliveredBytes, gradient)
		}
		if frac := 8 * float64(up) / (rate * busy.Seconds()); frac > 1.01 {
			t.Errorf("%s: %d bytes in %v of all-reduces at %.0f b/s: %.3f of the rate", w.Node, up, busy, rate, frac)
		}
	}
	// Every link of the star is to the switch: the packet-hops are their
	// delivered packets, and each delivery is one of the emulator's events.
	var hops uint64
	for _, lm := range m.Links {
		hops += lm.ToSwitch.DeliveredPackets + lm.FromSwitch.DeliveredPackets
	}
	if m.PacketHops != hops || hops == 0 || m.Events < hops {
		t.Errorf("%d packet-hops, %d events; the links delivered %d packets", m.PacketHops, m.Events, hops)
	}
	var lossy Measures
	runJSON(t, tiny(t, "impairments:\n  - {link: all, loss: 0.01, direction: up}\n"), Options{Measures: &lossy})
	for _, w := range lossy.Workers { // (a DynaINA PS sends a few frames: maybe none lost)
		if lm := lossy.Links[w.Node]; lm.ToSwitch.Drops.Loss == 0 || lm.FromSwitch.Drops.Loss != 0 {
			t.Errorf("%s, 1 %% loss toward the switch: %d lost toward it, %d from it", w.Node, lm.ToSwitch.Drops.Loss, lm.FromSwitch.Drops.Loss)
		}
	}
}

// TestMeasuresNamePeers: Measures.Links has a link for every peer
// Prepared.Peers names, and no other, with the PSs dedicated, shared or
// co-located with a worker (whose host's NIC is on the link).
func TestMeasuresNamePeers(t *testing.T) {
	for name, s := range map[string]*scenario.Scenario{"shared": tiny(t, ""), "co-located": coLocatedTiny(t)} {
		t.Run(name, func(t *testing.T) {
			var m Measures
			if _, err := Run(s, Options{Measures: &m}); err != nil {
				t.Fatal(err)
			}
			p, err := Prepare(s, Options{})
			if err != nil {
				t.Fatal(err)
			}
			peers, err := p.Peers()
			if err != nil {
				t.Fatal(err)
			}
			for _, pe := range peers {
				if lm, ok := m.Links[pe.Node]; !ok || lm.ToSwitch.DeliveredPackets+lm.FromSwitch.DeliveredPackets == 0 {
					t.Errorf("peer %s (%s): no link measured, or one that carried nothing: %+v", pe.Node, pe.Role, lm)
				}
			}
			if len(m.Links) != len(peers) {
				t.Errorf("%d links measured for %d peers: %v", len(m.Links), len(peers), m.Links)
			}
		})
	}
}
