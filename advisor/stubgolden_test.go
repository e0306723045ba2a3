package advisor_test

import (
	"flag"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/pruneadvisor/pruneadvisor/advisor"
	"github.com/pruneadvisor/pruneadvisor/evidence"
	"github.com/pruneadvisor/pruneadvisor/internal/sessionfiles"
	"github.com/pruneadvisor/pruneadvisor/transcript"
)

var updateStubs = flag.Bool("update-stubs", false, "rewrite testdata/stubs-*.golden from the current stub code")

// TestRealStubsGolden: the stubs of a real Claude Code session, pruned as far as
// the protections allow (every card scored 0, every pending prune paying for
// its rewrite at once), byte for byte: the frame, the reasons and the digests with
// their names in the documented order (evidence/digest.go), one space between two.
// A change to any of them shows here as a diff of real stubs; rewrite the golden
// file with go test ./advisor -run TestRealStubsGolden -update-stubs after an
// intended one.
func TestRealStubsGolden(t *testing.T) {
	const session = "sessions/claude-code/57bb5674-54b1-4ce6-9157-2d341cd9bfc1.jsonl"
	path := filepath.Join("../../shared", session)
	if _, err := os.Stat(path); err != nil {
		sessionfiles.Missing(t, "%s: %v", path, err)
	}
	s, err := transcript.ReadFile(path, transcript.Options{Lenient: true}) // the file has truncated lines
	if err != nil {
		t.Fatal(err)
	}
	cfg := advisor.DefaultConfig()
	cfg.Budget = 20_000
	cfg.PriceForced = false
	cfg.RemainingMin = 100_000 // every pending prune pays for itself at once
	steps := simulate(t, newAdvisor(t, cfg, constScorer(0), advisor.NewMemoryStore(), nil), s)
	stubs := steps[len(steps)-1].plan.Stubs
	keys := make([]string, 0, len(stubs))
	for k := range stubs {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	var b strings.Builder
	digests := 0
	for _, k := range keys {
		b.WriteString(k + "\t" + stubs[k] + "\n")
		if strings.Contains(stubs[k], "; it named ") {
			digests++
		}
	}
	if len(keys) < 10 || digests < 5 {
		t.Fatalf("%d stubs, %d with a digest: the golden file would check too little", len(keys), digests)
	}
	file := "testdata/stubs-57bb5674.golden"
	if *updateStubs {
		if err := os.WriteFile(file, []byte(b.String()), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	if d := cmp.Diff(string(want), b.String()); d != "" {
		t.Errorf("stubs of %s (-%s +now):\n%s", session, file, d)
	}
}

// TestGrownDigests: with Config.DigestShare, the same real session's stubs of
// long outputs carry longer digests that begin with the names the fixed budget
// gives (one order, one prefix), costing more than DigestTokens but within the
// share of their output; a stub of an output whose share is under DigestTokens
// does not change.
func TestGrownDigests(t *testing.T) {
	const session = "sessions/claude-code/57bb5674-54b1-4ce6-9157-2d341cd9bfc1.jsonl"
	path := filepath.Join("../../shared", session)
	if _, err := os.Stat(path); err != nil {
		sessionfiles.Missing(t, "%s: %v", path, err)
	}
	stubsAt := func(share float64) map[string]string {
		s, err := transcript.ReadFile(path, transcript.Options{Lenient: true})
		if err != nil {
			t.Fatal(err)
		}
		cfg := advisor.DefaultConfig()
		cfg.Budget, cfg.PriceForced, cfg.RemainingMin = 20_000, false, 100_000
		cfg.DigestShare = share
		steps := simulate(t, newAdvisor(t, cfg, constScorer(0), advisor.NewMemoryStore(), nil), s)
		return steps[len(steps)-1].plan.Stubs
	}
	const share = 0.06
	fixed, grown := stubsAt(0), stubsAt(share)
	tokensRe := regexp.MustCompile(`^\[pruned: .*?, ([\d,]+) tokens, `)
	longer := 0
	for key, f := range fixed {
		g, ok := grown[key]
		if !ok {
			continue
		}
		m := tokensRe.FindStringSubmatch(f)
		if m == nil {
			t.Fatalf("%s: no size in %q", key, f)
		}
		tokens, _ := strconv.Atoi(strings.ReplaceAll(m[1], ",", ""))
		fn, gn := digestNames(f), digestNames(g)
		if int(share*float64(tokens)) <= 128 {
			if f != g {
				t.Errorf("%s (%d tokens): the share changed a stub it should not:\n fixed %s\n grown %s", key, tokens, f, g)
			}
			continue
		}
		if len(gn) < len(fn) || !slices.Equal(fn, gn[:len(fn)]) {
			t.Errorf("%s (%d tokens): the grown digest does not begin with the fixed one:\n fixed %v\n grown %v", key, tokens, fn, gn)
		}
		cost := 0
		for _, n := range gn {
			cost += evidence.DigestNameTokens(n)
		}
		if cost > int(share*float64(tokens)) {
			t.Errorf("%s (%d tokens): grown digest costs %d, over %g of the output", key, tokens, cost, share)
		}
		if cost > 128 {
			longer++
		}
	}
	if longer == 0 {
		t.Errorf("no stub of %s carries a digest past 128 tokens under digest_share %g", session, share)
	}
}

// digestNames returns the names of a stub's digest ("it named A B C; "), nil
// without one: split at single spaces, a phrase of several words in double
// quotes, backquotes or single quotes (evidence's digestText) one name, its
// quotes taken off.
func digestNames(stub string) []string {
	_, rest, ok := strings.Cut(stub, "; it named ")
	if !ok {
		return nil
	}
	rest = rest[:strings.LastIndex(rest, "; ")]
	var names []string
	for rest != "" {
		end := strings.IndexByte(rest, ' ')
		if q := rest[0]; q == '"' || q == '`' || q == '\'' {
			if j := strings.IndexByte(rest[1:], q); j >= 0 && strings.ContainsRune(rest[1:j+1], ' ') {
				names = append(names, rest[1:j+1])
				rest = strings.TrimPrefix(rest[j+2:], " ")
				continue
			}
		}
		if end < 0 {
			end = len(rest)
		}
		names = append(names, rest[:end])
		rest = strings.TrimPrefix(rest[end:], " ")
	}
	return names
}

// TestDigestNames: the test's own reading of a digest, on a real stub's shape.
func TestDigestNames(t *testing.T) {
	stub := "[pruned: read a.go, 900 tokens, score 0.03; it named src/a.go \"My Tool\" parseConfig `say \"hi\" now` x.y; recall(\"o_1\") restores it]"
	want := []string{"src/a.go", "My Tool", "parseConfig", `say "hi" now`, "x.y"}
	if d := cmp.Diff(want, digestNames(stub)); d != "" {
		t.Errorf("digestNames (-want +got):\n%s", d)
	}
	if got := digestNames("[pruned: read a.go, 900 tokens, score 0.03; recall(\"o_1\") restores it]"); got != nil {
		t.Errorf("a stub without a digest: %v", got)
	}
}
