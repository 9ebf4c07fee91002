package report

import (
	"image/color"
	"io"
	"math"
	"slices"
	"strconv"
	"strings"

	xfont "golang.org/x/image/font"
	"gonum.org/v1/plot"
	"gonum.org/v1/plot/font"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/text"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"

	"github.com/inabox/inabox/harness/testbed"
)

// Every plot is drawn with gonum/plot (axes, ticks, labels, legends, grids
// of panels) onto svgCanvas (svg.go). The plotters here draw the series:
// lines and steps, stacked areas, grouped bars, and marks; each series is
// one <g> with a class (job, policy, fault, event, line-rate, series) and
// its name as the tooltip.

// jobPalette is Tableau 10, distinguishable in print and for most colour
// vision deficiencies: job i of a run has colour i mod 10 in every plot of
// the run and of a compare, dashed (or, for an area, tinted with a dashed
// outline) from the eleventh job on.
var jobPalette = hexColors("#4e79a7", "#f28e2b", "#e15759", "#76b7b2", "#59a14f", "#edc948", "#b07aa1", "#ff9da7", "#9c755f", "#bab0ac")

// policyPalette is ColorBrewer Dark2 and black: a policy's colour is by its
// place in the registry (policyColor), the same in every plot.
var policyPalette = hexColors("#1b9e77", "#d95f02", "#7570b3", "#e7298a", "#66a61e", "#e6ab02", "#a6761d", "#666666", "#000000")

// markColor is the faults' colour: a dark red apart from the palettes;
// eventColor the arrivals' and finishes' outline.
var (
	markColor = color.RGBA{0xb2, 0x22, 0x22, 0xff}
	gridColor = color.RGBA{0xdd, 0xdd, 0xdd, 0xff}
	noteColor = color.RGBA{0x55, 0x55, 0x55, 0xff}
)

func hexColors(hs ...string) []color.RGBA {
	out := make([]color.RGBA, len(hs))
	for i, h := range hs {
		v, _ := strconv.ParseUint(h[1:], 16, 32)
		out[i] = color.RGBA{uint8(v >> 16), uint8(v >> 8), uint8(v), 0xff}
	}
	return out
}

// jobColor and jobDashes are job i's line style.
func jobColor(i int) color.RGBA { return jobPalette[i%len(jobPalette)] }

func jobDashes(i int) []vg.Length {
	switch i / len(jobPalette) {
	case 0:
		return nil
	case 1:
		return []vg.Length{6, 3}
	case 2:
		return []vg.Length{2, 2}
	}
	return []vg.Length{8, 3, 2, 3}
}

// tint is c halfway to white.
func tint(c color.RGBA) color.RGBA {
	return color.RGBA{uint8((int(c.R) + 255) / 2), uint8((int(c.G) + 255) / 2), uint8((int(c.B) + 255) / 2), 0xff}
}

// policyColor is policy's colour: by its place among the registered
// policies, then the variants (an unknown name: after them, by its bytes).
func policyColor(policy string) color.RGBA {
	all := append(testbed.Names(), testbed.Variants()...)
	i := slices.Index(all, policy)
	if i < 0 {
		h := 0
		for _, b := range []byte(policy) {
			h = h*31 + int(b)
		}
		i = len(all) + h%len(policyPalette)
	}
	return policyPalette[i%len(policyPalette)]
}

// Text styles: Liberation Sans, which gonum/plot measures text with.
var sans = font.Font{Typeface: "Liberation", Variant: "Sans"}

func textStyle(size vg.Length, bold bool) text.Style {
	f := sans
	if bold {
		f.Weight = xfont.WeightBold
	}
	return text.Style{Color: color.Black, Font: font.From(f, size), Handler: plot.DefaultTextHandler}
}

