package report

import (
	"bytes"
	"encoding/csv"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"text/tabwriter"

	"github.com/inabox/inabox/harness/testbed"
)

// WriteResultsJSON writes r as indented JSON. Keys come in struct order and
// floats with 12 significant digits (see Num), so the same run gives the
// same bytes.
func WriteResultsJSON(w io.Writer, r *Results) error {
	b, err := json.MarshalIndent(r, "", "  ")
	if err != nil {
		return err
	}
	_, err = w.Write(append(b, '\n'))
	return err
}

// WriteJobsCSV writes one row per job.
func WriteJobsCSV(w io.Writer, r *Results) error {
	cw := csv.NewWriter(w)
	cw.Write(jobsCSVHeader)
	for _, row := range jobsCSVRows(r) {
		cw.Write(row)
	}
	cw.Flush()
	return cw.Error()
}

// jobsCSVHeader are the columns of jobs.csv.
var jobsCSVHeader = []string{"name", "model", "workers", "arrival_s", "finished", "finish_s", "jct_s", "iterations",
	"iter_time_mean_s", "iter_time_p50_s", "iter_time_p95_s", "iter_time_p99_s", "comm_time_s", "elements",
	"agg_throughput_eps", "useful_aggs", "occupied_slot_s", "useful_aggs_per_slot_s", "collisions",
	"switch_chunks", "ps_chunks", "ps_path_fraction", "retransmissions"}

// jobsCSVRows are r's rows of jobs.csv.
func jobsCSVRows(r *Results) [][]string {
	var out [][]string
	for _, j := range r.Jobs {
		out = append(out, []string{j.Name, j.Model, itoa(j.Workers), csvNum(j.Arrival), strconv.FormatBool(j.Finished), csvNum(j.Finish),
			csvNum(j.JCT), itoa(j.Iterations), csvNum(j.IterMean), csvNum(j.IterP50), csvNum(j.IterP95), csvNum(j.IterP99),
			csvNum(j.CommTime), i64(j.Elements), csvNum(j.AggThroughput), i64(j.Aggregations), csvNum(j.SlotSeconds),
			csvNum(j.UsefulPerSlotSecond), i64(j.Collisions), i64(j.SwitchChunks), i64(j.PSChunks), csvNum(j.PSFraction),
			i64(j.Retransmissions)})
	}
	return out
}

// WriteIterationsCSV writes one row per iteration of job j; missing times
// are empty.
func WriteIterationsCSV(w io.Writer, j JobResult) error {
	cw := csv.NewWriter(w)
	cw.Write([]string{"iteration", "start_s", "allreduce_start_s", "allreduce_end_s", "end_s", "iteration_s", "compute_s",
		"allreduce_s", "bytes", "elements", "agg_throughput_eps"})
	opt := func(n Num) string {
		if n < 0 {
			return ""
		}
		return csvNum(n)
	}
	for _, it := range j.Iters {
		compute := Num(-1)
		if it.Start >= 0 && it.AllReduceStart >= 0 {
			compute = it.AllReduceStart - it.Start
		}
		tput := ""
		if ct := it.CommTime(); ct > 0 {
			tput = csvNum(Num(float64(it.Elements) / float64(ct)))
		}
		cw.Write([]string{itoa(it.Iteration), opt(it.Start), opt(it.AllReduceStart), opt(it.AllReduceEnd), opt(it.End),
			opt(it.Duration()), opt(compute), opt(it.CommTime()), i64(it.Bytes), i64(it.Elements), tput})
	}
	cw.Flush()
	return cw.Error()
}

var unsafeName = regexp.MustCompile(`[^A-Za-z0-9_.-]`)

// OutputFiles are the names WriteOutputs uses; per-job iteration logs are
// JobCSVPrefix + job name + ".csv".
const (
	ResultsFile    = "results.json"
	JobsCSVFile    = "jobs.csv"
	JobCSVPrefix   = "job-"
	JCTPlotFile    = "jct_cdf.svg"
	MemoryPlotFile = "memory.svg"
	TputPlotFile   = "throughput.svg"
)

// WriteOutputs writes into dir (created if needed): results.json, jobs.csv,
// job-<name>.csv per job, and the plots jct_cdf.svg, memory.svg and
// throughput.svg. It returns the paths written.
func WriteOutputs(dir string, r *Results) ([]string, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	var written []string
	put := func(name string, f func(io.Writer) error) error {
		p, err := writeFile(dir, name, f)
		if err == nil {
			written = append(written, p)
		}
		return err
	}
	steps := []struct {
		name string
		f    func(io.Writer) error
	}{
		{ResultsFile, func(w io.Writer) error { return WriteResultsJSON(w, r) }},
		{JobsCSVFile, func(w io.Writer) error { return WriteJobsCSV(w, r) }},
	}
	for _, j := range r.Jobs {
		steps = append(steps, struct {
			name string
			f    func(io.Writer) error
		}{JobCSVPrefix + unsafeName.ReplaceAllString(j.Name, "_") + ".csv", func(w io.Writer) error { return WriteIterationsCSV(w, j) }})
	}
	steps = append(steps, []struct {
		name string
		f    func(io.Writer) error
	}{
		{JCTPlotFile, JCTChart(r).WriteSVG},
		{MemoryPlotFile, MemoryChart(r).WriteSVG},
		{TputPlotFile, ThroughputChart(r).WriteSVG},
	}...)
	for _, s := range steps {
		if err := put(s.name, s.f); err != nil {
			return written, err
		}
	}
	return written, nil
}

