package run

import (
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/inabox/inabox/emu"
	"github.com/inabox/inabox/harness/report"
)

// faultRun runs the tiny scenario with extra (faults, impairments) under
// FreeINA and returns the runner (its links' counters) and the results; a
// run's sums are checked by the run itself, so a nil error means every
// all-reduce was exact.
func faultRun(t *testing.T, extra string) (*runner, *report.Results, error) {
	t.Helper()
	s := tiny(t, extra)
	r, err := prepare(s, Options{Policy: "freeina"}, false)
	if err != nil {
		t.Fatal(err)
	}
	if err := r.faults(); err != nil {
		t.Fatal(err)
	}
	res, err := r.run(r.step, noProgress{})
	return r, res, err
}

// dirStats are the counters of host's link, up (toward the switch) and
// down.
func dirStats(r *runner, host string) (up, down emu.LinkStats) {
	l := r.hostLinks[host][0]
	ds := r.dirs(l, "up")
	dd := r.dirs(l, "down")
	return l.Stats(ds[0]), l.Stats(dd[0])
}

// TestFaultKinds: every fault kind and impairment of the scenario format
// has its effect, seen in the links' counters or the run's timing, on the
// direction it names only; every all-reduce stays exact. The windows open
// at the end of vgg's first all-reduce and cover the start of its second
// (a window acts on the frames offered while it is open).
func TestFaultKinds(t *testing.T) {
	_, clean, err := faultRun(t, "")
	if err != nil {
		t.Fatal(err)
	}
	// vgg's time (its all-reduces are the ones the windows hit)
	slower := func(res *report.Results) bool { return float64(res.Jobs[0].JCT) > float64(clean.Jobs[0].JCT) }
	type check func(t *testing.T, r *runner, res *report.Results)
	cases := []struct {
		name, extra string
		check       check
	}{
		{"loss_burst up", "faults:\n  - {when: {job: vgg, allreduce: 0, fraction: 1}, kind: loss_burst, target: h0, duration: 20ms, value: 1, direction: up}\n",
			func(t *testing.T, r *runner, _ *report.Results) {
				up, down := dirStats(r, "h0")
				if up.Drops.Loss == 0 || down.Drops.Loss != 0 {
					t.Errorf("loss up %d down %d: want up only", up.Drops.Loss, down.Drops.Loss)
				}
			}},
		{"loss_burst down", "faults:\n  - {when: {job: vgg, allreduce: 0, fraction: 1}, kind: loss_burst, target: h0, duration: 20ms, value: 1, direction: down}\n",
			func(t *testing.T, r *runner, _ *report.Results) {
				up, down := dirStats(r, "h0")
				if up.Drops.Loss != 0 || down.Drops.Loss == 0 {
					t.Errorf("loss up %d down %d: want down only", up.Drops.Loss, down.Drops.Loss)
				}
			}},
		{"duplicate_burst", "faults:\n  - {when: {job: vgg, allreduce: 0, fraction: 1}, kind: duplicate_burst, target: h1, duration: 20ms, value: 0.5}\n",
			func(t *testing.T, r *runner, _ *report.Results) {
				if up, down := dirStats(r, "h1"); up.Duplicated == 0 || down.Duplicated == 0 {
					t.Errorf("duplicated up %d down %d", up.Duplicated, down.Duplicated)
				}
			}},
		{"reorder_burst", "faults:\n  - {when: {job: vgg, allreduce: 0, fraction: 1}, kind: reorder_burst, target: h1, duration: 20ms, value: 0.5}\n",
			func(t *testing.T, r *runner, _ *report.Results) {
				if up, _ := dirStats(r, "h1"); up.Reordered == 0 {
					t.Error("nothing reordered")
				}
			}},
		{"corrupt", "faults:\n  - {when: {job: vgg, allreduce: 0, fraction: 1}, kind: corrupt, target: h1, duration: 20ms, value: 0.5}\n",
			func(t *testing.T, r *runner, _ *report.Results) {
				if up, _ := dirStats(r, "h1"); up.Drops.FCS == 0 {
					t.Error("no FCS drops")
				}
			}},
		{"corrupt_undetected", "faults:\n  - {when: {job: vgg, allreduce: 0, fraction: 1}, kind: corrupt_undetected, target: h1, duration: 20ms, value: 0.5, direction: up}\n",
			func(t *testing.T, r *runner, res *report.Results) {
				up, down := dirStats(r, "h1")
				if up.Corrupted == 0 || down.Corrupted != 0 || res.Summary.Drops.BadICRC == 0 {
					t.Errorf("corrupted up %d down %d, ICRC drops %d", up.Corrupted, down.Corrupted, res.Summary.Drops.BadICRC)
				}
			}},
		{"delay_spike", "faults:\n  - {when: {job: vgg, allreduce: 0, fraction: 1}, kind: delay_spike, target: h0, duration: 20ms, value: 20000}\n",
			func(t *testing.T, _ *runner, res *report.Results) {
				if !slower(res) {
					t.Errorf("vgg JCT %v, clean %v", res.Jobs[0].JCT, clean.Jobs[0].JCT)
				}
			}},
		{"jitter_burst", "faults:\n  - {when: {job: vgg, allreduce: 0, fraction: 1}, kind: jitter_burst, target: h0, duration: 20ms, value: 20000}\n",
			func(t *testing.T, _ *runner, res *report.Results) {
				if !slower(res) {
					t.Errorf("vgg JCT %v, clean %v", res.Jobs[0].JCT, clean.Jobs[0].JCT)
				}
			}},
		{"rate_change", "faults:\n  - {when: {job: vgg, allreduce: 0, fraction: 1}, kind: rate_change, target: h0, duration: 100ms, value: 1}\n",
			func(t *testing.T, r *runner, res *report.Results) {
				if !slower(res) {
					t.Errorf("vgg JCT %v, clean %v", res.Jobs[0].JCT, clean.Jobs[0].JCT)
				}
				l := r.hostLinks["h0"][0]
				if got, want := l.Config(emu.AtoB).BitsPerSecond, r.s.LinkBitsPerSecond(); got != want {
					t.Errorf("rate after the change %d, want it restored to %d", got, want)
				}
			}},
		{"mtu_change", "faults:\n  - {when: {job: vgg, allreduce: 0, fraction: 1}, kind: mtu_change, target: h0, duration: 20ms, value: 100, direction: up}\n",
			func(t *testing.T, r *runner, _ *report.Results) {
				up, down := dirStats(r, "h0")
				if up.Drops.MTU == 0 || down.Drops.MTU != 0 {
					t.Errorf("MTU drops up %d down %d", up.Drops.MTU, down.Drops.MTU)
				}
			}},
		{"link_down up", "faults:\n  - {when: {job: vgg, allreduce: 0, fraction: 1}, kind: link_down, target: h0, duration: 20ms, direction: up}\n",
			func(t *testing.T, r *runner, _ *report.Results) {
				up, down := dirStats(r, "h0")
				if up.Drops.LinkDown == 0 || down.Drops.LinkDown != 0 {
					t.Errorf("link-down drops up %d down %d", up.Drops.LinkDown, down.Drops.LinkDown)
				}
			}},
		{"link_down then link_up", "faults:\n  - {when: {job: vgg, allreduce: 0, fraction: 1}, kind: link_down, target: h2}\n  - {at: 25ms, when: {job: vgg, allreduce: 0, fraction: 1}, kind: link_up, target: h2}\n",
			func(t *testing.T, r *runner, _ *report.Results) {
				if up, down := dirStats(r, "h2"); up.Drops.LinkDown+down.Drops.LinkDown == 0 {
					t.Error("no link-down drops")
				}
			}},
		{"switch_reboot", "faults:\n  - {when: {job: vgg, allreduce: 0, fraction: 1}, kind: switch_reboot, duration: 1ms}\n",
			func(t *testing.T, r *runner, _ *report.Results) {
				if r.tb.Reboots() != 1 {
					t.Errorf("%d reboots", r.tb.Reboots())
				}
			}},
		{"node_crash ps", "faults:\n  - {when: {job: vgg, allreduce: 0, fraction: 1}, kind: node_crash, target: ps0, duration: 20ms}\n", nil},
		{"burst_loss", "impairments:\n  - {link: h0, burst_loss: {rate: 0.01, mean_burst: 4}}\n",
			func(t *testing.T, r *runner, _ *report.Results) {
				if up, down := dirStats(r, "h0"); up.Drops.Loss == 0 || down.Drops.Loss == 0 {
					t.Errorf("loss up %d down %d", up.Drops.Loss, down.Drops.Loss)
				}
			}},
		{"flap", "impairments:\n  - {link: h1, flap: {mean_up: 20ms, mean_down: 500us}, direction: down}\n",
			func(t *testing.T, r *runner, _ *report.Results) {
				up, down := dirStats(r, "h1")
				if up.Drops.LinkDown != 0 || down.Drops.LinkDown == 0 {
					t.Errorf("link-down drops up %d down %d", up.Drops.LinkDown, down.Drops.LinkDown)
				}
			}},
		{"preset extended", "impairments:\n  - {link: h1, preset: lossy, loss: 0.05, direction: up}\n",
			func(t *testing.T, r *runner, _ *report.Results) {
				up, down := dirStats(r, "h1")
				if c := r.hostLinks["h1"][0].Config(r.dirs(r.hostLinks["h1"][0], "up")[0]); c.Impairments.Loss != 0.05 {
					t.Errorf("loss %v, want the entry's 0.05 over the preset's", c.Impairments.Loss)
				}
				if up.Drops.Loss == 0 || down.Drops.Loss != 0 {
					t.Errorf("loss up %d down %d", up.Drops.Loss, down.Drops.Loss)
				}
			}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			r, res, err := faultRun(t, c.extra)
			if err != nil {
				t.Fatal(err)
			}
			if res.Summary.JobsFinished != 2 {
				t.Fatalf("%d jobs finished", res.Summary.JobsFinished)
			}
			if len(r.s.Faults) > 0 && len(res.Faults) != len(r.s.Faults) {
				t.Errorf("%d faults recorded, want %d", len(res.Faults), len(r.s.Faults))
			}
			if c.check != nil {
				c.check(t, r, res)
			}
		})
	}
}

