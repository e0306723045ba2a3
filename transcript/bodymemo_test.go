package transcript

import (
	"bytes"
	"errors"
	"fmt"
	"path/filepath"
	"strings"
	"sync"
	"testing"
)

// memoCheck reads prev and then next through one cache (so next meets prev's
// memory) and checks that next reads, fails and rewrites exactly as it does read
// afresh (no cache); it returns the session read through the cache (nil on error).
func memoCheck(t *testing.T, c *MessageCache, prev, next []byte) *Session {
	t.Helper()
	return memoCheckMode(t, c, prev, next, false)
}

// memoCheckMode is memoCheck; with recycle, prev's session is given back
// (Session.Recycle) before next is read, so that next takes its messages from it
// where it can (carry.go). A next of even length is read through a PrefixFeed
// given it in one to five pieces (feedBody), as a proxy reads a body off a socket.
func memoCheckMode(t *testing.T, c *MessageCache, prev, next []byte, recycle bool) *Session {
	t.Helper()
	if prev != nil {
		p, err := Read("body", prev, Options{Format: FormatAnthropic, Cache: c})
		if recycle && err == nil {
			p.Recycle()
		}
	}
	want, wantErr := Read("body", next, Options{Format: FormatAnthropic})
	var feed *PrefixFeed
	if len(next)%2 == 0 {
		feed = feedBody(c, next, 1+len(next)/2%5)
	}
	got, err := Read("body", next, Options{Format: FormatAnthropic, Cache: c, Prefix: feed})
	if fmt.Sprint(err) != fmt.Sprint(wantErr) {
		t.Fatalf("error %v; read afresh %v", err, wantErr)
	}
	if wantErr != nil {
		return nil
	}
	if d := bodyDiff(want, got); d != "" {
		t.Fatalf("session differs (-fresh +memory):\n%s", d)
	}
	for _, rw := range bodyRewrites(want) {
		for range 2 { // the second time from the memory's patches
			out, err := got.Rewrite(rw.stubs)
			if fmt.Sprint(err) != fmt.Sprint(rw.err) {
				t.Fatalf("Rewrite errors differ: fresh %v, memory %v", rw.err, err)
			}
			if !bytes.Equal(out, rw.out) {
				t.Fatalf("Rewrite (%d stubs) differs:\nfresh  %s\nmemory %s", len(rw.stubs), clipBytes(rw.out), clipBytes(out))
			}
		}
	}
	return got
}

// feedBody gives body to a new feed of c in n pieces of about equal length, as
// the reads of a socket would.
func feedBody(c *MessageCache, body []byte, n int) *PrefixFeed {
	f := c.NewPrefixFeed()
	for i := 1; i <= n; i++ {
		f.Add(body[:len(body)*i/n])
	}
	return f
}

// resumed is how many messages of the body's messages array the session took from
// a recycled session, -1 when it was not recorded in a body memory.
func resumed(s *Session) int {
	if s == nil || s.memo == nil {
		return -1
	}
	return s.memo.resumed
}

// reused is how many messages the session took from a body memory, -1 when it was
// not recorded in one.
func reused(s *Session) int {
	if s == nil || s.memo == nil {
		return -1
	}
	return s.memo.reused
}

