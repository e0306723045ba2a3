package ollama

// Tests of issue 12's five faults against the fake as the real server behaves
// (OLLAMA-WIRE.md, "Seen against the real server driving pruneadvisor's own
// scorer"): silent prompt truncation, num_predict too small for the grammar's
// whitespace, batches too slow for the timeout.

import (
	"context"
	"errors"
	"fmt"
	"math"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/google/go-cmp/cmp"

	"github.com/pruneadvisor/pruneadvisor/cards"
	"github.com/pruneadvisor/pruneadvisor/replay"
	"github.com/pruneadvisor/pruneadvisor/tokencount"
	"github.com/pruneadvisor/pruneadvisor/transcript"
)

// valued gives each card of b a distinct value in the fake and returns the scores
// Score must give.
func valued(f *fake, b cards.Batch) []cards.Score {
	want := make([]cards.Score, len(b.Cards))
	for i, c := range b.Cards {
		v := (7*i + 3) % 100
		if v == unseenValue {
			v++
		}
		f.value[c.Args] = v
		want[i] = cards.Score{Keep: float64(v) / 100, OK: true}
	}
	return want
}

func noProblems(t *testing.T, f *fake) {
	t.Helper()
	_, _, problems := f.stats()
	for _, p := range problems {
		t.Errorf("request: %s", p)
	}
}

// TestPromptNotCutSilently (issue 12.1): the model's tokenizer needs 2.4 times
// the o200k count (6 Tamil cards: 1,917 estimated, 4,582 real), so a batch that
// fits num_ctx by the estimate does not fit the model. The request says
// `truncate: false`, the server answers 400 "the input length exceeds the context
// length", and Score splits until every part fits: every card gets its own
// value, none the noise the fake gives cards it never saw. Without `truncate:
// false` the fake cuts the prompt's front and the first cards' scores are noise.
func TestPromptNotCutSilently(t *testing.T) {
	const numCtx = 4096
	b := batchOf(12)
	f, srv := newFake(t, DefaultModel, numCtx)
	f.ratio = 2.4
	want := valued(f, b)
	s := newScorer(t, srv.URL)
	s.NumCtx = numCtx
	ok, need, err := s.Fits(b)
	if err != nil || !ok || float64(need)*f.ratio < numCtx {
		t.Fatalf("Fits = %v, %d, %v: the test needs a batch that fits by the estimate and not for the model", ok, need, err)
	}
	got, err := s.Score(context.Background(), b)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("scores (-want +got):\n%s", diff)
	}
	noProblems(t, f)
	n, seen, _ := f.stats()
	if n < 3 || len(seen[0]) != 12 {
		t.Errorf("%d requests, the first of %d cards; want the whole batch refused, then parts", n, len(seen[0]))
	}
	t.Logf("12 cards at ratio 2.4, num_ctx %d: %d requests of %v cards", numCtx, n, lens(seen))
}

// TestPromptCutRefused (issue 12.1): a server that knows neither `truncate` nor
// `shift` (an older one) cuts the prompt and answers in full with
// prompt_eval_count = num_ctx; the answer is refused (never stored as scores) and
// the batch split until nothing is cut.
func TestPromptCutRefused(t *testing.T) {
	const numCtx = 4096
	b := batchOf(12)
	f, srv := newFake(t, DefaultModel, numCtx)
	f.ratio, f.ignoreTruncate = 2.4, true
	want := valued(f, b)
	s := newScorer(t, srv.URL)
	s.NumCtx = numCtx
	got, err := s.Score(context.Background(), b)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("scores (-want +got):\n%s", diff)
	}
	noProblems(t, f)
	if n, _, _ := f.stats(); n < 3 {
		t.Errorf("%d requests; want the cut answer refused and the batch split", n)
	}
}

// TestTooLargeForTheServer (issue 12.1): one card that the server refuses even cut
// down fails the batch with too_large after two requests (whole, then cut down).
func TestTooLargeForTheServer(t *testing.T) {
	const numCtx = 2048
	f, srv := newFake(t, DefaultModel, numCtx)
	f.ratio = 20
	s := newScorer(t, srv.URL)
	s.NumCtx = numCtx
	got, err := s.Score(context.Background(), batchOf(1))
	if !errors.Is(err, ErrTooLarge) || !strings.Contains(err.Error(), "HTTP 400: the input length exceeds the context length") {
		t.Errorf("error %v, want too_large with the server's text", err)
	}
	if diff := cmp.Diff(make([]cards.Score, 1), got); diff != "" {
		t.Errorf("scores (-want +got):\n%s", diff)
	}
	if n, seen, _ := f.stats(); n != 2 || !strings.HasSuffix(seen[1][0], "file01.go") || seen[0][0] != seen[1][0] {
		t.Errorf("%d requests with cards %q; want the card, then the card cut down", n, seen)
	}
}

