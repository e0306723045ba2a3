package transcript

import (
	"bytes"
	"encoding/json"
	"fmt"
	"sort"
	"strconv"
	"strings"
	"unsafe"

	"github.com/pruneadvisor/pruneadvisor/internal/jsonscan"

	"github.com/tidwall/gjson"
	"github.com/tidwall/sjson"
)

// PrunedPiece is the text Rewrite leaves in a further text block of a pruned
// Messages API tool result that carries a cache_control marker (see Rewrite).
const PrunedPiece = "[pruned]"

// setOpts makes sjson replace an existing value with one copy of the document
// (Optimistic); Rewrite checks first that every path exists. Not ReplaceInPlace: the
// session's raw bytes must stay as read.
var setOpts = &sjson.Options{Optimistic: true}

// Rewrite returns the session's original bytes with the text of each output named in
// stubs (keyed by ToolOutput.Key) replaced by the stub text. The stub goes into the
// first text piece of the result and the other text pieces are emptied, so the result
// slot, its call id, image blocks and cache markers stay where they were; every byte
// outside the replaced values is unchanged. In the Messages API shape (formats
// anthropic and claude-code), where the API rejects empty text blocks ("text content
// blocks must be non-empty"), the other text blocks of the result are removed
// instead, except one carrying a cache_control marker, which keeps its place and the
// marker with the text "[pruned]". It fails for an unknown key, an output the reader
// could not locate, or a located path the bytes do not hold (it never adds a key).
//
// Where the reader recorded the span of the message that carries an output (the
// request-body readers do), the output is patched inside that message's bytes, so a
// rewrite costs the size of the stubbed messages plus one copy of the document, not
// a pass over the whole document per stub. The bytes are the same either way.
//
// A session read with a MessageCache (Options.Cache) also remembers each stubbed
// message's patched bytes there, by the message's bytes and its stubs, so the same
// stubs on the next request of the session cost a lookup per message.
//
// After ReleaseBytes it fails with ErrReleased.
func (s *Session) Rewrite(stubs map[string]string) ([]byte, error) {
	parts, err := s.RewriteParts(stubs)
	if err != nil {
		return nil, err
	}
	return bytes.Join(parts, nil), nil
}

// RewriteParts is Rewrite without the copy: the rewritten bytes as consecutive parts
// (their concatenation is what Rewrite returns), most of them slices of the
// session's own bytes and of the patched messages its MessageCache keeps. A caller
// that sends the result on (the proxy, as the body it forwards) saves allocating and
// copying the whole document (for a 200,000-token request body, 844 KB a request).
// The parts share memory with the session and the cache: they must not be
// modified, and stay valid (the bytes they hold never change) after ReleaseBytes
// and after later rewrites. With no stubs it is the session's bytes as one part.
// Errors as Rewrite's.
func (s *Session) RewriteParts(stubs map[string]string) ([][]byte, error) {
	if s.released {
		return nil, fmt.Errorf("%s: rewrite: %w", s.Name, ErrReleased)
	}
	if len(stubs) == 0 {
		return [][]byte{s.raw}, nil
	}
	if s.cache != nil {
		if parts, ok := s.rewriteCached(stubs); ok {
			return parts, nil
		}
	}
	return s.rewrite(stubs)
}

// rewrite is Rewrite without the cache: each output is patched in turn, in key order.
func (s *Session) rewrite(stubs map[string]string) ([][]byte, error) {
	byKey := s.outputsByKey(nil)
	apiShape := s.Format == FormatAnthropic || s.Format == FormatClaudeCode
	// An output located inside a message is patched in that message's bytes alone,
	// spliced back into the unit below. An output located only in the unit is
	// patched in the whole unit (with the message patches so far spliced in); later
	// outputs of that unit are then patched there too.
	elems := map[int]map[int]*unitPatch{} // unit -> message start -> patch
	patched := map[int][]byte{}           // whole units
	for _, k := range sortedKeys(stubs) {
		o, ok := byKey[k]
		if !ok {
			return nil, fmt.Errorf("rewrite %s: no output %q", s.Name, k)
		}
		if o.unit == 0 || len(o.paths) == 0 {
			return nil, fmt.Errorf("rewrite %s: output %q cannot be located in the source", s.Name, k)
		}
		var err error
		_, isWhole := patched[o.unit-1]
		if rel, ok := o.relPaths(); ok && !isWhole {
			err = s.patchInMessage(elems, o, rel, stubs[k], apiShape)
		} else {
			err = s.patchInUnit(patched, elems, o, stubs[k], apiShape)
		}
		if err != nil {
			return nil, fmt.Errorf("rewrite %s: output %q%w", s.Name, k, err)
		}
	}
	return s.splice(patched, elems), nil
}

