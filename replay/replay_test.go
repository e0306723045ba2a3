package replay

import (
	"context"
	"fmt"
	"os"
	"testing"
	"time"

	"github.com/dustin/go-humanize"
	"github.com/google/go-cmp/cmp"

	"github.com/pruneadvisor/pruneadvisor/advisor"
	"github.com/pruneadvisor/pruneadvisor/advisor/fitted"
	"github.com/pruneadvisor/pruneadvisor/advisor/lexical"
	"github.com/pruneadvisor/pruneadvisor/cards"
	"github.com/pruneadvisor/pruneadvisor/evidence"
	"github.com/pruneadvisor/pruneadvisor/tokencount"
	"github.com/pruneadvisor/pruneadvisor/transcript"
)

// portFile is the hand-made session of testdata/replay (see gen.py there): ten
// steps; O1..O5 (call_1..call_5, steps 1..5) are candidates, O5 re-reads NOTES.md
// with the same bytes as O3, the agent writes `listen_port` (only in O1) at step 6.
const portFile = "../testdata/replay/port.json"

func loadPort(t testing.TB) *Source {
	t.Helper()
	src, err := Load(portFile, false)
	if err != nil {
		t.Fatal(err)
	}
	return src
}

type keyStep struct {
	Key  string
	Step int
}

func askSteps(asks []advisor.AskRecord) []keyStep {
	var out []keyStep
	for _, a := range asks {
		out = append(out, keyStep{a.OutputKey, a.Step})
	}
	return out
}

