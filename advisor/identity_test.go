package advisor

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/pruneadvisor/pruneadvisor/advisor/fitted"
	"github.com/pruneadvisor/pruneadvisor/internal/sessionfiles"

	"github.com/pruneadvisor/pruneadvisor/cards"
	"github.com/pruneadvisor/pruneadvisor/evidence"
	"github.com/pruneadvisor/pruneadvisor/rules"
	"github.com/pruneadvisor/pruneadvisor/transcript"
)

var updateIndex = flag.Bool("update-index", false, "rewrite testdata/index-digests.json from the current index code")

// indexDigestFile holds, per real session, a digest of everything the index phase
// derives. It was written by the index code before the byte-level rewrite of
// cards.Terms, the evidence tokenizer, toolcall.VisibleRange and the rules'
// visible ranges (commit 3c53ac7 with this test added, its card template, paths,
// names and hash put only for outputs without a fixed protection as the advisor now
// keeps them; go test
// ./advisor -run TestIndexMatchesDigests -update-index), so the test shows the
// rewrite changed no result. Rewritten since only for intended changes of what the
// index derives: replay-12's evidence clause In context changed the digests of the
// two sessions that record a compaction that dropped outputs
// (claude-code/3af9b1a7-….jsonl, pi/before-compaction.jsonl) and no other;
// replay-13's context counted from the tail an agent's own compaction kept (no
// output before it a candidate) changed those two and pi/session.jsonl, whose
// compaction comes after its last call, and no other. replay-14's digest of live
// names (a use's digest budget leaves out the names ahead of it that stopped
// being live for the output within Tracker.DigestFrom steps) changed 68 of them;
// with DigestFrom -1000 (nothing left out) every digest was the old one.
// replay-16's digest names at their real o200k cost, joined by spaces, changed 97
// of the 119 (the digest order and every use's digest budget). replay-17: exact
// token counts of long lines changed 66 of them, a backquoted path as one
// compound 43 (77 in all).
const indexDigestFile = "testdata/index-digests.json"

// identitySessions returns every session under ../shared/sessions and every third
// file of ../shared/corpus, by name relative to ../shared.
func identitySessions(t *testing.T) []string {
	t.Helper()
	return sessionfiles.Sample("../../shared")
}

// indexDigest indexes the whole session at once with the default configuration
// and returns a digest of what the index derived: per output its plan item, card
// template (reaction, arguments, head and tail, tokens, action), rule death, use
// history, protection and names; the rule decisions; the use history over the
// session (evidence.Of, what replay labels with); the corpus counts of every term.
func indexDigest(t *testing.T, a *Advisor, s *transcript.Session) string {
	t.Helper()
	st := newState(SessionKey(s), fitted.DefaultBackground(), 64, 0, 200, 3)
	sp := &stepState{s: s, msgs: s.Messages, T: len(s.Messages)}
	a.index(st, sp)
	var b strings.Builder
	enc := json.NewEncoder(&b)
	put := func(v any) {
		if err := enc.Encode(v); err != nil {
			t.Fatal(err)
		}
	}
	for _, o := range st.outs {
		put(o.item())
		if o.card != nil { // outputs protected for good have no card template
			put(*o.card)
		}
		paths, names, hash := o.paths, o.names, o.hash
		if o.fixed != "" { // kept only for outputs that may be asked about
			paths, names, hash = nil, nil, ""
		}
		put([]any{o.dead, o.deadRule, o.deadBy, o.uses, o.lastUse, o.useSteps, o.fixed, paths, names,
			o.protectTil, o.protectWhy, o.bytes, hash})
		if st.tracker != nil {
			put([]any{digestUses(st.tracker.Uses(o.key)), st.tracker.Owned(o.key), st.tracker.Runs(o.key)})
		}
	}
	put(rules.Analyze(s)) // the index keeps no decisions; a fresh one over the same messages gives them
	put([]any{st.steps, st.allUses, st.lastNow, st.ctxTokens, st.lastEdit, st.lastTouch, st.reads})
	if st.tracker != nil {
		put(st.tracker.Stats())
	}
	uses, err := evidence.Of(s, fitted.DefaultBackground())
	put([]any{digestUses(uses), fmt.Sprint(err)})
	terms := map[string]bool{}
	for _, o := range s.Outputs() {
		for _, term := range cards.Terms(o.Text) {
			terms[term] = true
		}
	}
	sorted := make([]string, 0, len(terms))
	for term := range terms {
		sorted = append(sorted, term)
	}
	slices.Sort(sorted)
	df := make([]int, len(sorted))
	for i, term := range sorted {
		df[i] = st.corpus.DF(term)
	}
	put([]any{st.corpus.Docs, st.corpus.Tokens, sorted, df})
	sum := sha256.Sum256([]byte(b.String()))
	return hex.EncodeToString(sum[:])
}

// digestUse is an evidence.Use as the digests were written: its fields up to
// Preview. The per-name fields replay-14 added (NameDigests, NamesPreviewed) are
// left out, so that the digests show adding them changed nothing else; their
// values are checked by hand in evidence's TestDigest and TestPreview.
type digestUse struct {
	Key     string
	Step    int
	Kind    evidence.UseKind
	Proof   string
	Weight  float64
	Digest  int
	Preview bool
}

// digestUses returns uses as digestUses.
func digestUses(uses []evidence.Use) []digestUse {
	if uses == nil {
		return nil
	}
	out := make([]digestUse, len(uses))
	for i, u := range uses {
		out[i] = digestUse{u.Key, u.Step, u.Kind, u.Proof, u.Weight, u.Digest, u.Preview}
	}
	return out
}

// The index phase derives exactly what it derived before the byte-level rewrite,
// on every real session and a third of the corpus (see indexDigestFile).
func TestIndexMatchesDigests(t *testing.T) {
	files := identitySessions(t)
	if len(files) < 50 {
		sessionfiles.Missing(t, "only %d real sessions found", len(files))
	}
	a, err := New(DefaultConfig(), nil, NewMemoryStore())
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]string{}
	for _, f := range files {
		s, err := transcript.ReadFile(f, transcript.Options{Lenient: true})
		if err != nil {
			continue
		}
		name, _ := filepath.Rel("../../shared", f)
		got[name] = indexDigest(t, a, s)
	}
	if *updateIndex {
		data, _ := json.MarshalIndent(got, "", "  ")
		if err := os.WriteFile(indexDigestFile, append(data, '\n'), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	data, err := os.ReadFile(indexDigestFile)
	if err != nil {
		t.Fatal(err)
	}
	var want map[string]string
	if err := json.Unmarshal(data, &want); err != nil {
		t.Fatalf("%s: %v", indexDigestFile, err)
	}
	if len(want) < 50 {
		t.Fatalf("%s holds %d sessions", indexDigestFile, len(want))
	}
	if d := cmp.Diff(want, got); d != "" {
		t.Errorf("index digests differ from the old code's (-old +new):\n%s", d)
	}
}
