package transcript

import (
	"bytes"
	"encoding/json"
	"hash/maphash"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"unicode/utf8"
)

// Request bodies (formats anthropic and openai) are what the proxy reads on every
// model call, and each call re-sends the whole history. Both readers therefore take
// a fast path first: one scan over the body finds the top-level keys and the byte
// span of every message, each message is decoded on its own, and, with a
// MessageCache (Options.Cache), a message whose bytes were decoded before is not
// decoded, tokenized or hashed again: a copy of its earlier parse is linked into the
// new session. Any input the fast path does not accept as it stands (invalid JSON, a
// repeated or escaped top-level key, a malformed message, lenient skips, a body
// that is not an object) is read again by the reader's full path, so errors and
// warnings are the full path's, word for word.
//
// Why a cache hit needs no validation: a message is cached only after it decoded
// without error, so its bytes are valid JSON; the scan that finds a value's end is
// exact on valid JSON; and the bytes between messages are checked by the scan. The
// other top-level values (model, tools, metadata…) are checked with json.Valid, or
// found among the values already checked (also kept in the cache, as hashes).

// DefaultMessageCacheBytes is the size bound NewMessageCache uses for a bound <= 0:
// 256 MiB, the decoded text of about 300 sessions of 200,000 tokens each.
const DefaultMessageCacheBytes = 256 << 20

// MessageCache remembers decoded request-body messages by their raw bytes (a
// 128-bit hash and the length; the bytes themselves are not kept), so that reading
// the next request of a session costs only its new or changed messages. An entry
// holds the message as decoded (its text, tool calls and outputs with their texts,
// hashes, token counts and classification), about the size of its raw JSON; the
// cache holds at most its bound of such bytes, least recently used entries first
// out (two generations of half the bound each). Safe for concurrent use; one cache
// may serve any number of sessions and both formats.
type MessageCache struct {
	mu        sync.Mutex
	max       int64 // bytes, both generations together
	cur, prev map[bodyKey]*msgTemplate
	curBytes  int64
	prevBytes int64

	hits, misses atomic.Int64
}

// NewMessageCache returns a cache bounded to maxBytes bytes of decoded messages
// (DefaultMessageCacheBytes when maxBytes <= 0).
func NewMessageCache(maxBytes int64) *MessageCache {
	if maxBytes <= 0 {
		maxBytes = DefaultMessageCacheBytes
	}
	return &MessageCache{max: maxBytes, cur: map[bodyKey]*msgTemplate{}}
}

// MessageCacheStats are a MessageCache's counters.
type MessageCacheStats struct {
	Hits, Misses int64 // messages (and checked values) found, and decoded afresh, since the cache was made
	Entries      int   // entries held now
	Bytes        int64 // their size as accounted (raw JSON length plus a fixed overhead per entry)
}

// Stats returns the cache's counters.
func (c *MessageCache) Stats() MessageCacheStats {
	c.mu.Lock()
	defer c.mu.Unlock()
	return MessageCacheStats{
		Hits: c.hits.Load(), Misses: c.misses.Load(),
		Entries: len(c.cur) + len(c.prev), Bytes: c.curBytes + c.prevBytes,
	}
}

// bodyKind separates what a cache entry is: a message of one format, an Anthropic
// system value, a top-level value known to be valid JSON, or a message's bytes with
// stubs put in (Session.Rewrite).
type bodyKind uint8

const (
	kindAnthropicMessage bodyKind = iota + 1
	kindAnthropicSystem
	kindOpenAIMessage
	kindValid
	kindPatch
)

// bodyKey identifies raw bytes by two 64-bit maphashes under independent seeds and
// the length (odds of two different values colliding about 2^-128 per pair).
type bodyKey struct {
	kind   bodyKind
	h1, h2 uint64
	size   int
}

var bodySeed1, bodySeed2 = maphash.MakeSeed(), maphash.MakeSeed()

func keyOf(kind bodyKind, raw []byte) bodyKey {
	return bodyKey{kind, maphash.Bytes(bodySeed1, raw), maphash.Bytes(bodySeed2, raw), len(raw)}
}

// patchKey identifies a message's bytes together with the stubs put into it (spec,
// see Session.rewriteCached).
func patchKey(msg, spec []byte) bodyKey {
	var h1, h2 maphash.Hash
	h1.SetSeed(bodySeed1)
	h2.SetSeed(bodySeed2)
	for _, h := range []*maphash.Hash{&h1, &h2} {
		h.Write(msg)
		h.WriteByte(0xff)
		h.Write(spec)
	}
	return bodyKey{kindPatch, h1.Sum64(), h2.Sum64(), len(msg)}
}