// TestReplayFacts checks every fact of the port session against values worked out
// by hand from docs/DESIGN.md's rules with the default config (K = 3, 200-token
// minimum, budget 100,000): an output of step s is protected through step s+3, so
// it is a candidate from s+4 when it has 200 tokens or more (call_1..call_5 do;
// call_6..call_9 have 0, 1, 1 and 17). call_3 is a duplicate of call_5 (produced at
// step 5, seen from plan 6) and becomes a pending prune at its first unprotected
// step, 7; it is never applied: the session stays under the budget, the file has
// no timestamps (the cache is warm throughout), and removing 923 tokens for the
// last 4 steps does not pay for writing the cache again from there. Each other
// candidate is asked once, when it becomes one (no re-ask under budget).
func TestReplayFacts(t *testing.T) {
	src := loadPort(t)
	rp := &Replayer{Config: advisor.DefaultConfig(), Scorer: lexical.New(), Sizer: fixedSizer{}}
	rec, err := rp.Replay(context.Background(), src)
	if err != nil {
		t.Fatal(err)
	}
	outs := src.Session.Outputs()
	if len(outs) != 9 {
		t.Fatalf("port.json has %d outputs, want 9", len(outs))
	}
	want := []OutputFacts{
		{Key: "call_1", Tool: "read_file", Summary: "config/server.yaml", Step: 1, CandidateFrom: 5},
		{Key: "call_2", Tool: "bash", Summary: "ls -la /srv/app", Step: 2, CandidateFrom: 6},
		{Key: "call_3", Tool: "read_file", Summary: "NOTES.md", Step: 3, CandidateFrom: 7, RuleDeadAt: 7, RuleBy: "call_5", PendingAt: 7},
		{Key: "call_4", Tool: "bash", Summary: "tail -n 40 /var/log/app.log", Step: 4, CandidateFrom: 8},
		{Key: "call_5", Tool: "read_file", Summary: "NOTES.md", Step: 5, CandidateFrom: 9},
		{Key: "call_6", Tool: "bash", Summary: "sed -i 's/8080/9090/' config/server.yaml", Step: 6},
		{Key: "call_7", Tool: "bash", Summary: "systemctl restart app", Step: 7},
		{Key: "call_8", Tool: "bash", Summary: "systemctl is-active app", Step: 8},
		{Key: "call_9", Tool: "bash", Summary: "ss -ltn", Step: 9},
	}
	// Offsets: the tokens of the messages before each output's message, summed here
	// from the session; stub sizes: the advisor's stub for the output, counted.
	offset := map[int]int{}
	for i, n := 0, 0; i < len(src.Session.Messages); i++ {
		offset[i] = n
		n += src.Session.Messages[i].Tokens
	}
	// Digest sizes: what a tracker of the session's own, under the embedded word
	// statistics, says of each output (the replay records it, whatever the advisor
	// did).
	dtr := evidence.NewTracker()
	// the default digest_tokens and min_candidate_tokens (smaller outputs keep no digest)
	dtr.Background, dtr.DigestTokens, dtr.DigestMinTokens = fitted.DefaultBackground(), 128, 200
	for _, m := range src.Session.Messages {
		if _, err := dtr.Add(m); err != nil {
			t.Fatal(err)
		}
	}
	for i := range want {
		want[i].DigestTokens = dtr.DigestFull(want[i].Key)
		if want[i].DigestTokens > 0 {
			want[i].DigestLive = append([]int{0}, dtr.DigestLive(want[i].Key)...)
		}
		want[i].EndStep = 10
		want[i].Tokens = outs[i].Tokens
		want[i].Offset = offset[outs[i].Message]
		stub := fmt.Sprintf(`[pruned: %s %s, %s tokens, score 0.00; recall("o_0000000000") restores it]`,
			want[i].Tool, want[i].Summary, humanize.Comma(int64(outs[i].Tokens)))
		if want[i].CandidateFrom > 0 { // outputs never eligible get no stub size
			n := tokencount.Count(stub)
			// and the digest it carries when made three steps after the output:
			// its live names' whole costs within its budget (advisor.DigestBudget:
			// 128 digest tokens within a quarter of the output, its 3-token framing
			// counted); none for a rule-dead output (call_3), whose content is in
			// context again.
			want[i].StubTokens = n
			if want[i].RuleDeadAt == 0 {
				budget := min(128, max(0, outs[i].Tokens/4-n-3))
				for _, c := range want[i].DigestLive {
					if c <= budget {
						want[i].StubTokens = n + c
					}
				}
			}
		}
	}
	if diff := cmp.Diff(want, rec.Outputs); diff != "" {
		t.Errorf("outputs (-want +got):\n%s", diff)
	}
	// Sizes: the four large outputs are candidates, the small ones are not.
	for i, o := range outs {
		if large := o.Tokens >= 200; large != (i < 5) {
			t.Errorf("output %s has %d tokens; the fixture wants outputs 1-5 at 200 or more and the rest under", o.Key, o.Tokens)
		}
	}
	if rec.Steps != 10 || len(rec.StepFacts) != 10 {
		t.Fatalf("steps = %d (%d step facts), want 10", rec.Steps, len(rec.StepFacts))
	}
	// Context before call t: the session's own message sizes, summed here without
	// the advisor.
	t0, ctx := 0, 0
	for _, m := range src.Session.Messages {
		if m.Role == transcript.RoleAssistant {
			s := rec.StepFacts[t0]
			if s.Step != t0+1 || s.ContextTokens != ctx || s.AppliedTokens != ctx || s.OverBudget || s.Rewrite {
				t.Errorf("step %d: %+v, want context %d with nothing applied, under budget", t0+1, s, ctx)
			}
			t0++
		}
		ctx += m.Tokens
	}
	if got, want := askSteps(rec.Asks), []keyStep{{"call_1", 5}, {"call_2", 6}, {"call_4", 8}, {"call_5", 9}}; !cmp.Equal(got, want) {
		t.Errorf("asks = %v, want %v", got, want)
	}
	for _, a := range rec.Asks {
		if !a.OK || a.Scorer != "lexical" || a.CardHash == "" || a.Tokens <= 0 {
			t.Errorf("ask %+v: want an OK lexical ask with a card hash and scorer tokens", a)
		}
	}
	wantEv := []evidence.Use{
		// listen_port is on the output's third line: in its first 250 characters,
		// which Gemini CLI's preview keeps.
		// One name: its own digest budget is the use's, and the preview holds it.
		{Key: "call_1", Step: 6, Kind: evidence.UseName, Proof: `name "listen_port"`, Weight: 1, Digest: digestUpTo(t, src, "call_1", "listen_port", 4), Preview: true,
			NameDigests: []int{digestUpTo(t, src, "call_1", "listen_port", 4)}, NamesPreviewed: 1},
		// Step 5 re-reads NOTES.md (call_3's file): a re-read is not a use.
	}
	if diff := cmp.Diff(wantEv, rec.Evidence); diff != "" {
		t.Errorf("evidence (-want +got):\n%s", diff)
	}
	settings := rp.Settings()
	if rec.ID != SessionID(ContentHash(mustRead(t, portFile)), settings.Hash()) || rec.SettingsHash != settings.Hash() {
		t.Errorf("id %s, settings %s: not SessionID(content, settings)", rec.ID, rec.SettingsHash)
	}
	if rec.Name != "port.json" || rec.Format != transcript.FormatOpenAI {
		t.Errorf("name %q format %q, want port.json and openai", rec.Name, rec.Format)
	}

	if got := rec.AppliedSteps(); !cmp.Equal(got, make([]int, 9)) {
		t.Errorf("applied steps = %v, want none", got)
	}
}

