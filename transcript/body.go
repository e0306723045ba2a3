package transcript

import (
	"bytes"
	"container/list"
	"encoding/json"
	"hash/maphash"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"unicode/utf8"
	"unsafe"

	"github.com/tidwall/gjson"

	"github.com/pruneadvisor/pruneadvisor/internal/freqsketch"
	"github.com/pruneadvisor/pruneadvisor/internal/jsonscan"
	"github.com/pruneadvisor/pruneadvisor/tokencount"
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
// Before that scan, an Anthropic body read with a cache is compared with the
// conversation's previous body, which the cache's body memory keeps (bodymemo.go):
// the messages the two share byte for byte are taken from the cache by their
// stored keys, without a scan or a hash, and only the rest is scanned.
//
// Both paths decode a message with the same code (apiMessage for Anthropic bodies,
// chatReader.readOne for OpenAI ones, on internal/jsonscan); the fast path differs
// only in how it finds the messages and in skipping the ones it has seen.
//
// Why a cache hit needs no validation: a message is decoded (and cached) only after
// validJSON (json.Valid's verdict) accepted its bytes; the scan that finds a value's
// end is exact on valid JSON; and the bytes between messages are checked by the scan.
// The other top-level values (model, tools, metadata…) are checked with validJSON,
// or found among the values already checked (also kept in the cache, as hashes).

// DefaultMessageCacheBytes is the size bound NewMessageCache uses for a bound <= 0:
// 256 MiB, the decoded text of about 300 sessions of 200,000 tokens each.
const DefaultMessageCacheBytes = 256 << 20

// MessageCache remembers decoded request-body messages by their raw bytes (a
// 128-bit hash and the length; the bytes themselves are not kept), so that reading
// the next request of a session costs only its new or changed messages. An entry
// holds the message as decoded (its text, tool calls and outputs with their texts,
// hashes, token counts and classification); the cache holds at most its bound of
// bytes as the entries really hold them (templateBytes: texts, hashes, structs and
// the map's slots, not the raw JSON they came from), its frequency sketch and its
// body memory included: the last Anthropic body of each recent conversation, at
// most memoShare of the bound, whatever it holds taken from the main part's room
// (bodymemo.go).
// Safe for concurrent use; one cache may serve any number of sessions and both
// formats.
//
// The policy is W-TinyLFU (Einziger, Friedman and Manes, "TinyLFU: A Highly
// Efficient Cache Admission Policy", ACM Transactions on Storage 13(4), 2017): new
// entries go into a small LRU window (windowShare of the bound); an entry leaving
// the window enters the main LRU only if its key was asked for more often (every
// lookup, hit or miss, counts in its freqsketch.Sketch) than the main entry it
// would evict. A proxy serving more live sessions than the cache holds visits
// their messages in a cycle longer than the cache, plain LRU's worst case (each
// entry is evicted just before its next use); with admission, the entries in the
// main part stay and hit on every round. The window keeps an active session's
// newest messages however busy the main part is.
type MessageCache struct {
	mu      sync.Mutex
	window  cacheSegment // with main and the sketch, at most the bound
	main    cacheSegment
	entries map[bodyKey]*list.Element // of *cacheEntry, in window or main
	freq    *freqsketch.Sketch
	rand    uint64 // tieWins' state
	max     int64  // the bound, in bytes (Stats)

	hits, misses, rejected atomic.Int64

	// The body memory (bodymemo.go), under mu: the memories by head, in LRU
	// order (most recent first), and what they hold against memoMax.
	memos     map[uint64][]*bodyMemo
	memoLRU   *list.List
	memoBytes int64
	memoMax   int64
	mainRoom  int64 // the main part's bound with no memory held: main.max is mainRoom - memoBytes
}

// tieOdds is how rarely an entry leaving the window wins against the main part's
// least recently used entry when its frequency is within the margin (admit): one
// time in tieOdds.
const tieOdds = 32

// tieWins draws a tie's outcome (xorshift64, Marsaglia 2003; under c.mu).
func (c *MessageCache) tieWins() bool {
	c.rand ^= c.rand << 13
	c.rand ^= c.rand >> 7
	c.rand ^= c.rand << 17
	return c.rand%tieOdds == 0
}

// windowShare is the part of a MessageCache's bound its window holds (W-TinyLFU's
// 1%, Einziger et al. 2017, section 4).
const windowShare = 0.01

// cacheSegment is one LRU list of a MessageCache: most recently used first.
type cacheSegment struct {
	list  *list.List
	bytes int64
	max   int64
}

// cacheEntry is one entry of a MessageCache.
type cacheEntry struct {
	key    bodyKey
	t      *msgTemplate
	inMain bool
}

// NewMessageCache returns a cache bounded to maxBytes bytes of decoded messages
// (DefaultMessageCacheBytes when maxBytes <= 0), its frequency sketch included.
func NewMessageCache(maxBytes int64) *MessageCache {
	if maxBytes <= 0 {
		maxBytes = DefaultMessageCacheBytes
	}
	c := &MessageCache{entries: map[bodyKey]*list.Element{}, freq: freqsketch.New(maxBytes), rand: 0x9e3779b97f4a7c15, max: maxBytes}
	room := max(maxBytes-c.freq.Size(), 0)
	c.memos, c.memoLRU, c.memoMax = map[uint64][]*bodyMemo{}, list.New(), int64(float64(room)*memoShare)
	c.window = cacheSegment{list: list.New(), max: int64(float64(room) * windowShare)}
	c.mainRoom = room - c.window.max
	c.main = cacheSegment{list: list.New(), max: c.mainRoom}
	return c
}

// MessageCacheStats are a MessageCache's counters.
type MessageCacheStats struct {
	Hits, Misses int64 // messages (and checked values) found, and decoded afresh, since the cache was made
	Rejected     int64 // entries the main part did not admit: asked for at most once more often than the one they would evict, and not winning the tie (admit)
	Entries      int   // entries held now
	Bytes        int64 // what they hold, in bytes (templateBytes: decoded texts, hashes and structs), the frequency sketch and the body memory included
	// Conversations is how many conversations' previous bodies the body memory holds
	// (bodymemo.go), MemoBytes what they hold (copies of the bodies, spans, keys and
	// patched messages; at most memoShare of the bound).
	Conversations int
	MemoBytes     int64
	// Max is the bound Bytes is kept under, in bytes (NewMessageCache's maxBytes,
	// or DefaultMessageCacheBytes).
	Max int64
}

// Stats returns the cache's counters.
func (c *MessageCache) Stats() MessageCacheStats {
	c.mu.Lock()
	defer c.mu.Unlock()
	return MessageCacheStats{
		Hits: c.hits.Load(), Misses: c.misses.Load(), Rejected: c.rejected.Load(),
		Entries: len(c.entries), Bytes: c.window.bytes + c.main.bytes + c.freq.Size() + c.memoBytes,
		Conversations: c.memoLRU.Len(), MemoBytes: c.memoBytes, Max: c.max,
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
	kindMeasure // a tool output's text, measured (tokens and hash; the text is not kept)
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

// minMeasured is the shortest output text whose measure the cache keeps: shorter
// ones cost less to measure than to look up.
const minMeasured = 256

// measured returns text's o200k token count and hex SHA-256, from the cache when
// it measured the same text before (the readers without a per-message fast path,
// openai-responses and gemini-api, re-read every output of the history on every
// request).
func (c *MessageCache) measured(text string) (tokens int, hash string) {
	if c == nil || len(text) < minMeasured {
		return tokencount.Count(text), TextHash(text)
	}
	k := bodyKey{kindMeasure, maphash.String(bodySeed1, text), maphash.String(bodySeed2, text), len(text)}
	if t := c.get(k); t != nil {
		return t.tokens, t.hash
	}
	tokens, hash = tokencount.Count(text), TextHash(text)
	t := &msgTemplate{tokens: tokens, hash: hash}
	t.size = templateBytes(t)
	c.put(k, t)
	return tokens, hash
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

// entryOverhead is the fixed size accounted per entry besides what its template
// holds (templateBytes): the key and value in the map's slot, the map's spare room
// (Go maps keep their load under 7/8, buckets of 8 slots), the template struct, its
// list element and entry.
const entryOverhead = int64(unsafe.Sizeof(bodyKey{})+unsafe.Sizeof(&list.Element{}))*2 + int64(unsafe.Sizeof(msgTemplate{})+unsafe.Sizeof(list.Element{})+unsafe.Sizeof(cacheEntry{}))

// templateBytes is what t holds, in bytes: every string and byte slice it keeps
// (counted as their length, shared backing arrays counted each time, so the sum
// bounds what is held from above) and the structs and pointer slices around them.
// This is what MessageCache's bound counts, not the raw JSON the entry came from:
// a message's decoded texts are about its raw length, its structs are not, and a
// measure or a checked value holds no text at all.
func templateBytes(t *msgTemplate) int64 {
	n := entryOverhead + int64(len(t.prompt)+len(t.patched)+len(t.hash))
	if m := t.msg; m != nil {
		n += messageBytes(m)
	}
	return n
}

// messageBytes is what a decoded message holds, as templateBytes counts it: its
// struct, texts, calls and outputs with their strings and pointer slots, and its
// outputs' paths twice (joinedFor's copy joined to a prefix, "messages.N." before
// each, about 16 bytes).
func messageBytes(m *Message) int64 {
	n := int64(unsafe.Sizeof(*m)) + int64(len(m.Text))
	n += int64(len(m.Calls)+len(m.Outputs)) * int64(unsafe.Sizeof(uintptr(0)))
	for _, c := range m.Calls {
		n += int64(unsafe.Sizeof(*c)) + int64(len(c.ID)+len(c.Name)+len(c.Args)+len(c.Path)+len(c.Content)+len(c.Command)+len(c.Summary))
		n += stringsBytes(c.Paths)
		for _, op := range c.Ops {
			n += int64(unsafe.Sizeof(op)) + int64(len(op.Path)+len(op.Content))
		}
	}
	for _, o := range m.Outputs {
		n += int64(unsafe.Sizeof(*o)) + int64(len(o.Key)+len(o.CallID)+len(o.Text)+len(o.Hash)+len(o.elemPath))
		n += 2*stringsBytes(o.paths) + int64(len(o.paths))*16 + int64(unsafe.Sizeof([]string(nil)))
	}
	return n
}

// stringsBytes is what a string slice holds: its headers and its strings' bytes.
func stringsBytes(ss []string) int64 {
	n := int64(len(ss)) * int64(unsafe.Sizeof(""))
	for _, s := range ss {
		n += int64(len(s))
	}
	return n
}

// msgTemplate is one decoded message as the cache keeps it: measured (tokens,
// hashes, classification) but not linked (no index, step, pairing or key), with the
// outputs' paths relative to the message. Templates are never changed once stored:
// each use links a copy (instance).
type msgTemplate struct {
	msg     *Message // nil for a system value holding no text and for checked values
	prompt  string   // an Anthropic user message's first real prompt, for Session.Task
	patched []byte   // kindPatch: the message's bytes with its stubs in (Session.Rewrite)
	tokens  int      // kindMeasure: the text's token count
	hash    string   // kindMeasure: the text's hex SHA-256
	size    int64
	joined  atomic.Pointer[joinedPaths] // msg's output paths joined to the last prefix (instance)
}

func (c *MessageCache) get(k bodyKey) *msgTemplate {
	if c == nil {
		return nil
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	c.freq.Add(k.h1, k.h2)
	el, ok := c.entries[k]
	if !ok {
		c.misses.Add(1)
		return nil
	}
	e := el.Value.(*cacheEntry)
	c.segment(e).list.MoveToFront(el)
	c.hits.Add(1)
	return e.t
}

func (c *MessageCache) segment(e *cacheEntry) *cacheSegment {
	if e.inMain {
		return &c.main
	}
	return &c.window
}

// put keeps t under k unless k is held already or t is larger than the main part:
// into the window, whose least recently used entries then move on to the main
// part's admission (admit); an entry larger than the window goes to admission at
// once.
func (c *MessageCache) put(k bodyKey, t *msgTemplate) {
	if c == nil {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if t.size > c.main.max {
		return
	}
	if _, ok := c.entries[k]; ok {
		return
	}
	e := &cacheEntry{key: k, t: t}
	if t.size > c.window.max {
		c.admit(e)
		return
	}
	c.entries[k] = c.window.list.PushFront(e)
	c.window.bytes += t.size
	for c.window.bytes > c.window.max {
		el := c.window.list.Back()
		out := el.Value.(*cacheEntry)
		c.window.list.Remove(el)
		c.window.bytes -= out.t.size
		delete(c.entries, out.key)
		c.admit(out)
	}
}

// admit moves e into the main part, evicting the main part's least recently used
// entries while e's key was asked for more often than theirs by more than one
// (TinyLFU, with a margin of one: in a cycle every key is asked once a round, and a
// victim not yet asked this round would otherwise always lose to a candidate that
// was, which is LRU's thrashing again); otherwise e is dropped, except that when
// it was asked for at least as often it wins one time in tieOdds (so a victim
// whose counters other keys keep high cannot hold the main part's tail for good).
func (c *MessageCache) admit(e *cacheEntry) {
	for c.main.bytes+e.t.size > c.main.max {
		el := c.main.list.Back()
		v := el.Value.(*cacheEntry)
		if cf, vf := c.freq.Estimate(e.key.h1, e.key.h2), c.freq.Estimate(v.key.h1, v.key.h2); cf <= vf+1 && (cf < vf || !c.tieWins()) {
			c.rejected.Add(1)
			return
		}
		c.main.list.Remove(el)
		c.main.bytes -= v.t.size
		delete(c.entries, v.key)
	}
	e.inMain = true
	c.entries[e.key] = c.main.list.PushFront(e)
	c.main.bytes += e.t.size
}

// maxJSONDepth is encoding/json's nesting limit (its scanner's maxNestingDepth):
// json.Valid refuses a value nested deeper, gjson.ValidBytes does not.
const maxJSONDepth = 10000

// validJSON reports what json.Valid(raw) reports, about twice as fast (the first
// request of a 200k-token session checks about 800 KB of messages): gjson's
// validator, which accepts the same grammar (RFC 8259; invalid UTF-8 inside
// strings accepted by both), and json.Valid itself for a value with maxJSONDepth
// or more opening brackets, the one case where the two could differ.
// FuzzValidJSON compares them.
func validJSON(raw []byte) bool {
	if bytes.Count(raw, []byte{'['})+bytes.Count(raw, []byte{'{'}) >= maxJSONDepth {
		return json.Valid(raw)
	}
	return gjson.ValidBytes(raw)
}

// checkValid reports whether raw is valid JSON, remembering larger values that are.
func (c *MessageCache) checkValid(raw []byte) bool {
	if c == nil || len(raw) < 256 {
		return validJSON(raw)
	}
	k := keyOf(kindValid, raw)
	if c.get(k) != nil {
		return true
	}
	if !validJSON(raw) {
		return false
	}
	c.put(k, &msgTemplate{size: entryOverhead})
	return true
}

// template makes the cache's copy of the measured, unlinked message m, whose
// outputs' paths start with prefix + "."; nil when a path does not.
func template(m *Message, prompt string, prefix string) *msgTemplate {
	t := &msgTemplate{prompt: prompt}
	defer func() { t.size = templateBytes(t) }()
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
// prefix spanning elem of its unit, ready to be linked, its values taken from sl.
// The outputs' paths are the ones joined for the prefix last time when it is the
// same (joinedFor): shared, as nothing writes into a session's paths.
func (t *msgTemplate) instance(prefix string, elem unit, sl *slab) *Message {
	m := sl.message()
	*m = *t.msg
	if len(m.Calls) > 0 {
		calls, ptrs := sl.calls(len(m.Calls))
		for i, c := range t.msg.Calls {
			calls[i] = *c
			ptrs[i] = &calls[i]
		}
		m.Calls = ptrs
	}
	if len(m.Outputs) > 0 {
		joined := t.joinedFor(prefix)
		outs, ptrs := sl.outputs(len(m.Outputs))
		for i, o := range t.msg.Outputs {
			outs[i] = *o
			oc := &outs[i]
			oc.paths = joined.paths[i]
			oc.elem, oc.elemPath = elem, prefix
			ptrs[i] = oc
		}
		m.Outputs = ptrs
	}
	return m
}

// joinedPaths is a template's output paths joined to one prefix: paths[i] is
// output i's, nil when it has none.
type joinedPaths struct {
	prefix string
	paths  [][]string
}

// joinedFor returns the template's output paths joined to prefix, from the last
// call when it had the same prefix (a conversation's message keeps its index from
// request to request), else joined anew and kept for the next call. Safe for
// concurrent use.
func (t *msgTemplate) joinedFor(prefix string) *joinedPaths {
	if j := t.joined.Load(); j != nil && j.prefix == prefix {
		return j
	}
	j := &joinedPaths{prefix: prefix, paths: make([][]string, len(t.msg.Outputs))}
	for i, o := range t.msg.Outputs {
		if len(o.paths) > 0 {
			j.paths[i] = make([]string, len(o.paths))
			for k, rel := range o.paths {
				j.paths[i][k] = prefix + "." + rel
			}
		}
	}
	t.joined.Store(j)
	return j
}

// slab hands out the values of a session's message instances a chunk at a time:
// a steady request of a long conversation copies some 160 messages from their
// templates, which were five allocations each. Slices it returns have their own
// capacity, so an append to one cannot reach the next.
type slab struct {
	msgs     []Message
	callVals []ToolCall
	outVals  []ToolOutput
	callPtrs []*ToolCall
	outPtrs  []*ToolOutput
}

// slabChunk is how many values of a kind a slab allocates at once.
const slabChunk = 64

// message returns a Message value to fill.
func (sl *slab) message() *Message {
	if len(sl.msgs) == 0 {
		sl.msgs = make([]Message, slabChunk)
	}
	m := &sl.msgs[0]
	sl.msgs = sl.msgs[1:]
	return m
}

// calls returns n ToolCall values and n pointers to fill.
func (sl *slab) calls(n int) ([]ToolCall, []*ToolCall) {
	return take(&sl.callVals, n), take(&sl.callPtrs, n)
}

// outputs returns n ToolOutput values and n pointers to fill.
func (sl *slab) outputs(n int) ([]ToolOutput, []*ToolOutput) {
	return take(&sl.outVals, n), take(&sl.outPtrs, n)
}

// take cuts n values off the front of *pool (a new chunk when it has fewer; a
// slice of its own past slabChunk), capacity n.
func take[T any](pool *[]T, n int) []T {
	if n > slabChunk {
		return make([]T, n)
	}
	if len(*pool) < n {
		*pool = make([]T, slabChunk)
	}
	out := (*pool)[:n:n]
	*pool = (*pool)[n:]
	return out
}

// locate records on m's outputs the span of the message that carries them.
func locate(m *Message, prefix string, elem unit) {
	for _, o := range m.Outputs {
		o.elem, o.elemPath = elem, prefix
	}
}

// ---- the scan ----

// bodyParts is what the fast path needs of a request body's top level.
type bodyParts struct {
	start, end int           // the object's span
	system     jsonscan.Span // the system value's span; End 0 when absent
	messages   jsonscan.Span // the messages value's span, an array
}

// scanBody finds the top-level object that spans [start, end) of data, its system
// and messages values, and checks every other value. ok is false when the fast path
// cannot take the body.
func scanBody(data []byte, start, end int, c *MessageCache) (bodyParts, bool) {
	p := bodyParts{start: start}
	if start >= len(data) || data[start] != '{' {
		return p, false
	}
	members, e, ok := jsonscan.ScanObject(data, start)
	if !ok || e != end {
		return p, false
	}
	p.end = e
	for _, m := range members {
		v := m.Value
		switch m.Key {
		case "system":
			p.system = v
		case "messages":
			if data[v.Start] != '[' {
				return p, false
			}
			p.messages = v
		default:
			if !c.checkValid(data[v.Start:v.End]) {
				return p, false
			}
		}
	}
	return p, p.messages.End > 0
}

// bodyEnd returns the index after the value that starts at data[start] when only
// whitespace (as skip judges it) follows it, else -1.
func bodyEnd(data []byte, start int, skip func([]byte, int) int) int {
	e := jsonscan.SkipValue(data, start)
	if e < 0 || skip(data, e) != len(data) {
		return -1
	}
	return e
}

// scanMessages finds a request body's extent (skip passes its leading blanks), its
// top-level members and the elements of its messages array; ok is false when the
// full reader must read the body.
func scanMessages(data []byte, c *MessageCache, skip func([]byte, int) int) (start, end int, parts bodyParts, elems []jsonscan.Span, ok bool) {
	start = skip(data, 0)
	end = bodyEnd(data, start, skip)
	if end < 0 {
		return 0, 0, parts, nil, false
	}
	if parts, ok = scanBody(data, start, end, c); !ok {
		return 0, 0, parts, nil, false
	}
	elems, _, ok = jsonscan.ScanArray(data, parts.messages.Start)
	return start, end, parts, elems, ok
}

// ---- Anthropic Messages bodies ----

// readAnthropicBody is readAnthropic's fast path; ok is false when the full path
// must read the body. With a cache it first looks for the conversation's previous
// body in the cache's body memory (see bodymemo.go) and records this one there.
func readAnthropicBody(name string, data []byte, opts Options) (*Session, bool) {
	c := opts.Cache
	sc, head, memo := scanAnthropicBody(data, c, opts.Prefix)
	if sc == nil {
		return nil, false
	}
	s, ok := buildAnthropicBody(name, data, c, sc)
	if !ok {
		c.returnMemo(sc.memo)
		return nil, false
	}
	if memo {
		s.memo = c.remember(head, data, sc)
		s.memo.resumed = sc.resumed
	}
	s.cache = c
	return s, true
}

// scanAnthropicBody finds the parts of the body data: from the body memory when it
// holds the conversation's previous body (sc.memo, locked, is then set), else by the
// fast path's scan. memo reports whether the body can be remembered (under head);
// sc is nil when the full path must read the body.
func scanAnthropicBody(data []byte, c *MessageCache, feed *PrefixFeed) (sc *bodyScan, head uint64, memo bool) {
	var m *bodyMemo
	p := 0
	if c != nil {
		if head, memo = anthropicHead(data); memo {
			m, p = c.checkoutMemo(head, data, feed)
		}
	}
	if m != nil {
		if sc, ok := scanFromMemo(data, m, p); ok {
			return &sc, head, true
		}
	}
	start, end, parts, elems, ok := scanMessages(data, c, jsonscan.SkipBlank)
	if !ok {
		c.returnMemo(m)
		return nil, 0, false
	}
	sc = &bodyScan{start: start, end: end, parts: parts, elems: elems, memo: m, prefixLen: p}
	if m != nil {
		for sc.kept < min(len(m.elems), len(elems)) && m.elems[sc.kept].span.End <= p {
			sc.kept++
		}
	}
	return sc, head, memo
}

// buildAnthropicBody decodes (or takes from c) the system value and the messages sc
// found in data and links them into a session, completing sc.keys; false when the
// full path must read the body. The messages a session recycled into sc's memory
// holds (carry.go) are taken from it as they are.
func buildAnthropicBody(name string, data []byte, c *MessageCache, sc *bodyScan) (*Session, bool) {
	b := newBuilder(FormatAnthropic, name, data)
	u := b.addUnit(sc.start, sc.end)
	from := 0
	if r, cr := takeRecycled(sc); r != nil && b.resume(r, cr, sc.kept) {
		from, sc.resumed = sc.kept, sc.kept
	} else if !linkSystem(b, c, data, sc) {
		return nil, false
	}
	known := make([]*msgTemplate, len(sc.elems))
	if len(sc.keys) > 0 && (from == 0 || sc.memo.touchDue()) {
		c.getMany(sc.keys, known)
	}
	for i := len(sc.keys); i < len(sc.elems); i++ {
		k := keyOf(kindAnthropicMessage, data[sc.elems[i].Start:sc.elems[i].End])
		sc.keys = append(sc.keys, k)
		known[i] = c.get(k)
	}
	decodeNew(b, c, data, sc, known, from, u)
	for i := from; i < len(sc.elems); i++ {
		el := sc.elems[i]
		b.mark()
		if !anthropicMessage(b, c, data[el.Start:el.End], sc.keys[i], known[i], msgPrefix(sc.memo, i), unit{el.Start - sc.start, el.End - sc.start}, u) {
			return nil, false
		}
	}
	b.mark()
	s, err := b.finish()
	if err != nil {
		return nil, false
	}
	if c != nil {
		s.carry = &carry{pending: b.pending, seenIDs: b.seenIDs, outKeys: b.outKeys, marks: b.marks, sysN: b.sysN}
	}
	return s, true
}

// parallelBytes is the size of the new messages of a body from which decodeNew
// decodes them on several goroutines: below it, starting them costs more than it
// saves.
const parallelBytes = 64 << 10

// maxDecoders bounds the goroutines decodeNew starts, besides GOMAXPROCS.
const maxDecoders = 8

// decodeNew decodes, measures and caches the messages of sc that known has no
// template for, on up to GOMAXPROCS goroutines (at most maxDecoders) when they
// hold parallelBytes or more, putting each template into known (the messages that
// do not decode are left to anthropicMessage, which decides on them in order).
// Decoding and measuring a message depends on its bytes alone (and the session's
// cwd, which a request body does not set), so the session is the same as decoded
// in order; the first request of a long session spends most of its time here
// (token counts).
func decodeNew(b *builder, c *MessageCache, data []byte, sc *bodyScan, known []*msgTemplate, from, u int) {
	workers := min(runtime.GOMAXPROCS(0), maxDecoders)
	if c == nil || workers < 2 {
		return
	}
	var todo []int
	size, first := 0, map[bodyKey]int{}
	for i := from; i < len(known); i++ {
		if _, seen := first[sc.keys[i]]; known[i] == nil && !seen {
			first[sc.keys[i]] = i
			todo = append(todo, i)
			size += sc.elems[i].End - sc.elems[i].Start
		}
	}
	if size < parallelBytes {
		return
	}
	var next atomic.Int64
	var wg sync.WaitGroup
	for range min(workers, len(todo)) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for j := int(next.Add(1)) - 1; j < len(todo); j = int(next.Add(1)) - 1 {
				i := todo[j]
				known[i] = decodeTemplate(b, c, data[sc.elems[i].Start:sc.elems[i].End], sc.keys[i], msgPrefix(sc.memo, i), u)
			}
		}()
	}
	wg.Wait()
	for i := from; i < len(known); i++ { // a message repeated within the body, as a cache hit
		if j, ok := first[sc.keys[i]]; known[i] == nil && ok {
			known[i] = known[j]
		}
	}
}

// decodeTemplate decodes and measures the message raw (path prefix, in unit u),
// caches its template under k and returns it; nil when it does not decode or its
// template cannot be kept (anthropicMessage then reads it in order).
func decodeTemplate(b *builder, c *MessageCache, raw []byte, k bodyKey, prefix string, u int) *msgTemplate {
	if !validJSON(raw) {
		return nil
	}
	m, prompt, fe := apiMessage(raw, prefix, u)
	if fe != nil {
		return nil
	}
	b.measure(m)
	t := template(m, prompt, prefix)
	if t != nil {
		c.put(k, t)
	}
	return t
}

// linkSystem links the system value sc found in data, if any, into b (fresh),
// completing sc.sysKey, and records how many messages it made (builder.sysN);
// false when the full path must read the body.
func linkSystem(b *builder, c *MessageCache, data []byte, sc *bodyScan) bool {
	if sys := data[sc.parts.system.Start:sc.parts.system.End]; sc.parts.system.End > 0 && !jsonscan.Null(sys) {
		k, ok := anthropicSystem(b, c, sys, sc.sysKey)
		if !ok {
			return false
		}
		sc.sysKey = k
	}
	b.sysN = len(b.s.Messages)
	return true
}

// anthropicSystem links the body's system value (its text blocks joined) into b,
// from c when it was read before (k: its key, when known; computed when k.kind is
// 0), and returns the key; false when the full path must read the body.
func anthropicSystem(b *builder, c *MessageCache, sys []byte, k bodyKey) (bodyKey, bool) {
	if k.kind == 0 {
		k = keyOf(kindAnthropicSystem, sys)
	}
	t := c.get(k)
	if t == nil {
		if !validJSON(sys) {
			return k, false
		}
		blocks, err := apiDecodeContent(sys, "system")
		if err != nil {
			return k, false
		}
		var m *Message
		if txt := systemText(blocks); txt != "" {
			m = &Message{Role: RoleSystem, Text: txt}
			b.measure(m)
		}
		t = template(m, "", "system")
		c.put(k, t)
	}
	if t.msg != nil {
		b.link(t.instance("system", unit{}, &b.slab))
	}
	return k, true
}

// anthropicMessage links the message raw (at path prefix, span within unit u) into
// b: a copy of t, its cached reading under key k, when c read the same bytes
// before (t not nil), else decoded, measured and cached; the first non-assistant
// prompt becomes the task. False when the full path must read the body.
func anthropicMessage(b *builder, c *MessageCache, raw []byte, k bodyKey, t *msgTemplate, prefix string, span unit, u int) bool {
	var m *Message
	if t != nil {
		m = t.instance(prefix, span, &b.slab)
	} else {
		if !validJSON(raw) {
			return false
		}
		var prompt string
		var fe *jsonscan.FieldError
		if m, prompt, fe = apiMessage(raw, prefix, u); fe != nil {
			return false
		}
		b.measure(m)
		t = template(m, prompt, prefix)
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
	return true
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
	_, _, parts, elems, ok := scanMessages(data, c, jsonscan.SkipSpace)
	if !ok {
		return nil, false
	}
	// scanBody leaves "system" to the Anthropic reader, which decodes it; here it is
	// just another member, and must be valid JSON as the others are
	// (FuzzBodyFastPath found a body with a broken system value read as valid).
	if sys := parts.system; sys.End > 0 && !c.checkValid(data[sys.Start:sys.End]) {
		return nil, false
	}
	b := newBuilder(FormatOpenAI, name, data)
	b.addUnit(0, len(data))
	r := &chatReader{b: b, opts: opts, name: name, prefix: "messages", mode: chatOpenAI}
	for i, el := range elems {
		raw := data[el.Start:el.End]
		prefix := "messages." + strconv.Itoa(i)
		span := unit{el.Start, el.End}
		k := keyOf(kindOpenAIMessage, raw)
		if t := c.get(k); t != nil {
			b.link(t.instance(prefix, span, &b.slab))
			continue
		}
		if !validJSON(raw) {
			return nil, false
		}
		warnings := len(b.s.Warnings)
		r.nocache = false
		r.onAdd = func(m *Message) {
			b.measure(m)
			if !r.nocache && len(b.s.Warnings) == warnings {
				if t := template(m, "", prefix); t != nil {
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
