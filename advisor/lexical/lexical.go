// Package lexical is the BM25 baseline scorer (docs/DESIGN.md, "Calibration, baselines"):
// each card is a document, the batch's task and now are the query, and term rarity
// comes from the session's tool outputs. It needs no model and no network, so it is
// also the fallback when Ollama is not reachable ("The embedded default").
//
// Score of card D for query Q (Robertson & Zaragoza 2009, "The Probabilistic
// Relevance Framework: BM25 and Beyond", Found. Trends Inf. Retr. 3(4), eq. 3.15 with
// k3 = 0, so each distinct query term counts once):
//
//	s(D, Q) = Σ_{t ∈ Q, distinct} IDF(t) · tf(t,D)·(k1+1) / (tf(t,D) + k1·(1 − b + b·|D|/avgdl))
//	IDF(t)  = ln(1 + (N − df(t) + 0.5) / (df(t) + 0.5))
//
// with k1 = 1.2, b = 0.75. The IDF is the non-negative form Lucene uses
// (org.apache.lucene.search.similarities.BM25Similarity.idf, Lucene ≥ 6): the classic
// Robertson–Spärck Jones form without the "1 +" goes negative for terms in more than
// half of the documents. The raw score maps to a keep-probability by the monotone
// transform keep = s / (s + K) with K = HalfScore (see there).
package lexical

import (
	"context"
	"fmt"
	"math"
	"slices"
	"strings"
	"sync/atomic"

	"github.com/pruneadvisor/pruneadvisor/cards"
)

// BM25 parameters: the usual defaults (Robertson & Zaragoza 2009 §3.3 suggest
// k1 in [1.2, 2.0] and b = 0.75; Lucene and Elasticsearch ship k1 = 1.2, b = 0.75).
const (
	K1 = 1.2  // term-frequency saturation
	B  = 0.75 // document-length normalisation
)

// HalfScore is K in keep = s/(s+K): the raw BM25 score, in IDF units (nats), at which
// the keep-probability is 0.5. A card sharing one distinctive term with the query —
// a term in 1 of 30 session outputs has IDF ln(1 + 29.5/1.5) = 3.03, and one
// occurrence in a card of average length contributes exactly IDF — scores about
// 3.0/(3.0+3) = 0.50; a file name such as "config.yaml" brings two such terms and
// about 0.67. A card sharing nothing scores 0. With the default cutoff 0.25
// (docs/DESIGN.md) a card is kept when s >= K/3 = 1, i.e. it shares at least one term
// that occurs in at most about a third of the outputs (ln(1 + (N − df + 0.5)/(df + 0.5))
// = 1 at df ≈ 0.37·N); a card matching only common words ("the", "file", "error": in
// most outputs, IDF near 0) falls below it. The calibrate command sets the
// lexical scorer's own cutoff from replay evidence.
const HalfScore = 3.0

// ErrEmptyQuery is returned (with all scores not OK) when the task and now hold no
// terms: BM25 then has no evidence either way, and a score of 0 would prune every
// card on no grounds, so the batch gets "no score" instead. Its Kind() is
// "empty_query" (advisor.FailKind counts failures by a Kind() string method).
var ErrEmptyQuery error = emptyQuery{}

type emptyQuery struct{}

func (emptyQuery) Error() string { return "lexical: task and now hold no terms" }
func (emptyQuery) Kind() string  { return "empty_query" }

// Scorer is the BM25 scorer. The zero value is ready to use; it holds no state and
// is safe for concurrent use.
type Scorer struct{}

// New returns a lexical scorer.
func New() *Scorer { return &Scorer{} }

// Name returns "lexical", the name recorded with every ask.
func (*Scorer) Name() string { return "lexical" }