// TestContextFullAnswer (issue 12.1): under `shift: false` an answer that runs out
// of context ends with done_reason "length" and the context full; that is "does
// not fit" (split), not a scored answer and not a truncation to count.
func TestContextFullAnswer(t *testing.T) {
	const numCtx = 4096
	b := batchOf(6)
	f, srv := newFake(t, DefaultModel, numCtx)
	want := valued(f, b)
	s := newScorer(t, srv.URL)
	s.NumCtx = numCtx
	p, err := s.Render(b)
	if err != nil {
		t.Fatal(err)
	}
	// The fake's prompt is both messages, each with a newline; leave 40 tokens
	// for an answer of about 115 (6 cards).
	o200k := tokencount.Count(p.System + "\n" + p.User + "\n")
	f.ratio = float64(numCtx-fakeTemplateTokens-40) / float64(o200k)
	got, err := s.Score(context.Background(), b)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("scores (-want +got):\n%s", diff)
	}
	noProblems(t, f)
	if n, seen, _ := f.stats(); n < 3 {
		t.Errorf("%d requests (%v cards); want the full answer refused and the batch split", n, lens(seen))
	}
}

// TestNumPredictRoom (issue 12.5): the fake pads as the real server does (18-20
// tokens a card), so a 20-card answer needs more than the old 32 + 16·20 = 352
// tokens; num_predict from the schema (AnswerTokens) leaves room and the answer
// is whole.
func TestNumPredictRoom(t *testing.T) {
	b := batchOf(20)
	f, srv := newFake(t, DefaultModel, DefaultNumCtx)
	want := valued(f, b)
	keys := Keys(20)
	var args []string
	for _, c := range b.Cards {
		args = append(args, c.Args)
	}
	padded := utf8.RuneCountInString(f.answer(keys, args, strings.Join(cardsInText(b), "\n")))
	if old := 32 + 16*20; padded <= old {
		t.Fatalf("the fake's 20-card answer is %d tokens; the test needs more than the old num_predict %d", padded, old)
	}
	// 20 keys: 2 braces + 19 commas + 9·len(`"c1":100`) + 11·len(`"c10":100`) = 192
	// characters, and 5 tokens for each of the 4·20+1 places whitespace may go.
	if got, want := AnswerTokens(keys), 192+5*81; got != want {
		t.Errorf("AnswerTokens(20 keys) = %d, want %d", got, want)
	}
	if AnswerTokens(keys) < padded {
		t.Errorf("AnswerTokens %d < the padded answer's %d tokens", AnswerTokens(keys), padded)
	}
	got, err := newScorer(t, srv.URL).Score(context.Background(), b)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("scores (-want +got):\n%s", diff)
	}
	noProblems(t, f)
	if n, _, _ := f.stats(); n != 1 {
		t.Errorf("%d requests, want 1", n)
	}
	if got := AnswerTokens(nil); got != 0 {
		t.Errorf("AnswerTokens(nil) = %d, want 0", got)
	}
}

// cardsInText renders b's cards' first lines as the fake finds them.
func cardsInText(b cards.Batch) []string {
	var out []string
	for i, c := range b.Cards {
		out = append(out, c.Text(fmt.Sprintf("c%d", i+1)))
	}
	return out
}

// smallCards is n cards of a few tokens each, so 100 fit one request by tokens.
func smallCards(n int) cards.Batch {
	b := cards.Batch{Task: "Change the server port to 9090", Now: "Updating config.yaml."}
	for i := 1; i <= n; i++ {
		b.Cards = append(b.Cards, cards.Card{ID: fmt.Sprintf("o%d", i), Tool: "Bash", Args: fmt.Sprintf("ls dir%03d", i),
			Head: "a.go b.go", Chars: 9, Age: 5})
	}
	return b
}

