package ollama

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/pruneadvisor/pruneadvisor/cards"
)

func batchOf(n int) cards.Batch {
	b := cards.Batch{Task: "Change the server port to 9090", Now: "Next I will update the port in config.yaml."}
	for i := 1; i <= n; i++ {
		b.Cards = append(b.Cards, cards.Card{
			ID: fmt.Sprintf("o%d", i), Tool: "Read", Args: fmt.Sprintf("src/file%02d.go", i),
			Head:  strings.Repeat(fmt.Sprintf("func f%d() { return %d }\n", i, i), 12),
			Tail:  "// end of file\n",
			Chars: 2000, Age: 10 + i, Reaction: "Looked fine; moving on.",
		})
	}
	return b
}

// newScorer is a scorer for the fake with a 2 s timeout and a first guess of 1 ms
// per card, so batches are cut by tokens only until a request is measured (the
// fake answers in about a millisecond).
func newScorer(t *testing.T, rawURL string) *Scorer {
	s := New(clientFor(t, rawURL), "")
	s.Timeout = 2 * time.Second
	s.CardTime = time.Millisecond
	return s
}

func TestName(t *testing.T) {
	v1 := New(nil, "llama3.2:1b")
	v1.Prompt = PromptV1
	tests := []struct {
		s    *Scorer
		want string
	}{
		{New(nil, ""), "ollama:qwen2.5:0.5b:p2"},
		{New(nil, "llama3.2:1b"), "ollama:llama3.2:1b:p2"},
		{v1, "ollama:llama3.2:1b:p1"},
		{&Scorer{}, "ollama:qwen2.5:0.5b:p2"},
	}
	for _, tt := range tests {
		if got := tt.s.Name(); got != tt.want {
			t.Errorf("Name() = %q, want %q", got, tt.want)
		}
		model, prompt, ok := ParseName(tt.want)
		if !ok || "ollama:"+model+":"+prompt != tt.want {
			t.Errorf("ParseName(%q) = %q, %q, %v", tt.want, model, prompt, ok)
		}
	}
	for _, bad := range []string{"lexical", "ollama:", "ollama:p2", "ollama:qwen2.5:0.5b:p9", "ollama:qwen2.5:0.5b"} {
		if m, p, ok := ParseName(bad); ok {
			t.Errorf("ParseName(%q) = %q, %q, true; want not ok", bad, m, p)
		}
	}
}

func TestParsePrompt(t *testing.T) {
	for in, want := range map[string]string{"": PromptV2, "v1": PromptV1, "p1": PromptV1, "v2": PromptV2, "p2": PromptV2} {
		if got, err := ParsePrompt(in); err != nil || got != want {
			t.Errorf("ParsePrompt(%q) = %q, %v; want %q", in, got, err, want)
		}
	}
	if _, err := ParsePrompt("v3"); err == nil || !strings.Contains(err.Error(), "want v1 or v2") {
		t.Errorf("ParsePrompt(v3) = %v, want an error naming v1 and v2", err)
	}
	s := New(clientFor(t, "http://127.0.0.1:1"), "")
	s.Prompt = "p9"
	if _, err := s.Score(context.Background(), batchOf(1)); err == nil || !strings.Contains(err.Error(), `unknown prompt version "p9"`) {
		t.Errorf("Score with prompt p9: %v, want unknown prompt version", err)
	}
}

func TestScoreOK(t *testing.T) {
	f, srv := newFake(t, DefaultModel, DefaultNumCtx)
	f.value = map[string]int{"src/file01.go": 0, "src/file02.go": 37, "src/file03.go": 100, "src/file04.go": 5}
	got, err := newScorer(t, srv.URL).Score(context.Background(), batchOf(4))
	if err != nil {
		t.Fatal(err)
	}
	want := []cards.Score{{Keep: 0, OK: true}, {Keep: 0.37, OK: true}, {Keep: 1, OK: true}, {Keep: 0.05, OK: true}}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("scores (-want +got):\n%s", diff)
	}
	n, seen, problems := f.stats()
	if n != 1 {
		t.Errorf("requests = %d, want 1", n)
	}
	if diff := cmp.Diff([][]string{{"src/file01.go", "src/file02.go", "src/file03.go", "src/file04.go"}}, seen); diff != "" {
		t.Errorf("cards per request (-want +got):\n%s", diff)
	}
	for _, p := range problems {
		t.Errorf("request: %s", p)
	}
}

