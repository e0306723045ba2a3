package main

import (
	"fmt"
	"log/slog"
	"math"
	"net"
	"os"
	"runtime/debug"
	"strings"
	"time"

	"github.com/dustin/go-humanize"
	"github.com/spf13/cobra"

	"github.com/pruneadvisor/pruneadvisor/advisor"
	"github.com/pruneadvisor/pruneadvisor/server"
	"github.com/pruneadvisor/pruneadvisor/storage"
)

type serveFlags struct {
	scorerFlags
	configFlags
	addr          string
	db            string
	openai        string
	anthropic     string
	gemini        string
	token         string
	allowedHosts  []string
	maxBody       int64
	maxSessions   int
	maxMemory     string
	sessionIdle   time.Duration
	maxAdvising   int
	adviseTimeout time.Duration
	headerTimeout time.Duration
	bodyTimeout   time.Duration
	idleTimeout   time.Duration
	verbose       bool
	agent         string
	bgAsks        string
}

func serveCmd(e *env) *cobra.Command {
	var f serveFlags
	c := &cobra.Command{
		Use:   "serve",
		Short: "Run the HTTP sidecar and the transparent Anthropic/OpenAI/Gemini proxy",
		Long: `serve runs one HTTP server with:

  POST /v1/chat/completions  OpenAI Chat Completions, advised and forwarded to --openai-upstream
  POST /v1/messages          Anthropic Messages, advised and forwarded to --anthropic-upstream
  POST /v1/responses         OpenAI Responses (Codex), advised and forwarded to --openai-upstream;
                             a request with previous_response_id is forwarded untouched
  POST /v1beta/models/{model}:generateContent and :streamGenerateContent
                             Gemini API (Gemini CLI), advised and forwarded to --gemini-upstream;
                             every other /v1beta/ path passes through
  POST /v1/advise            sidecar: {session_id, format, messages, budget?, task?, now?} -> {messages, plan}
  GET  /v1/recall/{id}       a pruned output's original, byte for byte; ?lines=200-250 or
                             ?grep=PATTERN[&context=N]: only those lines, numbered
  GET  /healthz, GET /metrics (Prometheus)
  GET  /ui/                  the live page: the sessions advised now, their context and
                             stubs, the ledger's savings, the recent recalls (HTML that
                             loads nothing; docs/COMMANDS.md)

Other /v1/ paths pass through to the upstream untouched. Proxied requests keep every
byte but the content of pruned tool results; responses, streams included, come back as
the upstream sent them. If advising fails the request goes on unchanged. A session is
named by the X-Pruneadvisor-Session header, else by a hash of its system prompt and
first user message. Stubs name --recall-tool, or the tool a request's
X-Pruneadvisor-Recall-Tool header names. The hard limit is the agent's compaction
point less a step's growth: the agent the X-Pruneadvisor-Agent header names (wrap
sends it), else --agent, else the one the User-Agent header names (claude-cli/,
codex_cli_rs/, GeminiCLI/, opencode/), else none, and then hard_limit_fraction of
the window (logged once). "pruneadvisor wrap AGENT" points an agent
at a proxy by itself; by hand, ANTHROPIC_BASE_URL=http://127.0.0.1:8377, an OpenAI
base URL of http://127.0.0.1:8377/v1 or GOOGLE_GEMINI_BASE_URL=http://127.0.0.1:8377
(docs/INTEGRATIONS.md).

Listening beyond loopback needs --token (or $PRUNEADVISOR_TOKEN); clients then send it
in the X-Pruneadvisor-Token header or as Authorization: Bearer. Without a token, only requests naming a loopback
host (localhost, *.localhost, 127.0.0.1, [::1]) or one of --allowed-hosts are
answered: others get 403, so a web page cannot reach the server by pointing its own
domain at 127.0.0.1. SIGINT or SIGTERM shuts down gracefully.

The usage every proxied response reports is recorded in the database's ledger
(pruneadvisor ledger) and counted in /metrics.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return runServe(cmd, e, &f)
		},
	}
	f.scorerFlags.register(c)
	f.configFlags.register(c)
	c.Flags().StringVar(&f.addr, "addr", "127.0.0.1:8377", "listen address (host:port)")
	c.Flags().StringVar(&f.db, "db", defaultDBPath(), "store for originals, stubs, asks and decisions: an SQLite file, or a postgres:// URL (shared by every replica)")
	c.Flags().StringVar(&f.openai, "openai-upstream", server.DefaultOpenAIUpstream, "base URL OpenAI requests are forwarded to (the request path is appended)")
	c.Flags().StringVar(&f.anthropic, "anthropic-upstream", server.DefaultAnthropicUpstream, "base URL Anthropic requests are forwarded to (the request path is appended)")
	c.Flags().StringVar(&f.gemini, "gemini-upstream", server.DefaultGeminiUpstream, "base URL Gemini API requests (/v1beta/...) are forwarded to (the request path is appended)")
	c.Flags().StringVar(&f.token, "token", os.Getenv("PRUNEADVISOR_TOKEN"), "token clients must send (X-Pruneadvisor-Token header, or Authorization: Bearer); required beyond loopback (default $PRUNEADVISOR_TOKEN)")
	c.Flags().StringSliceVar(&f.allowedHosts, "allowed-hosts", nil, "host names besides loopback ones that requests may name when no --token is set (comma-separated; *.example.com for every name under it)")
	c.Flags().Int64Var(&f.maxBody, "max-body", server.DefaultMaxBody, "largest request body in bytes (larger: 413)")
	c.Flags().IntVar(&f.maxSessions, "max-sessions", server.DefaultMaxSessions, "sessions whose advisor state is kept in memory (least recently used idle ones are dropped; their stubs stay in the database)")
	c.Flags().StringVar(&f.maxMemory, "max-memory", "384MiB", "memory the process stays under (e.g. 384MiB, 1GB): the Go runtime's soft limit is this less 64 MiB for SQLite's allocations outside the Go heap (GOMEMLIMIT wins when set and the flag is not given), 3/8 of that limit for the message cache")
	c.Flags().DurationVar(&f.sessionIdle, "session-idle", server.DefaultSessionIdle, "how long a session's advisor state stays in memory without a request (its stubs stay in the database)")
	c.Flags().IntVar(&f.maxAdvising, "max-advising", 0, "requests advised at once, the others wait their turn within --advise-timeout (default: the number of CPUs)")
	c.Flags().DurationVar(&f.adviseTimeout, "advise-timeout", server.DefaultAdviseTimeout, "longest time spent advising one request before forwarding it unchanged")
	c.Flags().DurationVar(&f.headerTimeout, "header-timeout", server.DefaultHeaderTimeout, "longest time a client may take to send a request's headers")
	c.Flags().DurationVar(&f.bodyTimeout, "body-timeout", server.DefaultBodyTimeout, "longest time a client may take to send a request's body once its headers are in (then 408); responses and streams are never cut")
	c.Flags().DurationVar(&f.idleTimeout, "idle-timeout", server.DefaultIdleTimeout, "how long an idle keep-alive connection stays open")
	c.Flags().BoolVar(&f.verbose, "verbose", false, "log at info level (default: warnings only)")
	c.Flags().StringVar(&f.agent, "agent", "", "the coding agent whose compaction point is the hard limit (claude, codex, pi, gemini, opencode, or one the config's compaction_points adds); default: the X-Pruneadvisor-Agent header wrap sends, else the User-Agent header, else hard_limit_fraction of the window")
	c.Flags().StringVar(&f.bgAsks, "background-asks", "auto", "ask the scorer off the request path (requests go on with the scores they have; one ask in flight per session): auto (on for the Ollama scorer, off for the fitted and lexical ones, which answer in microseconds) | on | off")
	return c
}

// backgroundAsks decides --background-asks for the scorer chosen (nil: rules
// only, nothing to ask): auto means on for a scorer that asks a server (Ollama,
// alone or fused), whose answer takes seconds.
func backgroundAsks(flag string, scorer advisor.Scorer) (bool, error) {
	switch flag {
	case "on":
		return scorer != nil, nil
	case "off":
		return false, nil
	case "auto":
		if scorer == nil {
			return false, nil
		}
		name := scorer.Name()
		return strings.HasPrefix(name, "ollama:") || strings.HasPrefix(name, "fused("), nil
	}
	return false, fmt.Errorf("--background-asks %q: want auto, on or off", flag)
}

func runServe(cmd *cobra.Command, e *env, f *serveFlags) error {
	if err := server.CheckListen(f.addr, f.token); err != nil {
		return usageError{err}
	}
	if f.maxBody <= 0 {
		return usageError{fmt.Errorf("--max-body %d: want a positive number of bytes", f.maxBody)}
	}
	maxMemory, err := humanize.ParseBytes(f.maxMemory)
	if err != nil || maxMemory < 64<<20 || maxMemory > math.MaxInt64 {
		return usageError{fmt.Errorf("--max-memory %q: want a size of at least 64MiB, such as 384MiB or 1GB", f.maxMemory)}
	}
	if cmd.Flags().Changed("max-memory") || os.Getenv("GOMEMLIMIT") == "" {
		prev := debug.SetMemoryLimit(server.GoMemoryLimit(int64(maxMemory)))
		defer debug.SetMemoryLimit(prev) // commands also run inside tests, in one process
	}
	if _, err := backgroundAsks(f.bgAsks, nil); err != nil {
		return usageError{err}
	}
	if f.maxAdvising < 0 {
		return usageError{fmt.Errorf("--max-advising %d: want a positive number (0: the number of CPUs)", f.maxAdvising)}
	}
	for _, d := range []struct {
		flag string
		d    time.Duration
	}{{"--header-timeout", f.headerTimeout}, {"--body-timeout", f.bodyTimeout}, {"--idle-timeout", f.idleTimeout}, {"--advise-timeout", f.adviseTimeout}, {"--session-idle", f.sessionIdle}} {
		if d.d <= 0 {
			return usageError{fmt.Errorf("%s %s: want a positive duration", d.flag, d.d)}
		}
	}
	cfg, err := f.configFlags.load()
	if err != nil {
		return usageError{err}
	}
	if f.agent != "" {
		if err := cfg.CheckAgent(f.agent); err != nil {
			return usageError{fmt.Errorf("--agent: %w", err)}
		}
		cfg.Agent = f.agent
		if err := cfg.Validate(); err != nil {
			return usageError{fmt.Errorf("--agent %s: %w", f.agent, err)}
		}
	}
	ctx := cmd.Context()
	level := slog.LevelWarn
	if f.verbose {
		level = slog.LevelInfo
	}
	logger := slog.New(slog.NewTextHandler(e.stderr, &slog.HandlerOptions{Level: level}))
	store, closeStore, err := openStore(ctx, f.db)
	if err != nil {
		return err
	}
	defer closeStore()
	secret, err := store.RecallSecret(ctx)
	if err != nil {
		return err
	}
	f.scorerFlags.useConfig(cfg)
	scorer, err := f.scorerFlags.build(ctx, e)
	if err != nil {
		return err
	}
	bg, _ := backgroundAsks(f.bgAsks, scorer)
	var fallback advisor.Scorer
	if bg {
		// A rewrite forced by the hard limit ranks the candidates not asked yet
		// with the fitted scorer, on the request path (microseconds).
		fs, err := f.scorerFlags.fitted(e)
		if err != nil {
			return err
		}
		fallback = fs
	}
	srv, err := server.New(server.Options{
		BackgroundAsks: bg, AskTimeout: f.scorerFlags.timeout, Fallback: fallback,
		Config: cfg, Scorer: scorer, Store: store, Ledger: store, RecallSecret: secret,
		Background:     f.scorerFlags.background(e),
		OpenAIUpstream: f.openai, AnthropicUpstream: f.anthropic, GeminiUpstream: f.gemini,
		Token: f.token, AllowedHosts: f.allowedHosts, MaxBody: f.maxBody, MaxSessions: f.maxSessions,
		MaxMemory: int64(maxMemory), SessionIdle: f.sessionIdle, MaxAdvising: f.maxAdvising,
		AdviseTimeout: f.adviseTimeout, HeaderTimeout: f.headerTimeout, BodyTimeout: f.bodyTimeout,
		IdleTimeout: f.idleTimeout, Logger: logger,
	})
	if err != nil {
		return usageError{err}
	}
	ln, err := net.Listen("tcp", f.addr)
	if err != nil {
		return fmt.Errorf("listen: %w", err)
	}
	scorerName := "none (rules only)"
	if scorer != nil {
		scorerName = scorer.Name()
	}
	asks := "on the request path"
	if bg {
		asks = "in the background"
	}
	fmt.Fprintf(e.stderr, "pruneadvisor: serving on http://%s (scorer %s, asked %s, db %s, recall tool %q)\n", ln.Addr(), scorerName, asks, storage.Redact(f.db), cfg.RecallTool)
	if err := srv.Serve(ctx, ln); err != nil {
		return fmt.Errorf("serve: %w", err)
	}
	fmt.Fprintln(e.stderr, "pruneadvisor: shut down")
	return nil
}