// newPanel is a plot with the house style: Liberation Sans, SI tick
// labels, a light grid, no background (the figure has one).
func newPanel(title, xlabel, ylabel string) *plot.Plot {
	p := plot.New()
	p.BackgroundColor = nil
	p.Title.Text = title
	p.Title.TextStyle.Font = font.From(font.Font{Typeface: "Liberation", Variant: "Sans", Weight: xfont.WeightBold}, 11)
	p.Title.Padding = 4
	for _, a := range []*plot.Axis{&p.X, &p.Y} {
		a.Label.TextStyle.Font = font.From(sans, 11)
		a.Tick.Label.Font = font.From(sans, 10)
		a.Tick.Marker = siTicks{}
		a.Tick.Length = 4
		a.Padding = 0
	}
	p.X.Label.Text, p.Y.Label.Text = xlabel, ylabel
	g := plotter.NewGrid()
	g.Vertical.Color, g.Horizontal.Color = gridColor, gridColor
	g.Vertical.Width, g.Horizontal.Width = 0.5, 0.5
	p.Add(g)
	return p
}

// siTicks are niceTicks labelled with SI suffixes.
type siTicks struct{}

func (siTicks) Ticks(lo, hi float64) []plot.Tick {
	ts := niceTicks(lo, hi)
	var out []plot.Tick
	eps := (hi - lo) * 1e-9
	for _, v := range ts {
		if v >= lo-eps && v <= hi+eps {
			out = append(out, plot.Tick{Value: v, Label: tickLabel(v, ts)})
		}
	}
	return out
}

// niceRange sets the axis' range, from lo (if not NaN) and to at
// least hi (if not NaN).
func niceRange(a *plot.Axis, lo, hi float64) {
	if !math.IsNaN(lo) {
		a.Min = lo
	}
	if !math.IsNaN(hi) {
		a.Max = math.Max(a.Max, hi)
	}
	if math.IsInf(a.Min, 0) || math.IsNaN(a.Min) {
		a.Min = 0
	}
	if math.IsInf(a.Max, 0) || math.IsNaN(a.Max) || a.Max <= a.Min {
		a.Max = a.Min + 1
	}
	// to the round ticks around, unless that adds more than a tenth
	ts := niceTicks(a.Min, a.Max)
	span := a.Max - a.Min
	if a.Min-ts[0] <= span/10 {
		a.Min = ts[0]
	}
	if ts[len(ts)-1]-a.Max <= span/10 {
		a.Max = ts[len(ts)-1]
	}
}

// Figure is one SVG of one or more panels (a grid, row-major; nil: an
// empty tile), a title, an optional note under it and a legend on the
// right.
type Figure struct {
	Title, Note string
	W, H        vg.Length
	Rows, Cols  int
	Panels      []*plot.Plot
	Legend      []LegendEntry
}

// LegendEntry is one line of a figure's legend.
type LegendEntry struct {
	Name  string
	thumb plot.Thumbnailer // nil: text only
}

const maxLegendLines = 40

// WriteSVG writes the figure. The same figure gives the same bytes.
func (f *Figure) WriteSVG(w io.Writer) error {
	if f.W == 0 {
		f.W, f.H = 900, 500
	}
	c := newSVGCanvas(f.W, f.H)
	f.draw(c)
	_, err := c.WriteTo(w)
	return err
}

