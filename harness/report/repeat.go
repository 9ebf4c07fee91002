package report

import (
	"fmt"
	"io"
	"math"
	"strings"
	"text/tabwriter"
	"unicode/utf8"

	"github.com/montanaflynn/stats"
)

// Estimate is a metric's mean over repeated runs with its 95 % confidence
// interval (Student's t on N−1 degrees of freedom: mean ± CI95); CI95 is
// NaN with one sample. Samples are the runs' values in seed order.
type Estimate struct {
	Mean    Num   `json:"mean"`
	CI95    Num   `json:"ci95"`
	N       int   `json:"n"`
	Samples []Num `json:"samples"`
}

// estimate summarizes the defined samples of xs.
func estimate(xs []Num) Estimate {
	e := Estimate{Samples: xs, Mean: Num(math.NaN()), CI95: Num(math.NaN())}
	var d []float64
	for _, x := range xs {
		if defined(x) {
			d = append(d, float64(x))
		}
	}
	e.N = len(d)
	if e.N == 0 {
		return e
	}
	m, _ := stats.Mean(d)
	e.Mean = Num(m)
	if e.N > 1 {
		sd, _ := stats.StandardDeviationSample(d)
		// Equal samples give a rounding error's spread, not an interval.
		if sd <= 1e-9*math.Abs(m) {
			sd = 0
		}
		e.CI95 = Num(TQuantile975(e.N-1) * sd / math.Sqrt(float64(e.N)))
	}
	return e
}

// t975 are Student's t 0.975 quantiles for 1…30 degrees of freedom.
var t975 = [...]float64{12.706, 4.303, 3.182, 2.776, 2.571, 2.447, 2.365, 2.306, 2.262, 2.228,
	2.201, 2.179, 2.160, 2.145, 2.131, 2.120, 2.110, 2.101, 2.093, 2.086,
	2.080, 2.074, 2.069, 2.064, 2.060, 2.056, 2.052, 2.048, 2.045, 2.042}

// TQuantile975 is Student's t 0.975 quantile for df degrees of freedom
// (the half-width factor of a two-sided 95 % interval): tabulated to 30,
// then interpolated in 1/df towards the normal's 1.960 (within 0.001).
func TQuantile975(df int) float64 {
	switch {
	case df < 1:
		return math.NaN()
	case df <= len(t975):
		return t975[df-1]
	}
	const z = 1.959964
	return z + (t975[len(t975)-1]-z)*float64(len(t975))/float64(df)
}

// Repeated is one scenario run under several policies for several seeds:
// every metric's estimate per policy, and every gain computed per seed
// (paired: the same seed draws the same cluster and compute times for
// every policy) and then estimated.
type Repeated struct {
	Scenario  string        `json:"scenario"`
	Seeds     []uint64      `json:"seeds"`
	Policies  []string      `json:"policies"`
	Reference string        `json:"reference"`
	Rows      []RepeatedRow `json:"rows"`
	// Jobs is each job's JCT per policy (jobs in the order of the first
	// run that has them; a generated cluster may differ by seed: then a job
	// name stands for the job at that position of each seed's cluster).
	Jobs []JobJCT `json:"jobs"`
	// Failed lists the runs that failed, "policy seed: error"; their
	// samples are missing (NaN).
	Failed []string `json:"failed,omitempty"`
	format map[string]func(Num) string
}

// RepeatedRow is one metric across policies and seeds.
type RepeatedRow struct {
	Metric string              `json:"metric"`
	Label  string              `json:"label"`
	Better string              `json:"better,omitempty"`
	Values map[string]Estimate `json:"values"`
	// VsRef is each policy's gain over the reference policy, per seed.
	VsRef map[string]Estimate `json:"gain_vs_atp,omitempty"`
}

// JobJCT is one job's JCT per policy over the seeds.
type JobJCT struct {
	Job string              `json:"job"`
	JCT map[string]Estimate `json:"jct_s"`
}

