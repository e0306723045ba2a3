package server

import (
	"bytes"
	"fmt"
	"math"

	"github.com/tidwall/gjson"

	"github.com/pruneadvisor/pruneadvisor/internal/textcut"
	"github.com/pruneadvisor/pruneadvisor/ledger"
	"github.com/pruneadvisor/pruneadvisor/wire"
)

// Reading `usage` from responses (the ledger, docs/DESIGN.md "Ways in"). The proxy
// forwards every byte as it arrives; a copy of what it forwarded goes through one
// of these readers, which never touch the forwarded bytes.

// usageFormat is the wire shape of a route's responses, as the ledger reads them:
// the table's wire.Usage (wire.Spec.Usage) with the readers' methods.
type usageFormat wire.Usage

const (
	// usageAnthropic is Anthropic Messages: a JSON message's `usage`, or the stream's
	// `message_start` (message.usage: input and cache counts) and `message_delta`
	// (usage: cumulative counts, output at least) events.
	usageAnthropic = usageFormat(wire.UsageAnthropic)
	// usageChat is OpenAI Chat Completions: `usage` with
	// prompt_tokens_details.cached_tokens; in a stream, the last chunk (sent only when
	// the request set stream_options.include_usage; the other chunks carry
	// "usage": null).
	usageChat = usageFormat(wire.UsageChat)
	// usageResponses is OpenAI Responses: the response's `usage` with
	// input_tokens_details.cached_tokens; in a stream, the response of the
	// `response.completed` event (or `response.incomplete` / `response.failed`,
	// which carry a usage as well).
	usageResponses = usageFormat(wire.UsageResponses)
	// usageGemini is Gemini generateContent: `usageMetadata`, whose promptTokenCount
	// includes cachedContentTokenCount; streamGenerateContent sends it in every
	// chunk (SSE with alt=sse, else one JSON array), the last one final.
	usageGemini = usageFormat(wire.UsageGemini)
)

// usageAcc gathers what one response says about its usage: usage objects read so
// far (the last one wins, but Anthropic's message_delta updates message_start's),
// the model it names, and what was odd.
type usageAcc struct {
	format usageFormat
	usage  ledger.Usage
	found  bool
	bad    string // why a usage could not be read; "" when none was malformed
	model  string
	note   string // e.g. an error event in the stream
	// finished: the stream's last event went by (Chat Completions' `[DONE]`,
	// Anthropic's `message_stop`, the Responses API's `response.completed` /
	// `incomplete` / `failed`): a client that leaves after it has the whole answer.
	finished bool
	// Anthropic's counts as reported, combined by usage(): cache creation in total
	// and its 1-hour part, so a message_delta that updates the total keeps the split.
	anthCreate, anthLong int
}

// result says what the response amounted to, given its HTTP status: a readable
// usage, a malformed one, none, or an upstream error; and a note on it.
func (a *usageAcc) result(status int) (ledger.Result, string) {
	switch {
	case a.bad != "":
		return ledger.ResultMalformed, a.bad
	case a.found:
		return ledger.ResultOK, a.note
	case status >= 400:
		return ledger.ResultError, a.note
	case a.note != "":
		return ledger.ResultNone, a.note
	}
	return ledger.ResultNone, "no usage in the response"
}

// malformed records the first reason a usage could not be read.
func (a *usageAcc) malformed(err error) {
	if a.bad == "" {
		a.bad = err.Error()
	}
}

// usageMarker is what an SSE event's data must contain to be worth parsing.
func (f usageFormat) marker() []byte {
	if f == usageGemini {
		return []byte(`"usageMetadata"`)
	}
	return []byte(`"usage"`)
}

// holdsUsage reports whether data has the key marker with a value other than null
// (Chat Completions chunks carry "usage": null until the last one). A false yes
// only costs a parse.
func holdsUsage(data, marker []byte) bool {
	i := bytes.Index(data, marker)
	if i < 0 {
		return false
	}
	rest := bytes.TrimLeft(data[i+len(marker):], " \t\r\n")
	if len(rest) == 0 || rest[0] != ':' {
		return true
	}
	return !bytes.HasPrefix(bytes.TrimLeft(rest[1:], " \t\r\n"), []byte("null"))
}

