package tuning

import "testing"

// ScorerName takes back the "@" and 8-digit settings hash ScorerLabel adds when two
// replays share a scorer, and leaves a name that merely holds an '@'.
func TestScorerName(t *testing.T) {
	g1 := &Group{Scorer: "fitted", Hash: "1a2b3c4d5e6f7a8b"}
	g2 := &Group{Scorer: "fitted", Hash: "99aa88bb77cc66dd"}
	solo := &Group{Scorer: "fitted:/home/u@x/m.json", Hash: "0011223344556677"}
	for _, tt := range []struct{ label, want string }{
		{ScorerLabel(g1, []*Group{g1, g2}), "fitted"},
		{ScorerLabel(g1, []*Group{g1}), "fitted"},
		{ScorerLabel(solo, []*Group{solo}), "fitted:/home/u@x/m.json"},
		{"ollama:qwen2.5:0.5b@latest", "ollama:qwen2.5:0.5b@latest"},
	} {
		if got := ScorerName(tt.label); got != tt.want {
			t.Errorf("ScorerName(%q) = %q; want %q", tt.label, got, tt.want)
		}
	}
	if l := ScorerLabel(g1, []*Group{g1, g2}); l != "fitted@1a2b3c4d" {
		t.Errorf("ScorerLabel of two fitted replays = %q; want fitted@1a2b3c4d", l)
	}
}
