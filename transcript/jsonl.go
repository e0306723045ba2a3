package transcript

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"slices"

	"github.com/pruneadvisor/pruneadvisor/internal/jsonscan"
)

// Helpers shared by the JSONL readers (Claude Code, pi, Codex CLI): splitting lines,
// lenient skipping, the head lines detectors look at, and the session tree of
// Claude Code and pi.

// jsonlLine is one non-blank physical line: its 1-based number and the byte span of
// its content (surrounding blanks, a trailing \r and a leading BOM excluded). Lines
// end at \n (or \r\n), or at \r in a file of CR-only line ends (lineSep), so a file
// reads the same in every command whichever it uses.
type jsonlLine struct {
	no         int
	start, end int
}

// jsonlSplit splits data into non-blank lines.
func jsonlSplit(data []byte) []jsonlLine {
	var out []jsonlLine
	no := 0
	sep := lineSep(data)
	for pos := 0; pos < len(data); {
		no++
		end, next := len(data), len(data)
		if i := bytes.IndexByte(data[pos:], sep); i >= 0 {
			end, next = pos+i, pos+i+1
		}
		if s, e := trimLine(data[pos:end], no); s < e {
			out = append(out, jsonlLine{no: no, start: pos + s, end: pos + e})
		}
		pos = next
	}
	return out
}

// trimLine returns the span [s, e) of line (line number no, without its end) that
// holds content: without a UTF-8 byte order mark on line 1 and without the JSON
// blanks around it; s == e for a blank line.
func trimLine(line []byte, no int) (s, e int) {
	s, e = 0, len(line)
	if no == 1 && bytes.HasPrefix(line, []byte("\xef\xbb\xbf")) {
		s += 3
	}
	for s < e && jsonscan.IsSpace(line[s]) {
		s++
	}
	for e > s && jsonscan.IsSpace(line[e-1]) {
		e--
	}
	return s, e
}

// lineSep is the byte lines of data end with: '\n', or '\r' for a file without any
// '\n' that has a '\r' (old Mac line ends). JSON text never holds a raw CR inside a
// string, so such a file splits the same way; a CRLF file splits at the LF and its
// CRs are trimmed as blanks.
func lineSep(data []byte) byte {
	if bytes.IndexByte(data, '\n') < 0 && bytes.IndexByte(data, '\r') >= 0 {
		return '\r'
	}
	return '\n'
}

// jsonlSkip handles a malformed line: in strict mode it returns the *ParseError; in
// lenient mode it counts the line in Skipped, records a warning and returns nil.
func jsonlSkip(b *builder, name string, opts Options, line int, field, msg string) error {
	pe := &ParseError{File: name, Line: line, Field: field, Msg: msg}
	if !opts.Lenient {
		return pe
	}
	b.s.Skipped++
	if field != "" {
		b.warn("line %d: skipped: field %s: %s", line, field, msg)
	} else {
		b.warn("line %d: skipped: %s", line, msg)
	}
	return nil
}

// jsonlHeadLines returns up to n non-blank lines of head (the last may be cut
// short). A torn line (jsonlMend) gives the whole records in it instead, each as a
// line, so that a record cut short at the top of a file hides its format no more
// than it hides the records after it from the reader.
func jsonlHeadLines(head []byte, n int) [][]byte {
	var out [][]byte
	sep := lineSep(head)
	for len(head) > 0 && len(out) < n {
		line := head
		if i := bytes.IndexByte(head, sep); i >= 0 {
			line, head = head[:i], head[i+1:]
		} else {
			head = nil
		}
		t := bytes.TrimSpace(line)
		if len(t) == 0 {
			continue
		}
		if json.Valid(t) {
			out = append(out, t)
			continue
		}
		pieces := jsonlMend(t)
		if pieces == nil {
			out = append(out, t)
		}
		for _, p := range pieces {
			if p.whole && len(out) < n {
				out = append(out, t[p.Start:p.End])
			}
		}
	}
	return out
}

// jsonlUntorn returns the first whole record of line when the line is torn
// (jsonlMend: a record cut short, whole records after it), else line.
func jsonlUntorn(line []byte) []byte {
	if json.Valid(line) {
		return line
	}
	for _, p := range jsonlMend(line) {
		if p.whole {
			return line[p.Start:p.End]
		}
	}
	return line
}

// treeNode is one entry of a session tree (Claude Code uuid/parentUuid, pi v2+
// id/parentId), in file order.
type treeNode struct {
	id     string // "" when the entry has none (it is then outside the tree and kept)
	parent string // "" for a root
	// benign entries never start a branch of their own: tool results, continuation
	// lines of an assistant message, bookkeeping lines.
	benign bool
}