// wants reports whether an event of the given `event:` name can hold a usage or
// an error, so that the scanner keeps its data. Anthropic and the Responses API
// name their events; an unnamed event is always read.
func (f usageFormat) wants(name []byte) bool {
	switch {
	case len(name) == 0 || string(name) == "error":
		return true
	case f == usageAnthropic:
		return string(name) == "message_start" || string(name) == "message_delta" || string(name) == "message_stop"
	case f == usageResponses:
		return string(name) == "response.completed" || string(name) == "response.incomplete" || string(name) == "response.failed"
	}
	return true
}

// event reads one server-sent event (its `event:` name, possibly empty, and its
// data) that wants let through. An unnamed event is parsed only when it holds the
// format's usage key with a value (holdsUsage) or starts with an error object.
func (a *usageAcc) event(name, data []byte) {
	if a.format == usageChat && len(name) == 0 && bytes.Equal(data, []byte("[DONE]")) {
		a.finished = true
		return
	}
	if len(name) == 0 && !holdsUsage(data, a.format.marker()) && !bytes.HasPrefix(data, []byte(`{"error"`)) {
		if a.model == "" && a.format == usageChat && len(data) > 0 && data[0] == '{' {
			a.takeModel(gjson.GetBytes(data, "model")) // the first chunk names it
		}
		return
	}
	doc := gjson.ParseBytes(data)
	if string(name) == "error" || doc.Get("type").String() == "error" || doc.Get("error").IsObject() {
		a.note = "error event in the stream: " + errorType(doc)
		return
	}
	switch a.format {
	case usageAnthropic:
		switch doc.Get("type").String() {
		case "message_start":
			a.takeModel(doc.Get("message.model"))
			a.anthropic(doc.Get("message.usage"), "message_start: message.usage", false)
		case "message_delta":
			a.anthropic(doc.Get("usage"), "message_delta: usage", true)
		case "message_stop":
			a.finished = true
		}
	case usageChat:
		a.takeModel(doc.Get("model"))
		a.chat(doc.Get("usage"), "chunk usage")
	case usageResponses:
		switch t := doc.Get("type").String(); t {
		case "response.completed", "response.incomplete", "response.failed":
			a.finished = true
			a.takeModel(doc.Get("response.model"))
			a.responses(doc.Get("response.usage"), t+": response.usage")
		}
	case usageGemini:
		a.takeModel(doc.Get("modelVersion"))
		a.gemini(doc.Get("usageMetadata"), "usageMetadata")
	}
}

// document reads a whole JSON response body (or, for Gemini, a JSON array of
// responses: the last usageMetadata counts).
func (a *usageAcc) document(body []byte) {
	if !gjson.ValidBytes(body) {
		a.note = "response body is not JSON"
		return
	}
	doc := gjson.ParseBytes(body)
	if doc.Get("error").IsObject() || doc.Get("type").String() == "error" {
		a.note = "error response: " + errorType(doc)
	}
	switch a.format {
	case usageAnthropic:
		a.takeModel(doc.Get("model"))
		a.anthropic(doc.Get("usage"), "usage", false)
	case usageChat:
		a.takeModel(doc.Get("model"))
		a.chat(doc.Get("usage"), "usage")
	case usageResponses:
		a.takeModel(doc.Get("model"))
		a.responses(doc.Get("usage"), "usage")
	case usageGemini:
		if !doc.IsArray() {
			a.takeModel(doc.Get("modelVersion"))
			a.gemini(doc.Get("usageMetadata"), "usageMetadata")
			return
		}
		doc.ForEach(func(_, el gjson.Result) bool {
			a.takeModel(el.Get("modelVersion"))
			a.gemini(el.Get("usageMetadata"), "usageMetadata")
			return true
		})
	}
}

// errorType names an API error object's type (Anthropic and OpenAI `type`, Gemini
// `status`), or "unknown".
func errorType(doc gjson.Result) string {
	for _, p := range []string{"error.type", "error.status", "error.code", "code"} {
		if v := doc.Get(p); v.Exists() && v.String() != "" {
			return textcut.BytesDots(v.String(), 60)
		}
	}
	return "unknown"
}

func (a *usageAcc) takeModel(v gjson.Result) {
	if v.Type == gjson.String && v.Str != "" {
		a.model = textcut.BytesDots(v.Str, 100)
	}
}

