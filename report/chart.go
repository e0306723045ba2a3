package report

import (
	"fmt"
	"math"
	"strconv"
	"strings"
)

// chart is one plot as the templates draw it in inline SVG ("chart" in
// common.html): every coordinate is in SVG user units, computed here.
type chart struct {
	ID         string // element id (also the test's handle)
	Title      string
	W, H       float64
	Left, Top  float64 // the plot area's corner
	PW, PH     float64 // the plot area's size
	XLabel     string
	YLabel     string
	XTicks     []tick
	YTicks     []tick
	Rules      []rule // horizontal lines across the plot area (budget, hard limit)
	Lines      []line
	Dots       []dot
	Marks      []mark // vertical ticks along the bottom of the plot area
	Legend     []legendItem
	Caption    string
	xmin, xmax float64
	ymin, ymax float64
}

type tick struct {
	Pos   float64
	Label string
}

type rule struct {
	Y     float64
	Label string
	Color string
	Dash  string
}

type line struct {
	Name   string
	Color  string
	Dash   string
	Points string // "x,y x,y ..."
}

type dot struct {
	X, Y  float64
	R     float64
	Color string
	Title string // the tooltip: name and figures
	Label string // drawn beside the dot ("" for none)
	// LX, LY place the label (done moves labels apart); LAnchor is its
	// text-anchor ("start", or "end" near the right edge).
	LX, LY  float64
	LAnchor string
}

type mark struct {
	X     float64
	Y1    float64
	Y2    float64
	Color string
	Title string
}

type legendItem struct {
	X, Y  float64
	Color string
	Dash  string
	Name  string
}

// newChart returns a chart of size w x h with its axes over [xmin, xmax] x [ymin,
// ymax] (a degenerate range is widened to 1).
func newChart(id, title string, w, h, xmin, xmax, ymin, ymax float64) *chart {
	if xmax <= xmin {
		xmax = xmin + 1
	}
	if ymax <= ymin {
		ymax = ymin + 1
	}
	c := &chart{ID: id, Title: title, W: w, H: h, Left: 64, Top: 24, xmin: xmin, xmax: xmax, ymin: ymin, ymax: ymax}
	c.PW, c.PH = w-c.Left-16, h-c.Top-44
	return c
}

// x and y map data coordinates to SVG user units (clamped to the plot area).
func (c *chart) x(v float64) float64 {
	return round1(c.Left + c.PW*clamp01((v-c.xmin)/(c.xmax-c.xmin)))
}

func (c *chart) y(v float64) float64 {
	return round1(c.Top + c.PH*(1-clamp01((v-c.ymin)/(c.ymax-c.ymin))))
}

func clamp01(f float64) float64 {
	if math.IsNaN(f) {
		return 0
	}
	return min(max(f, 0), 1)
}

func round1(f float64) float64 { return math.Round(f*10) / 10 }

// ticks puts nx+1 evenly spaced ticks on the x axis (at whole numbers when
// whole) and 5 on the y axis, labelled by fx and fy.
func (c *chart) ticks(nx int, whole bool, fx, fy func(float64) string) {
	last := math.NaN()
	for i := 0; i <= nx; i++ {
		v := c.xmin + (c.xmax-c.xmin)*float64(i)/float64(nx)
		if whole {
			v = math.Round(v)
		}
		if v == last {
			continue
		}
		last = v
		c.XTicks = append(c.XTicks, tick{c.x(v), fx(v)})
	}
	for i := 0; i <= 4; i++ {
		v := c.ymin + (c.ymax-c.ymin)*float64(i)/4
		c.YTicks = append(c.YTicks, tick{c.y(v), fy(v)})
	}
}

// polyline adds a line through the points (xs[i], ys[i]).
func (c *chart) polyline(name, color, dash string, xs, ys []float64) {
	var b strings.Builder
	for i := range xs {
		if i > 0 {
			b.WriteByte(' ')
		}
		b.WriteString(strconv.FormatFloat(c.x(xs[i]), 'f', -1, 64))
		b.WriteByte(',')
		b.WriteString(strconv.FormatFloat(c.y(ys[i]), 'f', -1, 64))
	}
	c.Lines = append(c.Lines, line{Name: name, Color: color, Dash: dash, Points: b.String()})
	c.legend(name, color, dash)
}

