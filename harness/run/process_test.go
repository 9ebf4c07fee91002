package run

import (
	"strings"
	"testing"

	"github.com/inabox/inabox/harness/scenario"
	"github.com/inabox/inabox/harness/testbed"
)

// A PS that crashes for good stops the run at the crash, naming it; a PS
// link that goes down for good leaves the workers' RC queue pairs without
// ACKs: the run ends as soon as one gives up, naming it. Neither runs into
// the time limit.
func TestRunEndsOnTransportFailure(t *testing.T) {
	s := loadEmbedded(t, "default.yaml")
	s.Faults = append(s.Faults, scenario.Fault{At: scenario.Duration(350e6), Kind: scenario.FaultNodeCrash, Target: "ps0"})
	_, err := Run(s, Options{Policy: "freeina"})
	if err == nil || !strings.Contains(err.Error(), "ps crashed at 350ms and does not restart") {
		t.Fatalf("PS crashed for good: %v", err)
	}
	t.Log(err)
	s = loadEmbedded(t, "default.yaml")
	s.Faults = append(s.Faults, scenario.Fault{At: scenario.Duration(350e6), Kind: scenario.FaultLinkDown, Target: "ps0"})
	_, err = Run(s, Options{Policy: "freeina"})
	if err == nil || !strings.Contains(err.Error(), "retry counter exceeded") || !strings.Contains(err.Error(), "RC QP") {
		t.Fatalf("error does not name the failed queue pair: %v", err)
	}
	t.Log(err)
}

// Prepare builds the testbed without running it; its peers are the nodes
// linked to the switch, in port order, each worker and PS exactly once.
func TestPreparePeers(t *testing.T) {
	s := loadEmbedded(t, "default.yaml")
	for _, policy := range testbed.Names() {
		p, peers := preparePeers(t, s, policy)
		workers, pss := 0, 0
		for i, pe := range peers {
			if i > 0 && pe.SwitchPort <= peers[i-1].SwitchPort {
				t.Errorf("%s: peers not in port order: %+v", policy, peers)
			}
			if n, ports, err := p.Node(pe.Node); err != nil || n == nil || ports < 1 {
				t.Errorf("%s: node %s: %v", policy, pe.Node, err)
			}
			switch pe.Role {
			case "worker":
				workers++
				// The link, slowed to the policy's sourced software stack.
				want := s.LinkBitsPerSecond()
				if e, _ := testbed.Lookup(policy); e.SoftwareStack && e.Stack.BitsPerSecond > 0 {
					want = min(want, int64(float64(e.Stack.BitsPerSecond)*s.Scaling.RateScale))
				}
				if pe.ToSwitch.BitsPerSecond != want {
					t.Errorf("%s: %s link %d b/s, want %d", policy, pe.Node, pe.ToSwitch.BitsPerSecond, want)
				}
			case "ps":
				pss++
			}
		}
		if workers != 4 || pss != 2 {
			t.Errorf("%s: %d workers and %d PSs among the peers, want 4 and 2 (one per job)", policy, workers, pss)
		}
		if p.Switch() == nil {
			t.Errorf("%s: no switch data plane", policy)
		}
		if _, _, err := p.Node("nope"); err == nil {
			t.Errorf("%s: Node(nope) did not fail", policy)
		}
	}
}

// preparePeers prepares s under policy and lists its peers.
func preparePeers(t *testing.T, s *scenario.Scenario, policy string) (*Prepared, []Peer) {
	t.Helper()
	p, err := Prepare(s, Options{Policy: policy})
	if err != nil {
		t.Fatalf("%s: %v", policy, err)
	}
	peers, err := p.Peers()
	if err != nil {
		t.Fatalf("%s: %v", policy, err)
	}
	return p, peers
}

func loadEmbedded(t *testing.T, name string) *scenario.Scenario {
	t.Helper()
	s, err := scenario.Embedded(name)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// TestNodeCrashInCompute: a worker host crashing for 10 ms in its compute
// phase (h0, resnet50's first worker, at 50 ms) and coming back with its
// state: every policy finishes with exact sums (the runner checks every
// all-reduce). With its state lost, the ATP and ESA workers rejoin and
// finish exact; the others stop at once, naming the worker.
func TestNodeCrashInCompute(t *testing.T) {
	for _, lose := range []bool{false, true} {
		for _, pol := range testbed.Names() {
			s := loadEmbedded(t, "default.yaml")
			s.Faults = append(s.Faults, scenario.Fault{At: scenario.Duration(50e6), Kind: scenario.FaultNodeCrash, Target: "h0",
				Duration: scenario.Duration(10e6), LoseState: lose})
			_, err := Run(s, Options{Policy: pol})
			rejoins := pol == "atp" || pol == "esa"
			switch {
			case !lose || rejoins:
				if err != nil {
					t.Errorf("%s (state lost %v): %v", pol, lose, err)
				}
			case err == nil || !strings.Contains(err.Error(), "w1.0 restarted with its state lost"):
				t.Errorf("%s (state lost): %v, want the error naming w1.0", pol, err)
			}
		}
	}
}
