package transcript

import (
	"bytes"
	"encoding/json"
	"regexp"
	"strings"

	"github.com/tidwall/gjson"

	"github.com/pruneadvisor/pruneadvisor/internal/jsonscan"
	"github.com/pruneadvisor/pruneadvisor/toolcall"
)

// Claude Code session files (TRANSCRIPT-FORMATS.md §1): one JSON object per line,
// "type" user | assistant | system | summary | file-history-snapshot | queue-operation |
// progress | attachment | …; only user and assistant lines make messages.
//
// Three things shape the reader:
//   - An assistant message is written one content block per line, the lines sharing
//     message.id: they become one Message whose Line is the first line's.
//   - uuid/parentUuid make a tree. It forks for parallel tool calls (each tool_result
//     line hangs off its own tool_use line while the next tool_use line continues the
//     chain) and for rewinds (a new prompt re-parented at an earlier point, abandoning
//     the old branch). Following only the path back from the last line would lose the
//     results of parallel calls, so the reader keeps file order and drops only branches
//     a rewind abandoned (see jsonlTree).
//   - The top-level toolUseResult holds the structured result: a Read's line range, and
//     an edit's success or failure (a plain-string toolUseResult is an error).

// ccProbe is what the reader needs from every line, whatever its type. Fields are raw
// so that lines of types the reader ignores never fail on their own shapes.
type ccProbe struct {
	Type              json.RawMessage `json:"type"`
	UUID              json.RawMessage `json:"uuid"`
	ParentUUID        json.RawMessage `json:"parentUuid"`
	LogicalParentUUID json.RawMessage `json:"logicalParentUuid"`
	SessionID         json.RawMessage `json:"sessionId"`
	Cwd               json.RawMessage `json:"cwd"`
	Timestamp         json.RawMessage `json:"timestamp"`
}

// ccEntry is the rest of a user or assistant line.
type ccEntry struct {
	IsSidechain      bool            `json:"isSidechain"`
	IsMeta           bool            `json:"isMeta"`
	IsCompactSummary bool            `json:"isCompactSummary"`
	Message          *ccMessage      `json:"message"`
	ToolUseResult    json.RawMessage `json:"toolUseResult"`
}

type ccMessage struct {
	ID      string          `json:"id"`
	Content json.RawMessage `json:"content"`
}

// ccLine is one parsed user or assistant line.
type ccLine struct {
	no        int
	assistant bool
	uuid      string
	timestamp json.RawMessage // the line's timestamp, raw
	entry     ccEntry
	blocks    []apiBlock
	isString  bool // user content was a plain string
	unit      int  // unit of the line, -1 when it holds no tool result
	node      int  // index into the tree nodes
}

// ccToolUseResult is the part of the structured result the reader refines calls from.
type ccToolUseResult struct {
	Type        string `json:"type"`
	TokenCapped bool   `json:"truncatedByTokenCap"`
	File        *struct {
		FilePath    string `json:"filePath"`
		NumLines    int    `json:"numLines"`
		StartLine   int    `json:"startLine"`
		TotalLines  int    `json:"totalLines"`
		TokenCapped bool   `json:"truncatedByTokenCap"`
	} `json:"file"`
}

// readClaude reads a Claude Code session (or subagent) JSONL file in three
// phases: scan parses the lines and builds the uuid tree, keptLines drops the
// branches a rewind abandoned, and the kept lines, grouped into messages
// (ccGroup), are added in order (addAssistant, addUser).
func readClaude(name string, data []byte, opts Options) (*Session, error) {
	r := &ccReader{b: newBuilder(FormatClaudeCode, name, data), name: name, opts: opts,
		seenUUID: map[string]bool{}, seenMsg: map[string]bool{}, leaf: -1}
	if err := r.scan(data); err != nil {
		return nil, err
	}
	kept, mainThread := r.keptLines()
	for _, it := range ccGroup(kept) {
		if it.user == nil {
			r.addAssistant(it.lines)
		} else {
			r.addUser(it.user, mainThread)
		}
	}
	return r.b.finish()
}

// ccReader is the state of one readClaude: the user and assistant lines read, and
// the tree of every line's uuid.
type ccReader struct {
	b        *builder
	name     string
	opts     Options
	lines    []*ccLine
	nodes    []treeNode
	seenUUID map[string]bool // the uuids of the lines read so far
	seenMsg  map[string]bool // the message ids of the assistant lines read so far
	leaf     int             // the node of the last user or assistant line, -1 before one
}