// The body memory reads the next body of a conversation as a fresh read does
// whatever changed between the two: the usual next turn, a resend, a moved
// cache_control marker, an edited or shortened history, a change after the
// messages, another conversation with the same first message, broken JSON; and it
// takes the unchanged messages from the memory where it should.
func TestBodyMemoMatchesFresh(t *testing.T) {
	base := bodyHistory(6, nil)
	replace := func(b []byte, old, new string) []byte {
		t.Helper()
		if !bytes.Contains(b, []byte(old)) {
			t.Fatalf("%q not in the body", old)
		}
		return bytes.Replace(b, []byte(old), []byte(new), 1)
	}
	other := bodyHistory(6, func(k int) string {
		return fmt.Sprintf("another conversation's output %d\n", k) + strings.Repeat("x", 300)
	})
	// dup gives call t2 the id t1: a repeated call id, and t2's result an orphan.
	dup := func(b []byte) []byte { return replace(b, `"id":"t2"`, `"id":"t1"`) }
	// orphan6 makes t6's result name no call.
	orphan6 := func(b []byte) []byte { return replace(b, `"tool_use_id":"t6"`, `"tool_use_id":"t9"`) }
	moved := func(b []byte) []byte {
		return replace(replace(b, `,"cache_control":{"type":"ephemeral"}}]}]`, `}]}]`), `"text":"Step 2."}`, `"text":"Step 2.","cache_control":{"type":"ephemeral"}}`)
	}
	tests := []struct {
		name       string
		prev, next []byte
		reused     int // messages taken from the memory (the system value is not one); -1 when the session is not recorded in one
	}{
		{"next turn", base, bodyHistory(7, nil), 12},
		{"resent", base, base, 13},
		{"first read", nil, base, 0},
		{"moved cache_control", base, replace(replace(base, `,"cache_control":{"type":"ephemeral"}}]}]`, `}]}]`), `"text":"Step 2."}`, `"text":"Step 2.","cache_control":{"type":"ephemeral"}}`), 3},
		{"edited earlier message", base, replace(base, "line of output 4\\n", "line of output 4!\\n"), 8},
		{"edited first message", base, replace(base, "Fix the bug.", "Fix the bug!"), 0},
		{"changed system", base, replace(base, "Be brief.", "Be brief!"), 0},
		{"changed after the messages", base, replace(base, `"stream":true`, `"stream":false`), 0},
		{"key added after the messages", base, replace(base, `"stream":true}`, `"stream":true,"metadata":{}}`), 0},
		{"repeated key after the messages", base, replace(base, `"stream":true}`, `"stream":true,"model":"n"}`), -1},
		{"shortened history", bodyHistory(7, nil), bodyHistory(3, nil), 6},
		{"shortened to one message", base, []byte(`{"model":"m","max_tokens":100,"system":[{"type":"text","text":"Be brief.","cache_control":{"type":"ephemeral"}}],"messages":[{"role":"user","content":"Fix the bug."}],"stream":true}`), 1},
		{"same first message, other conversation", base, other, 2},
		{"broken tail of the same length", base, replace(base, `"stream":true}`, `"stream":tr1e}`), -1},
		{"broken tail", base, replace(base, `"stream":true}`, `"stream":tru}`), -1},
		{"broken message", base, replace(base, `"name":"Read","input":{"file_path":"/f6.go"}}`, `"name":"Read","input":{"file_path":"/f6.go"}`), -1},
		{"text after the body", base, append(bytes.Clone(base), " x"...), -1},
		{"blanks after the body", base, append(bytes.Clone(base), " \n"...), 0},
		{"repeated call id and an orphan, next turn", dup(base), dup(bodyHistory(7, nil)), 12},
		{"repeated call id in a changed message", dup(base), dup(moved(base)), 3},
		{"orphan in the changed message", orphan6(base), orphan6(bodyHistory(7, nil)), 12},
		{"task from a changed message", taskBody("Fix A."), taskBody("Fix B."), 2},
		{"last call left unanswered", base, bytes.Replace(base, base[bytes.LastIndex(base, []byte(`,{"role":"user"`)):len(base)-len(`],"stream":true}`)], []byte(`,{"role":"user","content":"Stop."}`), 1), 12},
	}
	for _, tt := range tests {
		for _, recycle := range []bool{false, true} {
			name := tt.name
			if recycle {
				name += "/recycled"
			}
			t.Run(name, func(t *testing.T) {
				c := NewMessageCache(0)
				s := memoCheckMode(t, c, tt.prev, tt.next, recycle)
				if got := reused(s); got != tt.reused {
					t.Errorf("%d messages from the memory; want %d", got, tt.reused)
				}
				wantResumed := max(tt.reused, 0)
				if !recycle || tt.reused < 0 {
					wantResumed = min(tt.reused, 0)
				}
				if got := resumed(s); got != wantResumed {
					t.Errorf("%d messages from the recycled session; want %d", got, wantResumed)
				}
				// The memory now holds next: the same body again reads as it should.
				if s != nil && tt.reused >= 0 {
					n := len(s.Messages) // the array's messages
					if s.Messages[0].Role == RoleSystem {
						n--
					}
					if recycle {
						s.Recycle()
					}
					s = memoCheckMode(t, c, nil, tt.next, recycle)
					if reused(s) != n {
						t.Errorf("resent: %d messages from the memory; want %d", reused(s), n)
					}
					if want := map[bool]int{false: 0, true: n}[recycle]; resumed(s) != want {
						t.Errorf("resent: %d messages from the recycled session; want %d", resumed(s), want)
					}
				}
			})
		}
	}
}

