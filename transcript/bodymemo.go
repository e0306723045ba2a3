package transcript

import (
	"bytes"
	"container/list"
	"hash/maphash"
	"sort"
	"strconv"
	"sync"
	"unsafe"

	"github.com/pruneadvisor/pruneadvisor/internal/jsonscan"
)

// A conversation's next request body is its previous one with a turn or two added
// at the end of the messages array (and a cache_control marker moved). The body
// memory keeps, per conversation, a copy of the last Anthropic Messages body read
// through the MessageCache with the span and cache key of each of its messages:
// the next body's longest common byte prefix with it (compared a block at a time,
// at memory speed) says which messages are byte-identical, and those are taken from
// the cache by their stored keys without being scanned or hashed again; only the
// rest of the messages array is scanned, and the bytes after it must equal the
// previous body's (the other top-level values, checked when that body was read).
// Anything else (no memory, an edit inside the first message, a changed value after
// the messages, a message the cache no longer holds) takes the ordinary fast path
// for that part, so the session read is the same either way.
//
// Why the reused part needs no check: the previous body was read by the fast path,
// which validated it; the scan that found its messages is a left-to-right machine
// whose state at a byte depends only on the bytes before it, and a message is an
// object whose end ('}') does not depend on what follows. So the new body, equal
// up to the end of message k-1, has the same top-level keys and values before its
// messages, the same first k messages at the same offsets, and the scanner in the
// same state there. The same argument, run from the end of the messages array
// (where the scanner's state is again the same: after the value of "messages",
// with the same keys seen), covers the bytes after it when they are equal.
//
// Which memory: the body's head (its bytes up to the end of its first message:
// model, system and tools when they come first, and the first prompt) is hashed to
// find the memories of conversations that began the same way; the one with the
// longest common prefix is used. It is updated in place when the new body keeps at
// least half of its messages, else the new body gets a memory of its own (a
// different conversation with the same first message). Memories are held in LRU
// order within memoShare of the cache's bound, counted as the bytes they hold
// (memoBytes): the copy, the spans and keys, and the patched messages Rewrite
// keeps there. They hold no decoded text.

// memoShare is the part of a MessageCache's bound the body memory may hold: with
// the default bound, 32 MiB, the memories of about 38 conversations of 844 KB.
const memoShare = 0.125

// bodyMemo is the memory of one conversation's last body (see above).
type bodyMemo struct {
	mu sync.Mutex // held by the read (and the rewrite) using it

	// Guarded by mu.
	raw        []byte        // a copy of the body
	start, end int           // the top-level object's span in raw
	msgs       jsonscan.Span // the messages array's span
	system     jsonscan.Span // the system value's span; End 0 when absent or null
	sysKey     bodyKey
	elems      []memoElem
	gen        uint64 // counts the updates; a Session names the one it read (memoRef)
	// recycled is the session read from raw and given back (Session.Recycle), for
	// the next read to take; nil when none.
	recycled *recycled
	// takes counts the reads that took a recycled session (touchDue).
	takes int
	// rw is the last rewrite of raw, or of a body whose messages it repeats up to
	// the last stub (repeatRewrite); nil when none.
	rw *memoRewrite

	// Guarded by the cache's mu.
	head    uint64
	el      *list.Element // in MessageCache.memoLRU; nil once evicted
	size    int64         // memoBytes when last accounted
	evicted bool
}

// memoElem is one message of a bodyMemo: its span in raw, its cache key, its path
// prefix, and the last stubs Rewrite put into it (spec, see Session.patchGroup) with
// the patched bytes (nil when none).
type memoElem struct {
	span    jsonscan.Span
	key     bodyKey
	prefix  string
	spec    []byte
	patched []byte
}

// memoRef is what a Session read through a bodyMemo keeps of it, for Rewrite: the
// memory, the update that recorded this session's body (gen), and how many of its
// messages (from the first) were the previous body's, whose stubs the memory knows.
type memoRef struct {
	m    *bodyMemo
	gen  uint64
	kept int
	// reused is how many messages, from the first, were found in a memory without
	// being scanned or hashed (m's, or the memory of the conversation it left).
	reused int
	// resumed is how many of those were taken, linked, from the session recycled
	// into the memory (carry.go); 0 when none was.
	resumed int
	// repeats counts the session's rewrites made from the memory's last one
	// (repeatRewrite).
	repeats int
}