func TestScoreEmptyBatch(t *testing.T) {
	f, srv := newFake(t, DefaultModel, DefaultNumCtx)
	got, err := newScorer(t, srv.URL).Score(context.Background(), cards.Batch{Task: "x"})
	if err != nil || len(got) != 0 {
		t.Errorf("empty batch: %v, %v; want no scores and no error", got, err)
	}
	if n, _, _ := f.stats(); n != 0 {
		t.Errorf("requests = %d, want 0", n)
	}
}

// TestFaults: every fault gives all-not-OK scores and an error of the right kind.
func TestFaults(t *testing.T) {
	three := func(content string) func(int, []string, []string) reply {
		return func(int, []string, []string) reply { return reply{content: content} }
	}
	tests := []struct {
		name     string
		reply    func(n int, keys, args []string) reply
		model    string
		wantKind string
		wantText string // a substring of the error
	}{
		{"slow answer past the deadline", func(int, []string, []string) reply { return reply{slow: true} }, "", "timeout", "deadline exceeded"},
		{"connection reset mid-body", func(int, []string, []string) reply { return reply{reset: true} }, "", "unreachable", "cut off"},
		{"unknown model 404", nil, "nosuch", "not_pulled",
			"model nosuch is not pulled: ollama pull nosuch (HTTP 404: model 'nosuch' not found)"},
		{"unknown model 404, other code path", func(_ int, _, _ []string) reply {
			return reply{status: http.StatusNotFound, errText: `model "nosuch" not found, try pulling it first`}
		}, "", "not_pulled", `model qwen2.5:0.5b is not pulled: ollama pull qwen2.5:0.5b (HTTP 404: model "nosuch" not found, try pulling it first)`},
		{"runner killed", func(int, []string, []string) reply {
			return reply{status: 500, errText: runnerStopped}
		}, "", "http", "HTTP 500: model runner has unexpectedly stopped"},
		{"think on a model that cannot", func(int, []string, []string) reply {
			return reply{status: 400, errText: `"qwen2.5:0.5b" does not support thinking`}
		}, "", "http", `HTTP 400: "qwen2.5:0.5b" does not support thinking`},
		{"503 busy", func(int, []string, []string) reply {
			return reply{status: 503, errText: "server busy, please try again.  maximum pending requests exceeded"}
		}, "", "http", "HTTP 503: server busy"},
		{"in-band error", func(int, []string, []string) reply { return reply{inband: true, errText: "unexpected EOF"} }, "", "http", "unexpected EOF"},
		{"done false", func(int, []string, []string) reply {
			return reply{notDone: true, content: "{\"c1\": 4" + strings.Repeat("\t", 31)}
		}, "", "truncated", "done is false"},
		{"done_reason length", func(int, []string, []string) reply {
			return reply{content: `{"c1": 40, "c2"`, reason: "length"}
		}, "", "truncated", "done_reason length"},
		{"repeated id", three(`{"c1": 40, "c1": 50, "c2": 10, "c3": 5}`), "", "invalid", `id "c1" repeated`},
		{"repeated id replacing a missing one", three(`{"c1": 40, "c2": 50, "c2": 10}`), "", "invalid", `id "c2" repeated`},
		{"missing id", three(`{"c1": 40, "c3": 10}`), "", "invalid", "ids missing: c2"},
		{"extra id", three(`{"c1": 40, "c2": 50, "c3": 10, "c4": 1}`), "", "invalid", `unknown id "c4"`},
		{"101", three(`{"c1": 101, "c2": 50, "c3": 10}`), "", "invalid", `value of "c1" is 101`},
		{"-1", three(`{"c1": 40, "c2": -1, "c3": 10}`), "", "invalid", `value of "c2" is -1`},
		{"1e308", three(`{"c1": 40, "c2": 50, "c3": 1e308}`), "", "invalid", `value of "c3" is 1e308`},
		{"870870870870870", three(`{"c1": 870870870870870, "c2": 50, "c3": 10}`), "", "invalid", `value of "c1" is 870870870870870`},
		{"fraction", three(`{"c1": 40.5, "c2": 50, "c3": 10}`), "", "invalid", `value of "c1" is 40.5`},
		{"string value", three(`{"c1": "40", "c2": 50, "c3": 10}`), "", "invalid", `value of "c1" is "40", not a number`},
		{"null value", three(`{"c1": null, "c2": 50, "c3": 10}`), "", "invalid", `value of "c1" is null`},
		{"object value", three(`{"c1": {"keep": 40}, "c2": 50, "c3": 10}`), "", "invalid", `value of "c1" is '{'`},
		{"prose", three(`Sure! Here are the scores: {"c1": 40, "c2": 50, "c3": 10}`), "", "invalid", "not JSON"},
		{"markdown fence", three("```json\n{\"c1\": 40, \"c2\": 50, \"c3\": 10}\n```"), "", "invalid", "not JSON"},
		{"invalid JSON", three(`{"c1": 40, "c2": 50, "c3"`), "", "invalid", "not JSON"},
		{"missing comma", three(`{"c1": 40 "c2": 50, "c3": 10}`), "", "invalid", "not JSON"},
		{"array", three(`[40, 50, 10]`), "", "invalid", "not a JSON object"},
		{"old array shape", three(`{"scores": [{"id": "c1", "keep": 0.4}]}`), "", "invalid", `unknown id "scores"`},
		{"text after the object", three(`{"c1": 40, "c2": 50, "c3": 10} {"c1": 1}`), "", "invalid", "text after the object"},
		{"empty content", func(int, []string, []string) reply { return reply{content: " "} }, "", "invalid", "not JSON"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f, srv := newFake(t, DefaultModel, DefaultNumCtx)
			f.reply = tt.reply
			s := New(clientFor(t, srv.URL), tt.model)
			s.Timeout = 300 * time.Millisecond
			s.CardTime = time.Millisecond
			got, err := s.Score(context.Background(), batchOf(3))
			if diff := cmp.Diff(make([]cards.Score, 3), got); diff != "" {
				t.Errorf("scores (-want +got):\n%s", diff)
			}
			if kind := FailKind(err); kind != tt.wantKind {
				t.Errorf("FailKind(%v) = %q, want %q", err, kind, tt.wantKind)
			}
			var k interface{ Kind() string }
			if !errors.As(err, &k) || k.Kind() != tt.wantKind {
				t.Errorf("error %v has no Kind() %q along its chain", err, tt.wantKind)
			}
			if err == nil || !strings.Contains(err.Error(), tt.wantText) {
				t.Errorf("error %v, want it to contain %q", err, tt.wantText)
			}
			if n, _, problems := f.stats(); n != 1 || len(problems) > 0 {
				t.Errorf("requests = %d (want 1), problems: %q", n, problems)
			}
		})
	}
}

