package report

import (
	"bytes"
	"fmt"
	"html"
	"image/color"
	"strings"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/font"
	"gonum.org/v1/plot/text"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
	"gonum.org/v1/plot/vg/vgsvg"
)

// The Okabe-Ito palette (see the package doc).
const (
	colBlue       = "#0072B2"
	colVermillion = "#D55E00"
	colOrange     = "#E69F00"
	colSky        = "#56B4E9"
	colGreen      = "#009E73"
	colGrey       = "#999999"
	colPurple     = "#CC79A7"
	colBlack      = "#000000"
)

func rgb(hex string) color.Color {
	var r, g, b uint8
	_, _ = fmt.Sscanf(hex, "#%02x%02x%02x", &r, &g, &b)
	return color.RGBA{R: r, G: g, B: b, A: 255}
}

// sansFont is the face every chart uses; Liberation Sans has Arial's
// metrics, so a browser without it lays out the same text with Arial.
func sansFont() font.Font { return font.Font{Typeface: "Liberation", Variant: "Sans"} }

// newPlot returns a plot whose text is all in sansFont.
func newPlot(title, xLabel, yLabel string) *plot.Plot {
	p := plot.New()
	p.Title.Text = title
	p.Title.TextStyle.Font = font.From(sansFont(), 11)
	p.X.Label.Text = xLabel
	p.Y.Label.Text = yLabel
	for _, a := range []*plot.Axis{&p.X, &p.Y} {
		a.Label.TextStyle.Font = font.From(sansFont(), 10)
		a.Tick.Label.Font = font.From(sansFont(), 9)
	}
	p.Legend.TextStyle.Font = font.From(sansFont(), 9)
	return p
}

func textStyle(size vg.Length, hex string, xalign draw.XAlignment) text.Style {
	return text.Style{Color: rgb(hex), Font: font.From(sansFont(), size), XAlign: xalign, YAlign: draw.YCenter,
		Handler: plot.DefaultTextHandler}
}

// marks collects the data marks of one chart as SVG elements in the
// canvas coordinates of the plot (origin bottom left, y up), written
// inside the SVG's flipped group after gonum has drawn the plot.
type marks struct {
	buf   bytes.Buffer
	count map[string]int
}

func f2(v vg.Length) string { return fmt.Sprintf("%.2f", float64(v)) }

func (m *marks) add(kind string) {
	if m.count == nil {
		m.count = map[string]int{}
	}
	m.count[kind]++
}

// circle adds a dot; stroke "" means none.
func (m *marks) circle(kind, cls string, x, y, r vg.Length, fill, stroke, title string) {
	m.add(kind)
	fmt.Fprintf(&m.buf, `<circle class="mark %s" cx="%s" cy="%s" r="%s" fill="%s"`, cls, f2(x), f2(y), f2(r), fill)
	if stroke != "" {
		fmt.Fprintf(&m.buf, ` stroke="%s" stroke-width="1.5"`, stroke)
	}
	fmt.Fprintf(&m.buf, `><title>%s</title></circle>`+"\n", html.EscapeString(title))
}

// triangle adds a downward triangle centred on (x, y) (the flipped frame
// turns "down" into y decreasing).
func (m *marks) triangle(kind, cls string, x, y, r vg.Length, fill, stroke, title string) {
	m.add(kind)
	fmt.Fprintf(&m.buf, `<path class="mark %s" d="M%s %s L%s %s L%s %sZ" fill="%s" stroke="%s" stroke-width="1.5"><title>%s</title></path>`+"\n",
		cls, f2(x-r), f2(y+r*0.8), f2(x+r), f2(y+r*0.8), f2(x), f2(y-r*1.1), fill, stroke, html.EscapeString(title))
}

// leftTriangle adds a triangle pointing left, its tip at (x, y).
func (m *marks) leftTriangle(kind, cls string, x, y, r vg.Length, fill, title string) {
	m.add(kind)
	fmt.Fprintf(&m.buf, `<path class="mark %s" d="M%s %s L%s %s L%s %sZ" fill="%s"><title>%s</title></path>`+"\n",
		cls, f2(x), f2(y), f2(x+1.6*r), f2(y+r), f2(x+1.6*r), f2(y-r), fill, html.EscapeString(title))
}

