package transcript

import (
	"encoding/json"
	"strings"
	"time"

	"github.com/pruneadvisor/pruneadvisor/transcript/internal/jsonscan"
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

func readOpenHands(name string, data []byte, opts Options) (*Session, error) {
	b := newBuilder(FormatOpenHands, name, data)
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

	// Messages are collected first and added at the end, so that actions of one model
	// response can join the assistant message that response started.
	var msgs []*Message
	calls := map[string]*ToolCall{} // by action event id
	var lastAsst *Message           // the assistant message tool results may follow
	lastResp := ""                  // its model response id
	for i, ev := range events {
		if ev == nil {
			continue
		}
		path := jsonscan.Path(i)
		source, _ := jsonscan.Text(ev.Source)
		id, _ := jsonscan.Text(ev.ID)
		action, isAction := jsonscan.Text(ev.Action)
		obs, isObs := jsonscan.Text(ev.Observation)
		var args map[string]json.RawMessage
		if ev.Args != nil && jsonscan.Kind(ev.Args) != 'n' {
			var ok bool
			if args, ok = jsonscan.Loose(ev.Args); !ok {
				if err := skipEntry(b, opts, &ParseError{File: name, Field: jsonscan.Path(path, "args"), Msg: "not an object"}); err != nil {
					return nil, err
				}
				continue
			}
		}
		argText := func(k string) string { s, _ := jsonscan.Text(args[k]); return s }
		at := func() time.Time { return b.timeOf(ev.Timestamp, 0, jsonscan.Path(path, "timestamp")) }
		switch {
		case isAction && ohSkipActions[action], isAction && source == "environment":
		case isAction && action == "message":
			text := argText("content")
			if text == "" {
				text, _ = jsonscan.Text(ev.Message)
			}
			role := RoleUser
			if source == "agent" {
				role = RoleAssistant
			}
			msgs = append(msgs, &Message{Role: role, Text: text, Time: at()})
			lastAsst, lastResp = nil, ""
		case isAction && action == "system":
			msgs = append(msgs, &Message{Role: RoleSystem, Text: argText("content"), Time: at()})
			lastAsst, lastResp = nil, ""
		case isAction:
			if source != "agent" {
				b.warn("%s: %s action from %q left out", path, action, source)
				continue
			}
			var meta ohMeta
			_ = json.Unmarshal(ev.Metadata, &meta)
			callID, _ := jsonscan.Text(meta.ToolCallID)
			if callID == "" {
				callID = "event-" + id
			}
			c := &ToolCall{ID: callID, Name: action, Args: argsJSON(ev.Args)}
			ohClassify(c, action, args, ohModelArgs(meta, callID), b.s.Cwd)
			if id != "" {
				calls[id] = c
			}
			resp, _ := jsonscan.Text(meta.ModelResponse.ID)
			thought := strings.TrimSpace(argText("thought"))
			if lastAsst != nil && resp != "" && resp == lastResp {
				lastAsst.Calls = append(lastAsst.Calls, c)
				if thought != "" && !strings.Contains(lastAsst.Text, thought) {
					lastAsst.Text = strings.TrimSpace(lastAsst.Text + "\n" + thought)
				}
				continue
			}
			m := &Message{Role: RoleAssistant, Text: thought, Calls: []*ToolCall{c}, Time: at()}
			msgs = append(msgs, m)
			lastAsst, lastResp = m, resp
		case isObs:
			cause, _ := jsonscan.Text(ev.Cause)
			c := calls[cause]
			if c == nil {
				if obs != "null" && obs != "agent_state_changed" && cause != "" {
					b.warn("%s: %s observation caused by event %s, which is no tool call; left out", path, obs, cause)
				}
				continue
			}
			if jsonscan.Kind(ev.Content) != '"' && jsonscan.Kind(ev.Content) != 'n' && ev.Content != nil {
				if err := skipEntry(b, opts, &ParseError{File: name, Field: jsonscan.Path(path, "content"), Msg: "not a string"}); err != nil {
					return nil, err
				}
				continue
			}
			text, _ := jsonscan.Text(ev.Content)
			o := &ToolOutput{CallID: c.ID, Text: text, IsError: obs == "error" || ohFailed(ev)}
			if ev.Content != nil {
				setLoc(o, 0, jsonscan.Path(path, "content"))
			}
			msgs = append(msgs, &Message{Role: RoleTool, Outputs: []*ToolOutput{o}, Time: at()})
		default:
			if err := skipEntry(b, opts, &ParseError{File: name, Field: path, Msg: "event has neither action nor observation"}); err != nil {
				return nil, err
			}
		}
	}
	for _, m := range msgs {
		b.add(m)
	}
	return b.finish()
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
