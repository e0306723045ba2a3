package transcript

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/tidwall/gjson"
)

// bodyCase is one request body the fast path is compared on.
type bodyCase struct {
	name   string
	format Format
	data   []byte
	fast   bool // the fast path must take it (strict mode)
}

// bodyFromClaude turns a Claude Code session into the Messages API body that would
// carry its history: the message of every user and assistant line, in file order
// (the few lines that are not valid JSON left out).
func bodyFromClaude(t testing.TB, path string) []byte {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var msgs []string
	sc := bufio.NewScanner(f)
	sc.Buffer(nil, 64<<20)
	for sc.Scan() {
		typ := gjson.GetBytes(sc.Bytes(), "type").String()
		m := gjson.GetBytes(sc.Bytes(), "message")
		if (typ == "user" || typ == "assistant") && m.IsObject() && json.Valid([]byte(m.Raw)) {
			msgs = append(msgs, m.Raw)
		}
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	return []byte(`{"model":"claude-test","max_tokens":1024,"system":[{"type":"text","text":"You are Claude Code.","cache_control":{"type":"ephemeral"}}],"messages":[` +
		strings.Join(msgs, ",") + `],"stream":true}`)
}

// bodyCases collects request bodies: the SDK body, the project's own bodies (healthy
// and malformed), bodies built from every real Claude Code session, and
// chat-completions bodies built from the real SWE-agent and mini-swe-agent
// histories.
func bodyCases(t testing.TB) []bodyCase {
	t.Helper()
	cases := []bodyCase{{"sdk", FormatAnthropic, anSDKBody(t), true}}
	read := func(p string) []byte {
		data, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		return data
	}
	own, _ := filepath.Glob(docOwn("bad/anthropic-*.json"))
	for _, p := range own {
		cases = append(cases, bodyCase{filepath.Base(p), FormatAnthropic, read(p), strings.Contains(p, "healthy")})
	}
	own, _ = filepath.Glob(docOwn("bad/openai-*.json"))
	for _, p := range own {
		cases = append(cases, bodyCase{filepath.Base(p), FormatOpenAI, read(p), false})
	}
	cases = append(cases, bodyCase{"chat-completions.json", FormatOpenAI, read(docOwn("openai/chat-completions.json")), true})
	claude, _ := filepath.Glob(docReal("claude-code/*.jsonl"))
	if len(claude) != 7 {
		t.Fatalf("%d Claude Code sessions; want 7", len(claude))
	}
	for _, p := range claude {
		cases = append(cases, bodyCase{"claude " + filepath.Base(p), FormatAnthropic, bodyFromClaude(t, p), true})
	}
	for _, p := range []string{"swe-agent/marshmallow-1867.function-calling.traj", "swe-agent/pydicom__pydicom-1458.traj"} {
		h := gjson.GetBytes(read(docReal(p)), "history").Raw
		cases = append(cases, bodyCase{"history " + p, FormatOpenAI, []byte(`{"model":"gpt-test","messages":` + h + `}`), true})
	}
	mini, _ := filepath.Glob(docReal("mini-swe-agent/*.traj.json"))
	for _, p := range mini {
		m := gjson.GetBytes(read(p), "messages").Raw
		if m == "" {
			continue
		}
		cases = append(cases, bodyCase{"messages " + filepath.Base(p), FormatOpenAI, []byte(`{"messages":` + m + `}`), true})
	}
	shapes := `{"model":"x","messages":[
 {"role":"user","content":"list files"},
 {"role":"assistant","content":null,"function_call":{"name":"bash","arguments":"{\"command\":\"ls\"}"}},
 {"role":"function","name":"bash","content":"a.go\nb.go"},
 {"role":"assistant","content":null,"tool_calls":[{"id":7,"type":"function","function":{"name":"read","arguments":{"path":"a.go"}}}]},
 {"role":"tool","tool_call_id":7,"content":[{"type":"text","text":"package a"},{"type":"image_url","image_url":{"url":"u"}},"tail"]},
 {"role":"tool","tool_call_ids":["z","y"],"content":"two ids"},
 {"role":"narrator","content":"left out"},
 {"role":"assistant","tool_calls":[{"type":"function","function":{"name":"noid","arguments":""}}]},
 {"role":"tool","content":null,"tool_call_id":"call-5"}
], "n": 1 , "temperature":0.2}` + "\n"
	cases = append(cases, bodyCase{"openai shapes", FormatOpenAI, []byte(shapes), true})
	return cases
}

// bodyDump renders everything a session holds, unexported fields included but the
// message spans only the fast path records, one line per session, message, call and
// output, pointers as indexes (a pointer to anything outside the session shows as
// -1). Two sessions read alike when their dumps are equal.
func bodyDump(s *Session) []string {
	calls := map[*ToolCall]int{}
	for i, c := range s.Calls {
		calls[c] = i
	}
	outs := map[*ToolOutput]string{}
	for _, m := range s.Messages {
		for _, o := range m.Outputs {
			outs[o] = o.Key
		}
	}
	callIdx := func(c *ToolCall) int {
		if i, ok := calls[c]; ok {
			return i
		}
		return -1
	}
	out := []string{fmt.Sprintf("session %q %q %q %q task=%q skipped=%d warnings=%q units=%v raw=%d/%x",
		s.Format, s.Name, s.ID, s.Cwd, s.Task, s.Skipped, s.Warnings, s.units, len(s.raw), TextHash(string(s.raw)))}
	for _, o := range s.Orphans {
		out = append(out, "orphan "+outs[o])
	}
	for _, c := range s.Calls {
		key := "<nil>"
		if c.Output != nil {
			key = outs[c.Output]
		}
		out = append(out, fmt.Sprintf("call %q %q %s msg=%d step=%d %s %q %v %q %q %q %q %+v -> %q",
			c.ID, c.Name, c.Args, c.Message, c.Step, c.Action, c.Path, c.Range, c.Content, c.Command, c.Summary, c.Paths, c.Ops, key))
	}
	for _, m := range s.Messages {
		var ci []int
		for _, c := range m.Calls {
			ci = append(ci, callIdx(c))
		}
		out = append(out, fmt.Sprintf("message %d step=%d %s %q line=%d %q tokens=%d meta=%v calls=%v",
			m.Index, m.Step, m.Role, m.Text, m.Line, m.Retention, m.Tokens, m.Meta, ci))
		for _, o := range m.Outputs {
			out = append(out, fmt.Sprintf("  output %q %q call=%d %q err=%v unch=%v msg=%d block=%d step=%d tokens=%d %s img=%v unit=%d %q",
				o.Key, o.CallID, callIdx(o.Call), o.Text, o.IsError, o.Unchanged, o.Message, o.Block, o.Step, o.Tokens, o.Hash, o.HasImage, o.unit, o.paths))
		}
	}
	return out
}

// bodyDiff compares two sessions by their dumps; "" when they read alike.
func bodyDiff(want, got *Session) string {
	a, b := bodyDump(want), bodyDump(got)
	if slices.Equal(a, b) {
		return ""
	}
	return cmp.Diff(a, b)
}

// bodyCheckSame reads data with the full path and with the fast path (no cache, a
// cold cache, the same cache warm; in lenient mode warm only) and checks that the
// sessions, the errors and the rewritten bytes are the same.
func bodyCheckSame(t *testing.T, format Format, data []byte, cache *MessageCache) {
	t.Helper()
	full, fast := readAnthropicFull, readAnthropic
	if format == FormatOpenAI {
		full, fast = readOpenAIFull, readOpenAI
	}
	for _, lenient := range []bool{false, true} {
		want, wantErr := full("body", data, Options{Lenient: lenient})
		var rewrites []bodyRewrite
		if wantErr == nil {
			rewrites = bodyRewrites(want)
		}
		passes := []*MessageCache{nil, cache, cache}
		if lenient {
			passes = passes[2:] // a lenient read of what reads strictly reads the same
		}
		for pass, c := range passes {
			got, err := fast("body", data, Options{Lenient: lenient, Cache: c})
			if fmt.Sprint(err) != fmt.Sprint(wantErr) {
				t.Fatalf("lenient %v pass %d: error %v; full path %v", lenient, pass, err, wantErr)
			}
			if wantErr != nil {
				continue
			}
			if d := bodyDiff(want, got); d != "" {
				t.Fatalf("lenient %v pass %d: session differs (-full +fast):\n%s", lenient, pass, d)
			}
			for _, rw := range rewrites {
				out, err := got.Rewrite(rw.stubs)
				if fmt.Sprint(err) != fmt.Sprint(rw.err) {
					t.Fatalf("Rewrite errors differ: full %v, fast %v", rw.err, err)
				}
				if !bytes.Equal(out, rw.out) {
					t.Fatalf("Rewrite (%d stubs) differs:\nfull %s\nfast %s", len(rw.stubs), clipBytes(rw.out), clipBytes(out))
				}
			}
		}
	}
}

// bodyRewrite is one rewrite of a session read by the full path.
type bodyRewrite struct {
	stubs map[string]string
	out   []byte
	err   error
}

// bodyRewrites rewrites s with every locatable output stubbed, and with every third.
func bodyRewrites(s *Session) []bodyRewrite {
	var out []bodyRewrite
	for _, every := range []int{1, 3} {
		stubs := map[string]string{}
		for i, o := range s.Outputs() {
			if o.unit > 0 && len(o.paths) > 0 && i%every == 0 {
				stubs[o.Key] = fmt.Sprintf("[pruned: %s \"%d\" <&>]", o.Key, i)
			}
		}
		if len(stubs) == 0 {
			break
		}
		b, err := s.Rewrite(stubs)
		out = append(out, bodyRewrite{stubs, b, err})
	}
	return out
}

func clipBytes(b []byte) string {
	if len(b) > 400 {
		return string(b[:200]) + " … " + string(b[len(b)-200:])
	}
	return string(b)
}

// The fast path reads every body exactly as the full path does (sessions, errors,
// warnings, rewrites), with and without a cache, and takes every healthy body.
func TestBodyFastPathMatchesFull(t *testing.T) {
	cache := NewMessageCache(0)
	for _, bc := range bodyCases(t) {
		t.Run(bc.name, func(t *testing.T) {
			bodyCheckSame(t, bc.format, bc.data, cache)
			fast := readAnthropicBody
			if bc.format == FormatOpenAI {
				fast = readOpenAIBody
			}
			s, took := fast("body", bc.data, Options{})
			if bc.fast && !took {
				t.Errorf("the fast path declined a healthy body")
			}
			// Every output it locates is located in its message too, so a rewrite
			// patches messages, not the whole body.
			if !took {
				return
			}
			for _, o := range s.Outputs() {
				if _, ok := o.relPaths(); len(o.paths) > 0 && !ok {
					t.Errorf("output %s: paths %q not located in a message (%q)", o.Key, o.paths, o.elemPath)
				}
			}
		})
	}
}

// Inputs at the edges of what the scan accepts: each is read the same by both paths
// (most of them by the full path alone, after the fast path declines).
func TestBodyScanEdges(t *testing.T) {
	const u = `{"role":"user","content":"hi"}`
	const a = `{"role":"assistant","content":[{"type":"tool_use","id":"t","name":"Read","input":{"file_path":"a\"b\\"}}]}`
	const r = `{"role":"user","content":[{"type":"tool_result","tool_use_id":"t","content":"x\\\\\"y\\\\"}]}`
	tests := []struct {
		name string
		body string
		fast bool // the fast path takes it
	}{
		{"plain", `{"messages":[` + u + `,` + a + `,` + r + `]}`, true},
		{"blanks everywhere", " \r\n\t{ \"messages\" : [ " + u + " , " + a + " ,\n" + r + " ] , \"model\" : \"m\" } \n", true},
		{"byte order mark", "\xef\xbb\xbf" + `{"messages":[` + u + `]}`, true},
		{"escaped key", `{"messa\u0067es":[` + u + `]}`, false},
		{"repeated key", `{"messages":[` + u + `],"messages":[` + a + `]}`, false},
		{"repeated model", `{"model":"a","messages":[` + u + `],"model":"b"}`, false},
		{"trailing comma in messages", `{"messages":[` + u + `,]}`, false},
		{"trailing comma in object", `{"messages":[` + u + `],}`, false},
		{"missing comma", `{"messages":[` + u + ` ` + u + `]}`, false},
		{"bad literal", `{"stream":tru,"messages":[` + u + `]}`, false},
		{"bad number", `{"max_tokens":01,"messages":[` + u + `]}`, false},
		{"raw tab in a string", "{\"model\":\"a\tb\",\"messages\":[" + u + "]}", false},
		{"raw tab in a message", "{\"messages\":[{\"role\":\"user\",\"content\":\"a\tb\"}]}", false},
		{"unterminated", `{"messages":[` + u, false},
		{"extra bracket", `{"messages":[` + u + `]]}`, false},
		{"text after", `{"messages":[` + u + `]} x`, false},
		{"messages null", `{"messages":null}`, false},
		{"messages empty", `{"messages":[]}`, false},
		{"system only", `{"system":"s","messages":[]}`, true},
		{"system null", `{"system":null,"messages":[` + u + `]}`, true},
		{"system number", `{"system":3,"messages":[` + u + `]}`, false},
		{"system blocks", `{"system":[{"type":"text","text":"a"},{"type":"text","text":""},{"type":"text","text":"b"}],"messages":[` + u + `]}`, true},
		{"non-ASCII key", `{"mödel":"x","messages":[` + u + `]}`, false},
		{"control key", "{\"a\x01\":1,\"messages\":[" + u + "]}", false},
		{"nested junk in tools", `{"tools":[{"a":[1,2,{"b":"]}"}]}],"messages":[` + u + `]}`, true},
		{"unbalanced tools", `{"tools":[{"a":[1,2}],"messages":[` + u + `]}`, false},
		{"empty object", `{}`, false},
		{"not an object", `"messages"`, false},
		{"array", `[` + u + `]`, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			for _, f := range []Format{FormatAnthropic, FormatOpenAI} {
				bodyCheckSame(t, f, []byte(tt.body), NewMessageCache(0))
			}
			_, took := readAnthropicBody("body", []byte(tt.body), Options{})
			if took != tt.fast {
				t.Errorf("fast path took it: %v; want %v", took, tt.fast)
			}
		})
	}
}

