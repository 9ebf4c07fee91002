package report

import (
	"bufio"
	"encoding/xml"
	"fmt"
	"io"
	"math"
	"strconv"
	"strings"
)

// Chart is a line chart written as a standalone SVG: axes with ticks and
// units, a title, and a legend. Lines are drawn as steps (each point's value
// holds until the next point's x), which is right for both empirical CDFs
// and binned time series.
type Chart struct {
	Title  string
	XLabel string // with its unit, e.g. "virtual time (s)"
	YLabel string
	Lines  []Line
	// XMax extends the last step of every line to it (0: the last x).
	XMax float64
	// YMax fixes the top of the y axis (0: from the data).
	YMax float64
	// Straight draws lines point to point with a marker at each point (a
	// sweep), not as steps.
	Straight bool
	// Marks are events drawn as labelled vertical lines (the faults that
	// fired, on a time axis).
	Marks []Mark
}

// Mark is an event at X, named Label.
type Mark struct {
	X     float64
	Label string
}

// markColor is the marks' colour: a dark red apart from the palette.
const markColor = "#b22222"

// markRows is how many rows of labels the marks use.
const markRows = 4

// Line is one named series.
type Line struct {
	Name   string
	Points []Point
	Dashed bool
}

// Chart geometry, in SVG user units.
const (
	chartW, chartH            = 900, 500
	padL, padR, padT, padB    = 90, 200, 50, 60
	plotW, plotH              = chartW - padL - padR, chartH - padT - padB
	maxLegend                 = 16
	axisColor, gridColor      = "#333", "#ddd"
	fontFamily                = "Helvetica, Arial, sans-serif"
	titleSize, labelSize, tks = 18, 14, 12
)

// palette is Tableau 10, distinguishable in print and for most colour
// vision deficiencies.
var palette = []string{"#4e79a7", "#f28e2b", "#e15759", "#76b7b2", "#59a14f", "#edc948", "#b07aa1", "#ff9da7", "#9c755f", "#bab0ac"}