// memoOverhead is the fixed size accounted per memory: the struct, its list
// element and its slot in the map's slice.
const memoOverhead = int64(unsafe.Sizeof(bodyMemo{}) + unsafe.Sizeof(list.Element{}) + 2*unsafe.Sizeof(uintptr(0)))

// memoBytes is what m holds, in bytes (m.mu held).
func (m *bodyMemo) memoBytes() int64 {
	n := memoOverhead + int64(cap(m.raw)) + int64(cap(m.elems))*int64(unsafe.Sizeof(memoElem{}))
	for _, e := range m.elems {
		n += int64(len(e.prefix) + cap(e.spec) + cap(e.patched))
	}
	if m.recycled != nil {
		n += m.recycled.size
	}
	if m.rw != nil {
		n += m.rw.bytes()
	}
	return n
}

// touchEvery is how often (in reads that took a recycled session) a read still
// looks up the templates of the messages it took, so that the cache's recency and
// frequency keep counting them: were the memory lost, the next read of the
// conversation finds them in the cache instead of decoding and counting the whole
// history again.
const touchEvery = 8

// touchDue counts a read that took a recycled session from m (locked) and reports
// whether it should look up the templates all the same (touchEvery).
func (m *bodyMemo) touchDue() bool {
	m.takes++
	return m.takes%touchEvery == 0
}

var memoSeed = maphash.MakeSeed()

// anthropicHead returns the hash of the body's head: its bytes up to the end of the
// first element of its top-level messages array. ok is false when the body does
// not look like an object with a non-empty messages array (the values before it are
// skipped, not checked: the key only chooses which memories to compare).
func anthropicHead(data []byte) (uint64, bool) {
	i := jsonscan.SkipBlank(data, 0)
	if i >= len(data) || data[i] != '{' {
		return 0, false
	}
	for i = jsonscan.SkipSpace(data, i+1); i < len(data) && data[i] == '"'; {
		ke := jsonscan.SkipString(data, i)
		if ke < 0 {
			return 0, false
		}
		key := data[i+1 : ke-1]
		v := jsonscan.SkipSpace(data, ke)
		if v >= len(data) || data[v] != ':' {
			return 0, false
		}
		v = jsonscan.SkipSpace(data, v+1)
		if string(key) == "messages" {
			if v >= len(data) || data[v] != '[' {
				return 0, false
			}
			e := jsonscan.SkipValue(data, jsonscan.SkipSpace(data, v+1))
			if e < 0 {
				return 0, false
			}
			return maphash.Bytes(memoSeed, data[:e]), true
		}
		e := jsonscan.SkipValue(data, v)
		if e < 0 {
			return 0, false
		}
		if i = jsonscan.SkipSpace(data, e); i >= len(data) || data[i] != ',' {
			return 0, false
		}
		i = jsonscan.SkipSpace(data, i+1)
	}
	return 0, false
}

// commonPrefix returns the length of the longest common prefix of a and b:
// 4 KiB blocks compared with bytes.Equal, then 64-byte blocks, then bytes.
func commonPrefix(a, b []byte) int {
	n := min(len(a), len(b))
	i := 0
	for _, block := range [...]int{4096, 64} {
		for i+block <= n && bytes.Equal(a[i:i+block], b[i:i+block]) {
			i += block
		}
	}
	for i < n && a[i] == b[i] {
		i++
	}
	return i
}

// checkoutMemo returns, locked, the memory of head's conversations with the
// longest common prefix with data, and that prefix's length; nil when there is
// none free. The comparison with a memory starts where feed (may be nil) left it.
// The caller gives it back with returnMemo.
func (c *MessageCache) checkoutMemo(head uint64, data []byte, feed *PrefixFeed) (*bodyMemo, int) {
	c.mu.Lock()
	cands := append([]*bodyMemo(nil), c.memos[head]...)
	c.mu.Unlock()
	var best *bodyMemo
	bestP := -1
	for _, m := range cands {
		if !m.mu.TryLock() {
			continue
		}
		p, final := feed.known(head, m)
		if !final {
			p += commonPrefix(m.raw[p:], data[p:])
		}
		if p > bestP {
			if best != nil {
				best.mu.Unlock()
			}
			best, bestP = m, p
			continue
		}
		m.mu.Unlock()
	}
	return best, bestP
}