// present reports whether u is a usage object to read: false for a missing or null
// one; a non-object is malformed.
func (a *usageAcc) present(u gjson.Result, where string) bool {
	switch {
	case !u.Exists() || u.Type == gjson.Null:
		return false
	case !u.IsObject():
		a.malformed(fmt.Errorf("%s is %s, not an object", where, textcut.BytesDots(u.Raw, 40)))
		return false
	}
	return true
}

// maxCount bounds a plausible token count (a trillion): past it, a count is
// malformed rather than a bill.
const maxCount = 1e12

// counter reads token counts out of one usage object; the first error sticks.
type counter struct {
	obj   gjson.Result
	where string
	err   error
}

// get returns the count at path; a missing or null one is 0 unless required.
// found reports a count that was there.
func (c *counter) get(path string, required bool) (n int, found bool) {
	v := c.obj.Get(path)
	if !v.Exists() || v.Type == gjson.Null {
		if required && c.err == nil {
			c.err = fmt.Errorf("%s.%s is missing", c.where, path)
		}
		return 0, false
	}
	if v.Type != gjson.Number || v.Num < 0 || v.Num > maxCount || v.Num != math.Trunc(v.Num) {
		if c.err == nil {
			c.err = fmt.Errorf("%s.%s: %s is not a token count", c.where, path, textcut.BytesDots(v.Raw, 40))
		}
		return 0, false
	}
	return int(v.Num), true
}

// anthropic reads an Anthropic usage: a whole one (JSON body, message_start), or
// with delta the cumulative counts of a message_delta, each replacing the one
// before when present.
func (a *usageAcc) anthropic(u gjson.Result, where string, delta bool) {
	if !a.present(u, where) {
		return
	}
	c := counter{obj: u, where: where}
	in, okIn := c.get("input_tokens", !delta)
	out, okOut := c.get("output_tokens", !delta)
	create, okCreate := c.get("cache_creation_input_tokens", false)
	read, okRead := c.get("cache_read_input_tokens", false)
	long, okLong := c.get("cache_creation.ephemeral_1h_input_tokens", false)
	if c.err != nil {
		a.malformed(c.err)
		return
	}
	set := func(dst *int, v int, ok bool) {
		if ok || !delta {
			*dst = v
		}
	}
	set(&a.usage.Input, in, okIn)
	set(&a.usage.Output, out, okOut)
	set(&a.usage.CacheRead, read, okRead)
	set(&a.anthCreate, create, okCreate)
	set(&a.anthLong, long, okLong)
	a.usage.CacheWrite1h = min(a.anthLong, a.anthCreate)
	a.usage.CacheWrite5m = a.anthCreate - a.usage.CacheWrite1h
	a.found = true
}

// chat reads a Chat Completions usage.
func (a *usageAcc) chat(u gjson.Result, where string) {
	a.openAI(u, where, "prompt_tokens", "completion_tokens", "prompt_tokens_details.cached_tokens")
}

// responses reads a Responses API usage.
func (a *usageAcc) responses(u gjson.Result, where string) {
	a.openAI(u, where, "input_tokens", "output_tokens", "input_tokens_details.cached_tokens")
}

// openAI reads an OpenAI usage whose input, output and cached-input counts are at
// the paths given (Chat Completions and Responses name them differently): input
// and output must be there, the cached part may be left out.
func (a *usageAcc) openAI(u gjson.Result, where, input, output, cachedInput string) {
	if !a.present(u, where) {
		return
	}
	c := counter{obj: u, where: where}
	prompt, _ := c.get(input, true)
	out, _ := c.get(output, true)
	cached, _ := c.get(cachedInput, false)
	a.cachedSplit(c, prompt, cached, out, 0, input)
}

// gemini reads a Gemini usageMetadata. Every count may be missing (proto3 JSON
// leaves zeros out). Input is the prompt less its cached part, plus
// toolUsePromptTokenCount; output is candidatesTokenCount plus thoughtsTokenCount
// (thinking is billed as output).
func (a *usageAcc) gemini(u gjson.Result, where string) {
	if !a.present(u, where) {
		return
	}
	c := counter{obj: u, where: where}
	prompt, _ := c.get("promptTokenCount", false)
	cached, _ := c.get("cachedContentTokenCount", false)
	out, _ := c.get("candidatesTokenCount", false)
	thoughts, _ := c.get("thoughtsTokenCount", false)
	tools, _ := c.get("toolUsePromptTokenCount", false)
	a.cachedSplit(c, prompt, cached, out+thoughts, tools, "promptTokenCount")
}

