package transcript

import (
	"encoding/json"
	"strings"
	"time"

	"github.com/pruneadvisor/pruneadvisor/internal/jsonscan"
)

// OpenHands V0 event streams (TRANSCRIPT-FORMATS.md §7): a JSON array of events
// {id, timestamp, source: user|agent|environment, message, action|observation,
// args|extras, content, cause, tool_call_metadata}.
//
// Mapping:
//   - a "message" action from the user is a user message (args.content); from the
//     agent, an assistant message with that text and no call; a "system" action is a
//     system message;
//   - any other action from the agent (run, read, edit, write, browse, think,
//     finish, …) is a tool call named after the action, Args = args, Text =
//     args.thought. The call id is tool_call_metadata.tool_call_id, or "event-<id>"
//     when the event has none. Actions whose tool_call_metadata.model_response.id
//     names the same model response as the previous assistant message, with only
//     tool results in between, join that message: one model call is one step;
//   - an observation whose cause is such an action's id is its result: Text =
//     content (the event's "content" field, location "<index>.content"), IsError
//     when the observation is "error", success is false, or
//     extras.metadata.exit_code > 0. Other observations (agent_state_changed, null,
//     results of message actions) and environment actions are left out.
//
// Classification is Classify's (run, read, edit with a command, write), except for
// edits whose args lack the editor command: those follow the model's own
// str_replace_editor call in tool_call_metadata (create is then a write with its
// file_text). Session.Cwd is the working_dir of the first command result that
// records one.

// detectOpenHands claims a JSON array whose first complete element is an object
// with a source and an action or observation.
func detectOpenHands(head []byte) bool {
	h := jsonscan.ScanHead(head)
	if !h.Array || len(h.Items) == 0 {
		return false
	}
	obj, ok := jsonscan.Loose(h.Items[0])
	return ok && obj["source"] != nil && (obj["action"] != nil || obj["observation"] != nil)
}

type ohEvent struct {
	ID          json.RawMessage `json:"id"`
	Source      json.RawMessage `json:"source"`
	Message     json.RawMessage `json:"message"`
	Action      json.RawMessage `json:"action"`
	Observation json.RawMessage `json:"observation"`
	Args        json.RawMessage `json:"args"`
	Extras      json.RawMessage `json:"extras"`
	Content     json.RawMessage `json:"content"`
	Cause       json.RawMessage `json:"cause"`
	Success     json.RawMessage `json:"success"`
	Metadata    json.RawMessage `json:"tool_call_metadata"`
	Timestamp   json.RawMessage `json:"timestamp"`
}

// ohMeta is the part of tool_call_metadata the reader uses.
type ohMeta struct {
	ToolCallID    json.RawMessage `json:"tool_call_id"`
	ModelResponse struct {
		ID      json.RawMessage `json:"id"`
		Choices []struct {
			Message struct {
				ToolCalls []struct {
					ID       json.RawMessage `json:"id"`
					Function struct {
						Arguments json.RawMessage `json:"arguments"`
					} `json:"function"`
				} `json:"tool_calls"`
			} `json:"message"`
		} `json:"choices"`
	} `json:"model_response"`
}

// ohSkipActions are actions that are bookkeeping, not model calls.
var ohSkipActions = map[string]bool{"change_agent_state": true, "null": true, "recall": true}

// readOpenHands reads an OpenHands event list: the events are decoded (ohEvents),
// then turned into messages one by one (ohReader.event), which are added once all
// are made, so that actions of one model response can join the assistant message
// that response started.
func readOpenHands(name string, data []byte, opts Options) (*Session, error) {
	b := newBuilder(FormatOpenHands, name, data)
	events, err := ohEvents(b, name, data, opts)
	if err != nil {
		return nil, err
	}
	r := &ohReader{b: b, name: name, opts: opts, calls: map[string]*ToolCall{}}
	for i, ev := range events {
		if ev == nil {
			continue
		}
		if err := r.event(i, ev); err != nil {
			return nil, err
		}
	}
	for _, m := range r.msgs {
		b.add(m)
	}
	return b.finish()
}