// WriteSVG writes the chart.
func (c Chart) WriteSVG(w io.Writer) error {
	bw := bufio.NewWriter(w)
	xmin, xmax, ymax := math.Inf(1), math.Inf(-1), 0.0
	for _, l := range c.Lines {
		for _, p := range l.Points {
			x, y := float64(p.X), float64(p.Y)
			if math.IsNaN(x) || math.IsNaN(y) || math.IsInf(x, 0) || math.IsInf(y, 0) {
				continue
			}
			xmin, xmax, ymax = math.Min(xmin, x), math.Max(xmax, x), math.Max(ymax, y)
		}
	}
	if c.XMax > 0 {
		xmax = math.Max(xmax, c.XMax)
	}
	if math.IsInf(xmin, 0) {
		xmin, xmax = 0, 1
	}
	xmin = math.Min(xmin, 0)
	if xmax <= xmin {
		xmax = xmin + 1
	}
	if c.YMax > 0 {
		ymax = c.YMax
	}
	if ymax <= 0 {
		ymax = 1
	}
	xt := niceTicks(xmin, xmax)
	yt := niceTicks(0, ymax)
	xmin, xmax = math.Min(xmin, xt[0]), math.Max(xmax, xt[len(xt)-1])
	ymax = math.Max(ymax, yt[len(yt)-1])
	sx := func(x float64) float64 { return padL + (x-xmin)/(xmax-xmin)*plotW }
	sy := func(y float64) float64 { return padT + plotH - y/ymax*plotH }

	svgOpen(bw, c.Title)
	// Grid and ticks.
	bw.WriteString(`<g font-size="` + strconv.Itoa(tks) + `" fill="` + axisColor + `">` + "\n")
	for _, v := range xt {
		x := sx(v)
		fmt.Fprintf(bw, `<line x1="%.1f" y1="%d" x2="%.1f" y2="%d" stroke="%s"/>`+"\n", x, padT, x, padT+plotH, gridColor)
		fmt.Fprintf(bw, `<text x="%.1f" y="%d" text-anchor="middle">%s</text>`+"\n", x, padT+plotH+18, esc(tickLabel(v, xt)))
	}
	yGrid(bw, yt, sy)
	bw.WriteString("</g>\n")
	// Axes and their labels.
	fmt.Fprintf(bw, `<path d="M%d %d V%d H%d" fill="none" stroke="%s" stroke-width="1.5"/>`+"\n", padL, padT, padT+plotH, padL+plotW, axisColor)
	fmt.Fprintf(bw, `<text x="%d" y="%d" font-size="%d" text-anchor="middle">%s</text>`+"\n", padL+plotW/2, chartH-15, labelSize, esc(c.XLabel))
	fmt.Fprintf(bw, `<text transform="translate(22 %d) rotate(-90)" font-size="%d" text-anchor="middle">%s</text>`+"\n", padT+plotH/2, labelSize, esc(c.YLabel))
	// Lines.
	for i, l := range c.Lines {
		d := stepPath(l.Points, c.XMax, sx, sy)
		if c.Straight {
			d = straightPath(l.Points, sx, sy)
		}
		if d == "" {
			continue
		}
		if c.Straight {
			for _, p := range l.Points {
				if x, y := float64(p.X), float64(p.Y); !math.IsNaN(x) && !math.IsNaN(y) && !math.IsInf(x, 0) && !math.IsInf(y, 0) {
					fmt.Fprintf(bw, `<circle cx="%.1f" cy="%.1f" r="3.5" fill="%s"/>`+"\n", sx(x), sy(y), palette[i%len(palette)])
				}
			}
		}
		dash := ""
		if l.Dashed {
			dash = ` stroke-dasharray="6 4"`
		}
		fmt.Fprintf(bw, `<path d="%s" fill="none" stroke="%s" stroke-width="2"%s><title>%s</title></path>`+"\n", d, palette[i%len(palette)], dash, esc(l.Name))
	}
	// Marks.
	if len(c.Marks) > 0 {
		bw.WriteString(`<g font-size="` + strconv.Itoa(tks-2) + `" fill="` + markColor + `">` + "\n")
		// A label goes in the first of markRows rows where it clears the
		// previous label (about 6 units per character at this size).
		var rowEnd [markRows]float64
		for i, m := range c.Marks {
			if math.IsNaN(m.X) || m.X < xmin || m.X > xmax {
				continue
			}
			x := sx(m.X)
			fmt.Fprintf(bw, `<line x1="%.1f" y1="%d" x2="%.1f" y2="%d" stroke="%s" stroke-dasharray="2 3"><title>%s</title></line>`+"\n",
				x, padT, x, padT+plotH, markColor, esc(m.Label))
			label := shortMark(m.Label)
			row := i % markRows
			for r := range rowEnd {
				if x+3 >= rowEnd[r] {
					row = r
					break
				}
			}
			rowEnd[row] = x + 3 + 6*float64(len(label)) + 4
			fmt.Fprintf(bw, `<text x="%.1f" y="%d">%s</text>`+"\n", x+3, padT+12+12*row, esc(label))
		}
		bw.WriteString("</g>\n")
	}
	// Legend.
	bw.WriteString(`<g font-size="` + strconv.Itoa(tks) + `">` + "\n")
	lx := padL + plotW + 20
	for i, l := range c.Lines {
		y := padT + 10 + 20*i
		if i == maxLegend {
			fmt.Fprintf(bw, `<text x="%d" y="%d" dominant-baseline="middle">… %d more</text>`+"\n", lx, y, len(c.Lines)-maxLegend)
			break
		}
		dash := ""
		if l.Dashed {
			dash = ` stroke-dasharray="6 4"`
		}
		fmt.Fprintf(bw, `<line x1="%d" y1="%d" x2="%d" y2="%d" stroke="%s" stroke-width="3"%s/>`+"\n", lx, y, lx+24, y, palette[i%len(palette)], dash)
		fmt.Fprintf(bw, `<text x="%d" y="%d" dominant-baseline="middle">%s</text>`+"\n", lx+30, y, esc(l.Name))
	}
	bw.WriteString("</g>\n</svg>\n")
	return bw.Flush()
}

