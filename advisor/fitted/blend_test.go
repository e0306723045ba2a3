package fitted

import (
	"math"
	"testing"

	"github.com/pruneadvisor/pruneadvisor/cards"
)

// A blend mixes the two models' keep-probabilities at its weight, worked by hand:
// handModel gives 0.0571846 for a card 9 steps old never used (TestPredictHand);
// a second model with bias 0 and no weights gives σ(0) = 0.5; blended at 0.25,
// 0.75 x 0.0571846 + 0.25 x 0.5 = 0.16788845.
func TestBlendPredict(t *testing.T) {
	m, other := handModel(), handModel()
	for i := range other.Weights {
		other.Weights[i] = 0
	}
	other.Bias = 0
	m.Blend, m.BlendWeight = other, 0.25
	if err := m.Validate(); err != nil {
		t.Fatal(err)
	}
	if got := m.Predict(&cards.Signals{Age: 9}); math.Abs(got-0.16788845) > 1e-7 {
		t.Errorf("blended Predict = %.8f, want 0.16788845", got)
	}
	data, err := m.Marshal()
	if err != nil {
		t.Fatal(err)
	}
	back, err := Parse("blend.json", data)
	if err != nil || back.Predict(&cards.Signals{Age: 9}) != m.Predict(&cards.Signals{Age: 9}) {
		t.Errorf("round trip: %v", err)
	}
}

func TestBlendParseErrors(t *testing.T) {
	blended := func() *Model {
		m := handModel()
		m.Blend, m.BlendWeight = handModel(), 0.15
		return m
	}
	edit := editOf(blended)
	wantParseErrors(t, []parseCase{
		{"weight without a blend", editOf(handModel)(func(m *Model) { m.BlendWeight = 0.2 }), "blend_weight: 0.2 without a blend"},
		{"weight 0", edit(func(m *Model) { m.BlendWeight = 0 }), "blend_weight: 0, want a number between 0 and 1"},
		{"weight 1", edit(func(m *Model) { m.BlendWeight = 1 }), "blend_weight: 1, want a number between 0 and 1"},
		{"nested blend", edit(func(m *Model) { m.Blend.Blend, m.Blend.BlendWeight = handModel(), 0.5 }), "one level only"},
		{"bad blended model", edit(func(m *Model) { m.Blend.Scale[1] = 0 }), "blend: "},
	})
}

// Train with Options.Blend trains the top model on Row.Miss and the blend on
// Row.Used: on synthetic rows whose miss label is "used and never used before"
// (rate 0.1 among the never used, 0 elsewhere), the top model alone ranks a never
// used card above a recently used one, the blend the other way, and the blend
// carries the use label's counts.
func TestTrainBlend(t *testing.T) {
	rows := synthetic(3000, 1)
	misses := 0
	for i := range rows {
		rows[i].Miss = rows[i].Used && rows[i].Signals.Uses == 0
		if rows[i].Miss {
			misses++
		}
	}
	m, err := Train(rows, Options{Lambda: DefaultLambda, Blend: 0.3})
	if err != nil {
		t.Fatal(err)
	}
	if m.Blend == nil || m.BlendWeight != 0.3 || m.Training.Positives != misses || m.Blend.Training.Positives+m.Blend.Training.Negatives != 3000 {
		t.Fatalf("blend %v at %v, %d miss positives (want %d)", m.Blend != nil, m.BlendWeight, m.Training.Positives, misses)
	}
	recent := &cards.Signals{Step: 50, Age: 20, Tokens: 1000, Action: "read", Uses: 2, LastUseAgo: 2, RecentUses: 1}
	never := &cards.Signals{Step: 50, Age: 20, Tokens: 1000, Action: "read"}
	if m.predictOne(never) <= m.predictOne(recent) {
		t.Errorf("miss model: never used %.3f, recently used %.3f; want never used higher", m.predictOne(never), m.predictOne(recent))
	}
	want := 0.7*m.predictOne(recent) + 0.3*m.Blend.predictOne(recent)
	if got := m.Predict(recent); math.Abs(got-want) > 1e-12 {
		t.Errorf("Predict = %v, want the blend %v", got, want)
	}
	if _, err := Train(rows, Options{Blend: 1}); err == nil {
		t.Error("blend 1: no error")
	}
}
