package evidence

import (
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/pruneadvisor/pruneadvisor/transcript"
)

// loadSession reads one of the OpenAI chat-completions sessions of
// testdata/evidence with the transcript reader.
func loadSession(t testing.TB, path string) *transcript.Session {
	t.Helper()
	s, err := transcript.ReadFile(path, transcript.Options{Format: transcript.FormatOpenAI})
	if err != nil {
		t.Fatalf("read %s: %v", path, err)
	}
	return s
}

// track adds every message of s to a new tracker and returns it with the uses Add
// returned, in order.
func track(t testing.TB, s *transcript.Session) (*Tracker, []Use) {
	t.Helper()
	tr := NewTracker()
	var all []Use
	for _, m := range s.Messages {
		uses, err := tr.Add(m)
		if err != nil {
			t.Fatalf("%s: add message %d: %v", s.Name, m.Index, err)
		}
		all = append(all, uses...)
	}
	return tr, all
}

func round(u []Use) []Use {
	for i := range u {
		u[i].Weight = math.Round(u[i].Weight*1e4) / 1e4
	}
	return u
}

// TestEvidenceClauses runs each hand-made session of testdata/evidence (one per
// clause of the definition) and compares every output's uses with the uses worked
// out by hand in the comments.
func TestEvidenceClauses(t *testing.T) {
	tests := []struct {
		file string
		want map[string][]Use // output key -> uses; keys not listed have none
	}{
		// A name used later counts: c1 introduces parseConfig (in 1 of 2 outputs:
		// weight ln(2/1)/ln 2 = 1); the agent writes it at step 3.
		{"name_used.json", map[string][]Use{
			"c1": {{Key: "c1", Step: 3, Kind: UseName, Proof: `name "parseConfig"`, Weight: 1}},
		}},
		// A name the agent already wrote does not count again: computeChecksum is
		// used at step 2; repeating it at step 4 is the agent's own carry-over.
		{"agent_wrote_first.json", map[string][]Use{
			"c1": {{Key: "c1", Step: 2, Kind: UseName, Proof: `name "computeChecksum"`, Weight: 1}},
		}},
		// A name in many outputs weighs little: sharedHelper is in 4 of 5 outputs,
		// weight ln(5/4)/ln 5 = 0.1386 (python3), under UseThreshold; rareToken is
		// in one: weight 1.
		{"many_outputs.json", map[string][]Use{
			"c1": {
				{Key: "c1", Step: 6, Kind: UseName, Proof: `name "sharedHelper"`, Weight: 0.1386},
				{Key: "c1", Step: 7, Kind: UseName, Proof: `name "rareToken"`, Weight: 1},
			},
		}},
		// A name that appeared before the output does not count: the user's task
		// says retryBackoff, so only maxAttempts (step 3) is evidence.
		{"name_before_output.json", map[string][]Use{
			"c1": {{Key: "c1", Step: 3, Kind: UseName, Proof: `name "maxAttempts"`, Weight: 1}},
		}},
		// A re-read and a rerun count. Step 3 re-reads /repo/a.go (also an
		// identical call: reread is the stronger kind, weight capped at 1); step 4
		// reruns go test; the step-6 read is evidence for c3, which covered c1.
		{"reread_rerun.json", map[string][]Use{
			"c1": {{Key: "c1", Step: 3, Kind: UseReread, Proof: "re-read /repo/a.go", Weight: 1}},
			"c2": {{Key: "c2", Step: 4, Kind: UseCommand, Proof: "same command", Weight: 1}},
			"c3": {{Key: "c3", Step: 6, Kind: UseReread, Proof: "re-read /repo/a.go", Weight: 1}},
		}},
		// Prose words are not evidence: "retries" and "exhausted" written as plain
		// words at step 2 are not a use (and count as written); "timeout" in a
		// `code span` at step 3 is.
		{"prose_words.json", map[string][]Use{
			"c1": {{Key: "c1", Step: 3, Kind: UseName, Proof: `name "timeout"`, Weight: 1}},
		}},
		// Two uses, at steps 2 and 5 (see TestUsedAfter).
		{"used_after.json", map[string][]Use{
			"c1": {
				{Key: "c1", Step: 2, Kind: UseName, Proof: `name "tokenizeInput"`, Weight: 1},
				{Key: "c1", Step: 5, Kind: UseName, Proof: `name "flushBuffer"`, Weight: 1},
			},
		}},
	}
	for _, tt := range tests {
		t.Run(tt.file, func(t *testing.T) {
			s := loadSession(t, filepath.Join("..", "testdata", "evidence", tt.file))
			tr, added := track(t, s)
			got := map[string][]Use{}
			for _, k := range tr.Keys() {
				if u := tr.Uses(k); len(u) > 0 {
					got[k] = round(u)
				}
			}
			if d := cmp.Diff(tt.want, got); d != "" {
				t.Errorf("uses (-want +got):\n%s", d)
			}
			var wantAdded []Use
			for _, k := range tr.Keys() {
				wantAdded = append(wantAdded, tt.want[k]...)
			}
			if len(added) != len(wantAdded) {
				t.Errorf("Add returned %d uses, want %d", len(added), len(wantAdded))
			}
		})
	}
}

