package report

import (
	"encoding/json"
	"fmt"
	"math"
	"slices"
	"strings"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"

	"github.com/inabox/inabox/harness/scenario"
)

// The plots of a run (`inabox run --out`) and of a comparison (`inabox
// compare --out`). Conventions (docs/results-format.md, "Plots"): job i
// has colour i in every plot, a policy has one colour everywhere, times
// are the run's own (virtual seconds as run, never converted), throughput
// is at true scale, and the time series' bin width is on the axis.

// runScale is what a run's scenario_as_run says of its scale.
type runScale struct {
	tensor, rate, linkGbps float64
	vpp                    int
}

func scaleOf(r *Results) runScale {
	sc := runScale{tensor: 1, rate: 1}
	var s struct {
		Scaling struct {
			TensorScale float64 `json:"tensor_scale"`
			RateScale   float64 `json:"rate_scale"`
		} `json:"scaling"`
		Topology struct {
			LinkGbps float64 `json:"link_gbps"`
			Switch   struct {
				ValuesPerPacket int `json:"values_per_packet"`
			} `json:"switch"`
		} `json:"topology"`
	}
	if len(r.ScenarioAsRun) == 0 || json.Unmarshal(r.ScenarioAsRun, &s) != nil {
		return sc
	}
	if s.Scaling.TensorScale > 0 {
		sc.tensor = s.Scaling.TensorScale
	}
	if s.Scaling.RateScale > 0 {
		sc.rate = s.Scaling.RateScale
	}
	sc.linkGbps, sc.vpp = s.Topology.LinkGbps, s.Topology.Switch.ValuesPerPacket
	return sc
}

func (sc runScale) scaled() bool { return sc.rate != 1 || sc.tensor != 1 }

// LineRate is the ideal aggregation throughput of one job at true scale,
// elements/s: every worker sends its gradient, values_per_packet int32
// values per INA packet behind scenario.INAHeaderBytes of headers, at the
// worker links' link_gbps, so a job aggregates at most link_gbps ×
// WireEfficiency / 32 bits elements per second however many workers it
// has (0: unknown). Jobs on disjoint hosts may each reach it at once.
func (sc runScale) LineRate() float64 {
	if sc.linkGbps <= 0 || sc.vpp <= 0 {
		return 0
	}
	return sc.linkGbps * 1e9 * scenario.WireEfficiency(sc.vpp, scenario.INAHeaderBytes) / 32
}

// timeNote is a figure's note on the run's scale, or "".
func (sc runScale) timeNote(throughput bool) string {
	if !sc.scaled() {
		return ""
	}
	s := fmt.Sprintf("scaled run (tensor_scale %g, rate_scale %g): times are the run's own virtual seconds, not converted", sc.tensor, sc.rate)
	if throughput {
		s += ";\nthroughput is converted to true scale (as run ÷ rate_scale)"
	}
	return s + " (docs/results-format.md, \"Plots\")"
}

// timeLabel is a time axis' label, with the series' bin width.
func timeLabel(bin Num) string {
	s := "virtual time (s, as run"
	if bin > 0 {
		s += "; bins of " + FormatSeconds(bin)
	}
	return s + ")"
}

// tputLabel is the throughput axis' label.
func (sc runScale) tputLabel() string {
	if sc.rate != 1 {
		return fmt.Sprintf("elements/s, true scale (as run ÷ %g)", sc.rate)
	}
	return "aggregated elements/s"
}

// binXs are the bin starts of r's time series.
func binXs(r *Results) []float64 {
	xs := make([]float64, len(r.Throughput))
	for i, p := range r.Throughput {
		xs[i] = float64(p.X)
	}
	return xs
}

// onBins is pts as values on xs (bins of width bin), scaled by k; a bin
// without a point is 0.
func onBins(pts []Point, xs []float64, bin, k float64) []float64 {
	out := make([]float64, len(xs))
	for i, p := range pts {
		j := i
		if j >= len(xs) || xs[j] != float64(p.X) {
			if bin <= 0 {
				continue
			}
			j = int(math.Round(float64(p.X) / bin))
			if j < 0 || j >= len(xs) {
				continue
			}
		}
		if y := float64(p.Y); finite(y) {
			out[j] += y * k
		}
	}
	return out
}

// jobLegend are the legend entries of r's jobs (fill: as areas or bars).
func jobLegend(r *Results, fill bool) []LegendEntry {
	out := make([]LegendEntry, len(r.Jobs))
	for i, j := range r.Jobs {
		out[i] = LegendEntry{Name: j.Name, thumb: thumb{col: jobColor(i), dashes: jobDashes(i), fill: fill}}
	}
	return out
}

