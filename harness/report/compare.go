package report

import (
	"encoding/json"
	"fmt"
	"io"
	"math"
	"strings"
	"text/tabwriter"
	"unicode/utf8"

	"github.com/inabox/inabox/harness/testbed"
)

// Metric is one row of a comparison.
type Metric struct {
	Key   string // JSON name, e.g. "jct_mean_s"
	Label string // table label
	// Better is "lower", "higher", or "" when neither is better (no ratios).
	Better string
	Get    func(*Results) Num
	Format func(Num) string
}

// CompareMetrics are the rows of `inabox compare`.
var CompareMetrics = []Metric{
	{"jct_mean_s", "JCT mean", "lower", func(r *Results) Num { return r.Summary.JCTMean }, FormatSeconds},
	{"jct_p95_s", "JCT p95", "lower", func(r *Results) Num { return r.Summary.JCTP95 }, FormatSeconds},
	{"makespan_s", "makespan", "lower", func(r *Results) Num { return r.Summary.Makespan }, FormatSeconds},
	{"iter_time_mean_s", "iteration time (mean of jobs)", "lower", func(r *Results) Num { return r.Summary.IterMean }, FormatSeconds},
	{"agg_throughput_eps", "aggregation throughput (el/s)", "higher", func(r *Results) Num { return r.Summary.AggThroughput }, func(n Num) string { return FormatSI(n, "") }},
	// Memory reserved (held by a job, aggregating or not) is a cost: less
	// for the same work is better.
	{"mem_util_mean", "switch memory reserved, mean", "lower", func(r *Results) Num { return r.Summary.MemUtilMean }, FormatPercent},
	{"mem_util_peak", "switch memory reserved, peak", "", func(r *Results) Num { return r.Summary.MemUtilPeak }, FormatPercent},
	// In use: holding a chunk's partial or complete sum; the rest of what
	// is reserved is idle.
	{"mem_in_use_mean", "switch memory in use, mean", "", func(r *Results) Num { return r.Summary.MemInUseMean }, FormatPercent},
	{"mem_in_use_share", "reserved memory in use", "higher", func(r *Results) Num { return r.Summary.MemInUseShare }, FormatPercent},
	{"useful_aggs_per_slot_s", "useful aggregations / reserved slot-s", "higher", func(r *Results) Num { return r.Summary.UsefulPerSlotSecond }, func(n Num) string { return FormatSI(n, "") }},
	{"collisions", "collisions", "lower", func(r *Results) Num { return Num(r.Summary.Collisions) }, func(n Num) string { return FormatSI(n, "") }},
	{"ps_path_fraction", "PS-path fraction", "lower", func(r *Results) Num { return r.Summary.PSFraction }, FormatPercent},
	{"retransmissions", "retransmissions", "lower", func(r *Results) Num { return Num(r.Summary.Retransmissions) }, func(n Num) string { return FormatSI(n, "") }},
	{"jobs_finished", "jobs finished", "higher", func(r *Results) Num { return Num(r.Summary.JobsFinished) }, func(n Num) string { return fmt.Sprint(float64(n)) }},
}

// Comparison is one scenario run under several policies.
type Comparison struct {
	Scenario string   `json:"scenario"`
	Seed     uint64   `json:"seed"`
	Policies []string `json:"policies"`
	// Reference is the policy of the "vs" ratios ("atp"); Baselines are the
	// policies the best baseline is chosen from.
	Reference string       `json:"reference"`
	Baselines []string     `json:"baselines"`
	Rows      []CompareRow `json:"rows"`
	// Costs are the host costs of the policies that model any.
	Costs map[string]*HostCosts `json:"host_costs,omitempty"`
	// PSLayout is the runs' Results.PSLayout (absent: dedicated).
	PSLayout string `json:"ps_layout,omitempty"`
}

// CompareRow is one metric across policies. Gains are oriented so that
// > 1 is better: value/reference when higher is better, reference/value when
// lower is better; null when undefined (a zero or missing reference).
type CompareRow struct {
	Metric string         `json:"metric"`
	Label  string         `json:"label"`
	Better string         `json:"better,omitempty"`
	Values map[string]Num `json:"values"`
	// VsRef is each policy's gain over the reference policy (ATP).
	VsRef map[string]Num `json:"gain_vs_atp,omitempty"`
	// BestBaseline is the baseline with the best value of this metric;
	// VsBest is each policy's gain over it.
	BestBaseline string         `json:"best_baseline,omitempty"`
	VsBest       map[string]Num `json:"gain_vs_best_baseline,omitempty"`
	format       func(Num) string
}

// ReferencePolicy is the policy comparisons are relative to: the
// registry's reference (testbed.Reference).
var ReferencePolicy = testbed.Reference()

