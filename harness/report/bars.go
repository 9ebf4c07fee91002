package report

import (
	"bufio"
	"fmt"
	"io"
	"math"
	"strconv"
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
func (c BarChart) WriteSVG(w io.Writer) error {
	bw := bufio.NewWriter(w)
	ymax := 0.0
	for _, s := range c.Series {
		for i, v := range s.Values {
			e := 0.0
			if i < len(s.Errs) && !math.IsNaN(s.Errs[i]) && !math.IsInf(s.Errs[i], 0) {
				e = s.Errs[i]
			}
			if !math.IsNaN(v) && !math.IsInf(v, 0) {
				ymax = math.Max(ymax, v+e)
			}
		}
	}
	if ymax <= 0 {
		ymax = 1
	}
	yt := niceTicks(0, ymax)
	ymax = math.Max(ymax, yt[len(yt)-1])
	sy := func(y float64) float64 { return padT + plotH - y/ymax*plotH }
	n := max(len(c.Categories), 1)
	group := float64(plotW) / float64(n)
	bar := group * 0.8 / float64(max(len(c.Series), 1))
	svgOpen(bw, c.Title)
	bw.WriteString(`<g font-size="` + strconv.Itoa(tks) + `" fill="` + axisColor + `">` + "\n")
	yGrid(bw, yt, sy)
	for i, cat := range c.Categories {
		x := padL + group*(float64(i)+0.5)
		fmt.Fprintf(bw, `<text x="%.1f" y="%d" text-anchor="middle">%s</text>`+"\n", x, padT+plotH+18, esc(cat))
	}
	bw.WriteString("</g>\n")
	fmt.Fprintf(bw, `<path d="M%d %d V%d H%d" fill="none" stroke="%s" stroke-width="1.5"/>`+"\n", padL, padT, padT+plotH, padL+plotW, axisColor)
	fmt.Fprintf(bw, `<text transform="translate(22 %d) rotate(-90)" font-size="%d" text-anchor="middle">%s</text>`+"\n", padT+plotH/2, labelSize, esc(c.YLabel))
	for k, s := range c.Series {
		col := palette[k%len(palette)]
		for i := range c.Categories {
			if i >= len(s.Values) || math.IsNaN(s.Values[i]) || math.IsInf(s.Values[i], 0) {
				continue
			}
			v := s.Values[i]
			x := padL + group*float64(i) + group*0.1 + bar*float64(k)
			fmt.Fprintf(bw, `<rect x="%.1f" y="%.1f" width="%.1f" height="%.1f" fill="%s"><title>%s %s: %s</title></rect>`+"\n",
				x, sy(v), bar*0.9, sy(0)-sy(v), col, esc(c.Categories[i]), esc(s.Name), strconv.FormatFloat(v, 'g', 4, 64))
			if i < len(s.Errs) && !math.IsNaN(s.Errs[i]) && !math.IsInf(s.Errs[i], 0) && s.Errs[i] > 0 {
				cx, e := x+bar*0.45, s.Errs[i]
				fmt.Fprintf(bw, `<path d="M%.1f %.1f V%.1f M%.1f %.1f H%.1f M%.1f %.1f H%.1f" stroke="%s" stroke-width="1.5"/>`+"\n",
					cx, sy(math.Max(v-e, 0)), sy(v+e), cx-4, sy(v+e), cx+4, cx-4, sy(math.Max(v-e, 0)), cx+4, axisColor)
			}
		}
	}
	bw.WriteString(`<g font-size="` + strconv.Itoa(tks) + `">` + "\n")
	lx := padL + plotW + 20
	for k, s := range c.Series {
		y := padT + 10 + 20*k
		fmt.Fprintf(bw, `<rect x="%d" y="%d" width="24" height="10" fill="%s"/>`+"\n", lx, y-5, palette[k%len(palette)])
		fmt.Fprintf(bw, `<text x="%d" y="%d" dominant-baseline="middle">%s</text>`+"\n", lx+30, y, esc(s.Name))
	}
	fmt.Fprintf(bw, `<text x="%d" y="%d" dominant-baseline="middle">error bars: 95 %% CI</text>`+"\n", lx, padT+10+20*len(c.Series))
	bw.WriteString("</g>\n</svg>\n")
	return bw.Flush()
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