// Score returns one keep-probability per card, in order, all OK, in [0, 1).
//
// The document of a card is cards.Terms of its tool, args, head, tail and reaction;
// the query is the distinct cards.Terms of b.Task and b.Now. N and df come from
// b.Corpus (the session's outputs); because a card also holds words that are not in
// any output (the tool name, the argument summary, the reaction), df(t) is the larger
// of the corpus count and the number of cards in the batch holding t, and N the larger
// of the corpus size and the batch size. With a nil or empty corpus the batch alone is
// the collection. avgdl is the mean card length of the batch, in terms: cards are
// documents of their own kind (at most 300 + 100 characters of output), so the
// corpus's average output length would not measure them. Score never fails except on
// an empty query (ErrEmptyQuery) or a done context (its error); it does no I/O.
func (s *Scorer) Score(ctx context.Context, b cards.Batch) ([]cards.Score, error) {
	out := make([]cards.Score, len(b.Cards))
	if err := ctx.Err(); err != nil {
		return out, fmt.Errorf("lexical: %w", err)
	}
	memo := query(b.Task, b.Now)
	if len(memo.terms) == 0 {
		return out, ErrEmptyQuery
	}
	tc := countTerms(b.Cards, memo)
	idf := tc.idf(b, memo.terms)
	start := 0
	for i := range b.Cards {
		norm := bm25Norm(tc.lens[i], tc.avgdl)
		raw := 0.0
		for _, c := range tc.counts[start:tc.ends[i]] {
			raw += bm25Term(idf[c.term], float64(c.n), norm) // as BM25 sums, in query order
		}
		start = tc.ends[i]
		out[i] = cards.Score{Keep: Keep(raw), OK: true}
	}
	return out, nil
}

// termCount is one query term's count in one card: term is its index in the
// query, n how often the card holds it.
type termCount struct{ term, n int }

// batchCounts is what BM25 needs of a batch's cards: only the query's terms count
// in a document (BM25 sums over them), so each card keeps its count of each query
// term it holds, in query order, and its length in terms.
type batchCounts struct {
	counts  []termCount
	ends    []int   // card i's counts are counts[ends[i-1]:ends[i]]
	lens    []int   // card i's length in terms
	batchDF []int   // by query term: the cards holding it
	avgdl   float64 // the mean card length (1 for an empty batch)
}

// countTerms counts the query's terms (memo.at: a term's index in the query) in
// each card, in one pass over each card's terms.
func countTerms(cs []cards.Card, memo *queryMemo) batchCounts {
	tc := batchCounts{ends: make([]int, len(cs)), lens: make([]int, len(cs)), batchDF: make([]int, len(memo.terms)), avgdl: 1}
	tf := make([]int, len(memo.terms)) // the current card's
	var buf []byte
	total := 0
	for i, c := range cs {
		start := len(tc.counts)
		eachDocTerm(c, &buf, func(t []byte) {
			tc.lens[i]++
			if q, ok := memo.at[string(t)]; ok {
				if tf[q] == 0 {
					tc.counts = append(tc.counts, termCount{term: q})
				}
				tf[q]++
			}
		})
		mine := tc.counts[start:]
		slices.SortFunc(mine, func(x, y termCount) int { return x.term - y.term })
		for k := range mine {
			mine[k].n = tf[mine[k].term]
			tf[mine[k].term] = 0
			tc.batchDF[mine[k].term]++
		}
		tc.ends[i] = len(tc.counts)
		total += tc.lens[i]
	}
	if len(cs) > 0 && total > 0 {
		tc.avgdl = float64(total) / float64(len(cs))
	}
	return tc
}

// idf returns each query term's IDF over the batch, or over the session's corpus
// (b.Corpus) where it knows more documents or a higher document frequency.
func (tc batchCounts) idf(b cards.Batch, query []string) []float64 {
	n := len(b.Cards)
	if b.Corpus != nil && b.Corpus.Docs > n {
		n = b.Corpus.Docs
	}
	idf := make([]float64, len(query))
	for q, t := range query {
		df := tc.batchDF[q]
		if c := b.Corpus.DF(t); c > df {
			df = c
		}
		idf[q] = IDF(n, df)
	}
	return idf
}