// ohEvents decodes the document's events, nil for an element that is not an
// object (skipped), and takes Session.Cwd from the first result that records a
// working_dir.
func ohEvents(b *builder, name string, data []byte, opts Options) ([]*ohEvent, error) {
	root, err := loadDocument(b, name, data, opts)
	if err != nil {
		return nil, err
	}
	if jsonscan.Kind(root) != '[' {
		return nil, &ParseError{File: name, Msg: "an OpenHands trajectory is a JSON array of events"}
	}
	raws, _ := jsonscan.Array(root)
	events := make([]*ohEvent, len(raws))
	for i, raw := range raws {
		var ev ohEvent
		if !jsonscan.Decode(raw, &ev) {
			if err := skipEntry(b, opts, &ParseError{File: name, Field: jsonscan.Path(i), Msg: "event is not a JSON object"}); err != nil {
				return nil, err
			}
			continue
		}
		events[i] = &ev
		if b.s.Cwd == "" {
			var ex struct {
				Metadata struct {
					WorkingDir json.RawMessage `json:"working_dir"`
				} `json:"metadata"`
			}
			if json.Unmarshal(ev.Extras, &ex) == nil {
				b.s.Cwd, _ = jsonscan.Text(ex.Metadata.WorkingDir)
			}
		}
	}
	return events, nil
}

// ohReader turns events into messages, collected in msgs and added at the end.
type ohReader struct {
	b        *builder
	name     string
	opts     Options
	msgs     []*Message
	calls    map[string]*ToolCall // by action event id
	lastAsst *Message             // the assistant message tool results may follow
	lastResp string               // its model response id
}

// ohEventView is what event reads of one event before it decides what the event is.
type ohEventView struct {
	ev     *ohEvent
	path   string // the event's JSON path in the document
	source string
	id     string
	args   map[string]json.RawMessage
}

// argText is the text of argument k, "" when absent.
func (v *ohEventView) argText(k string) string { s, _ := jsonscan.Text(v.args[k]); return s }

// event turns the i-th event into a message, a call or a result: a user, agent or
// system message action; an agent's tool action (action); an observation
// (observation). Bookkeeping actions and the environment's are left out.
func (r *ohReader) event(i int, ev *ohEvent) error {
	v := &ohEventView{ev: ev, path: jsonscan.Path(i)}
	v.source, _ = jsonscan.Text(ev.Source)
	v.id, _ = jsonscan.Text(ev.ID)
	action, isAction := jsonscan.Text(ev.Action)
	obs, isObs := jsonscan.Text(ev.Observation)
	if ev.Args != nil && jsonscan.Kind(ev.Args) != 'n' {
		var ok bool
		if v.args, ok = jsonscan.Loose(ev.Args); !ok {
			return skipEntry(r.b, r.opts, &ParseError{File: r.name, Field: jsonscan.Path(v.path, "args"), Msg: "not an object"})
		}
	}
	switch {
	case isAction && ohSkipActions[action], isAction && v.source == "environment":
	case isAction && action == "message":
		text := v.argText("content")
		if text == "" {
			text, _ = jsonscan.Text(ev.Message)
		}
		role := RoleUser
		if v.source == "agent" {
			role = RoleAssistant
		}
		r.msgs = append(r.msgs, &Message{Role: role, Text: text, Time: r.at(v)})
		r.lastAsst, r.lastResp = nil, ""
	case isAction && action == "system":
		r.msgs = append(r.msgs, &Message{Role: RoleSystem, Text: v.argText("content"), Time: r.at(v)})
		r.lastAsst, r.lastResp = nil, ""
	case isAction:
		r.action(v, action)
	case isObs:
		return r.observation(v, obs)
	default:
		return skipEntry(r.b, r.opts, &ParseError{File: r.name, Field: v.path, Msg: "event has neither action nor observation"})
	}
	return nil
}

// at is the event's time.
func (r *ohReader) at(v *ohEventView) time.Time {
	return r.b.timeOf(v.ev.Timestamp, 0, jsonscan.Path(v.path, "timestamp"))
}