// taskBody is a body whose first user message is injected context only, so the
// session's task comes from its last message, prompt.
func taskBody(prompt string) []byte {
	return []byte(`{"model":"m","max_tokens":100,"messages":[{"role":"user","content":"<system-reminder>Context.</system-reminder>"},` +
		`{"role":"assistant","content":[{"type":"text","text":"Ready."}]},{"role":"user","content":[{"type":"text","text":"` + prompt + `","cache_control":{"type":"ephemeral"}}]}]}`)
}

// Every single changed byte, anywhere in the body (inside strings, on brackets,
// commas and keys), read after the original through one cache, reads as a fresh
// read does; and so does the original after it.
func TestBodyMemoEveryByte(t *testing.T) {
	body := bodyHistory(2, func(k int) string { return fmt.Sprintf("out %d \"q\" \\ é", k) })
	c := NewMessageCache(0)
	for i := range body {
		for _, b := range []byte{'x', '"', '}', ' '} {
			if body[i] == b {
				continue
			}
			next := bytes.Clone(body)
			next[i] = b
			recycle := i%2 == 0 // half the bodies read after the previous one's recycled session
			memoCheckMode(t, c, body, next, recycle)
			memoCheckMode(t, c, next, body, recycle)
		}
	}
	if st := c.Stats(); st.Conversations == 0 || st.MemoBytes <= 0 {
		t.Errorf("stats %+v: no memory kept", st)
	}
}

// Real bodies (each real Claude Code session as a request body), read as a growing
// conversation through one cache, read as afresh at every step, and from the
// second on take all but the changed tail from the memory.
func TestBodyMemoRealSessions(t *testing.T) {
	claude, _ := filepath.Glob(docReal("claude-code/*.jsonl"))
	if len(claude) == 0 {
		t.Fatal("no real sessions")
	}
	for _, recycle := range []bool{false, true} {
		c := NewMessageCache(0)
		for _, p := range claude {
			full := bodyFromClaude(t, p)
			steps := bodyPrefixes(t, full, 6)
			for i, body := range steps {
				s := memoCheckMode(t, c, nil, body, recycle)
				if i > 0 && s != nil && reused(s) <= 0 {
					t.Errorf("%s step %d: nothing taken from the memory", filepath.Base(p), i)
				}
				if i > 0 && s != nil && recycle && resumed(s) != reused(s) {
					t.Errorf("%s step %d: %d of %d messages from the recycled session", filepath.Base(p), i, resumed(s), reused(s))
				}
				if recycle && s != nil {
					s.Recycle()
				}
			}
		}
	}
}

// bodyPrefixes cuts an Anthropic body into n bodies of growing message prefixes,
// the way a conversation grows.
func bodyPrefixes(t *testing.T, body []byte, n int) [][]byte {
	t.Helper()
	sc, _, _ := scanAnthropicBody(body, nil, nil)
	if sc == nil {
		t.Fatal("the fast path declines the body")
	}
	var out [][]byte
	for i := 1; i <= n; i++ {
		k := len(sc.elems) * i / n
		if k == 0 {
			continue
		}
		var b bytes.Buffer
		b.Write(body[:sc.elems[k-1].End])
		b.Write(body[sc.parts.messages.End-1:])
		out = append(out, b.Bytes())
	}
	return out
}

// A memory is bounded: a cache whose share cannot hold a body keeps no memory of it,
// and many conversations keep the memory within its share.
func TestBodyMemoBounded(t *testing.T) {
	c := NewMessageCache(1 << 20)
	for s := range 20 {
		sess, err := Read("body", bodyBig(s, 4), Options{Format: FormatAnthropic, Cache: c})
		if err != nil {
			t.Fatal(err)
		}
		if s%2 == 0 {
			sess.Recycle() // held by the memory, within its share
		}
		st := c.Stats()
		if st.MemoBytes > c.memoMax || st.Bytes > 1<<20 {
			t.Fatalf("after %d bodies: %+v; memory share %d, bound %d", s+1, st, c.memoMax, 1<<20)
		}
	}
	if st := c.Stats(); st.Conversations < 2 {
		t.Errorf("%+v: want the memories of several conversations", st)
	}
	small := NewMessageCache(64 << 10)
	if _, err := Read("body", bodyBig(1, 4), Options{Format: FormatAnthropic, Cache: small}); err != nil {
		t.Fatal(err)
	}
	if st := small.Stats(); st.Conversations != 0 {
		t.Errorf("%+v: a body over the share was kept", st)
	}
}

