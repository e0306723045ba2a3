package ollama

// Tests and a benchmark against a real Ollama server. They run only when
// PRUNEADVISOR_TEST_OLLAMA_HOST names a loopback server (as OLLAMA_HOST does:
// "127.0.0.1:11434", "http://localhost:11434") and PRUNEADVISOR_TEST_OLLAMA_MODEL a
// model pulled there ("qwen2.5:0.5b"); otherwise they are skipped, saying so.
// docs/SCORERS.md says how to run them.

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/url"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/ollama/ollama/api"

	"github.com/pruneadvisor/pruneadvisor/cards"
	"github.com/pruneadvisor/pruneadvisor/internal/testkit"
)

// Environment of the real-server tests.
const (
	realHostEnv  = "PRUNEADVISOR_TEST_OLLAMA_HOST"
	realModelEnv = "PRUNEADVISOR_TEST_OLLAMA_MODEL"
)

// realScorer returns a scorer for the server and model the environment names
// (Timeout 120 s: a cold load of a model on a busy CPU takes a while), or skips.
func realScorer(tb testing.TB) *Scorer {
	tb.Helper()
	host, model := os.Getenv(realHostEnv), os.Getenv(realModelEnv)
	if host == "" || model == "" {
		tb.Skipf("no real Ollama server: set %s (e.g. 127.0.0.1:11434) and %s (e.g. qwen2.5:0.5b) to run this against one",
			realHostEnv, realModelEnv)
	}
	tb.Setenv("OLLAMA_HOST", host)
	client, err := api.ClientFromEnvironment()
	if err != nil {
		tb.Fatalf("%s=%q: %v", realHostEnv, host, err)
	}
	if err := loopbackOnly(host); err != nil {
		tb.Fatalf("%s=%q: %v (tests send traffic to loopback only)", realHostEnv, host, err)
	}
	s := New(client, model)
	s.Timeout = 120 * time.Second
	return s
}

// loopbackOnly checks that the client's host resolves to loopback addresses only.
func loopbackOnly(host string) error {
	raw := host
	if !strings.Contains(raw, "://") {
		raw = "http://" + raw
	}
	u, err := url.Parse(raw)
	if err != nil {
		return err
	}
	addrs, err := net.LookupHost(u.Hostname())
	if err != nil {
		return err
	}
	for _, a := range addrs {
		if ip := net.ParseIP(a); ip == nil || !ip.IsLoopback() {
			return fmt.Errorf("%s resolves to %s, not a loopback address", u.Hostname(), a)
		}
	}
	return nil
}

// logLines is a slog handler target that keeps every line.
type logLines struct{ testkit.SyncBuffer }

// count returns how many times s occurs in the lines logged so far.
func (l *logLines) count(s string) int { return strings.Count(l.String(), s) }

func withLog(s *Scorer) *logLines {
	l := &logLines{}
	s.Logger = slog.New(slog.NewTextHandler(l, &slog.HandlerOptions{Level: slog.LevelDebug}))
	return l
}

// checkScores fails unless every score is OK and in [0, 1].
func checkScores(t *testing.T, got []cards.Score, n int) {
	t.Helper()
	if len(got) != n {
		t.Fatalf("%d scores for %d cards", len(got), n)
	}
	for i, sc := range got {
		if !sc.OK || sc.Keep < 0 || sc.Keep > 1 {
			t.Errorf("card %d: score %+v, want OK in [0,1]", i+1, sc)
		}
	}
}