// bodyHistory is an Anthropic body of n turns in the shape Claude Code sends: each
// turn an assistant tool_use and a user tool_result; the last block carries a
// cache_control marker, which moves to the new last message on the next request.
func bodyHistory(n int, edit func(k int) string) []byte {
	var b bytes.Buffer
	b.WriteString(`{"model":"m","max_tokens":100,"system":[{"type":"text","text":"Be brief.","cache_control":{"type":"ephemeral"}}],"messages":[{"role":"user","content":"Fix the bug."}`)
	for k := 1; k <= n; k++ {
		out := fmt.Sprintf("output %d\n%s", k, strings.Repeat(fmt.Sprintf("line of output %d\n", k), 40))
		if edit != nil {
			out = edit(k)
		}
		q, _ := json.Marshal(out)
		fmt.Fprintf(&b, `,{"role":"assistant","content":[{"type":"text","text":"Step %d."},{"type":"tool_use","id":"t%d","name":"Read","input":{"file_path":"/f%d.go"}}]}`, k, k, k)
		marker := ""
		if k == n {
			marker = `,"cache_control":{"type":"ephemeral"}`
		}
		fmt.Fprintf(&b, `,{"role":"user","content":[{"type":"tool_result","tool_use_id":"t%d","content":%s%s}]}`, k, q, marker)
	}
	b.WriteString(`],"stream":true}`)
	return b.Bytes()
}

