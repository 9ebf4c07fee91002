package report

import (
	"bytes"
	"encoding/xml"
	"fmt"
	"image"
	"image/color"
	"io"
	"math"
	"strconv"
	"strings"

	"gonum.org/v1/plot/font"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
)

// svgCanvas is a gonum/plot canvas (vg.Canvas) that writes compact,
// deterministic SVG: every coordinate to 0.1 unit, one font family (the
// Liberation fonts gonum/plot measures text with, then their metric
// equivalents), no embedded fonts, no timestamps, and each series in a
// <g class=… id=…> with a <title> (its tooltip), which gonum/plot's own
// vgsvg cannot give (docs/results-format.md, "Plots").
//
// Coordinates: gonum/plot's origin is the bottom left; the canvas applies
// the current transform and the flip itself and writes absolute SVG
// coordinates.
type svgCanvas struct {
	w, h  vg.Length
	buf   bytes.Buffer
	stack []svgState
	ids   map[string]int
}

type svgState struct {
	width  vg.Length
	dashes []vg.Length
	col    color.Color
	m      affine
	groups int // <g> opened since the Push
}

// affine maps (x, y) to (a·x + c·y + e, b·x + d·y + f).
type affine struct{ a, b, c, d, e, f float64 }

func (m affine) apply(p vg.Point) (x, y float64) {
	px, py := float64(p.X), float64(p.Y)
	return m.a*px + m.c*py + m.e, m.b*px + m.d*py + m.f
}

// mul is m after n (n applied first).
func (m affine) mul(n affine) affine {
	return affine{
		a: m.a*n.a + m.c*n.b, b: m.b*n.a + m.d*n.b,
		c: m.a*n.c + m.c*n.d, d: m.b*n.c + m.d*n.d,
		e: m.a*n.e + m.c*n.f + m.e, f: m.b*n.e + m.d*n.f + m.f,
	}
}

// svgFontFamily is the one font family of every plot: gonum/plot lays text
// out with Liberation Sans, which Arial and Helvetica match metrically.
const svgFontFamily = "Liberation Sans, Arial, Helvetica, sans-serif"

func newSVGCanvas(w, h vg.Length) *svgCanvas {
	c := &svgCanvas{w: w, h: h, ids: map[string]int{}}
	c.stack = []svgState{{width: 1, col: color.Black, m: affine{a: 1, d: -1, f: float64(h)}}}
	return c
}

func (c *svgCanvas) top() *svgState { return &c.stack[len(c.stack)-1] }

func (c *svgCanvas) Size() (vg.Length, vg.Length) { return c.w, c.h }

func (c *svgCanvas) SetLineWidth(w vg.Length) { c.top().width = w }

func (c *svgCanvas) SetLineDash(d []vg.Length, _ vg.Length) {
	c.top().dashes = append([]vg.Length(nil), d...)
}

func (c *svgCanvas) SetColor(col color.Color) {
	if col == nil {
		col = color.Black
	}
	c.top().col = col
}

func (c *svgCanvas) Rotate(rad float64) {
	s, k := math.Sincos(rad)
	c.top().m = c.top().m.mul(affine{a: k, b: s, c: -s, d: k})
}

func (c *svgCanvas) Translate(p vg.Point) {
	c.top().m = c.top().m.mul(affine{a: 1, d: 1, e: float64(p.X), f: float64(p.Y)})
}

func (c *svgCanvas) Scale(x, y float64) {
	c.top().m = c.top().m.mul(affine{a: x, d: y})
}

func (c *svgCanvas) Push() {
	s := *c.top()
	s.groups = 0
	c.stack = append(c.stack, s)
}

func (c *svgCanvas) Pop() {
	for range c.top().groups {
		c.buf.WriteString("</g>\n")
	}
	if len(c.stack) > 1 {
		c.stack = c.stack[:len(c.stack)-1]
	}
}

// group opens <g class=class id=…> with title as its tooltip, closed by
// the matching Pop (call Push first). The id is class-name, made unique.
func (c *svgCanvas) group(class, name, title string) {
	id := svgID(class + "-" + name)
	if n := c.ids[id]; n > 0 {
		c.ids[id] = n + 1
		id += "-" + strconv.Itoa(n+1)
	} else {
		c.ids[id] = 1
	}
	fmt.Fprintf(&c.buf, `<g class="%s" id="%s">`, esc(class), esc(id))
	if title != "" {
		fmt.Fprintf(&c.buf, "<title>%s</title>", esc(title))
	}
	c.buf.WriteString("\n")
	c.top().groups++
}