// eachDocTerm calls f with each term of Document(c), in order (cards.EachTerm):
// field by field, which gives the same terms, as no term spans the newline between
// two fields.
func eachDocTerm(c cards.Card, buf *[]byte, f func(term []byte)) {
	for _, s := range [...]string{c.Tool, c.Args, c.Head, c.Tail, c.Reaction} {
		cards.EachTerm(s, buf, f)
	}
}

// Document returns the text the scorer indexes for a card: tool, args, head, tail and
// reaction, one per line.
func Document(c cards.Card) string {
	return c.Tool + "\n" + c.Args + "\n" + c.Head + "\n" + c.Tail + "\n" + c.Reaction
}

// IDF returns ln(1 + (n − df + 0.5)/(df + 0.5)) for a term in df of n documents (the
// Lucene BM25 form, always > 0). df is clamped to [0, n].
func IDF(n, df int) float64 {
	if df > n {
		df = n
	}
	if df < 0 {
		df = 0
	}
	return math.Log(1 + (float64(n)-float64(df)+0.5)/(float64(df)+0.5))
}

// BM25 returns the raw score of a document with term frequencies tf and length dl
// (terms) for the distinct query terms, given the average document length avgdl
// (terms, > 0) and each query term's IDF. See the package comment for the formula.
func BM25(query []string, tf map[string]int, dl int, avgdl float64, idf map[string]float64) float64 {
	norm := bm25Norm(dl, avgdl)
	s := 0.0
	for _, t := range query {
		f := float64(tf[t])
		if f == 0 {
			continue
		}
		s += bm25Term(idf[t], f, norm)
	}
	return s
}

// bm25Norm is BM25's length normalisation K1*(1-B+B*dl/avgdl) of a document of dl
// terms; Score and Matcher.Keep use it as BM25 does, so their sums are BM25's bit
// for bit (TestScoresMatchMaps).
func bm25Norm(dl int, avgdl float64) float64 { return K1 * (1 - B + B*float64(dl)/avgdl) }

// bm25Term is one query term's share of a BM25 sum: idf * f*(K1+1) / (f+norm), for
// f > 0 occurrences in a document whose normalisation is norm (bm25Norm).
func bm25Term(idf, f, norm float64) float64 { return idf * f * (K1 + 1) / (f + norm) }

// Keep maps a raw BM25 score s >= 0 to a keep-probability s/(s+HalfScore) in [0, 1),
// strictly increasing in s; Keep(0) = 0 and Keep(HalfScore) = 0.5.
func Keep(s float64) float64 {
	if s <= 0 || math.IsNaN(s) {
		return 0
	}
	return s / (s + HalfScore)
}

// CardAvgTerms is the average card length, in terms, that CardKeep normalises by: the
// mean of len(cards.Terms(Document(card))) over the first-ask cards of a lexical
// replay of ../shared/corpus (measured by TestCardAvgTerms's log line; 2026-12).
const CardAvgTerms = 85.0

// Query returns the distinct terms of task and now (cards.Terms of task, a newline
// and now), the query of every card of a batch; nil when they hold none. The slice
// is shared: callers must not change it. The last query is kept (lastQuery), so the
// advisor's Matcher and Score, which both need the query of one batch, and the
// batches of steps whose task and now did not change, split the text once.
func Query(task, now string) []string { return query(task, now).terms }

