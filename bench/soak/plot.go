package soak

import (
	"fmt"
	"image/color"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
	"gonum.org/v1/plot/vg/vgimg"
	"gonum.org/v1/plot/vg/vgsvg"
)

// Plot writes the series as one figure of five panels (RSS, partition
// state, snapshot bytes written per day, disk and stream bytes, records
// per second) against the simulated day, with the retention window's end
// marked: a PNG when path ends in .png, else an SVG.
func Plot(res Result, path string) error {
	type panel struct {
		title, unit string
		series      map[string]func(Day) float64
	}
	mib := func(v int64) float64 { return float64(v) / (1 << 20) }
	panels := []panel{
		{"worker RSS", "MiB", map[string]func(Day) float64{"rss": func(d Day) float64 { return mib(d.RSS) }}},
		{"partition state (newest snapshots)", "MiB", map[string]func(Day) float64{"state": func(d Day) float64 { return mib(d.StateBytes) }}},
		{"snapshot bytes written per day", "MiB", map[string]func(Day) float64{"snapshots": func(d Day) float64 { return mib(max(d.SnapshotBytes, 0)) }}},
		{"bytes on disk", "MiB", map[string]func(Day) float64{
			"data directory": func(d Day) float64 { return mib(d.DiskBytes) },
			"traces stream":  func(d Day) float64 { return mib(d.StreamBytes) }}},
		{"records per second (replay + drain)", "records/s", map[string]func(Day) float64{"records/s": func(d Day) float64 { return d.RecordsPerSecond }}},
	}
	colors := [...]color.Color{color.RGBA{R: 0x1f, G: 0x77, B: 0xb4, A: 0xff}, color.RGBA{R: 0xd6, G: 0x27, B: 0x28, A: 0xff}}
	const w, h = 8 * vg.Inch, 2.2 * vg.Inch
	var c vg.CanvasWriterTo
	if strings.EqualFold(filepath.Ext(path), ".png") {
		c = vgimg.PngCanvas{Canvas: vgimg.New(w, h*vg.Length(len(panels)))}
	} else {
		c = vgsvg.New(w, h*vg.Length(len(panels)))
	}
	dc := draw.New(c)
	tiles := draw.Tiles{Rows: len(panels), Cols: 1, PadX: vg.Millimeter, PadY: 2 * vg.Millimeter,
		PadTop: vg.Millimeter, PadBottom: vg.Millimeter, PadLeft: vg.Millimeter, PadRight: vg.Millimeter}
	for i, pn := range panels {
		p := plot.New()
		p.Title.Text = pn.title
		p.X.Label.Text = "simulated day"
		p.Y.Label.Text = pn.unit
		p.Y.Min = 0
		p.Add(plotter.NewGrid())
		k := 0
		for _, name := range sortedKeys(pn.series) {
			f := pn.series[name]
			pts := make(plotter.XYs, len(res.Series))
			for j, d := range res.Series {
				pts[j] = plotter.XY{X: float64(d.Day), Y: f(d)}
			}
			l, err := plotter.NewLine(pts)
			if err != nil {
				return fmt.Errorf("plot %s: %w", pn.title, err)
			}
			l.Color = colors[k%len(colors)]
			l.Width = vg.Points(1.5)
			p.Add(l)
			p.Legend.Add(name, l)
			k++
		}
		if res.Retention > 0 && res.Retention < len(res.Series) {
			// The retention window is full from this day on.
			top := 0.0
			for _, d := range res.Series {
				for _, f := range pn.series {
					top = max(top, f(d))
				}
			}
			v, err := plotter.NewLine(plotter.XYs{{X: float64(res.Retention), Y: 0}, {X: float64(res.Retention), Y: top}})
			if err == nil {
				v.Dashes = []vg.Length{vg.Points(3), vg.Points(3)}
				p.Add(v)
			}
		}
		p.Legend.Top = true
		p.Draw(tiles.At(dc, 0, i))
	}
	f, err := os.Create(path)
	if err != nil {
		return fmt.Errorf("plot: %w", err)
	}
	if _, err := c.WriteTo(f); err != nil {
		f.Close()
		return fmt.Errorf("plot %s: %w", path, err)
	}
	return f.Close()
}

func sortedKeys[V any](m map[string]V) []string {
	return slices.Sorted(maps.Keys(m))
}
