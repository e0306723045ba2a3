package transcript

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"regexp"
	"strings"

	"github.com/pruneadvisor/pruneadvisor/internal/jsonscan"
	"github.com/pruneadvisor/pruneadvisor/toolcall"
)

// pi coding agent session files (TRANSCRIPT-FORMATS.md §2): line 1 is the header
// {type:"session", id, cwd, version?…}; then entries {type:"message", message{role…}},
// model_change, thinking_level_change, compaction{summary}, branch_summary{summary},
// custom, custom_message{content}, label, session_info. v1 files are a linear list; v2
// and v3 entries carry id/parentId and form a tree (the reader keeps file order and
// drops only abandoned branches, as for Claude Code: see jsonlTree). Some lines hold
// two JSON objects back to back, so each line is decoded as a stream and each object
// is its own unit.
//
// Message roles: user{content: string | [text|image]}; assistant{content[text |
// thinking | toolCall{id,name,arguments}]}; toolResult{toolCallId, toolName,
// content[text|image], details, isError}; bashExecution{command, output, exitCode…}
// (the user's own !command: a Meta user message, not a tool call); custom and hookMessage
// (extension messages), branchSummary and compactionSummary: Meta user messages.

// piEntry is one JSON object of a pi file. Identifiers and payloads stay raw so that
// odd values never fail an entry the reader would not use.
type piEntry struct {
	Type                                string
	ID, ParentID, Cwd, Message, Summary json.RawMessage
	Content, Timestamp                  json.RawMessage
	// FirstKeptIndex and FirstKeptID are a compaction entry's firstKeptEntryIndex
	// (v1) and firstKeptEntryId (v2 on): where the tail it kept starts.
	FirstKeptIndex, FirstKeptID json.RawMessage
}

// piDecodeEntry decodes one object (keys matched exactly, see apiObject).
func piDecodeEntry(raw []byte) (piEntry, *jsonscan.FieldError) {
	obj, problem := jsonscan.Object(raw)
	if problem != "" {
		return piEntry{}, fieldErr("", problem)
	}
	e := piEntry{ID: obj["id"], ParentID: obj["parentId"], Cwd: obj["cwd"], Message: obj["message"], Summary: obj["summary"], Content: obj["content"], Timestamp: obj["timestamp"],
		FirstKeptIndex: obj["firstKeptEntryIndex"], FirstKeptID: obj["firstKeptEntryId"]}
	if err := jsonscan.Field(obj, "type", "", &e.Type); err != nil {
		return piEntry{}, jsonscan.AsFieldError(err, "type")
	}
	return e, nil
}

// piMessage is the message of a "message" entry.
type piMessage struct {
	Role               string
	Content, Details   json.RawMessage
	ToolCallID         string
	IsError            bool
	Command, Output    string
	ExitCode           *float64
	Cancelled          bool
	Truncated          bool
	FullOutputPath     string
	ExcludeFromContext bool
	Summary            string
}

// piDecodeMessage decodes a message entry's message object.
func piDecodeMessage(raw json.RawMessage) (*piMessage, error) {
	obj, problem := jsonscan.Object(raw)
	if problem != "" {
		if jsonscan.Null(raw) {
			problem = "a message entry without a message object"
		}
		return nil, fieldErr("message", problem)
	}
	m := &piMessage{Content: obj["content"], Details: obj["details"]}
	var exit float64
	err := jsonscan.Fields(obj, "message",
		jsonscan.F{Key: "role", Dst: &m.Role}, jsonscan.F{Key: "toolCallId", Dst: &m.ToolCallID}, jsonscan.F{Key: "isError", Dst: &m.IsError},
		jsonscan.F{Key: "command", Dst: &m.Command}, jsonscan.F{Key: "output", Dst: &m.Output}, jsonscan.F{Key: "exitCode", Dst: &exit},
		jsonscan.F{Key: "cancelled", Dst: &m.Cancelled}, jsonscan.F{Key: "truncated", Dst: &m.Truncated}, jsonscan.F{Key: "fullOutputPath", Dst: &m.FullOutputPath},
		jsonscan.F{Key: "excludeFromContext", Dst: &m.ExcludeFromContext}, jsonscan.F{Key: "summary", Dst: &m.Summary})
	if err != nil {
		return nil, err
	}
	if !jsonscan.Null(obj["exitCode"]) {
		m.ExitCode = &exit
	}
	return m, nil
}

