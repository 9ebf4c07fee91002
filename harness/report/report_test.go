package report

import (
	"bytes"
	"encoding/csv"
	"encoding/json"
	"encoding/xml"
	"io"
	"math"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/inabox/inabox/harness/testbed"
)

func sampleResults(policy string, scale float64) *Results {
	c := NewCollector(CollectorConfig{Scenario: "sample", Policy: policy, Seed: 3, TotalSlots: 100})
	feed(c)
	r := c.Results(45 * ms)
	// Make policies differ for comparisons.
	r.Summary.JCTMean *= Num(scale)
	r.Summary.AggThroughput /= Num(scale)
	return r
}

func TestWriteOutputs(t *testing.T) {
	dir := t.TempDir()
	r := sampleResults("dynaina", 1)
	files, err := WriteOutputs(dir, r)
	if err != nil {
		t.Fatal(err)
	}
	want := []string{ResultsFile, JobsCSVFile, "job-a.csv", "job-b.csv", "job-c.csv", JCTPlotFile, MemoryPlotFile, TputPlotFile}
	if len(files) != len(want) {
		t.Fatalf("wrote %v", files)
	}
	for i, w := range want {
		if filepath.Base(files[i]) != w {
			t.Errorf("file %d = %s, want %s", i, files[i], w)
		}
	}
	// results.json round-trips and is byte-identical for the same run.
	a, _ := os.ReadFile(filepath.Join(dir, ResultsFile))
	var back map[string]any
	if err := json.Unmarshal(a, &back); err != nil {
		t.Fatal(err)
	}
	if back["policy"] != "dynaina" || back["summary"].(map[string]any)["jobs"].(float64) != 3 {
		t.Errorf("results.json: %v", back["summary"])
	}
	dir2 := t.TempDir()
	if _, err := WriteOutputs(dir2, sampleResults("dynaina", 1)); err != nil {
		t.Fatal(err)
	}
	for _, w := range want {
		x, _ := os.ReadFile(filepath.Join(dir, w))
		y, _ := os.ReadFile(filepath.Join(dir2, w))
		if !bytes.Equal(x, y) {
			t.Errorf("%s differs between identical runs", w)
		}
	}
	// CSVs parse with a constant column count.
	for _, f := range []string{JobsCSVFile, "job-a.csv"} {
		fh, _ := os.Open(filepath.Join(dir, f))
		recs, err := csv.NewReader(fh).ReadAll()
		fh.Close()
		if err != nil || len(recs) < 2 {
			t.Errorf("%s: %d records, %v", f, len(recs), err)
		}
	}
	b, _ := os.ReadFile(filepath.Join(dir, "job-a.csv"))
	if !strings.Contains(string(b), "1,0.02,0.03,0.04,0.04,0.02,0.01,0.01,4000,1000,100000") {
		t.Errorf("job-a.csv:\n%s", b)
	}
	// SVGs are well-formed XML with the axis labels and legend entries.
	for _, f := range []string{JCTPlotFile, MemoryPlotFile, TputPlotFile} {
		b, _ := os.ReadFile(filepath.Join(dir, f))
		checkSVG(t, f, b)
	}
	b, _ = os.ReadFile(filepath.Join(dir, MemoryPlotFile))
	for _, s := range []string{`id="job-a"`, `id="job-b"`, `id="job-c"`, "reserved (% of slots)", "in use (% of slots)",
		"virtual time (s, as run; bins of 1 ms)", ">job arrives<"} {
		if !strings.Contains(string(b), s) {
			t.Errorf("memory.svg lacks %q", s)
		}
	}
}

// checkSVG parses b as XML and checks it is an SVG with text and paths.
func checkSVG(t *testing.T, name string, b []byte) {
	t.Helper()
	d := xml.NewDecoder(bytes.NewReader(b))
	root, texts, paths := "", 0, 0
	for {
		tok, err := d.Token()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatalf("%s: not well-formed XML: %v", name, err)
		}
		if se, ok := tok.(xml.StartElement); ok {
			if root == "" {
				root = se.Name.Local
				if se.Name.Space != "http://www.w3.org/2000/svg" {
					t.Errorf("%s: namespace %q", name, se.Name.Space)
				}
			}
			switch se.Name.Local {
			case "text":
				texts++
			case "path":
				paths++
			}
		}
	}
	if root != "svg" || texts < 8 || paths < 1 {
		t.Errorf("%s: root %q, %d texts, %d paths", name, root, texts, paths)
	}
}