// outputsByKey indexes the session's outputs by key: those stubs names, or every
// one when stubs is nil.
func (s *Session) outputsByKey(stubs map[string]string) map[string]*ToolOutput {
	byKey := map[string]*ToolOutput{}
	for _, m := range s.Messages {
		for _, o := range m.Outputs {
			if _, stubbed := stubs[o.Key]; stubbed || stubs == nil {
				byKey[o.Key] = o
			}
		}
	}
	return byKey
}

// patchInMessage puts stub in for o in the bytes of o's message (rel: o's paths
// relative to it), kept in elems.
func (s *Session) patchInMessage(elems map[int]map[int]*unitPatch, o *ToolOutput, rel []string, stub string, apiShape bool) error {
	u := o.unit - 1
	if elems[u] == nil {
		elems[u] = map[int]*unitPatch{}
	}
	ep := elems[u][o.elem.start]
	if ep == nil {
		base := s.units[u].start
		ep = &unitPatch{span: o.elem, b: s.raw[base+o.elem.start : base+o.elem.end]}
		elems[u][o.elem.start] = ep
	}
	b, err := patchOutput(ep.b, rel, o.paths, stub, apiShape)
	if err != nil {
		return err
	}
	ep.b = b
	return nil
}

// patchInUnit puts stub in for o in the bytes of o's whole unit (the message patches
// of that unit so far spliced in first, then dropped from elems), kept in patched.
func (s *Session) patchInUnit(patched map[int][]byte, elems map[int]map[int]*unitPatch, o *ToolOutput, stub string, apiShape bool) error {
	u := o.unit - 1
	whole, isWhole := patched[u]
	if !isWhole {
		whole = s.unitBytes(u, elems[u])
		delete(elems, u)
	}
	b, err := patchOutput(whole, o.paths, o.paths, stub, apiShape)
	if err != nil {
		return err
	}
	patched[u] = b
	return nil
}

// splice is the session's bytes with each patched unit (patched: whole units;
// elems: message patches within a unit) in place of the original, as parts that
// share memory with raw and the patches (see RewriteParts).
func (s *Session) splice(patched map[int][]byte, elems map[int]map[int]*unitPatch) [][]byte {
	parts := make([][]byte, 0, 2*len(elems)+2*len(patched)+1)
	pos := 0
	for i, u := range s.units {
		b, ok := patched[i]
		if !ok && len(elems[i]) == 0 {
			continue
		}
		parts = appendPart(parts, s.raw[pos:u.start])
		if ok {
			parts = appendPart(parts, b)
		} else {
			parts = s.appendUnit(parts, i, elems[i])
		}
		pos = u.end
	}
	return appendPart(parts, s.raw[pos:])
}

// appendPart appends b to parts unless it is empty.
func appendPart(parts [][]byte, b []byte) [][]byte {
	if len(b) == 0 {
		return parts
	}
	return append(parts, b)
}

// stubGroup is the stubs that go into one message: its unit, its span in the unit
// and, per output, its paths relative to the message, its paths and its stub.
type stubGroup struct {
	unit   int
	span   unit
	pieces []stubPiece
}

type stubPiece struct {
	rel, paths []string
	stub       string
}