func faultLegend(r *Results) []LegendEntry {
	if len(r.Faults) == 0 {
		return nil
	}
	return []LegendEntry{{Name: "fault (its kind above)", thumb: thumb{col: markColor, dashes: []vg.Length{2, 3}}}}
}

// memoryBands are r's memory per job, % of the switch, on r's bins:
// reserved (memory.series, every pool of the job summed) or in use (the
// jobs' in_use_slots). Reserved memory not attributed to a job is a grey
// band after the jobs'.
func memoryBands(r *Results, inUse bool) []band {
	xs := binXs(r)
	bin := float64(r.Bin)
	k := 100 / float64(max(r.Memory.TotalSlots, 1))
	var bands []band
	names := map[string]bool{}
	for i, j := range r.Jobs {
		names[j.Name] = true
		var vals []float64
		ss := j.InUseSlotSeconds
		if inUse {
			vals = onBins(j.InUseSlots, xs, bin, k)
		} else {
			vals = make([]float64, len(xs))
			for _, s := range r.Memory.Series {
				if s.Job == j.Name {
					for x, v := range onBins(s.Slots, xs, bin, k) {
						vals[x] += v
					}
				}
			}
			ss = j.SlotSeconds
		}
		what := "reserved"
		if inUse {
			what = "in use"
		}
		bands = append(bands, band{class: "job", name: j.Name, vals: vals, idx: i,
			title: fmt.Sprintf("%s: %s slot-s %s", j.Name, FormatSI(ss, ""), what)})
	}
	if !inUse {
		vals := make([]float64, len(xs))
		found := false
		for _, s := range r.Memory.Series {
			if !names[s.Job] {
				found = true
				for x, v := range onBins(s.Slots, xs, bin, k) {
					vals[x] += v
				}
			}
		}
		if found {
			bands = append(bands, band{class: "unattributed", name: "unattributed", title: "reserved by no job", vals: vals, idx: -1})
		}
	}
	return bands
}

// memoryPanel is r's memory (reserved or in use) as a stack per job, the
// jobs' arrivals and finishes and the faults marked; x up to xmax.
func memoryPanel(r *Results, inUse bool, title string, xmax float64) *plot.Plot {
	y := "reserved (% of slots)"
	if inUse {
		y = "in use (% of slots)"
	}
	p := newPanel(title, timeLabel(r.Bin), y)
	if r.Memory.TotalSlots <= 0 {
		p.Add(&textPlot{msg: r.Policy + " uses no switch memory"})
	} else {
		p.Add(&stackPlot{xs: binXs(r), xend: float64(r.End), bands: memoryBands(r, inUse)})
		p.Add(&eventsPlot{jobs: r.Jobs}, &marksPlot{marks: FaultMarks(r.Faults)})
	}
	niceRange(&p.X, 0, xmax)
	p.Y.Min, p.Y.Max = 0, 100
	return p
}

// throughputPanel is r's aggregation throughput at true scale as a stack
// per job, with the line rate of one job; y up to ymax (NaN: the data's).
func throughputPanel(r *Results, title string, xmax, ymax float64) *plot.Plot {
	sc := scaleOf(r)
	p := newPanel(title, timeLabel(r.Bin), sc.tputLabel())
	xs := binXs(r)
	var bands []band
	for i, j := range r.Jobs {
		bands = append(bands, band{class: "job", name: j.Name, idx: i, vals: onBins(j.Throughput, xs, float64(r.Bin), 1/sc.rate),
			title: fmt.Sprintf("%s: %s elements/s while it aggregates (as run)", j.Name, FormatSI(j.AggThroughput, ""))})
	}
	p.Add(&stackPlot{xs: xs, xend: float64(r.End), bands: bands})
	if lr := sc.LineRate(); lr > 0 {
		p.Add(&hline{class: "line-rate", name: "line-rate", y: lr, col: noteColor,
			title: fmt.Sprintf("the ideal aggregation throughput of one job: %g Gb/s links, %d values per packet", sc.linkGbps, sc.vpp),
			label: fmt.Sprintf("line rate, one job: %s (%g Gb/s, %d values/packet)", FormatSI(Num(lr), "el/s"), sc.linkGbps, sc.vpp)})
	}
	p.Add(&eventsPlot{jobs: r.Jobs}, &marksPlot{marks: FaultMarks(r.Faults)})
	niceRange(&p.X, 0, xmax)
	niceRange(&p.Y, 0, ymax)
	return p
}