func TestChartEdgeCases(t *testing.T) {
	for name, c := range map[string]Chart{
		"empty":     {Title: "nothing <here> & there", XLabel: "x", YLabel: "y"},
		"one point": {Title: "t", Lines: []Line{{Name: "a", Points: []Point{{1, 1}}}}},
		"nan":       {Title: "t", Lines: []Line{{Name: "a", Points: []Point{{0, Num(nan())}, {1, 2}}}}},
		"many": func() Chart {
			c := Chart{Title: "many"}
			for i := 0; i < 50; i++ {
				c.Lines = append(c.Lines, Line{Name: "l" + itoa(i), Points: []Point{{0, Num(i)}, {1, Num(i)}}})
			}
			return c
		}(),
		"big": {Title: "t", Lines: []Line{{Name: "a", Points: []Point{{0, 0}, {3, 4.5e9}}}}},
	} {
		var b bytes.Buffer
		if err := c.WriteSVG(&b); err != nil {
			t.Fatal(err)
		}
		checkSVG(t, name, append(b.Bytes()[:0:0], b.Bytes()...))
		if name == "many" && !strings.Contains(b.String(), "… 11 more") {
			t.Error("legend not truncated")
		}
		if name == "big" && !strings.Contains(b.String(), ">4G<") {
			t.Errorf("no SI tick label:\n%s", b.String())
		}
	}
}

func nan() float64 { var z float64; return z / z }

func TestNiceTicks(t *testing.T) {
	for _, c := range []struct {
		lo, hi float64
		want   string
	}{{0, 1, "0 0.2 0.4 0.6 0.8 1"}, {0, 0.045, "0 0.01 0.02 0.03 0.04 0.05"}, {0, 7, "0 1 2 3 4 5 6 7"}, {0, 3.1e6, "0 500k 1000k 1.5M 2M 2.5M 3M 3.5M"}} {
		ticks := niceTicks(c.lo, c.hi)
		var got []string
		for _, v := range ticks {
			got = append(got, tickLabel(v, ticks))
		}
		_ = got
		if len(ticks) < 4 || len(ticks) > 11 || ticks[0] > c.lo || ticks[len(ticks)-1] < c.hi {
			t.Errorf("ticks(%v, %v) = %v", c.lo, c.hi, ticks)
		}
	}
}

func TestPrintSummary(t *testing.T) {
	var b bytes.Buffer
	sampleResults("atp", 1).PrintSummary(&b)
	s := b.String()
	for _, want := range []string{"scenario sample, policy atp, seed 3: 2/3 jobs finished", "JCT", "≥15 ms", "100k",
		"switch memory reserved", "10.0% of 100 chunks", "collisions"} {
		if !strings.Contains(s, want) {
			t.Errorf("summary lacks %q:\n%s", want, s)
		}
	}
}

func TestFormat(t *testing.T) {
	for _, c := range []struct{ got, want string }{
		{FormatSeconds(1.5), "1.5 s"}, {FormatSeconds(0.0123), "12.3 ms"}, {FormatSeconds(2e-6), "2 µs"},
		{FormatSeconds(5e-9), "5 ns"}, {FormatSeconds(Num(nan())), "–"}, {FormatSeconds(0), "0 s"},
		{FormatSI(1.234e9, "el/s"), "1.23 Gel/s"}, {FormatSI(12, ""), "12"}, {FormatSI(80000, ""), "80k"}, {FormatSI(Num(nan()), "x"), "–"},
		{FormatPercent(0.1234), "12.3%"},
	} {
		if c.got != c.want {
			t.Errorf("got %q, want %q", c.got, c.want)
		}
	}
}