// TestFaultsThatStopTheRun: a switch that never restarts and a worker that
// never restarts end the run with an error naming them.
func TestFaultsThatStopTheRun(t *testing.T) {
	for _, c := range []struct{ extra, want string }{
		{"faults:\n  - {at: 30ms, kind: switch_crash}\n", "the switch crashed at 30ms and does not restart (faults[0])"},
		{"faults:\n  - {at: 30ms, kind: node_crash, target: h1}\n", "crashed at 30ms and does not restart"},
	} {
		_, _, err := faultRun(t, c.extra)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%q: %v, want %q", c.extra, err, c.want)
		}
	}
}

// TestFaultTriggers: a fault timed from an event fires exactly when (plus
// its delay) the event happens, as the workers' own reports time it.
func TestFaultTriggers(t *testing.T) {
	r, res, err := faultRun(t, `faults:
  - {kind: loss_burst, target: h0, duration: 1ms, value: 0.5, when: {job: resnet, first_packet: true}}
  - {kind: link_down, target: h3, duration: 1ms, at: 2ms, when: {job: vgg, iteration: 1}}
  - {kind: delay_spike, target: h1, duration: 1ms, value: 100, when: {job: vgg, allreduce: 2, fraction: 0.5}}
  - {kind: duplicate_burst, target: h2, duration: 1ms, value: 0.5, when: {job: vgg, allreduce: 0, fraction: 1}}
  - {kind: switch_reboot, when: {run_fraction: 0.5}}
`)
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Faults) != 5 {
		t.Fatalf("%d faults fired: %+v", len(res.Faults), res.Faults)
	}
	at := map[string]float64{}
	for _, f := range res.Faults {
		at[f.Kind] = float64(f.At)
		if f.When == "" {
			t.Errorf("%s: no trigger recorded", f.Kind)
		}
	}
	var first time.Duration = -1
	for rk := range 2 {
		s := r.tb.Worker(1, rk).Endpoint.Reports()[0].Start
		if first < 0 || s < first {
			first = s
		}
	}
	vgg := r.tb.Worker(0, 0).Endpoint.Reports()
	near := func(kind string, want time.Duration) {
		t.Helper()
		if d := at[kind] - want.Seconds(); d > 1e-9 || d < -1e-9 {
			t.Errorf("%s fired at %v s, want %v", kind, at[kind], want.Seconds())
		}
	}
	near("loss_burst", first)
	near("link_down", vgg[1].Start+2*time.Millisecond)
	near("duplicate_burst", vgg[0].End)
	if d := at["delay_spike"]; d <= vgg[2].Start.Seconds() || d >= vgg[2].End.Seconds() {
		t.Errorf("delay_spike at %v s, want inside all-reduce 2 [%v, %v]", d, vgg[2].Start.Seconds(), vgg[2].End.Seconds())
	}
	// run_fraction 0.5: the 3rd of the run's 5 all-reduces to end.
	var ends []time.Duration
	for j := range 2 {
		for _, rep := range r.tb.Worker(j, 0).Endpoint.Reports() {
			ends = append(ends, rep.End)
		}
	}
	slices.Sort(ends)
	near("switch_reboot", ends[2])
}
