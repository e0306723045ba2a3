package main

import "testing"

// TestReasonClass: advise's pruned line counts decisions by kind, the reasons'
// scores and cutoffs left out (the reasons as advisor writes them: step.go,
// lastresort.go, rules).
func TestReasonClass(t *testing.T) {
	for _, tt := range []struct{ reason, want string }{
		{"score 0.03 < cutoff 0.05", "score"},
		{"over budget, score 0.03 < over-budget cutoff 0.10", "over budget"},
		{"over budget, score 0.09 < over-budget cutoff 0.10", "over budget"},
		{"hard limit, score 0.41 the lowest kept", "hard limit"},
		{"hard limit, last resort: score 0.20 < cutoff 0.05", "hard limit, last resort"},
		{"superseded by toolu_01", "superseded"},
		{"duplicate by call toolu_13Test", "duplicate"},
		{"disposable", "disposable"},
		{"something new", "something new"},
	} {
		if got := reasonClass(tt.reason); got != tt.want {
			t.Errorf("reasonClass(%q) = %q; want %q", tt.reason, got, tt.want)
		}
	}
}
