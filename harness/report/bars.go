package report

import (
	"fmt"
	"io"
	"math"

	"gonum.org/v1/plot"
)

// BarChart is a grouped bar chart with error bars, written as a
// standalone SVG: one group per category (e.g. a policy), one bar per
// series in each (e.g. JCT mean and p95), each bar's value ± its error
// (e.g. a 95 % confidence half-width; NaN: none drawn).
type BarChart struct {
	Title      string
	YLabel     string // with its unit
	Categories []string
	Series     []BarSeries
}

// BarSeries is one bar in every category: Values[i] ± Errs[i] for
// Categories[i].
type BarSeries struct {
	Name         string
	Values, Errs []float64
}

// WriteSVG writes the chart.
func (c BarChart) WriteSVG(w io.Writer) error { return c.figure().WriteSVG(w) }

func (c BarChart) figure() *Figure {
	p := newPanel("", "", c.YLabel)
	bars := &barsPlot{n: len(c.Categories)}
	f := &Figure{Title: c.Title, Rows: 1, Cols: 1, Panels: []*plot.Plot{p}}
	for k, s := range c.Series {
		col := jobColor(k)
		bars.series = append(bars.series, barSeries{class: "series", name: s.Name, vals: nums(s.Values), errs: nums(s.Errs), col: col})
		f.Legend = append(f.Legend, LegendEntry{Name: s.Name, thumb: thumb{col: col, fill: true}})
	}
	f.Legend = append(f.Legend, LegendEntry{Name: "error bars: 95 % CI"})
	p.Add(bars)
	if len(c.Categories) > 0 {
		p.NominalX(c.Categories...)
	}
	p.X.Tick.Label.Font = p.Y.Tick.Label.Font
	p.X.Min, p.X.Max = -0.5, float64(max(len(c.Categories), 1))-0.5
	niceRange(&p.Y, 0, p.Y.Max*1.05) // headroom above the tallest bar
	return f
}

// nums is xs with NaN and ±Inf as NaN (no bar, no error bar).
func nums(xs []float64) []float64 {
	out := make([]float64, len(xs))
	for i, x := range xs {
		out[i] = x
		if !finite(x) {
			out[i] = math.NaN()
		}
	}
	return out
}

// JCTBars is the repeated comparison's JCT mean and p95 per policy, each
// with its 95 % confidence interval.
func (rp *Repeated) JCTBars() BarChart {
	c := BarChart{Title: fmt.Sprintf("%s: job completion time over %d seeds", rp.Scenario, len(rp.Seeds)), YLabel: "JCT (s)",
		Categories: rp.Policies}
	for _, key := range []string{"jct_mean_s", "jct_p95_s"} {
		for _, row := range rp.Rows {
			if row.Metric != key {
				continue
			}
			s := BarSeries{Name: row.Label}
			for _, p := range rp.Policies {
				e := row.Values[p]
				s.Values = append(s.Values, float64(e.Mean))
				s.Errs = append(s.Errs, float64(e.CI95))
			}
			c.Series = append(c.Series, s)
		}
	}
	return c
}