// draw draws the figure on c (of the figure's size).
func (f *Figure) draw(c vg.CanvasSizer) {
	dc := draw.New(c)
	ts := textStyle(15, true)
	ts.XAlign, ts.YAlign = draw.XCenter, draw.YTop
	top := f.H - 10
	dc.FillText(ts, vg.Point{X: f.W / 2, Y: top}, f.Title)
	top -= ts.Height(f.Title) + 4
	if f.Note != "" {
		ns := textStyle(10, false)
		ns.Color = noteColor
		ns.XAlign, ns.YAlign = draw.XCenter, draw.YTop
		dc.FillText(ns, vg.Point{X: f.W / 2, Y: top}, f.Note)
		top -= ns.Height(f.Note) + 4
	}
	// The legend column: as wide as its longest entry.
	leg := plot.NewLegend()
	leg.TextStyle = textStyle(10, false)
	leg.Top, leg.Left = true, true
	leg.ThumbnailWidth = 22
	leg.Padding = 2
	entries := f.Legend
	if len(entries) > maxLegendLines {
		entries = append(slices.Clone(entries[:maxLegendLines-1]), LegendEntry{Name: "… " + strconv.Itoa(len(f.Legend)-maxLegendLines+1) + " more"})
	}
	legW := vg.Length(0)
	for _, e := range entries {
		if e.thumb != nil {
			leg.Add(e.Name, e.thumb)
		} else {
			leg.Add(e.Name)
		}
		legW = max(legW, leg.ThumbnailWidth+leg.TextStyle.Width(" "+e.Name)*1.1+14)
	}
	area := draw.Crop(dc, 0, -legW, 0, top-f.H)
	grid := make([][]*plot.Plot, f.Rows)
	for r := range grid {
		grid[r] = make([]*plot.Plot, f.Cols)
		for k := range grid[r] {
			if i := r*f.Cols + k; i < len(f.Panels) {
				grid[r][k] = f.Panels[i]
			}
		}
	}
	tiles := draw.Tiles{Rows: f.Rows, Cols: f.Cols, PadX: 18, PadY: 12, PadTop: 2, PadBottom: 6, PadLeft: 8, PadRight: 8}
	cs := plot.Align(grid, tiles, area)
	for r := range grid {
		for k, p := range grid[r] {
			if p != nil {
				p.Draw(cs[r][k])
			}
		}
	}
	if len(entries) > 0 {
		leg.Draw(draw.Crop(dc, f.W-legW+4, 0, 0, top-f.H-8))
	}
}

// thumb is a legend thumbnail: a line, a filled box or a glyph.
type thumb struct {
	col    color.Color
	dashes []vg.Length
	fill   bool
	glyph  draw.GlyphDrawer
}

func (t thumb) Thumbnail(c *draw.Canvas) {
	y := (c.Min.Y + c.Max.Y) / 2
	switch {
	case t.glyph != nil:
		c.DrawGlyph(draw.GlyphStyle{Color: t.col, Radius: 3.5, Shape: t.glyph}, vg.Point{X: (c.Min.X + c.Max.X) / 2, Y: y})
	case t.fill:
		pts := []vg.Point{{X: c.Min.X, Y: y - 4}, {X: c.Max.X, Y: y - 4}, {X: c.Max.X, Y: y + 4}, {X: c.Min.X, Y: y + 4}}
		col := t.col
		if t.dashes != nil {
			col = tint(toRGBA(t.col))
		}
		c.FillPolygon(col, pts)
		if t.dashes != nil {
			c.StrokeLines(draw.LineStyle{Color: t.col, Width: 1, Dashes: t.dashes}, append(pts, pts[0]))
		}
	default:
		c.StrokeLine2(draw.LineStyle{Color: t.col, Width: 2, Dashes: t.dashes}, c.Min.X, y, c.Max.X, y)
	}
}

func toRGBA(c color.Color) color.RGBA {
	r, g, b, a := c.RGBA()
	return color.RGBA{uint8(r >> 8), uint8(g >> 8), uint8(b >> 8), uint8(a >> 8)}
}

func finite(x float64) bool { return !math.IsNaN(x) && !math.IsInf(x, 0) }

// noRange is a DataRange that changes no axis.
func noRange() (float64, float64, float64, float64) {
	return math.Inf(1), math.Inf(-1), math.Inf(1), math.Inf(-1)
}

// linePlot is one named series drawn as a line: steps (each point's value
// holds until the next point's x, the last one's until XEnd), or straight
// segments with a dot at each point. Undefined points break the line.
type linePlot struct {
	class, name, title string
	pts                []Point
	step               bool
	xend               float64
	col                color.Color
	dashes             []vg.Length
	width              vg.Length
	dots               bool
}

