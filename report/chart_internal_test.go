package report

import (
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestLabels(t *testing.T) {
	tests := []struct {
		name string
		got  string
		want string
	}{
		{"dollars positive", dollars(1.5, 2), "$1.50"},
		{"dollars negative", dollars(-0.26, 2), "-$0.26"},
		{"dollars negative rounding to zero", dollars(-0.001, 2), "$0.00"},
		{"dollars four places", dollars(-0.04381, 4), "-$0.0438"},
		{"tokens small", tokensLabel(918), "918"},
		{"tokens k", tokensLabel(2500), "2.5k"},
		{"tokens round k", tokensLabel(20_000), "20k"},
		{"tokens M", tokensLabel(1_500_000), "1.5M"},
		{"thousands", thousands(8323735), "8,323,735"},
		{"thousands negative", thousands(-1234), "-1,234"},
		{"thousands small", thousands(999), "999"},
	}
	for _, tt := range tests {
		if tt.got != tt.want {
			t.Errorf("%s: %q, want %q", tt.name, tt.got, tt.want)
		}
	}
}

func TestNiceMaxAndStepTicks(t *testing.T) {
	var got []float64
	for _, v := range []float64{0, 3, 918, 3700, 8000, 157_575} {
		got = append(got, niceMax(v))
	}
	if diff := cmp.Diff([]float64{1, 4, 1000, 4000, 8000, 200_000}, got); diff != "" {
		t.Errorf("niceMax (-want +got):\n%s", diff)
	}
	var ticks []int
	for _, r := range [][2]float64{{6, 7}, {1, 3}, {1, 8}, {1, 400}} {
		ticks = append(ticks, stepTicks(r[0], r[1]))
	}
	if diff := cmp.Diff([]int{1, 2, 4, 4}, ticks); diff != "" {
		t.Errorf("stepTicks (-want +got):\n%s", diff)
	}
}

// TestDoneSeparatesLabels: three labelled dots at one point get three label rows;
// a dot near the right edge is labelled to its left.
func TestDoneSeparatesLabels(t *testing.T) {
	c := newChart("x", "", 500, 300, 0, 1, 0, 1)
	for _, name := range []string{"a", "b", "c"} {
		c.Dots = append(c.Dots, dot{X: c.x(0.1), Y: c.y(0.1), Label: name})
	}
	c.Dots = append(c.Dots, dot{X: c.x(1), Y: c.y(0.5), Label: "edge"})
	c.legend("one", "#000", "")
	c.done()
	var ys []float64
	for _, d := range c.Dots[:3] {
		ys = append(ys, d.LY)
	}
	if ys[0] == ys[1] || ys[1] == ys[2] || ys[0] == ys[2] {
		t.Errorf("label rows %v: labels of one point overlap", ys)
	}
	if e := c.Dots[3]; e.LAnchor != "end" || e.LX >= e.X {
		t.Errorf("edge label at %v anchored %q, want left of %v, end", e.LX, e.LAnchor, e.X)
	}
	if c.H <= c.Top+c.PH+44 || c.Legend[0].Y <= c.Top+c.PH {
		t.Errorf("legend at %v, height %v: want under the plot area (bottom %v)", c.Legend[0].Y, c.H, c.Top+c.PH)
	}
}

// TestDigestFigure: the recommended digest budget as the report shows it: its
// tokens, the share of a long output it grows to when one is recommended, a
// dash when none is.
func TestDigestFigure(t *testing.T) {
	for _, tt := range []struct {
		b           int
		share       float64
		text, value string
	}{
		{128, 0, "128", "128"},
		{128, 0.06, "128, growing to 6% of a long output", "128"},
		{128, 0.07, "128, growing to 7% of a long output", "128"}, // 100 x 0.07 is 7.000000000000001
		{-1, 0, "–", ""},
	} {
		f := digestFigure(tt.b, tt.share)
		if f.Text != tt.text || f.Value != tt.value {
			t.Errorf("digestFigure(%d, %g) = %q (value %q); want %q (%q)", tt.b, tt.share, f.Text, f.Value, tt.text, tt.value)
		}
	}
}
