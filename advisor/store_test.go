package advisor_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/pruneadvisor/pruneadvisor/advisor"
	"github.com/pruneadvisor/pruneadvisor/cards"
	"github.com/pruneadvisor/pruneadvisor/tokencount"
	"github.com/pruneadvisor/pruneadvisor/transcript"
)

// A storage failure: nothing is pruned, Plan.StorageError says why, and no stub
// exists without its original. Once storage works again, pruning resumes.
func TestStorageFailure(t *testing.T) {
	errDisk := errors.New("disk full")
	tests := []struct {
		name   string
		fail   func(m *advisor.MemoryStore)
		errHas string
	}{
		{"writes fail", func(m *advisor.MemoryStore) { m.Fail = errDisk }, "originals and stubs not stored, pruning stopped: disk full"},
		{"reads fail", func(m *advisor.MemoryStore) { m.FailReads = errDisk }, "cannot read the session version, nothing new pruned: disk full"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s, texts := rulesSession(t) // c1 is superseded and a candidate from step 5
			cfg := advisor.DefaultConfig()
			cfg.RemainingMin = 100_000 // every pending prune pays for itself at once
			mem := advisor.NewMemoryStore()
			store := &countingStore{MemoryStore: mem}
			r := newRunner(t, newAdvisor(t, cfg, nil, store, newClock()), s)
			for T := 1; T <= 4; T++ {
				r.next()
			}
			tt.fail(mem)
			for T := 5; T <= 6; T++ {
				st := r.next()
				if st.plan.Pruned != 0 || st.plan.Rewrite || !strings.Contains(st.plan.StorageError, tt.errHas) {
					t.Fatalf("step %d: pruned %d, rewrite %v, storage error %q; want 0, false, containing %q",
						T, st.plan.Pruned, st.plan.Rewrite, st.plan.StorageError, tt.errHas)
				}
				if it := item(t, st.plan, "c1"); it.Decision != advisor.DecisionPending || it.Stub != "" {
					t.Fatalf("step %d: c1 is %s, want pending", T, it.Decision)
				}
				if got := outputText(t, st.out, "c1"); got != texts["c1"] {
					t.Fatalf("step %d: c1's slot changed", T)
				}
			}
			if n := len(store.stubSaves); n != 0 || len(mem.Stubs()) != 0 {
				t.Fatalf("%d stub saves attempted, %d stored: a stub without its original", n, len(mem.Stubs()))
			}
			mem.Fail, mem.FailReads = nil, nil
			st := r.next() // step 7
			if st.plan.Pruned != 1 || st.plan.StorageError != "" || item(t, st.plan, "c1").Decision != advisor.DecisionPruned {
				t.Errorf("step 7 with storage back: pruned %d, error %q", st.plan.Pruned, st.plan.StorageError)
			}
			if _, err := mem.Original(context.Background(), item(t, st.plan, "c1").RecallID); err != nil {
				t.Errorf("the original of the stub is not stored: %v", err)
			}
		})
	}
}

// frozenSession has 30 reads, some superseded; the scorer prunes odd-numbered reads.
func frozenSession(t *testing.T) *transcript.Session {
	c := newChat("Port the module")
	for i := 1; i <= 30; i++ {
		p := fmt.Sprintf("/src/z%d.go", i%12)
		c.read("", p, filler(fmt.Sprintf("z%d", i), 500))
		if i%5 == 0 {
			c.call("", "Edit", fmt.Sprintf(`{"file_path":%q,"old_string":"a","new_string":"b"}`, p), "The file has been updated.")
		}
	}
	return c.session(t, "frozen.json")
}

func parityScorer() *fakeScorer {
	return &fakeScorer{fn: func(_ int, b cards.Batch) ([]cards.Score, error) {
		out := scoresOf(b, cards.Score{Keep: 0.9, OK: true})
		for i, cd := range b.Cards {
			var n int
			fmt.Sscanf(cd.ID, "c%d", &n)
			if n%2 == 1 {
				out[i].Keep = 0.1
			}
		}
		return out, nil
	}}
}