// A warm cache decodes only what changed: the new turn and the message that lost
// its cache_control marker; an edited or shifted history is read afresh where it
// changed and still reads as the full path reads it.
func TestMessageCacheReuse(t *testing.T) {
	c := NewMessageCache(0)
	read := func(data []byte) (hits, misses int64) {
		t.Helper()
		before := c.Stats()
		if _, err := Read("body", data, Options{Format: FormatAnthropic, Cache: c}); err != nil {
			t.Fatal(err)
		}
		after := c.Stats()
		bodyCheckSame(t, FormatAnthropic, data, c)
		return after.Hits - before.Hits, after.Misses - before.Misses
	}
	// 20 turns: 41 messages and the system value (the other top-level values are
	// short and checked directly).
	if _, misses := read(bodyHistory(20, nil)); misses != 42 {
		t.Errorf("first read: %d misses; want 42 (41 messages and the system)", misses)
	}
	// One more turn: two new messages, and message 40 lost its marker.
	hits, misses := read(bodyHistory(21, nil))
	if misses != 3 {
		t.Errorf("next turn: %d misses; want 3", misses)
	}
	if want := int64(44 - 3); hits != want {
		t.Errorf("next turn: %d hits; want %d", hits, want)
	}
	// An edited tool result in the middle is decoded again, the rest is not.
	edited := bodyHistory(21, func(k int) string {
		if k == 7 {
			return "edited output"
		}
		return fmt.Sprintf("output %d\n%s", k, strings.Repeat(fmt.Sprintf("line of output %d\n", k), 40))
	})
	if _, misses := read(edited); misses != 1 {
		t.Errorf("edited history: %d misses; want 1", misses)
	}
	s, err := Read("body", edited, Options{Format: FormatAnthropic, Cache: c})
	if err != nil {
		t.Fatal(err)
	}
	if got := s.Messages[15].Outputs[0].Text; got != "edited output" {
		t.Errorf("edited output reads %q", got)
	}
	// The first turn dropped: every message moves two places, its paths with it.
	full := bodyHistory(21, nil)
	shifted := bytes.Replace(full, []byte(`,{"role":"assistant","content":[{"type":"text","text":"Step 1."},{"type":"tool_use","id":"t1","name":"Read","input":{"file_path":"/f1.go"}}]}`), nil, 1)
	i := bytes.Index(shifted, []byte(`,{"role":"user","content":[{"type":"tool_result","tool_use_id":"t1"`))
	j := bytes.Index(shifted, []byte(`,{"role":"assistant","content":[{"type":"text","text":"Step 2."}`))
	shifted = append(shifted[:i:i], shifted[j:]...)
	if hits, misses := read(shifted); misses != 0 || hits == 0 {
		t.Errorf("shifted history: %d hits, %d misses; want only hits", hits, misses)
	}
}