// entryOverhead is the fixed size accounted per entry besides its raw length (the
// key, the map slot, the message, call and output structs).
const entryOverhead = 256

// msgTemplate is one decoded message as the cache keeps it: measured (tokens,
// hashes, classification) but not linked (no index, step, pairing or key), with the
// outputs' paths relative to the message. Templates are never changed once stored:
// each use links a copy (instance).
type msgTemplate struct {
	msg     *Message // nil for a system value holding no text and for checked values
	prompt  string   // an Anthropic user message's first real prompt, for Session.Task
	patched []byte   // kindPatch: the message's bytes with its stubs in (Session.Rewrite)
	size    int64
}

func (c *MessageCache) get(k bodyKey) *msgTemplate {
	if c == nil {
		return nil
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if t, ok := c.cur[k]; ok {
		c.hits.Add(1)
		return t
	}
	if t, ok := c.prev[k]; ok {
		delete(c.prev, k)
		c.prevBytes -= t.size
		c.putLocked(k, t)
		c.hits.Add(1)
		return t
	}
	c.misses.Add(1)
	return nil
}

func (c *MessageCache) put(k bodyKey, t *msgTemplate) {
	if c == nil || t.size > c.max/2 {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if _, ok := c.cur[k]; ok {
		return
	}
	c.putLocked(k, t)
}

func (c *MessageCache) putLocked(k bodyKey, t *msgTemplate) {
	if c.curBytes+t.size > c.max/2 {
		c.prev, c.prevBytes = c.cur, c.curBytes
		c.cur, c.curBytes = map[bodyKey]*msgTemplate{}, 0
	}
	c.cur[k] = t
	c.curBytes += t.size
}

// checkValid reports whether raw is valid JSON, remembering larger values that are.
func (c *MessageCache) checkValid(raw []byte) bool {
	if c == nil || len(raw) < 256 {
		return json.Valid(raw)
	}
	k := keyOf(kindValid, raw)
	if c.get(k) != nil {
		return true
	}
	if !json.Valid(raw) {
		return false
	}
	c.put(k, &msgTemplate{size: entryOverhead})
	return true
}

// template makes the cache's copy of the measured, unlinked message m, whose
// outputs' paths start with prefix + "."; nil when a path does not.
func template(m *Message, prompt string, raw []byte, prefix string) *msgTemplate {
	t := &msgTemplate{prompt: prompt, size: int64(len(raw)) + entryOverhead}
	if m == nil {
		return t
	}
	cp := *m
	cp.Calls = make([]*ToolCall, len(m.Calls))
	for i, c := range m.Calls {
		cc := *c
		cp.Calls[i] = &cc
	}
	cp.Outputs = make([]*ToolOutput, len(m.Outputs))
	for i, o := range m.Outputs {
		oc := *o
		if len(o.paths) > 0 {
			oc.paths = make([]string, len(o.paths))
			for j, p := range o.paths {
				rel, ok := strings.CutPrefix(p, prefix+".")
				if !ok || rel == "" {
					return nil
				}
				oc.paths[j] = rel
			}
		}
		cp.Outputs[i] = &oc
	}
	t.msg = &cp
	return t
}

// instance returns a fresh copy of the template's message for the message at path
// prefix spanning elem of its unit, ready to be linked.
func (t *msgTemplate) instance(prefix string, elem unit) *Message {
	m := new(Message)
	*m = *t.msg
	if len(m.Calls) > 0 {
		calls := make([]ToolCall, len(m.Calls))
		m.Calls = make([]*ToolCall, len(calls))
		for i, c := range t.msg.Calls {
			calls[i] = *c
			m.Calls[i] = &calls[i]
		}
	}
	if len(m.Outputs) > 0 {
		outs := make([]ToolOutput, len(m.Outputs))
		m.Outputs = make([]*ToolOutput, len(outs))
		for i, o := range t.msg.Outputs {
			outs[i] = *o
			oc := &outs[i]
			if len(o.paths) > 0 {
				oc.paths = make([]string, len(o.paths))
				for j, rel := range o.paths {
					oc.paths[j] = prefix + "." + rel
				}
			}
			oc.elem, oc.elemPath = elem, prefix
			m.Outputs[i] = oc
		}
	}
	return m
}

// locate records on m's outputs the span of the message that carries them.
func locate(m *Message, prefix string, elem unit) {
	for _, o := range m.Outputs {
		o.elem, o.elemPath = elem, prefix
	}
}

// ---- the scan ----

func isJSONSpace(c byte) bool { return c == ' ' || c == '\t' || c == '\n' || c == '\r' }

// skipJSONSpace returns the first index at or after i that is not JSON whitespace.
func skipJSONSpace(data []byte, i int) int {
	for i < len(data) && isJSONSpace(data[i]) {
		i++
	}
	return i
}

// skipString returns the index just after the string that opens at data[i] ('"'),
// or -1 when it does not end. The string's content is not checked.
func skipString(data []byte, i int) int {
	j := i + 1
	for {
		k := bytes.IndexByte(data[j:], '"')
		if k < 0 {
			return -1
		}
		q := j + k
		n := 0
		for p := q - 1; p > i && data[p] == '\\'; p-- {
			n++
		}
		if n%2 == 0 {
			return q + 1
		}
		j = q + 1
	}
}

// skipValue returns the index just after the JSON value that starts at data[i], or
// -1. It follows strings and brackets only: on valid JSON the end is exact; on other
// input it may return any end, so what it skips must be checked (or known valid).
func skipValue(data []byte, i int) int {
	if i >= len(data) {
		return -1
	}
	switch data[i] {
	case '"':
		return skipString(data, i)
	case '{', '[':
		depth := 0
		for j := i; j < len(data); j++ {
			switch data[j] {
			case '"':
				e := skipString(data, j)
				if e < 0 {
					return -1
				}
				j = e - 1
			case '{', '[':
				depth++
			case '}', ']':
				depth--
				if depth == 0 {
					return j + 1
				}
			}
		}
		return -1
	case '}', ']', ',', ':':
		return -1
	}
	j := i
	for j < len(data) && !isJSONSpace(data[j]) && data[j] != ',' && data[j] != '}' && data[j] != ']' && data[j] != ':' {
		j++
	}
	return j
}

// bodyMember is one member of the top-level object: its key and the span of its value.
type bodyMember struct {
	key    string
	vs, ve int
}

// scanObject walks the object that opens at data[i] ('{'), checking the bytes
// between its members, and returns its members and the index after it. ok is false
// when the object is malformed, or a key is escaped, holds a control or non-ASCII
// byte, or occurs twice (the full path decides what those mean).
func scanObject(data []byte, i int) (members []bodyMember, end int, ok bool) {
	j := skipJSONSpace(data, i+1)
	if j < len(data) && data[j] == '}' {
		return nil, j + 1, true
	}
	for {
		if j >= len(data) || data[j] != '"' {
			return nil, 0, false
		}
		ke := skipString(data, j)
		if ke < 0 {
			return nil, 0, false
		}
		key := data[j+1 : ke-1]
		for _, c := range key {
			if c < 0x20 || c >= 0x80 || c == '\\' {
				return nil, 0, false
			}
		}
		for _, m := range members {
			if m.key == string(key) {
				return nil, 0, false
			}
		}
		j = skipJSONSpace(data, ke)
		if j >= len(data) || data[j] != ':' {
			return nil, 0, false
		}
		j = skipJSONSpace(data, j+1)
		ve := skipValue(data, j)
		if ve < 0 {
			return nil, 0, false
		}
		members = append(members, bodyMember{string(key), j, ve})
		j = skipJSONSpace(data, ve)
		if j >= len(data) {
			return nil, 0, false
		}
		switch data[j] {
		case ',':
			j = skipJSONSpace(data, j+1)
		case '}':
			return members, j + 1, true
		default:
			return nil, 0, false
		}
	}
}

// scanArray returns the spans of the elements of the array that opens at data[i]
// ('['), checking the bytes between them; ok is false when it is malformed.
func scanArray(data []byte, i int) (elems []unit, end int, ok bool) {
	j := skipJSONSpace(data, i+1)
	if j < len(data) && data[j] == ']' {
		return nil, j + 1, true
	}
	for {
		ve := skipValue(data, j)
		if ve < 0 {
			return nil, 0, false
		}
		elems = append(elems, unit{j, ve})
		j = skipJSONSpace(data, ve)
		if j >= len(data) {
			return nil, 0, false
		}
		switch data[j] {
		case ',':
			j = skipJSONSpace(data, j+1)
		case ']':
			return elems, j + 1, true
		default:
			return nil, 0, false
		}
	}
}

// bodyParts is what the fast path needs of a request body's top level.
type bodyParts struct {
	start, end int  // the object's span
	system     unit // the system value's span; end 0 when absent
	messages   unit // the messages value's span, an array
}

// scanBody finds the top-level object that spans [start, end) of data, its system
// and messages values, and checks every other value. ok is false when the fast path
// cannot take the body.
func scanBody(data []byte, start, end int, c *MessageCache) (bodyParts, bool) {
	p := bodyParts{start: start}
	if start >= len(data) || data[start] != '{' {
		return p, false
	}
	members, e, ok := scanObject(data, start)
	if !ok || e != end {
		return p, false
	}
	p.end = e
	for _, m := range members {
		switch m.key {
		case "system":
			p.system = unit{m.vs, m.ve}
		case "messages":
			if data[m.vs] != '[' {
				return p, false
			}
			p.messages = unit{m.vs, m.ve}
		default:
			if !c.checkValid(data[m.vs:m.ve]) {
				return p, false
			}
		}
	}
	return p, p.messages.end > 0
}

// bodyEnd returns the index after the value that starts at data[start] when only
// whitespace (as skip judges it) follows it, else -1.
func bodyEnd(data []byte, start int, skip func([]byte, int) int) int {
	e := skipValue(data, start)
	if e < 0 || skip(data, e) != len(data) {
		return -1
	}
	return e
}

// scanMessages finds a request body's extent (skip passes its leading blanks), its
// top-level members and the elements of its messages array; ok is false when the
// full reader must read the body.
func scanMessages(data []byte, c *MessageCache, skip func([]byte, int) int) (start, end int, parts bodyParts, elems []unit, ok bool) {
	start = skip(data, 0)
	end = bodyEnd(data, start, skip)
	if end < 0 {
		return 0, 0, parts, nil, false
	}
	if parts, ok = scanBody(data, start, end, c); !ok {
		return 0, 0, parts, nil, false
	}
	elems, _, ok = scanArray(data, parts.messages.start)
	return start, end, parts, elems, ok
}

// ---- Anthropic Messages bodies ----

// readAnthropicBody is readAnthropic's fast path; ok is false when the full path
// must read the body.
func readAnthropicBody(name string, data []byte, opts Options) (*Session, bool) {
	c := opts.Cache
	start, end, parts, elems, ok := scanMessages(data, c, apiSkipSpace)
	if !ok {
		return nil, false
	}
	b := newBuilder(FormatAnthropic, name, data)
	u := b.addUnit(start, end)
	if sys := data[parts.system.start:parts.system.end]; parts.system.end > 0 && !apiNull(sys) {
		k := keyOf(kindAnthropicSystem, sys)
		t := c.get(k)
		if t == nil {
			blocks, err := apiDecodeContent(sys, "system")
			if err != nil {
				return nil, false
			}
			var m *Message
			var texts []string
			for _, blk := range blocks {
				if blk.typ == "text" {
					texts = append(texts, blk.text)
				}
			}
			if txt := apiJoin(texts); txt != "" {
				m = &Message{Role: RoleSystem, Text: txt}
				b.measure(m)
			}
			t = template(m, "", sys, "system")
			c.put(k, t)
		}
		if t.msg != nil {
			b.link(t.instance("system", unit{}))
		}
	}
	for i, el := range elems {
		raw := data[el.start:el.end]
		prefix := "messages." + strconv.Itoa(i)
		span := unit{el.start - start, el.end - start}
		k := keyOf(kindAnthropicMessage, raw)
		t := c.get(k)
		var m *Message
		if t != nil {
			m = t.instance(prefix, span)
		} else {
			var prompt string
			var fast bool
			m, prompt, fast = apiMessageFast(raw, prefix, u)
			if !fast {
				var fe *apiFieldError
				if m, prompt, fe = apiMessage(raw, prefix, u); fe != nil {
					return nil, false
				}
			}
			b.measure(m)
			t = template(m, prompt, raw, prefix)
			if t == nil {
				t = &msgTemplate{prompt: prompt}
			} else {
				c.put(k, t)
			}
			locate(m, prefix, span)
		}
		if m.Role != RoleAssistant && b.s.Task == "" {
			b.s.Task = t.prompt
		}
		b.link(m)
	}
	s, err := b.finish()
	if err != nil {
		return nil, false
	}
	s.cache = c
	return s, true
}

// ---- OpenAI Chat Completions bodies ----

// readOpenAIBody is readOpenAI's fast path; ok is false when the full path must read
// the body. Messages that use the deprecated function_call / role "function" pair
// (whose reading depends on the messages before them) and messages whose reading
// warns are decoded on every read, never cached.
func readOpenAIBody(name string, data []byte, opts Options) (*Session, bool) {
	c := opts.Cache
	if !utf8.Valid(data) {
		return nil, false
	}
	_, _, _, elems, ok := scanMessages(data, c, skipJSONSpace)
	if !ok {
		return nil, false
	}
	b := newBuilder(FormatOpenAI, name, data)
	b.addUnit(0, len(data))
	r := &chatReader{b: b, opts: opts, name: name, prefix: "messages", mode: chatOpenAI}
	for i, el := range elems {
		raw := data[el.start:el.end]
		prefix := "messages." + strconv.Itoa(i)
		span := unit{el.start, el.end}
		k := keyOf(kindOpenAIMessage, raw)
		if t := c.get(k); t != nil {
			b.link(t.instance(prefix, span))
			continue
		}
		warnings := len(b.s.Warnings)
		r.nocache = false
		r.onAdd = func(m *Message) {
			b.measure(m)
			if !r.nocache && len(b.s.Warnings) == warnings {
				if t := template(m, "", raw, prefix); t != nil {
					c.put(k, t)
				}
			}
			locate(m, prefix, span)
			b.link(m)
		}
		if err := r.readOne(i, raw); err != nil {
			return nil, false
		}
	}
	s, err := b.finish()
	if err != nil {
		return nil, false
	}
	s.cache = c
	return s, true
}

// ---- decoding one Anthropic message in one pass ----

// apiMessageFast is apiMessage for the common case, in one pass: the message is
// checked with json.Valid, walked with the scan, and only the strings the reader
// keeps are unquoted. ok is false for anything it does not read the way apiMessage
// does (a problem apiMessage reports, an escaped, non-ASCII or repeated key, a
// string with a UTF-16 surrogate escape or invalid UTF-8); the caller then runs
// apiMessage, which gives the result or the error.
func apiMessageFast(el []byte, p string, u int) (m *Message, prompt string, ok bool) {
	if len(el) == 0 || el[0] != '{' || !json.Valid(el) {
		return nil, "", false
	}
	members, _, ok := scanObject(el, 0)
	if !ok {
		return nil, "", false
	}
	var role string
	var content []byte
	for _, mb := range members {
		switch mb.key {
		case "role":
			if role, ok = jsonString(el[mb.vs:mb.ve]); !ok {
				return nil, "", false
			}
		case "content":
			content = el[mb.vs:mb.ve]
		}
	}
	if role != "user" && role != "assistant" {
		return nil, "", false
	}
	var blocks []apiBlock
	switch {
	case content == nil || string(content) == "null":
	case content[0] == '"':
		s, ok := jsonString(content)
		if !ok {
			return nil, "", false
		}
		blocks = []apiBlock{{index: -1, typ: "text", text: s}}
	case content[0] == '[':
		elems, _, ok := scanArray(content, 0)
		if !ok {
			return nil, "", false
		}
		blocks = make([]apiBlock, 0, len(elems))
		for j, e := range elems {
			blk, ok := apiBlockFast(content[e.start:e.end], p+".content."+strconv.Itoa(j))
			if !ok {
				return nil, "", false
			}
			blk.index = j
			blocks = append(blocks, blk)
		}
	default:
		return nil, "", false
	}
	if role == "assistant" {
		return apiAssistant(blocks, 0), "", true
	}
	return apiUser(blocks, u), apiFirstPrompt(blocks), true
}

// apiBlockFast is apiDecodeBlock for valid JSON (see apiMessageFast).
func apiBlockFast(el []byte, p string) (apiBlock, bool) {
	obj, ok := jsonObject(el)
	if !ok {
		return apiBlock{}, false
	}
	typ, ok := jsonStringField(obj, "type")
	if !ok || typ == "" {
		return apiBlock{}, false
	}
	blk := apiBlock{typ: typ}
	switch typ {
	case "text":
		if blk.text, ok = jsonStringField(obj, "text"); !ok {
			return apiBlock{}, false
		}
	case "tool_use":
		var okID, okName bool
		blk.id, okID = jsonStringField(obj, "id")
		blk.name, okName = jsonStringField(obj, "name")
		if !okID || !okName || blk.id == "" {
			return apiBlock{}, false
		}
		blk.input = json.RawMessage("{}")
		if in, present := obj["input"]; present {
			blk.input = bytes.Clone(in)
		}
	case "tool_result":
		blk.callID, ok = jsonStringField(obj, "tool_use_id")
		if !ok || blk.callID == "" {
			return apiBlock{}, false
		}
		switch v := obj["is_error"]; string(v) {
		case "", "null", "false":
		case "true":
			blk.isError = true
		default:
			return apiBlock{}, false
		}
		if blk.result, ok = apiResultFast(obj["content"], p+".content"); !ok {
			return apiBlock{}, false
		}
	}
	return blk, true
}

// apiResultFast is apiDecodeResult for valid JSON (see apiMessageFast).
func apiResultFast(raw []byte, p string) (apiResult, bool) {
	var res apiResult
	switch {
	case raw == nil || string(raw) == "null":
		return res, true
	case raw[0] == '"':
		s, ok := jsonString(raw)
		if !ok {
			return res, false
		}
		res.text, res.paths = s, []string{p}
		return res, true
	case raw[0] != '[':
		return res, false
	}
	elems, _, ok := scanArray(raw, 0)
	if !ok {
		return res, false
	}
	var pieces []string
	for j, e := range elems {
		obj, ok := jsonObject(raw[e.start:e.end])
		if !ok {
			return res, false
		}
		typ := ""
		if t := obj["type"]; len(t) > 0 && t[0] == '"' {
			if typ, ok = jsonString(t); !ok {
				return res, false
			}
		}
		switch typ {
		case "text":
			s, ok := jsonStringField(obj, "text")
			if !ok {
				return res, false
			}
			pieces = append(pieces, s)
			if _, present := obj["text"]; present {
				res.paths = append(res.paths, p+"."+strconv.Itoa(j)+".text")
			}
		case "image":
			res.hasImage = true
		}
	}
	res.text = apiJoin(pieces)
	return res, true
}

// jsonObject returns the members of the valid JSON object raw by key; ok is false
// for another JSON type or a key scanObject refuses.
func jsonObject(raw []byte) (map[string][]byte, bool) {
	if len(raw) == 0 || raw[0] != '{' {
		return nil, false
	}
	members, _, ok := scanObject(raw, 0)
	if !ok {
		return nil, false
	}
	obj := make(map[string][]byte, len(members))
	for _, m := range members {
		obj[m.key] = raw[m.vs:m.ve]
	}
	return obj, true
}

// jsonStringField returns obj[key] as apiField reads it into a string: "" when
// absent or null, the string for a JSON string; ok is false for any other value.
func jsonStringField(obj map[string][]byte, key string) (string, bool) {
	v, present := obj[key]
	if !present || string(v) == "null" {
		return "", true
	}
	return jsonString(v)
}

// jsonString unquotes the valid JSON value raw when it is a string, as
// encoding/json does; ok is false for another JSON type, and for strings holding a
// UTF-16 surrogate escape or invalid UTF-8, which it leaves to encoding/json.
func jsonString(raw []byte) (string, bool) {
	if len(raw) < 2 || raw[0] != '"' || raw[len(raw)-1] != '"' {
		return "", false
	}
	in := raw[1 : len(raw)-1]
	if !utf8.Valid(in) {
		return "", false
	}
	i := bytes.IndexByte(in, '\\')
	if i < 0 {
		return string(in), true
	}
	out := make([]byte, 0, len(in))
	for {
		out = append(out, in[:i]...)
		in = in[i:]
		if len(in) < 2 {
			return "", false
		}
		switch c := in[1]; c {
		case '"', '\\', '/':
			out = append(out, c)
		case 'b':
			out = append(out, '\b')
		case 'f':
			out = append(out, '\f')
		case 'n':
			out = append(out, '\n')
		case 'r':
			out = append(out, '\r')
		case 't':
			out = append(out, '\t')
		case 'u':
			if len(in) < 6 {
				return "", false
			}
			r, err := strconv.ParseUint(string(in[2:6]), 16, 32)
			if err != nil || r >= 0xD800 && r < 0xE000 {
				return "", false
			}
			out = utf8.AppendRune(out, rune(r))
			in = in[6:]
			if i = bytes.IndexByte(in, '\\'); i < 0 {
				return string(append(out, in...)), true
			}
			continue
		default:
			return "", false
		}
		in = in[2:]
		if i = bytes.IndexByte(in, '\\'); i < 0 {
			return string(append(out, in...)), true
		}
	}
}
