package report

import (
	"bytes"
	"encoding/xml"
	"io"
	"strings"
	"testing"

	"gonum.org/v1/plot/font"
	"gonum.org/v1/plot/vg"
)

// svgGroup is one series group of a plot: <g class=… id=…>, its title
// and the paths in it.
type svgGroup struct {
	class, id, title string
	paths            int
}

// svgGroups parses b as XML (failing the test if it is not well-formed or
// not an SVG) and returns its series groups in document order.
func svgGroups(t *testing.T, name string, b []byte) []svgGroup {
	t.Helper()
	d := xml.NewDecoder(bytes.NewReader(b))
	var out []svgGroup
	var stack []int // index in out of each open <g>, -1 for none
	root := ""
	inTitle := false
	for {
		tok, err := d.Token()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatalf("%s: not well-formed XML: %v", name, err)
		}
		switch e := tok.(type) {
		case xml.StartElement:
			if root == "" {
				root = e.Name.Local
				if root != "svg" || e.Name.Space != "http://www.w3.org/2000/svg" {
					t.Fatalf("%s: root %s in %q", name, root, e.Name.Space)
				}
			}
			switch e.Name.Local {
			case "g":
				g := svgGroup{}
				for _, a := range e.Attr {
					switch a.Name.Local {
					case "class":
						g.class = a.Value
					case "id":
						g.id = a.Value
					}
				}
				stack = append(stack, len(out))
				out = append(out, g)
			case "path":
				for _, i := range stack {
					out[i].paths++
				}
			case "title":
				inTitle = true
			}
		case xml.CharData:
			if inTitle && len(stack) > 0 {
				out[stack[len(stack)-1]].title += string(e)
			}
		case xml.EndElement:
			switch e.Name.Local {
			case "g":
				stack = stack[:len(stack)-1]
			case "title":
				inTitle = false
			}
		}
	}
	if len(stack) != 0 {
		t.Fatalf("%s: %d groups not closed", name, len(stack))
	}
	return out
}

// count is how many groups have class.
func count(gs []svgGroup, class string) int {
	n := 0
	for _, g := range gs {
		if g.class == class {
			n++
		}
	}
	return n
}

// render writes f twice and checks both give the same bytes.
func render(t *testing.T, name string, f interface{ WriteSVG(io.Writer) error }) []byte {
	t.Helper()
	var a, b bytes.Buffer
	if err := f.WriteSVG(&a); err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	if err := f.WriteSVG(&b); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(a.Bytes(), b.Bytes()) {
		t.Errorf("%s: two renders differ", name)
	}
	return a.Bytes()
}

// TestPlotsDeterministic: every plot of a run and of a comparison gives
// the same bytes for the same results, rendered twice and from results
// computed twice.
func TestPlotsDeterministic(t *testing.T) {
	figs := func() map[string][]byte {
		var rs []*Results
		for _, p := range []string{"atp", "dynaina", "none"} {
			rs = append(rs, synthetic(t, "dynaina-contention.yaml", p))
		}
		out := map[string][]byte{}
		r := rs[1]
		out["run/"+JCTPlotFile] = render(t, JCTPlotFile, JCTChart(r))
		out["run/"+MemoryPlotFile] = render(t, MemoryPlotFile, MemoryChart(r))
		out["run/"+TputPlotFile] = render(t, TputPlotFile, ThroughputChart(r))
		for _, f := range CompareFigures(rs, "seed 1") {
			out["compare/"+f.File] = render(t, f.File, f.Figure)
		}
		return out
	}
	a, b := figs(), figs()
	if len(a) != 10 {
		t.Errorf("%d figures, want 3 + 7", len(a))
	}
	for k, v := range a {
		if !bytes.Equal(v, b[k]) {
			t.Errorf("%s differs between two computations of the same results", k)
		}
		svgGroups(t, k, v)
	}
}