func lineRateLegend(r *Results) []LegendEntry {
	sc := scaleOf(r)
	if sc.LineRate() <= 0 {
		return nil
	}
	return []LegendEntry{{Name: "line rate, one job", thumb: thumb{col: noteColor, dashes: []vg.Length{6, 3}}}}
}

// JCTChart is the empirical CDF of job completion times: of one run, with
// each job's dot in its colour; of several (one per policy), one line
// each.
func JCTChart(rs ...*Results) *Figure {
	p := newPanel("", "job completion time (s, as run)", "fraction of jobs finished")
	f := &Figure{Title: "Job completion time CDF", Rows: 1, Cols: 1, Panels: []*plot.Plot{p}}
	if len(rs) > 0 {
		f.Title += " — " + rs[0].Scenario
		f.Note = scaleOf(rs[0]).timeNote(false)
	}
	if len(rs) == 1 {
		f.Title += " (" + rs[0].Policy + ")"
	}
	for k, r := range rs {
		pts := r.JCTCDF
		if len(pts) > 0 {
			pts = append([]Point{{X: pts[0].X, Y: 0}}, pts...)
		}
		col := policyColor(r.Policy)
		p.Add(&linePlot{class: "policy", name: r.Policy, title: r.Policy, pts: pts, step: true, col: col, width: policyWidth(k, len(rs))})
		f.Legend = append(f.Legend, LegendEntry{Name: r.Policy, thumb: thumb{col: col}})
	}
	if len(rs) == 1 {
		r := rs[0]
		var fin []int
		for i, j := range r.Jobs {
			if j.Finished {
				fin = append(fin, i)
			}
		}
		slices.SortStableFunc(fin, func(a, b int) int {
			if r.Jobs[a].JCT < r.Jobs[b].JCT {
				return -1
			}
			if r.Jobs[a].JCT > r.Jobs[b].JCT {
				return 1
			}
			return 0
		})
		rank := map[int]int{}
		for k, i := range fin {
			rank[i] = k + 1
		}
		for i, j := range r.Jobs {
			name := j.Name + " (" + FormatSeconds(j.JCT) + ")"
			if !j.Finished {
				f.Legend = append(f.Legend, LegendEntry{Name: j.Name + " (unfinished)", thumb: thumb{col: jobColor(i), glyph: draw.CircleGlyph{}}})
				continue
			}
			p.Add(&pointsPlot{class: "job", name: j.Name, title: j.Name + ": JCT " + FormatSeconds(j.JCT), col: jobColor(i), glyph: draw.CircleGlyph{},
				pts: []Point{{X: j.JCT, Y: Num(float64(rank[i]) / float64(len(fin)))}}})
			f.Legend = append(f.Legend, LegendEntry{Name: name, thumb: thumb{col: jobColor(i), glyph: draw.CircleGlyph{}}})
		}
	}
	niceRange(&p.X, 0, math.NaN())
	p.Y.Min, p.Y.Max = 0, 1
	return f
}

// MemoryChart is a run's switch memory over time, a stack per job (its
// pools summed): reserved above, in use by a chunk below.
func MemoryChart(r *Results) *Figure {
	f := &Figure{Title: fmt.Sprintf("Switch memory — %s (%s), %d slots", r.Scenario, r.Policy, r.Memory.TotalSlots),
		Note: scaleOf(r).timeNote(false), W: 900, H: 640, Rows: 2, Cols: 1}
	f.Panels = []*plot.Plot{memoryPanel(r, false, "reserved (held by the job, aggregating or not)", float64(r.End)),
		memoryPanel(r, true, "in use (holding a chunk's partial or complete sum)", float64(r.End))}
	f.Legend = append(append(jobLegend(r, true), eventLegend()...), faultLegend(r)...)
	return f
}

// ThroughputChart is a run's aggregation throughput over time, a stack
// per job (the top is all jobs), with the line rate of one job.
func ThroughputChart(r *Results) *Figure {
	f := &Figure{Title: fmt.Sprintf("Aggregation throughput — %s (%s)", r.Scenario, r.Policy), Note: scaleOf(r).timeNote(true),
		Rows: 1, Cols: 1, Panels: []*plot.Plot{throughputPanel(r, "", float64(r.End), math.NaN())}}
	f.Legend = append(append(append(jobLegend(r, true), lineRateLegend(r)...), eventLegend()...), faultLegend(r)...)
	return f
}

