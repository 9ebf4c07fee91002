package up

import (
	"bytes"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/inabox/inabox/emu"
	"github.com/inabox/inabox/harness/run"
)

// TestVirtualFractions: a process's virtual-time rate fraction is its rate
// fraction's definition (rateFractions) applied to the run in virtual
// time, worked out by hand here, and Print shows it beside the real one.
func TestVirtualFractions(t *testing.T) {
	link := emu.LinkConfig{BitsPerSecond: 100e6}
	peers := []run.Peer{
		{Node: "w1.0", Role: "worker", Job: 0, Rank: 0, Host: "h0", SwitchPort: 1, ToSwitch: link, FromSwitch: link},
		{Node: "w1.1", Role: "worker", Job: 0, Rank: 1, Host: "h1", SwitchPort: 2, ToSwitch: link, FromSwitch: link},
		{Node: "ps", Role: "ps", Host: "ps0", SwitchPort: 0, ToSwitch: link, FromSwitch: link},
	}
	res := &Result{
		Workers: []WorkerResult{
			{ProcResult: ProcResult{Name: "w1.0", RateFraction: 0.72}, Job: "a", Rank: 0},
			{ProcResult: ProcResult{Name: "w1.1", RateFraction: 0.5}, Job: "a", Rank: 1},
		},
		PSs:    []ProcResult{{Name: "ps", RateFraction: 0.01}},
		Switch: ProcResult{Name: "switch", RateFraction: 0.6},
	}
	ms := time.Millisecond
	stats := func(bytes uint64) emu.LinkStats { return emu.LinkStats{DeliveredBytes: bytes} }
	m := &run.Measures{
		Workers: []run.WorkerMeasure{
			{Job: "a", Rank: 1, Node: "w1.1", AllReduces: []run.Span{{Start: 0, End: 50 * ms}, {Start: 60 * ms, End: 110 * ms}}},
			{Job: "a", Rank: 0, Node: "w1.0", AllReduces: []run.Span{{Start: 5 * ms, End: 105 * ms}}},
		},
		Links: map[string]run.LinkMeasure{
			// 100 ms of all-reduces at 100 Mb/s carry 1.25 MB.
			"w1.0": {ToSwitch: stats(1_000_000), FromSwitch: stats(1_125_000)}, // 0.8, 0.9
			"w1.1": {ToSwitch: stats(1_250_000), FromSwitch: stats(750_000)},   // 1.0, 0.6
			"ps":   {ToSwitch: stats(12_500)},                                  // over 0-110 ms: 1/110
		},
	}
	virtualFractions(peers, res, m)
	for _, c := range []struct {
		p              ProcResult
		virtual, ratio float64
	}{
		{res.Workers[0].ProcResult, 0.8, 0.9},
		{res.Workers[1].ProcResult, 1.0, 0.5},
		{res.Switch, 0.6, 1.0}, // the lowest direction toward a worker
		{res.PSs[0], 1.0 / 110, 0.01 * 110},
	} {
		if math.Abs(c.p.VirtualRateFraction-c.virtual) > 1e-9 || math.Abs(c.p.RateVsVirtual-c.ratio) > 1e-9 {
			t.Errorf("%s: virtual %.6f, ratio %.6f; want %.6f, %.6f", c.p.Name, c.p.VirtualRateFraction, c.p.RateVsVirtual, c.virtual, c.ratio)
		}
	}
	var out bytes.Buffer
	res.Print(&out)
	for _, want := range []string{"(72.0 % of its link's rate; 80.0 % in virtual time: ×0.900)", "(lowest; 60.0 % in virtual time: ×1.000)"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("Print lacks %q:\n%s", want, out.String())
		}
	}
	// Without --vs-virtual, nothing of it.
	res.Workers[0].VirtualRateFraction = 0
	if s := vsVirtualRate(res.Workers[0].ProcResult); s != "" {
		t.Errorf("no virtual run: %q", s)
	}
}