// svgID is s as an XML id: letters, digits, '-', '_' and '.' kept, others
// '_', never starting with a digit.
func svgID(s string) string {
	b := []byte(s)
	for i, ch := range b {
		if !(ch >= 'a' && ch <= 'z' || ch >= 'A' && ch <= 'Z' || ch >= '0' && ch <= '9' || ch == '-' || ch == '_' || ch == '.') {
			b[i] = '_'
		}
	}
	if len(b) == 0 || b[0] >= '0' && b[0] <= '9' || b[0] == '-' || b[0] == '.' {
		b = append([]byte("s"), b...)
	}
	return string(b)
}

// coord is v to 0.1 unit, without trailing zeros.
func coord(v float64) string {
	v = math.Round(v*10) / 10
	if v == 0 {
		return "0" // no "-0"
	}
	return strconv.FormatFloat(v, 'f', -1, 64)
}

func (c *svgCanvas) pathData(p vg.Path) string {
	var b strings.Builder
	m := c.top().m
	det := m.a*m.d - m.b*m.c
	var lx, ly string // the last point written
	point := func(cmd string, x, y float64) {
		sx, sy := coord(x), coord(y)
		switch {
		case cmd == "L" && sx == lx && sy == ly:
			return
		case cmd == "L" && sy == ly:
			b.WriteString("H" + sx)
		case cmd == "L" && sx == lx:
			b.WriteString("V" + sy)
		default:
			b.WriteString(cmd + sx)
			if sy[0] != '-' {
				b.WriteByte(' ')
			}
			b.WriteString(sy)
		}
		lx, ly = sx, sy
	}
	arcTo := func(r, x, y float64, large, sweep int) {
		sx, sy := coord(x), coord(y)
		fmt.Fprintf(&b, "A%s %s 0 %d %d %s %s", coord(r), coord(r), large, sweep, sx, sy)
		lx, ly = sx, sy
	}
	for _, pc := range p {
		switch pc.Type {
		case vg.MoveComp:
			x, y := m.apply(pc.Pos)
			point("M", x, y)
		case vg.LineComp:
			x, y := m.apply(pc.Pos)
			point("L", x, y)
		case vg.ArcComp:
			r := float64(pc.Radius)
			at := func(a float64) (float64, float64) {
				s, k := math.Sincos(a)
				return m.apply(vg.Point{X: pc.Pos.X + vg.Length(r*k), Y: pc.Pos.Y + vg.Length(r*s)})
			}
			x0, y0 := at(pc.Start)
			if b.Len() == 0 {
				point("M", x0, y0)
			} else {
				point("L", x0, y0)
			}
			rr := r * math.Sqrt(math.Abs(det))
			sweep := 0
			if (pc.Angle > 0) != (det < 0) {
				sweep = 1
			}
			if math.Abs(pc.Angle) >= 2*math.Pi-1e-9 {
				// a full circle: two half arcs
				x1, y1 := at(pc.Start + math.Copysign(math.Pi, pc.Angle))
				arcTo(rr, x1, y1, 0, sweep)
				x2, y2 := at(pc.Start + pc.Angle)
				arcTo(rr, x2, y2, 0, sweep)
				continue
			}
			large := 0
			if math.Abs(pc.Angle) > math.Pi {
				large = 1
			}
			x1, y1 := at(pc.Start + pc.Angle)
			arcTo(rr, x1, y1, large, sweep)
		case vg.CurveComp:
			// not drawn by any plot here; kept as straight segments
			for _, cp := range pc.Control {
				x, y := m.apply(cp)
				point("L", x, y)
			}
			x, y := m.apply(pc.Pos)
			point("L", x, y)
		case vg.CloseComp:
			b.WriteString("Z")
		}
	}
	return b.String()
}

// colorAttrs is col as the SVG attribute attr (fill or stroke) and its
// opacity when not opaque.
func colorAttrs(attr string, col color.Color) string {
	r, g, b, a := col.RGBA()
	if a == 0 {
		return attr + `="none"`
	}
	// un-premultiply
	r, g, b = r*0xffff/a, g*0xffff/a, b*0xffff/a
	s := fmt.Sprintf(`%s="#%02x%02x%02x"`, attr, r>>8, g>>8, b>>8)
	if a < 0xffff {
		s += fmt.Sprintf(` %s-opacity="%s"`, attr, strconv.FormatFloat(math.Round(float64(a)/0xffff*100)/100, 'f', -1, 64))
	}
	return s
}