// TestUsedAfter: a use before the decision step does not count against a prune made
// later. c1 of used_after.json is used at steps 2 and 5.
func TestUsedAfter(t *testing.T) {
	s := loadSession(t, filepath.Join("..", "testdata", "evidence", "used_after.json"))
	tr, _ := track(t, s)
	tests := []struct {
		after int
		want  int // step of the use found; 0 = none
	}{{0, 2}, {1, 2}, {2, 5}, {3, 5}, {4, 5}, {5, 0}, {9, 0}}
	for _, tt := range tests {
		u, ok := tr.UsedAfter("c1", tt.after)
		if ok != (tt.want != 0) || u.Step != tt.want {
			t.Errorf("UsedAfter(c1, %d) = step %d, %v; want %d", tt.after, u.Step, ok, tt.want)
		}
	}
	if got := tr.LastUse("c1"); got != 5 {
		t.Errorf("LastUse = %d, want 5", got)
	}
	if got := tr.UseSteps("c1"); !cmp.Equal(got, []int{2, 5}) {
		t.Errorf("UseSteps = %v, want [2 5]", got)
	}
	if _, ok := tr.UsedAfter("nope", 0); ok || tr.LastUse("nope") != 0 || tr.Uses("nope") != nil {
		t.Error("unknown key has uses")
	}
	// The weak use of many_outputs.json (step 6) does not count.
	s = loadSession(t, filepath.Join("..", "testdata", "evidence", "many_outputs.json"))
	tr, _ = track(t, s)
	if u, ok := tr.UsedAfter("c1", 0); !ok || u.Step != 7 {
		t.Errorf("many_outputs: UsedAfter(c1, 0) = %+v, %v; want step 7", u, ok)
	}
}

func TestAddRecall(t *testing.T) {
	s := loadSession(t, filepath.Join("..", "testdata", "evidence", "used_after.json"))
	tr, _ := track(t, s)
	if err := tr.AddRecall("c1", 4); err != nil {
		t.Fatal(err)
	}
	if err := tr.AddRecall("c1", 5); err != nil { // same step as the flushBuffer use
		t.Fatal(err)
	}
	want := []Use{
		{Key: "c1", Step: 2, Kind: UseName, Proof: `name "tokenizeInput"`, Weight: 1},
		{Key: "c1", Step: 4, Kind: UseRecall, Proof: "recall", Weight: 1},
		{Key: "c1", Step: 5, Kind: UseRecall, Proof: "recall", Weight: 1},
	}
	if d := cmp.Diff(want, tr.Uses("c1")); d != "" {
		t.Errorf("uses (-want +got):\n%s", d)
	}
	if u, ok := tr.UsedAfter("c2", 3); ok {
		t.Errorf("c2 used: %+v", u)
	}
	if err := tr.AddRecall("c2", 3); !errors.Is(err, ErrEvidenceStep) {
		t.Errorf("recall at the output's step: err %v, want ErrEvidenceStep", err)
	}
	if err := tr.AddRecall("zz", 9); !errors.Is(err, ErrEvidenceUnknown) {
		t.Errorf("unknown key: err %v, want ErrEvidenceUnknown", err)
	}
	if err := tr.AddRecall("c2", 4); err != nil {
		t.Fatal(err)
	}
	if u, ok := tr.UsedAfter("c2", 3); !ok || u.Kind != UseRecall {
		t.Errorf("c2 after recall: %+v, %v", u, ok)
	}
}