// jsonlTree decides which entries of a session tree stay. It keeps file order and
// drops only branches a rewind abandoned.
//
// A node with several children forks. A child whose whole subtree is benign (a
// tool_result line of a parallel call, a continuation line of the same assistant
// message) is never a branch. When two or more children lead to non-benign entries,
// the user went back and started over at that point: the child on the path from the
// final leaf back to the root stays (or, when that path does not pass the fork — it
// can be cut by a skipped line or a compaction — the child latest in the file), and
// the others are dropped with everything below them. Roots count as children of one
// virtual fork only when rootFork is set (pi: a reset to before the first entry);
// Claude Code starts sidechains and compactions at new roots, so they are kept.
//
// It returns keep (per node), how many nodes were dropped, and how many were left out
// of the decision because they sit on (or below) a parent cycle; those are kept. It
// never recurses, so deep chains cannot overflow the stack.
func jsonlTree(nodes []treeNode, leaf int, rootFork bool) (keep []bool, dropped, cyclic int) {
	t := newForkTree(nodes)
	for i := leaf; i >= 0 && i < len(nodes) && !t.onPath[i]; i = t.parent[i] {
		t.onPath[i] = true
	}
	t.markSubtrees()
	for i := range nodes {
		if t.state[i] == 2 && len(t.children[i]) > 1 {
			t.decide(t.children[i])
		}
	}
	if rootFork {
		t.decide(t.roots)
	}
	for i, nd := range nodes {
		if nd.id != "" && t.state[i] == 0 {
			cyclic++
		}
	}
	return t.keep, t.dropped, cyclic
}

// forkTree is jsonlTree's working state, indexed by node.
type forkTree struct {
	nodes    []treeNode
	parent   []int // the parent's index; -1 for a root, a node whose parent is lost, or one outside the tree
	children [][]int
	roots    []int   // the nodes without a parent
	starts   []int   // the roots and the nodes whose parent is lost or themselves: where markSubtrees walks from
	onPath   []bool  // on the path from the final leaf back to the root
	sub      []bool  // the subtree holds a non-benign node
	state    []uint8 // markSubtrees' walk: 0 not reached (a cycle), 1 entered, 2 done
	keep     []bool  // jsonlTree's answer
	dropped  int     // the nodes drop left out
	stack    []int   // the walks' stack, reused
}

// newForkTree links every node with an id to its parent (the first node with the
// parent's id), all kept.
func newForkTree(nodes []treeNode) *forkTree {
	n := len(nodes)
	t := &forkTree{nodes: nodes, parent: make([]int, n), children: make([][]int, n), onPath: make([]bool, n),
		sub: make([]bool, n), state: make([]uint8, n), keep: make([]bool, n)}
	for i := range t.keep {
		t.keep[i] = true
	}
	index := make(map[string]int, n)
	for i, nd := range nodes {
		if nd.id != "" {
			if _, dup := index[nd.id]; !dup {
				index[nd.id] = i
			}
		}
	}
	for i, nd := range nodes {
		t.parent[i] = -1
		if nd.id == "" {
			continue
		}
		p, ok := index[nd.parent]
		switch {
		case nd.parent == "":
			t.roots = append(t.roots, i)
			t.starts = append(t.starts, i)
		case !ok || p == i:
			t.starts = append(t.starts, i) // parent lost (skipped line) or self-parented
		default:
			t.parent[i] = p
			t.children[p] = append(t.children[p], i)
		}
	}
	return t
}

// markSubtrees sets sub for every node reachable from starts, in an iterative
// post-order walk (state 2 when done); nodes on a parent cycle stay at state 0.
func (t *forkTree) markSubtrees() {
	for _, s := range t.starts {
		t.stack = append(t.stack[:0], s)
		for len(t.stack) > 0 {
			top := t.stack[len(t.stack)-1]
			if t.state[top] == 0 {
				t.state[top] = 1
				t.stack = append(t.stack, t.children[top]...)
				continue
			}
			t.stack = t.stack[:len(t.stack)-1]
			if t.state[top] == 1 {
				t.state[top] = 2
				s := !t.nodes[top].benign
				for _, c := range t.children[top] {
					s = s || t.sub[c]
				}
				t.sub[top] = s
			}
		}
	}
}

// decide keeps one of the children kids of a fork that lead to non-benign
// entries, when there are two or more: the one on the leaf's path, else the last;
// the others are dropped.
func (t *forkTree) decide(kids []int) {
	var cand []int
	for _, k := range kids {
		if t.sub[k] {
			cand = append(cand, k)
		}
	}
	if len(cand) < 2 {
		return
	}
	stay := cand[len(cand)-1]
	for _, k := range cand {
		if t.onPath[k] {
			stay = k
		}
	}
	for _, k := range cand {
		if k != stay {
			t.drop(k)
		}
	}
}