func (l *linePlot) DataRange() (xmin, xmax, ymin, ymax float64) {
	xmin, xmax, ymin, ymax = noRange()
	for _, p := range l.pts {
		if x, y := float64(p.X), float64(p.Y); finite(x) && finite(y) {
			xmin, xmax, ymin, ymax = math.Min(xmin, x), math.Max(xmax, x), math.Min(ymin, y), math.Max(ymax, y)
		}
	}
	if l.step && l.xend > 0 && !math.IsInf(xmax, -1) {
		xmax = math.Max(xmax, l.xend)
	}
	return
}

func (l *linePlot) Plot(c draw.Canvas, p *plot.Plot) {
	trX, trY := p.Transforms(&c)
	c.Push()
	groupOf(c, l.class, l.name, l.title)
	defer c.Pop()
	w := l.width
	if w == 0 {
		w = 1.5
	}
	sty := draw.LineStyle{Color: l.col, Width: w, Dashes: l.dashes}
	var seg []vg.Point
	flush := func() {
		if len(seg) > 1 {
			c.StrokeLines(sty, seg)
		}
		seg = seg[:0]
	}
	for _, pt := range l.pts {
		x, y := float64(pt.X), float64(pt.Y)
		if !finite(x) {
			continue
		}
		if !finite(y) {
			if l.step && len(seg) > 0 {
				seg = append(seg, vg.Point{X: trX(x), Y: seg[len(seg)-1].Y})
			}
			flush()
			continue
		}
		q := vg.Point{X: trX(x), Y: trY(y)}
		if l.step && len(seg) > 0 {
			seg = append(seg, vg.Point{X: q.X, Y: seg[len(seg)-1].Y})
		}
		seg = append(seg, q)
		if l.dots {
			c.DrawGlyph(draw.GlyphStyle{Color: l.col, Radius: 2.5, Shape: draw.CircleGlyph{}}, q)
		}
	}
	if l.step && len(seg) > 0 && l.xend > 0 {
		if xe := trX(l.xend); xe > seg[len(seg)-1].X {
			seg = append(seg, vg.Point{X: xe, Y: seg[len(seg)-1].Y})
		}
	}
	flush()
}

// band is one series of a stack: its value in each bin of the stack's xs.
type band struct {
	class, name, title string
	vals               []float64
	idx                int // its colour: job index (jobColor), or -1: grey
}

// stackPlot is stacked areas over shared bins: bin i spans [xs[i],
// xs[i+1]) (the last to xend), each band on top of the ones before.
type stackPlot struct {
	xs    []float64
	xend  float64
	bands []band
}

func (s *stackPlot) DataRange() (xmin, xmax, ymin, ymax float64) {
	if len(s.xs) == 0 {
		return noRange()
	}
	ymax = 0
	for i := range s.xs {
		sum := 0.0
		for _, b := range s.bands {
			if i < len(b.vals) && finite(b.vals[i]) {
				sum += b.vals[i]
			}
		}
		ymax = math.Max(ymax, sum)
	}
	return s.xs[0], math.Max(s.xend, s.xs[len(s.xs)-1]), 0, ymax
}