// read builds a read call of path at step for the given line range.
func read(id, path string, step int, rng transcript.Range) *transcript.ToolCall {
	args, _ := json.Marshal(map[string]any{"path": path, "start": rng.Start, "end": rng.End})
	return &transcript.ToolCall{ID: id, Name: "read", Args: args, Step: step, Action: transcript.ActionRead, Path: path, Range: rng}
}

// asst builds an assistant message at step.
func asst(step int, text string, calls ...*transcript.ToolCall) *transcript.Message {
	return &transcript.Message{Role: transcript.RoleAssistant, Step: step, Text: text, Calls: calls}
}

// result builds the tool message carrying c's output.
func result(c *transcript.ToolCall, text string) *transcript.Message {
	o := &transcript.ToolOutput{Key: c.ID, CallID: c.ID, Call: c, Text: text, Step: c.Step}
	c.Output = o
	return &transcript.Message{Role: transcript.RoleTool, Step: c.Step, Outputs: []*transcript.ToolOutput{o}}
}

// addAll adds msgs to tr and returns the uses found.
func addAll(t *testing.T, tr *Tracker, msgs ...*transcript.Message) []Use {
	t.Helper()
	var out []Use
	for _, m := range msgs {
		u, err := tr.Add(m)
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, u...)
	}
	return out
}

// TestRereadRanges: a re-read counts for earlier reads of the same path whose line
// range overlaps it, and not for reads of other ranges or failed reads.
func TestRereadRanges(t *testing.T) {
	tr := NewTracker()
	r1 := read("r1", "/x/a.go", 1, transcript.Range{Start: 1, End: 50})
	r2 := read("r2", "/x/a.go", 2, transcript.Range{Start: 100, End: 150})
	r3 := read("r3", "/x/a.go", 3, transcript.Range{Start: 200})
	bad := read("bad", "/x/a.go", 4, transcript.Range{})
	again := read("again", "/x/a.go", 5, transcript.Range{Start: 120, End: 130})
	addAll(t, tr, asst(1, "", r1), result(r1, "one"), asst(2, "", r2), result(r2, "two"), asst(3, "", r3), result(r3, "three"), asst(4, "", bad))
	m := result(bad, "error: permission denied")
	m.Outputs[0].IsError = true
	addAll(t, tr, m)
	got := addAll(t, tr, asst(5, "", again))
	want := []Use{{Key: "r2", Step: 5, Kind: UseReread, Proof: "re-read /x/a.go", Weight: 1}}
	if d := cmp.Diff(want, got); d != "" {
		t.Errorf("uses (-want +got):\n%s", d)
	}
	// A read from line 125 to the end overlaps r2 (100-150), r3 (200-end) and
	// again (120-130), not r1 (1-50).
	tail := read("tail", "/x/a.go", 6, transcript.Range{Start: 125})
	addAll(t, tr, result(again, "x"))
	got = addAll(t, tr, asst(6, "", tail))
	var keys []string
	for _, u := range got {
		keys = append(keys, u.Key)
	}
	if want := []string{"r2", "r3", "again"}; !cmp.Equal(keys, want) {
		t.Errorf("tail read used %v, want %v", keys, want)
	}
}