// TestRealBatch: one batch of 8 cards in one request, every card scored.
func TestRealBatch(t *testing.T) {
	s := realScorer(t)
	log := withLog(s)
	v, err := s.Version(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if err := s.CheckModel(context.Background()); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	got, err := s.Score(context.Background(), batchOf(8))
	if err != nil {
		t.Fatal(err)
	}
	checkScores(t, got, 8)
	if n := log.count("ollama: asked"); n != 1 {
		t.Errorf("%d requests, want 1:\n%s", n, log.String())
	}
	t.Logf("Ollama %s, %s: 8 cards in %v, %v per card measured; scores %v", v, s.Name(),
		time.Since(start).Round(time.Millisecond), s.CardTimeEstimate().Round(time.Millisecond), got)
}

// TestRealSplit: at num_ctx 2048, 24 cards do not fit one request by the estimate
// and are split; 6 cards of Tamil text fit by the o200k estimate, but the
// model's tokenizer may need more than twice as many tokens, and then the server
// refuses the request (truncate false) and Score splits it. Either way every card
// is scored and no answer to a cut prompt is accepted.
func TestRealSplit(t *testing.T) {
	s := realScorer(t)
	s.NumCtx = 2048
	log := withLog(s)
	b := batchOf(24)
	if ok, need, _ := s.Fits(b); ok {
		t.Fatalf("24 cards need %d tokens, which fits 2048: the test needs a split", need)
	}
	got, err := s.Score(context.Background(), b)
	if err != nil {
		t.Fatal(err)
	}
	checkScores(t, got, 24)
	if n := log.count("ollama: asked"); n < 2 {
		t.Errorf("%d requests, want a split", n)
	}
	tamil := tamilBatch(6)
	ok, need, _ := s.Fits(tamil)
	got, err = s.Score(context.Background(), tamil)
	if err != nil {
		t.Fatal(err)
	}
	checkScores(t, got, 6)
	t.Logf("24 cards: split by the estimate; 6 Tamil cards (estimate %d tokens, fits %v): %d refusals by the server, %d requests in all",
		need, ok, log.count("the server found the request too large"), log.count("ollama: asked"))
}

// tamilBatch is n cards of Tamil text, which o200k counts far lower than most
// models' tokenizers (OLLAMA-WIRE.md: 1,917 against 4,582 for six cards).
func tamilBatch(n int) cards.Batch {
	const line = "இந்த கோப்பு சேவையகத்தின் அமைப்புகளைக் கொண்டுள்ளது; துறை எண் மாற்றப்பட வேண்டும். "
	b := cards.Batch{Task: "சேவையகத்தின் துறையை 9090 ஆக மாற்று", Now: "அடுத்து config.yaml இல் துறையை மாற்றுகிறேன்."}
	for i := 1; i <= n; i++ {
		head, tail := cards.HeadTail(strings.Repeat(line, 12), cards.HeadChars, cards.TailChars)
		b.Cards = append(b.Cards, cards.Card{ID: fmt.Sprintf("t%d", i), Tool: "Read", Args: fmt.Sprintf("docs/ta/%02d.md", i),
			Head: head, Tail: tail, Chars: 12 * len([]rune(line)), Age: 6, Reaction: "அடுத்த கோப்பைப் படிக்கிறேன்."})
	}
	return b
}

// TestRealWrongModel: a model the server does not have fails as not_pulled, from
// /api/show and from /api/chat, with the pull command in the message.
func TestRealWrongModel(t *testing.T) {
	s := realScorer(t)
	s.Model = "pruneadvisor-no-such-model"
	want := "ollama pull pruneadvisor-no-such-model"
	if err := s.CheckModel(context.Background()); FailKind(err) != "not_pulled" || !strings.Contains(err.Error(), want) {
		t.Errorf("CheckModel: %v, want not_pulled saying %q", err, want)
	}
	got, err := s.Score(context.Background(), batchOf(2))
	if FailKind(err) != "not_pulled" || !strings.Contains(err.Error(), want) {
		t.Errorf("Score: %v, want not_pulled saying %q", err, want)
	}
	for _, sc := range got {
		if sc.OK {
			t.Errorf("score %+v from a model that is not there", sc)
		}
	}
	t.Logf("%v", err)
}

// TestRealTimeout: a request given 50 ms fails as timeout, and the server, which
// drops it, answers the next one normally.
func TestRealTimeout(t *testing.T) {
	s := realScorer(t)
	if _, err := s.Score(context.Background(), batchOf(1)); err != nil { // load the model first
		t.Fatal(err)
	}
	short := New(s.client, s.Model)
	short.Timeout = 50 * time.Millisecond
	short.CardTime = time.Microsecond // all 20 cards in one request
	_, timeoutErr := short.Score(context.Background(), batchOf(20))
	if FailKind(timeoutErr) != "timeout" || !errors.Is(timeoutErr, ErrTimeout) {
		t.Fatalf("20 cards in 50 ms: %v, want timeout", timeoutErr)
	}
	start := time.Now()
	got, err := s.Score(context.Background(), batchOf(2))
	if err != nil {
		t.Fatalf("the ask after a timeout: %v", err)
	}
	checkScores(t, got, 2)
	t.Logf("timeout: %v; the next ask took %v", timeoutErr, time.Since(start).Round(time.Millisecond))
}

// BenchmarkRealScore scores batches of 10 cards against the real server and
// reports wall time per card and the scorer's own measurement.
func BenchmarkRealScore(b *testing.B) {
	s := realScorer(b)
	batch := batchOf(10)
	if _, err := s.Score(context.Background(), batch); err != nil { // load the model
		b.Fatal(err)
	}
	start, asks := time.Now(), 0
	for b.Loop() {
		if _, err := s.Score(context.Background(), batch); err != nil {
			b.Fatal(err)
		}
		asks++
	}
	b.ReportMetric(float64(time.Since(start).Milliseconds())/float64(asks*len(batch.Cards)), "ms/card")
	b.ReportMetric(float64(s.CardTimeEstimate().Milliseconds()), "measured-ms/card")
}