func (s *stackPlot) Plot(c draw.Canvas, p *plot.Plot) {
	trX, trY := p.Transforms(&c)
	n := len(s.xs)
	lower := make([]float64, n)
	right := func(i int) float64 {
		if i+1 < n {
			return s.xs[i+1]
		}
		return math.Max(s.xend, s.xs[i])
	}
	for _, b := range s.bands {
		upper := slices.Clone(lower)
		filled := false
		for i := range upper {
			if i < len(b.vals) && finite(b.vals[i]) && b.vals[i] > 0 {
				upper[i] += b.vals[i]
				filled = true
			}
		}
		c.Push()
		groupOf(c, b.class, b.name, b.title)
		if filled {
			var pts []vg.Point
			for i := range n {
				pts = append(pts, vg.Point{X: trX(s.xs[i]), Y: trY(upper[i])}, vg.Point{X: trX(right(i)), Y: trY(upper[i])})
			}
			for i := n - 1; i >= 0; i-- {
				pts = append(pts, vg.Point{X: trX(right(i)), Y: trY(lower[i])}, vg.Point{X: trX(s.xs[i]), Y: trY(lower[i])})
			}
			col, dashes := color.RGBA{0x99, 0x99, 0x99, 0xff}, []vg.Length(nil)
			if b.idx >= 0 {
				col, dashes = jobColor(b.idx), jobDashes(b.idx)
			}
			if dashes == nil {
				c.FillPolygon(col, pts)
			} else {
				c.FillPolygon(tint(col), pts)
				c.StrokeLines(draw.LineStyle{Color: col, Width: 1, Dashes: dashes}, append(pts, pts[0]))
			}
		}
		c.Pop()
		lower = upper
	}
}

// hline is a labelled horizontal reference line (the line rate).
type hline struct {
	class, name, title, label string
	y                         float64
	col                       color.Color
}

func (h *hline) DataRange() (float64, float64, float64, float64) {
	return math.Inf(1), math.Inf(-1), h.y, h.y
}

func (h *hline) Plot(c draw.Canvas, p *plot.Plot) {
	_, trY := p.Transforms(&c)
	y := trY(h.y)
	c.Push()
	groupOf(c, h.class, h.name, h.title)
	defer c.Pop()
	c.StrokeLine2(draw.LineStyle{Color: h.col, Width: 1.5, Dashes: []vg.Length{6, 3}}, c.Min.X, y, c.Max.X, y)
	ts := textStyle(9, false)
	ts.Color = h.col
	ts.XAlign, ts.YAlign = draw.XRight, draw.YBottom
	c.FillText(ts, vg.Point{X: c.Max.X - 3, Y: y + 2}, h.label)
}

// Mark is an event at X, named Label (a fault that fired, on a time
// axis).
type Mark struct {
	X     float64
	Label string
}

// markRows is how many rows of labels the marks use.
const markRows = 4

// marksPlot draws marks as dashed vertical lines, each labelled at the top
// with its first word (the full label is its tooltip).
type marksPlot struct{ marks []Mark }

func (m *marksPlot) DataRange() (float64, float64, float64, float64) { return noRange() }

func (m *marksPlot) Plot(c draw.Canvas, p *plot.Plot) {
	trX, _ := p.Transforms(&c)
	ts := textStyle(8, false)
	ts.Color = markColor
	ts.YAlign = draw.YTop
	var rowEnd [markRows]vg.Length
	for i, mk := range m.marks {
		if !finite(mk.X) || mk.X < p.X.Min || mk.X > p.X.Max {
			continue
		}
		x := trX(mk.X)
		c.Push()
		groupOf(c, "fault", shortMark(mk.Label), mk.Label)
		c.StrokeLine2(draw.LineStyle{Color: markColor, Width: 1, Dashes: []vg.Length{2, 3}}, x, c.Min.Y, x, c.Max.Y)
		label := shortMark(mk.Label)
		// the first of markRows rows where it clears the previous label
		row := i % markRows
		for r := range rowEnd {
			if x+2 >= rowEnd[r] {
				row = r
				break
			}
		}
		rowEnd[row] = x + 2 + ts.Width(label) + 4
		c.FillText(ts, vg.Point{X: x + 2, Y: c.Max.Y - 2 - vg.Length(row)*10}, label)
		c.Pop()
	}
}

// shortMark is a mark's label above the plot: its first word.
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

// eventsPlot marks each job's arrival (▲) and finish (■) along the bottom
// of a time panel, in the job's colour.
type eventsPlot struct{ jobs []JobResult }

