package recall

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/pruneadvisor/pruneadvisor/advisor"
)

// ten is a hand-made original of 10 lines, the last without "\n", line 3 with CRLF.
const ten = "alpha\n" + // 1
	"beta Timeout\n" + // 2
	"gamma\r\n" + // 3 (CRLF)
	"delta\n" + // 4
	"\n" + // 5 (empty)
	"epsilon timeout\n" + // 6
	"zeta\n" + // 7
	"eta Timeout Timeout\n" + // 8
	"theta\n" + // 9
	"iota" // 10, no final newline

// The expected answers are written out by hand from ten's lines above.
func TestSelect(t *testing.T) {
	tests := []struct {
		name string
		text string
		part Part
		want string
	}{
		{"one line", ten, Part{Lines: "3"}, "3:gamma\n[lines 3-3 of 10]\n"},
		{"range", ten, Part{Lines: "4-6"}, "4:delta\n5:\n6:epsilon timeout\n[lines 4-6 of 10]\n"},
		{"first line", ten, Part{Lines: "1-1"}, "1:alpha\n[lines 1-1 of 10]\n"},
		{"last line, no newline", ten, Part{Lines: "10"}, "10:iota\n[lines 10-10 of 10]\n"},
		{"to the end", ten, Part{Lines: "9-"}, "9:theta\n10:iota\n[lines 9-10 of 10]\n"},
		{"end past the end", ten, Part{Lines: "9-5000"}, "9:theta\n10:iota\n[lines 9-10 of 10]\n"},
		{"huge end", ten, Part{Lines: "10-9223372036854775807"}, "10:iota\n[lines 10-10 of 10]\n"},
		{"leading zeros", ten, Part{Lines: "09-010"}, "9:theta\n10:iota\n[lines 9-10 of 10]\n"},
		{"final newline makes no line", "a\nb\n", Part{Lines: "1-"}, "1:a\n2:b\n[lines 1-2 of 2]\n"},
		{"CRLF throughout", "a\r\nb\r\n", Part{Lines: "2"}, "2:b\n[lines 2-2 of 2]\n"},
		{"lone CR is not a line end", "a\rb\nc", Part{Lines: "1-"}, "1:a\rb\n2:c\n[lines 1-2 of 2]\n"},
		{"only a newline", "\n", Part{Lines: "1"}, "1:\n[lines 1-1 of 1]\n"},

		{"grep none", ten, Part{Grep: "Nothing"}, "[no line matches \"Nothing\" in all 10 lines]\n"},
		{"grep one", ten, Part{Grep: "^gamma$"}, "3:gamma\n[1 line matches \"^gamma$\" in all 10 lines]\n"},
		{"grep many", ten, Part{Grep: "Timeout"}, "2:beta Timeout\n8:eta Timeout Timeout\n[2 lines match \"Timeout\" in all 10 lines]\n"},
		{"grep any case", ten, Part{Grep: "(?i)timeout"}, "2:beta Timeout\n6:epsilon timeout\n8:eta Timeout Timeout\n[3 lines match \"(?i)timeout\" in all 10 lines]\n"},
		{"grep $ after CRLF and at the unterminated end", ten, Part{Grep: "a$"},
			"1:alpha\n3:gamma\n4:delta\n7:zeta\n9:theta\n10:iota\n[6 lines match \"a$\" in all 10 lines]\n"},
		{"grep the empty line", ten, Part{Grep: "^$"}, "5:\n[1 line matches \"^$\" in all 10 lines]\n"},
		{"grep context 1", ten, Part{Grep: "Timeout", Context: 1},
			"1-alpha\n2:beta Timeout\n3-gamma\n--\n7-zeta\n8:eta Timeout Timeout\n9-theta\n[2 lines match \"Timeout\" in all 10 lines]\n"},
		{"grep context 2", ten, Part{Grep: "Timeout", Context: 2},
			"1-alpha\n2:beta Timeout\n3-gamma\n4-delta\n--\n6-epsilon timeout\n7-zeta\n8:eta Timeout Timeout\n9-theta\n10-iota\n[2 lines match \"Timeout\" in all 10 lines]\n"},
		{"grep context joins groups", ten, Part{Grep: "Timeout", Context: 3},
			"1-alpha\n2:beta Timeout\n3-gamma\n4-delta\n5-\n6-epsilon timeout\n7-zeta\n8:eta Timeout Timeout\n9-theta\n10-iota\n[2 lines match \"Timeout\" in all 10 lines]\n"},
		{"grep overlapping context marks matches", ten, Part{Grep: "(?i)timeout", Context: 1},
			"1-alpha\n2:beta Timeout\n3-gamma\n--\n5-\n6:epsilon timeout\n7-zeta\n8:eta Timeout Timeout\n9-theta\n[3 lines match \"(?i)timeout\" in all 10 lines]\n"},
		{"grep in a range", ten, Part{Lines: "3-8", Grep: "(?i)timeout"},
			"6:epsilon timeout\n8:eta Timeout Timeout\n[2 lines match \"(?i)timeout\" in lines 3-8 of 10]\n"},
		{"grep context stays in the range", ten, Part{Lines: "2-3", Grep: "beta", Context: 5},
			"2:beta Timeout\n3-gamma\n[1 line matches \"beta\" in lines 2-3 of 10]\n"},
		{"grep none in a range", ten, Part{Lines: "3-5", Grep: "Timeout"}, "[no line matches \"Timeout\" in lines 3-5 of 10]\n"},
		{"grep an empty original", "", Part{Grep: "x"}, "[no line matches \"x\" in all 0 lines]\n"},
		{"grep matching everything", "a\nb", Part{Grep: "" + ".*"}, "1:a\n2:b\n[2 lines match \".*\" in all 2 lines]\n"},

		{"whole", ten, Part{}, ten},
		{"whole, not text", "\x00\xff\r\n", Part{}, "\x00\xff\r\n"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := Select(tt.text, tt.part)
			if err != nil {
				t.Fatalf("Select(%+v) = %v", tt.part, err)
			}
			if d := cmp.Diff(tt.want, got); d != "" {
				t.Errorf("Select(%+v) (-want +got):\n%s", tt.part, d)
			}
		})
	}
}