// FuzzBodyMemo reads two bodies through one cache, the second after the first, and
// checks the second reads as it does afresh.
func FuzzBodyMemo(f *testing.F) {
	f.Add(bodyHistory(2, nil), bodyHistory(3, nil))
	f.Add(bodyHistory(3, nil), bodyHistory(2, nil))
	f.Add(bodyHistory(2, nil), bytes.Replace(bodyHistory(2, nil), []byte("Step 1"), []byte("Step 9"), 1))
	f.Fuzz(func(t *testing.T, prev, next []byte) {
		memoCheck(t, NewMessageCache(0), prev, next)
		memoCheckMode(t, NewMessageCache(0), prev, next, true)
	})
}

// The stubs of the previous request come back from the memory: a rewrite of the
// next body with the same stubs (and one more) asks the cache only about the
// message that got the new stub, and writes what a fresh read's rewrite writes.
func TestBodyMemoRewriteReuses(t *testing.T) {
	c := NewMessageCache(0)
	prev, next := bodyHistory(6, nil), bodyHistory(7, nil)
	stubs := map[string]string{"t1": "[pruned 1]", "t3": "[pruned 3]"}
	s, err := Read("body", prev, Options{Format: FormatAnthropic, Cache: c})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.Rewrite(stubs); err != nil {
		t.Fatal(err)
	}
	s, err = Read("body", next, Options{Format: FormatAnthropic, Cache: c})
	if err != nil {
		t.Fatal(err)
	}
	stubs["t5"] = "[pruned 5]"
	before := c.Stats()
	got, err := s.Rewrite(stubs)
	if err != nil {
		t.Fatal(err)
	}
	after := c.Stats()
	if n := after.Hits + after.Misses - before.Hits - before.Misses; n != 1 {
		t.Errorf("%d cache lookups for 3 stubbed messages, 2 of them stubbed alike before; want 1", n)
	}
	fresh, err := Read("body", next, Options{Format: FormatAnthropic})
	if err != nil {
		t.Fatal(err)
	}
	want, err := fresh.Rewrite(stubs)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, want) {
		t.Errorf("rewrite differs:\nfresh  %s\nmemory %s", clipBytes(want), clipBytes(got))
	}
}

// The parts RewriteParts gives share memory with the session and the body memory;
// they must hold the same bytes after a rewrite with other stubs (which replaces
// the patched messages the memory keeps), after ReleaseBytes and after the
// conversation's next body is read and rewritten, since the proxy forwards them while other
// requests of the conversation go on.
func TestRewritePartsStayValid(t *testing.T) {
	c := NewMessageCache(0)
	prev, next := bodyHistory(6, nil), bodyHistory(7, nil)
	s, err := Read("body", prev, Options{Format: FormatAnthropic, Cache: c})
	if err != nil {
		t.Fatal(err)
	}
	stubs := map[string]string{"t1": "[pruned 1]", "t3": "[pruned 3]"}
	if _, err := s.Rewrite(stubs); err != nil { // the memory keeps the patched messages
		t.Fatal(err)
	}
	parts, err := s.RewriteParts(stubs) // and these parts hold them
	if err != nil {
		t.Fatal(err)
	}
	if len(parts) < 3 {
		t.Fatalf("%d parts for 2 stubbed messages; want the bytes between them as parts of their own", len(parts))
	}
	want, err := s.Rewrite(stubs)
	if err != nil {
		t.Fatal(err)
	}
	if got := bytes.Join(parts, nil); !bytes.Equal(got, want) {
		t.Fatalf("parts join to\n%s\nwant\n%s", clipBytes(got), clipBytes(want))
	}
	if _, err := s.Rewrite(map[string]string{"t1": "[again 1]", "t3": "[again 3]"}); err != nil {
		t.Fatal(err)
	}
	if got := bytes.Join(parts, nil); !bytes.Equal(got, want) {
		t.Errorf("parts changed after a rewrite with other stubs:\n%s\nwant\n%s", clipBytes(got), clipBytes(want))
	}
	s.ReleaseBytes()
	n, err := Read("body", next, Options{Format: FormatAnthropic, Cache: c})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := n.Rewrite(map[string]string{"t1": "[other 1]", "t3": "[other 3]", "t5": "[pruned 5]"}); err != nil {
		t.Fatal(err)
	}
	if got := bytes.Join(parts, nil); !bytes.Equal(got, want) {
		t.Errorf("parts changed after the next rewrite:\n%s\nwant\n%s", clipBytes(got), clipBytes(want))
	}
	if got, err := n.RewriteParts(nil); err != nil || len(got) != 1 || !bytes.Equal(got[0], next) {
		t.Errorf("RewriteParts(nil) = %d parts, %v; want the body as one part", len(got), err)
	}
}