// drop leaves out root and everything below it.
func (t *forkTree) drop(root int) {
	t.stack = append(t.stack[:0], root)
	for len(t.stack) > 0 {
		top := t.stack[len(t.stack)-1]
		t.stack = t.stack[:len(t.stack)-1]
		if !t.keep[top] {
			continue
		}
		t.keep[top] = false
		t.dropped++
		t.stack = append(t.stack, t.children[top]...)
	}
}

// jsonlEach reads r line by line (lines end at '\n') and calls fn with each
// non-blank line as jsonlSplit splits a file held whole: its number, its content's
// offsets in the stream and the content. With fresh, each content is a new slice fn
// may keep; without, the buffer is reused for the next line. It returns fn's error
// or the read's.
func jsonlEach(r io.Reader, fresh bool, fn func(ln jsonlLine, line []byte) error) error {
	br := bufio.NewReaderSize(r, 64<<10)
	var buf []byte
	no, off := 0, 0
	for {
		buf = buf[:0]
		var err error
		for {
			var piece []byte
			piece, err = br.ReadSlice('\n')
			buf = append(buf, piece...)
			if err != bufio.ErrBufferFull {
				break
			}
		}
		if err != nil && err != io.EOF {
			return err
		}
		if len(buf) == 0 && err == io.EOF {
			return nil
		}
		no++
		content := buf
		if content[len(content)-1] == '\n' {
			content = content[:len(content)-1]
		}
		if s, e := trimLine(content, no); s < e {
			line := content[s:e:e]
			if fresh {
				line = bytes.Clone(line)
			}
			if ferr := fn(jsonlLine{no: no, start: off + s, end: off + e}, line); ferr != nil {
				return ferr
			}
		}
		off += len(buf)
		if err == io.EOF {
			return nil
		}
	}
}

// jsonlPiece is one piece of a line that does not parse as a whole (jsonlMend): a
// whole JSON object, or a fragment (a record cut short, or other bytes that are not
// a whole object).
type jsonlPiece struct {
	jsonscan.Span
	whole bool
}

// jsonlMend splits a line that does not parse into its whole JSON objects and the
// fragments between them. A Claude Code, pi or Codex process killed mid-write
// leaves a record cut short, and the next process appends its record to the same
// line: {"type":"pr-link","prNu{"parentUuid":…}. A fragment ends where the earliest
// `{"` (or `{}`) after it starts whole objects that run to the end of the line and
// the fragment itself could not have an object (jsonlResume). It returns nil when
// the line holds no whole object (every byte one fragment: the line is skipped as
// before) or is one whole object (what is wrong with it is not its syntax).
// Callers use it only on a line that failed to parse, so a normal line costs
// nothing more.
func jsonlMend(line []byte) []jsonlPiece {
	var pieces []jsonlPiece
	found := false
	for i := jsonscan.SkipSpace(line, 0); i < len(line); {
		if e, ok := jsonlWhole(line, i); ok && jsonlTail(line, e) {
			pieces = append(pieces, jsonlPiece{jsonscan.Span{Start: i, End: e}, true})
			found = true
			i = jsonscan.SkipSpace(line, e)
			continue
		}
		j := jsonlResume(line, i)
		e := j
		for e > i && jsonscan.IsSpace(line[e-1]) {
			e--
		}
		pieces = append(pieces, jsonlPiece{jsonscan.Span{Start: i, End: e}, false})
		i = j
	}
	if !found || len(pieces) == 1 {
		return nil
	}
	return pieces
}

// jsonlResume returns the index of the earliest `{"` or `{}` after the fragment
// that starts at line[start] where whole objects run to the end of line
// (jsonlRest), or len(line). It reads the fragment as JSON as it goes (strings,
// brackets, the last token), and passes over a `{` where the fragment itself may
// have an object: a value after a colon, an array's element. A line cut short just
// after one of its own objects (a redaction tool cuts lines so) then yields no
// record, where taking that object for one would invent a record; the next record
// of a torn write starts where the fragment cannot have a `{`: inside one of its
// strings (the common case: most of a record is strings), after a key, a value, or
// an object's `{` or comma.
func jsonlResume(line []byte, start int) int {
	tries := 0 // candidates checked to the line's end: at most jsonlTries
	starts := func(p int) bool {
		q := jsonscan.SkipSpace(line, p+1)
		if q >= len(line) || line[q] != '"' && line[q] != '}' {
			return false
		}
		tries++
		return jsonlRest(line, p)
	}
	inStr, esc := false, false
	var last byte    // the fragment's last token outside strings: one of {[:,]} or 'v' (a scalar or string)
	var stack []byte // the fragment's open brackets
	for p := start; p < len(line); p++ {
		c := line[p]
		if inStr {
			switch {
			case esc:
				esc = false
			case c == '\\':
				esc = true
			case c == '"':
				inStr, last = false, 'v'
			case c == '{' && p > start && starts(p):
				return p // inside one of the fragment's strings
			}
			if tries >= jsonlTries {
				return len(line)
			}
			continue
		}
		switch c {
		case '"':
			inStr = true
		case '{':
			valuePos := last == ':' || last == '[' || last == ',' && len(stack) > 0 && stack[len(stack)-1] == '['
			if p > start && !valuePos && starts(p) {
				return p
			}
			if tries >= jsonlTries {
				return len(line)
			}
			stack, last = append(stack, '{'), '{'
		case '[':
			stack, last = append(stack, '['), '['
		case '}', ']':
			if len(stack) > 0 {
				stack = stack[:len(stack)-1]
			}
			last = 'v'
		case ':', ',':
			last = c
		case ' ', '\t', '\n', '\r':
		default:
			last = 'v'
		}
	}
	return len(line)
}