// stubsIn returns the stubbed slots of msgs (output key -> text) given the
// session's originals.
func stubsIn(s *transcript.Session, msgs []*transcript.Message) map[string]string {
	orig := map[string]string{}
	for _, o := range s.Outputs() {
		orig[o.Key] = o.Text
	}
	out := map[string]string{}
	for _, m := range msgs {
		for _, o := range m.Outputs {
			if o.Text != orig[o.Key] {
				out[o.Key] = o.Text
			}
		}
	}
	return out
}

// Two Advisors sharing one store (two processes) and taking turns on one session
// send byte-identical stubs: a stub applied by one is in the other's next answer,
// frozen, and equal to what a single advisor would have sent — even when the other
// would not have pruned it.
func TestFrozenStubsAcrossAdvisors(t *testing.T) {
	s := frozenSession(t)
	cfg := advisor.DefaultConfig()
	cfg.Budget = 6000
	cfg.RewriteFraction = 0.2
	cfg.PriceForced = false // the budget forces rewrites whatever they cost

	ref := simulate(t, newAdvisor(t, cfg, parityScorer(), advisor.NewMemoryStore(), newClock()), s)
	refStubs := stubsIn(s, ref[len(ref)-1].out)

	shared := advisor.NewMemoryStore()
	clk := newClock()
	// The second process would keep every scored output on its own (its scorer
	// differs, as when one process reaches Ollama and the other does not): the
	// bytes sent must still not depend on which process answers.
	advs := []*advisor.Advisor{
		newAdvisor(t, cfg, parityScorer(), shared, clk),
		newAdvisor(t, cfg, constScorer(0.9), shared, clk),
	}
	runners := []*runner{newRunner(t, advs[0], s), newRunner(t, advs[1], s)}
	seen := map[string]string{} // every stub ever sent, by output key
	for k := 0; !runners[0].done(); k++ {
		// both runners walk the same steps; only one advises each step
		var st step
		for i, r := range runners {
			if i == k%2 {
				st = r.next()
			} else {
				r.k++
			}
		}
		now := stubsIn(s, st.out)
		for key, stub := range seen {
			if now[key] != stub {
				t.Fatalf("step %d (advisor %d): %s was %q, now %q", st.plan.Step, k%2, key, stub, now[key])
			}
		}
		for key, stub := range now {
			seen[key] = stub
			if it := item(t, st.plan, key); it.Decision != advisor.DecisionPruned || it.Stub != stub {
				t.Fatalf("step %d: %s's slot holds a stub but its item is %s", st.plan.Step, key, it.Decision)
			}
		}
	}
	if len(seen) < 8 {
		t.Fatalf("only %d outputs pruned: the test needs more", len(seen))
	}
	for key, stub := range seen {
		if r, ok := refStubs[key]; ok && r != stub {
			t.Errorf("%s: %q with two advisors, %q with one", key, stub, r)
		}
	}
	t.Logf("%d stubs with two advisors, %d with one", len(seen), len(refStubs))

	// A client that rewrites history (a shorter message list) resets the state of
	// advisor 0; the stubs of the outputs still present come back byte-identical.
	view := *s
	view.Messages = s.Messages[:len(s.Messages)-8]
	p0, err := advs[0].Advise(context.Background(), &view)
	out := withStubs((&view).Messages, p0.Stubs)
	if err != nil {
		t.Fatal(err)
	}
	short := stubsIn(s, out)
	for _, m := range view.Messages {
		for _, o := range m.Outputs {
			if want, ok := seen[o.Key]; ok && short[o.Key] != want {
				t.Errorf("after the history rewrite %s holds %q, want %q", o.Key, short[o.Key], want)
			}
		}
	}
	view.Messages = s.Messages
	p0, err = advs[0].Advise(context.Background(), &view)
	if err != nil {
		t.Fatal(err)
	}
	out = withStubs(view.Messages, p0.Stubs)
	for key, stub := range stubsIn(s, out) {
		if seen[key] != stub {
			t.Errorf("after growing back %s holds %q, want %q", key, stub, seen[key])
		}
	}
	for key := range seen {
		if _, ok := stubsIn(s, out)[key]; !ok {
			t.Errorf("after growing back %s lost its stub", key)
		}
	}
}

