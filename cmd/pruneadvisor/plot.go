package main

import (
	"fmt"
	"image/color"
	"os"
	"path/filepath"
	"strings"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/plotutil"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
	"gonum.org/v1/plot/vg/vgimg"
	"gonum.org/v1/plot/vg/vgsvg"

	"github.com/pruneadvisor/pruneadvisor/calibrate"
)

// Plot size.
const (
	plotWidth  = 12 * vg.Inch
	plotHeight = 5 * vg.Inch
)

// writePlot writes the calibrate report as a two-panel figure to path (`calibrate
// --plot`), PNG or SVG by its extension (".png", ".svg", any case; a usage error
// otherwise). Left: the reliability curve of every scorer (observed later-use rate
// against mean keep-probability per non-empty bin, with the diagonal of perfect
// calibration). Right, for the report's first budget: share of tool-output
// token-steps saved against miss rate (decision level) for every scorer's sweep (a
// line over its cutoffs), the random baseline at the same prune rates (dashed), and
// every baseline and anchor as a point; the target miss rate is a vertical line.
// Rendering lives here, in the command, so package calibrate stays free of plotting.
func writePlot(path string, r calibrate.Report) error {
	var c vg.CanvasWriterTo
	switch strings.ToLower(filepath.Ext(path)) {
	case ".png":
		c = vgimg.PngCanvas{Canvas: vgimg.New(plotWidth, plotHeight)}
	case ".svg":
		c = vgsvg.New(plotWidth, plotHeight)
	default:
		return usageError{fmt.Errorf("--plot %s: the extension must be .png or .svg", path)}
	}
	rel, err := reliabilityPlot(r)
	if err != nil {
		return fmt.Errorf("plot %s: %w", path, err)
	}
	sav, err := savingsPlot(r)
	if err != nil {
		return fmt.Errorf("plot %s: %w", path, err)
	}
	dc := draw.New(c)
	tiles := draw.Tiles{Rows: 1, Cols: 2, PadX: vg.Inch / 4, PadTop: vg.Inch / 8, PadBottom: vg.Inch / 8, PadLeft: vg.Inch / 8, PadRight: vg.Inch / 8}
	rel.Draw(tiles.At(dc, 0, 0))
	sav.Draw(tiles.At(dc, 1, 0))
	f, err := os.Create(path)
	if err != nil {
		return fmt.Errorf("plot: %w", err)
	}
	if _, err := c.WriteTo(f); err != nil {
		f.Close()
		return fmt.Errorf("plot %s: %w", path, err)
	}
	if err := f.Close(); err != nil {
		return fmt.Errorf("plot %s: %w", path, err)
	}
	return nil
}

func reliabilityPlot(r calibrate.Report) (*plot.Plot, error) {
	p := plot.New()
	p.Title.Text = "Reliability"
	p.X.Label.Text = "keep-probability (bin mean)"
	p.Y.Label.Text = "used later (rate)"
	p.X.Min, p.X.Max, p.Y.Min, p.Y.Max = 0, 1, 0, 1
	p.Legend.Top, p.Legend.Left = true, true
	diag, err := plotter.NewLine(plotter.XYs{{X: 0, Y: 0}, {X: 1, Y: 1}})
	if err != nil {
		return nil, err
	}
	diag.Color = color.Gray{Y: 160}
	diag.Dashes = []vg.Length{vg.Points(2), vg.Points(2)}
	p.Add(diag)
	p.Legend.Add("perfect", diag)
	for i, s := range r.Scorers {
		var xys plotter.XYs
		for _, b := range s.Reliability.Bins {
			if b.N > 0 {
				xys = append(xys, plotter.XY{X: b.MeanScore, Y: b.Rate})
			}
		}
		if len(xys) == 0 {
			continue
		}
		l, pts, err := lineSeries(xys, i)
		if err != nil {
			return nil, err
		}
		p.Add(l, pts)
		p.Legend.Add(s.Scorer, l, pts)
	}
	return p, nil
}

// lineSeries is one line with its points through xys, in the i-th colour and point
// shape of plotutil's palette (one per scorer).
func lineSeries(xys plotter.XYs, i int) (*plotter.Line, *plotter.Scatter, error) {
	l, pts, err := plotter.NewLinePoints(xys)
	if err != nil {
		return nil, nil, err
	}
	l.Color, pts.Color = plotutil.Color(i), plotutil.Color(i)
	pts.Shape = plotutil.Shape(i)
	return l, pts, nil
}

func savingsPlot(r calibrate.Report) (*plot.Plot, error) {
	p := plot.New()
	var b calibrate.BudgetReport
	if len(r.Budgets) > 0 {
		b = r.Budgets[0]
	}
	p.Title.Text = fmt.Sprintf("Savings vs miss rate (budget %d)", b.Budget)
	p.X.Label.Text = "miss rate (pruned outputs used later)"
	p.Y.Label.Text = "share of tool-output token-steps saved"
	p.X.Min, p.Y.Min, p.Y.Max = 0, 0, 1
	p.Legend.Top = true
	for i, s := range b.Scorers {
		// The scorer's front (the sweep refined where neighbours are far apart:
		// calibrate.Evaluator.Front), with the random baseline at the sweep's prune
		// rates.
		front := s.Front
		if len(front) == 0 {
			front = s.Sweep
		}
		for k, series := range [][]calibrate.Result{front, s.Random} {
			var xys plotter.XYs
			for _, x := range series {
				xys = append(xys, plotter.XY{X: x.MissRate, Y: x.SavedShare()})
			}
			if len(xys) == 0 {
				continue
			}
			l, pts, err := lineSeries(xys, i)
			if err != nil {
				return nil, err
			}
			name := s.Scorer
			if k == 1 {
				l.Dashes = []vg.Length{vg.Points(4), vg.Points(3)}
				pts.Radius = vg.Points(1.5)
				name = "random, prune rate of " + s.Scorer
			}
			p.Add(l, pts)
			p.Legend.Add(name, l, pts)
		}
	}
	for j, x := range append(append([]calibrate.Result(nil), b.Baselines...), b.Anchors...) {
		sc, err := plotter.NewScatter(plotter.XYs{{X: x.MissRate, Y: x.SavedShare()}})
		if err != nil {
			return nil, err
		}
		k := len(b.Scorers) + j
		sc.Color = plotutil.Color(k)
		sc.Shape = plotutil.Shape(k)
		sc.Radius = vg.Points(4)
		p.Add(sc)
		p.Legend.Add(x.Name, sc)
	}
	if r.TargetMiss > 0 {
		t, err := plotter.NewLine(plotter.XYs{{X: r.TargetMiss, Y: 0}, {X: r.TargetMiss, Y: 1}})
		if err != nil {
			return nil, err
		}
		t.Color = color.Gray{Y: 120}
		t.Dashes = []vg.Length{vg.Points(1), vg.Points(3)}
		p.Add(t)
		p.Legend.Add(fmt.Sprintf("target miss %.2f", r.TargetMiss), t)
	}
	return p, nil
}