func TestUnreachable(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	s := newScorer(t, "http://"+addr)
	got, err := s.Score(context.Background(), batchOf(2))
	if diff := cmp.Diff(make([]cards.Score, 2), got); diff != "" {
		t.Errorf("scores (-want +got):\n%s", diff)
	}
	if FailKind(err) != "unreachable" || !strings.Contains(err.Error(), "connection refused") {
		t.Errorf("error %v (kind %q), want unreachable: connection refused", err, FailKind(err))
	}
	if err := s.Ping(context.Background()); FailKind(err) != "unreachable" {
		t.Errorf("Ping: %v, want unreachable", err)
	}
}

func TestCanceled(t *testing.T) {
	f, srv := newFake(t, DefaultModel, DefaultNumCtx)
	f.reply = func(int, []string, []string) reply { return reply{slow: true} }
	ctx, cancel := context.WithCancel(context.Background())
	time.AfterFunc(100*time.Millisecond, cancel)
	_, err := newScorer(t, srv.URL).Score(ctx, batchOf(2))
	if FailKind(err) != "canceled" || !errors.Is(err, ErrCanceled) {
		t.Errorf("error %v (kind %q), want canceled", err, FailKind(err))
	}
}

// TestSplit: a batch too large for a small NumCtx is split in halves until each
// request fits; every card is still scored, from its own request.
func TestSplit(t *testing.T) {
	const numCtx = 1500
	b := batchOf(16)
	f, srv := newFake(t, DefaultModel, numCtx)
	want := make([]cards.Score, len(b.Cards))
	for i, c := range b.Cards {
		f.value[c.Args] = 3 * i
		want[i] = cards.Score{Keep: float64(3*i) / 100, OK: true}
	}
	s := newScorer(t, srv.URL)
	s.NumCtx = numCtx
	if ok, need, err := s.Fits(b); err != nil || ok {
		t.Fatalf("Fits(16 cards) = %v, %d, %v: the test needs a batch that does not fit", ok, need, err)
	}
	got, err := s.Score(context.Background(), b)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("scores (-want +got):\n%s", diff)
	}
	n, seen, problems := f.stats()
	for _, p := range problems {
		t.Errorf("request: %s", p)
	}
	if n < 2 {
		t.Errorf("requests = %d, want a split", n)
	}
	// Halving: every request holds 16/2^k cards, in order, each card once.
	var all []string
	for i, args := range seen {
		if k := len(args); k == 0 || 16%k != 0 || k&(k-1) != 0 {
			t.Errorf("request %d has %d cards, want a power-of-two part of 16", i+1, k)
		}
		all = append(all, args...)
	}
	var wantArgs []string
	for _, c := range b.Cards {
		wantArgs = append(wantArgs, c.Args)
	}
	if diff := cmp.Diff(wantArgs, all); diff != "" {
		t.Errorf("cards over all requests (-want +got):\n%s", diff)
	}
	t.Logf("16 cards at num_ctx %d: %d requests of %v cards", numCtx, n, func() []int {
		var k []int
		for _, a := range seen {
			k = append(k, len(a))
		}
		return k
	}())
}