// The same for chat-completions bodies, with a legacy function_call pair, which is
// decoded on every read.
func TestMessageCacheOpenAI(t *testing.T) {
	c := NewMessageCache(0)
	body := func(n int) []byte {
		var b bytes.Buffer
		b.WriteString(`{"model":"gpt","messages":[{"role":"system","content":"Be brief."},{"role":"user","content":"Fix it."},` +
			`{"role":"assistant","content":null,"function_call":{"name":"bash","arguments":"{\"command\":\"ls\"}"}},{"role":"function","name":"bash","content":"a.go"}`)
		for k := 1; k <= n; k++ {
			fmt.Fprintf(&b, `,{"role":"assistant","content":"Step %d.","tool_calls":[{"id":"c%d","type":"function","function":{"name":"read_file","arguments":"{\"path\":\"f%d.go\"}"}}]}`, k, k, k)
			fmt.Fprintf(&b, `,{"role":"tool","tool_call_id":"c%d","content":[{"type":"text","text":"package f%d"},{"type":"text","text":"func F%d() {}"}]}`, k, k, k)
		}
		b.WriteString(`]}`)
		return b.Bytes()
	}
	bodyCheckSame(t, FormatOpenAI, body(10), c)
	before := c.Stats()
	s, err := Read("body", body(11), Options{Format: FormatOpenAI, Cache: c})
	if err != nil {
		t.Fatal(err)
	}
	after := c.Stats()
	// New: two messages; decoded every time: the function_call pair.
	if got := after.Misses - before.Misses; got != 4 {
		t.Errorf("%d misses; want 4", got)
	}
	if got := after.Hits - before.Hits; got != 22 {
		t.Errorf("%d hits; want 22", got)
	}
	if o := s.Calls[0].Output; o == nil || o.Text != "a.go" || s.Calls[0].Name != "bash" {
		t.Errorf("function_call pair not read: %+v", s.Calls[0])
	}
	bodyCheckSame(t, FormatOpenAI, body(11), c)
}