// rect adds a rectangle spanning (x0, y0)-(x1, y1) in any corner order.
func (m *marks) rect(kind, cls string, x0, y0, x1, y1 vg.Length, fill, extra, title string) {
	m.add(kind)
	if x1 < x0 {
		x0, x1 = x1, x0
	}
	if y1 < y0 {
		y0, y1 = y1, y0
	}
	fmt.Fprintf(&m.buf, `<rect class="mark %s" x="%s" y="%s" width="%s" height="%s" fill="%s"%s><title>%s</title></rect>`+"\n",
		cls, f2(x0), f2(y0), f2(x1-x0), f2(y1-y0), fill, extra, html.EscapeString(title))
}

// line adds a straight line.
func (m *marks) line(kind, cls string, x0, y0, x1, y1 vg.Length, stroke string, width float64, dash, title string) {
	m.add(kind)
	fmt.Fprintf(&m.buf, `<line class="mark %s" x1="%s" y1="%s" x2="%s" y2="%s" stroke="%s" stroke-width="%.1f"`,
		cls, f2(x0), f2(y0), f2(x1), f2(y1), stroke, width)
	if dash != "" {
		fmt.Fprintf(&m.buf, ` stroke-dasharray="%s"`, dash)
	}
	fmt.Fprintf(&m.buf, `><title>%s</title></line>`+"\n", html.EscapeString(title))
}

// markPlotter is a plot.Plotter that hands the data canvas and the plot's
// data-to-canvas transforms to fn, which adds marks (and may draw text or
// lines through gonum on c).
type markPlotter struct {
	xmin, xmax, ymin, ymax float64
	fn                     func(c draw.Canvas, tx, ty func(float64) vg.Length)
}

// Plot implements plot.Plotter.
func (p *markPlotter) Plot(c draw.Canvas, plt *plot.Plot) {
	tx, ty := plt.Transforms(&c)
	p.fn(c, tx, ty)
}

// DataRange implements plot.DataRanger.
func (p *markPlotter) DataRange() (xmin, xmax, ymin, ymax float64) {
	return p.xmin, p.xmax, p.ymin, p.ymax
}

// chart is one rendered SVG chart and the number of marks of each kind.
type chart struct {
	SVG    string
	Counts map[string]int
}

const svgTail = "</g>\n</svg>\n"

// renderSVG draws p on a w x h point canvas, keeping right points free at
// the right for labels drawn by the plotters, and returns inline SVG (no
// XML prelude) with the marks written on top. label is the chart's
// accessible name.
func renderSVG(p *plot.Plot, w, h, right vg.Length, m *marks, cls, label string) (chart, error) {
	c := vgsvg.New(w, h)
	dc := draw.New(c)
	p.Draw(draw.Crop(dc, 0, -right, 0, 0))
	var buf bytes.Buffer
	if _, err := c.WriteTo(&buf); err != nil {
		return chart{}, fmt.Errorf("report: render %s chart: %w", cls, err)
	}
	s := buf.String()
	start := strings.Index(s, "<svg")
	if start < 0 {
		return chart{}, fmt.Errorf("report: render %s chart: no <svg> element in the output", cls)
	}
	end := strings.IndexByte(s[start:], '>')
	if end < 0 || !strings.HasSuffix(s, svgTail) {
		return chart{}, fmt.Errorf("report: render %s chart: unexpected svg framing", cls)
	}
	body := s[start+end+1 : len(s)-len(svgTail)]
	// Give the browser fallbacks with the same metrics.
	body = strings.ReplaceAll(body, "font-family:Liberation Sans;", "font-family:Liberation Sans,Arial,Helvetica,sans-serif;")
	var out strings.Builder
	fmt.Fprintf(&out, `<svg class="chart %s" role="img" aria-label="%s" xmlns="http://www.w3.org/2000/svg" width="%.0f" height="%.0f" viewBox="0 0 %.2f %.2f">`,
		cls, html.EscapeString(label), float64(w)*4/3, float64(h)*4/3, float64(w), float64(h))
	out.WriteString(body)
	out.WriteString(`<g class="marks">` + "\n")
	if m != nil {
		out.Write(m.buf.Bytes())
	}
	out.WriteString("</g>\n")
	out.WriteString(svgTail)
	counts := map[string]int{}
	if m != nil {
		for k, v := range m.count {
			counts[k] = v
		}
	}
	return chart{SVG: out.String(), Counts: counts}, nil
}
