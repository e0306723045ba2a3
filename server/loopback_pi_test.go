package server_test

import (
	"github.com/pruneadvisor/pruneadvisor/internal/sessionfiles"

	"bufio"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/tidwall/gjson"
)

// piSessionFile is the real pi session the loopback benchmark's pi- cases build
// their bodies from (relative to the server package's folder): 938 Anthropic
// messages once converted, 1.6 MB of them.
const piSessionFile = "../../shared/sessions/pi/before-compaction.jsonl"

// piBodyBytes is how large a pi- case's first body is at least: bigSession's 80
// turns (844 KB), about 200,000 tokens.
const piBodyBytes = 830_000

// piSessionMark is where a piSession writes its number: at the start of every tool
// result's first text, so that each session's outputs are unique (no cache of an
// earlier session's texts helps), as bigSession's are.
const piSessionMark = "\x00session\x00"

// The pi session of piSessionFile, read once by loadPi: piMessages holds its
// messages as Anthropic Messages messages (piToAnthropic), each cut at the session
// marks; piFirst is how many make the first body; piErr is why they could not be
// read.
var (
	piOnce     sync.Once
	piMessages [][]string
	piFirst    int
	piErr      error
	piMarkJSON = func() string { q, _ := json.Marshal(piSessionMark); return string(q[1 : len(q)-1]) }()
)

// loadPi reads the pi session once: piMessages, and piFirst, the fewest messages
// that make at least piBodyBytes and end in a user message.
func loadPi() error {
	piOnce.Do(func() {
		msgs, err := piToAnthropic(filepath.FromSlash(piSessionFile))
		if err != nil {
			piErr = err
			return
		}
		size := 0
		for i, m := range msgs {
			piMessages = append(piMessages, strings.Split(m, piMarkJSON))
			size += len(m) + 1
			if piFirst == 0 && size >= piBodyBytes && strings.HasPrefix(m, `{"role":"user"`) {
				piFirst = i + 1
			}
		}
		if piFirst == 0 || piFirst+2*loopPerSession > len(msgs) {
			piErr = fmt.Errorf("%s: %d messages (%d bytes): too few for the pi cases", piSessionFile, len(msgs), size)
		}
	})
	return piErr
}