// shortMark is a mark's label above the plot: its first word (the full
// label is the line's tooltip).
func shortMark(label string) string {
	w, _, _ := strings.Cut(label, " ")
	return w
}

// FaultMarks are the marks of the faults that fired: kind and target at
// their time.
func FaultMarks(fs []FaultRecord) []Mark {
	ms := make([]Mark, len(fs))
	for i, f := range fs {
		ms[i] = Mark{X: float64(f.At), Label: strings.TrimSuffix(faultsText(fs[i:i+1]), ";")}
	}
	return ms
}

// svgOpen writes a chart's SVG header, white background and title.
func svgOpen(bw *bufio.Writer, title string) {
	fmt.Fprintf(bw, `<?xml version="1.0" encoding="UTF-8"?>
<svg xmlns="http://www.w3.org/2000/svg" width="%d" height="%d" viewBox="0 0 %d %d" font-family="%s">
<rect width="100%%" height="100%%" fill="white"/>
<text x="%d" y="30" font-size="%d" font-weight="bold" text-anchor="middle">%s</text>
`, chartW, chartH, chartW, chartH, fontFamily, padL+plotW/2, titleSize, esc(title))
}

// yGrid writes the horizontal grid lines and labels of the y ticks yt.
func yGrid(bw *bufio.Writer, yt []float64, sy func(float64) float64) {
	for _, v := range yt {
		y := sy(v)
		fmt.Fprintf(bw, `<line x1="%d" y1="%.1f" x2="%d" y2="%.1f" stroke="%s"/>`+"\n", padL, y, padL+plotW, y, gridColor)
		fmt.Fprintf(bw, `<text x="%d" y="%.1f" text-anchor="end" dominant-baseline="middle">%s</text>`+"\n", padL-8, y, esc(tickLabel(v, yt)))
	}
}

// straightPath joins the points with straight segments.
func straightPath(pts []Point, sx, sy func(float64) float64) string {
	var b strings.Builder
	for _, p := range pts {
		x, y := float64(p.X), float64(p.Y)
		if math.IsNaN(x) || math.IsNaN(y) || math.IsInf(x, 0) || math.IsInf(y, 0) {
			continue
		}
		cmd := "L"
		if b.Len() == 0 {
			cmd = "M"
		}
		fmt.Fprintf(&b, "%s%.1f %.1f", cmd, sx(x), sy(y))
	}
	return b.String()
}

// stepPath draws points as steps: horizontal to the next x, then vertical.
func stepPath(pts []Point, xend float64, sx, sy func(float64) float64) string {
	var b strings.Builder
	n := 0
	for i, p := range pts {
		x, y := float64(p.X), float64(p.Y)
		if math.IsNaN(x) || math.IsNaN(y) || math.IsInf(x, 0) || math.IsInf(y, 0) {
			continue
		}
		if n == 0 {
			fmt.Fprintf(&b, "M%.1f %.1f", sx(x), sy(y))
		} else {
			fmt.Fprintf(&b, "H%.1fV%.1f", sx(x), sy(y))
		}
		n++
		if i == len(pts)-1 && xend > x {
			fmt.Fprintf(&b, "H%.1f", sx(xend))
		}
	}
	return b.String()
}

func esc(s string) string {
	var b strings.Builder
	xml.EscapeText(&b, []byte(s))
	return b.String()
}

// niceTicks returns about 5–10 round tick values covering [lo, hi].
func niceTicks(lo, hi float64) []float64 {
	span := hi - lo
	if span <= 0 {
		span = 1
	}
	raw := span / 6
	mag := math.Pow(10, math.Floor(math.Log10(raw)))
	step := mag
	for _, m := range []float64{1, 2, 2.5, 5, 10} {
		if m*mag >= raw {
			step = m * mag
			break
		}
	}
	start := math.Floor(lo/step) * step
	var out []float64
	for i := 0; ; i++ {
		v := start + float64(i)*step
		out = append(out, v)
		if v >= hi-step*1e-9 || i > 50 {
			break
		}
	}
	return out
}