func TestSelectErrors(t *testing.T) {
	const forms = `; want "N", "N-M" or "N-" with line numbers from 1, e.g. "200-250"`
	const re2 = `; want a Go (RE2) regular expression (no lookaround, no backreferences), e.g. "Timeout" or "(?i)error|fail"`
	tests := []struct {
		part Part
		text string
		want error
		msg  string
	}{
		{Part{Lines: "0"}, ten, ErrBadRange, `bad line range: lines "0": line numbers start at 1` + forms},
		{Part{Lines: "0-5"}, ten, ErrBadRange, `bad line range: lines "0-5": line numbers start at 1` + forms},
		{Part{Lines: "3-0"}, ten, ErrBadRange, `bad line range: lines "3-0": line numbers start at 1` + forms},
		{Part{Lines: "250-200"}, ten, ErrBadRange, `bad line range: lines "250-200": the end 200 is before the start 250` + forms},
		{Part{Lines: "abc"}, ten, ErrBadRange, `bad line range: lines "abc": "abc" is not a line number` + forms},
		{Part{Lines: "-5"}, ten, ErrBadRange, `bad line range: lines "-5": a line number is missing` + forms},
		{Part{Lines: "-"}, ten, ErrBadRange, `bad line range: lines "-": a line number is missing` + forms},
		{Part{Lines: "1-2-3"}, ten, ErrBadRange, `bad line range: lines "1-2-3": "2-3" is not a line number` + forms},
		{Part{Lines: " 2-3"}, ten, ErrBadRange, `bad line range: lines " 2-3": " 2" is not a line number` + forms},
		{Part{Lines: "2:3"}, ten, ErrBadRange, `bad line range: lines "2:3": "2:3" is not a line number` + forms},
		{Part{Lines: "2,3"}, ten, ErrBadRange, `bad line range: lines "2,3": "2,3" is not a line number` + forms},
		{Part{Lines: "+2"}, ten, ErrBadRange, `bad line range: lines "+2": "+2" is not a line number` + forms},
		{Part{Lines: "99999999999999999999"}, ten, ErrBadRange, `bad line range: lines "99999999999999999999": "99999999999999999999" is too large` + forms},
		{Part{Lines: "1-99999999999999999999"}, ten, ErrBadRange, `bad line range: lines "1-99999999999999999999": "99999999999999999999" is too large` + forms},
		{Part{Lines: "11"}, ten, ErrBadRange, `bad line range: lines "11": the original has 10 lines, so it starts past the end; want a start from 1 to 10`},
		{Part{Lines: "11-"}, ten, ErrBadRange, `bad line range: lines "11-": the original has 10 lines, so it starts past the end; want a start from 1 to 10`},
		{Part{Lines: "2", Grep: "x"}, "one\n", ErrBadRange, `bad line range: lines "2": the original has 1 line, so it starts past the end; want a start from 1 to 1`},
		{Part{Lines: "1"}, "", ErrBadRange, `bad line range: lines "1": the original has 0 lines, so it starts past the end; want a start from 1 to 0`},
		{Part{Lines: strings.Repeat("7", 100)}, ten, ErrBadRange, `bad line range: lines "` + strings.Repeat("7", 60) + `"...: "` + strings.Repeat("7", 60) + `"... is too large` + forms},

		{Part{Grep: "("}, ten, ErrBadPattern, `bad pattern: grep "(": missing closing ): "("` + re2},
		{Part{Grep: "a[z-a]"}, ten, ErrBadPattern, `bad pattern: grep "a[z-a]": invalid character class range: "z-a"` + re2},
		{Part{Grep: `(?<=a)b`}, ten, ErrBadPattern, `bad pattern: grep "(?<=a)b": invalid named capture: "(?<=a)b"` + re2},
		{Part{Grep: `x\`}, ten, ErrBadPattern, `bad pattern: grep "x\\": trailing backslash at end of expression: ""` + re2},
		{Part{Grep: "*", Lines: "1"}, ten, ErrBadPattern, `bad pattern: grep "*": missing argument to repetition operator: "*"` + re2},
		{Part{Grep: strings.Repeat("a", 1001)}, ten, ErrBadPattern, `bad pattern: grep "` + strings.Repeat("a", 60) + `"... is 1001 bytes; want at most 1000`},

		{Part{Grep: "a", Context: -1}, ten, ErrBadContext, `bad context: context -1: want 0 to 20 lines`},
		{Part{Grep: "a", Context: 21}, ten, ErrBadContext, `bad context: context 21: want 0 to 20 lines`},
		{Part{Lines: "1-3", Context: 2}, ten, ErrBadContext, `bad context: context 2 without grep: context is the lines shown around each grep match`},
	}
	for _, tt := range tests {
		got, err := Select(tt.text, tt.part)
		if !errors.Is(err, tt.want) {
			t.Errorf("Select(%.80q, %+.80v) = %q, %v; want %v", tt.text, tt.part, got, err, tt.want)
			continue
		}
		if err.Error() != tt.msg {
			t.Errorf("Select(%+.80v) error\n got %s\nwant %s", tt.part, err, tt.msg)
		}
		// Validate finds the same error without the original, but for a start past
		// the end, which needs it.
		verr := tt.part.Validate()
		if pastEnd := strings.Contains(tt.msg, "past the end"); pastEnd != (verr == nil) || (!pastEnd && verr.Error() != tt.msg) {
			t.Errorf("%+.80v.Validate() = %v; want the same error as Select (none for a start past the end)", tt.part, verr)
		}
	}
}

// TestSelectLimits: MaxPartLines, MaxPartBytes and MaxLineBytes, the expected lines
// counted out by hand from the line sizes.
func TestSelectLimits(t *testing.T) {
	var many strings.Builder // 3000 lines "line 1" ... "line 3000"
	for k := 1; k <= 3000; k++ {
		fmt.Fprintf(&many, "line %d\n", k)
	}
	got, err := Select(many.String(), Part{Lines: "1-"})
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSuffix(got, "\n"), "\n")
	if want := []string{"2000:line 2000", "[lines 1-2000 of 3000]",
		`[stopped after line 2000 (at most 2000 lines, 100000 bytes): ask for lines="2001-3000" for more]`}; len(lines) != 2002 || lines[0] != "1:line 1" || !cmp.Equal(lines[1999:], want) {
		t.Errorf("3000 lines: %d lines, first %q, last %q; want 2002 ending %q", len(lines), lines[0], lines[max(0, len(lines)-3):], want)
	}
	// Grep counts every match, shows the first 2000.
	got, err = Select(many.String(), Part{Grep: "^line", Lines: "501-"})
	if err != nil {
		t.Fatal(err)
	}
	lines = strings.Split(strings.TrimSuffix(got, "\n"), "\n")
	if want := []string{"2500:line 2500", `[2500 lines match "^line" in lines 501-3000 of 3000]`,
		`[stopped after line 2500 (at most 2000 lines, 100000 bytes): ask for lines="2501-3000" for more]`}; len(lines) != 2002 || !cmp.Equal(lines[1999:], want) {
		t.Errorf("grep 2500 of 3000: %d lines, last %q; want 2002 ending %q", len(lines), lines[max(0, len(lines)-3):], want)
	}

	// 200 lines of 1000 bytes: "N:" + 1000 + "\n" is 1003 bytes for lines 1-9 (9,027)
	// and 1004 for 10-99 (90,360): 99,387 bytes; line 100 (1,005) would pass 100,000.
	wide := strings.Repeat(strings.Repeat("x", 1000)+"\n", 200)
	got, err = Select(wide, Part{Lines: "1-"})
	if err != nil {
		t.Fatal(err)
	}
	lines = strings.Split(strings.TrimSuffix(got, "\n"), "\n")
	if len(lines) != 101 || !strings.HasPrefix(lines[98], "99:xxx") || len(got) > MaxPartBytes+200 {
		t.Errorf("wide lines: %d lines, %d bytes; want 99 and two notes", len(lines), len(got))
	}
	if want := []string{"[lines 1-99 of 200]", `[stopped after line 99 (at most 2000 lines, 100000 bytes): ask for lines="100-200" for more]`}; !cmp.Equal(lines[len(lines)-2:], want) {
		t.Errorf("notes %q\nwant %q", lines[len(lines)-2:], want)
	}

	// One line of 6,001 bytes: "x" and 3,000 two-byte runes. Byte 2000 is inside a
	// rune, so 1,999 bytes are kept and 4,002 said to be cut.
	long := "x" + strings.Repeat("é", 3000)
	got, err = Select("a\n"+long+"\nb", Part{Grep: "é"})
	if err != nil {
		t.Fatal(err)
	}
	if want := "2:x" + strings.Repeat("é", 999) + " [… 4002 more bytes]\n[1 line matches \"é\" in all 3 lines]\n"; got != want {
		t.Errorf("long line: got %d bytes %.60q...; want %d bytes", len(got), got, len(want))
	}
}

// TestSelectAgreesWithGrep: on patterns that mean the same in RE2 and POSIX ERE,
// the lines Select shows are what GNU grep -n (-C) prints (the note aside).
func TestSelectAgreesWithGrep(t *testing.T) {
	grep, err := exec.LookPath("grep")
	if err != nil {
		t.Skip("no grep on PATH")
	}
	text := strings.ReplaceAll(ten, "\r", "") + "\n" + strings.Repeat("filler\n", 30) + "late Timeout\nkappa\n"
	file := filepath.Join(t.TempDir(), "original.txt")
	if err := os.WriteFile(file, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, pat := range []string{"Timeout", "a$", "^e", "filler", "^[a-z]+$", "nothing"} {
		for _, c := range []int{0, 1, 2, 5} {
			args := []string{"-n", "-E", "-e", pat, file}
			if c > 0 { // grep -C 0 prints "--" between groups; plain grep -n does not, nor does Select
				args = append([]string{"-C", fmt.Sprint(c)}, args...)
			}
			out, err := exec.Command(grep, args...).Output()
			if err != nil && len(out) > 0 {
				t.Fatalf("grep %s: %v", pat, err)
			}
			got, err := Select(text, Part{Grep: pat, Context: c})
			if err != nil {
				t.Fatal(err)
			}
			got = got[:strings.LastIndex(strings.TrimSuffix(got, "\n"), "\n")+1] // the note
			if d := cmp.Diff(string(out), got); d != "" {
				t.Errorf("grep -n -C %d %q (-grep +Select):\n%s", c, pat, d)
			}
		}
	}
}

// TestRecallPartRecordsLikeWhole: a partial recall (lines, grep, even a grep that
// matches nothing) is recorded as a recall event exactly as a whole one is, in a
// real SQLite store; a bad part is refused before the store is asked, and a start
// past the end is refused and not recorded.
func TestRecallPartRecordsLikeWhole(t *testing.T) {
	ctx := t.Context()
	db, o := openStore(t, ten)
	t0 := time.Date(2025, 5, 6, 7, 8, 9, 0, time.UTC)
	svc := New(db)
	svc.Clock = fixedClock(t0)
	for _, tt := range []struct {
		part Part
		want string
	}{
		{Part{}, ten},
		{Part{Lines: "2-3"}, "2:beta Timeout\n3:gamma\n[lines 2-3 of 10]\n"},
		{Part{Grep: "Timeout"}, "2:beta Timeout\n8:eta Timeout Timeout\n[2 lines match \"Timeout\" in all 10 lines]\n"},
		{Part{Grep: "Nothing"}, "[no line matches \"Nothing\" in all 10 lines]\n"},
	} {
		got, err := svc.RecallPart(ctx, o.RecallID, tt.part)
		if err != nil || got != tt.want {
			t.Errorf("RecallPart(%+v) = %q, %v; want %q", tt.part, got, err, tt.want)
		}
	}
	if _, err := svc.RecallPart(ctx, o.RecallID, Part{Lines: "11-20"}); !errors.Is(err, ErrBadRange) ||
		err.Error() != `recall "`+o.RecallID+`": bad line range: lines "11-20": the original has 10 lines, so it starts past the end; want a start from 1 to 10` {
		t.Errorf("RecallPart(past the end) = %v; want ErrBadRange naming the id and the count", err)
	}
	events, err := db.SessionRecalls(ctx, "sess")
	if err != nil {
		t.Fatal(err)
	}
	var want []advisor.RecallEvent
	for i := range 4 {
		want = append(want, advisor.RecallEvent{RecallID: o.RecallID, SessionID: "sess", OutputKey: "toolu_01", At: t0.Add(time.Duration(i) * time.Second)})
	}
	if diff := cmp.Diff(want, events); diff != "" {
		t.Errorf("recorded events (-want +got):\n%s", diff)
	}

	for _, p := range []Part{{Lines: "0"}, {Grep: "("}, {Grep: "x", Context: 99}} {
		f := &fakeStore{original: advisor.Original{Text: ten}}
		_, err := New(f).RecallPart(ctx, "o_0123456789", p)
		if err == nil || !strings.HasPrefix(err.Error(), `recall "o_0123456789": bad `) || f.originalCalls != 0 || len(f.recorded) != 0 {
			t.Errorf("RecallPart(%+v) = %v, store asked %d times, %d recorded; want a bad-part error and no store", p, err, f.originalCalls, len(f.recorded))
		}
	}
	// A malformed id is said first, whatever the part.
	if _, err := New(&fakeStore{}).RecallPart(ctx, "nope", Part{Lines: "0"}); !errors.Is(err, ErrInvalidID) {
		t.Errorf("RecallPart(bad id, bad part) = %v; want ErrInvalidID", err)
	}
}

// TestArgsPartAgreesWithSchema: the lines pattern and the context bounds the schema
// shows agree with Part.Validate on well-sized values.
func TestArgsPartAgreesWithSchema(t *testing.T) {
	var schema struct {
		Properties struct {
			Lines struct {
				Pattern string `json:"pattern"`
			} `json:"lines"`
			Context struct {
				Minimum, Maximum int
			} `json:"context"`
		} `json:"properties"`
	}
	if err := jsonUnmarshal(ToolSchema(), &schema); err != nil {
		t.Fatal(err)
	}
	re := mustCompile(t, schema.Properties.Lines.Pattern)
	for _, v := range []string{"1", "200", "200-250", "200-", "01", "0", "0-3", "3-0", "-3", "-", "1-2-3", "a", " 1", "1 ", "1:2", "1,2", "250-200"} {
		schemaOK := re.MatchString(v)
		validOK := Args{ID: "o_0123456789", Lines: v}.Part().Validate() == nil
		// The schema cannot order two numbers ("250-200" matches it and is refused),
		// and Select reads leading zeros the schema does not show ("01").
		switch v {
		case "250-200":
			schemaOK = false
		case "01":
			schemaOK = true
		}
		if schemaOK != validOK {
			t.Errorf("lines %q: schema pattern %v, Validate %v; want equal", v, schemaOK, validOK)
		}
	}
	if c := schema.Properties.Context; c.Minimum != 0 || c.Maximum != MaxContext {
		t.Errorf("schema context bounds %d-%d; want 0-%d", c.Minimum, c.Maximum, MaxContext)
	}
}

func jsonUnmarshal(b []byte, v any) error { return json.Unmarshal(b, v) }

func mustCompile(t *testing.T, pattern string) *regexp.Regexp {
	t.Helper()
	re, err := regexp.Compile(pattern)
	if err != nil {
		t.Fatalf("schema pattern %q: %v", pattern, err)
	}
	return re
}