// A proxy parses every request anew: the same session arrives as fresh Message
// values each step. The returned messages are built from the new ones, with the
// same stubs.
func TestFreshMessagesEachStep(t *testing.T) {
	c := newChat("Read and redo")
	for i := 1; i <= 12; i++ {
		c.read("", fmt.Sprintf("/src/q%d.go", i), filler(fmt.Sprintf("q%d", i), 400))
	}
	data := c.json(t)
	cfg := advisor.DefaultConfig()
	cfg.RemainingMin = 100_000 // every pending prune pays for itself at once
	adv := newAdvisor(t, cfg, constScorer(0), advisor.NewMemoryStore(), newClock())
	full, err := transcript.Read("fresh.json", data, transcript.Options{})
	if err != nil {
		t.Fatal(err)
	}
	ref := simulate(t, newAdvisor(t, cfg, constScorer(0), advisor.NewMemoryStore(), newClock()), full)
	r := newRunner(t, adv, full)
	for k, end := range r.ends {
		s, err := transcript.Read("fresh.json", data, transcript.Options{}) // a fresh parse
		if err != nil {
			t.Fatal(err)
		}
		s.Messages = s.Messages[:end]
		p0, err := adv.Advise(context.Background(), s)
		out := withStubs((s).Messages, p0.Stubs)
		if err != nil {
			t.Fatal(err)
		}
		for i, m := range out {
			if len(stubsIn(full, []*transcript.Message{m})) == 0 && m != s.Messages[i] {
				t.Fatalf("step %d: message %d is not this step's message", k+1, i)
			}
		}
		if got, want := stubsIn(full, out), stubsIn(full, ref[k].out); fmt.Sprint(got) != fmt.Sprint(want) {
			t.Fatalf("step %d: stubs %v, want %v", k+1, got, want)
		}
	}
}

// One Advisor serving several sessions at once (a proxy): each session's run gives
// the same plans as when run alone. Run with -race.
func TestConcurrentSessions(t *testing.T) {
	s := frozenSession(t)
	cfg := advisor.DefaultConfig()
	cfg.Budget = 6000
	alone := simulate(t, newAdvisor(t, cfg, parityScorer(), advisor.NewMemoryStore(), newClock()), s)
	want := stubsIn(s, alone[len(alone)-1].out)

	adv := newAdvisor(t, cfg, parityScorer(), advisor.NewMemoryStore(), newClock())
	const n = 4
	got := make([]map[string]string, n)
	done := make(chan int)
	for g := 0; g < n; g++ {
		go func(g int) {
			defer func() { done <- g }()
			view := *s
			view.ID = fmt.Sprintf("session-%d", g)
			var out []*transcript.Message
			for i, m := range s.Messages {
				if m.Role == transcript.RoleAssistant || i == len(s.Messages)-1 {
					end := i // simulate: the messages before the assistant message
					if m.Role != transcript.RoleAssistant {
						end = len(s.Messages) // the last step sees them all
					}
					view.Messages = s.Messages[:end]
					p, err := adv.Advise(context.Background(), &view)
					if err != nil {
						t.Error(err)
						return
					}
					out = withStubs(view.Messages, p.Stubs)
				}
			}
			got[g] = stubsIn(s, out)
		}(g)
	}
	for g := 0; g < n; g++ {
		<-done
	}
	for g := 0; g < n; g++ {
		if len(got[g]) != len(want) {
			t.Errorf("session %d: %d stubs, want %d", g, len(got[g]), len(want))
		}
		for k := range want {
			// The stubs name per-session recall ids; compare what they say before it.
			if w, h := strings.Split(want[k], "; recall(")[0], strings.Split(got[g][k], "; recall(")[0]; w != h {
				t.Errorf("session %d: %s stub %q, want %q", g, k, h, w)
			}
		}
	}
}