// A rewrite of the next body with the previous request's stubs, all in messages the
// two bodies share, is made from the memory's last rewrite; any other stubs, or a
// stub in a message that changed, are rewritten as usual; the bytes are a fresh
// read's rewrite either way.
func TestRepeatRewrite(t *testing.T) {
	stubsOf := func(keys ...string) map[string]string {
		m := map[string]string{}
		for _, k := range keys {
			m[k] = "[pruned " + k + "]"
		}
		return m
	}
	changed := stubsOf("t1", "t2", "t4")
	changed["t4"] = "[pruned t4, said otherwise]"
	base := stubsOf("t1", "t2", "t4")
	tests := []struct {
		name        string
		prev, stubs map[string]string // the previous body's stubs, the next one's
		repeat      bool
	}{
		{"same stubs", base, base, true},
		{"a stub in the message that lost cache_control", stubsOf("t1", "t6"), stubsOf("t1", "t6"), false},
		{"one more stub", base, stubsOf("t1", "t2", "t4", "t5"), false},
		{"one stub fewer", base, stubsOf("t1", "t2"), false},
		{"a stub's text changed", base, changed, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			for _, recycle := range []bool{false, true} {
				c := NewMessageCache(0)
				opts := Options{Format: FormatAnthropic, Cache: c}
				prev, err := Read("body", bodyHistory(6, nil), opts)
				if err != nil {
					t.Fatal(err)
				}
				if _, err := prev.Rewrite(tt.prev); err != nil {
					t.Fatal(err)
				}
				if recycle {
					prev.Recycle()
				}
				next := bodyHistory(7, nil)
				got, err := Read("body", next, opts)
				if err != nil {
					t.Fatal(err)
				}
				fresh, err := Read("body", next, Options{Format: FormatAnthropic})
				if err != nil {
					t.Fatal(err)
				}
				want, err := fresh.Rewrite(tt.stubs)
				if err != nil {
					t.Fatal(err)
				}
				for i := range 2 { // the second time from the rewrite just made
					out, err := got.Rewrite(tt.stubs)
					if err != nil || !bytes.Equal(out, want) {
						t.Fatalf("recycle %v, rewrite %d: %v\n%s\nwant\n%s", recycle, i, err, clipBytes(out), clipBytes(want))
					}
					if wantRepeats := map[bool]int{false: i, true: i + 1}[tt.repeat]; got.memo.repeats != wantRepeats {
						t.Errorf("recycle %v, rewrite %d: %d rewrites from the memory's last one; want %d", recycle, i, got.memo.repeats, wantRepeats)
					}
				}
			}
		})
	}
}