// The cache stays under its bound, and a session read through a cache too small to
// hold it is still read right.
func TestMessageCacheBound(t *testing.T) {
	c := NewMessageCache(64 << 10)
	for n := 30; n <= 34; n++ {
		bodyCheckSame(t, FormatAnthropic, bodyHistory(n, nil), c)
		if st := c.Stats(); st.Bytes > 64<<10 {
			t.Fatalf("cache holds %d bytes; bound %d", st.Bytes, 64<<10)
		}
	}
	if st := c.Stats(); st.Entries == 0 || st.Hits == 0 {
		t.Errorf("stats %+v: the cache kept nothing", st)
	}
}

// Concurrent reads share one cache (run with -race).
func TestMessageCacheConcurrent(t *testing.T) {
	c := NewMessageCache(256 << 10)
	want := map[int]*Session{}
	for n := 10; n < 14; n++ {
		s, err := readAnthropicFull("body", bodyHistory(n, nil), Options{})
		if err != nil {
			t.Fatal(err)
		}
		want[n] = s
	}
	var wg sync.WaitGroup
	for g := range 4 {
		wg.Go(func() {
			for i := range 20 {
				n := 10 + (g+i)%4
				s, err := Read("body", bodyHistory(n, nil), Options{Format: FormatAnthropic, Cache: c})
				if err != nil {
					t.Error(err)
					return
				}
				if d := bodyDiff(want[n], s); d != "" {
					t.Errorf("n=%d: %s", n, d)
					return
				}
			}
		})
	}
	wg.Wait()
}