// rewriteCached is Rewrite through the session's MessageCache, for sessions whose
// stubbed outputs are all located in their messages. ok is false when it cannot
// rewrite that way or a patch fails: rewrite then does the work (and names the
// error, as it would have).
func (s *Session) rewriteCached(stubs map[string]string) (parts [][]byte, ok bool) {
	m := s.lockMemo()
	defer s.cache.returnMemo(m)
	if parts, ok := s.repeatRewrite(m, stubs); ok {
		return parts, true
	}
	groups, ok := s.stubGroups(stubs)
	if !ok {
		return nil, false
	}
	apiShape := s.Format == FormatAnthropic || s.Format == FormatClaudeCode
	elems := map[int]map[int]*unitPatch{}
	defer func() {
		if ok {
			s.noteRewrite(m, stubs, elems)
		}
	}()
	var spec []byte
	for _, g := range groups {
		spec = groupSpec(g, spec, apiShape)
		b, ok := memoPatched(m, s.units[g.unit].start+g.span.start, spec)
		if !ok {
			if b, ok = s.patchGroup(g, spec, apiShape); !ok {
				return nil, false
			}
			memoPatch(m, s.units[g.unit].start+g.span.start, spec, b)
		}
		if elems[g.unit] == nil {
			elems[g.unit] = map[int]*unitPatch{}
		}
		elems[g.unit][g.span.start] = &unitPatch{span: g.span, b: b}
	}
	return s.splice(nil, elems), true
}

// stubGroups groups the stubs by the message their output is in, in key order;
// false when an output is missing or not located within its message.
func (s *Session) stubGroups(stubs map[string]string) ([]*stubGroup, bool) {
	byKey := s.outputsByKey(stubs)
	var groups []*stubGroup
	byElem := map[[2]int]*stubGroup{}
	for _, k := range sortedKeys(stubs) {
		o := byKey[k]
		if o == nil || o.unit == 0 || len(o.paths) == 0 {
			return nil, false
		}
		rel, located := o.relPaths()
		if !located {
			return nil, false
		}
		at := [2]int{o.unit - 1, o.elem.start}
		g := byElem[at]
		if g == nil {
			g = &stubGroup{unit: o.unit - 1, span: o.elem}
			byElem[at] = g
			groups = append(groups, g)
		}
		g.pieces = append(g.pieces, stubPiece{rel, o.paths, stubs[k]})
	}
	return groups, true
}

// groupSpec returns the stubs of g as the cache keys them (spec: the stubs' paths
// and texts, after 'A' for the Messages API shape), built in spec's room.
func groupSpec(g *stubGroup, spec []byte, apiShape bool) []byte {
	spec = spec[:0]
	if apiShape {
		spec = append(spec, 'A')
	}
	for _, p := range g.pieces {
		for _, r := range p.rel {
			spec = append(spec, r...)
			spec = append(spec, 0)
		}
		spec = append(spec, 1)
		spec = append(spec, p.stub...)
		spec = append(spec, 2)
	}
	return spec
}

// patchGroup returns g's message with its stubs (spec, groupSpec) in, from the
// cache when the same message got the same stubs before (keyed by the message's
// bytes and spec); false when a patch fails.
func (s *Session) patchGroup(g *stubGroup, spec []byte, apiShape bool) ([]byte, bool) {
	base := s.units[g.unit].start
	msg := s.raw[base+g.span.start : base+g.span.end]
	k := patchKey(msg, spec)
	if t := s.cache.get(k); t != nil {
		return t.patched, true
	}
	b := msg
	for _, p := range g.pieces {
		var err error
		if b, err = patchOutput(b, p.rel, p.paths, p.stub, apiShape); err != nil {
			return nil, false
		}
	}
	t := &msgTemplate{patched: b}
	t.size = templateBytes(t)
	s.cache.put(k, t)
	return b, true
}

// unitPatch is the patched bytes of the value at span (relative to its unit).
type unitPatch struct {
	span unit
	b    []byte
}

// relPaths returns o's paths relative to its message (see ToolOutput.elem); ok is
// false when the message's span is not known or a path does not start in it.
func (o *ToolOutput) relPaths() (rel []string, ok bool) {
	if o.elem.end <= o.elem.start || o.elemPath == "" {
		return nil, false
	}
	rel = make([]string, len(o.paths))
	for i, p := range o.paths {
		r, found := strings.CutPrefix(p, o.elemPath+".")
		if !found || r == "" {
			return nil, false
		}
		rel[i] = r
	}
	return rel, true
}

