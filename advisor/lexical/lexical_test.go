package lexical

import (
	"context"
	"errors"
	"math"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"

	"github.com/pruneadvisor/pruneadvisor/cards"
)

// Outputs of a small made-up session. The expected figures in the tests below were
// computed independently by a Python transcription of the formula in the package
// comment (regex [A-Za-z0-9_]{2,} for terms, collections.Counter for df and tf).
var outputs = []string{
	"server:\n  host: 0.0.0.0\n  port: 8080\nlogging:\n  level: info\n",              // read config.yaml
	"ok  \texample.com/app\t0.412s\nok  \texample.com/app/store\t0.108s\n",           // go test
	"package main\n\nimport \"fmt\"\n\nfunc main() {\n\tfmt.Println(\"hello\")\n}\n", // read main.go
	"README.md\nconfig.yaml\nmain.go\ngo.mod\n",                                      // ls
	"commit 1a2b3c\nAuthor: dev\n\n    Update the README\n",                          // git log
}

func testCards() []cards.Card {
	return []cards.Card{
		{ID: "o1", Tool: "Read", Args: "config.yaml", Head: outputs[0], Age: 8,
			Reaction: "The server listens on port 8080; I will change it next."},
		{ID: "o2", Tool: "Bash", Args: "go test ./...", Head: outputs[1], Age: 7, Reaction: "All tests pass."},
		{ID: "o3", Tool: "Read", Args: "main.go", Head: outputs[2], Age: 6},
		{ID: "o4", Tool: "Bash", Args: "ls", Head: outputs[3], Age: 5, Reaction: "next call: Read config.yaml"},
	}
}

func testCorpus() *cards.Corpus {
	c := cards.NewCorpus()
	for _, o := range outputs {
		c.Add(o)
	}
	return c
}

const (
	task = "Change the server port to 9090"
	now  = "next I will update the port in config.yaml"
)

var approx = cmpopts.EquateApprox(0, 1e-12)

func TestScore(t *testing.T) {
	tests := []struct {
		name   string
		corpus *cards.Corpus
		want   []float64 // keep-probabilities, cards in order
	}{
		// Raw BM25: 9.71759217485722, 0, 0, 3.349056487046085.
		{"corpus", testCorpus(), []float64{0.7641062900309837, 0, 0, 0.5274888471821176}},
		// Raw BM25 with the batch as the collection: 8.256714805046078, 0, 0, 2.651595610996203.
		{"nil corpus", nil, []float64{0.7334924041377346, 0, 0, 0.4691764580319659}},
		{"empty corpus", cards.NewCorpus(), []float64{0.7334924041377346, 0, 0, 0.4691764580319659}},
	}
	for _, tt := range tests {
		got, err := New().Score(context.Background(), cards.Batch{Task: task, Now: now, Cards: testCards(), Corpus: tt.corpus})
		if err != nil {
			t.Fatalf("%s: %v", tt.name, err)
		}
		var keep []float64
		for i, s := range got {
			if !s.OK {
				t.Errorf("%s: card %d not OK", tt.name, i)
			}
			keep = append(keep, s.Keep)
		}
		if diff := cmp.Diff(tt.want, keep, approx); diff != "" {
			t.Errorf("%s: keep (-want +got):\n%s", tt.name, diff)
		}
	}
}

// TestRanking: now names the file an old read holds; that card ranks first, above
// the listing that merely mentions the file, above unrelated outputs, whatever the
// card order.
func TestRanking(t *testing.T) {
	cs := testCards()
	for rot := range cs {
		batch := append(append([]cards.Card(nil), cs[rot:]...), cs[:rot]...)
		got, err := New().Score(context.Background(), cards.Batch{Task: task, Now: now, Cards: batch, Corpus: testCorpus()})
		if err != nil {
			t.Fatal(err)
		}
		byID := map[string]float64{}
		for i, s := range got {
			byID[batch[i].ID] = s.Keep
		}
		if !(byID["o1"] > byID["o4"] && byID["o4"] > byID["o2"] && byID["o4"] > byID["o3"]) {
			t.Errorf("rotation %d: want o1 > o4 > o2, o3; got %v", rot, byID)
		}
		if byID["o1"] < 0.5 {
			t.Errorf("rotation %d: config.yaml read keep = %v, want >= 0.5", rot, byID["o1"])
		}
	}
}