// query returns the memo of Query(task, now): the last one when its task and now
// are these, else a new one, which becomes the last.
func query(task, now string) *queryMemo {
	if m := lastQuery.Load(); m != nil && m.task == task && m.now == now {
		return m
	}
	// Copies of task and now: they may be pieces of a session's texts, which the
	// memo must not keep alive.
	m := &queryMemo{task: strings.Clone(task), now: strings.Clone(now)}
	// The distinct terms, each at its first place, and their index.
	terms := cards.Terms(task + "\n" + now)
	if len(terms) > 0 {
		m.at = make(map[string]int, len(terms))
		q := terms[:0] // in place: a term is written where one was already read
		for _, t := range terms {
			if _, ok := m.at[t]; !ok {
				m.at[t] = len(q)
				q = append(q, t)
			}
		}
		m.terms = q
		m.first = make([]int, len(q))
		for i := range m.first {
			m.first[i] = i
		}
	}
	lastQuery.Store(m)
	return m
}

// queryMemo is one Query: its arguments, its terms, and each term's index (the terms
// are distinct, so first[i] = i), read-only once stored.
type queryMemo struct {
	task, now string
	terms     []string
	at        map[string]int
	first     []int
}

// lastQuery is the last Query computed, shared by all callers (an atomic pointer, so
// concurrent sessions are safe: each reads a whole memo or computes its own).
var lastQuery atomic.Pointer[queryMemo]

// CardKeep returns Keep(BM25) of card c for the query (Query) with term rarity from
// the session's corpus alone (N = corpus.Docs, df = corpus.DF, each at least 1) and
// the fixed average length CardAvgTerms: unlike Score it does not depend on which
// other cards share the batch, so the same card at the same step always scores the
// same (the fitted scorer's "lexical" feature). It returns -1 for an empty query.
// It is NewMatcher(query, corpus).Keep(c); a batch's cards share one Matcher.
func CardKeep(c cards.Card, query []string, corpus *cards.Corpus) float64 {
	return NewMatcher(query, corpus).Keep(c)
}

// Matcher is CardKeep for one query and corpus, with each query term's IDF worked
// out once for all the cards it scores. It is not safe for concurrent use.
type Matcher struct {
	query []string
	first []int          // first[i]: the index of query[i]'s first occurrence
	at    map[string]int // a query term's first index
	idf   []float64      // per query index
	tf    []int          // per first index, for the card being scored
	buf   []byte
}

// NewMatcher returns CardKeep's scorer for query (the terms CardKeep sums over, in
// order: Query gives them distinct) with term rarity from corpus (nil: N = df = 1).
func NewMatcher(query []string, corpus *cards.Corpus) *Matcher {
	m := &Matcher{query: query, idf: make([]float64, len(query)), tf: make([]int, len(query))}
	if memo := lastQuery.Load(); memo != nil && len(memo.terms) == len(query) && len(query) > 0 &&
		&memo.terms[0] == &query[0] {
		m.at, m.first = memo.at, memo.first // query is Query's: its index is built
	} else {
		m.at, m.first = make(map[string]int, len(query)), make([]int, len(query))
		for i, t := range query {
			f, ok := m.at[t]
			if !ok {
				f = i
				m.at[t] = i
			}
			m.first[i] = f
		}
	}
	n := 1
	if corpus != nil {
		n = max(corpus.Docs, 1)
	}
	for i, t := range query {
		df := 1
		if corpus != nil {
			df = max(corpus.DF(t), 1)
		}
		m.idf[i] = IDF(n, df)
	}
	return m
}

// Keep returns CardKeep(c, query, corpus) of m's query and corpus: -1 for an empty
// query.
func (m *Matcher) Keep(c cards.Card) float64 {
	if len(m.query) == 0 {
		return -1
	}
	clear(m.tf)
	dl := 0
	eachDocTerm(c, &m.buf, func(t []byte) {
		dl++
		if i, ok := m.at[string(t)]; ok {
			m.tf[i]++
		}
	})
	// BM25(query, tf, dl, CardAvgTerms, idf), the same operations in the same order
	norm := bm25Norm(dl, CardAvgTerms)
	s := 0.0
	for i := range m.query {
		f := float64(m.tf[m.first[i]])
		if f == 0 {
			continue
		}
		s += bm25Term(m.idf[i], f, norm)
	}
	return Keep(s)
}
