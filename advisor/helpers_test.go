package advisor_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/pruneadvisor/pruneadvisor/advisor"
	"github.com/pruneadvisor/pruneadvisor/cards"
	"github.com/pruneadvisor/pruneadvisor/tokencount"
	"github.com/pruneadvisor/pruneadvisor/transcript"
)

// fakeScorer returns scripted scores or errors. fn gets the 1-based request number
// and the batch; a nil fn scores every card keep.
type fakeScorer struct {
	mu      sync.Mutex
	name    string
	fn      func(req int, b cards.Batch) ([]cards.Score, error)
	reqs    int
	batches []cards.Batch
}

func (f *fakeScorer) Name() string {
	if f.name == "" {
		return "fake"
	}
	return f.name
}

func (f *fakeScorer) Score(_ context.Context, b cards.Batch) ([]cards.Score, error) {
	f.mu.Lock()
	f.reqs++
	n := f.reqs
	f.batches = append(f.batches, b)
	f.mu.Unlock()
	if f.fn == nil {
		return constScores(b, 1), nil
	}
	return f.fn(n, b)
}

// constScorer scores every card keep.
func constScorer(keep float64) *fakeScorer {
	return &fakeScorer{name: fmt.Sprintf("const-%.2f", keep), fn: func(_ int, b cards.Batch) ([]cards.Score, error) {
		return constScores(b, keep), nil
	}}
}

func constScores(b cards.Batch, keep float64) []cards.Score {
	out := make([]cards.Score, len(b.Cards))
	for i := range out {
		out[i] = cards.Score{Keep: keep, OK: true}
	}
	return out
}

// fakeClock is an injected clock; every read advances it by step (a warm cache
// when step is well under the cache TTL).
type fakeClock struct {
	mu   sync.Mutex
	t    time.Time
	step time.Duration
}

func newClock() *fakeClock {
	return &fakeClock{t: time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC), step: time.Second}
}

func (c *fakeClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.t = c.t.Add(c.step)
	return c.t
}

func (c *fakeClock) Advance(d time.Duration) {
	c.mu.Lock()
	c.t = c.t.Add(d)
	c.mu.Unlock()
}

// newAdvisor returns an advisor over cfg, scorer and store with a quiet logger and
// the given clock.
func newAdvisor(t testing.TB, cfg advisor.Config, sc advisor.Scorer, store advisor.Store, clk *fakeClock) *advisor.Advisor {
	t.Helper()
	a, err := advisor.New(cfg, sc, store)
	if err != nil {
		t.Fatalf("advisor.New: %v", err)
	}
	a.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	if clk != nil {
		a.Clock = clk.Now
	}
	return a
}

// step is one Advise call of simulate.
type step struct {
	plan advisor.Plan
	in   []*transcript.Message // the messages the advisor saw
	out  []*transcript.Message // the messages it returned
}

// simulate runs adv over s as `pruneadvisor advise` does: at step t the advisor
// sees the messages before the t-th assistant message, and a last step sees them
// all. Plans are cloned, so they stay as they were at their step.
func simulate(t testing.TB, adv *advisor.Advisor, s *transcript.Session) []step {
	t.Helper()
	var steps []step
	at := func(end int) {
		view := *s
		view.Messages = s.Messages[:end]
		p, err := adv.Advise(context.Background(), &view)
		if err != nil {
			t.Fatalf("Advise at %d messages: %v", end, err)
		}
		out := withStubs(view.Messages, p.Stubs)
		steps = append(steps, step{plan: p.Clone(), in: view.Messages, out: out})
	}
	for i, m := range s.Messages {
		if m.Role == transcript.RoleAssistant {
			at(i)
		}
	}
	at(len(s.Messages))
	return steps
}

// item returns the plan item with key.
func item(t testing.TB, p advisor.Plan, key string) advisor.Item {
	t.Helper()
	for _, it := range p.Items {
		if it.Key == key {
			return it
		}
	}
	t.Fatalf("plan at step %d has no item %q", p.Step, key)
	return advisor.Item{}
}

// outputText returns the text of output key in msgs.
func outputText(t testing.TB, msgs []*transcript.Message, key string) string {
	t.Helper()
	for _, m := range msgs {
		for _, o := range m.Outputs {
			if o.Key == key {
				return o.Text
			}
		}
	}
	t.Fatalf("no output %q in the messages", key)
	return ""
}

// chat builds an OpenAI chat-completions message list.
type chat struct {
	msgs []map[string]any
	n    int
}

type tc struct{ name, args string }