func (c *svgCanvas) Stroke(p vg.Path) {
	st := c.top()
	if st.width <= 0 {
		return
	}
	d := c.pathData(p)
	if d == "" {
		return
	}
	fmt.Fprintf(&c.buf, `<path d="%s" fill="none" %s`, d, colorAttrs("stroke", st.col))
	if st.width != 1 {
		fmt.Fprintf(&c.buf, ` stroke-width="%s"`, coord(float64(st.width)))
	}
	if len(st.dashes) > 0 {
		ds := make([]string, len(st.dashes))
		for i, v := range st.dashes {
			ds[i] = coord(float64(v))
		}
		fmt.Fprintf(&c.buf, ` stroke-dasharray="%s"`, strings.Join(ds, " "))
	}
	c.buf.WriteString("/>\n")
}

func (c *svgCanvas) Fill(p vg.Path) {
	d := c.pathData(p)
	if d == "" {
		return
	}
	fmt.Fprintf(&c.buf, `<path d="%s" %s/>`+"\n", d, colorAttrs("fill", c.top().col))
}

func (c *svgCanvas) FillString(f font.Face, p vg.Point, s string) {
	if f.Font.Size <= 0 || s == "" {
		return
	}
	m := c.top().m
	x, y := m.apply(p)
	fmt.Fprintf(&c.buf, `<text`)
	// the direction of the x axis, in SVG's y-down coordinates
	if deg := math.Atan2(m.b, m.a) * 180 / math.Pi; math.Abs(deg) > 1e-6 {
		fmt.Fprintf(&c.buf, ` transform="translate(%s %s) rotate(%s)"`, coord(x), coord(y), coord(deg))
	} else {
		fmt.Fprintf(&c.buf, ` x="%s" y="%s"`, coord(x), coord(y))
	}
	fmt.Fprintf(&c.buf, ` font-size="%s"`, coord(float64(f.Font.Size)))
	if f.Font.Weight >= 600 {
		c.buf.WriteString(` font-weight="bold"`)
	}
	if r, g, b, _ := c.top().col.RGBA(); r|g|b != 0 {
		c.buf.WriteString(" " + colorAttrs("fill", c.top().col))
	}
	fmt.Fprintf(&c.buf, ">%s</text>\n", esc(s))
}

// DrawImage is not used by any plot here: it draws nothing.
func (c *svgCanvas) DrawImage(vg.Rectangle, image.Image) {}

// WriteTo writes the document.
func (c *svgCanvas) WriteTo(w io.Writer) (int64, error) {
	var b bytes.Buffer
	fmt.Fprintf(&b, `<?xml version="1.0" encoding="UTF-8"?>
<svg xmlns="http://www.w3.org/2000/svg" width="%s" height="%s" viewBox="0 0 %s %s" font-family="%s">
<rect width="100%%" height="100%%" fill="white"/>
`, coord(float64(c.w)), coord(float64(c.h)), coord(float64(c.w)), coord(float64(c.h)), svgFontFamily)
	b.Write(c.buf.Bytes())
	for i := len(c.stack) - 1; i >= 0; i-- {
		for range c.stack[i].groups {
			b.WriteString("</g>\n")
		}
	}
	b.WriteString("</svg>\n")
	return b.WriteTo(w)
}

// groupOf opens a series group on dc's canvas if it is an svgCanvas (call
// dc.Push first; the Pop closes it).
func groupOf(dc draw.Canvas, class, name, title string) {
	// gonum/plot nests draw.Canvases (a tile's, a padded one's) as the
	// vg.Canvas of another
	c := dc.Canvas
	for {
		switch v := c.(type) {
		case *svgCanvas:
			v.group(class, name, title)
			return
		case draw.Canvas:
			c = v.Canvas
		case *draw.Canvas:
			c = v.Canvas
		default:
			return
		}
	}
}

// esc is s escaped for XML text and attributes.
func esc(s string) string {
	var b strings.Builder
	xml.EscapeText(&b, []byte(s))
	return b.String()
}