// returnMemo unlocks m (from checkoutMemo or Session.Rewrite), accounting what it
// holds now and evicting the least recently used memories over the share; m may
// be nil.
func (c *MessageCache) returnMemo(m *bodyMemo) {
	if m == nil {
		return
	}
	size := m.memoBytes()
	m.mu.Unlock()
	c.mu.Lock()
	defer c.mu.Unlock()
	if m.evicted {
		return
	}
	c.memoBytes += size - m.size
	m.size = size
	c.memoLRU.MoveToFront(m.el)
	c.shedMemos()
}

// fitMain sets the main part's bound to what the body memory leaves of its room
// and evicts its least recently used entries over it (c.mu held).
func (c *MessageCache) fitMain() {
	c.main.max = c.mainRoom - c.memoBytes
	for c.main.bytes > c.main.max {
		el := c.main.list.Back()
		v := el.Value.(*cacheEntry)
		c.main.list.Remove(el)
		c.main.bytes -= v.t.size
		delete(c.entries, v.key)
	}
}

// addMemo keeps the new memory m (unlocked) for head, evicting the least recently
// used memories over the share; a memory larger than the share is not kept.
func (c *MessageCache) addMemo(head uint64, m *bodyMemo) {
	size := m.memoBytes()
	c.mu.Lock()
	defer c.mu.Unlock()
	if size > c.memoMax {
		m.evicted = true
		return
	}
	m.head, m.size = head, size
	m.el = c.memoLRU.PushFront(m)
	c.memos[head] = append(c.memos[head], m)
	c.memoBytes += size
	c.shedMemos()
}

// shedMemos evicts the least recently used memories while they hold more than the
// share, then fits the main part to what is left (c.mu held).
func (c *MessageCache) shedMemos() {
	defer c.fitMain()
	for c.memoBytes > c.memoMax {
		el := c.memoLRU.Back()
		m := el.Value.(*bodyMemo)
		c.memoLRU.Remove(el)
		c.memoBytes -= m.size
		m.el, m.evicted = nil, true
		group := c.memos[m.head]
		for i, g := range group {
			if g == m {
				group = append(group[:i], group[i+1:]...)
				break
			}
		}
		if len(group) == 0 {
			delete(c.memos, m.head)
		} else {
			c.memos[m.head] = group
		}
	}
}

// getMany looks up each key (as get does, under one lock), putting the templates
// found into out (nil where missing).
func (c *MessageCache) getMany(keys []bodyKey, out []*msgTemplate) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for i, k := range keys {
		c.freq.Add(k.h1, k.h2)
		el, ok := c.entries[k]
		if !ok {
			c.misses.Add(1)
			out[i] = nil
			continue
		}
		e := el.Value.(*cacheEntry)
		c.segment(e).list.MoveToFront(el)
		c.hits.Add(1)
		out[i] = e.t
	}
}

// msgPrefix returns "messages.i", from the memory when it has the same message.
func msgPrefix(m *bodyMemo, i int) string {
	if m != nil && i < len(m.elems) && m.elems[i].prefix != "" {
		return m.elems[i].prefix
	}
	return "messages." + strconv.Itoa(i)
}

// bodyScan is where a request body's parts are (the fast path's scan, or the
// memory's and the scan of what is new), with the cache keys known so far.
type bodyScan struct {
	start, end int
	parts      bodyParts
	elems      []jsonscan.Span
	keys       []bodyKey // of elems[:len(keys)]; the build phase adds the rest
	sysKey     bodyKey   // the system value's key when known (kind 0 otherwise)
	memo       *bodyMemo // the memory the scan came from, nil when none
	kept       int       // how many messages, from the first, the memory had
	scanned    bool      // the scan came from the memory (scanFromMemo), not the fast path's
	prefixLen  int       // the common prefix of the body and memo.raw
	resumed    int       // how many messages the build took from a recycled session
}

