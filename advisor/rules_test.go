package advisor_test

import (
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/pruneadvisor/pruneadvisor/advisor"
	"github.com/pruneadvisor/pruneadvisor/evidence"
	"github.com/pruneadvisor/pruneadvisor/tokencount"
	"github.com/pruneadvisor/pruneadvisor/transcript"
)

// rulesSession: a read of config.go superseded by an edit and a re-read, and a test
// run repeated byte for byte.
func rulesSession(t *testing.T) (*transcript.Session, map[string]string) {
	c := newChat("Change the port to 9090")
	texts := map[string]string{}
	texts["c1"] = filler("config.go v1", 400)
	c.read("Reading the config.", "/app/config.go", texts["c1"])
	c.call("Changing it.", "Edit", `{"file_path":"/app/config.go","old_string":"8080","new_string":"9090"}`,
		"The file /app/config.go has been updated successfully.")
	texts["c3"] = filler("config.go v2", 400)
	c.read("Checking the edit.", "/app/config.go", texts["c3"])
	texts["c4"] = filler("test output", 300)
	c.call("Running the tests.", "Bash", `{"command":"go test ./..."}`, texts["c4"])
	c.call("Once more.", "Bash", `{"command":"go test ./..."}`, texts["c4"])
	for i := 0; i < 4; i++ {
		c.call("", "Bash", `{"command":"ls"}`, fmt.Sprintf("a b %d", i))
	}
	return c.session(t, "rules.json"), texts
}

// Rule deaths become pending when they leave the protected window and are pruned
// with a reason naming the superseding call; the stub has docs/DESIGN.md's shape.
func TestRuleDeathsStubText(t *testing.T) {
	s, texts := rulesSession(t)
	cfg := advisor.DefaultConfig()
	cfg.RemainingMin = 100_000 // every pending prune pays for itself at once
	store := advisor.NewMemoryStore()
	adv := newAdvisor(t, cfg, nil, store, newClock())
	steps := simulate(t, adv, s)

	tokens := func(k string) int { return tokencount.Count(texts[k]) }
	tests := []struct {
		key, by, reason, recallID string
		prunedAt                  int
		stub                      string
	}{
		// c1 is the read at step 1; c3 (step 3) re-read the file after the edit c2.
		// Recall ids computed with python3: "o_" + sha256("rules.json\x00c1")[:10].
		{"c1", "c3", "superseded by call c3", "o_839409989792", 5,
			fmt.Sprintf(`[pruned: Read /app/config.go, %s tokens, superseded by call c3; recall("o_839409989792") restores it]`, commas(tokens("c1")))},
		// c4 (step 4) is repeated byte for byte by c5 (step 5); it leaves the
		// protected window (K = 3) at step 8.
		{"c4", "c5", "duplicate by call c5", "o_916058528016", 8,
			fmt.Sprintf(`[pruned: Bash go test ./..., %s tokens, duplicate by call c5; recall("o_916058528016") restores it]`, commas(tokens("c4")))},
	}
	final := steps[len(steps)-1].plan
	for _, tt := range tests {
		it := item(t, final, tt.key)
		got := struct {
			Decision advisor.Decision
			Reason   string
			By       string
			RecallID string
			Stub     string
		}{it.Decision, it.Reason, it.By, it.RecallID, it.Stub}
		want := struct {
			Decision advisor.Decision
			Reason   string
			By       string
			RecallID string
			Stub     string
		}{advisor.DecisionPruned, tt.reason, tt.by, tt.recallID, tt.stub}
		if d := cmp.Diff(want, got); d != "" {
			t.Errorf("%s (-want +got):\n%s", tt.key, d)
		}
		// Pending exactly from the step it left the protected window, pruned the same
		// step (RewriteFraction 0), and the step before it was still protected.
		before := item(t, steps[tt.prunedAt-2].plan, tt.key)
		at := item(t, steps[tt.prunedAt-1].plan, tt.key)
		if before.Decision != advisor.DecisionProtected || at.Decision != advisor.DecisionPruned || at.DecidedAt != tt.prunedAt {
			t.Errorf("%s: step %d %s, step %d %s (decided at %d); want protected then pruned at %d",
				tt.key, tt.prunedAt-1, before.Decision, tt.prunedAt, at.Decision, at.DecidedAt, tt.prunedAt)
		}
		if got := outputText(t, steps[len(steps)-1].out, tt.key); got != tt.stub {
			t.Errorf("%s: returned message holds %q, want the stub", tt.key, got)
		}
	}
	// The decision records name the superseding call.
	var pend []string
	for _, d := range store.Decisions() {
		if d.Decision == advisor.DecisionPending {
			pend = append(pend, d.OutputKey+"<"+d.Superseder)
		}
	}
	if d := cmp.Diff([]string{"c1<c3", "c4<c5"}, pend); d != "" {
		t.Errorf("pending decision records (-want +got):\n%s", d)
	}
	// The superseding outputs themselves stay.
	for _, k := range []string{"c3", "c5"} {
		if it := item(t, final, k); it.Decision == advisor.DecisionPruned || it.Decision == advisor.DecisionPending {
			t.Errorf("%s is %s, want kept", k, it.Decision)
		}
	}
}

