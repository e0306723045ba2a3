package transcript

import (
	"encoding/json"

	"github.com/pruneadvisor/pruneadvisor/toolcall"
)

// Classify sets the call's Classification (Action, Path, Range, Content, Command,
// Summary, Paths and Ops) from its Name and Args, with relative paths resolved
// against cwd, the session's working directory ("" leaves them relative): see
// toolcall.Classify for the vocabularies. It replaces every field it sets, so
// calling it twice is harmless. Readers may refine the result afterwards from
// structured results.
func (c *ToolCall) Classify(cwd string) {
	c.Classification = toolcall.Classify(c.Name, c.Args, cwd)
}

// classifyLike classifies c as if it were a call of tool name with args (marshalled
// to JSON), keeping c's own Name and Args. Readers use it when the arguments
// Classify needs are recorded somewhere other than the call's own Args (OpenHands
// keeps an old edit's editor command in the model's raw tool call).
func classifyLike(c *ToolCall, name string, args any, cwd string) {
	raw, err := json.Marshal(args)
	if err != nil {
		raw = []byte("{}")
	}
	c.Classification = toolcall.Classify(name, raw, cwd)
}

// Failed reports whether the output says its call did not do what it asked: the
// reader's IsError, or what the call's Classification.Failed reads in Text (a
// non-zero exit status in the agent's own words, an edit's or write's refusal, a
// read tool's error where the content should start). An output without a call
// fails by IsError alone. The rules use it so that a failed edit supersedes
// nothing and a failed read shows nothing.
func (o *ToolOutput) Failed() bool {
	if o.IsError {
		return true
	}
	return o.Call != nil && o.Call.Failed(o.Text)
}

// ResolveOpenFiles runs a toolcall.OpenFiles over the whole session, in message
// order, so that SWE-agent's windowed commands name the file they act on and the
// lines they show.
func ResolveOpenFiles(s *Session) {
	t := &toolcall.OpenFiles{Cwd: s.Cwd}
	for _, m := range s.Messages {
		for _, c := range m.Calls {
			t.Call(c.Name, c.Args, &c.Classification)
		}
		for _, o := range m.Outputs {
			if c := o.Call; c != nil {
				t.Output(c.Name, c.Args, &c.Classification, o.Text, o.IsError)
			}
		}
	}
}