func mustRead(t testing.TB, path string) []byte {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return data
}

// TestReplaySmallBudget replays the port session with a 1,000-token budget: the
// context passes it at step 2 (28 + 975 tokens), so re-asks follow the default
// back-off (3 steps after the first ask, while over budget) and the pending
// duplicate is applied at once (923 tokens >= 5% of 1,000). Worked out by hand:
// call_1 asked at 5 and 8, call_2 at 6 and 9, call_4 at 8 (next due 11 > 10),
// call_5 at 9; call_3 pruned at 7 and frozen after.
func TestReplaySmallBudget(t *testing.T) {
	src := loadPort(t)
	cfg := advisor.DefaultConfig()
	cfg.Budget = 1000
	cfg.PriceForced = false  // the budget forces the rewrite whatever it costs
	cfg.SizeExponent = 0     // the lexical scores against the cutoff itself
	cfg.OverBudgetCutoff = 0 // only pending prunes (TestOverBudgetCutoff in advisor takes more)
	rec, err := (&Replayer{Config: cfg, Scorer: lexical.New()}).Replay(context.Background(), src)
	if err != nil {
		t.Fatal(err)
	}
	if got := rec.Outputs[2].PrunedAt; got != 7 {
		t.Errorf("call_3 pruned at %d, want 7", got)
	}
	want := []keyStep{{"call_1", 5}, {"call_2", 6}, {"call_4", 8}, {"call_1", 8}, {"call_5", 9}, {"call_2", 9}}
	if got := askSteps(rec.Asks); !cmp.Equal(got, want) {
		t.Errorf("asks = %v, want %v", got, want)
	}
	stub := 0
	for _, s := range rec.StepFacts {
		if got, wantOver := s.OverBudget, s.Step >= 2; got != wantOver {
			t.Errorf("step %d over budget = %v, want %v", s.Step, got, wantOver)
		}
		if s.Rewrite != (s.Step == 7) {
			t.Errorf("step %d rewrite = %v, want only at 7", s.Step, s.Rewrite)
		}
		saved := s.ContextTokens - s.AppliedTokens
		switch {
		case s.Step < 7 && saved != 0:
			t.Errorf("step %d saves %d tokens before any stub", s.Step, saved)
		case s.Step == 7:
			stub = 923 - saved
			if stub <= 0 || stub >= 100 {
				t.Errorf("step 7 saves %d of call_3's 923 tokens: stub of %d tokens", saved, stub)
			}
		case s.Step > 7 && saved != 923-stub:
			t.Errorf("step %d saves %d tokens, want the frozen %d", s.Step, saved, 923-stub)
		}
	}
	if got, want := rec.SavedTokenSteps(), int64(4*(923-stub)); got != want {
		t.Errorf("saved token-steps = %d, want 4 steps x %d", got, 923-stub)
	}
}