// piObj is one decoded object of the file.
type piObj struct {
	line  int
	entry int // index among the file's entries, the header 0 (pi's firstKeptEntryIndex)
	// kept is, for a compaction entry, the entry its kept tail starts at (piKept
	// codes when negative); set in the first pass, where the entries' ids are known.
	kept int32
	e    piEntry
	m    *piMessage // for message entries
	unit int        // unit of the object, -1 when it holds no tool result
	node int        // index into the tree nodes, -1 outside the tree
}

// readPi reads a pi session file, any version, held whole in data.
func readPi(name string, data []byte, opts Options) (*Session, error) {
	p := newPiScan(newBuilder(FormatPi, name, data), opts)
	var objs []*piObj
	for _, ln := range jsonlSplit(data) {
		if err := p.line(ln, data[ln.start:ln.end], func(o *piObj, _ jsonscan.Span) { objs = append(objs, o) }); err != nil {
			return nil, err
		}
	}
	keep := p.tree()
	for i, o := range objs {
		objs[i] = nil // each object goes once its message is built: a large file's are not all held beside the messages
		if err := p.add(o, keep); err != nil {
			return nil, err
		}
	}
	return p.b.finish()
}

// readPiStream reads a pi session file from the start of f in two passes over its
// lines, holding one line at a time beside the session: the first decodes every
// entry (as readPi does, with the same errors and warnings) but keeps only its place
// in the entry tree; once the tree has decided which branch stays, the second reads
// the lines again and builds the kept entries' messages. The session's units point
// at file offsets but it holds no bytes (it is released: no Rewrite). The file must
// not change between the passes: a line found elsewhere fails the read.
func readPiStream(name string, f io.ReadSeeker, opts Options) (*Session, error) {
	p := newPiScan(newBuilder(FormatPi, name, nil), opts)
	var fates []piFate
	err := jsonlEach(f, false, func(ln jsonlLine, line []byte) error {
		return p.line(ln, line, func(o *piObj, v jsonscan.Span) {
			fates = append(fates, piFate{line: int32(o.line), entry: int32(o.entry), kept: o.kept, unit: int32(o.unit), node: int32(o.node), start: int32(v.Start), end: int32(v.End)})
		})
	})
	if err != nil {
		return nil, err
	}
	keep := p.tree()
	if _, err := f.Seek(0, io.SeekStart); err != nil {
		return nil, fmt.Errorf("%s: read session again: %w", name, err)
	}
	changed := func(line int) error { return fmt.Errorf("%s: line %d: the file changed while it was read", name, line) }
	next := 0
	err = jsonlEach(f, true, func(ln jsonlLine, line []byte) error {
		for ; next < len(fates) && int(fates[next].line) <= ln.no; next++ {
			fa := fates[next]
			if int(fa.line) != ln.no || int(fa.end) > len(line) {
				return changed(ln.no)
			}
			if fa.node >= 0 && !keep[fa.node] {
				continue
			}
			o := &piObj{line: ln.no, entry: int(fa.entry), kept: fa.kept, unit: int(fa.unit), node: int(fa.node)}
			var fe *jsonscan.FieldError
			if o.e, fe = piDecodeEntry(json.RawMessage(line[fa.start:fa.end:fa.end])); fe != nil {
				return changed(ln.no)
			}
			if _, err := piInspect(o); err != nil {
				return changed(ln.no)
			}
			if err := p.add(o, keep); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	if next != len(fates) {
		return nil, fmt.Errorf("%s: the file changed while it was read (it ends early)", name)
	}
	s, err := p.b.finish()
	if s != nil {
		s.ReleaseBytes()
	}
	return s, err
}

// piFate is what readPiStream's first pass keeps of an entry that reached the tree
// or the message list: its line, entry index, kept tail (piObj.kept), unit and tree
// node (-1 for none), and the span of its JSON value in the line's content (so the
// second pass need not split the line again).
type piFate struct {
	line, entry, kept, unit, node int32
	start, end                    int32
}

// piScan is the first pass of the pi readers: header, entry decoding, lenient
// skipping and the entry tree.
type piScan struct {
	b       *builder
	opts    Options
	first   bool
	leaf    int
	nodes   []treeNode
	idEntry map[string]int32 // entry index of each id seen (first pass only)
	entries int              // entries decoded so far, the header included (piObj.entry)
	// msgAt[e] is, for entry e added to the messages, the index its message took
	// or, for one that made none, the next message's (-1: not added): where a
	// compaction's kept tail starts. 4 bytes an entry, made after the first pass.
	msgAt []int32
}

// Codes of piObj.kept beside an entry index: no compaction, a compaction that names
// no kept entry, one whose firstKeptEntryId is no earlier entry's, one whose
// firstKeptEntryIndex is not an earlier entry.
const (
	piKeptNone int32 = -1 - iota
	piKeptMissing
	piKeptUnknownID
	piKeptBadIndex
)

func newPiScan(b *builder, opts Options) *piScan {
	return &piScan{b: b, opts: opts, first: true, leaf: -1, idEntry: map[string]int32{}}
}

// line decodes the values of one line (ln, content line) and passes each entry
// that goes on to the messages to keep, in order, with its span in line. It
// returns the error that fails the read (strict mode).
func (p *piScan) line(ln jsonlLine, line []byte, keep func(*piObj, jsonscan.Span)) error {
	b, name, opts := p.b, p.b.s.Name, p.opts
	values, problem := piValues(line)
	for _, v := range values {
		start, end := v.Start, v.End
		raw := json.RawMessage(line[start:end:end])
		o := &piObj{line: ln.no, entry: p.entries, kept: piKeptNone, unit: -1, node: -1}
		p.entries++
		var fe *jsonscan.FieldError
		if o.e, fe = piDecodeEntry(raw); fe != nil {
			if e := jsonlSkip(b, name, opts, ln.no, fe.Field, fe.Msg); e != nil {
				return e
			}
			continue
		}
		if p.first {
			done, err := p.header(o, ln.no)
			if err != nil {
				return err
			}
			if done {
				continue
			}
		}
		if o.e.Type == "session" {
			b.warn("line %d: a second session header is ignored", ln.no)
			continue
		}
		benign, err := piInspect(o)
		if err != nil {
			fe := jsonscan.AsFieldError(err, "")
			if e := jsonlSkip(b, name, opts, ln.no, fe.Field, fe.Msg); e != nil {
				return e
			}
			continue
		}
		if o.m != nil && o.m.Role == "toolResult" {
			o.unit = b.addUnit(ln.start+start, ln.start+end)
		}
		if o.e.Type == "compaction" {
			o.kept = p.keptEntry(&o.e, o.entry)
		}
		if !p.node(o, ln.no, benign) {
			continue
		}
		keep(o, v)
	}
	if problem != "" {
		if e := jsonlSkip(b, name, opts, ln.no, "", problem); e != nil {
			return e
		}
	}
	return nil
}

// header reads the file's first entry: a session header gives the session's id
// and cwd, and done reports that it is consumed. Without a header strict mode
// refuses the file; lenient mode warns and reads on without a session id or cwd.
func (p *piScan) header(o *piObj, no int) (done bool, err error) {
	p.first = false
	if o.e.Type == "session" {
		p.b.s.ID, _ = jsonscan.String(o.e.ID)
		p.b.s.Cwd, _ = jsonscan.String(o.e.Cwd)
		return true, nil
	}
	const msg = `the first entry is not a session header {"type":"session"}`
	if !p.opts.Lenient {
		return false, &ParseError{File: p.b.s.Name, Line: no, Field: "type", Msg: msg}
	}
	p.b.warn("line %d: %s", no, msg)
	return false, nil
}

// node puts the entry o, of line no, in the entry tree under its id (an entry
// without one stays outside the tree); false for an id an earlier entry holds,
// whose repeat is ignored.
func (p *piScan) node(o *piObj, no int, benign bool) bool {
	id, _ := jsonscan.String(o.e.ID)
	if id == "" {
		return true
	}
	if _, seen := p.idEntry[id]; seen {
		p.b.warn("line %d: entry id %q repeats an earlier entry; the repeat is ignored", no, id)
		return false
	}
	p.idEntry[id] = int32(o.entry)
	parent, _ := jsonscan.String(o.e.ParentID)
	o.node = len(p.nodes)
	p.leaf = o.node
	p.nodes = append(p.nodes, treeNode{id: id, parent: parent, benign: benign})
	return true
}

// tree decides the kept branch (jsonlTree), warns of what it left out, and lets go
// of the tree's ids.
func (p *piScan) tree() []bool {
	keep, dropped, cyclic := jsonlTree(p.nodes, p.leaf, true)
	if dropped > 0 {
		p.b.warn("%d entries on abandoned branches were left out", dropped)
	}
	if cyclic > 0 {
		p.b.warn("%d entries sit on a parentId cycle; they are kept in file order", cyclic)
	}
	p.nodes, p.idEntry = nil, nil
	p.msgAt = make([]int32, p.entries)
	for i := range p.msgAt {
		p.msgAt[i] = -1
	}
	return keep
}

// add builds and adds the message of o unless its branch was abandoned; a bad
// entry fails the read (strict) or is skipped (lenient).
func (p *piScan) add(o *piObj, keep []bool) error {
	if o.node >= 0 && !keep[o.node] {
		return nil
	}
	p.msgAt[o.entry] = int32(len(p.b.s.Messages))
	if err := piAdd(p.b, o, p.kept); err != nil {
		fe := jsonscan.AsFieldError(err, "")
		return jsonlSkip(p.b, p.b.s.Name, p.opts, o.line, fe.Field, fe.Msg)
	}
	return nil
}

// piValues splits a line into its JSON values (pi may write two objects on one
// line) and returns their spans and, when the line breaks after them, what is wrong,
// in encoding/json's words. A line of valid values separated by blanks is split with
// the scanner; any other goes through a json.Decoder, which decodes the values before
// the break and words the problem ("after the first object on the line: …" when it
// follows a value).
func piValues(line []byte) (values []jsonscan.Span, problem string) {
	for i := 0; ; {
		if jsonscan.SkipBlank(line, i) >= len(line) {
			return values, ""
		}
		i = jsonscan.SkipSpace(line, i)
		e := jsonscan.SkipValue(line, i)
		if e < 0 || !json.Valid(line[i:e]) {
			break
		}
		values = append(values, jsonscan.Span{Start: i, End: e})
		i = e
	}
	values = values[:0]
	dec := json.NewDecoder(bytes.NewReader(line))
	for {
		if jsonscan.SkipBlank(line, int(dec.InputOffset())) >= len(line) {
			return values, ""
		}
		var raw json.RawMessage
		if err := dec.Decode(&raw); err != nil {
			if more, frag, ok := piTorn(line, values); ok {
				return append(values, more...), jsonlTornMsg(frag)
			}
			problem = jsonscan.Problem(err)
			if len(values) > 0 {
				problem = "after the first object on the line: " + problem
			}
			return values, problem
		}
		end := int(dec.InputOffset())
		values = append(values, jsonscan.Span{Start: end - len(raw), End: end})
	}
}

// piTorn looks past the value that broke a line (it starts after values, the whole
// ones before it) for whole objects running to the line's end (jsonlResume): a
// record cut short with the next appended to its line. It returns their spans and
// the fragment's; ok is false when there are none.
func piTorn(line []byte, values []jsonscan.Span) (more []jsonscan.Span, frag jsonscan.Span, ok bool) {
	brk := 0
	if len(values) > 0 {
		brk = values[len(values)-1].End
	}
	brk = jsonscan.SkipBlank(line, brk)
	j := jsonlResume(line, brk)
	if j >= len(line) {
		return nil, frag, false
	}
	frag = jsonscan.Span{Start: brk, End: j}
	for frag.End > brk && jsonscan.IsSpace(line[frag.End-1]) {
		frag.End--
	}
	for i := j; i < len(line); i = jsonscan.SkipSpace(line, i) {
		e := jsonscan.SkipValue(line, i)
		more = append(more, jsonscan.Span{Start: i, End: e})
		i = e
	}
	return more, frag, true
}

// piInspect decodes a message entry's message and reports whether the entry is benign
// for the tree (it cannot start a branch: tool results and bookkeeping entries).
func piInspect(o *piObj) (benign bool, err error) {
	switch o.e.Type {
	case "message":
		m, err := piDecodeMessage(o.e.Message)
		if err != nil {
			return false, err
		}
		if m.Role == "" {
			return false, fieldErr("message.role", "message without a role")
		}
		o.m = m
		switch m.Role {
		case "user", "assistant", "bashExecution", "custom", "hookMessage", "branchSummary", "compactionSummary":
			return false, nil
		}
		return true, nil
	case "compaction", "branch_summary", "custom_message":
		return false, nil
	}
	return true, nil
}

var piSlashCommand = regexp.MustCompile(`^/[\w:.-]+$`)

// keptEntry places, in the first pass, the entry a compaction entry e (entry
// index self) keeps its tail from: its firstKeptEntryId (v2 on) among the ids seen
// so far, or its firstKeptEntryIndex (v1) when that is an earlier entry; else a
// piKept code.
func (p *piScan) keptEntry(e *piEntry, self int) int32 {
	if id, ok := jsonscan.String(e.FirstKeptID); ok && id != "" {
		if at, ok := p.idEntry[id]; ok {
			return at
		}
		return piKeptUnknownID
	}
	if len(e.FirstKeptIndex) == 0 {
		return piKeptMissing
	}
	var idx float64
	if json.Unmarshal(e.FirstKeptIndex, &idx) != nil || idx != float64(int(idx)) || idx < 0 || int(idx) >= self {
		return piKeptBadIndex
	}
	return int32(idx)
}

// kept returns, for a compaction entry o about to be added, how many of the
// messages before it its kept tail holds (Message.CompactionKept): from the message
// of the entry piScan.keptEntry placed. A tail the reader cannot place (no
// reference, an unknown one, or an entry on an abandoned branch) keeps every
// message, with a warning naming o's line.
func (p *piScan) kept(o *piObj) int {
	n := len(p.b.s.Messages)
	ref := o.e.FirstKeptID // as written: a quoted id, or the v1 index
	if len(ref) == 0 {
		ref = o.e.FirstKeptIndex
	}
	var why string
	switch {
	case o.kept == piKeptMissing:
		why = "names no kept entry (firstKeptEntryId, firstKeptEntryIndex)"
	case o.kept == piKeptUnknownID || o.kept == piKeptBadIndex:
		why = fmt.Sprintf("keeps from entry %s, which is no entry before it", ref)
	case o.kept < 0 || int(o.kept) >= len(p.msgAt) || p.msgAt[o.kept] < 0:
		why = fmt.Sprintf("keeps from entry %s, which is not on the session's branch", ref)
	default:
		return n - int(p.msgAt[o.kept])
	}
	p.b.warn("line %d: compaction %s; every earlier message is taken as kept", o.line, why)
	return n
}

// piAdd turns one kept object into a message (or nothing) and adds it, timed by the
// entry's timestamp; kept places a compaction's kept tail (piScan.kept).
func piAdd(b *builder, o *piObj, kept func(o *piObj) int) error {
	add := func(m *Message) {
		m.Time = b.timeOf(o.e.Timestamp, o.line, "timestamp")
		b.add(m)
	}
	switch o.e.Type {
	case "compaction", "branch_summary":
		s, ok := jsonscan.String(o.e.Summary)
		if !ok && !jsonscan.Null(o.e.Summary) {
			return fieldErr("summary", "summary must be a string")
		}
		if s != "" {
			m := &Message{Role: RoleUser, Text: s, Meta: true, Line: o.line, AgentCompaction: o.e.Type == "compaction"}
			if m.AgentCompaction {
				m.CompactionKept = kept(o)
			}
			add(m)
		}
		return nil
	case "custom_message":
		return piInjected(o.e.Content, "content", o.line, add)
	case "message":
	default:
		return nil
	}
	return piAddMessage(b, o, add)
}

// piAddMessage adds the message of a message entry by its role: a user prompt
// (slash commands and wrappers are Meta), an assistant message, a tool result, a
// user's shell command (unless excluded from the context), an extension's message,
// or a summary.
func piAddMessage(b *builder, o *piObj, add func(*Message)) error {
	pm := o.m
	switch pm.Role {
	case "user":
		blocks, err := apiDecodeContent(pm.Content, "message.content")
		if err != nil {
			return err
		}
		m := apiUser(blocks, -1)
		m.Role, m.Line = RoleUser, o.line
		t := strings.TrimSpace(m.Text)
		if piSlashCommand.MatchString(t) || apiWrapperText(t) {
			m.Meta = true
		}
		add(m)
	case "assistant":
		m, err := piAssistant(pm.Content)
		if err != nil {
			return err
		}
		m.Line = o.line
		add(m)
	case "toolResult":
		return piAddResult(o, add)
	case "bashExecution":
		if pm.ExcludeFromContext {
			return nil
		}
		add(&Message{Role: RoleUser, Text: piBashText(pm), Meta: true, Line: o.line})
	case "custom", "hookMessage":
		return piInjected(pm.Content, "message.content", o.line, add)
	case "branchSummary", "compactionSummary":
		if pm.Summary != "" {
			// A compactionSummary message records no kept boundary: every message stays.
			m := &Message{Role: RoleUser, Text: pm.Summary, Meta: true, Line: o.line, AgentCompaction: pm.Role == "compactionSummary"}
			if m.AgentCompaction {
				m.CompactionKept = len(b.s.Messages)
			}
			add(m)
		}
	}
	return nil
}

// piAddResult adds a toolResult message, located for Rewrite when its line is a
// unit, and refines a successful read from the result's details.
func piAddResult(o *piObj, add func(*Message)) error {
	pm := o.m
	if pm.ToolCallID == "" {
		return fieldErr("message.toolCallId", "toolResult without a toolCallId")
	}
	res, err := apiDecodeResult(pm.Content, "message.content")
	if err != nil {
		return err
	}
	out := &ToolOutput{CallID: pm.ToolCallID, Text: res.text, IsError: pm.IsError, HasImage: res.hasImage}
	if o.unit >= 0 && len(res.paths) > 0 {
		setLoc(out, o.unit, res.paths...)
	}
	add(&Message{Role: RoleTool, Outputs: []*ToolOutput{out}, Line: o.line})
	if c := out.Call; c != nil && c.Action == toolcall.ActionRead && !out.IsError {
		piRefineRead(c, pm.Details)
	}
	return nil
}

// piInjected adds the text of an extension's message (content at JSON path field,
// a string or text blocks) as a Meta user message at line, unless it has none.
func piInjected(content json.RawMessage, field string, line int, add func(*Message)) error {
	blocks, err := apiDecodeContent(content, field)
	if err != nil {
		return err
	}
	m := apiUser(blocks, -1)
	m.Role, m.Meta, m.Line = RoleUser, true, line
	if m.Text != "" {
		add(m)
	}
	return nil
}

// piAssistant builds an assistant message from pi content blocks: text makes the Text,
// toolCall{id,name,arguments} the calls, thinking{thinking} the Thinking; unknown blocks are skipped.
func piAssistant(raw json.RawMessage) (*Message, error) {
	m := &Message{Role: RoleAssistant}
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 || string(raw) == "null" {
		return m, nil
	}
	if raw[0] == '"' {
		s, _ := jsonscan.String(raw)
		m.Text = s
		return m, nil
	}
	elems, ok := jsonscan.Array(raw)
	if !ok {
		return nil, fieldErr("message.content", "content must be a string or an array of blocks")
	}
	var texts, thinking []string
	seen := map[string]bool{}
	for j, el := range elems {
		p := fmt.Sprintf("message.content.%d", j)
		obj, problem := jsonscan.Object(el)
		if problem != "" {
			return nil, fieldErr(p, problem)
		}
		switch typ, _ := jsonscan.String(obj["type"]); typ {
		case "text":
			var text string
			if err := jsonscan.Field(obj, "text", p, &text); err != nil {
				return nil, err
			}
			texts = append(texts, text)
		case "thinking":
			if th, _ := jsonscan.String(obj["thinking"]); th != "" {
				thinking = append(thinking, th)
			}
		case "toolCall":
			var id, name string
			if err := jsonscan.Fields(obj, p, jsonscan.F{Key: "id", Dst: &id}, jsonscan.F{Key: "name", Dst: &name}); err != nil {
				return nil, err
			}
			if id == "" {
				return nil, fieldErr(p+".id", "toolCall without an id")
			}
			if seen[id] {
				continue
			}
			seen[id] = true
			args := bytes.Clone(obj["arguments"])
			if len(bytes.TrimSpace(args)) == 0 {
				args = json.RawMessage("{}")
			}
			m.Calls = append(m.Calls, &ToolCall{ID: id, Name: name, Args: args})
		}
	}
	m.Text = joinText(texts)
	m.Thinking = strings.Join(thinking, "\n")
	return m, nil
}

// piRefineRead narrows a read's range when pi cut its output: details.truncation
// {truncated, outputLines} says how many lines came back from the read's first line.
func piRefineRead(c *ToolCall, details json.RawMessage) {
	var d struct {
		Truncation *struct {
			Truncated   bool `json:"truncated"`
			OutputLines int  `json:"outputLines"`
		} `json:"truncation"`
	}
	if len(details) == 0 || json.Unmarshal(details, &d) != nil || d.Truncation == nil {
		return
	}
	t := d.Truncation
	if !t.Truncated || t.OutputLines <= 0 {
		return
	}
	start := max(c.Range.Start, 1)
	end := start + t.OutputLines - 1
	if c.Range.End == 0 || end < c.Range.End {
		c.Range = toolcall.Range{Start: start, End: end}
	}
}

// piBashText renders a user !command the way pi puts it in the model's context.
func piBashText(m *piMessage) string {
	var sb strings.Builder
	sb.WriteString("Ran `" + m.Command + "`\n")
	if m.Output != "" {
		sb.WriteString("```\n" + strings.TrimRight(m.Output, "\n") + "\n```")
	} else {
		sb.WriteString("(no output)")
	}
	switch {
	case m.Cancelled:
		sb.WriteString("\n\n(command cancelled)")
	case m.ExitCode != nil && *m.ExitCode != 0:
		fmt.Fprintf(&sb, "\n\nCommand exited with code %d", int(*m.ExitCode))
	}
	if m.Truncated && m.FullOutputPath != "" {
		sb.WriteString("\n\n[Output truncated. Full output: " + m.FullOutputPath + "]")
	}
	return sb.String()
}

// detectPi recognises a pi session: the first object of the file is the header
// {"type":"session","id":…}.
func detectPi(head []byte) bool {
	lines := jsonlHeadLines(head, 1)
	if len(lines) == 0 {
		return false
	}
	h := jsonscan.ScanHead(lines[0])
	typ, _ := jsonscan.String(h.Vals["type"])
	id, _ := jsonscan.String(h.Vals["id"])
	return typ == "session" && id != ""
}