func TestAdviseErrors(t *testing.T) {
	adv := newAdvisor(t, advisor.DefaultConfig(), nil, advisor.NewMemoryStore(), newClock())
	if _, err := adv.Advise(context.Background(), nil); !errors.Is(err, advisor.ErrNoSession) {
		t.Errorf("nil session: %v", err)
	}
	s := frozenSession(t)
	bad := *s
	bad.Messages = append([]*transcript.Message{}, s.Messages[:3]...)
	bad.Messages[1] = nil
	if _, err := adv.Advise(context.Background(), &bad); !errors.Is(err, advisor.ErrNoSession) {
		t.Errorf("nil message: %v", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := adv.Advise(ctx, s); !errors.Is(err, context.Canceled) {
		t.Errorf("canceled context: %v", err)
	}
}

// A recall event for an output this process still holds as pending (another
// process pruned it, and it was recalled there): it is protected, no longer
// pending, and the pending total drops by exactly its share.
func TestRecallOfPendingOutput(t *testing.T) {
	s, _ := rulesSession(t)
	cfg := advisor.DefaultConfig()
	cfg.RewriteFraction = 1 // keep it pending
	store := advisor.NewMemoryStore()
	r := newRunner(t, newAdvisor(t, cfg, nil, store, newClock()), s)
	var st step
	for T := 1; T <= 5; T++ {
		st = r.next()
	}
	c1 := item(t, st.plan, "c1")
	if c1.Decision != advisor.DecisionPending || st.plan.PendingTokens <= 0 {
		t.Fatalf("c1 is %s with %d pending tokens, want pending", c1.Decision, st.plan.PendingTokens)
	}
	// c1's share: its tokens minus the stub it would get.
	stub := fmt.Sprintf(`[pruned: Read /app/config.go, %s tokens, superseded by call c3; recall("o_839409989792") restores it]`, commas(c1.Tokens))
	share := c1.Tokens - tokencount.Count(stub)
	before := st.plan.PendingTokens
	if err := store.RecordRecall(context.Background(), advisor.RecallEvent{RecallID: c1.RecallID, SessionID: "rules.json", OutputKey: "c1"}); err != nil {
		t.Fatal(err)
	}
	st = r.next() // step 6: nothing else becomes pending (c4 leaves the window at 8)
	if it := item(t, st.plan, "c1"); it.Decision != advisor.DecisionProtected || it.Reason != "recalled at step 6" {
		t.Errorf("c1 is %s (%s), want protected (recalled at step 6)", it.Decision, it.Reason)
	}
	if got := before - st.plan.PendingTokens; got != share {
		t.Errorf("pending dropped by %d tokens, want %d (c1's share)", got, share)
	}
	if st.plan.Rewrite {
		t.Errorf("a recall of an output never stubbed rewrote the messages")
	}
}

// Advising the same messages again (a retried request) changes nothing: no new
// asks, no new decisions, the same items and messages.
func TestSameStepTwice(t *testing.T) {
	s := frozenSession(t)
	cfg := advisor.DefaultConfig()
	cfg.Budget = 6000
	store := advisor.NewMemoryStore()
	adv := newAdvisor(t, cfg, parityScorer(), store, newClock())
	steps := simulate(t, adv, s)
	last := steps[len(steps)-1]
	asks, decisions := len(store.Asks()), len(store.Decisions())
	p, err := adv.Advise(context.Background(), s)
	out := withStubs(s.Messages, p.Stubs)
	if err != nil {
		t.Fatal(err)
	}
	if p.Asked != 0 || p.Rewrite || len(store.Asks()) != asks || len(store.Decisions()) != decisions {
		t.Errorf("again: asked %d, rewrite %v, %d new asks, %d new decisions; want none",
			p.Asked, p.Rewrite, len(store.Asks())-asks, len(store.Decisions())-decisions)
	}
	if d := cmp.Diff(last.plan.Items, p.Items); d != "" {
		t.Errorf("items changed (-before +after):\n%s", d)
	}
	if fmt.Sprint(stubsIn(s, last.out)) != fmt.Sprint(stubsIn(s, out)) {
		t.Errorf("messages changed")
	}
}