func TestCompare(t *testing.T) {
	var rs []*Results
	for i, p := range testbed.Names() {
		rs = append(rs, sampleResults(p, []float64{2, 1.5, 1.2, 1.1, 1, 0.8}[i]))
	}
	c := Compare(rs)
	if c.Scenario != "sample" || len(c.Policies) != 6 || len(c.Rows) != len(CompareMetrics) {
		t.Fatalf("%+v", c)
	}
	row := c.Rows[0] // JCT mean: lower is better; esa (1.1) is the best baseline
	if row.Metric != "jct_mean_s" || row.BestBaseline != "esa" || !near(row.VsRef["dynaina"], 1.2/0.8) || !near(row.VsBest["freeina"], 1.1) || !near(row.VsRef["atp"], 1) {
		t.Errorf("jct row %+v", row)
	}
	for _, row := range c.Rows {
		if row.Metric == "agg_throughput_eps" && (row.BestBaseline != "esa" || !near(row.VsRef["dynaina"], 1.2/0.8)) {
			t.Errorf("throughput row %+v", row)
		}
		if row.Metric == "mem_util_peak" && (row.VsRef != nil || row.BestBaseline != "") {
			t.Errorf("neutral row has ratios: %+v", row)
		}
	}
	var txt, js bytes.Buffer
	if err := c.WriteText(&txt); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"dynaina", "vs atp", "vs best baseline (esa)", "1.50×", "JCT mean ↓"} {
		if !strings.Contains(txt.String(), want) {
			t.Errorf("text lacks %q:\n%s", want, txt.String())
		}
	}
	if err := c.WriteJSON(&js); err != nil {
		t.Fatal(err)
	}
	var back Comparison
	if err := json.Unmarshal(js.Bytes(), &back); err != nil || back.Rows[0].VsRef == nil || back.Reference != "atp" {
		t.Errorf("json: %v\n%s", err, js.String())
	}
	// Without ATP: no vs-atp gains, still a best baseline.
	c = Compare(rs[4:])
	if c.Rows[0].VsRef != nil || c.Rows[0].BestBaseline != "" {
		t.Errorf("no baselines: %+v", c.Rows[0])
	}
}

func TestProgress(t *testing.T) {
	var b bytes.Buffer
	p := NewProgress(&b, "run", true)
	for v := time.Duration(0); v <= time.Second; v += time.Millisecond {
		p.Update(v, time.Second)
	}
	p.Done()
	if n := strings.Count(b.String(), "\r"); n != 101 || !strings.Contains(b.String(), "100%") || !strings.HasSuffix(b.String(), "\n") {
		t.Errorf("%d redraws:\n%q", n, b.String()[len(b.String())-100:])
	}
	b.Reset()
	p = NewProgress(&b, "run", false)
	p.Update(1, 2)
	p.Done()
	if b.Len() != 0 {
		t.Error("disabled progress wrote")
	}
	if IsTerminal(os.NewFile(0, "/dev/null")) && false {
		t.Skip()
	}
	f, _ := os.CreateTemp(t.TempDir(), "x")
	if IsTerminal(f) {
		t.Error("a file is a terminal")
	}
	f.Close()
}

// TestFaultMarks: the faults that fired are drawn on the time plots, each a
// line at its time with its kind above and its full description as the
// tooltip; a run without faults draws none.
func TestFaultMarks(t *testing.T) {
	r := &Results{Scenario: "s", Policy: "p", End: 2, Throughput: []Point{{X: 0, Y: 1}, {X: 2, Y: 1}}, Faults: []FaultRecord{
		{At: 0.5, Kind: "loss_burst", Target: "h0", Duration: 0.1, Direction: "up", When: "job a's first packet"},
		{At: 1.5, Kind: "switch_reboot"}}}
	var b strings.Builder
	if err := ThroughputChart(r).WriteSVG(&b); err != nil {
		t.Fatal(err)
	}
	svg := b.String()
	for _, want := range []string{">loss_burst</text>", ">switch_reboot</text>",
		"<title>loss_burst h0 (up) at 500 ms for 100 ms (after job a&#39;s first packet)</title>"} {
		if !strings.Contains(svg, want) {
			t.Errorf("no %q in the plot", want)
		}
	}
	r.Faults = nil
	b.Reset()
	if err := MemoryChart(r).WriteSVG(&b); err != nil {
		t.Fatal(err)
	}
	if strings.Contains(b.String(), "stroke-dasharray=\"2 3\"") {
		t.Error("marks without faults")
	}
}

