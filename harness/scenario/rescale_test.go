package scenario

import (
	"fmt"
	"os"
	"strings"
	"testing"
)

// TestRescale: the ablation's duty regime (true 1 µs links, 14 slots,
// minimum pool 2 at rate_scale 0.01: a window of 7 aggregators) rescaled
// to 0.1 and 1 gets the memory docs/results.md's runs used (38 and 290
// slots, pools of 5 and 41), its delay kept; dynaina-contention's
// stretched 200 µs links become the true 2 µs at 1, its 512 slots grow
// with the window; the output parses, and rescaling back gives the
// original's fields; the output's first line says what was rescaled
// (one such line, however often rescaled).
func TestRescale(t *testing.T) {
	duty, err := os.ReadFile("../../docs/results/ablation/duty.yaml")
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		scale       float64
		slots, mins int
		window      int
	}{{0.1, 38, 5, 19}, {1, 290, 41, 145}} {
		out, r, err := Rescale("duty.yaml", duty, c.scale)
		if err != nil {
			t.Fatal(err)
		}
		s, err := Parse("out.yaml", out, DefaultModels())
		if err != nil {
			t.Fatal(err)
		}
		if s.Scaling.RateScale != c.scale || s.Scaling.TensorScale != c.scale || s.Topology.Switch.Slots != c.slots ||
			s.DynaINA.MinSlots != c.mins || s.Topology.LinkDelay.D().String() != "1µs" || r.Window != 7 || r.NewWindow != c.window {
			t.Errorf("duty at %g: scaling %+v, slots %d, min_slots %d, delay %v, windows %d → %d; want slots %d, min_slots %d, window %d",
				c.scale, s.Scaling, s.Topology.Switch.Slots, s.DynaINA.MinSlots, s.Topology.LinkDelay, r.Window, r.NewWindow, c.slots, c.mins, c.window)
		}
		// The first line says what was rescaled; the file's own comments
		// (of rate_scale 0.01) follow.
		note := fmt.Sprintf("# inabox rescale: rate_scale 0.01 → %g, a window of 7 → %d aggregators", c.scale, c.window)
		if first, _, _ := strings.Cut(string(out), "\n"); !strings.HasPrefix(first, note) || !strings.Contains(string(out), "\n# DynaINA ablation") {
			t.Errorf("duty at %g begins %q, want %q and the file's comments after it", c.scale, first, note)
		}
		back, _, err := Rescale("out.yaml", out, 0.01)
		if err != nil {
			t.Fatal(err)
		}
		if n := strings.Count(string(back), "# inabox rescale: "); n != 1 || !strings.HasPrefix(string(back), "# inabox rescale: rate_scale "+fmt.Sprint(c.scale)+" → 0.01,") {
			t.Errorf("duty back from %g: %d rescale notes, begins %.80q; want one, of this rescale", c.scale, n, back)
		}
		b, err := Parse("back.yaml", back, DefaultModels())
		if err != nil {
			t.Fatal(err)
		}
		if b.Topology.Switch.Slots != 14 || b.DynaINA.MinSlots != 2 || b.Scaling.RateScale != 0.01 {
			t.Errorf("duty back from %g: slots %d, min_slots %d, rate_scale %g", c.scale, b.Topology.Switch.Slots, b.DynaINA.MinSlots, b.Scaling.RateScale)
		}
	}
	dc, err := os.ReadFile("../../testdata/scenarios/dynaina-contention.yaml")
	if err != nil {
		t.Fatal(err)
	}
	out, r, err := Rescale("dc.yaml", dc, 1)
	if err != nil {
		t.Fatal(err)
	}
	s, err := Parse("out.yaml", out, DefaultModels())
	if err != nil {
		t.Fatal(err)
	}
	if s.Topology.LinkDelay.D().String() != "2µs" || r.NewWindow < r.Window || s.Topology.Switch.Slots < 512 {
		t.Errorf("dynaina-contention at 1: delay %v, windows %d → %d, slots %d", s.Topology.LinkDelay, r.Window, r.NewWindow, s.Topology.Switch.Slots)
	}
	t.Logf("dynaina-contention at 1: %s", strings.Join(r.Changes, "; "))
	for _, bad := range []struct {
		data  string
		scale float64
		want  string
	}{
		{"name: x\njobs: [{name: a, model: resnet50, workers: 2, iterations: 1}]\n", 0, "must be in (0, 1]"},
		{"name: x\nscaling: {tensor_scale: 0.5, rate_scale: 0.1}\njobs: [{name: a, model: resnet50, workers: 2, iterations: 1}]\n", 1, "rescale needs them equal"},
		{"name: x\njobs: [{name: a, model: nosuch, workers: 2}]\n", 1, "x.yaml"},
	} {
		if _, _, err := Rescale("x.yaml", []byte(bad.data), bad.scale); err == nil || !strings.Contains(err.Error(), bad.want) {
			t.Errorf("Rescale(%q, %g) = %v, want an error with %q", bad.data, bad.scale, err, bad.want)
		}
	}
}

// TestAblationAtTenth: docs/results/ablation-0.1/REGIME.yaml is exactly
// `inabox rescale --rate-scale 0.1` of docs/results/ablation/REGIME.yaml,
// for every regime, so the two tables of docs/results.md run the same
// regimes.
func TestAblationAtTenth(t *testing.T) {
	const dir, tenth = "../../docs/results/ablation/", "../../docs/results/ablation-0.1/"
	ents, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, e := range ents {
		if !strings.HasSuffix(e.Name(), ".yaml") {
			continue
		}
		src, err := os.ReadFile(dir + e.Name())
		if err != nil {
			t.Fatal(err)
		}
		want, _, err := Rescale(dir+e.Name(), src, 0.1)
		if err != nil {
			t.Fatal(err)
		}
		got, err := os.ReadFile(tenth + e.Name())
		if err != nil {
			t.Fatalf("%v (make it with: inabox rescale --rate-scale 0.1 %s%s > %s%s)", err, dir[6:], e.Name(), tenth[6:], e.Name())
		}
		if string(got) != string(want) {
			t.Errorf("%s%s is not %s%s rescaled to 0.1: rewrite it with inabox rescale --rate-scale 0.1", tenth[6:], e.Name(), dir[6:], e.Name())
		}
		n++
	}
	if n < 8 {
		t.Fatalf("%d regimes, want the ablation's 8", n)
	}
}