// scan reads every line of data in order, mending lines that hold two records
// (jsonlMended), and records each (line).
func (r *ccReader) scan(data []byte) error {
	q := jsonlQueue{lines: jsonlSplit(data)}
	for ln, ok := q.pop(); ok; ln, ok = q.pop() {
		raw := data[ln.start:ln.end]
		var p ccProbe
		if err := json.Unmarshal(raw, &p); err != nil {
			mended, e := jsonlMended(ln, raw, jsonscan.Problem(err), func(msg string) error {
				return r.skip(ln.no, "", msg)
			})
			if e != nil {
				return e
			}
			q.push(mended)
			continue
		}
		if err := r.line(ln, raw, p); err != nil {
			return err
		}
	}
	return nil
}

// skip reports a malformed line: an error in strict mode, a warning otherwise.
func (r *ccReader) skip(no int, field, msg string) error {
	return jsonlSkip(r.b, r.name, r.opts, no, field, msg)
}

// line records one line: a repeated uuid is ignored, a line of another type only
// joins the tree, and a user or assistant line is parsed (parse) and kept with its
// node.
func (r *ccReader) line(ln jsonlLine, raw []byte, p ccProbe) error {
	typ, _ := jsonscan.String(p.Type)
	uuid, _ := jsonscan.String(p.UUID)
	if uuid != "" && r.seenUUID[uuid] {
		r.b.warn("line %d: uuid %q repeats an earlier line; the repeat is ignored", ln.no, uuid)
		return nil
	}
	if typ != "user" && typ != "assistant" {
		// Other types only carry the tree (system lines sit in the chain, and a
		// compact_boundary links back through logicalParentUuid).
		if uuid != "" {
			r.seenUUID[uuid] = true
			r.nodes = append(r.nodes, treeNode{id: uuid, parent: ccParent(p), benign: true})
		}
		return nil
	}
	cl := &ccLine{no: ln.no, assistant: typ == "assistant", uuid: uuid, timestamp: p.Timestamp, unit: -1}
	if ok, err := r.parse(cl, ln, raw, typ); !ok {
		return err
	}
	if r.b.s.ID == "" {
		r.b.s.ID, _ = jsonscan.String(p.SessionID)
	}
	if r.b.s.Cwd == "" {
		r.b.s.Cwd, _ = jsonscan.String(p.Cwd)
	}
	benign := r.benign(cl, ln)
	cl.node = -1
	if uuid != "" {
		r.seenUUID[uuid] = true
		cl.node = len(r.nodes)
		r.leaf = cl.node
		r.nodes = append(r.nodes, treeNode{id: uuid, parent: ccParent(p), benign: benign})
	}
	r.lines = append(r.lines, cl)
	return nil
}

// parse decodes a user or assistant line's entry and content blocks into cl. It
// reports false for a line that is skipped, with the error that stops the read in
// strict mode.
func (r *ccReader) parse(cl *ccLine, ln jsonlLine, raw []byte, typ string) (bool, error) {
	if err := json.Unmarshal(raw, &cl.entry); err != nil {
		return false, r.skip(ln.no, "", jsonscan.Problem(err))
	}
	if cl.entry.Message == nil {
		return false, r.skip(ln.no, "message", "a "+typ+" line without a message object")
	}
	blocks, err := apiDecodeContent(cl.entry.Message.Content, "message.content")
	if err != nil {
		fe := jsonscan.AsFieldError(err, "message.content")
		return false, r.skip(ln.no, fe.Field, fe.Msg)
	}
	if typ == "user" && toolResults(blocks) > 0 && !ccContentAt(raw, cl.entry.Message.Content) {
		return false, r.skip(ln.no, "message.content", "not found as spelled: a key differs in case or repeats")
	}
	cl.blocks = blocks
	cl.isString = len(blocks) == 1 && blocks[0].index < 0
	return true, nil
}

// toolResults counts the tool_result blocks of blocks.
func toolResults(blocks []apiBlock) int {
	n := 0
	for _, blk := range blocks {
		if blk.typ == "tool_result" {
			n++
		}
	}
	return n
}

// ccContentAt reports whether the line's "message.content", found as Rewrite
// finds it (existsIn: spanAt, else gjson; keys as spelled, the first occurrence
// that holds the rest of the path), is the content the entry decoded.
// encoding/json matches keys without regard to case and keeps the last of a
// repeated key, so a line such as {"messAge":{"Content":[...]}} decodes, but its
// tool results could not be rewritten (FuzzClaude found it).
func ccContentAt(raw []byte, content json.RawMessage) bool {
	want := bytes.TrimSpace(content)
	if start, end, found, exact := spanAt(raw, "message.content"); exact {
		return found && bytes.Equal(raw[start:end], want)
	}
	r := gjson.GetBytes(raw, "message.content")
	return r.Exists() && r.Raw == string(want)
}