// unitBytes returns unit u's bytes with the message patches spliced in.
func (s *Session) unitBytes(u int, patches map[int]*unitPatch) []byte {
	if len(patches) == 0 {
		return s.raw[s.units[u].start:s.units[u].end]
	}
	return bytes.Join(s.appendUnit(nil, u, patches), nil)
}

// appendUnit appends unit u's bytes to parts, the message patches spliced in.
func (s *Session) appendUnit(parts [][]byte, u int, patches map[int]*unitPatch) [][]byte {
	starts := make([]int, 0, len(patches))
	for st := range patches {
		starts = append(starts, st)
	}
	sort.Ints(starts)
	raw := s.raw[s.units[u].start:s.units[u].end]
	pos := 0
	for _, st := range starts {
		p := patches[st]
		parts = appendPart(parts, raw[pos:p.span.start])
		parts = appendPart(parts, p.b)
		pos = p.span.end
	}
	return appendPart(parts, raw[pos:])
}

// patchOutput puts stub into the value b holds at ops[0] and empties or removes
// the other pieces ops names (see Rewrite). paths are the same pieces as named in
// errors. The error, when not nil, reads as a suffix of "output %q".
func patchOutput(b []byte, ops, paths []string, stub string, apiShape bool) ([]byte, error) {
	for i, p := range ops {
		if !existsIn(b, p) {
			return nil, fmt.Errorf(": no value at %s in the source", paths[i])
		}
	}
	// Last piece first: removing a block shifts only the blocks after it.
	for i := len(ops) - 1; i >= 0; i-- {
		p := ops[i]
		var err error
		switch block, isBlock := strings.CutSuffix(p, ".text"); {
		case i == 0:
			b, err = setString(b, p, stub)
		case !apiShape || !isBlock:
			b, err = setString(b, p, "")
		case existsIn(b, block+".cache_control"):
			b, err = setString(b, p, PrunedPiece)
		default:
			b, err = sjson.DeleteBytes(b, block)
		}
		if err != nil {
			return nil, fmt.Errorf(" at %s: %w", paths[i], err)
		}
	}
	return b, nil
}

// setString returns a copy of b with the value at the gjson path p replaced by the
// JSON string s: the bytes sjson.SetBytesOptions(b, p, s, setOpts) returns, without
// its gjson walk, which unescapes and copies the value it replaces (a 10 KB tool
// result). Where spanAt cannot answer as gjson would, or the path names nothing,
// sjson does it. b is not written to.
func setString(b []byte, p, s string) ([]byte, error) {
	start, end, found, exact := spanAt(b, p)
	if !exact || !found || start == 0 {
		return sjson.SetBytesOptions(b, p, s, setOpts)
	}
	out := make([]byte, 0, len(b)-(end-start)+len(s)+2)
	out = append(out, b[:start]...)
	out = appendStringify(out, s)
	return append(out, b[end:]...), nil
}

// appendStringify appends s as a JSON string, byte for byte as sjson writes a string
// value: quoted as is when it holds only bytes from ' ' to 0x7f other than '"' and
// the backslash, else in encoding/json's encoding (HTML characters escaped).
func appendStringify(buf []byte, s string) []byte {
	for i := 0; i < len(s); i++ {
		if c := s[i]; c < ' ' || c > 0x7f || c == '"' || c == '\\' {
			q, _ := json.Marshal(s) // a string always encodes
			return append(buf, q...)
		}
	}
	buf = append(buf, '"')
	buf = append(buf, s...)
	return append(buf, '"')
}

// existsIn reports whether the gjson path p names a value in the JSON b. Unlike
// gjson.GetBytes(b, p).Exists() it copies nothing (GetBytes copies the value it finds,
// and its walk unescapes a string value it ends on), and b is not written to.
func existsIn(b []byte, p string) bool {
	if _, _, found, exact := spanAt(b, p); exact {
		return found
	}
	return gjson.Get(unsafe.String(unsafe.SliceData(b), len(b)), p).Exists()
}