// FuzzBodyFastPath: on any input both readers' fast paths read as their full paths.
func FuzzBodyFastPath(f *testing.F) {
	f.Add([]byte(anSDKBody(f)), false)
	f.Add(bodyHistory(3, nil), false)
	f.Add([]byte(`{"messages":[{"role":"user","content":"x"},{"role":"assistant","content":null,"tool_calls":[{"id":"a","type":"function","function":{"name":"f","arguments":"{}"}}]},{"role":"tool","tool_call_id":"a","content":[{"type":"text","text":"r"},"s"]}]}`), true)
	f.Fuzz(func(t *testing.T, data []byte, openai bool) {
		format := FormatAnthropic
		if openai {
			format = FormatOpenAI
		}
		bodyCheckSame(t, format, data, NewMessageCache(0))
	})
}

// The cache copies what it keeps: a session read from it can be changed by its
// reader without changing the next one.
func TestMessageCacheCopies(t *testing.T) {
	c := NewMessageCache(0)
	data := bodyHistory(3, nil)
	s1, err := Read("body", data, Options{Format: FormatAnthropic, Cache: c})
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range s1.Messages {
		m.Text = "changed"
		for _, o := range m.Outputs {
			o.Text, o.Tokens = "changed", -1
		}
		for _, c := range m.Calls {
			c.Name = "changed"
		}
	}
	s2, err := Read("body", data, Options{Format: FormatAnthropic, Cache: c})
	if err != nil {
		t.Fatal(err)
	}
	want, _ := readAnthropicFull("body", data, Options{})
	if d := bodyDiff(want, s2); d != "" {
		t.Errorf("second read (-want +got):\n%s", d)
	}
	if slices.ContainsFunc(s2.Messages, func(m *Message) bool { return m.Text == "changed" }) {
		t.Error("the first session's change reached the second")
	}
}

// bodyBig is an Anthropic body of n turns whose results are about 10 KB (some 2,700
// o200k tokens) each, unique to session s: 80 turns make about 850 KB.
func bodyBig(s, n int) []byte {
	return bodyHistory(n, func(k int) string {
		var b strings.Builder
		for i := range 120 {
			fmt.Fprintf(&b, "session %d output %d line %d: func parseExpr%d(tok Token) (*Node, error) { return nil, errEOF }\n", s, k, i, i)
		}
		return b.String()
	})
}

