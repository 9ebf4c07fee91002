package report

import (
	"bytes"
	"math"
	"strings"
	"testing"
)

func TestTQuantile975(t *testing.T) {
	for _, c := range []struct {
		df   int
		want float64
	}{{1, 12.706}, {5, 2.571}, {30, 2.042}, {40, 2.021}, {60, 2.000}, {120, 1.980}, {1000, 1.962}} {
		if got := TQuantile975(c.df); math.Abs(got-c.want) > 0.002 {
			t.Errorf("df %d: %.4f, want %.3f", c.df, got, c.want)
		}
	}
	if !math.IsNaN(TQuantile975(0)) {
		t.Error("df 0 must be NaN")
	}
}

// TestCompareSeeds: means, t intervals and paired gains from synthetic
// runs, a failed run a missing sample.
func TestCompareSeeds(t *testing.T) {
	mk := func(policy string, jct float64) *Results {
		r := &Results{Policy: policy}
		r.Summary.JCTMean = Num(jct)
		return r
	}
	runs := [][]*Results{
		{mk("atp", 2), mk("freeina", 1)},
		{mk("atp", 4), mk("freeina", 2)},
		{mk("atp", 6), nil},
	}
	rp := CompareSeeds("s", []uint64{1, 2, 3}, []string{"atp", "freeina"}, runs, []string{"freeina seed 3: boom"})
	var row RepeatedRow
	for _, r := range rp.Rows {
		if r.Metric == "jct_mean_s" {
			row = r
		}
	}
	a := row.Values["atp"]
	// mean 4, sd 2, n 3: half-width 4.303·2/√3
	if a.N != 3 || a.Mean != 4 || math.Abs(float64(a.CI95)-4.303*2/math.Sqrt(3)) > 1e-9 {
		t.Errorf("atp: %+v", a)
	}
	f := row.Values["freeina"]
	if f.N != 2 || f.Mean != 1.5 || !math.IsNaN(float64(f.Samples[2])) {
		t.Errorf("freeina: %+v", f)
	}
	// paired gains: 2/1 and 4/2 → exactly 2, interval 0
	if g := row.VsRef["freeina"]; g.N != 2 || g.Mean != 2 || g.CI95 != 0 {
		t.Errorf("gain: %+v", g)
	}
	var b bytes.Buffer
	if err := rp.WriteText(&b); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"3 seeds (1 2 3)", "4 s ± 4.969 s", "2.00× ± 0", "FAILED (missing sample): freeina seed 3: boom"} {
		if !strings.Contains(b.String(), want) {
			t.Errorf("text lacks %q:\n%s", want, b.String())
		}
	}
}

// TestJCTBars: the bar chart is well-formed SVG with a bar per policy and
// series and an error bar where the interval is defined.
func TestJCTBars(t *testing.T) {
	mk := func(policy string, jct float64) *Results {
		r := &Results{Policy: policy}
		r.Summary.JCTMean, r.Summary.JCTP95 = Num(jct), Num(2*jct)
		return r
	}
	rp := CompareSeeds("s", []uint64{1, 2}, []string{"atp", "freeina"},
		[][]*Results{{mk("atp", 2), mk("freeina", 1)}, {mk("atp", 3), mk("freeina", 1)}}, nil)
	var b bytes.Buffer
	if err := rp.JCTBars().WriteSVG(&b); err != nil {
		t.Fatal(err)
	}
	gs := svgGroups(t, "jct.svg", b.Bytes())
	// one group per series, each a bar per policy; atp's two bars have
	// an error bar (3 strokes), freeina's interval is 0: none drawn
	if n := count(gs, "series"); n != 2 {
		t.Fatalf("%d series groups, want 2: %+v", n, gs)
	}
	for _, g := range gs {
		if g.class == "series" && g.paths != 2+3 {
			t.Errorf("series %s: %d paths, want 5", g.id, g.paths)
		}
	}
}
