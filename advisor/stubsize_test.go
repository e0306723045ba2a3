package advisor_test

import (
	"strings"
	"testing"

	"github.com/pruneadvisor/pruneadvisor/advisor"
	"github.com/pruneadvisor/pruneadvisor/evidence"
	"github.com/pruneadvisor/pruneadvisor/internal/sessionfiles"
	"github.com/pruneadvisor/pruneadvisor/tokencount"
	"github.com/pruneadvisor/pruneadvisor/transcript"
)

// TestStubsShorterThanTheirOutputs: on real sessions, pruned as far as the
// protections allow (every card scored 0, a small budget, forced rewrites not
// priced), every stub is shorter than the output it replaces, and a stub's digest
// never takes it over Config.StubMaxShare of the output: the stub's o200k tokens,
// digest included, stay within the share (docs/DESIGN.md, invariant 7), and the
// digest's names cost the sum of their evidence.DigestNameTokens. Counted here
// from the stub text itself, not from the advisor's own accounting.
func TestStubsShorterThanTheirOutputs(t *testing.T) {
	files := sessionfiles.Sample("../../shared")
	if len(files) < 50 {
		sessionfiles.Missing(t, "only %d real sessions found", len(files))
	}
	cfg := advisor.DefaultConfig()
	cfg.Budget = 20_000
	cfg.PriceForced = false
	stubs, digests, sessions := 0, 0, 0
	for _, f := range files {
		if sessions == 12 {
			break
		}
		s, err := transcript.ReadFile(f, transcript.Options{Lenient: true})
		if err != nil || len(s.Messages) > 400 {
			continue
		}
		sessions++
		tokens := map[string]int{}
		for _, m := range s.Messages {
			for _, o := range m.Outputs {
				tokens[o.Key] = o.Tokens
			}
		}
		steps := simulate(t, newAdvisor(t, cfg, constScorer(0), advisor.NewMemoryStore(), nil), s)
		last := steps[len(steps)-1].plan
		for key, stub := range last.Stubs {
			stubs++
			n := tokencount.Count(stub)
			if n >= tokens[key] {
				t.Errorf("%s: stub of %s is %d tokens, the output %d: %q", f, key, n, tokens[key], stub)
			}
			_, rest, ok := strings.Cut(stub, "; it named ")
			if !ok {
				continue
			}
			digests++
			// The stub's own tokens, counted whole, stay within the share.
			if limit := cfg.StubMaxShare * float64(tokens[key]); float64(n) > limit {
				t.Errorf("%s: stub of %s is %d tokens with its digest, over %.2f of the output's %d (%.0f): %q",
					f, key, n, cfg.StubMaxShare, tokens[key], limit, stub)
			}
			// The digest's names, joined by spaces, cost what the advisor budgeted:
			// the sum of evidence.DigestNameTokens over the space-separated words
			// (a quoted phrase costs the sum of its words too, o200k never joining
			// text across a space before a non-space).
			names, _, _ := strings.Cut(rest, "; ")
			sum := 0
			for _, name := range strings.Split(names, " ") {
				sum += evidence.DigestNameTokens(name)
			}
			if got := tokencount.Count(" " + names); got != sum {
				t.Errorf("%s: digest %q is %d tokens; its names cost %d", f, names, got, sum)
			}
		}
	}
	t.Logf("%d stubs (%d with a digest) on %d sessions", stubs, digests, sessions)
	if stubs < 100 || digests < 50 {
		t.Fatalf("only %d stubs, %d with a digest, on %d sessions: the test checks too little", stubs, digests, sessions)
	}
}

// TestDigestBudget works out by hand the digest budget of a stub (DigestBudget):
// StubMaxShare of the output, less the stub without a digest and the digest's
// framing (DigestFrameTokens, 3), at most Config.DigestTokens and never below 0.
// With the defaults (128 tokens, a share of 0.5) and a stub of 40 tokens: 400
// tokens give 200-40-3 = 157, cut to 128; 200 give 100-43 = 57; 201 give
// int(100.5)-43 = 57; 80 give 40-43 < 0, so 0; digests off (0 tokens) give 0.
// With DigestShare 0.06 an output of 10,000 tokens gets 600 (under its half
// less the stub), one of 400 still 128, one of 1,000 max(128, 60) = 128; and
// with StubMaxShare 0.05, 10,000 tokens give 500-43 = 457, under the share's 600.
func TestDigestBudget(t *testing.T) {
	for _, tt := range []struct {
		digestTokens       int
		share, maxShare    float64
		stub, tokens, want int
	}{
		{128, 0, 0.5, 40, 400, 128},
		{128, 0, 0.5, 40, 200, 57},
		{128, 0, 0.5, 40, 201, 57},
		{128, 0, 0.5, 40, 80, 0},
		{0, 0, 0.5, 40, 400, 0},
		{128, 0, 0.5, 40, 10_000, 128},
		{128, 0.06, 0.5, 40, 10_000, 600},
		{128, 0.06, 0.5, 40, 400, 128},
		{128, 0.06, 0.5, 40, 1_000, 128},
		{128, 0.06, 0.05, 40, 10_000, 457},
		{0, 0.06, 0.5, 40, 10_000, 0},
	} {
		cfg := advisor.DefaultConfig()
		cfg.DigestTokens, cfg.DigestShare, cfg.StubMaxShare = tt.digestTokens, tt.share, tt.maxShare
		if got := advisor.DigestBudget(cfg, tt.stub, tt.tokens); got != tt.want {
			t.Errorf("DigestBudget(DigestTokens %d, DigestShare %g, StubMaxShare %g, stub %d, output %d) = %d; want %d", tt.digestTokens, tt.share, tt.maxShare, tt.stub, tt.tokens, got, tt.want)
		}
	}
}