// TestBatchBoundedByTime (issue 12.4): the fake takes 0.5 ms of wall time per
// generated token (about 10 ms a card), so 100 cards in one request take about a
// second, past the 600 ms timeout, and the whole batch would be lost. Score cuts
// the batch into requests planned to take half the timeout at the time per card
// it measures (starting from the 1 s guess: one card first), and every card is
// scored.
func TestBatchBoundedByTime(t *testing.T) {
	const timeout = 600 * time.Millisecond
	b := smallCards(100)
	f, srv := newFake(t, DefaultModel, DefaultNumCtx)
	f.tokenDelay = 500 * time.Microsecond
	want := valued(f, b)
	s := New(clientFor(t, srv.URL), "")
	s.Timeout = timeout
	if ok, need, err := s.Fits(b); err != nil || !ok {
		t.Fatalf("Fits(100 small cards) = %v, %d, %v: the test needs one request by tokens", ok, need, err)
	}
	got, err := s.Score(context.Background(), b)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("scores (-want +got):\n%s", diff)
	}
	noProblems(t, f)
	n, seen, _ := f.stats()
	if len(seen[0]) != 1 || n < 3 {
		t.Errorf("requests of %v cards; want one card first (the 1 s guess), then several parts", lens(seen))
	}
	for i, d := range f.servedTimes() {
		if d >= timeout {
			t.Errorf("request %d (%d cards) took %v, past the timeout", i+1, len(seen[i]), d)
		}
	}
	per := s.CardTimeEstimate()
	if per < 5*time.Millisecond || per > 40*time.Millisecond {
		t.Errorf("measured %v per card, want about 10 ms (0.5 ms × about 19 tokens)", per)
	}
	t.Logf("100 cards, timeout %v: %d requests of %v cards, %v per card measured", timeout, n, lens(seen), per)
}

// TestTimeoutShrinksRequests (issue 12.4): with a first guess far too low, the
// first request holds the whole batch and times out; the scorer learns from it
// (each card took at least timeout/cards) and the next ask is cut small enough.
func TestTimeoutShrinksRequests(t *testing.T) {
	const timeout = 400 * time.Millisecond
	b := smallCards(60)
	f, srv := newFake(t, DefaultModel, DefaultNumCtx)
	f.tokenDelay = 500 * time.Microsecond
	want := valued(f, b)
	s := New(clientFor(t, srv.URL), "")
	s.Timeout, s.CardTime = timeout, time.Microsecond
	if _, err := s.Score(context.Background(), b); FailKind(err) != "timeout" {
		t.Fatalf("first ask: %v, want a timeout (60 cards take about 600 ms)", err)
	}
	if got, want := s.CardsPerRequest(), 30; got != want {
		t.Errorf("after the timeout: %d cards per request, want %d (half of 400 ms / (400 ms / 60))", got, want)
	}
	got, err := s.Score(context.Background(), b)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("scores (-want +got):\n%s", diff)
	}
	_, seen, _ := f.stats()
	if len(seen) < 3 || len(seen[1]) != 30 {
		t.Errorf("requests of %v cards; want 60 (timed out), then 30 and the rest", lens(seen))
	}
}

func TestCardsPerRequest(t *testing.T) {
	tests := []struct {
		timeout, card time.Duration
		want          int
	}{
		{60 * time.Second, time.Second, 30}, // the defaults
		{60 * time.Second, 510 * time.Millisecond, 58},
		{300 * time.Millisecond, time.Second, 1}, // never 0
		{time.Second, 0, 0},                      // 0: the default guess
	}
	for _, tt := range tests {
		s := New(nil, "")
		s.Timeout, s.CardTime = tt.timeout, tt.card
		want := tt.want
		if tt.card == 0 {
			want = int(RequestTimeShare * float64(tt.timeout) / float64(DefaultCardTime))
			want = max(want, 1)
		}
		if got := s.CardsPerRequest(); got != want {
			t.Errorf("Timeout %v, CardTime %v: %d cards per request, want %d", tt.timeout, tt.card, got, want)
		}
	}
}

// TestCheckModel: /api/show says whether the model is pulled.
func TestCheckModel(t *testing.T) {
	_, srv := newFake(t, DefaultModel, DefaultNumCtx)
	if err := newScorer(t, srv.URL).CheckModel(context.Background()); err != nil {
		t.Errorf("CheckModel(%s): %v", DefaultModel, err)
	}
	s := New(clientFor(t, srv.URL), "nosuch")
	err := s.CheckModel(context.Background())
	if FailKind(err) != "not_pulled" || !strings.Contains(err.Error(), "model nosuch is not pulled: ollama pull nosuch") {
		t.Errorf("CheckModel(nosuch) = %v, want not_pulled with the pull command", err)
	}
}