// legend adds an entry to the legend (placed by done).
func (c *chart) legend(name, color, dash string) {
	for _, l := range c.Legend {
		if l.Name == name {
			return
		}
	}
	c.Legend = append(c.Legend, legendItem{Color: color, Dash: dash, Name: name})
}

// done places the legend in rows under the x axis's label, the height growing to
// hold them, and moves apart the labels of dots that would overlap.
func (c *chart) done() *chart {
	const colW, rowH = 190, 15
	perRow := max(1, int(c.PW/colW))
	base := c.Top + c.PH + 46
	for i := range c.Legend {
		col, row := i%perRow, i/perRow
		c.Legend[i].X, c.Legend[i].Y = c.Left+float64(col)*colW, base+rowH*float64(row)
	}
	rows := (len(c.Legend) + perRow - 1) / perRow
	c.H = base + rowH*float64(max(rows, 1)) - 4
	type box struct{ x, y float64 }
	var placed []box
	for i := range c.Dots {
		d := &c.Dots[i]
		if d.Label == "" {
			continue
		}
		x, y, anchor := d.X+7, d.Y+4, "start"
		if d.X > c.Left+c.PW-120 {
			x, anchor = d.X-7, "end"
		}
		for moved := true; moved; {
			moved = false
			for _, b := range placed {
				if math.Abs(b.x-x) < 110 && math.Abs(b.y-y) < 12 {
					y -= 12
					moved = true
				}
			}
		}
		placed = append(placed, box{x, y})
		d.LX, d.LY, d.LAnchor = x, y, anchor
	}
	return c
}

// hrule adds a horizontal line at data value v when it lies within the y range.
func (c *chart) hrule(v float64, label, color, dash string) bool {
	if v < c.ymin || v > c.ymax {
		return false
	}
	c.Rules = append(c.Rules, rule{Y: c.y(v), Label: label, Color: color, Dash: dash})
	return true
}

// palette is the colour of the i-th series.
func palette(i int) string {
	p := []string{"#1f77b4", "#d62728", "#9467bd", "#8c564b", "#e377c2", "#17becf", "#bcbd22", "#7f7f7f"}
	return p[i%len(p)]
}

// thousands writes n with thin separators: 123456 -> "123,456".
func thousands(n int64) string {
	s := strconv.FormatInt(n, 10)
	neg := strings.HasPrefix(s, "-")
	if neg {
		s = s[1:]
	}
	var b strings.Builder
	for i, r := range s {
		if i > 0 && (len(s)-i)%3 == 0 {
			b.WriteByte(',')
		}
		b.WriteRune(r)
	}
	if neg {
		return "-" + b.String()
	}
	return b.String()
}

// tokensLabel labels a token axis: 0, 500, 2.5k, 12k, 1.5M.
func tokensLabel(v float64) string {
	trim := func(f float64, unit string) string {
		return strings.TrimSuffix(strings.TrimSuffix(strconv.FormatFloat(f, 'f', 1, 64), "0"), ".") + unit
	}
	switch {
	case math.Abs(v) >= 1e6:
		return trim(v/1e6, "M")
	case math.Abs(v) >= 1e3:
		return trim(v/1e3, "k")
	}
	return strconv.FormatFloat(math.Round(v), 'f', 0, 64)
}

func fixed2(v float64) string { return fmt.Sprintf("%.2f", v) }

// niceMax returns the smallest 4 x step at or above v, step one of 1, 2, 2.5 or 5
// times a power of ten: an axis over [0, niceMax(v)] gets round ticks.
func niceMax(v float64) float64 {
	if v <= 0 {
		return 1
	}
	raw := v / 4
	p := math.Pow(10, math.Floor(math.Log10(raw)))
	for _, m := range []float64{1, 2, 2.5, 5, 10} {
		if m*p >= raw*(1-1e-12) {
			return 4 * m * p
		}
	}
	return 40 * p
}

// stepTicks is the number of tick intervals of a step axis over [first, last]: 4,
// or fewer when fewer steps would repeat labels.
func stepTicks(first, last float64) int { return max(1, min(4, int(last-first))) }

func stepLabel(v float64) string { return strconv.FormatFloat(math.Round(v), 'f', 0, 64) }
