package transcript

import (
	"bytes"
	"encoding/json"
	"regexp"
	"strings"

	"github.com/pruneadvisor/pruneadvisor/toolcall"
	"github.com/pruneadvisor/pruneadvisor/transcript/internal/jsonscan"
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

// readClaude reads a Claude Code session (or subagent) JSONL file.
func readClaude(name string, data []byte, opts Options) (*Session, error) {
	b := newBuilder(FormatClaudeCode, name, data)
	var (
		lines    []*ccLine
		nodes    []treeNode
		seenUUID = map[string]bool{}
		seenMsg  = map[string]bool{}
		leaf     = -1
	)
	q := jsonlQueue{lines: jsonlSplit(data)}
	for ln, ok := q.pop(); ok; ln, ok = q.pop() {
		raw := data[ln.start:ln.end]
		var p ccProbe
		if err := json.Unmarshal(raw, &p); err != nil {
			mended, e := jsonlMended(ln, raw, jsonscan.Problem(err), func(msg string) error {
				return jsonlSkip(b, name, opts, ln.no, "", msg)
			})
			if e != nil {
				return nil, e
			}
			q.push(mended)
			continue
		}
		typ, _ := jsonscan.String(p.Type)
		uuid, _ := jsonscan.String(p.UUID)
		if uuid != "" && seenUUID[uuid] {
			b.warn("line %d: uuid %q repeats an earlier line; the repeat is ignored", ln.no, uuid)
			continue
		}
		if typ != "user" && typ != "assistant" {
			// Other types only carry the tree (system lines sit in the chain, and a
			// compact_boundary links back through logicalParentUuid).
			if uuid != "" {
				seenUUID[uuid] = true
				nodes = append(nodes, treeNode{id: uuid, parent: ccParent(p), benign: true})
			}
			continue
		}
		cl := &ccLine{no: ln.no, assistant: typ == "assistant", uuid: uuid, timestamp: p.Timestamp, unit: -1}
		if err := json.Unmarshal(raw, &cl.entry); err != nil {
			if e := jsonlSkip(b, name, opts, ln.no, "", jsonscan.Problem(err)); e != nil {
				return nil, e
			}
			continue
		}
		if cl.entry.Message == nil {
			if e := jsonlSkip(b, name, opts, ln.no, "message", "a "+typ+" line without a message object"); e != nil {
				return nil, e
			}
			continue
		}
		blocks, err := apiDecodeContent(cl.entry.Message.Content, "message.content")
		if err != nil {
			fe := jsonscan.AsFieldError(err, "message.content")
			if e := jsonlSkip(b, name, opts, ln.no, fe.Field, fe.Msg); e != nil {
				return nil, e
			}
			continue
		}
		cl.blocks = blocks
		cl.isString = len(blocks) == 1 && blocks[0].index < 0
		if b.s.ID == "" {
			b.s.ID, _ = jsonscan.String(p.SessionID)
		}
		if b.s.Cwd == "" {
			b.s.Cwd, _ = jsonscan.String(p.Cwd)
		}
		benign := false
		if cl.assistant {
			// A later line of an already-seen message continues that message (a
			// parallel tool_use); it never starts a branch of its own.
			if id := cl.entry.Message.ID; id != "" {
				benign = seenMsg[id]
				seenMsg[id] = true
			}
		} else {
			results := 0
			for _, blk := range blocks {
				if blk.typ == "tool_result" {
					results++
				}
			}
			benign = results > 0 && results == len(blocks)
			if results > 0 {
				cl.unit = b.addUnit(ln.start, ln.end)
			}
		}
		cl.node = -1
		if uuid != "" {
			seenUUID[uuid] = true
			cl.node = len(nodes)
			leaf = cl.node
			nodes = append(nodes, treeNode{id: uuid, parent: ccParent(p), benign: benign})
		}
		lines = append(lines, cl)
	}

	keep, dropped, cyclic := jsonlTree(nodes, leaf, false)
	if dropped > 0 {
		b.warn("%d lines on branches abandoned by a rewind were left out", dropped)
	}
	if cyclic > 0 {
		b.warn("%d lines sit on a parentUuid cycle; they are kept in file order", cyclic)
	}
	kept := lines[:0:0]
	mainThread := false
	for _, cl := range lines {
		if cl.node < 0 || keep[cl.node] {
			kept = append(kept, cl)
			if !cl.entry.IsSidechain {
				mainThread = true
			}
		}
	}

	// Group the assistant lines by message.id: one message per id, at its first line.
	type item struct {
		user  *ccLine
		lines []*ccLine // assistant lines of one message
	}
	var items []*item
	byMsg := map[string]*item{}
	for _, cl := range kept {
		if !cl.assistant {
			items = append(items, &item{user: cl})
			continue
		}
		id := cl.entry.Message.ID
		if it := byMsg[id]; it != nil && id != "" {
			it.lines = append(it.lines, cl)
			continue
		}
		it := &item{lines: []*ccLine{cl}}
		items = append(items, it)
		if id != "" {
			byMsg[id] = it
		}
	}

	for _, it := range items {
		if it.user == nil {
			var blocks []apiBlock
			for _, cl := range it.lines {
				blocks = append(blocks, cl.blocks...)
			}
			m := apiAssistant(blocks, it.lines[0].no)
			m.Time = b.timeOf(it.lines[0].timestamp, it.lines[0].no, "timestamp")
			b.add(m)
			for _, c := range m.Calls {
				ccRefineArgs(c)
			}
			continue
		}
		cl := it.user
		m := apiUser(cl.blocks, cl.unit)
		m.Line = cl.no
		m.Time = b.timeOf(cl.timestamp, cl.no, "timestamp")
		e := cl.entry
		if e.IsMeta || e.IsCompactSummary {
			m.Meta = true
		}
		m.AgentCompaction = e.IsCompactSummary
		var tur ccToolUseResult
		turString := false
		if len(m.Outputs) == 1 {
			if t := bytes.TrimSpace(e.ToolUseResult); len(t) > 0 {
				turString = t[0] == '"'
				if t[0] == '{' && json.Unmarshal(t, &tur) != nil {
					tur = ccToolUseResult{}
				}
			}
			if tur.Type == "file_unchanged" {
				m.Outputs[0].Unchanged = true
			}
		}
		if b.s.Task == "" && cl.isString && !e.IsMeta && !e.IsCompactSummary && (!mainThread || !e.IsSidechain) {
			b.s.Task = ccTask(m.Text)
		}
		b.add(m)
		if len(m.Outputs) == 1 && m.Outputs[0].Call != nil {
			ccRefineResult(m.Outputs[0].Call, m.Outputs[0], &tur, turString)
		}
	}
	return b.finish()
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
