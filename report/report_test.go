package report_test

import (
	"bytes"
	"crypto/sha256"
	"encoding/base64"
	"html"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/pruneadvisor/pruneadvisor/advisor"
	"github.com/pruneadvisor/pruneadvisor/calibrate"
	"github.com/pruneadvisor/pruneadvisor/internal/browsertest"
	"github.com/pruneadvisor/pruneadvisor/ledger"
	"github.com/pruneadvisor/pruneadvisor/replay"
	"github.com/pruneadvisor/pruneadvisor/report"
	"github.com/pruneadvisor/pruneadvisor/tuning"
)

// nasty is a name that would run as script, break out of an attribute or confuse
// a terminal if a page wrote it as markup.
const nasty = "evil \"dq\" 'sq' <script>window.__pwned=1</script><img src=x onerror=\"window.__pwned=2\"> \x01\x07\x1b[31m </style></svg>&amp; end"

// sample is a small calibration of two sessions (one with outputs, one without),
// named nasty and plain, with one stub whose every text field is nasty.
func sample(t *testing.T) report.Data { return sampleNamed(t, nasty) }

// sampleNamed is sample with name in place of nasty.
func sampleNamed(t *testing.T, nasty string) report.Data {
	t.Helper()
	var outs []calibrate.Output
	ctx := make([]int, 12)
	for s := 1; s <= 12; s++ {
		ctx[s-1] = 1000 + 20_000*min(s-1, 10)
	}
	for k := 1; k <= 10; k++ {
		outs = append(outs, calibrate.Output{Session: "h1", Key: string(rune('a' + k)), Tokens: 20_000, StubTokens: 40,
			Offset: 1000 + 20_000*(k-1), Step: k, EndStep: 12, CandidateFrom: k + 1, Uses: usesOf(k)})
	}
	sessions := []calibrate.Calls{{Name: "h1", Context: ctx}, {Name: "h2", Context: []int{10, 20}}}
	opts := calibrate.DefaultOptions()
	applied := make([]int, len(outs))
	applied[0], applied[1] = 6, 6
	rep, err := calibrate.NewReport(outs, sessions, []calibrate.ScorerInput{{Name: "fitted", Outputs: outs}}, calibrate.ReportConfig{
		Options: opts, Budgets: []int{50_000, 100_000}, TargetMiss: 0.02, Objective: calibrate.ObjectiveTokenSteps,
		Advisor: &calibrate.AdvisorInput{Scorer: "fitted", Cutoff: 0.05, Budget: 100_000, AppliedAt: applied},
	})
	if err != nil {
		t.Fatal(err)
	}
	traces, err := calibrate.Traces(outs, sessions, opts, applied)
	if err != nil {
		t.Fatal(err)
	}
	return report.Data{
		Calibration: &tuning.Calibration{DB: "/tmp/" + nasty + ".db", Groups: []string{"fitted " + nasty}, Sessions: []string{"/s/" + nasty + ".jsonl", "/s/plain.jsonl"}, Report: rep, DigestBudget: 64},
		Traces:      traces, Budget: 100_000, Generated: time.Date(2026, 12, 5, 1, 0, 0, 0, time.UTC),
		Stubs: []replay.Stub{{Session: "/s/" + nasty + ".jsonl", Key: "b", Tool: "Bash" + nasty, Summary: nasty, Step: 1, PrunedAt: 6,
			Tokens: 20_000, StubTokens: 40, Reason: "score 0.01 < cutoff 0.05 " + nasty, Score: 0.01, RecallID: "o_" + nasty}},
	}
}

// usesOf gives output k a use at step k+2 for even k.
func usesOf(k int) []int {
	if k%2 == 0 {
		return []int{k + 2}
	}
	return nil
}

func write(t *testing.T, d report.Data) string {
	t.Helper()
	var b bytes.Buffer
	if err := report.Write(&b, d); err != nil {
		t.Fatal(err)
	}
	return b.String()
}

// TestWriteErrors: no calibration, or traces not one per session, is an error.
func TestWriteErrors(t *testing.T) {
	d := sample(t)
	for name, bad := range map[string]report.Data{
		"no calibration":  {Traces: d.Traces},
		"one trace short": {Calibration: d.Calibration, Traces: d.Traces[:1]},
	} {
		if err := report.Write(&bytes.Buffer{}, bad); err == nil {
			t.Errorf("%s: no error", name)
		}
	}
}

