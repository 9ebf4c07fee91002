package report

import (
	"encoding/csv"
	"fmt"
	"io"
	"os"
	"strconv"
)

// The files of `inabox compare --out DIR` besides the figures
// (CompareFigures).
const (
	CompareJSONFile    = "compare.json"
	CompareCSVFile     = "compare.csv"
	CompareJobsCSVFile = "compare_jobs.csv"
	RepeatedJCTFile    = "jct.svg"
)

// WriteCompareOutputs writes into dir (created if needed) the comparison
// c of the results rs (one per policy, c's columns): compare.json (as
// `compare --json` prints it), compare.csv (one row per metric and
// policy), compare_jobs.csv (every policy's jobs.csv rows, after a policy
// column) and the figures of CompareFigures. It returns the paths
// written.
func WriteCompareOutputs(dir string, c *Comparison, rs []*Results) ([]string, error) {
	files := []namedWriter{
		{CompareJSONFile, c.WriteJSON},
		{CompareCSVFile, c.WriteCSV},
		{CompareJobsCSVFile, func(w io.Writer) error { return writeCompareJobsCSV(w, rs) }},
	}
	for _, f := range CompareFigures(rs, "seed "+strconv.FormatUint(c.Seed, 10)) {
		files = append(files, namedWriter{f.File, f.Figure.WriteSVG})
	}
	return writeAll(dir, files)
}

// WriteRepeatedOutputs writes into dir (created if needed) the repeated
// comparison rp: compare.json (as `compare --seeds N --json` prints it),
// compare.csv (one row per metric and policy: mean, interval, samples,
// gain over ATP), jct.svg (rp.JCTBars) and the figures of CompareFigures
// for first, the runs of rp's first seed that did not fail. It returns the
// paths written.
func WriteRepeatedOutputs(dir string, rp *Repeated, first []*Results) ([]string, error) {
	files := []namedWriter{
		{CompareJSONFile, rp.WriteJSON},
		{CompareCSVFile, rp.WriteCSV},
		{RepeatedJCTFile, rp.JCTBars().WriteSVG},
	}
	if len(rp.Seeds) > 0 {
		what := fmt.Sprintf("seed %d (the first of %d)", rp.Seeds[0], len(rp.Seeds))
		for _, f := range CompareFigures(first, what) {
			files = append(files, namedWriter{f.File, f.Figure.WriteSVG})
		}
	}
	return writeAll(dir, files)
}

type namedWriter struct {
	name  string
	write func(io.Writer) error
}

func writeAll(dir string, files []namedWriter) ([]string, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	var written []string
	for _, f := range files {
		p, err := writeFile(dir, f.name, f.write)
		if err != nil {
			return written, err
		}
		written = append(written, p)
	}
	return written, nil
}

// WriteCSV writes the comparison's rows, one per metric and policy:
// metric, label, better, policy, value, gain_vs_atp, best_baseline,
// gain_vs_best_baseline (undefined: empty).
func (c *Comparison) WriteCSV(w io.Writer) error {
	cw := csv.NewWriter(w)
	cw.Write([]string{"metric", "label", "better", "policy", "value", "gain_vs_" + c.Reference, "best_baseline", "gain_vs_best_baseline"})
	for _, row := range c.Rows {
		for _, p := range c.Policies {
			ref, best := "", ""
			if row.VsRef != nil {
				ref = csvNum(row.VsRef[p])
			}
			if row.VsBest != nil {
				best = csvNum(row.VsBest[p])
			}
			cw.Write([]string{row.Metric, row.Label, row.Better, p, csvNum(row.Values[p]), ref, row.BestBaseline, best})
		}
	}
	cw.Flush()
	return cw.Error()
}

// WriteCSV writes the repeated comparison's rows, one per metric and
// policy: metric, label, better, policy, mean, ci95, n, the gain over ATP's
// mean and ci95 (undefined: empty); then one row per job and policy, its
// JCT (metric jct_s, label the job's name).
func (rp *Repeated) WriteCSV(w io.Writer) error {
	cw := csv.NewWriter(w)
	ref := "gain_vs_" + rp.Reference
	cw.Write([]string{"metric", "label", "better", "policy", "mean", "ci95", "n", ref + "_mean", ref + "_ci95"})
	for _, row := range rp.Rows {
		for _, p := range rp.Policies {
			e := row.Values[p]
			gm, gc := "", ""
			if g, ok := row.VsRef[p]; ok {
				gm, gc = csvNum(g.Mean), csvNum(g.CI95)
			}
			cw.Write([]string{row.Metric, row.Label, row.Better, p, csvNum(e.Mean), csvNum(e.CI95), itoa(e.N), gm, gc})
		}
	}
	for _, j := range rp.Jobs {
		for _, p := range rp.Policies {
			e := j.JCT[p]
			cw.Write([]string{"jct_s", j.Job, "lower", p, csvNum(e.Mean), csvNum(e.CI95), itoa(e.N), "", ""})
		}
	}
	cw.Flush()
	return cw.Error()
}

// writeCompareJobsCSV writes every result's jobs.csv rows after a policy
// column.
func writeCompareJobsCSV(w io.Writer, rs []*Results) error {
	cw := csv.NewWriter(w)
	cw.Write(append([]string{"policy"}, jobsCSVHeader...))
	for _, r := range rs {
		for _, row := range jobsCSVRows(r) {
			cw.Write(append([]string{r.Policy}, row...))
		}
	}
	cw.Flush()
	return cw.Error()
}
