package server

import (
	"fmt"
	"strings"

	"github.com/pruneadvisor/pruneadvisor/internal/textcut"
)

// userAgents maps the User-Agent prefixes of the agents' model calls to their names
// (advisor.CompactionPoints): Claude Code sends "claude-cli/VERSION (external,
// cli)", Codex "codex_cli_rs/VERSION (...)" (codex exec: "codex_exec/"), Gemini
// CLI "GeminiCLI/VERSION (platform; arch)", opencode "opencode/VERSION". pi sends
// its provider SDK's own ("Anthropic/JS ...", "OpenAI/JS ..."), which names no
// agent: `wrap pi` says so in HeaderAgent, else serve --agent pi.
var userAgents = []struct{ prefix, agent string }{
	{"claude-cli/", "claude"},
	{"claude-code/", "claude"},
	{"codex_cli_rs/", "codex"},
	{"codex_exec/", "codex"},
	{"geminicli/", "gemini"},
	{"gemini-cli/", "gemini"},
	{"opencode/", "opencode"},
}

// AgentFromUserAgent returns the agent a User-Agent header names (its prefix,
// compared without case), "" when none.
func AgentFromUserAgent(ua string) string {
	ua = strings.ToLower(strings.TrimSpace(ua))
	for _, u := range userAgents {
		if strings.HasPrefix(ua, u.prefix) {
			return u.agent
		}
	}
	return ""
}

// maxAgentHeader bounds the X-Pruneadvisor-Agent value.
const maxAgentHeader = 64

// agentOf returns the agent whose compaction point is a proxied request's hard
// limit: HeaderAgent (what wrap sends: it started the agent), else the configured
// one (serve --agent, the config's "agent"), else the one the User-Agent header
// names; "" when none, and then the hard limit is the window fraction, which is
// logged once per server. An unknown agent in HeaderAgent is an error naming it.
func (s *Server) agentOf(header, userAgent string) (string, error) {
	if header != "" {
		if len(header) > maxAgentHeader {
			return "", fmt.Errorf("%s header is %d bytes; at most %d", HeaderAgent, len(header), maxAgentHeader)
		}
		if err := s.cfg.CheckAgent(header); err != nil {
			return "", fmt.Errorf("%s header: %w", HeaderAgent, err)
		}
		return header, nil
	}
	if s.cfg.Agent != "" {
		return s.cfg.Agent, nil
	}
	if a := AgentFromUserAgent(userAgent); a != "" && s.cfg.KnownAgent(a) {
		return a, nil
	}
	if s.warnedAgent.CompareAndSwap(false, true) {
		s.log.Warn("the agent is not known (no "+HeaderAgent+" header, no --agent, a User-Agent naming none): its hard limit is hard_limit_fraction of the window, not its compaction point",
			"user_agent", textcut.BytesDots(userAgent, 60), "hard_limit", s.cfg.HardLimitTokens(),
			"fix", "run the agent through `pruneadvisor wrap`, or start serve with --agent NAME ("+strings.Join(s.cfg.Agents(), ", ")+")")
	}
	return "", nil
}