// TestSelfContained: the page references no URL at all (no src, href or url()
// but its own fragments), and its CSP allows exactly its one style sheet and one
// script by their hashes.
func TestSelfContained(t *testing.T) {
	page := write(t, sampleNamed(t, "plain"))
	for _, re := range []string{`(?i)\ssrc\s*=`, `(?i)href\s*=\s*"[^#]`, `(?i)url\(`, `(?i)@import`, `(?i)https?://(?:[^w]|w[^w]|ww[^w])`} {
		if m := regexp.MustCompile(re).FindString(page); m != "" {
			t.Errorf("page holds %q (%s): it must load nothing", m, re)
		}
	}
	hashOf := func(tag string) string {
		m := regexp.MustCompile(`(?s)<`+tag+`>(.*?)</`+tag+`>`).FindAllStringSubmatch(page, -1)
		if len(m) != 1 {
			t.Fatalf("%d <%s> elements, want 1", len(m), tag)
		}
		sum := sha256.Sum256([]byte(m[0][1]))
		return "'sha256-" + base64.StdEncoding.EncodeToString(sum[:]) + "'"
	}
	want := "default-src 'none'; style-src " + hashOf("style") + "; script-src " + hashOf("script") + "; img-src data:; base-uri 'none'; form-action 'none'"
	if diff := cmp.Diff(want, report.CSP); diff != "" {
		t.Errorf("CSP (-want +got):\n%s", diff)
	}
	meta := regexp.MustCompile(`<meta http-equiv="Content-Security-Policy" content="([^"]*)">`).FindStringSubmatch(page)
	if meta == nil || html.UnescapeString(meta[1]) != report.CSP {
		t.Errorf("the page's meta CSP is %q, want report.CSP", meta)
	}
}

// TestNastyNamesBrowser loads the report and the live page, whose session names,
// tool names, summaries, reasons and recall ids hold <script>, an onerror handler,
// quotes and control characters, in Chromium: the text is shown as written,
// nothing of it runs (window.__pwned stays unset, the page's one script is its
// own), and the console holds no error (a CSP violation would be one).
func TestNastyNamesBrowser(t *testing.T) {
	dir := t.TempDir()
	rep := filepath.Join(dir, "report.html")
	if err := os.WriteFile(rep, []byte(write(t, sample(t))), 0o644); err != nil {
		t.Fatal(err)
	}
	var lb bytes.Buffer
	at := time.Date(2026, 12, 5, 1, 2, 3, 0, time.UTC)
	live := report.Live{Generated: at,
		Sessions: []report.LiveSession{{
			Plan: advisor.Plan{SessionID: nasty, Step: 4, Budget: 100_000, HardLimit: 180_000, ContextTokens: 3000, SavedTokens: 900,
				Items: []advisor.Item{{Key: "k1", Tool: nasty, Summary: nasty, Step: 1, Tokens: 1000, Decision: advisor.DecisionPruned, Reason: nasty, Score: 0.02, DecidedAt: 3, RecallID: "o_" + nasty}}},
			Steps: []report.LiveStep{{Step: 2, Context: 2000}, {Step: 3, Context: 2100, Saved: 900, Rewrite: true}, {Step: 4, Context: 3000, Saved: 900}},
		}},
		Ledger:  &report.LiveLedger{Sessions: []ledger.SessionTotals{{SessionID: nasty, Totals: ledger.Totals{Requests: 1, PaidUSD: 0.5}}}, Total: ledger.Totals{Requests: 1, PaidUSD: 0.5}},
		Recalls: []advisor.RecallEvent{{RecallID: "o_" + nasty, SessionID: nasty, OutputKey: nasty, Step: 3, At: at}},
	}
	if err := report.WriteLive(&lb, live); err != nil {
		t.Fatal(err)
	}
	livePath := filepath.Join(dir, "live.html")
	if err := os.WriteFile(livePath, lb.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
	b := browsertest.New(t, nil)
	for _, tc := range []struct {
		path string
		want int // occurrences of nasty in the text at least
	}{{rep, 4}, {livePath, 5}} {
		b.Open("file://" + tc.path)
		var got struct {
			Pwned   any      `json:"pwned"`
			Scripts int      `json:"scripts"`
			Images  int      `json:"images"`
			Text    string   `json:"text"`
			Fields  []string `json:"fields"`
		}
		b.Eval(`({pwned: window.__pwned === undefined ? null : window.__pwned, scripts: document.scripts.length, images: document.images.length, text: document.body.textContent})`, &got)
		if got.Pwned != nil {
			t.Errorf("%s: window.__pwned = %v: a name ran as script", tc.path, got.Pwned)
		}
		if got.Scripts != 1 || got.Images != 0 {
			t.Errorf("%s: %d scripts and %d images, want the page's one script and no image", tc.path, got.Scripts, got.Images)
		}
		if n := strings.Count(got.Text, nasty); n < tc.want {
			t.Errorf("%s: the name is shown as written %d times, want at least %d", tc.path, n, tc.want)
		}
	}
	if errs := b.ConsoleErrors(); len(errs) > 0 {
		t.Errorf("console errors:\n%s", strings.Join(errs, "\n"))
	}
	for _, u := range b.Requests() {
		if u != "file://"+rep && u != "file://"+livePath {
			t.Errorf("the pages requested %s", u)
		}
	}
}