// scanFromMemo finds the parts of data from m (locked; p its common prefix with
// data): the messages that end within the prefix are m's, the rest of the messages
// array is scanned, and what follows the array must equal m's. ok is false when the
// memory does not fit (the ordinary scan then runs).
func scanFromMemo(data []byte, m *bodyMemo, p int) (bodyScan, bool) {
	k := 0
	for k < len(m.elems) && m.elems[k].span.End <= p {
		k++
	}
	if k == 0 {
		return bodyScan{}, false
	}
	rest, closeAt, ok := jsonscan.ScanArrayRest(data, m.elems[k-1].span.End)
	delta := len(data) - len(m.raw)
	if !ok || closeAt-delta != m.msgs.End || !bytes.Equal(data[closeAt:], m.raw[m.msgs.End:]) {
		return bodyScan{}, false
	}
	sc := bodyScan{start: m.start, end: m.end + delta, memo: m, kept: k, scanned: true, prefixLen: p}
	sc.parts = bodyParts{start: m.start, end: m.end + delta, messages: jsonscan.Span{Start: m.msgs.Start, End: closeAt}}
	if sys := m.system; sys.End > 0 {
		if sys.Start > m.msgs.Start {
			sys = jsonscan.Span{Start: sys.Start + delta, End: sys.End + delta}
		}
		sc.parts.system, sc.sysKey = sys, m.sysKey
	}
	sc.elems = make([]jsonscan.Span, k, k+len(rest))
	sc.keys = make([]bodyKey, k, k+len(rest))
	for i, e := range m.elems[:k] {
		sc.elems[i], sc.keys[i] = e.span, e.key
	}
	sc.elems = append(sc.elems, rest...)
	return sc, true
}

// remember records the body data, read as sc says, in the cache's body memory:
// into sc.memo (locked) when the body kept at least half of its messages, else into
// a new memory for head (sc.memo, when set, is given back unchanged). It returns
// what the session keeps of it for Rewrite.
func (c *MessageCache) remember(head uint64, data []byte, sc *bodyScan) *memoRef {
	m, reused := sc.memo, 0
	if sc.scanned {
		reused = sc.kept
	}
	if m != nil && sc.kept*2 < len(m.elems) {
		c.returnMemo(m)
		m = nil
	}
	fresh := m == nil
	if fresh {
		m = &bodyMemo{}
		m.mu.Lock()
		sc.kept, sc.prefixLen = 0, 0
	}
	m.raw = append(m.raw[:min(sc.prefixLen, len(m.raw))], data[sc.prefixLen:]...)
	m.start, m.end, m.msgs = sc.start, sc.end, sc.parts.messages
	m.system, m.sysKey = jsonscan.Span{}, sc.sysKey
	if sc.parts.system.End > 0 && !jsonscan.Null(data[sc.parts.system.Start:sc.parts.system.End]) {
		m.system = sc.parts.system
	}
	kept := min(sc.kept, len(m.elems))
	m.elems = m.elems[:kept]
	for i := kept; i < len(sc.elems); i++ {
		m.elems = append(m.elems, memoElem{span: sc.elems[i], key: sc.keys[i], prefix: msgPrefix(nil, i)})
	}
	m.gen++
	if m.rw != nil && m.rw.end() <= sc.prefixLen {
		m.rw.gen = m.gen // its messages are this body's too
	} else {
		m.rw = nil
	}
	ref := &memoRef{m: m, gen: m.gen, kept: kept, reused: reused}
	if fresh {
		m.mu.Unlock()
		c.addMemo(head, m)
	} else {
		c.returnMemo(m)
	}
	return ref
}

// lockMemo returns the body memory the session was recorded in, locked, when it
// still holds this session's body (no later body of the conversation came since);
// nil otherwise, or when a read holds it.
func (s *Session) lockMemo() *bodyMemo {
	if s.memo == nil || !s.memo.m.mu.TryLock() {
		return nil
	}
	if m := s.memo.m; m.gen == s.memo.gen {
		return m
	}
	s.memo.m.mu.Unlock()
	return nil
}

// memoElemAt returns the index in m.elems of the message that starts at start (in
// the body), -1 when none does.
func memoElemAt(m *bodyMemo, start int) int {
	i := sort.Search(len(m.elems), func(i int) bool { return m.elems[i].span.Start >= start })
	if i < len(m.elems) && m.elems[i].span.Start == start {
		return i
	}
	return -1
}

// memoPatched returns the bytes Rewrite made of the message that starts at start
// when the memory m (locked; may be nil) has it with the same stubs (spec).
func memoPatched(m *bodyMemo, start int, spec []byte) ([]byte, bool) {
	if m == nil {
		return nil, false
	}
	if i := memoElemAt(m, start); i >= 0 && m.elems[i].patched != nil && bytes.Equal(m.elems[i].spec, spec) {
		return m.elems[i].patched, true
	}
	return nil, false
}