// A recycled session's messages are the next read's, as they are; the recycled
// session itself no longer rewrites; the memory accounts for what it holds until
// the next read takes it; a session read without a cache recycles to nothing.
func TestRecycle(t *testing.T) {
	c := NewMessageCache(0)
	opts := Options{Format: FormatAnthropic, Cache: c}
	s1, err := Read("body", bodyHistory(6, nil), opts)
	if err != nil {
		t.Fatal(err)
	}
	before := c.Stats().MemoBytes
	kept := s1.Messages[5] // array message 4: byte-identical in the next body
	size := recycledBytes(s1, s1.carry)
	s1.Recycle()
	s1.Recycle()
	if got := c.Stats().MemoBytes - before; got != size {
		t.Errorf("the memory grew by %d bytes with the recycled session; want %d", got, size)
	}
	if _, err := s1.Rewrite(map[string]string{"t1": "[pruned]"}); !errors.Is(err, ErrReleased) {
		t.Errorf("Rewrite after Recycle: %v; want ErrReleased", err)
	}
	s2, err := Read("body", bodyHistory(7, nil), opts)
	if err != nil {
		t.Fatal(err)
	}
	if s2.Messages[5] != kept {
		t.Error("the next read did not take the recycled session's message")
	}
	if resumed(s2) != 12 {
		t.Errorf("%d messages from the recycled session; want 12", resumed(s2))
	}
	if c.Stats().MemoBytes >= before+size {
		t.Errorf("memory %d bytes after the read took the recycled session; want less than %d", c.Stats().MemoBytes, before+size)
	}
	fresh, err := Read("body", bodyHistory(6, nil), Options{Format: FormatAnthropic})
	if err != nil {
		t.Fatal(err)
	}
	fresh.Recycle()
	if _, err := fresh.Rewrite(map[string]string{"t1": "[pruned]"}); !errors.Is(err, ErrReleased) {
		t.Errorf("Rewrite after Recycle without a cache: %v; want ErrReleased", err)
	}
}

// A read that takes a recycled session looks the taken messages' templates up in
// the cache only every touchEvery-th time, so the cache keeps counting them.
func TestRecycleTouchesTemplates(t *testing.T) {
	c := NewMessageCache(0)
	var lookups []int64
	for n := 2; n <= 2+2*touchEvery; n++ {
		before := c.Stats()
		s, err := Read("body", bodyHistory(n, nil), Options{Format: FormatAnthropic, Cache: c})
		if err != nil {
			t.Fatal(err)
		}
		after := c.Stats()
		lookups = append(lookups, after.Hits+after.Misses-before.Hits-before.Misses)
		s.Recycle()
	}
	for i, l := range lookups[1:] { // the first read took nothing
		// The new turn and the message that lost its marker are looked up each time
		// (3); the taken ones (the previous body's 2n-1 array messages less the one
		// that lost its marker, n = i+3 turns now) every touchEvery-th read.
		want := int64(3)
		if (i+1)%touchEvery == 0 {
			want += int64(2*(i+3) - 2)
		}
		if l != want {
			t.Errorf("read %d: %d cache lookups; want %d", i+2, l, want)
		}
	}
}

// Reads and rewrites of the same conversations from several goroutines at once
// (run with -race) read and rewrite as fresh reads do.
func TestBodyMemoConcurrent(t *testing.T) {
	c := NewMessageCache(0)
	var wg sync.WaitGroup
	for g := range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for n := 1; n <= 8; n++ {
				body := bodyBig(g%2, n) // two goroutines per conversation
				want, err := Read("body", body, Options{Format: FormatAnthropic})
				if err != nil {
					t.Error(err)
					return
				}
				got, err := Read("body", body, Options{Format: FormatAnthropic, Cache: c})
				if err != nil {
					t.Error(err)
					return
				}
				if d := bodyDiff(want, got); d != "" {
					t.Errorf("goroutine %d body %d (-fresh +memory):\n%s", g, n, d)
					return
				}
				stubs := map[string]string{}
				for i, o := range want.Outputs() {
					if i%2 == 0 {
						stubs[o.Key] = "[pruned " + o.Key + "]"
					}
				}
				w, err := want.Rewrite(stubs)
				if err != nil {
					t.Errorf("goroutine %d body %d: fresh rewrite: %v", g, n, err)
					return
				}
				o, err := got.Rewrite(stubs)
				if err != nil {
					t.Errorf("goroutine %d body %d: memoised rewrite: %v", g, n, err)
					return
				}
				if len(stubs) == 0 || bytes.Equal(w, body) || !bytes.Equal(w, o) {
					t.Errorf("goroutine %d body %d: rewrite differs, or stubbed nothing (%d stubs)", g, n, len(stubs))
					return
				}
				if g >= 2 { // one goroutine of each conversation gives its sessions back
					got.Recycle()
				}
			}
		}()
	}
	wg.Wait()
}