// action makes the agent's tool action a call: it joins the previous assistant
// message when both come from one model response, with only results between;
// otherwise it starts an assistant message whose text is the action's thought.
func (r *ohReader) action(v *ohEventView, action string) {
	if v.source != "agent" {
		r.b.warn("%s: %s action from %q left out", v.path, action, v.source)
		return
	}
	var meta ohMeta
	_ = json.Unmarshal(v.ev.Metadata, &meta)
	callID, _ := jsonscan.Text(meta.ToolCallID)
	if callID == "" {
		callID = "event-" + v.id
	}
	c := &ToolCall{ID: callID, Name: action, Args: argsJSON(v.ev.Args)}
	ohClassify(c, action, v.args, ohModelArgs(meta, callID), r.b.s.Cwd)
	if v.id != "" {
		r.calls[v.id] = c
	}
	resp, _ := jsonscan.Text(meta.ModelResponse.ID)
	thought := strings.TrimSpace(v.argText("thought"))
	if r.lastAsst != nil && resp != "" && resp == r.lastResp {
		r.lastAsst.Calls = append(r.lastAsst.Calls, c)
		if thought != "" && !strings.Contains(r.lastAsst.Text, thought) {
			r.lastAsst.Text = strings.TrimSpace(r.lastAsst.Text + "\n" + thought)
		}
		return
	}
	m := &Message{Role: RoleAssistant, Text: thought, Calls: []*ToolCall{c}, Time: r.at(v)}
	r.msgs = append(r.msgs, m)
	r.lastAsst, r.lastResp = m, resp
}

// observation makes an observation the result of the action its cause names;
// observations of anything else are left out.
func (r *ohReader) observation(v *ohEventView, obs string) error {
	ev := v.ev
	cause, _ := jsonscan.Text(ev.Cause)
	c := r.calls[cause]
	if c == nil {
		if obs != "null" && obs != "agent_state_changed" && cause != "" {
			r.b.warn("%s: %s observation caused by event %s, which is no tool call; left out", v.path, obs, cause)
		}
		return nil
	}
	if jsonscan.Kind(ev.Content) != '"' && jsonscan.Kind(ev.Content) != 'n' && ev.Content != nil {
		return skipEntry(r.b, r.opts, &ParseError{File: r.name, Field: jsonscan.Path(v.path, "content"), Msg: "not a string"})
	}
	text, _ := jsonscan.Text(ev.Content)
	o := &ToolOutput{CallID: c.ID, Text: text, IsError: obs == "error" || ohFailed(ev)}
	if ev.Content != nil {
		setLoc(o, 0, jsonscan.Path(v.path, "content"))
	}
	r.msgs = append(r.msgs, &Message{Role: RoleTool, Outputs: []*ToolOutput{o}, Time: r.at(v)})
	return nil
}

// ohFailed reports a result the event marks as failed: success false or a
// positive exit code.
func ohFailed(ev *ohEvent) bool {
	if strings.TrimSpace(string(ev.Success)) == "false" {
		return true
	}
	var ex struct {
		Metadata struct {
			ExitCode json.RawMessage `json:"exit_code"`
		} `json:"metadata"`
	}
	if json.Unmarshal(ev.Extras, &ex) != nil {
		return false
	}
	code, ok := jsonscan.Int(ex.Metadata.ExitCode)
	return ok && code > 0
}

// ohModelArgs returns the arguments of the model's own tool call callID inside
// tool_call_metadata.model_response, decoded; nil when absent.
func ohModelArgs(meta ohMeta, callID string) map[string]any {
	for _, ch := range meta.ModelResponse.Choices {
		for _, tc := range ch.Message.ToolCalls {
			if id, _ := jsonscan.Text(tc.ID); id != callID {
				continue
			}
			var args map[string]any
			if json.Unmarshal(argsJSON(tc.Function.Arguments), &args) == nil {
				return args
			}
		}
	}
	return nil
}

// ohClassify classifies an OpenHands edit whose event args lack the editor command
// (older events keep only path, content, start, end and translated_ipython_code) from
// the model's own str_replace_editor call, which names command, path and file_text.
// Every other action, and edits whose args hold a command, are left to Classify.
func ohClassify(c *ToolCall, action string, args map[string]json.RawMessage, model map[string]any, cwd string) {
	if action != "edit" || args["command"] != nil {
		return
	}
	cmd, _ := model["command"].(string)
	path, _ := model["path"].(string)
	if cmd == "" || path == "" {
		return
	}
	classifyLike(c, "str_replace_editor", model, cwd)
}