// memoPatch records in m (locked; may be nil) the bytes b Rewrite made of the
// message that starts at start with the stubs spec. It replaces the slice, never
// writes into the one it held: RewriteParts hands those bytes out as parts of a body
// the proxy may still be sending (TestRewritePartsStayValid).
func memoPatch(m *bodyMemo, start int, spec, b []byte) {
	if m == nil {
		return
	}
	if i := memoElemAt(m, start); i >= 0 {
		e := &m.elems[i]
		e.spec, e.patched = append(e.spec[:0], spec...), b
	}
}

// A conversation's requests carry the same stubs from one to the next (frozen
// stubs), in messages the next body repeats byte for byte. The memory keeps the
// last rewrite of its body (memoRewrite): the stubs and, per stubbed message, its
// span in the body and its patched bytes. A rewrite of the next body with exactly
// the same stubs, all of them in messages within the common prefix of the two
// bodies, is then those patched bytes between the new body's own bytes, made
// without grouping the stubs, looking up outputs or comparing specs: the same bytes
// rewriteCached makes, since the messages, their offsets and their keys are the
// previous body's (see bodyMemo's "Why the reused part needs no check").

// memoRewrite is the last rewrite of a memory's body (see above).
type memoRewrite struct {
	gen   uint64      // the memory's update it holds for (bodyMemo.gen)
	stubs []stubPair  // the stubs, in key order
	spans []patchSpan // the patched messages, in body order
}

// stubPair is one stub of a memoRewrite: the output key and the stub text.
type stubPair struct{ key, stub string }

// patchSpan is one patched message of a memoRewrite: its span in the body and
// the bytes that replace it (shared with the memory's memoElem.patched).
type patchSpan struct {
	start, end int
	b          []byte
}

// end returns where the last patched message ends in the body (0 when none).
func (rw *memoRewrite) end() int {
	if len(rw.spans) == 0 {
		return 0
	}
	return rw.spans[len(rw.spans)-1].end
}

// bytes is what rw holds beyond the patched bytes (the memory counts those in its
// elements).
func (rw *memoRewrite) bytes() int64 {
	n := int64(unsafe.Sizeof(memoRewrite{})) + int64(cap(rw.spans))*int64(unsafe.Sizeof(patchSpan{})) + int64(cap(rw.stubs))*int64(unsafe.Sizeof(stubPair{}))
	for _, p := range rw.stubs {
		n += int64(len(p.key) + len(p.stub))
	}
	return n
}

// repeatRewrite is rewriteCached from the memory's last rewrite (m locked, nil when
// none): ok when m holds a rewrite for this session's body with exactly stubs.
func (s *Session) repeatRewrite(m *bodyMemo, stubs map[string]string) (parts [][]byte, ok bool) {
	if m == nil || m.rw == nil || m.rw.gen != s.memo.gen || len(m.rw.stubs) != len(stubs) || len(s.units) != 1 {
		return nil, false
	}
	rw := m.rw
	for _, p := range rw.stubs {
		if stub, ok := stubs[p.key]; !ok || stub != p.stub {
			return nil, false
		}
	}
	parts = make([][]byte, 0, 2*len(rw.spans)+1)
	pos := 0
	for _, sp := range rw.spans {
		parts = appendPart(parts, s.raw[pos:sp.start])
		parts = appendPart(parts, sp.b)
		pos = sp.end
	}
	s.memo.repeats++
	return appendPart(parts, s.raw[pos:]), true
}

// noteRewrite records in m (locked; may be nil) the rewrite with stubs of this
// session's body whose patched messages elems holds (as rewriteCached builds it),
// for repeatRewrite.
func (s *Session) noteRewrite(m *bodyMemo, stubs map[string]string, elems map[int]map[int]*unitPatch) {
	if m == nil || len(s.units) != 1 {
		return
	}
	rw := &memoRewrite{gen: s.memo.gen, stubs: make([]stubPair, 0, len(stubs))}
	for _, k := range sortedKeys(stubs) {
		rw.stubs = append(rw.stubs, stubPair{k, stubs[k]})
	}
	base := s.units[0].start
	for _, p := range elems[0] {
		rw.spans = append(rw.spans, patchSpan{start: base + p.span.start, end: base + p.span.end, b: p.b})
	}
	sort.Slice(rw.spans, func(i, j int) bool { return rw.spans[i].start < rw.spans[j].start })
	m.rw = rw
}