// spanAt finds the value the gjson path p names in the valid JSON b, as gjson.Get
// does, without decoding anything: the value's bytes are b[start:end] (gjson's
// Result.Index and the length of its Raw), found is false when p names nothing.
// exact is false, and the other results mean nothing, when p or b is outside what it
// reads as gjson does: a path component other than a key of ASCII letters, digits
// and '_' (gjson's syntax: wildcards, escapes, '#', '@', '|' ...), a component on an
// array that starts with a digit but is not a number of at most 9 digits without a
// leading zero, or an object key with an escape in it (gjson compares such keys
// unescaped), or b not starting with an object or array. Like gjson, a key that occurs twice is
// followed into each occurrence in turn until the rest of the path is found.
// TestSpanAtMatchesGjson and FuzzSpanAt compare it with gjson.
func spanAt(b []byte, p string) (start, end int, found, exact bool) {
	for rest, more := p, true; more; {
		var c string
		c, rest, more = strings.Cut(rest, ".")
		if !simpleComponent(c) {
			return 0, 0, false, false
		}
	}
	i := jsonscan.SkipSpace(b, 0)
	if i >= len(b) || (b[i] != '{' && b[i] != '[') {
		return 0, 0, false, false // gjson looks for the first bracket wherever it is
	}
	return spanFrom(b, i, p)
}

// simpleComponent reports whether c is a path component spanAt reads: a non-empty
// key of ASCII letters, digits and '_'.
func simpleComponent(c string) bool {
	if c == "" {
		return false
	}
	for i := 0; i < len(c); i++ {
		switch ch := c[i]; {
		case ch >= 'a' && ch <= 'z', ch >= 'A' && ch <= 'Z', ch >= '0' && ch <= '9', ch == '_':
		default:
			return false
		}
	}
	return true
}

// spanFrom is spanAt for the value that starts at b[i] and the rest of the path p
// (checked by spanAt).
func spanFrom(b []byte, i int, p string) (start, end int, found, exact bool) {
	if p == "" {
		end = jsonscan.SkipValue(b, i)
		return i, end, end > i, true
	}
	c, rest, _ := strings.Cut(p, ".")
	if i >= len(b) {
		return 0, 0, false, true
	}
	switch b[i] {
	case '{':
		return spanInObject(b, i, c, rest)
	case '[':
		return spanInArray(b, i, c, rest)
	}
	return 0, 0, false, true
}

// spanInObject is spanFrom for the object at b[i], its key c and the path rest
// after it: each member keyed c is followed in turn, as gjson does.
func spanInObject(b []byte, i int, c, rest string) (start, end int, found, exact bool) {
	exact = true
	jsonscan.Members(b, i, func(k, v jsonscan.Span) bool {
		key := b[k.Start+1 : k.End-1]
		if bytes.IndexByte(key, '\\') >= 0 {
			exact = false
			return false
		}
		if string(key) != c {
			return true
		}
		start, end, found, exact = spanFrom(b, v.Start, rest)
		return exact && !found
	})
	return start, end, found && exact, exact
}

// spanInArray is spanFrom for the array at b[i], its index c and the path rest
// after it.
func spanInArray(b []byte, i int, c, rest string) (start, end int, found, exact bool) {
	if c[0] < '0' || c[0] > '9' {
		return 0, 0, false, true // gjson: a key on an array names nothing
	}
	if (len(c) > 1 && c[0] == '0') || len(c) > 9 {
		return 0, 0, false, false
	}
	n, err := strconv.Atoi(c)
	if err != nil {
		return 0, 0, false, false // a letter after a digit: gjson's parseUint fails too, but say so
	}
	exact = true
	jsonscan.Elements(b, i, func(v jsonscan.Span) bool {
		if n > 0 {
			n--
			return true
		}
		start, end, found, exact = spanFrom(b, v.Start, rest)
		return false
	})
	return start, end, found && exact, exact
}