func (e *eventsPlot) DataRange() (float64, float64, float64, float64) { return noRange() }

func (e *eventsPlot) Plot(c draw.Canvas, p *plot.Plot) {
	trX, _ := p.Transforms(&c)
	y := c.Min.Y + 6
	for i, j := range e.jobs {
		title := j.Name + ": arrives at " + FormatSeconds(j.Arrival)
		if j.Finished {
			title += ", finishes at " + FormatSeconds(j.Finish)
		} else {
			title += ", unfinished"
		}
		c.Push()
		groupOf(c, "event", j.Name, title)
		col := jobColor(i)
		// each glyph on a white one a size larger, to show on an area of
		// its colour
		glyph := func(x float64, r vg.Length, g draw.GlyphDrawer) {
			pt := vg.Point{X: trX(x), Y: y}
			c.DrawGlyph(draw.GlyphStyle{Color: color.White, Radius: r + 1.5, Shape: g}, pt)
			c.DrawGlyph(draw.GlyphStyle{Color: col, Radius: r, Shape: g}, pt)
		}
		if x := float64(j.Arrival); x >= p.X.Min && x <= p.X.Max {
			glyph(x, 4, draw.PyramidGlyph{})
		}
		if x := float64(j.Finish); j.Finished && x >= p.X.Min && x <= p.X.Max {
			glyph(x, 3.5, draw.BoxGlyph{})
		}
		c.Pop()
	}
}

// eventLegend are the legend entries of eventsPlot's glyphs.
func eventLegend() []LegendEntry {
	grey := color.RGBA{0x55, 0x55, 0x55, 0xff}
	return []LegendEntry{
		{Name: "job arrives", thumb: thumb{col: grey, glyph: draw.PyramidGlyph{}}},
		{Name: "job finishes", thumb: thumb{col: grey, glyph: draw.BoxGlyph{}}},
	}
}

// pointsPlot is one named set of dots.
type pointsPlot struct {
	class, name, title string
	pts                []Point
	col                color.Color
	glyph              draw.GlyphDrawer
}

func (s *pointsPlot) DataRange() (float64, float64, float64, float64) {
	return (&linePlot{pts: s.pts}).DataRange()
}

func (s *pointsPlot) Plot(c draw.Canvas, p *plot.Plot) {
	trX, trY := p.Transforms(&c)
	c.Push()
	groupOf(c, s.class, s.name, s.title)
	defer c.Pop()
	for _, pt := range s.pts {
		if x, y := float64(pt.X), float64(pt.Y); finite(x) && finite(y) {
			c.DrawGlyph(draw.GlyphStyle{Color: s.col, Radius: 4, Shape: s.glyph}, vg.Point{X: trX(x), Y: trY(y)})
		}
	}
}

// barsPlot is grouped bars: one group per category (at x = 0, 1, …), one
// bar per series in each, with optional error bars (NaN: none).
type barsPlot struct {
	series []barSeries
	n      int // categories
}

type barSeries struct {
	class, name string
	vals, errs  []float64
	col         color.Color
	dashes      []vg.Length
}

func (b *barsPlot) DataRange() (xmin, xmax, ymin, ymax float64) {
	ymax = 0
	for _, s := range b.series {
		for i, v := range s.vals {
			if !finite(v) {
				continue
			}
			if i < len(s.errs) && finite(s.errs[i]) {
				v += s.errs[i]
			}
			ymax = math.Max(ymax, v)
		}
	}
	return -0.5, float64(b.n) - 0.5, 0, ymax
}