// benign reports whether cl's node may not start a branch of the tree: a later
// line of an already-seen assistant message (a parallel tool_use) continues that
// message, and a user line of tool results only hangs off its call. A user line
// with tool results gets its unit, for Rewrite.
func (r *ccReader) benign(cl *ccLine, ln jsonlLine) bool {
	if cl.assistant {
		id := cl.entry.Message.ID
		if id == "" {
			return false
		}
		seen := r.seenMsg[id]
		r.seenMsg[id] = true
		return seen
	}
	results := toolResults(cl.blocks)
	if results > 0 {
		cl.unit = r.b.addUnit(ln.start, ln.end)
	}
	return results > 0 && results == len(cl.blocks)
}

// keptLines returns the lines on the branches a rewind did not abandon
// (jsonlTree), in file order, and whether any of them is on the main thread (not
// a sidechain).
func (r *ccReader) keptLines() ([]*ccLine, bool) {
	keep, dropped, cyclic := jsonlTree(r.nodes, r.leaf, false)
	if dropped > 0 {
		r.b.warn("%d lines on branches abandoned by a rewind were left out", dropped)
	}
	if cyclic > 0 {
		r.b.warn("%d lines sit on a parentUuid cycle; they are kept in file order", cyclic)
	}
	kept := r.lines[:0:0]
	mainThread := false
	for _, cl := range r.lines {
		if cl.node < 0 || keep[cl.node] {
			kept = append(kept, cl)
			if !cl.entry.IsSidechain {
				mainThread = true
			}
		}
	}
	return kept, mainThread
}

// ccItem is one message to add: a user line, or the assistant lines of one message.
type ccItem struct {
	user  *ccLine
	lines []*ccLine // assistant lines of one message
}

// ccGroup groups the assistant lines by message.id: one message per id, at its
// first line; each user line is a message of its own.
func ccGroup(kept []*ccLine) []*ccItem {
	var items []*ccItem
	byMsg := map[string]*ccItem{}
	for _, cl := range kept {
		if !cl.assistant {
			items = append(items, &ccItem{user: cl})
			continue
		}
		id := cl.entry.Message.ID
		if it := byMsg[id]; it != nil && id != "" {
			it.lines = append(it.lines, cl)
			continue
		}
		it := &ccItem{lines: []*ccLine{cl}}
		items = append(items, it)
		if id != "" {
			byMsg[id] = it
		}
	}
	return items
}

// addAssistant adds the assistant message of lines (one message.id), its blocks
// joined, at the first line, and refines its reads from their arguments.
func (r *ccReader) addAssistant(lines []*ccLine) {
	var blocks []apiBlock
	for _, cl := range lines {
		blocks = append(blocks, cl.blocks...)
	}
	m := apiAssistant(blocks, lines[0].no)
	m.Time = r.b.timeOf(lines[0].timestamp, lines[0].no, "timestamp")
	r.b.add(m)
	for _, c := range m.Calls {
		ccRefineArgs(c)
	}
}

// addUser adds the user message of cl: its task (the first real prompt, on the
// main thread when the session has one), and for a single tool result the
// structured toolUseResult that refines the call (ccRefineResult).
func (r *ccReader) addUser(cl *ccLine, mainThread bool) {
	m := apiUser(cl.blocks, cl.unit)
	m.Line = cl.no
	m.Time = r.b.timeOf(cl.timestamp, cl.no, "timestamp")
	e := cl.entry
	if e.IsMeta || e.IsCompactSummary {
		m.Meta = true
	}
	m.AgentCompaction = e.IsCompactSummary
	var tur ccToolUseResult
	turString := false
	if len(m.Outputs) == 1 {
		tur, turString = ccResultOf(e.ToolUseResult)
		if tur.Type == "file_unchanged" {
			m.Outputs[0].Unchanged = true
		}
	}
	if r.b.s.Task == "" && cl.isString && !e.IsMeta && !e.IsCompactSummary && (!mainThread || !e.IsSidechain) {
		r.b.s.Task = ccTask(m.Text)
	}
	r.b.add(m)
	if len(m.Outputs) == 1 && m.Outputs[0].Call != nil {
		ccRefineResult(m.Outputs[0].Call, m.Outputs[0], &tur, turString)
	}
}

// ccResultOf decodes a line's toolUseResult: the object's fields (zero when it
// does not decode), and whether it is a plain string (an error).
func ccResultOf(raw json.RawMessage) (ccToolUseResult, bool) {
	var tur ccToolUseResult
	t := bytes.TrimSpace(raw)
	if len(t) == 0 {
		return tur, false
	}
	if t[0] == '{' && json.Unmarshal(t, &tur) != nil {
		tur = ccToolUseResult{}
	}
	return tur, t[0] == '"'
}

// ccParent is a line's parent for the tree: parentUuid, or across a compaction
// boundary (parentUuid null) the logicalParentUuid.
func ccParent(p ccProbe) string {
	if s, _ := jsonscan.String(p.ParentUUID); s != "" {
		return s
	}
	s, _ := jsonscan.String(p.LogicalParentUUID)
	return s
}