func newChat(task string) *chat {
	c := &chat{}
	c.msgs = append(c.msgs, map[string]any{"role": "user", "content": task})
	return c
}

// turn adds one assistant message with text and the calls, then one tool message
// per call with its output; it returns the call ids.
func (c *chat) turn(text string, calls []tc, outputs ...string) []string {
	var ids []string
	var tcs []map[string]any
	for _, k := range calls {
		c.n++
		id := fmt.Sprintf("c%d", c.n)
		ids = append(ids, id)
		tcs = append(tcs, map[string]any{"id": id, "type": "function",
			"function": map[string]any{"name": k.name, "arguments": k.args}})
	}
	m := map[string]any{"role": "assistant", "content": text}
	if len(tcs) > 0 {
		m["tool_calls"] = tcs
	}
	c.msgs = append(c.msgs, m)
	for i, id := range ids {
		c.msgs = append(c.msgs, map[string]any{"role": "tool", "tool_call_id": id, "content": outputs[i]})
	}
	return ids
}

// call adds a turn with one call and returns its id.
func (c *chat) call(text, name, args, output string) string {
	return c.turn(text, []tc{{name, args}}, output)[0]
}

// read adds a turn reading path.
func (c *chat) read(text, path, output string) string {
	return c.call(text, "Read", fmt.Sprintf(`{"file_path":%q}`, path), output)
}

// say adds an assistant message without calls.
func (c *chat) say(text string) {
	c.msgs = append(c.msgs, map[string]any{"role": "assistant", "content": text})
}

func (c *chat) json(t testing.TB) []byte {
	t.Helper()
	b, err := json.Marshal(c.msgs)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func (c *chat) session(t testing.TB, name string) *transcript.Session {
	t.Helper()
	s, err := transcript.Read(name, c.json(t), transcript.Options{Format: transcript.FormatOpenAI})
	if err != nil {
		t.Fatalf("reading %s: %v", name, err)
	}
	return s
}

// filler returns a text of about n o200k tokens: distinct numbered lines about
// topic, so no two outputs are identical.
func filler(topic string, n int) string {
	var b strings.Builder
	for i, got := 0, 0; got < n; i++ {
		line := fmt.Sprintf("%s line %d: value_%d = %d\n", topic, i, i*7, i*i)
		got += tokencount.Count(line)
		b.WriteString(line)
	}
	return b.String()
}

// runner advises one step at a time over a session, as simulate does, so a test
// can act between steps (recall, advance the clock, change the store).
type runner struct {
	t    testing.TB
	adv  *advisor.Advisor
	s    *transcript.Session
	ends []int // message counts of the steps
	k    int
}

func newRunner(t testing.TB, adv *advisor.Advisor, s *transcript.Session) *runner {
	r := &runner{t: t, adv: adv, s: s}
	for i, m := range s.Messages {
		if m.Role == transcript.RoleAssistant {
			r.ends = append(r.ends, i)
		}
	}
	r.ends = append(r.ends, len(s.Messages))
	return r
}

func (r *runner) done() bool { return r.k >= len(r.ends) }

// next advises the next step and returns it.
func (r *runner) next() step {
	r.t.Helper()
	view := *r.s
	view.Messages = r.s.Messages[:r.ends[r.k]]
	r.k++
	p, err := r.adv.Advise(context.Background(), &view)
	if err != nil {
		r.t.Fatalf("Advise at step %d: %v", r.k, err)
	}
	out := withStubs(view.Messages, p.Stubs)
	return step{plan: p.Clone(), in: view.Messages, out: out}
}

// all runs the remaining steps.
func (r *runner) all() []step {
	var out []step
	for !r.done() {
		out = append(out, r.next())
	}
	return out
}

// withStubs returns msgs with each output named in stubs carrying its stub as Text
// (copies of the messages and outputs that change; the others are msgs' own): the
// messages the plan's stubs make, as the tests inspect them.
func withStubs(msgs []*transcript.Message, stubs map[string]string) []*transcript.Message {
	out := make([]*transcript.Message, len(msgs))
	for i, m := range msgs {
		out[i] = m
		changed := false
		for _, o := range m.Outputs {
			if _, ok := stubs[o.Key]; ok {
				changed = true
			}
		}
		if !changed {
			continue
		}
		cp := *m
		cp.Outputs = make([]*transcript.ToolOutput, len(m.Outputs))
		for j, o := range m.Outputs {
			cp.Outputs[j] = o
			if stub, ok := stubs[o.Key]; ok {
				oc := *o
				oc.Text = stub
				cp.Outputs[j] = &oc
			}
		}
		out[i] = &cp
	}
	return out
}