func (b *barsPlot) Plot(c draw.Canvas, p *plot.Plot) {
	trX, trY := p.Transforms(&c)
	m := max(len(b.series), 1)
	w := 0.8 / float64(m)
	for k, s := range b.series {
		c.Push()
		groupOf(c, s.class, s.name, s.name)
		for i := 0; i < b.n && i < len(s.vals); i++ {
			v := s.vals[i]
			if !finite(v) {
				continue
			}
			x0 := float64(i) - 0.4 + w*float64(k)
			x1 := x0 + w*0.92
			pts := []vg.Point{{X: trX(x0), Y: trY(0)}, {X: trX(x1), Y: trY(0)}, {X: trX(x1), Y: trY(v)}, {X: trX(x0), Y: trY(v)}}
			if s.dashes == nil {
				c.FillPolygon(s.col, pts)
			} else {
				c.FillPolygon(tint(toRGBA(s.col)), pts)
				c.StrokeLines(draw.LineStyle{Color: s.col, Width: 1, Dashes: s.dashes}, append(pts, pts[0]))
			}
			if i < len(s.errs) && finite(s.errs[i]) && s.errs[i] > 0 {
				e := s.errs[i]
				cx := trX((x0 + x1) / 2)
				lo, hi := trY(math.Max(v-e, 0)), trY(v+e)
				sty := draw.LineStyle{Color: color.RGBA{0x33, 0x33, 0x33, 0xff}, Width: 1.2}
				c.StrokeLines(sty, []vg.Point{{X: cx, Y: lo}, {X: cx, Y: hi}}, []vg.Point{{X: cx - 3, Y: hi}, {X: cx + 3, Y: hi}},
					[]vg.Point{{X: cx - 3, Y: lo}, {X: cx + 3, Y: lo}})
			}
		}
		c.Pop()
	}
}

// textPlot writes a message in the middle of a panel (a panel with
// nothing to show says why).
type textPlot struct{ msg string }

func (t *textPlot) Plot(c draw.Canvas, _ *plot.Plot) {
	ts := textStyle(11, false)
	ts.Color = noteColor
	ts.XAlign, ts.YAlign = draw.XCenter, draw.YCenter
	c.FillText(ts, vg.Point{X: (c.Min.X + c.Max.X) / 2, Y: (c.Min.Y + c.Max.Y) / 2}, t.msg)
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
	if v == 0 || math.Abs(v) < 1e-12*top {
		return "0"
	}
	return s + suffix
}

// Chart is a line chart of named series (a sweep, a test): steps (each
// point's value holds until the next point's x), or with Straight lines
// from point to point with a dot at each.
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

// Line is one named series: a policy's (its colour, policyColor) or, when
// Policy is false, coloured by its place in the chart.
type Line struct {
	Name   string
	Points []Point
	Dashed bool
	Policy bool
}

// WriteSVG writes the chart.
func (c Chart) WriteSVG(w io.Writer) error { return c.figure().WriteSVG(w) }

func (c Chart) figure() *Figure {
	p := newPanel("", c.XLabel, c.YLabel)
	f := &Figure{Title: c.Title, Rows: 1, Cols: 1, Panels: []*plot.Plot{p}}
	for i, l := range c.Lines {
		col, class := color.Color(jobColor(i)), "series"
		dashes := jobDashes(i)
		if l.Policy {
			col, class, dashes = policyColor(l.Name), "policy", nil
		}
		if l.Dashed {
			dashes = []vg.Length{6, 4}
		}
		p.Add(&linePlot{class: class, name: l.Name, title: l.Name, pts: l.Points, step: !c.Straight, xend: c.XMax, col: col, dashes: dashes, dots: c.Straight})
		f.Legend = append(f.Legend, LegendEntry{Name: l.Name, thumb: thumb{col: col, dashes: dashes}})
	}
	if len(c.Marks) > 0 {
		p.Add(&marksPlot{marks: c.Marks})
	}
	niceRange(&p.X, math.Min(p.X.Min, 0), c.XMax)
	niceRange(&p.Y, math.Min(p.Y.Min, 0), math.NaN())
	if c.YMax > 0 {
		p.Y.Max = c.YMax
	}
	return f
}