// cachedSplit sets the usage of a provider without a write premium: of prompt
// input tokens, cached were read from the cache and the rest (plus extra) paid as
// input. A cached part above the prompt is malformed.
func (a *usageAcc) cachedSplit(c counter, prompt, cached, out, extra int, promptName string) {
	if c.err == nil && cached > prompt {
		c.err = fmt.Errorf("%s: %d cached tokens of a %s of %d", c.where, cached, promptName, prompt)
	}
	if c.err != nil {
		a.malformed(c.err)
		return
	}
	a.usage = ledger.Usage{Input: prompt - cached + extra, CacheRead: cached, Output: out}
	a.found = true
}

// maxEventBytes bounds one server-sent event's data (and one line of it) as kept
// for reading: a Responses `response.completed` event holds the whole response.
// A larger event is skipped and noted.
const maxEventBytes = 16 << 20

// sseScanner splits a server-sent event stream (the WHATWG HTML "event stream"
// format: lines ending in LF or CRLF, `field: value`, a blank line ends an event,
// several data lines join with LF, lines starting with ':' are comments) and hands
// each event to acc. A bare CR as line end, which none of the APIs send, is not
// recognised. It keeps only the line in progress and the event's data.
type sseScanner struct {
	acc     *usageAcc
	partial []byte // the line in progress, carried to the next write
	name    []byte // the event's `event:` field
	data    []byte // the event's data lines joined by LF, when wanted
	hasData bool
	ignore  bool // the event's name says it holds no usage (usageFormat.wants): its data is not kept
	skip    bool // the line or event in progress passed maxEventBytes
}

// write takes the next bytes of the stream.
func (s *sseScanner) write(p []byte) {
	for len(p) > 0 {
		i := bytes.IndexByte(p, '\n')
		if i < 0 {
			if len(s.partial)+len(p) > maxEventBytes {
				s.oversize()
			} else if !s.skip {
				s.partial = append(s.partial, p...)
			}
			return
		}
		line := p[:i]
		if len(s.partial) > 0 {
			s.partial = append(s.partial, line...)
			line = s.partial
		}
		s.line(trimCR(line))
		s.partial = s.partial[:0]
		p = p[i+1:]
	}
}

// oversize drops the line or event in progress.
func (s *sseScanner) oversize() {
	if !s.skip {
		s.acc.note = fmt.Sprintf("an event over %d bytes was not read", maxEventBytes)
	}
	s.skip = true
	s.partial, s.data = s.partial[:0], s.data[:0]
}

// line takes one line without its end.
func (s *sseScanner) line(l []byte) {
	if len(l) == 0 {
		if s.hasData && !s.skip && !s.ignore {
			s.acc.event(s.name, s.data)
		}
		s.name, s.data, s.hasData, s.skip, s.ignore = s.name[:0], s.data[:0], false, false, false
		return
	}
	if s.skip || l[0] == ':' {
		return
	}
	field, value := l, []byte(nil)
	if i := bytes.IndexByte(l, ':'); i >= 0 {
		field, value = l[:i], l[i+1:]
		if len(value) > 0 && value[0] == ' ' {
			value = value[1:]
		}
	}
	switch string(field) {
	case "event":
		s.name = append(s.name[:0], value...)
		s.ignore = !s.acc.format.wants(s.name)
	case "data":
		if s.ignore {
			return
		}
		if len(s.data)+len(value) > maxEventBytes {
			s.oversize()
			return
		}
		if s.hasData {
			s.data = append(s.data, '\n')
		}
		s.data = append(s.data, value...)
		s.hasData = true
	}
}

// trimCR drops a line's CR before its LF.
func trimCR(l []byte) []byte {
	if n := len(l); n > 0 && l[n-1] == '\r' {
		return l[:n-1]
	}
	return l
}

// end ends the stream: an event left without its blank line is dispatched (the
// format says to drop it, but a usage in it is still the provider's word).
func (s *sseScanner) end() {
	if len(s.partial) > 0 && !s.skip {
		s.line(trimCR(s.partial))
		s.partial = s.partial[:0]
	}
	s.line(nil)
}
