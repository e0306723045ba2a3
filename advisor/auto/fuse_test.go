package auto

import (
	"context"
	"errors"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/pruneadvisor/pruneadvisor/cards"
)

type fixed struct {
	name string
	keep []float64
	err  error
}

func (f fixed) Name() string { return f.name }
func (f fixed) Score(_ context.Context, b cards.Batch) ([]cards.Score, error) {
	out := make([]cards.Score, len(b.Cards))
	for i := range out {
		out[i] = cards.Score{Keep: f.keep[i], OK: f.err == nil}
	}
	return out, f.err
}

// Worked by hand, k = 60. Fitted ranks (high first) a=1 b=2 c=3; the model's c=1
// a=2 b=3. RRF: a 1/61+1/62, b 1/62+1/63, c 1/63+1/61; a (0.032522) > c (0.032266)
// > b (0.032002). The fitted values 0.9, 0.5, 0.1 go to a, c, b in that order.
func TestFuseHand(t *testing.T) {
	f := &Fused{Model: fixed{"m", []float64{0.6, 0.2, 0.95}, nil}, Fitted: fixed{"fitted", []float64{0.9, 0.5, 0.1}, nil}}
	b := cards.Batch{Cards: make([]cards.Card, 3)}
	got, err := f.Score(context.Background(), b)
	if err != nil {
		t.Fatal(err)
	}
	want := []cards.Score{{Keep: 0.9, OK: true}, {Keep: 0.1, OK: true}, {Keep: 0.5, OK: true}}
	if d := cmp.Diff(want, got); d != "" {
		t.Errorf("fused (-want +got):\n%s", d)
	}
	if f.Name() != "fused(m+fitted)" {
		t.Errorf("name %q", f.Name())
	}
	// The model fails: the fitted scores as they are.
	f.Model = fixed{"m", []float64{0, 0, 0}, errors.New("timeout")}
	got, err = f.Score(context.Background(), b)
	if err != nil || got[1].Keep != 0.5 || got[2].Keep != 0.1 {
		t.Errorf("model down: %+v, %v; want the fitted scores", got, err)
	}
}