// TestRuleDeadStubHasNoDigest: a rule-dead output's stub names nothing (stubText:
// its content is in context again), even when the output had a live name a digest
// would hold. The first read of config.go carries legacyPort_8080, which the
// re-read after the edit does not: an evidence.Tracker set up as the advisor's
// state sets its own (digest budget, minimum size, protected steps) keeps it in
// the first read's digest, and the advisor's stub of that read, superseded by the
// re-read, has no "it named".
func TestRuleDeadStubHasNoDigest(t *testing.T) {
	c := newChat("Change the port to 9090")
	c.read("Reading the config.", "/app/config.go", "const legacyPort_8080 = 8080\n"+filler("config.go v1", 400))
	c.call("Changing it.", "Edit", `{"file_path":"/app/config.go","old_string":"8080","new_string":"9090"}`,
		"The file /app/config.go has been updated successfully.")
	c.read("Checking the edit.", "/app/config.go", filler("config.go v2", 400))
	for i := 0; i < 4; i++ {
		c.call("", "Bash", `{"command":"ls"}`, fmt.Sprintf("a b %d", i))
	}
	s := c.session(t, "ruledigest.json")
	cfg := advisor.DefaultConfig()
	cfg.RemainingMin = 100_000 // every pending prune pays for itself at once
	adv := newAdvisor(t, cfg, nil, advisor.NewMemoryStore(), newClock())
	steps := simulate(t, adv, s)

	tr := evidence.NewTracker()
	tr.Background = adv.Background
	tr.DigestTokens, tr.DigestMinTokens, tr.DigestFrom = cfg.DigestTokens, cfg.MinCandidateTokens, cfg.ProtectedSteps
	for _, m := range s.Messages {
		if _, err := tr.Add(m); err != nil {
			t.Fatal(err)
		}
	}
	if names := tr.Digest("c1", cfg.DigestTokens); !slices.Contains(names, "legacyPort_8080") {
		t.Fatalf("c1's digest %v does not hold legacyPort_8080: the test checks nothing", names)
	}
	it := item(t, steps[len(steps)-1].plan, "c1")
	if it.Decision != advisor.DecisionPruned || it.Reason != "superseded by call c3" || strings.Contains(it.Stub, "it named") {
		t.Errorf("c1: %s (%s), stub %q; want pruned as superseded by call c3, with no digest", it.Decision, it.Reason, it.Stub)
	}
}

// commas formats n with thousands separators, independently of the advisor's own.
func commas(n int) string {
	s := fmt.Sprint(n)
	var parts []string
	for len(s) > 3 {
		parts = append([]string{s[len(s)-3:]}, parts...)
		s = s[:len(s)-3]
	}
	return strings.Join(append([]string{s}, parts...), ",")
}

// A read that leaves the protected window at the very step a rule kills it is not
// asked: the rule decides (a scorer that keeps everything does not override it).
func TestRuleDeathAtCandidateStep(t *testing.T) {
	c := newChat("Change the port")
	c.read("", "/app/config.go", filler("config.go v1", 400))                                          // step 1: c1
	c.call("", "Bash", `{"command":"ls"}`, "a b")                                                      // step 2
	c.call("", "Edit", `{"file_path":"/app/config.go","old_string":"1","new_string":"2"}`, "Updated.") // step 3
	c.read("", "/app/config.go", filler("config.go v2", 400))                                          // step 4: c4
	c.say("Done.")                                                                                     // step 5
	s := c.session(t, "same-step.json")
	sc := constScorer(0.9)
	cfg := advisor.DefaultConfig()
	cfg.RemainingMin = 100_000 // every pending prune pays for itself at once
	steps := simulate(t, newAdvisor(t, cfg, sc, advisor.NewMemoryStore(), newClock()), s)
	// At step 5, c1 (step 1) leaves the window and c4's message (indexed at step 5)
	// supersedes it.
	it := item(t, steps[4].plan, "c1")
	if it.Decision != advisor.DecisionPruned || it.Reason != "superseded by call c4" || it.Score != -1 {
		t.Errorf("c1 at step 5: %s (%s), score %v; want pruned (superseded by call c4), never scored", it.Decision, it.Reason, it.Score)
	}
	if steps[4].plan.Asked != 0 {
		t.Errorf("step 5 asked %d cards, want 0", steps[4].plan.Asked)
	}
}