// BenchmarkReadBodyCached reads an 80-turn body (about 850 KB) through a warm
// MessageCache: "same" re-reads the same bytes (every message a hit); "next" reads
// the body with one more turn each time (two new messages and the one that lost its
// cache_control marker decoded, the new result tokenized).
func BenchmarkReadBodyCached(b *testing.B) {
	for _, next := range []bool{false, true} {
		name := "same"
		if next {
			name = "next"
		}
		b.Run(name, func(b *testing.B) {
			c := NewMessageCache(0)
			body := bodyBig(1, 80)
			if _, err := Read("body", body, Options{Format: FormatAnthropic, Cache: c}); err != nil {
				b.Fatal(err)
			}
			b.SetBytes(int64(len(body)))
			b.ReportAllocs()
			for i := 0; i < b.N; i++ {
				if next {
					b.StopTimer()
					body = bodyBig(1, 81+i%50)
					b.StartTimer()
				}
				if _, err := Read("body", body, Options{Format: FormatAnthropic, Cache: c}); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// msgDump renders an unlinked message as apiMessage builds it.
func msgDump(m *Message, prompt string) string {
	var b strings.Builder
	fmt.Fprintf(&b, "%s %q meta=%v prompt=%q\n", m.Role, m.Text, m.Meta, prompt)
	for _, c := range m.Calls {
		fmt.Fprintf(&b, "call %q %q %s\n", c.ID, c.Name, c.Args)
	}
	for _, o := range m.Outputs {
		fmt.Fprintf(&b, "output %q %q err=%v block=%d img=%v unit=%d %q\n", o.CallID, o.Text, o.IsError, o.Block, o.HasImage, o.unit, o.paths)
	}
	return b.String()
}

// TestAPIMessage checks apiMessage (the one decoder of a Messages API message, on
// jsonscan, for the fast and the full path) on every message of the bodies built
// from the real Claude Code sessions, which must all decode, and on edge cases, each
// with what the reader made of it when it decoded with encoding/json (recorded from
// that reader, before the fast and full paths shared one decoder): the same message,
// or the same error.
func TestAPIMessage(t *testing.T) {
	claude, _ := filepath.Glob(docReal("claude-code/*.jsonl"))
	n := 0
	for _, p := range claude {
		body := bodyFromClaude(t, p)
		gjson.GetBytes(body, "messages").ForEach(func(_, v gjson.Result) bool {
			n++
			if _, _, fe := apiMessage([]byte(v.Raw), "messages.3", 0); fe != nil {
				t.Errorf("%s: a real message fails (%v): %.200s", filepath.Base(p), fe, v.Raw)
			}
			return true
		})
	}
	if n < 1000 {
		t.Errorf("only %d messages checked", n)
	}
	edges := []struct{ in, want string }{
		{"{\"role\":\"user\",\"content\":\"a\\\"b\\\\c\\/d\\b\\f\\n\\r\\t\\u0041\\u00e9\\u2028\"}", "user \"a\\\"b\\\\c/d\\b\\f\\n\\r\\tAé\\u2028\" meta=false prompt=\"a\\\"b\\\\c/d\\b\\f\\n\\r\\tAé\\u2028\"\n"},
		{"{\"role\":\"user\",\"content\":\"\\ud83d\\ude00\"}", "user \"😀\" meta=false prompt=\"😀\"\n"},
		{"{\"role\":\"user\",\"content\":\"\\udc00\"}", "user \"�\" meta=false prompt=\"�\"\n"},
		{"{\"role\":\"user\",\"content\":\"bad \xff utf8\"}", "user \"bad � utf8\" meta=false prompt=\"bad � utf8\"\n"},
		{"{\"role\":\"user\",\"content\":null}", "user \"\" meta=false prompt=\"\"\n"},
		{"{\"role\":\"user\"}", "user \"\" meta=false prompt=\"\"\n"},
		{"{\"role\":\"assistant\",\"content\":[]}", "assistant \"\" meta=false prompt=\"\"\n"},
		{"{\"role\":\"user\",\"content\":3}", "error messages.3.content: content must be a string or an array of blocks"},
		{"{\"role\":\"system\",\"content\":\"x\"}", "error messages.3.role: role \"system\" is neither user nor assistant"},
		{"{\"role\":7,\"content\":\"x\"}", "error messages.3.role: role \"\" is neither user nor assistant"},
		{"{\"role\":\"user\",\"content\":\"x\",\"role\":\"assistant\"}", "error messages.3: a key occurs twice in the object"},
		{"{\"r\\u006fle\":\"user\",\"content\":\"x\"}", "user \"x\" meta=false prompt=\"x\"\n"},
		{"{\"role\":\"user\",\"content\":[{\"type\":\"text\",\"text\":null},{\"type\":\"text\"},{\"type\":\"text\",\"text\":3}]}", "error messages.3.content.2.text: expected a string, found JSON number"},
		{"{\"role\":\"user\",\"content\":[{\"type\":\"text\",\"text\":\"a\"},{\"text\":\"no type\"}]}", "error messages.3.content.1.type: content block has no type"},
		{"{\"role\":\"user\",\"content\":[{\"type\":\"\"}]}", "error messages.3.content.0.type: content block has no type"},
		{"{\"role\":\"user\",\"content\":[7]}", "error messages.3.content.0: expected a JSON object, found a JSON number"},
		{"{\"role\":\"assistant\",\"content\":[{\"type\":\"tool_use\",\"id\":\"t\",\"name\":\"R\",\"input\":{\"a\":[1, 2]}},{\"type\":\"tool_use\",\"id\":\"t\",\"name\":\"R\"},{\"type\":\"tool_use\",\"id\":\"u\",\"name\":null,\"input\":null}]}", "assistant \"\" meta=false prompt=\"\"\ncall \"t\" \"R\" {\"a\":[1, 2]}\ncall \"u\" \"\" null\n"},
		{"{\"role\":\"assistant\",\"content\":[{\"type\":\"tool_use\",\"name\":\"R\"}]}", "error messages.3.content.0.id: tool_use block without an id"},
		{"{\"role\":\"assistant\",\"content\":[{\"type\":\"tool_use\",\"id\":\"t\",\"name\":5}]}", "error messages.3.content.0.name: expected a string, found JSON number"},
		{"{\"role\":\"user\",\"content\":[{\"type\":\"tool_result\",\"tool_use_id\":\"t\",\"is_error\":true,\"content\":[{\"type\":\"text\",\"text\":\"a\"},{\"type\":\"image\",\"source\":{}},{\"type\":\"text\",\"text\":\"\"},{\"type\":\"text\",\"text\":null},{\"type\":\"text\"},{\"type\":\"document\"},{\"text\":\"untyped\"}]}]}", "tool \"\" meta=false prompt=\"\"\noutput \"t\" \"a\" err=true block=0 img=true unit=1 [\"messages.3.content.0.content.0.text\" \"messages.3.content.0.content.2.text\" \"messages.3.content.0.content.3.text\"]\n"},
		{"{\"role\":\"user\",\"content\":[{\"type\":\"tool_result\",\"tool_use_id\":\"t\",\"is_error\":\"yes\"}]}", "error messages.3.content.0.is_error: expected a boolean, found JSON string"},
		{"{\"role\":\"user\",\"content\":[{\"type\":\"tool_result\",\"tool_use_id\":\"t\",\"content\":{}}]}", "error messages.3.content.0.content: tool result content must be a string or an array of blocks"},
		{"{\"role\":\"user\",\"content\":[{\"type\":\"tool_result\",\"tool_use_id\":\"t\",\"content\":[{\"type\":\"text\",\"text\":{}}]}]}", "error messages.3.content.0.content.0.text: expected a string, found JSON object"},
		{"{\"role\":\"user\",\"content\":[{\"type\":\"tool_result\",\"content\":\"x\"}]}", "error messages.3.content.0.tool_use_id: tool_result block without a tool_use_id"},
		{"{\"role\":\"user\",\"content\":[{\"type\":\"tool_result\",\"tool_use_id\":\"t\",\"content\":[3]}]}", "error messages.3.content.0.content.0: expected a JSON object, found a JSON number"},
		{"{\"role\":\"user\",\"content\":[{\"type\":\"tool_result\",\"tool_use_id\":\"t\",\"content\":[{\"type\":7,\"text\":\"x\"}]}]}", "tool \"\" meta=false prompt=\"\"\noutput \"t\" \"\" err=false block=0 img=false unit=0 []\n"},
		{"{\"role\":\"user\",\"content\":[{\"type\":\"tool_result\",\"tool_use_id\":\"t\",\"is_error\":null,\"content\":null},{\"type\":\"text\",\"text\":\"<system-reminder>x</system-reminder>\"}]}", "user \"<system-reminder>x</system-reminder>\" meta=true prompt=\"\"\noutput \"t\" \"\" err=false block=0 img=false unit=0 []\n"},
		{"{\"role\":\"user\",\"content\":[{\"type\":\"text\",\"text\":\"a\",\"type\":\"text\"}]}", "error messages.3.content.0: a key occurs twice in the object"},
		{"{\"role\":\"user\",\"content\":[{\"type\":\"thinking\",\"thinking\":\"x\",\"signature\":\"y\"},{\"type\":\"text\",\"text\":\"hi\"}]}", "user \"hi\" meta=false prompt=\"hi\"\n"},
		{" {\"role\":\"user\",\"content\":\"x\"}", "user \"x\" meta=false prompt=\"x\"\n"},
		{"{\"role\":\"user\",\"content\":\"x\"", "error messages.3: invalid JSON: unexpected end of input (truncated?)"},
		{"[]", "error messages.3: expected a JSON object, found a JSON array"},
	}
	for _, e := range edges {
		m, prompt, fe := apiMessage([]byte(e.in), "messages.3", 0)
		got := ""
		if fe != nil {
			got = "error " + fe.Field + ": " + fe.Msg
		} else {
			got = msgDump(m, prompt)
		}
		if got != e.want {
			t.Errorf("%s:\ngot  %q\nwant %q", e.in, got, e.want)
		}
	}
}