// TestSplitStopsAtFirstFailure: when a part fails, no more requests are sent and
// the whole batch has no score.
func TestSplitStopsAtFirstFailure(t *testing.T) {
	const numCtx = 1500
	f, srv := newFake(t, DefaultModel, numCtx)
	f.reply = func(n int, _, _ []string) reply {
		if n == 2 {
			return reply{status: 500, errText: "boom"}
		}
		return reply{}
	}
	s := newScorer(t, srv.URL)
	s.NumCtx = numCtx
	got, err := s.Score(context.Background(), batchOf(16))
	if diff := cmp.Diff(make([]cards.Score, 16), got); diff != "" {
		t.Errorf("scores (-want +got):\n%s", diff)
	}
	if FailKind(err) != "http" {
		t.Errorf("error %v, want http", err)
	}
	if n, _, _ := f.stats(); n != 2 {
		t.Errorf("requests = %d, want 2 (stop at the failing one)", n)
	}
}

// TestShrink: a single card that does not fit is sent cut down; when even that does
// not fit, the batch fails with ErrTooLarge and nothing is sent.
func TestShrink(t *testing.T) {
	b := batchOf(1)
	b.Cards[0].Args = "bash -c '" + strings.Repeat("echo padding the command line; ", 60) + "'"
	b.Cards[0].Head = strings.Repeat("a long line of output text ", 12)
	b.Cards[0].Reaction = strings.Repeat("the agent said quite a lot here ", 6)
	probe := New(nil, "")
	_, full, err := probe.Fits(b)
	if err != nil {
		t.Fatal(err)
	}
	small := b
	small.Cards = []cards.Card{shrink(b.Cards[0])}
	_, cut, err := probe.Fits(small)
	if err != nil {
		t.Fatal(err)
	}
	if cut >= full {
		t.Fatalf("shrunk card needs %d tokens, full %d: shrinking should help", cut, full)
	}

	f, srv := newFake(t, DefaultModel, cut)
	f.value[cards.Cut(b.Cards[0].Args, ShrunkArgsChars)] = 64
	s := newScorer(t, srv.URL)
	s.NumCtx = cut
	got, err := s.Score(context.Background(), b)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]cards.Score{{Keep: 0.64, OK: true}}, got); diff != "" {
		t.Errorf("scores (-want +got):\n%s", diff)
	}
	_, seen, problems := f.stats()
	for _, p := range problems {
		t.Errorf("request: %s", p)
	}
	if len(seen) != 1 || !strings.HasSuffix(seen[0][0], "…") || len([]rune(seen[0][0])) != ShrunkArgsChars {
		t.Errorf("cards sent = %q, want one card with args cut to %d characters", seen, ShrunkArgsChars)
	}

	s.NumCtx = cut - 1
	got, err = s.Score(context.Background(), b)
	if !errors.Is(err, ErrTooLarge) || FailKind(err) != "too_large" {
		t.Errorf("NumCtx %d: error %v, want ErrTooLarge", cut-1, err)
	}
	if diff := cmp.Diff(make([]cards.Score, 1), got); diff != "" {
		t.Errorf("scores (-want +got):\n%s", diff)
	}
	if n, _, _ := f.stats(); n != 1 {
		t.Errorf("requests = %d, want still 1", n)
	}
}