// TestCompoundWeight: a path and its suffixes are one piece of evidence, weighted
// by its best name, not summed. "/repo/pkg/server/handler.go" is in 4 of 9 outputs:
// each of its names weighs ln(9/4)/ln 9 = 0.3691 (python3), under the threshold,
// although its five names would add up past it.
func TestCompoundWeight(t *testing.T) {
	tr := NewTracker()
	var msgs []*transcript.Message
	for i := 1; i <= 9; i++ {
		c := &transcript.ToolCall{ID: fmt.Sprintf("c%d", i), Name: "bash", Args: json.RawMessage(fmt.Sprintf(`{"command":"step %d"}`, i)), Step: i}
		text := fmt.Sprintf("line %d", i*1000)
		if i <= 4 {
			text += " /repo/pkg/server/handler.go"
		}
		msgs = append(msgs, asst(i, "", c), result(c, text))
	}
	addAll(t, tr, msgs...)
	got := addAll(t, tr, asst(10, "Look at pkg/server/handler.go"))
	if len(got) != 1 || got[0].Key != "c1" || math.Abs(got[0].Weight-0.3691) > 1e-4 || got[0].Counts() {
		t.Errorf("uses %+v, want one non-counting use of c1 weighing 0.3691", got)
	}
	if !strings.HasPrefix(got[0].Proof, `name "pkg/server/handler.go" +`) {
		t.Errorf("proof %q, want the longest name first", got[0].Proof)
	}
	// Two separate rare names add up: 4000 and 5000 are each in one output.
	got = addAll(t, tr, asst(11, "lines 4000 and 5000"))
	if len(got) != 2 || !got[0].Counts() || got[0].Key != "c4" || got[1].Key != "c5" {
		t.Errorf("uses %+v, want c4 and c5", got)
	}
}

func TestAddErrors(t *testing.T) {
	tr := NewTracker()
	c := &transcript.ToolCall{ID: "k", Name: "bash", Args: json.RawMessage(`{}`), Step: 2}
	addAll(t, tr, asst(2, "", c), result(c, "out"))
	if _, err := tr.Add(nil); !errors.Is(err, ErrEvidenceOrder) {
		t.Errorf("nil: err %v", err)
	}
	if _, err := tr.Add(asst(1, "late")); !errors.Is(err, ErrEvidenceOrder) {
		t.Errorf("step 1 after 2: err %v", err)
	}
	if _, err := tr.Add(result(c, "again")); !errors.Is(err, ErrEvidenceDuplicate) {
		t.Errorf("duplicate key: err %v", err)
	}
	if st := tr.Stats(); st.Messages != 2 || st.Outputs != 1 {
		t.Errorf("stats %+v after failed adds, want 2 messages 1 output", st)
	}
}

func TestNames(t *testing.T) {
	tests := []struct {
		text string
		want []string
	}{
		{"func parseConfig(path string) error", []string{"func", "parseConfig", "path", "string", "error"}},
		{"x := os.path.join(a, b)", []string{"os.path.join", "path", "join"}},
		{"see /repo/src/config_parser.py:12.", []string{"/repo/src/config_parser.py", "repo/src/config_parser.py", "src/config_parser.py", "config_parser.py", "config_parser"}},
		{"./cmd/main.go and ../lib/x.rs", []string{"cmd/main.go", "main.go", "main", "lib/x.rs", "x.rs"}},
		{`C:\Users\dev\app.ts`, []string{"C:/Users/dev/app.ts", "Users/dev/app.ts", "dev/app.ts", "app.ts"}},
		{"pid 12345 at 3.14159, id 123", []string{"12345", "3.14159", "14159"}},
		{"snake_case camelCase --verbose foo-bar", []string{"snake_case", "camelCase", "verbose", "foo-bar"}},
		{`raise ValueError("invalid header size") # don't 'x'`, []string{"raise", "ValueError", "invalid header size", "invalid", "header", "size"}},
		{"`go test ./...` then 'quoted words' it's", []string{"go test ./...", "test", "then", "quoted words", "quoted", "words"}},
		{"end of sentence. Done.", []string{"sentence", "Done"}},
		{"abc a/b a.b --- ... //// 1.2", nil},
		{strings.Repeat("x", MaxNameLen+1), nil},
	}
	for _, tt := range tests {
		if got := Names(tt.text); !cmp.Equal(got, tt.want) {
			t.Errorf("Names(%q)\n got %q\nwant %q", tt.text, got, tt.want)
		}
	}
	prose := []struct {
		text string
		want []string
	}{
		// "Config" is prose alone but code as part of x.Config: code wins.
		{"We found that `config` is parsed; see parseConfig, STRICT and Config.", []string{"found", "that", "parsed", "Config"}},
		{"Config here, x.Config there", []string{"here", "there"}},
		{"```\nvalue = compute()\n```\nvalue again", []string{"again"}},
		{"unclosed ```\nfence words here", []string{"unclosed"}},
		{`say "hello world" twice`, []string{"twice"}},
	}
	for _, tt := range prose {
		if got := ProseWords(tt.text); !cmp.Equal(got, tt.want) {
			t.Errorf("ProseWords(%q)\n got %q\nwant %q", tt.text, got, tt.want)
		}
	}
	args := json.RawMessage(`{"path":"/r/a.go","old_string":"return parseConfig(p)\n","n":12345}`)
	if got, want := ArgNames(args), []string{"12345", "return", "parseConfig", "/r/a.go", "r/a.go", "a.go"}; !cmp.Equal(got, want) {
		t.Errorf("ArgNames = %q, want %q", got, want)
	}
	if got, want := ArgNames(json.RawMessage(`"grep -rn needle src"`)), []string{"grep -rn needle src", "grep", "needle"}; !cmp.Equal(got, want) {
		t.Errorf("ArgNames(string) = %q, want %q", got, want)
	}
}