// CompareSeeds builds the repeated comparison of runs[i][p], the result of
// seed seeds[i] under policies[p] (nil: that run failed, named in failed).
func CompareSeeds(scenario string, seeds []uint64, policies []string, runs [][]*Results, failed []string) *Repeated {
	rp := &Repeated{Scenario: scenario, Seeds: seeds, Policies: policies, Reference: ReferencePolicy, Failed: failed,
		format: map[string]func(Num) string{}}
	for _, m := range CompareMetrics {
		row := RepeatedRow{Metric: m.Key, Label: m.Label, Better: m.Better, Values: map[string]Estimate{}}
		rp.format[m.Key] = m.Format
		refIdx := -1
		for p, name := range policies {
			if name == rp.Reference {
				refIdx = p
			}
		}
		if m.Better != "" && refIdx >= 0 {
			row.VsRef = map[string]Estimate{}
		}
		for p, name := range policies {
			xs := make([]Num, len(seeds))
			gs := make([]Num, len(seeds))
			for i := range seeds {
				xs[i], gs[i] = Num(math.NaN()), Num(math.NaN())
				if r := runs[i][p]; r != nil {
					xs[i] = m.Get(r)
					if row.VsRef != nil && runs[i][refIdx] != nil {
						v, ref := xs[i], m.Get(runs[i][refIdx])
						if defined(v) && defined(ref) && v != 0 && ref != 0 {
							if m.Better == "higher" {
								gs[i] = ratio(float64(v), float64(ref))
							} else {
								gs[i] = ratio(float64(ref), float64(v))
							}
						}
					}
				}
			}
			row.Values[name] = estimate(xs)
			if row.VsRef != nil {
				row.VsRef[name] = estimate(gs)
			}
		}
		rp.Rows = append(rp.Rows, row)
	}
	var names []string
	for i := range seeds {
		for _, r := range runs[i] {
			if r != nil && len(names) == 0 {
				for _, j := range r.Jobs {
					names = append(names, j.Name)
				}
			}
		}
	}
	for k, name := range names {
		jj := JobJCT{Job: name, JCT: map[string]Estimate{}}
		for p, pol := range policies {
			xs := make([]Num, len(seeds))
			for i := range seeds {
				xs[i] = Num(math.NaN())
				if r := runs[i][p]; r != nil && k < len(r.Jobs) {
					xs[i] = r.Jobs[k].JCT
				}
			}
			jj.JCT[pol] = estimate(xs)
		}
		rp.Jobs = append(rp.Jobs, jj)
	}
	return rp
}

// WriteJSON writes the repeated comparison as indented JSON.
func (rp *Repeated) WriteJSON(w io.Writer) error { return writeJSON(w, rp) }

// WriteText writes one table: per metric each policy's mean ± the 95 %
// confidence half-width, then the paired gain over ATP the same way.
func (rp *Repeated) WriteText(w io.Writer) error {
	seeds := make([]string, len(rp.Seeds))
	for i, s := range rp.Seeds {
		seeds[i] = fmt.Sprint(s)
	}
	fmt.Fprintf(w, "scenario %s, %d seeds (%s): mean ± 95 %% confidence half-width (Student's t); gains are per seed (paired), >1× is better\n\n",
		rp.Scenario, len(rp.Seeds), strings.Join(seeds, " "))
	width := len("metric")
	labels := map[string]string{}
	for _, row := range rp.Rows {
		l := arrowLabel(row.Label, row.Better)
		labels[row.Metric] = l
		width = max(width, utf8.RuneCountInString(l))
	}
	pad := func(s string) string { return s + strings.Repeat(" ", max(width-utf8.RuneCountInString(s), 0)) }
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprint(tw, pad("metric")+"\t")
	for _, p := range rp.Policies {
		fmt.Fprint(tw, p+"\t")
	}
	fmt.Fprintln(tw)
	cell := func(e Estimate, f func(Num) string) string {
		if e.N == 0 {
			return "n/a"
		}
		switch {
		case !defined(e.CI95):
			return f(e.Mean)
		case e.CI95 == 0:
			return f(e.Mean) + " ± 0"
		}
		return f(e.Mean) + " ± " + f(e.CI95)
	}
	gain := func(n Num) string { return fmt.Sprintf("%.2f×", float64(n)) }
	for _, row := range rp.Rows {
		fmt.Fprint(tw, pad(labels[row.Metric])+"\t")
		for _, p := range rp.Policies {
			fmt.Fprint(tw, cell(row.Values[p], rp.format[row.Metric])+"\t")
		}
		fmt.Fprintln(tw)
		if row.VsRef != nil {
			fmt.Fprint(tw, pad("  vs "+rp.Reference)+"\t")
			for _, p := range rp.Policies {
				e := row.VsRef[p]
				if e.N == 0 {
					fmt.Fprint(tw, "n/a\t")
					continue
				}
				fmt.Fprint(tw, cell(e, gain)+"\t")
			}
			fmt.Fprintln(tw)
		}
	}
	if len(rp.Jobs) > 0 {
		fmt.Fprintln(tw, "\t")
		fmt.Fprint(tw, pad("JCT per job ↓")+"\t")
		for range rp.Policies {
			fmt.Fprint(tw, "\t")
		}
		fmt.Fprintln(tw)
		for _, j := range rp.Jobs {
			fmt.Fprint(tw, pad("  "+j.Job)+"\t")
			for _, p := range rp.Policies {
				fmt.Fprint(tw, cell(j.JCT[p], FormatSeconds)+"\t")
			}
			fmt.Fprintln(tw)
		}
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	for _, f := range rp.Failed {
		fmt.Fprintf(w, "FAILED (missing sample): %s\n", f)
	}
	_, err := fmt.Fprintln(w, "\n↓ lower is better, ↑ higher is better")
	return err
}
