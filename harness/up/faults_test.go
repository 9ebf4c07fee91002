package up

import (
	"strings"
	"testing"
	"time"

	"github.com/inabox/inabox/harness/scenario"
	"github.com/inabox/inabox/harness/up/faultctl"
)

// testTopo: host h0 runs w1.0 and w2.0, ps0 runs ps (idle if idlePS).
type testTopo struct{ idlePS bool }

func (t testTopo) nodesOn(target string) []string {
	return map[string][]string{"h0": {"w1.0", "w2.0"}, "ps0": {"ps"}}[target]
}
func (t testTopo) idle(node string) bool { return t.idlePS && node == "ps" }
func (t testTopo) rateScale() float64    { return 0.001 }
func (t testTopo) link(target string) string {
	if target == "ps9" { // co-located with h9
		return "h9"
	}
	return target
}

func dur(d time.Duration) scenario.Duration { return scenario.Duration(d) }

// Each scenario fault kind maps to the steps inabox up fires.
func TestFaultSteps(t *testing.T) {
	ms := time.Millisecond
	for _, tc := range []struct {
		f    scenario.Fault
		topo testTopo
		want []string // "after what" per step
	}{
		{scenario.Fault{Kind: scenario.FaultLinkDown, Target: "h0", Duration: dur(5 * ms)}, testTopo{}, []string{"0s h0 down for 5ms"}},
		{scenario.Fault{Kind: scenario.FaultLinkUp, Target: "h0"}, testTopo{}, []string{"0s h0 up"}},
		{scenario.Fault{Kind: scenario.FaultLossBurst, Target: "h0", Duration: dur(ms), Value: 0.2}, testTopo{}, []string{"0s loss 0.2 on h0 for 1ms"}},
		{scenario.Fault{Kind: scenario.FaultDelaySpike, Target: "ps0", Duration: dur(ms), Value: 300}, testTopo{}, []string{"0s delay +300µs on ps0 for 1ms"}},
		{scenario.Fault{Kind: scenario.FaultNodeCrash, Target: "h0", Duration: dur(ms)}, testTopo{}, []string{"0s stop w1.0, w2.0", "1ms cont w1.0, w2.0"}},
		{scenario.Fault{Kind: scenario.FaultNodeCrash, Target: "h0", Duration: dur(ms), LoseState: true}, testTopo{}, []string{"0s kill w1.0, w2.0", "1ms restart w1.0, w2.0"}},
		{scenario.Fault{At: dur(ms), Kind: scenario.FaultNodeCrash, Target: "ps0"}, testTopo{}, []string{"0s stop ps", "0s fatal"}},
		{scenario.Fault{Kind: scenario.FaultNodeCrash, Target: "ps0", LoseState: true}, testTopo{idlePS: true}, []string{"0s kill ps"}},
		{scenario.Fault{Kind: scenario.FaultSwitchReboot, Target: "sw"}, testTopo{}, []string{"0s kill switch", "0s restart switch"}},
		{scenario.Fault{Kind: scenario.FaultSwitchCrash, Target: "sw"}, testTopo{}, []string{"0s kill switch", "0s fatal"}},
		{scenario.Fault{Kind: scenario.FaultLinkDown, Target: "h0", Direction: "down"}, testTopo{}, []string{"0s h0 (down) down"}},
		{scenario.Fault{Kind: scenario.FaultJitterBurst, Target: "h0", Duration: dur(ms), Value: 50, Direction: "up"}, testTopo{}, []string{"0s jitter +50µs on h0 (up) for 1ms"}},
		{scenario.Fault{Kind: scenario.FaultCorruptUndetected, Target: "h0", Duration: dur(ms), Value: 0.01}, testTopo{}, []string{"0s corrupt_undetected 0.01 on h0 for 1ms"}},
		{scenario.Fault{Kind: scenario.FaultRateChange, Target: "ps0", Duration: dur(ms), Value: 50}, testTopo{}, []string{"0s rate 0.05 Gb/s on ps0 for 1ms"}},
		{scenario.Fault{Kind: scenario.FaultRateChange, Target: "ps0", Value: 50}, testTopo{}, []string{"0s rate 0.05 Gb/s on ps0"}},
		{scenario.Fault{Kind: scenario.FaultMTUChange, Target: "h0", Duration: dur(ms), Value: 1500, Direction: "down"}, testTopo{}, []string{"0s mtu 1500 on h0 (down) for 1ms"}},
	} {
		steps, err := faultSteps(0, tc.f, tc.topo)
		if err != nil {
			t.Errorf("%+v: %v", tc.f, err)
			continue
		}
		var got []string
		for _, s := range steps {
			got = append(got, s.after.String()+" "+s.what)
		}
		if strings.Join(got, "; ") != strings.Join(tc.want, "; ") {
			t.Errorf("%s on %s: %q, want %q", tc.f.Kind, tc.f.Target, got, tc.want)
		}
	}
	// A window's call opens the window the fault names on both directions.
	steps, _ := faultSteps(0, scenario.Fault{Kind: scenario.FaultDupBurst, Target: "h0", Duration: dur(ms), Value: 0.5}, testTopo{})
	if s := steps[0]; s.link != "h0" || s.dir != faultctl.Both || s.call == nil {
		t.Errorf("duplicate burst step %+v", s)
	}
	// A co-located PS's link is its host's: the step acts on h9; the PS
	// alone cannot be crashed, its process being its host's.
	steps, _ = faultSteps(0, scenario.Fault{Kind: scenario.FaultLossBurst, Target: "ps9", Duration: dur(ms), Value: 0.5}, testTopo{})
	if s := steps[0]; s.link != "h9" || s.what != "loss 0.5 on ps9 for 1ms" {
		t.Errorf("loss burst on a co-located PS: step %+v", s)
	}
	if _, err := faultSteps(0, scenario.Fault{Kind: scenario.FaultNodeCrash, Target: "ps9"}, testTopo{}); err == nil ||
		!strings.Contains(err.Error(), "node_crash on ps9: a co-located PS runs in its host h9's process") {
		t.Errorf("crash of a co-located PS: %v", err)
	}
	if _, err := faultSteps(0, scenario.Fault{Kind: "meteor", Target: "h0"}, testTopo{}); err == nil {
		t.Error("an unknown kind accepted")
	}
	fatal, _ := faultSteps(0, scenario.Fault{At: dur(50 * ms), Kind: scenario.FaultNodeCrash, Target: "ps0"}, testTopo{})
	if err := fatal[1].fatal(50 * ms); err == nil || err.Error() != "ps crashed at 50ms and does not restart: the jobs it serves cannot finish" {
		t.Errorf("fatal: %v", err)
	}
}