// policyWidth is the line width of the k-th of n policies on one panel:
// the first widest, so that lines that coincide show as nested stripes.
func policyWidth(k, n int) vg.Length { return 1.5 + 0.7*vg.Length(n-1-k) }

// NamedFigure is a figure and the file it goes to.
type NamedFigure struct {
	File   string
	Figure *Figure
}

// The files of CompareFigures.
const (
	CompareJCTJobsFile    = "jct_jobs.svg"
	CompareJCTCDFFile     = "jct_cdf.svg"
	CompareIterationsFile = "iterations.svg"
	CompareMemoryFile     = "memory.svg"
	CompareTputFile       = "throughput.svg"
	ComparePSPathFile     = "ps_path.svg"
	CompareCollisionsFile = "collisions.svg"
)

// CompareFigures are the side-by-side plots of results of one scenario and
// seed, one per policy (in that order): JCT per job grouped by policy, the
// JCT CDF per policy, iteration times, switch memory (reserved and in use)
// and throughput per policy, and the PS-path fraction and collisions over
// time. what names the runs in the titles ("seed 1").
func CompareFigures(rs []*Results, what string) []NamedFigure {
	if len(rs) == 0 {
		return nil
	}
	r0 := rs[0]
	sub := " — " + r0.Scenario + ", " + what
	xmax, ymaxIt, ymaxTput := 0.0, 0.0, 0.0
	for _, r := range rs {
		xmax = math.Max(xmax, float64(r.End))
		for _, j := range r.Jobs {
			for _, it := range j.Iters {
				if d := it.Duration(); d >= 0 {
					ymaxIt = math.Max(ymaxIt, float64(d))
				}
			}
		}
		sc := scaleOf(r)
		for _, p := range r.Throughput {
			if finite(float64(p.Y)) {
				ymaxTput = math.Max(ymaxTput, float64(p.Y)/sc.rate)
			}
		}
		ymaxTput = math.Max(ymaxTput, sc.LineRate())
	}
	policies := make([]string, len(rs))
	for i, r := range rs {
		policies[i] = r.Policy
	}
	n := len(rs)
	cols := min(n, 2)
	rows := (n + cols - 1) / cols
	jobs := jobLegend(r0, true)
	var out []NamedFigure

	// JCT per job, grouped by policy.
	p := newPanel("", "policy", "job completion time (s, as run)")
	bars := &barsPlot{n: n}
	for i, j := range r0.Jobs {
		s := barSeries{class: "job", name: j.Name, col: jobColor(i), dashes: jobDashes(i)}
		for _, r := range rs {
			v := math.NaN()
			if i < len(r.Jobs) {
				v = float64(r.Jobs[i].JCT)
			}
			s.vals = append(s.vals, v)
		}
		bars.series = append(bars.series, s)
	}
	p.Add(bars)
	p.NominalX(policies...)
	p.X.Tick.Label.Font = p.Y.Tick.Label.Font
	niceRange(&p.Y, 0, p.Y.Max*1.05) // headroom above the tallest bar
	p.X.Min, p.X.Max = -0.5, float64(n)-0.5
	out = append(out, NamedFigure{CompareJCTJobsFile, &Figure{Title: "Job completion time per job" + sub, Note: scaleOf(r0).timeNote(false),
		W: 900 + 30*vg.Length(max(n-4, 0)), H: 500, Rows: 1, Cols: 1, Panels: []*plot.Plot{p}, Legend: jobs}})

	// The JCT CDF, one line per policy.
	cdf := JCTChart(rs...)
	cdf.Title += ", " + what
	out = append(out, NamedFigure{CompareJCTCDFFile, cdf})

	// Iteration times.
	var panels []*plot.Plot
	for _, r := range rs {
		p := newPanel(r.Policy, "iteration start (s, as run)", "iteration time (s)")
		for i, j := range r.Jobs {
			var pts []Point
			for _, it := range j.Iters {
				if d := it.Duration(); d >= 0 {
					pts = append(pts, Point{X: it.Start, Y: d})
				}
			}
			p.Add(&linePlot{class: "job", name: j.Name, title: fmt.Sprintf("%s: mean %s, p95 %s", j.Name, FormatSeconds(j.IterMean), FormatSeconds(j.IterP95)),
				pts: pts, col: jobColor(i), dashes: jobDashes(i), dots: true, width: 1.2})
		}
		niceRange(&p.X, 0, xmax)
		niceRange(&p.Y, 0, ymaxIt)
		panels = append(panels, p)
	}
	lines := make([]LegendEntry, len(jobs))
	for i, e := range jobs {
		lines[i] = LegendEntry{Name: e.Name, thumb: thumb{col: jobColor(i), dashes: jobDashes(i)}}
	}
	out = append(out, NamedFigure{CompareIterationsFile, &Figure{Title: "Iteration times" + sub, Note: scaleOf(r0).timeNote(false),
		W: 1100, H: 80 + 230*vg.Length(rows), Rows: rows, Cols: cols, Panels: panels, Legend: lines}})

	// Switch memory: reserved and in use, per policy.
	panels = nil
	for _, r := range rs {
		panels = append(panels, memoryPanel(r, false, r.Policy+": reserved", xmax), memoryPanel(r, true, r.Policy+": in use", xmax))
	}
	slots := 0
	for _, r := range rs {
		slots = max(slots, r.Memory.TotalSlots)
	}
	out = append(out, NamedFigure{CompareMemoryFile, &Figure{Title: fmt.Sprintf("Switch memory, %d slots%s", slots, sub),
		Note: scaleOf(r0).timeNote(false), W: 1150, H: 80 + 200*vg.Length(n), Rows: n, Cols: 2, Panels: panels,
		Legend: append(append(slices.Clone(jobs), eventLegend()...), faultLegend(r0)...)}})

	// Throughput, per policy.
	panels = nil
	for _, r := range rs {
		panels = append(panels, throughputPanel(r, r.Policy, xmax, ymaxTput))
	}
	out = append(out, NamedFigure{CompareTputFile, &Figure{Title: "Aggregation throughput" + sub, Note: scaleOf(r0).timeNote(true),
		W: 1150, H: 80 + 230*vg.Length(rows), Rows: rows, Cols: cols, Panels: panels,
		Legend: append(append(append(slices.Clone(jobs), lineRateLegend(r0)...), eventLegend()...), faultLegend(r0)...)}})

	// PS-path fraction and collisions over time, one line per policy.
	ps := newPanel("", timeLabel(r0.Bin), "chunks completed at the PS (% of the bin's chunks)")
	coll := newPanel("", timeLabel(r0.Bin), "collisions per second (as run)")
	var psLegend, collLegend []LegendEntry
	var noPS []string
	for k, r := range rs {
		col := policyColor(r.Policy)
		w := policyWidth(k, len(rs))
		collLegend = append(collLegend, LegendEntry{Name: r.Policy, thumb: thumb{col: col}})
		coll.Add(&linePlot{class: "policy", name: r.Policy, title: fmt.Sprintf("%s: %d collisions", r.Policy, r.Summary.Collisions),
			pts: r.CollisionRate, step: true, xend: float64(r.End), col: col, width: w})
		if len(r.PSPathSeries) == 0 {
			noPS = append(noPS, r.Policy)
			continue
		}
		pts := make([]Point, len(r.PSPathSeries))
		for i, pt := range r.PSPathSeries {
			pts[i] = Point{X: pt.X, Y: pt.Y * 100}
		}
		ps.Add(&linePlot{class: "policy", name: r.Policy, title: r.Policy + ": " + FormatPercent(r.Summary.PSFraction) + " of all chunks",
			pts: pts, step: true, xend: float64(r.End), col: col, width: w})
		psLegend = append(psLegend, LegendEntry{Name: r.Policy, thumb: thumb{col: col}})
	}
	niceRange(&ps.X, 0, xmax)
	ps.Y.Min, ps.Y.Max = 0, 100
	niceRange(&coll.X, 0, xmax)
	niceRange(&coll.Y, 0, math.NaN())
	note := "each all-reduce's chunks spread evenly over it; a gap: no chunk completed"
	if len(noPS) > 0 {
		note += "; no PS path: " + strings.Join(noPS, ", ")
	}
	out = append(out, NamedFigure{ComparePSPathFile, &Figure{Title: "PS-path fraction over time" + sub, Note: note,
		Rows: 1, Cols: 1, Panels: []*plot.Plot{ps}, Legend: psLegend}})
	out = append(out, NamedFigure{CompareCollisionsFile, &Figure{Title: "Collisions over time" + sub,
		Note: "packets that found no aggregator, per second of the run", Rows: 1, Cols: 1, Panels: []*plot.Plot{coll}, Legend: collLegend}})
	return out
}