// TestRunPlots: the run plots have one series per job in each panel, the
// arrivals and finishes, the line rate, and say the bin width and the
// scale.
func TestRunPlots(t *testing.T) {
	r := synthetic(t, "dynaina-contention.yaml", "dynaina")
	nj := len(r.Jobs)
	mem := render(t, MemoryPlotFile, MemoryChart(r))
	gs := svgGroups(t, MemoryPlotFile, mem)
	if count(gs, "job") != 2*nj || count(gs, "event") != 2*nj {
		t.Errorf("memory.svg: %d job and %d event groups, want %d each", count(gs, "job"), count(gs, "event"), 2*nj)
	}
	for _, g := range gs {
		if g.class == "job" && g.paths == 0 {
			t.Errorf("memory.svg: job %s draws nothing", g.id)
		}
	}
	tput := render(t, TputPlotFile, ThroughputChart(r))
	gs = svgGroups(t, TputPlotFile, tput)
	if count(gs, "job") != nj || count(gs, "line-rate") != 1 {
		t.Errorf("throughput.svg: %d job groups (want %d), %d line rates", count(gs, "job"), nj, count(gs, "line-rate"))
	}
	for _, want := range []string{"bins of ", "rate_scale 0.01", "true scale (as run ÷ 0.01)", "line rate, one job: 2.4 Gel/s"} {
		if !strings.Contains(string(tput), want) {
			t.Errorf("throughput.svg lacks %q", want)
		}
	}
	jct := render(t, JCTPlotFile, JCTChart(r))
	gs = svgGroups(t, JCTPlotFile, jct)
	if count(gs, "job") != nj || count(gs, "policy") != 1 {
		t.Errorf("jct_cdf.svg: %d job dots, %d policy lines", count(gs, "job"), count(gs, "policy"))
	}
	// job i has colour i in every plot
	col := `fill="#` + hexOf(jobColor(2))
	for name, b := range map[string][]byte{"memory": mem, "throughput": tput, "jct": jct} {
		if !strings.Contains(string(b), col) {
			t.Errorf("%s: job 2's colour %s not used", name, col)
		}
	}
}

func hexOf(c interface{ RGBA() (r, g, b, a uint32) }) string {
	r, g, b, _ := c.RGBA()
	const d = "0123456789abcdef"
	return string([]byte{d[r>>12], d[r>>8&15], d[g>>12], d[g>>8&15], d[b>>12], d[b>>8&15]})
}

// TestCompareFigures: one series per job or per policy in each plot of a
// comparison; a policy without switch memory says so.
func TestCompareFigures(t *testing.T) {
	var rs []*Results
	pols := []string{"atp", "dynaina", "none"}
	for _, p := range pols {
		r := synthetic(t, "dynaina-contention.yaml", p)
		if p == "none" {
			r.Memory.TotalSlots, r.PSPathSeries = 0, []Point{}
		}
		rs = append(rs, r)
	}
	nj, np := len(rs[0].Jobs), len(pols)
	want := map[string]map[string]int{
		CompareJCTJobsFile:    {"job": nj},
		CompareJCTCDFFile:     {"policy": np},
		CompareIterationsFile: {"job": nj * np},
		CompareMemoryFile:     {"job": nj * 2 * (np - 1), "event": nj * 2 * (np - 1)},
		CompareTputFile:       {"job": nj * np, "line-rate": np, "event": nj * np},
		ComparePSPathFile:     {"policy": np - 1},
		CompareCollisionsFile: {"policy": np},
	}
	figs := CompareFigures(rs, "seed 1")
	if len(figs) != len(want) {
		t.Fatalf("%d figures, want %d", len(figs), len(want))
	}
	for _, f := range figs {
		b := render(t, f.File, f.Figure)
		gs := svgGroups(t, f.File, b)
		for class, n := range want[f.File] {
			if got := count(gs, class); got != n {
				t.Errorf("%s: %d %s groups, want %d", f.File, got, class, n)
			}
		}
		if f.File == CompareMemoryFile && !strings.Contains(string(b), "none uses no switch memory") {
			t.Error("memory.svg: the policy without memory is not named")
		}
		if f.File == ComparePSPathFile && !strings.Contains(string(b), "no PS path: none") {
			t.Error("ps_path.svg: the policy without a PS path is not named")
		}
	}
}

// TestSVGCanvas: the canvas writes escaped text, rotated text, arcs, and
// groups with unique ids.
func TestSVGCanvas(t *testing.T) {
	c := newSVGCanvas(100, 50)
	c.Push()
	c.group("job", "a<b", "a & b")
	var p vg.Path
	p.Arc(vg.Point{X: 10, Y: 10}, 5, 0, 6.283185307179586)
	c.Fill(p)
	c.Pop()
	c.Push()
	c.group("job", "a<b", "again")
	c.Pop()
	c.Push()
	c.Translate(vg.Point{X: 20, Y: 20})
	c.Rotate(1.5707963267948966)
	c.FillString(font.DefaultCache.Lookup(sans, 10), vg.Point{}, "up & <away>")
	c.Pop()
	var b bytes.Buffer
	if _, err := c.WriteTo(&b); err != nil {
		t.Fatal(err)
	}
	s := b.String()
	for _, want := range []string{`<g class="job" id="job-a_b"><title>a &amp; b</title>`, `id="job-a_b-2"`,
		`transform="translate(20 30) rotate(-90)"`, "up &amp; &lt;away&gt;", "A5 5 0 0 0"} {
		if !strings.Contains(s, want) {
			t.Errorf("no %q in\n%s", want, s)
		}
	}
	gs := svgGroups(t, "canvas", b.Bytes())
	if len(gs) != 2 || gs[0].paths != 1 || gs[0].title != "a & b" {
		t.Errorf("groups %+v", gs)
	}
}