// TestMultiProgress: runs going on at once share one line, each with its
// percentage, and the count of those done; a shorter line blanks out the
// longer one before it; a MultiProgress not enabled writes nothing.
func TestMultiProgress(t *testing.T) {
	var b bytes.Buffer
	m := NewMultiProgress(&b, 2, true)
	a, c := m.Run("a"), m.Run("long-label-c")
	a.Update(time.Second, 4*time.Second)
	c.Update(3*time.Second, 4*time.Second)
	c.Update(3*time.Second, 4*time.Second) // same percent: no redraw
	c.Done()
	a.Done()
	m.Close()
	lines := strings.Split(b.String(), "\r")
	want := []string{"", "0/2 done · a", "0/2 done · a · long-label-c", "0/2 done · a 25% · long-label-c",
		"0/2 done · a 25% · long-label-c 75%", "1/2 done · a 25%", "2/2 done"}
	if len(lines) != len(want) {
		t.Fatalf("%d redraws, want %d: %q", len(lines), len(want), b.String())
	}
	for i, w := range want {
		if got := strings.TrimRight(lines[i], " \n"); got != w {
			t.Errorf("redraw %d: %q, want %q", i, got, w)
		}
	}
	if !strings.HasSuffix(b.String(), "\n") || utf8.RuneCountInString(lines[5]) != utf8.RuneCountInString(lines[4]) {
		t.Errorf("the line is not blanked out or not ended: %q", b.String())
	}
	var off bytes.Buffer
	m = NewMultiProgress(&off, 1, false)
	p := m.Run("x")
	p.Update(time.Second, 2*time.Second)
	p.Done()
	m.Close()
	if off.Len() != 0 {
		t.Errorf("disabled: wrote %q", off.String())
	}
}

// TestCompareOrientation: reserved memory is a cost (less is a gain > 1×),
// useful aggregations per reserved slot-second a gain, and a gain whose
// reference is zero is n/a, not 0.00× or +Inf; a run's PS layout heads the
// table.
func TestCompareOrientation(t *testing.T) {
	atp, fi := sampleResults("atp", 1), sampleResults("freeina", 1)
	atp.Summary.MemUtilMean, fi.Summary.MemUtilMean = 0.5, 0.25
	atp.Summary.UsefulPerSlotSecond, fi.Summary.UsefulPerSlotSecond = 100, 300
	atp.Summary.Collisions, fi.Summary.Collisions = 0, 7
	atp.PSLayout, fi.PSLayout = "shared: 2 PSs serving every job", "shared: 2 PSs serving every job"
	c := Compare([]*Results{atp, fi})
	want := map[string]float64{"mem_util_mean": 2, "useful_aggs_per_slot_s": 3}
	for _, row := range c.Rows {
		if w, ok := want[row.Metric]; ok && !near(row.VsRef["freeina"], w) {
			t.Errorf("%s: freeina's gain over atp %v, want %v×", row.Metric, row.VsRef["freeina"], w)
		}
		if row.Metric == "collisions" && !math.IsNaN(float64(row.VsRef["freeina"])) {
			t.Errorf("collisions against atp's 0: gain %v, want undefined", row.VsRef["freeina"])
		}
	}
	var txt bytes.Buffer
	if err := c.WriteText(&txt); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"switch memory reserved, mean ↓", "useful aggregations / reserved slot-s ↑", "parameter servers: shared: 2 PSs serving every job\n"} {
		if !strings.Contains(txt.String(), want) {
			t.Errorf("text lacks %q:\n%s", want, txt.String())
		}
	}
	for _, line := range strings.Split(txt.String(), "\n") {
		if strings.HasPrefix(strings.TrimSpace(line), "collisions") {
			continue
		}
		if strings.Contains(line, "Inf") || strings.Contains(line, "NaN") {
			t.Errorf("line %q", line)
		}
	}
	if !regexp.MustCompile(`(?m)^  collisions ↓.*\n    vs atp +n/a +n/a$`).MatchString(txt.String()) {
		t.Errorf("collisions against atp's 0 not n/a:\n%s", txt.String())
	}
}