// TestToolNameDF: a tool name is in no output, but when most cards share it, its
// df comes from the batch, so "read" in now is a common word, not a rare one.
func TestToolNameDF(t *testing.T) {
	c := cards.NewCorpus()
	for _, o := range []string{"alpha beta", "gamma delta", "epsilon", "zeta eta", "theta", "iota kappa"} {
		c.Add(o)
	}
	b := cards.Batch{Now: "I will read the next file", Corpus: c, Cards: []cards.Card{
		{Tool: "Read", Args: "a.txt", Head: "alpha beta"},
		{Tool: "Read", Args: "b.txt", Head: "gamma delta"},
		{Tool: "Read", Args: "c.txt", Head: "epsilon"},
		{Tool: "Bash", Args: "make", Head: "zeta eta"},
	}}
	got, err := New().Score(context.Background(), b)
	if err != nil {
		t.Fatal(err)
	}
	want := []cards.Score{{Keep: 0.18361683194975892, OK: true}, {Keep: 0.18361683194975892, OK: true},
		{Keep: 0.2010466865584597, OK: true}, {Keep: 0, OK: true}}
	if diff := cmp.Diff(want, got, approx); diff != "" {
		t.Errorf("keep (-want +got):\n%s", diff)
	}
}

func TestEmptyQuery(t *testing.T) {
	for _, q := range [][2]string{{"", ""}, {"  ", "\n"}, {"a b c", "- ."}} {
		got, err := New().Score(context.Background(), cards.Batch{Task: q[0], Now: q[1], Cards: testCards(), Corpus: testCorpus()})
		if !errors.Is(err, ErrEmptyQuery) {
			t.Errorf("task %q now %q: error = %v, want ErrEmptyQuery", q[0], q[1], err)
		}
		if diff := cmp.Diff(make([]cards.Score, 4), got); diff != "" {
			t.Errorf("task %q now %q: scores (-want +got):\n%s", q[0], q[1], diff)
		}
	}
}