var (
	ccCommandName = regexp.MustCompile(`(?s)<command-name>\s*(.*?)\s*</command-name>`)
	ccCommandArgs = regexp.MustCompile(`(?s)<command-args>\s*(.*?)\s*</command-args>`)
)

// ccTask returns the task a plain-string user prompt states: the text itself, or for
// a slash command that carries arguments "/name args" (what the user typed). A wrapper
// with nothing the user asked for yields "".
func ccTask(text string) string {
	if !apiWrapperText(text) {
		return text
	}
	a := ccCommandArgs.FindStringSubmatch(text)
	if a == nil || a[1] == "" {
		return ""
	}
	if n := ccCommandName.FindStringSubmatch(text); n != nil && n[1] != "" {
		return n[1] + " " + a[1]
	}
	return a[1]
}

// ccRefineArgs sets a read's line range from its offset/limit arguments when Classify
// left it whole; the structured result, when there is one, overrides it.
func ccRefineArgs(c *ToolCall) {
	if c.Action == toolcall.ActionRead && c.Range.Whole() {
		c.Range = rangeFromArgs(c.Args)
	}
}

// rangeFromArgs reads Claude Code's and pi's read arguments: offset is the 1-based
// first line (0 behaves as 1), limit the number of lines. Neither gives the whole file.
func rangeFromArgs(args json.RawMessage) toolcall.Range {
	var a struct {
		Offset *float64 `json:"offset"`
		Limit  *float64 `json:"limit"`
	}
	if json.Unmarshal(args, &a) != nil {
		return toolcall.Range{}
	}
	start := 1
	if a.Offset != nil && *a.Offset > 1 {
		start = int(*a.Offset)
	}
	end := 0
	if a.Limit != nil && *a.Limit >= 1 {
		end = start + int(*a.Limit) - 1
	}
	if start == 1 && end == 0 {
		return toolcall.Range{}
	}
	return toolcall.Range{Start: start, End: end}
}

// ccRefineResult refines the call from its structured result: a Read's line range
// (whole file when it started at line 1 and returned every line), and failure of an
// edit or write (is_error, or a plain-string toolUseResult).
func ccRefineResult(c *ToolCall, o *ToolOutput, tur *ccToolUseResult, turString bool) {
	switch c.Action {
	case toolcall.ActionRead:
		if f := tur.File; tur.Type == "text" && f != nil && f.NumLines >= 0 && f.TotalLines > 0 {
			start := max(f.StartLine, 1)
			capped := tur.TokenCapped || f.TokenCapped
			if f.StartLine <= 1 && f.NumLines >= f.TotalLines && !capped {
				c.Range = toolcall.Range{}
			} else {
				c.Range = toolcall.Range{Start: start, End: start + max(f.NumLines, 1) - 1}
			}
		}
	case toolcall.ActionWrite:
		if c.Content == "" {
			var a struct {
				Content string `json:"content"`
			}
			if json.Unmarshal(c.Args, &a) == nil {
				c.Content = a.Content
			}
		}
	}
	if turString && ccEditTools[strings.ToLower(c.Name)] {
		o.IsError = true
	}
}

// ccEditTools are the Claude Code tools whose plain-string toolUseResult means failure.
var ccEditTools = map[string]bool{"edit": true, "multiedit": true, "write": true, "notebookedit": true}

// detectClaude recognises Claude Code JSONL: among the first lines, the first object
// that says what it is must carry Claude Code's keys — parentUuid with sessionId or
// uuid (user/assistant/system/progress/attachment lines), a summary with leafUuid, a
// file-history-snapshot, or a queue-operation with sessionId. A head that ends inside
// a long first line is judged on the keys seen so far.
func detectClaude(head []byte) bool {
	cut := false // the line before was an object that did not end
	for _, line := range jsonlHeadLines(head, 8) {
		h := jsonscan.ScanHead(line)
		if !h.Object {
			if cut {
				cut = false // the rest of a line split in two; the reader names both lines
				continue
			}
			return false
		}
		cut = !h.Complete
		has := func(k string) bool { return h.Keys[k] }
		typ, _ := jsonscan.String(h.Vals["type"])
		switch {
		case typ == "summary" && has("leafUuid"),
			typ == "file-history-snapshot" && (has("snapshot") || has("messageId")),
			typ == "queue-operation" && has("operation") && has("sessionId"):
			return true
		case has("parentUuid") && (has("sessionId") || has("uuid")):
			return typ == "" || !ccForeignTypes[typ]
		case has("type"):
			return false
		}
	}
	return false
}

// ccForeignTypes are line types of other JSONL formats.
var ccForeignTypes = map[string]bool{"session": true, "message": true, "session_meta": true,
	"response_item": true, "event_msg": true, "turn_context": true, "compacted": true}