// sessionFiles lists the real sessions under ../../shared/sessions.
func sessionFiles(t testing.TB) []string {
	t.Helper()
	root := filepath.Join("..", "..", "shared", "sessions")
	var files []string
	err := filepath.WalkDir(root, func(p string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && d.Name() == "LICENSES" {
			return filepath.SkipDir
		}
		if !d.IsDir() && !strings.HasSuffix(p, ".md") {
			files = append(files, p)
		}
		return nil
	})
	if err != nil {
		t.Skipf("no shared sessions: %v", err)
	}
	return files
}

var proofName = regexp.MustCompile(`^name "((?:[^"\\]|\\.)*)"`)

// TestEvidenceRealSessions runs the tracker over every real session and checks the
// definition's invariants against an independent first-occurrence index, plus
// work that proves each message part is scanned once.
func TestEvidenceRealSessions(t *testing.T) {
	for _, path := range sessionFiles(t) {
		t.Run(filepath.Base(filepath.Dir(path))+"/"+filepath.Base(path), func(t *testing.T) {
			s, err := transcript.ReadFile(path, transcript.Options{Lenient: true})
			if err != nil {
				if errors.Is(err, transcript.ErrUnknownFormat) {
					t.Skipf("format of %s not readable yet (no transcript reader registered for it): %v", path, err)
				}
				t.Fatalf("read: %v", err)
			}
			checkInvariants(t, s)
		})
	}
}

// part is one scanned piece of a message.
type part struct {
	msg    int    // message index
	output string // output key, "" for text and args
}