func TestPing(t *testing.T) {
	_, srv := newFake(t, DefaultModel, DefaultNumCtx)
	s := newScorer(t, srv.URL)
	if err := s.Ping(context.Background()); err != nil {
		t.Errorf("Ping: %v", err)
	}
	if v, err := s.Version(context.Background()); err != nil || v != "0.17.4" {
		t.Errorf("Version = %q, %v; want 0.17.4", v, err)
	}
	broken := http.NewServeMux()
	broken.HandleFunc("/api/version", func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(http.StatusInternalServerError)
		fmt.Fprint(w, `{"error":"boom"}`)
	})
	slow := http.NewServeMux()
	slow.HandleFunc("/api/version", func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-r.Context().Done():
		case <-time.After(5 * time.Second):
		}
	})
	for _, tt := range []struct {
		name string
		h    http.Handler
		want string
	}{{"500", broken, "http"}, {"slow", slow, "timeout"}} {
		srv := newServer(t, tt.h)
		s := newScorer(t, srv)
		s.Timeout = 200 * time.Millisecond
		if err := s.Ping(context.Background()); FailKind(err) != tt.want {
			t.Errorf("%s: Ping = %v, want kind %s", tt.name, err, tt.want)
		}
	}
}

func TestFailKind(t *testing.T) {
	tests := []struct {
		err  error
		want string
	}{
		{nil, ""},
		{fmt.Errorf("x: %w", ErrTimeout), "timeout"},
		{fmt.Errorf("x: %w", ErrCanceled), "canceled"},
		{fmt.Errorf("x: %w", ErrUnreachable), "unreachable"},
		{fmt.Errorf("x: %w", ErrHTTP), "http"},
		{fmt.Errorf("x: %w", ErrTruncated), "truncated"},
		{fmt.Errorf("x: %w", ErrInvalidAnswer), "invalid"},
		{fmt.Errorf("x: %w", ErrTooLarge), "too_large"},
		{fmt.Errorf("x: %w", ErrNotPulled), "not_pulled"},
		{errors.New("something else"), "other"},
	}
	for _, tt := range tests {
		if got := FailKind(tt.err); got != tt.want {
			t.Errorf("FailKind(%v) = %q, want %q", tt.err, got, tt.want)
		}
	}
}
