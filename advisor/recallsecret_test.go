package advisor_test

import (
	"context"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/pruneadvisor/pruneadvisor/advisor"
	"github.com/pruneadvisor/pruneadvisor/advisor/lexical"
	"github.com/pruneadvisor/pruneadvisor/internal/sessionfiles"
	"github.com/pruneadvisor/pruneadvisor/tokencount"
	"github.com/pruneadvisor/pruneadvisor/transcript"
)

// A store whose stubs were made without a secret keeps them, ids and bytes, when the
// advisor restarts with Advisor.RecallSecret set; stubs made after the restart carry
// keyed ids (KeyedRecallID), and every id in a stub recalls its original.
func TestRecallSecretKeysNewStubsOnly(t *testing.T) {
	s, err := transcript.ReadFile("../testdata/sessions/fix-port.jsonl", transcript.Options{})
	if err != nil {
		t.Fatal(err)
	}
	secret := []byte("0123456789abcdef0123456789abcdef")
	sid := advisor.SessionKey(s)

	// A cold cache at every step (10 minutes between calls): each prune is applied
	// as soon as it is pending, so they land at several steps.
	cold := func() *fakeClock { c := newClock(); c.step = 10 * time.Minute; return c }
	// Where the prunes land, from one run without a secret.
	ref := simulate(t, newAdvisor(t, advisor.DefaultConfig(), lexical.New(), advisor.NewMemoryStore(), cold()), s)
	var at []int
	for _, it := range ref[len(ref)-1].plan.Items {
		if it.Decision == advisor.DecisionPruned {
			at = append(at, it.DecidedAt)
		}
	}
	sort.Ints(at)
	if len(at) < 2 || at[0] == at[len(at)-1] {
		t.Fatalf("prunes applied at steps %v; the test needs two rewrites", at)
	}
	first := at[0]

	// The same session, restarted with a secret after the first rewrite.
	store := advisor.NewMemoryStore()
	old := newAdvisor(t, advisor.DefaultConfig(), lexical.New(), store, cold())
	cut := 0 // messages before the assistant message of step first+1
	for i, m := range s.Messages {
		if m.Role == transcript.RoleAssistant {
			if cut++; cut == first+1 {
				cut = i
				break
			}
		}
	}
	head := *s
	head.Messages = s.Messages[:cut]
	simulate(t, old, &head)
	keyed := newAdvisor(t, advisor.DefaultConfig(), lexical.New(), store, cold())
	keyed.RecallSecret = secret
	steps := simulate(t, keyed, s)
	final := steps[len(steps)-1].plan

	var early, late int
	for _, it := range final.Items {
		if it.Decision != advisor.DecisionPruned {
			continue
		}
		want := advisor.KeyedRecallID(secret, sid, it.Key)
		if it.DecidedAt <= first {
			want = advisor.RecallID(sid, it.Key)
			early++
		} else {
			late++
		}
		if it.RecallID != want {
			t.Errorf("output %s pruned at step %d: recall id %s, want %s", it.Key, it.DecidedAt, it.RecallID, want)
		}
		if !strings.Contains(it.Stub, `("`+want+`")`) {
			t.Errorf("output %s: stub %q does not name %s", it.Key, it.Stub, want)
		}
		o, err := store.Original(context.Background(), want)
		if err != nil || o.OutputKey != it.Key {
			t.Errorf("Original(%s) = %q, %v; want output %s", want, o.OutputKey, err, it.Key)
		}
	}
	if early == 0 || late == 0 {
		t.Errorf("%d stubs from before the restart, %d after; want some of each", early, late)
	}
	if advisor.KeyedRecallID(secret, sid, "x") == advisor.RecallID(sid, "x") {
		t.Error("keyed and unkeyed ids agree")
	}
}

// TestDecisionsDoNotDependOnTheSecret runs real sessions through two advisors whose
// stores have different recall secrets: every step's decisions, reasons, pending
// tokens and context are the same; only the recall ids and the stubs quoting them
// differ. Each stub's size, which the planner prices rewrites with, is the same
// whatever its id (RecallIDDigits); with the older hex ids a stub's size moved with
// the id and a rewrite near the edge of paying went either way.
func TestDecisionsDoNotDependOnTheSecret(t *testing.T) {
	cfg := advisor.DefaultConfig()
	// Pressure, so that many rewrites are priced: a 64,000-token window puts the
	// agents' compaction points (and the hard limits) within reach of most
	// sessions, whose contexts no longer count what their agents' own
	// compactions dropped.
	cfg.Budget, cfg.ContextWindow = 20000, 64_000
	files := realSessions(t)
	if len(files) < 10 {
		sessionfiles.Missing(t, "only %d real sessions", len(files))
	}
	type decided struct {
		Key, Reason string
		Decision    advisor.Decision
		DecidedAt   int
		StubTokens  int
	}
	run := func(s *transcript.Session, secret string) (out [][]decided, pending, ctx []int) {
		a := newAdvisor(t, cfg, nil, advisor.NewMemoryStore(), newClock())
		a.RecallSecret = []byte(secret)
		for _, st := range simulate(t, a, s) {
			var ds []decided
			for _, it := range st.plan.Items {
				ds = append(ds, decided{it.Key, it.Reason, it.Decision, it.DecidedAt, tokencount.Count(it.Stub)})
			}
			out = append(out, ds)
			pending = append(pending, st.plan.PendingTokens)
			ctx = append(ctx, st.plan.ContextTokens)
		}
		return out, pending, ctx
	}
	pruned := 0
	for _, f := range files {
		s, err := transcript.ReadFile(f, transcript.Options{Lenient: true})
		if err != nil || len(s.Outputs()) < 20 {
			continue
		}
		d1, p1, c1 := run(s, "secret one: 32 bytes of anything")
		d2, p2, c2 := run(s, "secret two: 32 bytes of anything")
		if diff := cmp.Diff(d1, d2); diff != "" {
			t.Errorf("%s: decisions differ between secrets (-one +two):\n%s", f, diff)
		}
		if diff := cmp.Diff(p1, p2); diff != "" {
			t.Errorf("%s: pending tokens differ between secrets (-one +two):\n%s", f, diff)
		}
		if diff := cmp.Diff(c1, c2); diff != "" {
			t.Errorf("%s: context tokens differ between secrets (-one +two):\n%s", f, diff)
		}
		for _, it := range d1[len(d1)-1] {
			if it.Decision == advisor.DecisionPruned {
				pruned++
			}
		}
	}
	if pruned < 50 {
		t.Fatalf("%d outputs pruned in all; the test needs rewrites to compare", pruned)
	}
}
