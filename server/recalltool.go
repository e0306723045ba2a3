package server

import (
	"github.com/tidwall/gjson"

	"github.com/pruneadvisor/pruneadvisor/advisor"
	"github.com/pruneadvisor/pruneadvisor/prices"
)

// recallKey is the advisor a proxied request's session goes to, as far as the
// recall tool its stubs name goes (docs/DESIGN.md "Recall": a stub names a recall tool
// the agent really has). header is the checked X-Pruneadvisor-Recall-Tool value
// (recallToolHeader), which wrap sets for its agents and which wins; without it the
// request's own tools list decides (offeredRecallTool): the recall tool it offers
// the model, by its name there; none among the tools listed gives noRecall (stubs
// say how to get the original otherwise: advisor.NoRecallHint); a body without a
// tools list keeps the configured name (--recall-tool), as before.
func recallKey(header string, body []byte, configured string) advisorKey {
	if header != "" {
		return advisorKey{recallTool: header}
	}
	name, listed := offeredRecallTool(body, configured)
	switch {
	case name != "":
		if name == configured {
			return advisorKey{} // the configured advisor, as before
		}
		return advisorKey{recallTool: name}
	case listed:
		return advisorKey{noRecall: true}
	}
	return advisorKey{}
}

// offeredRecallTool returns the name, as the model sees it, of the first tool of
// body's top-level tools list that is the recall tool (advisor.IsRecallTool with
// configured), "" when none is; listed reports whether the body has a tools list.
// Tools are named as each API names them: name (Anthropic, OpenAI Responses),
// function.name and custom.name (Chat Completions), a Responses namespace's
// name + "__" + each of its tools' names (Codex's MCP servers), and Gemini's
// functionDeclarations (or function_declarations) names. A name the recall tool
// header would refuse (recallToolHeader) is passed over.
func offeredRecallTool(body []byte, configured string) (name string, listed bool) {
	tools := gjson.GetBytes(body, "tools")
	if !tools.IsArray() {
		return "", false
	}
	tools.ForEach(func(_, tool gjson.Result) bool {
		for _, n := range toolNames(tool) {
			if advisor.IsRecallTool(n, configured) {
				if v, err := recallToolHeader(n); err == nil && v != "" {
					name = v
					return false
				}
			}
		}
		return true
	})
	return name, true
}

// toolNames returns the names one element of a tools list gives the model.
func toolNames(tool gjson.Result) []string {
	var out []string
	add := func(r gjson.Result) {
		if r.Type == gjson.String && r.Str != "" {
			out = append(out, r.Str)
		}
	}
	if tool.Get("type").Str == "namespace" {
		ns := tool.Get("name").Str
		tool.Get("tools").ForEach(func(_, t gjson.Result) bool {
			if n := t.Get("name").Str; ns != "" && n != "" {
				out = append(out, ns+"__"+n)
			}
			return true
		})
		return out
	}
	add(tool.Get("name"))
	add(tool.Get("function.name"))
	add(tool.Get("custom.name"))
	for _, key := range []string{"functionDeclarations", "function_declarations"} {
		tool.Get(key).ForEach(func(_, d gjson.Result) bool {
			add(d.Get("name"))
			return true
		})
	}
	return out
}

// acquireSession acquires session id's entry (release it when done) with the
// advisor for the recall tool its request names or offers (recallKey: header is
// the checked X-Pruneadvisor-Recall-Tool value), for provider's prices (the
// route's) and agent's compaction point (agentOf), and logs once when it offers
// none.
func (s *Server) acquireSession(header string, provider prices.Provider, agent string, body []byte, id string) (*sessionEntry, error) {
	key := recallKey(header, body, s.cfg.RecallTool)
	key.provider, key.agent = provider, agent
	e, err := s.sessions.acquire(key, id)
	if err == nil && key.noRecall {
		s.warnNoRecall(e, id)
	}
	return e, err
}

// warnNoRecall logs, once per session entry, that the session's agent has no
// recall tool, and the fix.
func (s *Server) warnNoRecall(e *sessionEntry, session string) {
	if e.warnedNoRecall.CompareAndSwap(false, true) {
		s.log.Warn("the agent has no recall tool: its stubs say how to get an original otherwise (run the call again, `pruneadvisor recall ID`, GET /v1/recall/ID)",
			"session", session,
			"fix", "run the agent through `pruneadvisor wrap`, or give it the recall tool over MCP (`pruneadvisor mcp`) and name it in the "+HeaderRecallTool+" header or --recall-tool")
	}
}