// writeFile writes the bytes of f into dir/name (whole, or not at all if
// f fails) and returns its path.
func writeFile(dir, name string, f func(io.Writer) error) (string, error) {
	var b bytes.Buffer
	if err := f(&b); err != nil {
		return "", fmt.Errorf("%s: %w", name, err)
	}
	p := filepath.Join(dir, name)
	return p, os.WriteFile(p, b.Bytes(), 0o644)
}

// PrintSummary writes the run's summary: one row per job, then the totals.
func (r *Results) PrintSummary(w io.Writer) {
	fmt.Fprintf(w, "scenario %s, policy %s, seed %d: %d/%d jobs finished, virtual time %s\n\n",
		r.Scenario, r.Policy, r.Seed, r.Summary.JobsFinished, r.Summary.Jobs, FormatSeconds(r.End))
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "job\tmodel\tworkers\tarrival\tJCT\titers\titer mean\titer p95\tagg tput (el/s)\tslot-s\tuseful/slot-s\tcollisions\tPS path\tretx\t")
	for _, j := range r.Jobs {
		jct := FormatSeconds(j.JCT)
		if !j.Finished {
			jct = "≥" + jct
		}
		fmt.Fprintf(tw, "%s\t%s\t%d\t%s\t%s\t%d\t%s\t%s\t%s\t%s\t%s\t%d\t%s\t%d\t\n", j.Name, j.Model, j.Workers,
			FormatSeconds(j.Arrival), jct, j.Iterations, FormatSeconds(j.IterMean), FormatSeconds(j.IterP95),
			FormatSI(j.AggThroughput, ""), FormatSI(j.SlotSeconds, ""), FormatSI(j.UsefulPerSlotSecond, ""),
			j.Collisions, FormatPercent(j.PSFraction), j.Retransmissions)
	}
	tw.Flush()
	s := r.Summary
	fmt.Fprintln(w)
	tw = tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	for _, kv := range [][2]string{
		{"makespan", FormatSeconds(s.Makespan)},
		{"JCT mean / p50 / p95 / max", FormatSeconds(s.JCTMean) + " / " + FormatSeconds(s.JCTP50) + " / " + FormatSeconds(s.JCTP95) + " / " + FormatSeconds(s.JCTMax)},
		{"iteration time (mean of jobs)", FormatSeconds(s.IterMean)},
		{"aggregation throughput", FormatSI(s.AggThroughput, "elements/s") + " (while any all-reduce runs)"},
		{"switch memory reserved", memReserved(r)},
		{"useful aggregations / reserved slot-s", FormatSI(s.UsefulPerSlotSecond, "")},
		{"collisions", i64(s.Collisions)},
		{"PS-path fraction", psPath(s)},
		{"retransmissions", i64(s.Retransmissions)},
	} {
		fmt.Fprintf(tw, "%s\t%s\n", kv[0], kv[1])
	}
	if d := s.Drops; d.Total() > 0 {
		fmt.Fprintf(tw, "dropped on the way\t%s\n", dropsText(d))
	}
	if len(r.Faults) > 0 {
		fmt.Fprintf(tw, "faults fired\t%s\n", faultsText(r.Faults))
	}
	if r.Costs != nil {
		fmt.Fprintf(tw, "host costs (true scale)\t%s\n", r.Costs)
	}
	if r.PSLayout != "" {
		fmt.Fprintf(tw, "parameter servers\t%s\n", r.PSLayout)
	}
	tw.Flush()
}

// memReserved is the summary's memory line, or says none is used.
func memReserved(r *Results) string {
	if r.Memory.TotalSlots <= 0 {
		return "– (no switch memory used)"
	}
	s := r.Summary
	return FormatPercent(s.MemUtilMean) + " mean, " + FormatPercent(s.MemUtilPeak) + " peak of " + itoa(r.Memory.TotalSlots) + " slots; " +
		FormatPercent(s.MemInUseShare) + " of it in use"
}

// psPath is the summary's PS-path fraction, or says there is no PS path.
func psPath(s Summary) string {
	if !defined(s.PSFraction) {
		return "– (no PS path)"
	}
	return FormatPercent(s.PSFraction) + " of " + i64(s.SwitchChunks+s.PSChunks) + " chunks"
}

// faultsText lists the faults that fired: kind, target, when, how long.
func faultsText(fs []FaultRecord) string {
	parts := make([]string, len(fs))
	for i, f := range fs {
		p := f.Kind
		if f.Target != "" {
			p += " " + f.Target
		}
		if f.Direction != "" && f.Direction != "both" {
			p += " (" + f.Direction + ")"
		}
		p += " at " + FormatSeconds(f.At)
		if f.Duration > 0 {
			p += " for " + FormatSeconds(f.Duration)
		}
		if f.LoseState {
			p += " (state lost)"
		}
		if f.When != "" {
			p += " (after " + f.When + ")"
		}
		parts[i] = p
	}
	return strings.Join(parts, "; ")
}

// dropsText lists the drops by cause, the causes with none left out.
func dropsText(d testbed.Drops) string {
	var parts []string
	for _, c := range []struct {
		name string
		n    uint64
	}{
		{"bad FCS", d.FCS}, {"bad ICRC", d.BadICRC}, {"foreign", d.Foreign}, {"spoofed source", d.Spoofed},
		{"forged result", d.ForgedResult}, {"forged control", d.ForgedControl}, {"stale", d.Stale}, {"malformed", d.Malformed}, {"PS CPU queue full or crashed", d.CPUQueue},
	} {
		if c.n > 0 {
			parts = append(parts, fmt.Sprintf("%s %d", c.name, c.n))
		}
	}
	return fmt.Sprintf("%d frames: %s", d.Total(), strings.Join(parts, ", "))
}
