package advisor_test

import (
	"context"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/pruneadvisor/pruneadvisor/advisor"
	"github.com/pruneadvisor/pruneadvisor/advisor/lexical"
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