func checkInvariants(t *testing.T, s *transcript.Session) {
	tr := NewTracker()
	// Independent index: where each name first occurs (message, output), and the
	// step at which the agent first writes it.
	first := map[string]part{}
	agentFirst := map[string]int{}
	wantNames := 0
	outStep := map[string]int{}
	outMsg := map[string]int{}
	note := func(names []string, p part) {
		wantNames += len(names)
		for _, n := range names {
			if _, ok := first[n]; !ok {
				first[n] = p
			}
		}
	}
	var added []Use
	for mi, m := range s.Messages {
		uses, err := tr.Add(m)
		if err != nil {
			t.Fatalf("message %d: %v", mi, err)
		}
		for _, u := range uses {
			if u.Step != m.Step {
				t.Errorf("message %d (step %d): use %+v at another step", mi, m.Step, u)
			}
		}
		added = append(added, uses...)
		if m.Role == transcript.RoleAssistant {
			var words []string
			if m.Text != "" {
				words = append(words, Names(m.Text)...)
				wantNames += len(Names(m.Text))
			}
			for _, c := range m.Calls {
				if len(c.Args) > 0 {
					an := ArgNames(c.Args)
					words = append(words, an...)
					wantNames += len(an)
				}
			}
			for _, n := range words {
				if _, ok := agentFirst[n]; !ok {
					agentFirst[n] = m.Step
				}
				if _, ok := first[n]; !ok {
					first[n] = part{msg: mi}
				}
			}
		}
		for _, o := range m.Outputs {
			outStep[o.Key], outMsg[o.Key] = o.Step, mi
			note(Names(o.Text), part{msg: mi, output: o.Key})
		}
		if m.Role != transcript.RoleAssistant && m.Text != "" {
			note(Names(m.Text), part{msg: mi})
		}
	}
	if st := tr.Stats(); st.Names != wantNames || st.Messages != len(s.Messages) {
		t.Errorf("stats %+v: want %d names over %d messages (each part scanned once)", st, wantNames, len(s.Messages))
	}
	// Every use Add returned is still there (same step and kind), and nothing else.
	type sk struct {
		key  string
		step int
		kind UseKind
	}
	fromAdd := map[sk]bool{}
	for _, u := range added {
		fromAdd[sk{u.Key, u.Step, u.Kind}] = true
	}
	total, counting, names := 0, 0, 0
	for _, k := range tr.Keys() {
		prev := -1
		for _, u := range tr.Uses(k) {
			total++
			if u.Counts() {
				counting++
			}
			if !fromAdd[sk{u.Key, u.Step, u.Kind}] {
				t.Errorf("use %+v not returned by Add", u)
			}
			if u.Step <= outStep[k] || u.Step <= prev {
				t.Errorf("use %+v: step not after the output (%d) or the previous use (%d)", u, outStep[k], prev)
			}
			prev = u.Step
			if u.Weight < 0 || u.Weight > 1 || math.IsNaN(u.Weight) {
				t.Errorf("use %+v: weight outside [0,1]", u)
			}
			switch u.Kind {
			case UseName:
				names++
				mm := proofName.FindStringSubmatch(u.Proof)
				if mm == nil {
					t.Errorf("use %+v: proof is not a name", u)
					continue
				}
				var n string
				if err := json.Unmarshal([]byte(`"`+mm[1]+`"`), &n); err != nil {
					t.Errorf("use %+v: proof name: %v", u, err)
					continue
				}
				if p := first[n]; p.output != k || p.msg != outMsg[k] {
					t.Errorf("use %+v: name %q first occurs in %+v, not in output %s", u, n, p, k)
				}
				if agentFirst[n] != u.Step {
					t.Errorf("use %+v: the agent first wrote %q at step %d", u, n, agentFirst[n])
				}
			case UseReread:
				if !strings.HasPrefix(u.Proof, "re-read /") && !strings.HasPrefix(u.Proof, "re-read ") {
					t.Errorf("use %+v: bad proof", u)
				}
			case UseCommand:
				if u.Proof != "same command" {
					t.Errorf("use %+v: bad proof", u)
				}
			default:
				t.Errorf("use %+v: unexpected kind", u)
			}
		}
	}
	if total != len(added) {
		t.Errorf("%d uses stored, Add returned %d", total, len(added))
	}
	t.Logf("%d messages, %d outputs, %d names scanned; %d uses (%d by name), %d counting",
		len(s.Messages), len(tr.Keys()), tr.Stats().Names, total, names, counting)
	// Determinism: a second run gives the same uses.
	tr2, _ := track(t, s)
	for _, k := range tr.Keys() {
		if d := cmp.Diff(tr.Uses(k), tr2.Uses(k)); d != "" {
			t.Fatalf("output %s: second run differs:\n%s", k, d)
		}
	}
}

// BenchmarkEvidence indexes the largest real session, reporting ns per message.
func BenchmarkEvidence(b *testing.B) {
	path := filepath.Join("..", "..", "shared", "sessions", "pi", "before-compaction.jsonl")
	s, err := transcript.ReadFile(path, transcript.Options{Lenient: true})
	if err != nil {
		b.Skipf("%s not readable yet: %v", path, err)
	}
	var n int64
	for _, m := range s.Messages {
		n += int64(len(m.Text))
		for _, o := range m.Outputs {
			n += int64(len(o.Text))
		}
		for _, c := range m.Calls {
			n += int64(len(c.Args))
		}
	}
	b.SetBytes(n) // MB/s: message text, outputs and call arguments per second
	b.ReportAllocs()
	b.ResetTimer()
	for b.Loop() {
		tr := NewTracker()
		for _, m := range s.Messages {
			if _, err := tr.Add(m); err != nil {
				b.Fatal(err)
			}
		}
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/float64(len(s.Messages)), "ns/message")
}