// Compare builds the comparison of results of one scenario, one per policy,
// in the given order (columns).
func Compare(results []*Results) *Comparison {
	c := &Comparison{Reference: ReferencePolicy, Baselines: testbed.Baselines()}
	byPolicy := map[string]*Results{}
	for _, r := range results {
		c.Policies = append(c.Policies, r.Policy)
		byPolicy[r.Policy] = r
		if c.Scenario == "" {
			c.Scenario, c.Seed, c.PSLayout = r.Scenario, r.Seed, r.PSLayout
		}
		if r.Costs != nil {
			if c.Costs == nil {
				c.Costs = map[string]*HostCosts{}
			}
			c.Costs[r.Policy] = r.Costs
		}
	}
	for _, m := range CompareMetrics {
		row := CompareRow{Metric: m.Key, Label: m.Label, Better: m.Better, Values: map[string]Num{}, format: m.Format}
		for _, r := range results {
			row.Values[r.Policy] = m.Get(r)
		}
		if m.Better != "" {
			gain := func(v, ref Num) Num {
				if !defined(v) || !defined(ref) || v == 0 || ref == 0 {
					return Num(math.NaN()) // n/a: no ratio with a zero side
				}
				if m.Better == "higher" {
					return ratio(float64(v), float64(ref))
				}
				return ratio(float64(ref), float64(v))
			}
			if ref, ok := byPolicy[c.Reference]; ok {
				row.VsRef = map[string]Num{}
				for _, r := range results {
					row.VsRef[r.Policy] = gain(row.Values[r.Policy], m.Get(ref))
				}
			}
			for _, b := range c.Baselines {
				v, ok := row.Values[b]
				if !ok || !defined(v) {
					continue
				}
				if best := row.BestBaseline; best == "" || (m.Better == "higher" && v > row.Values[best]) || (m.Better == "lower" && v < row.Values[best]) {
					row.BestBaseline = b
				}
			}
			if row.BestBaseline != "" {
				row.VsBest = map[string]Num{}
				for _, r := range results {
					row.VsBest[r.Policy] = gain(row.Values[r.Policy], row.Values[row.BestBaseline])
				}
			}
		}
		c.Rows = append(c.Rows, row)
	}
	return c
}

func defined(n Num) bool { return !math.IsNaN(float64(n)) && !math.IsInf(float64(n), 0) }

// WriteJSON writes the comparison as indented JSON.
func (c *Comparison) WriteJSON(w io.Writer) error { return writeJSON(w, c) }

// writeJSON writes v as indented JSON and a newline.
func writeJSON(w io.Writer, v any) error {
	b, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		return err
	}
	_, err = w.Write(append(b, '\n'))
	return err
}

// arrowLabel is a metric's label with the arrow of its better direction.
func arrowLabel(label, better string) string {
	switch better {
	case "lower":
		return label + " ↓"
	case "higher":
		return label + " ↑"
	}
	return label
}

// WriteText writes one table: per metric a row of values, then (for
// metrics with a better direction) the gain over ATP and over the best
// baseline; gains > 1 are better.
func (c *Comparison) WriteText(w io.Writer) error {
	fmt.Fprintf(w, "scenario %s, seed %d: gains are oriented so that >1× is better\n", c.Scenario, c.Seed)
	fmt.Fprintf(w, "host costs (true scale, docs/costs.md): %s\n", c.costsLine())
	if c.PSLayout != "" {
		fmt.Fprintf(w, "parameter servers: %s\n", c.PSLayout)
	}
	fmt.Fprintln(w)
	// Labels are padded to one width so that they read left-aligned in a
	// right-aligned table.
	labels := map[string]string{}
	width := len("metric")
	for _, row := range c.Rows {
		l := arrowLabel(row.Label, row.Better)
		labels[row.Metric] = l
		width = max(width, utf8.RuneCountInString(l), utf8.RuneCountInString("  vs best baseline ("+row.BestBaseline+")"))
	}
	pad := func(s string) string { return s + strings.Repeat(" ", width-utf8.RuneCountInString(s)) }
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprint(tw, pad("metric")+"\t")
	for _, p := range c.Policies {
		fmt.Fprint(tw, p+"\t")
	}
	fmt.Fprintln(tw)
	gainCell := func(g Num) string {
		if !defined(g) {
			return "n/a"
		}
		return fmt.Sprintf("%.2f×", float64(g))
	}
	for _, row := range c.Rows {
		fmt.Fprint(tw, pad(labels[row.Metric])+"\t")
		for _, p := range c.Policies {
			fmt.Fprint(tw, row.format(row.Values[p])+"\t")
		}
		fmt.Fprintln(tw)
		if row.VsRef != nil {
			fmt.Fprint(tw, pad("  vs "+c.Reference)+"\t")
			for _, p := range c.Policies {
				fmt.Fprint(tw, gainCell(row.VsRef[p])+"\t")
			}
			fmt.Fprintln(tw)
		}
		if row.VsBest != nil {
			fmt.Fprint(tw, pad("  vs best baseline ("+row.BestBaseline+")")+"\t")
			for _, p := range c.Policies {
				fmt.Fprint(tw, gainCell(row.VsBest[p])+"\t")
			}
			fmt.Fprintln(tw)
		}
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	_, err := fmt.Fprintf(w, "\n↓ lower is better, ↑ higher is better; baselines: %s\n", strings.Join(c.Baselines, ", "))
	return err
}

// costsLine lists the policies by the host costs they model.
func (c *Comparison) costsLine() string {
	var groups []string
	byText := map[string][]string{}
	for _, p := range c.Policies {
		t := c.Costs[p].String()
		if _, ok := byText[t]; !ok {
			groups = append(groups, t)
		}
		byText[t] = append(byText[t], p)
	}
	if len(groups) == 1 {
		return groups[0] + " (every policy)"
	}
	var parts []string
	for _, t := range groups {
		parts = append(parts, strings.Join(byText[t], ", ")+": "+t)
	}
	return strings.Join(parts, "; ")
}