func TestEmptyBatchAndContext(t *testing.T) {
	got, err := New().Score(context.Background(), cards.Batch{Task: task, Now: now})
	if err != nil || len(got) != 0 {
		t.Errorf("empty batch: got %v, %v; want no scores, nil", got, err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	got, err = New().Score(ctx, cards.Batch{Task: task, Now: now, Cards: testCards()})
	if !errors.Is(err, context.Canceled) {
		t.Errorf("canceled: error = %v, want context.Canceled", err)
	}
	for i, s := range got {
		if s.OK {
			t.Errorf("canceled: card %d OK", i)
		}
	}
	if New().Name() != "lexical" {
		t.Errorf("Name() = %q", New().Name())
	}
}

func TestMonotone(t *testing.T) {
	score := func(b cards.Batch) float64 {
		t.Helper()
		got, err := New().Score(context.Background(), b)
		if err != nil {
			t.Fatal(err)
		}
		return got[0].Keep
	}
	c := testCorpus()
	card := cards.Card{Tool: "Read", Args: "config.yaml", Head: outputs[0]}

	// More query terms that the card holds: never lower.
	prev := -1.0
	for _, q := range []string{"deploy", "deploy port", "deploy port 8080", "deploy port 8080 logging", "deploy port 8080 logging config.yaml"} {
		k := score(cards.Batch{Now: q, Cards: []cards.Card{card}, Corpus: c})
		if k <= prev {
			t.Errorf("now %q: keep %v not above %v", q, k, prev)
		}
		prev = k
	}

	// More occurrences of the matched term in the card (alone in its batch, so its
	// length is the average): never lower.
	prev = -1.0
	for n := 1; n <= 6; n++ {
		k := score(cards.Batch{Now: "port", Cards: []cards.Card{{Head: strings.Repeat("port ", n) + "x1 x2 x3"}}, Corpus: c})
		if k <= prev {
			t.Errorf("%d occurrences: keep %v not above %v", n, k, prev)
		}
		prev = k
	}

	// A rarer term (lower df) scores higher.
	prev = math.Inf(1)
	rare := cards.Card{Head: "zebra"}
	for df := 0; df <= 20; df += 4 {
		c := cards.NewCorpus()
		for i := range 20 {
			if i < df {
				c.Add("zebra")
			} else {
				c.Add("horse")
			}
		}
		k := score(cards.Batch{Now: "zebra", Cards: []cards.Card{rare}, Corpus: c})
		if k >= prev {
			t.Errorf("df %d: keep %v not below %v", df, k, prev)
		}
		if k <= 0 || k >= 1 {
			t.Errorf("df %d: keep %v outside (0,1)", df, k)
		}
		prev = k
	}
}

func TestKeepAndIDF(t *testing.T) {
	tests := []struct {
		s, want float64
	}{{-1, 0}, {0, 0}, {math.NaN(), 0}, {1, 0.25}, {HalfScore, 0.5}, {9, 0.75}, {1e300, 1}}
	for _, tt := range tests {
		if got := Keep(tt.s); math.Abs(got-tt.want) > 1e-12 {
			t.Errorf("Keep(%v) = %v, want %v", tt.s, got, tt.want)
		}
	}
	prev := -1.0
	for s := 0.0; s < 50; s += 0.25 {
		if k := Keep(s); k <= prev && s > 0 {
			t.Errorf("Keep(%v) = %v not above %v", s, k, prev)
		} else {
			prev = k
		}
	}
	// ln(1 + 29.5/1.5) = 3.0301..., the package comment's example; df > n clamps.
	idfs := []struct {
		n, df int
		want  float64
	}{{30, 1, math.Log(1 + 29.5/1.5)}, {30, 30, math.Log(1 + 0.5/30.5)}, {30, 45, math.Log(1 + 0.5/30.5)}, {0, 0, math.Log(2)}, {5, -1, math.Log(12)}}
	for _, tt := range idfs {
		if got := IDF(tt.n, tt.df); math.Abs(got-tt.want) > 1e-12 || got <= 0 {
			t.Errorf("IDF(%d, %d) = %v, want %v", tt.n, tt.df, got, tt.want)
		}
	}
}

// distinct returns terms without repeats, each at its first place.
func distinct(terms []string) []string {
	seen := map[string]bool{}
	var out []string
	for _, t := range terms {
		if !seen[t] {
			seen[t] = true
			out = append(out, t)
		}
	}
	return out
}

// scoreByMaps is Score as it was written first (a term-frequency map of every term
// of every card, and of the batch): the definition the one-pass Score keeps to.
func scoreByMaps(b cards.Batch) []cards.Score {
	out := make([]cards.Score, len(b.Cards))
	query := distinct(cards.Terms(b.Task + "\n" + b.Now))
	docs := make([]map[string]int, len(b.Cards))
	lens := make([]int, len(b.Cards))
	batchDF := map[string]int{}
	total := 0
	for i, c := range b.Cards {
		terms := cards.Terms(Document(c))
		tf := make(map[string]int, len(terms))
		for _, t := range terms {
			if tf[t] == 0 {
				batchDF[t]++
			}
			tf[t]++
		}
		docs[i], lens[i] = tf, len(terms)
		total += len(terms)
	}
	avgdl := 1.0
	if len(b.Cards) > 0 && total > 0 {
		avgdl = float64(total) / float64(len(b.Cards))
	}
	n := len(b.Cards)
	if b.Corpus != nil && b.Corpus.Docs > n {
		n = b.Corpus.Docs
	}
	idf := make(map[string]float64, len(query))
	for _, t := range query {
		df := batchDF[t]
		if c := b.Corpus.DF(t); c > df {
			df = c
		}
		idf[t] = IDF(n, df)
	}
	for i := range b.Cards {
		out[i] = cards.Score{Keep: Keep(BM25(query, docs[i], lens[i], avgdl, idf)), OK: true}
	}
	return out
}

// cardKeepByMaps is CardKeep as it was written first.
func cardKeepByMaps(c cards.Card, query []string, corpus *cards.Corpus) float64 {
	if len(query) == 0 {
		return -1
	}
	terms := cards.Terms(Document(c))
	tf := make(map[string]int, len(terms))
	for _, t := range terms {
		tf[t]++
	}
	n := 1
	if corpus != nil {
		n = max(corpus.Docs, 1)
	}
	idf := make(map[string]float64, len(query))
	for _, t := range query {
		df := 1
		if corpus != nil {
			df = max(corpus.DF(t), 1)
		}
		idf[t] = IDF(n, df)
	}
	return Keep(BM25(query, tf, len(terms), CardAvgTerms, idf))
}

// TestScoresMatchMaps checks that Score, CardKeep and a shared Matcher give
// exactly (bit for bit) the figures of the map-based definitions, on batches drawn
// from a pool of words with repeats, case, non-ASCII letters and terms outside
// the corpus, and queries with repeated terms (which CardKeep counts again).
func TestScoresMatchMaps(t *testing.T) {
	words := strings.Fields("port Port PORT config.yaml server 8080 9090 main.go go test ok " +
		"README été Été naïve x_y a b cd ef gh the file error sessions 1a2b3c über straße ΣΑΣ")
	r := rand.New(rand.NewPCG(1, 2))
	text := func(n int) string {
		var b strings.Builder
		for range n {
			b.WriteString(words[r.IntN(len(words))])
			b.WriteString([]string{" ", "\n", "/", "-", ".", ", "}[r.IntN(6)])
		}
		return b.String()
	}
	for round := range 2000 {
		var corpus *cards.Corpus
		if round%5 != 0 {
			corpus = cards.NewCorpus()
			for range r.IntN(20) {
				corpus.Add(text(r.IntN(60)))
			}
		}
		b := cards.Batch{Task: text(r.IntN(12)), Now: text(r.IntN(12)), Corpus: corpus}
		for range r.IntN(12) {
			b.Cards = append(b.Cards, cards.Card{Tool: text(1), Args: text(r.IntN(4)), Head: text(r.IntN(80)),
				Tail: text(r.IntN(30)), Reaction: text(r.IntN(10))})
		}
		got, err := New().Score(context.Background(), b)
		if want := scoreByMaps(b); !errors.Is(err, ErrEmptyQuery) {
			if err != nil {
				t.Fatal(err)
			}
			for i := range want {
				if got[i] != want[i] {
					t.Fatalf("round %d card %d: Score %v; the maps give %v", round, i, got[i], want[i])
				}
			}
		}
		query := Query(b.Task, b.Now)
		if round%3 == 0 {
			query = cards.Terms(b.Task + "\n" + b.Now) // repeats
		}
		m := NewMatcher(query, corpus)
		for i, c := range b.Cards {
			want := cardKeepByMaps(c, query, corpus)
			if got := m.Keep(c); got != want {
				t.Fatalf("round %d card %d: Matcher.Keep %v; the maps give %v", round, i, got, want)
			}
			if got := CardKeep(c, query, corpus); got != want {
				t.Fatalf("round %d card %d: CardKeep %v; the maps give %v", round, i, got, want)
			}
		}
	}
}