// tickLabel formats v compactly with an SI suffix (k, M, G, T) when the
// ticks are large.
func tickLabel(v float64, ticks []float64) string {
	top := math.Max(math.Abs(ticks[0]), math.Abs(ticks[len(ticks)-1]))
	suffix, div := "", 1.0
	for _, u := range []struct {
		s string
		d float64
	}{{"T", 1e12}, {"G", 1e9}, {"M", 1e6}, {"k", 1e3}} {
		if top >= u.d {
			suffix, div = u.s, u.d
			break
		}
	}
	s := strconv.FormatFloat(roundSig(v/div), 'f', -1, 64)
	if len(s) > 8 {
		s = strconv.FormatFloat(v/div, 'g', 4, 64)
	}
	if v == 0 {
		return "0"
	}
	return s + suffix
}

// JCTChart is the empirical CDF of job completion times. More than one
// result (e.g. one per policy) gives one line each, named by policy.
func JCTChart(rs ...*Results) Chart {
	c := Chart{Title: "Job completion time CDF", XLabel: "job completion time (s, virtual)", YLabel: "fraction of jobs finished", YMax: 1}
	if len(rs) == 1 {
		c.Title += " — " + rs[0].Scenario + " (" + rs[0].Policy + ")"
	} else if len(rs) > 1 {
		c.Title += " — " + rs[0].Scenario
	}
	for _, r := range rs {
		pts := r.JCTCDF
		if len(pts) > 0 {
			pts = append([]Point{{X: pts[0].X, Y: 0}}, pts...)
		}
		c.Lines = append(c.Lines, Line{Name: r.Policy, Points: pts})
	}
	return c
}

// MemoryChart is switch memory occupancy over time: each (pool, job) pair
// as a percentage of the switch's slots, and all of them together (dashed).
func MemoryChart(r *Results) Chart {
	c := Chart{Title: fmt.Sprintf("Switch memory reserved — %s (%s), %d slots", r.Scenario, r.Policy, r.Memory.TotalSlots),
		XLabel: "virtual time (s)", YLabel: "reserved slots (% of switch memory)", XMax: float64(r.End), Marks: FaultMarks(r.Faults)}
	total := float64(r.Memory.TotalSlots)
	if total <= 0 {
		total = 1
	}
	for _, s := range r.Memory.Series {
		name := s.Job
		if s.Pool != "" {
			name = s.Pool + " / " + s.Job
		}
		if name == "" {
			name = "(unattributed)"
		}
		pts := make([]Point, len(s.Slots))
		for i, p := range s.Slots {
			pts[i] = Point{X: p.X, Y: p.Y / Num(total) * 100}
		}
		c.Lines = append(c.Lines, Line{Name: name, Points: pts})
	}
	pts := make([]Point, len(r.Memory.Utilization))
	for i, p := range r.Memory.Utilization {
		pts[i] = Point{X: p.X, Y: p.Y * 100}
	}
	c.Lines = append(c.Lines, Line{Name: "all (utilization)", Points: pts, Dashed: true})
	return c
}

// ThroughputChart is aggregation throughput over time: each job and all
// jobs together (dashed).
func ThroughputChart(r *Results) Chart {
	c := Chart{Title: fmt.Sprintf("Aggregation throughput — %s (%s)", r.Scenario, r.Policy),
		XLabel: "virtual time (s)", YLabel: "aggregated elements per second", XMax: float64(r.End), Marks: FaultMarks(r.Faults)}
	for _, j := range r.Jobs {
		c.Lines = append(c.Lines, Line{Name: j.Name, Points: j.Throughput})
	}
	c.Lines = append(c.Lines, Line{Name: "all jobs", Points: r.Throughput, Dashed: true})
	return c
}