// jsonlTries bounds the candidates jsonlResume checks on one line, each a scan to
// the line's end at worst: a torn record's fragment is a valid JSON prefix, where a
// candidate is rare (a `{` that ends a string), so the next record is among the
// first few; a line crafted with many costs at most this many scans.
const jsonlTries = 16

// jsonlRest reports whether line[i:] is whole JSON objects separated by blanks. The
// objects' extents are found first and checked only when they all fit, so an
// object of a fragment (followed by a comma or a bracket) costs one scan.
func jsonlRest(line []byte, i int) bool {
	var spans []jsonscan.Span
	for i < len(line) {
		if line[i] != '{' {
			return false
		}
		e := jsonscan.SkipValue(line, i)
		if e < 0 || !jsonlTail(line, e) {
			return false
		}
		spans = append(spans, jsonscan.Span{Start: i, End: e})
		i = jsonscan.SkipSpace(line, e)
	}
	for _, s := range spans {
		if !json.Valid(line[s.Start:s.End]) {
			return false
		}
	}
	return len(spans) > 0
}

// jsonlWhole reports whether a valid JSON object starts at line[i], and its end.
func jsonlWhole(line []byte, i int) (end int, ok bool) {
	if line[i] != '{' {
		return 0, false
	}
	e := jsonscan.SkipValue(line, i)
	if e < 0 || !json.Valid(line[i:e]) {
		return 0, false
	}
	return e, true
}

// jsonlTail reports whether what follows an object ending at e may follow a record:
// the line's end, or (after blanks) another object.
func jsonlTail(line []byte, e int) bool {
	e = jsonscan.SkipSpace(line, e)
	return e == len(line) || line[e] == '{'
}

// jsonlTornMsg is the skip message of a fragment that whole records follow on its
// line: what a process killed mid-write leaves.
func jsonlTornMsg(frag jsonscan.Span) string {
	return fmt.Sprintf("a record cut short (%d bytes at column %d), the next record written after it on the same line", frag.End-frag.Start, frag.Start+1)
}

// jsonlQueue yields a file's lines in order (pop), with the records mended out of
// a torn line (push, jsonlMended) next, so a file of many torn lines costs no more
// than their records.
type jsonlQueue struct {
	lines []jsonlLine // the file's lines not yet popped
	next  []jsonlLine // pushed records, popped before lines
}

// pop returns the next line; false when there is none.
func (q *jsonlQueue) pop() (jsonlLine, bool) {
	var ln jsonlLine
	switch {
	case len(q.next) > 0:
		ln, q.next = q.next[0], q.next[1:]
	case len(q.lines) > 0:
		ln, q.lines = q.lines[0], q.lines[1:]
	default:
		return ln, false
	}
	return ln, true
}

// push makes ls the next lines pop returns, in order.
func (q *jsonlQueue) push(ls []jsonlLine) {
	q.next = append(slices.Clip(ls), q.next...)
}

// jsonlMended handles a line ln (content raw) that failed to parse with problem: it
// returns the lines of the whole records jsonlMend finds in it (each a jsonlLine of
// the same number spanning one record), having passed each fragment's message to
// skip (which counts and warns in lenient mode and returns the *ParseError in
// strict mode; its error ends the read). A line without a whole record goes to skip
// with problem, as before.
func jsonlMended(ln jsonlLine, raw []byte, problem string, skip func(msg string) error) ([]jsonlLine, error) {
	pieces := jsonlMend(raw)
	if pieces == nil {
		return nil, skip(problem)
	}
	var out []jsonlLine
	for k, pc := range pieces {
		if pc.whole {
			out = append(out, jsonlLine{no: ln.no, start: ln.start + pc.Start, end: ln.start + pc.End})
			continue
		}
		msg := problem
		if k+1 < len(pieces) {
			msg = jsonlTornMsg(pc.Span)
		}
		if err := skip(msg); err != nil {
			return nil, err
		}
	}
	return out, nil
}