// TestReplayDeterministic replays twice: the records differ only in wall times
// and ask latencies.
func TestReplayDeterministic(t *testing.T) {
	src := loadPort(t)
	rp := &Replayer{Config: advisor.DefaultConfig(), Scorer: lexical.New()}
	a, err := rp.Replay(context.Background(), src)
	if err != nil {
		t.Fatal(err)
	}
	b, err := rp.Replay(context.Background(), src)
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range []*Record{a, b} {
		r.Started, r.Finished = time.Time{}, time.Time{}
		for i := range r.Asks {
			r.Asks[i].Latency = 0
		}
	}
	if diff := cmp.Diff(a, b); diff != "" {
		t.Errorf("second replay differs (-first +second):\n%s", diff)
	}
}

// fixedSizer counts 100 tokens per request and 10 per card.
type fixedSizer struct{}

func (fixedSizer) FrameTokens(cards.Batch) int    { return 100 }
func (fixedSizer) CardTokens(cards.Card, int) int { return 10 }

// TestSettings checks the settings hash and session ids: stable for equal
// settings, different when anything recorded differs, and JSON round trips.
func TestSettings(t *testing.T) {
	base := Settings{Version: Version, Config: advisor.DefaultConfig(), Scorer: "lexical", Lenient: true}
	same := Settings{Version: Version, Config: advisor.DefaultConfig(), Scorer: "lexical", Lenient: true}
	if base.Hash() != same.Hash() {
		t.Error("equal settings hash differently")
	}
	changes := map[string]func(s *Settings){
		"cutoff":   func(s *Settings) { s.Config.Cutoff = 0.3 },
		"schedule": func(s *Settings) { s.Config.Schedule = "1" },
		"scorer":   func(s *Settings) { s.Scorer = "none" },
		"lenient":  func(s *Settings) { s.Lenient = false },
		"version":  func(s *Settings) { s.Version = "replay-0" },
		"excluded": func(s *Settings) { s.Config.ExcludedTools = nil },
	}
	seen := map[string]string{base.Hash(): "base"}
	for name, change := range changes {
		s := base
		s.Config.ExcludedTools = append([]string(nil), base.Config.ExcludedTools...)
		change(&s)
		h := s.Hash()
		if prev, ok := seen[h]; ok {
			t.Errorf("changing %s gives the hash of %s", name, prev)
		}
		seen[h] = name
	}
	back, err := ParseSettings(base.JSON())
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(base, back); diff != "" || back.Hash() != base.Hash() {
		t.Errorf("ParseSettings(JSON()) (-want +got):\n%s", diff)
	}
	if _, err := ParseSettings("{"); err == nil {
		t.Error("ParseSettings of bad JSON succeeded")
	}
	a, b := SessionID("c1", "s1"), SessionID("c1", "s2")
	if a == b || a == SessionID("c2", "s1") || a != SessionID("c1", "s1") || len(a) != len("replay-")+20 {
		t.Errorf("session ids %s %s: want distinct per (content, settings), stable, 27 characters", a, b)
	}
}

// digestUpTo is the digest budget at which output key's digest, as a stub made
// at step by holds it (a tracker of the session's own, with DigestTokens
// unbounded, fed the messages up to that step), first holds name: the costs of
// its names up to it, summed. A use's budget is measured on the stub made
// evidence.DefaultDigestFrom (3) steps after its output: call_1 comes at step 1,
// so by 4.
func digestUpTo(t *testing.T, src *Source, key, name string, by int) int {
	tr := evidence.NewTracker()
	tr.Background, tr.DigestTokens = fitted.DefaultBackground(), 1<<30
	for _, m := range src.Session.Messages {
		if m.Step > by {
			break
		}
		if _, err := tr.Add(m); err != nil {
			t.Fatal(err)
		}
	}
	sum := 0
	for _, n := range tr.Digest(key, 1<<30) {
		sum += evidence.DigestNameTokens(n)
		if n == name {
			return sum
		}
	}
	t.Fatalf("%s's digest does not hold %q", key, name)
	return 0
}