// TestThinkingModel: the fake answers a request without `think` on a model that
// thinks with an empty message and done false; the scorer sends think false and
// gets its answer.
func TestThinkingModel(t *testing.T) {
	f, srv := newFake(t, DefaultModel, DefaultNumCtx)
	f.thinks = true
	b := batchOf(3)
	want := valued(f, b)
	got, err := newScorer(t, srv.URL).Score(context.Background(), b)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("scores (-want +got):\n%s", diff)
	}
	noProblems(t, f)
}

// TestRequestTokens: the scorer's own request-size figure, counted by part, is
// within 1% of the exact o200k count of the prompt it renders (plus
// TemplateTokens), on a real session's largest outputs at several ages, for both
// prompt versions; v2 is larger by the used lines.
func TestRequestTokens(t *testing.T) {
	batch := sessionBatch(t, 40)
	for _, v := range []string{PromptV1, PromptV2} {
		s := New(nil, "")
		s.Prompt = v
		for _, age := range []int{3, 17, 250} {
			for k := range batch.Cards {
				batch.Cards[k].Age = age + k
			}
			p, err := s.Render(batch)
			if err != nil {
				t.Fatal(err)
			}
			exact := tokencount.Count(p.System) + tokencount.Count(p.User) + TemplateTokens
			got := s.RequestTokens(batch)
			if rel := math.Abs(float64(got-exact)) / float64(exact); rel > 0.01 {
				t.Errorf("%s, ages from %d: RequestTokens = %d, exact %d (%.2f%% off)", v, age, got, exact, 100*rel)
			}
			if age == 3 {
				t.Logf("%s: %d cards, RequestTokens %d, exact %d", v, len(batch.Cards), got, exact)
			}
		}
	}
	v1, v2 := New(nil, ""), New(nil, "")
	v1.Prompt = PromptV1
	b := exampleBatch()
	if v2.RequestTokens(b) <= v1.RequestTokens(b) {
		t.Errorf("v2 (%d tokens) is not larger than v1 (%d): where are the used lines?", v2.RequestTokens(b), v1.RequestTokens(b))
	}
	bad := New(nil, "")
	bad.Prompt = "p9"
	if got := bad.RequestTokens(b); got != 0 {
		t.Errorf("unknown prompt: RequestTokens = %d, want 0", got)
	}
}

// The scorer sizes its own requests for replay (replay.Replayer.Sizer).
var _ replay.RequestSizer = (*Scorer)(nil)

func lens(seen [][]string) []int {
	var k []int
	for _, a := range seen {
		k = append(k, len(a))
	}
	return k
}

// BenchmarkRequestTokens measures the scorer's own request-size figure on a batch
// of the 50 largest outputs of ../shared/sessions' first Claude Code session (or
// the repository's fix-port.jsonl), their ages moving on every call as re-asks
// would, so the whole-prompt count never repeats.
func BenchmarkRequestTokens(b *testing.B) {
	batch := sessionBatch(b, 50)
	s := New(nil, "")
	i := 0
	for b.Loop() {
		i++
		for k := range batch.Cards {
			batch.Cards[k].Age = 3 + i%40
		}
		if s.RequestTokens(batch) == 0 {
			b.Fatal("no tokens")
		}
	}
	b.ReportMetric(float64(len(batch.Cards)), "cards")
}

// sessionBatch builds up to n cards of a real session, as seen at its last step.
func sessionBatch(tb testing.TB, n int) cards.Batch {
	path := "../../testdata/sessions/fix-port.jsonl"
	if m, _ := filepath.Glob("../../../shared/sessions/claude-code/*.jsonl"); len(m) > 0 {
		path = m[0]
	}
	sess, err := transcript.ReadFile(path, transcript.Options{Lenient: true})
	if err != nil {
		tb.Fatal(err)
	}
	outs := sess.Outputs()
	slices.SortFunc(outs, func(a, b *transcript.ToolOutput) int { return b.Tokens - a.Tokens })
	last := outs[0].Step
	for _, o := range outs {
		last = max(last, o.Step)
	}
	batch := cards.Batch{Task: cards.Cut(sess.Task, cards.ContextChars), Now: "Next I will run the tests again."}
	for _, o := range outs[:min(n, len(outs))] {
		batch.Cards = append(batch.Cards, cards.Build(sess.Messages, o, last+1))
	}
	tb.Logf("%s: %d cards", path, len(batch.Cards))
	return batch
}
