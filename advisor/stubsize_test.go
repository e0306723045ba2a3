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
// never takes it over Config.StubMaxShare of the output: its text without the
// digest plus the digest's names at evidence.DigestNameTokens each stays within
// the share (docs/DESIGN.md, invariant 7). Counted here from the stub text itself,
// not from the advisor's own accounting.
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
			head, rest, ok := strings.Cut(stub, "; it named ")
			if !ok {
				continue
			}
			digests++
			names, tail, _ := strings.Cut(rest, "; ")
			cost := tokencount.Count(head + "; " + tail)
			for _, name := range strings.Split(names, ", ") {
				cost += evidence.DigestNameTokens(name)
			}
			if limit := cfg.StubMaxShare * float64(tokens[key]); float64(cost) > limit {
				t.Errorf("%s: stub of %s costs %d tokens with its digest, over %.2f of the output's %d (%.0f): %q",
					f, key, cost, cfg.StubMaxShare, tokens[key], limit, stub)
			}
		}
	}
	t.Logf("%d stubs (%d with a digest) on %d sessions", stubs, digests, sessions)
	if stubs < 100 || digests < 50 {
		t.Fatalf("only %d stubs, %d with a digest, on %d sessions: the test checks too little", stubs, digests, sessions)
	}
}