// piToAnthropic converts a pi session (JSON Lines, TRANSCRIPT-FORMATS.md) into the
// messages of the Messages API request that would carry its history: user text,
// assistant text and tool calls (tool_use with the call's arguments as input), and
// each toolResult as a tool_result block (its text blocks, is_error) of a user
// message. Consecutive messages of one role are merged into one, so roles alternate
// as the API requires. Thinking blocks, images, aborted empty assistant messages
// and pi's own entries (bashExecution, model changes) are left out. Every message
// ends in `}]}` (the last block's closing, the content's, the message's), so a
// marker can go before them.
func piToAnthropic(path string) ([]string, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	type message struct {
		role   string
		blocks []string
	}
	var msgs []message
	sc := bufio.NewScanner(f)
	sc.Buffer(nil, 64<<20)
	for line := 1; sc.Scan(); line++ {
		m := gjson.GetBytes(sc.Bytes(), "message")
		if gjson.GetBytes(sc.Bytes(), "type").String() != "message" || !m.IsObject() {
			continue
		}
		role, blocks, err := piBlocks(m)
		if err != nil {
			return nil, fmt.Errorf("%s:%d: %w", path, line, err)
		}
		if len(blocks) == 0 {
			continue
		}
		if n := len(msgs); n > 0 && msgs[n-1].role == role {
			msgs[n-1].blocks = append(msgs[n-1].blocks, blocks...)
			continue
		}
		msgs = append(msgs, message{role, blocks})
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	out := make([]string, len(msgs))
	for i, m := range msgs {
		out[i] = `{"role":"` + m.role + `","content":[` + strings.Join(m.blocks, ",") + `]}`
	}
	return out, nil
}

// piBlocks returns the Anthropic role and content blocks of one pi message (none
// for a role the API has no place for).
func piBlocks(m gjson.Result) (string, []string, error) {
	quote := func(s string) string { q, _ := json.Marshal(s); return string(q) }
	var blocks []string
	switch m.Get("role").String() {
	case "user":
		if c := m.Get("content"); c.Type == gjson.String {
			return "user", []string{`{"type":"text","text":` + quote(c.String()) + `}`}, nil
		}
		for _, b := range m.Get("content").Array() {
			if b.Get("type").String() == "text" {
				blocks = append(blocks, `{"type":"text","text":`+quote(b.Get("text").String())+`}`)
			}
		}
		return "user", blocks, nil
	case "assistant":
		for _, b := range m.Get("content").Array() {
			switch b.Get("type").String() {
			case "text":
				blocks = append(blocks, `{"type":"text","text":`+quote(b.Get("text").String())+`}`)
			case "toolCall":
				input := b.Get("arguments").Raw
				if !b.Get("arguments").IsObject() {
					input = "{}"
				}
				blocks = append(blocks, `{"type":"tool_use","id":`+quote(b.Get("id").String())+`,"name":`+quote(b.Get("name").String())+`,"input":`+input+`}`)
			}
		}
		return "assistant", blocks, nil
	case "toolResult":
		var texts []string
		for _, b := range m.Get("content").Array() {
			if b.Get("type").String() == "text" {
				texts = append(texts, `{"type":"text","text":`+quote(piSessionMark+b.Get("text").String())+`}`)
			}
		}
		if len(texts) == 0 {
			texts = []string{`{"type":"text","text":` + quote(piSessionMark) + `}`}
		}
		id := m.Get("toolCallId").String()
		if id == "" {
			return "", nil, fmt.Errorf("toolResult without a toolCallId")
		}
		return "user", []string{`{"type":"tool_result","tool_use_id":` + quote(id) + `,"content":[` +
			strings.Join(texts, ",") + `],"is_error":` + strconv.FormatBool(m.Get("isError").Bool()) + `}`}, nil
	}
	return "", nil, nil
}

// piSession builds the request bodies of session s of the pi session: its first
// piFirst messages are the first body (at least piBodyBytes, ending in a user
// message), and each later body has two messages more (an assistant turn and the
// user message of its results). Every tool result starts with "[session S] ". The
// last message's last block carries a cache_control marker, which moves on with
// the next body, as Claude Code's does.
type piSession struct {
	s   int
	num string // "[session S] "
	buf []byte // reuse's buffer
}

// newPiSession returns session s of the pi session, or skips tb when the session
// file cannot be read (the pi- cases need ../shared beside the repository).
func newPiSession(tb testing.TB, s int) *piSession {
	if err := loadPi(); err != nil {
		tb.Skipf("the pi cases' session: %v", err)
	}
	p := &piSession{}
	p.renumber(s)
	return p
}

// renumber makes p session s, keeping its buffer.
func (p *piSession) renumber(s int) { p.s, p.num = s, fmt.Sprintf("[session %d] ", s) }

// reuse returns the body of the session's request step (0: the first) in the
// session's buffer, which the next call overwrites, writing the session's number
// in as it goes (so that building a body makes no garbage beyond the buffer's
// growth).
func (p *piSession) reuse(step int) []byte {
	const marker, closing = `,"cache_control":{"type":"ephemeral"}`, `}]}`
	n := piFirst + 2*step
	dst := append(p.buf[:0], bigHead[:strings.Index(bigHead, `"messages":[`)]...)
	dst = append(dst, `"messages":[`...)
	for i, parts := range piMessages[:n] {
		if i > 0 {
			dst = append(dst, ',')
		}
		for j, part := range parts {
			if j > 0 {
				dst = append(dst, p.num...)
			}
			dst = append(dst, part...)
		}
	}
	dst = append(dst[:len(dst)-len(closing)], marker...) // every message ends in closing
	dst = append(dst, closing...)
	p.buf = append(dst, `]}`...)
	return p.buf
}

// benchLoopPiCold is BenchmarkLoopback200k/pi-cold: the first request of a session
// built from the real pi session, a new session each time.
func benchLoopPiCold(b *testing.B, env *loopEnv) {
	sess := newPiSession(b, 0)
	h := env.harness(b)
	for i := 0; i < b.N; i++ {
		sess.renumber(int(coldSessions.Add(1)))
		h.step(b, fmt.Sprintf("loop-pi-cold-%d", sess.s), sess.reuse(0))
	}
	h.report(b)
}

// benchLoopPiSteady is BenchmarkLoopback200k/pi-steady: requests 2 to 21 of
// sessions built from the real pi session, two messages more each, split by
// whether serve applied a rewrite (rewriteSplit), as the steady cases are.
func benchLoopPiSteady(b *testing.B, env *loopEnv) {
	newPiSession(b, 0)
	h := env.harness(b)
	var split rewriteSplit
	var sess *piSession
	var id string
	for i := 0; i < b.N; i++ {
		if i%loopPerSession == 0 {
			sess = newPiSession(b, int(coldSessions.Add(1)))
			id = fmt.Sprintf("loop-pi-steady-%d", sess.s)
			h.untimed(b, id, sess.reuse(0))
		}
		split.step(b, h, id, sess.reuse(1+i%loopPerSession))
	}
	h.report(b)
	split.report(b)
	_, stubs := h.up.counts(routeServe)
	b.ReportMetric(float64(stubs), "stubs")
}

// The pi session converts into a Messages history the proxy reads as such: every
// toolResult line of the file (448, 12 of them errors, counted with a separate
// script) is a tool_result block after the tool_use of its id, roles alternate,
// and the first body and the last steady one are valid JSON with the
// cache_control marker on their last message only.
func TestPiToAnthropic(t *testing.T) {
	msgs, err := piToAnthropic(filepath.FromSlash(piSessionFile))
	if os.IsNotExist(err) {
		sessionfiles.Missing(t, "%s: not beside the repository", piSessionFile)
	}
	if err != nil {
		t.Fatal(err)
	}
	results, errs := 0, 0
	calls := map[string]bool{}
	for i, m := range msgs {
		if !json.Valid([]byte(m)) || !strings.HasSuffix(m, "}]}") {
			t.Fatalf("message %d is not a JSON message ending in }]}: %.200s", i, m)
		}
		role := gjson.Get(m, "role").String()
		if want := []string{"user", "assistant"}[i%2]; role != want {
			t.Fatalf("message %d is %s; want %s (roles alternate from user)", i, role, want)
		}
		for _, b := range gjson.Get(m, "content").Array() {
			switch b.Get("type").String() {
			case "tool_use":
				calls[b.Get("id").String()] = true
			case "tool_result":
				results++
				if b.Get("is_error").Bool() {
					errs++
				}
				if id := b.Get("tool_use_id").String(); !calls[id] {
					t.Errorf("message %d: tool_result for %s before its tool_use", i, id)
				}
			}
		}
	}
	if results != 448 || errs != 12 {
		t.Errorf("%d tool results, %d errors; want 448 and 12", results, errs)
	}
	p := newPiSession(t, 7)
	for _, step := range []int{0, loopPerSession} {
		body := p.reuse(step)
		if !json.Valid(body) {
			t.Fatalf("step %d: the body is not valid JSON", step)
		}
		if n := strings.Count(string(body), `"cache_control"`); n != 2 { // bigHead's system prompt and the last message
			t.Errorf("step %d: %d cache_control markers; want 2", step, n)
		}
		if !strings.Contains(string(body), "[session 7] ") || len(body) < piBodyBytes {
			t.Errorf("step %d: %d bytes, session mark present %v", step, len(body), strings.Contains(string(body), "[session 7] "))
		}
	}
}
