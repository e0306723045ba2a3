package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"sort"
	"strings"
	"syscall"
	"time"

	"github.com/spf13/cobra"

	"github.com/pruneadvisor/pruneadvisor/server"
)

// defaultProxy is the proxy address wrap looks for before starting one of its own:
// serve's default --addr.
const defaultProxy = "http://127.0.0.1:8377"

type wrapFlags struct {
	scorerFlags
	configFlags
	proxy     string
	db        string
	dryRun    bool
	anthropic string
	openai    string
	gemini    string
}

// agentExit carries the wrapped agent's exit code through run (which then prints
// nothing of its own).
type agentExit struct{ code int }

func (e agentExit) Error() string { return fmt.Sprintf("agent exited with code %d", e.code) }

func wrapCmd(e *env) *cobra.Command {
	var f wrapFlags
	c := &cobra.Command{
		Use:   "wrap AGENT [flags] [-- ARGS...]",
		Short: "Run a coding agent (claude, codex, gemini, pi, opencode) through the pruning proxy",
		Long: `wrap runs one coding agent with its model calls going through the pruneadvisor
proxy and the recall tool given to it, then exits with the agent's exit code. ARGS
after -- go to the agent as they are.

  pruneadvisor wrap claude -- -p "fix the failing test"
  pruneadvisor wrap codex -- exec "fix the failing test"
  pruneadvisor wrap gemini -- -p "fix the failing test"
  pruneadvisor wrap pi -- -p "fix the failing test"
  pruneadvisor wrap opencode -- run "fix the failing test"

The proxy: --proxy URL if given, else the one at ` + defaultProxy + ` if it answers
/healthz, else one wrap starts on a free loopback port (with --db, the scorer and
config flags, and the upstreams) and stops when the agent exits. A running proxy
must use the same database as --db: the agent's recall tool reads it.

Each agent is pointed at the proxy by its own mechanism, an environment variable or
a command-line override; no file of the user's is changed:

  claude    ANTHROPIC_BASE_URL, ANTHROPIC_CUSTOM_HEADERS, --mcp-config
  codex     -c model_provider=pruneadvisor (Responses API, OPENAI_API_KEY), -c mcp_servers
  gemini    GOOGLE_GEMINI_BASE_URL, GEMINI_CLI_CUSTOM_HEADERS, GEMINI_CLI_SYSTEM_DEFAULTS_PATH
  pi        -e <extension written to the cache folder>, PRUNEADVISOR_URL
  opencode  OPENCODE_CONFIG_CONTENT (providers anthropic, openai, google; mcp)

The proxy routes every model call by its path and the credential it carries
(docs/INTEGRATIONS.md, "What goes where"): x-api-key reaches only Anthropic,
x-goog-api-key or key= only Gemini, Authorization: Bearer OpenAI, or the provider
of the route it is sent to (/v1/messages, /v1beta: Claude and Google sign-ins); a
request carrying another provider's credential than its route's, or two
providers', is refused with 400 and never forwarded.

Every request carries X-Pruneadvisor-Recall-Tool with the recall tool's name as that
agent shows it (mcp__pruneadvisor__recall, mcp_pruneadvisor_recall, recall,
pruneadvisor_recall), so every stub names a tool the agent has. --dry-run prints
the command and environment instead of running them.

Exit codes: the agent's own; 1 when the agent is not installed (the message names
the npm package) or cannot be started; 2 for an unknown agent or bad flags.`,
		Args: cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if dash := cmd.ArgsLenAtDash(); dash >= 0 {
				if dash != 1 {
					return usageError{fmt.Errorf("wrap: one AGENT before --, got %d arguments: %q", dash, args[:dash])}
				}
			} else if len(args) != 1 {
				return usageError{fmt.Errorf("wrap: the agent's arguments go after --: pruneadvisor wrap %s -- %s", args[0], strings.Join(args[1:], " "))}
			}
			return runWrap(cmd, e, &f, args)
		},
	}
	f.scorerFlags.register(c)
	f.configFlags.register(c)
	c.Flags().StringVar(&f.proxy, "proxy", "", "base URL of a running proxy to use (default: "+defaultProxy+" if it answers, else start one)")
	c.Flags().StringVar(&f.db, "db", defaultDBPath(), "store of the proxy and the recall tool: an SQLite file, or a postgres:// URL")
	c.Flags().BoolVar(&f.dryRun, "dry-run", false, "print what would run (command, environment, files) and exit")
	c.Flags().StringVar(&f.anthropic, "anthropic-upstream", "", "Anthropic upstream of a proxy wrap starts (default $ANTHROPIC_BASE_URL, else "+server.DefaultAnthropicUpstream+")")
	c.Flags().StringVar(&f.openai, "openai-upstream", "", "OpenAI upstream of a proxy wrap starts (default $OPENAI_BASE_URL without /v1, else "+server.DefaultOpenAIUpstream+")")
	c.Flags().StringVar(&f.gemini, "gemini-upstream", "", "Gemini upstream of a proxy wrap starts (default $GOOGLE_GEMINI_BASE_URL, else "+server.DefaultGeminiUpstream+")")
	return c
}

func runWrap(cmd *cobra.Command, e *env, f *wrapFlags, args []string) error {
	a, err := findAgent(args[0])
	if err != nil {
		return usageError{err}
	}
	// The config is checked whether or not it is used (a proxy already running, a
	// dry run): a bad one is a usage error here as it is where it is used.
	if _, err := f.configFlags.load(); err != nil {
		return usageError{err}
	}
	agentArgs := args[1:]
	bin, err := exec.LookPath(a.bin)
	if err != nil && !f.dryRun {
		return fmt.Errorf("wrap %s: %q is not installed (not on PATH); install it with: npm install -g %s", a.name, a.bin, a.pkg)
	}
	if bin == "" {
		bin = a.bin
	}
	self, err := os.Executable()
	if err != nil {
		return fmt.Errorf("wrap: the pruneadvisor executable: %w", err)
	}
	ctx := cmd.Context()
	proxy, stop, err := wrapProxy(ctx, e, f)
	if err != nil {
		return err
	}
	defer stop()
	l := &launch{
		proxy:  strings.TrimRight(proxy, "/"),
		mcpCmd: []string{self, "mcp", "--db", f.db},
		cache:  wrapCacheDir(),
		env:    map[string]string{},
		files:  map[string][]byte{},
		hdrs:   recallHeaders(a, os.Getenv("PRUNEADVISOR_TOKEN")),
		calls:  a.calls,
		getenv: os.Getenv,
	}
	if err := a.launch(l); err != nil {
		return fmt.Errorf("wrap %s: %w", a.name, err)
	}
	l.args = append(l.args, agentArgs...)
	if f.dryRun {
		printLaunch(e.stdout, bin, l)
		return nil
	}
	for path, data := range l.files {
		if err := writeFileAtomic(path, data); err != nil {
			return fmt.Errorf("wrap %s: %w", a.name, err)
		}
	}
	return runAgent(e, bin, l)
}

// wrapProxy returns the proxy to use and what stops it: --proxy, else the default
// address if a proxy answers there, else one started in this process.
func wrapProxy(ctx context.Context, e *env, f *wrapFlags) (string, func(), error) {
	if f.proxy != "" {
		if err := checkProxy(ctx, f.proxy); err != nil && !f.dryRun {
			return "", nil, fmt.Errorf("wrap: --proxy %s: %w", f.proxy, err)
		}
		return f.proxy, func() {}, nil
	}
	if checkProxy(ctx, defaultProxy) == nil {
		return defaultProxy, func() {}, nil
	}
	if f.dryRun {
		return "http://127.0.0.1:PORT", func() {}, nil
	}
	return startProxy(ctx, e, f)
}

// checkProxy asks url's /healthz for pruneadvisor's answer.
func checkProxy(ctx context.Context, url string) error {
	ctx, cancel := context.WithTimeout(ctx, 500*time.Millisecond)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, strings.TrimRight(url, "/")+"/healthz", nil)
	if err != nil {
		return err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	var h struct {
		Status string `json:"status"`
	}
	if err := json.NewDecoder(io.LimitReader(resp.Body, 4096)).Decode(&h); err != nil || resp.StatusCode != http.StatusOK || h.Status != "ok" {
		return fmt.Errorf("no pruneadvisor proxy answers at %s/healthz (status %d)", url, resp.StatusCode)
	}
	return nil
}

// startProxy serves a proxy on a free loopback port until the returned stop is
// called.
func startProxy(ctx context.Context, e *env, f *wrapFlags) (string, func(), error) {
	cfg, err := f.configFlags.load()
	if err != nil {
		return "", nil, usageError{err}
	}
	store, closeStore, err := openStore(ctx, f.db)
	if err != nil {
		return "", nil, err
	}
	secret, err := store.RecallSecret(ctx)
	if err != nil {
		closeStore()
		return "", nil, err
	}
	f.scorerFlags.useConfig(cfg)
	scorer, err := f.scorerFlags.build(ctx, e)
	if err != nil {
		closeStore()
		return "", nil, err
	}
	openai := f.openai
	if openai == "" {
		openai = strings.TrimSuffix(strings.TrimRight(os.Getenv("OPENAI_BASE_URL"), "/"), "/v1")
	}
	srv, err := server.New(server.Options{
		Config: cfg, Scorer: scorer, Store: store, Ledger: store, RecallSecret: secret,
		Background:        f.scorerFlags.background(e),
		AnthropicUpstream: firstNonEmpty(f.anthropic, os.Getenv("ANTHROPIC_BASE_URL")),
		OpenAIUpstream:    openai,
		GeminiUpstream:    firstNonEmpty(f.gemini, os.Getenv("GOOGLE_GEMINI_BASE_URL")),
		Logger:            newLogger(e.stderr, slog.LevelWarn),
	})
	if err != nil {
		closeStore()
		return "", nil, usageError{err}
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		closeStore()
		return "", nil, fmt.Errorf("wrap: listen: %w", err)
	}
	sctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		if err := srv.Serve(sctx, ln); err != nil {
			e.log.Warn("wrap: proxy stopped", "err", err)
		}
	}()
	stop := func() {
		cancel()
		<-done
		closeStore()
	}
	return "http://" + ln.Addr().String(), stop, nil
}

func firstNonEmpty(s ...string) string {
	for _, v := range s {
		if v != "" {
			return v
		}
	}
	return ""
}

// wrapCacheDir is the folder wrap writes its files to:
// $XDG_CACHE_HOME/pruneadvisor/wrap, else ~/.cache/pruneadvisor/wrap.
func wrapCacheDir() string {
	dir, err := os.UserCacheDir()
	if err != nil {
		dir = os.TempDir()
	}
	return filepath.Join(dir, "pruneadvisor", "wrap")
}

// writeFileAtomic writes data to path through a temporary file in the same folder.
func writeFileAtomic(path string, data []byte) error {
	if old, err := os.ReadFile(path); err == nil && string(old) == string(data) {
		return nil
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return err
	}
	tmp, err := os.CreateTemp(filepath.Dir(path), ".wrap-*")
	if err != nil {
		return err
	}
	if _, err := tmp.Write(data); err != nil {
		tmp.Close()
		os.Remove(tmp.Name())
		return err
	}
	if err := tmp.Close(); err != nil {
		os.Remove(tmp.Name())
		return err
	}
	return os.Rename(tmp.Name(), path)
}

// printLaunch prints what runWrap would run: the files, the environment changes
// and the command line, shell-quoted.
func printLaunch(w io.Writer, bin string, l *launch) {
	paths := make([]string, 0, len(l.files))
	for p := range l.files {
		paths = append(paths, p)
	}
	sort.Strings(paths)
	for _, p := range paths {
		fmt.Fprintf(w, "# writes %s (%d bytes)\n", p, len(l.files[p]))
	}
	keys := make([]string, 0, len(l.env))
	for k := range l.env {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		fmt.Fprintf(w, "%s=%s \\\n", k, shellQuote(l.env[k]))
	}
	parts := []string{shellQuote(bin)}
	for _, a := range l.args {
		parts = append(parts, shellQuote(a))
	}
	fmt.Fprintln(w, strings.Join(parts, " "))
}

// shellQuote quotes s for a POSIX shell when it needs it.
func shellQuote(s string) string {
	if s != "" && strings.Trim(s, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_-./:=@%+,") == "" {
		return s
	}
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}

// runAgent runs the agent with the terminal's streams and the environment
// changes, passes SIGTERM and SIGHUP on to it (SIGINT from the terminal reaches it
// directly; wrap only outlives it), and returns its exit status: 128+N when a
// signal N ended it.
func runAgent(e *env, bin string, l *launch) error {
	c := exec.Command(bin, l.args...)
	c.Stdin, c.Stdout, c.Stderr = e.stdin, e.stdout, e.stderr
	c.Env = os.Environ()
	for k, v := range l.env {
		c.Env = append(c.Env, k+"="+v)
	}
	if err := c.Start(); err != nil {
		return fmt.Errorf("wrap: start %s: %w", bin, err)
	}
	sigs := make(chan os.Signal, 4)
	signal.Notify(sigs, os.Interrupt, syscall.SIGTERM, syscall.SIGHUP)
	defer signal.Stop(sigs)
	waited := make(chan error, 1)
	go func() { waited <- c.Wait() }()
	for {
		select {
		case s := <-sigs:
			if s == os.Interrupt {
				// Ctrl-C reached the agent itself (the terminal signals the whole
				// foreground group); passing it on would make it two.
				continue
			}
			_ = c.Process.Signal(s)
		case err := <-waited:
			var ee *exec.ExitError
			if errors.As(err, &ee) {
				code := ee.ExitCode()
				if code < 0 { // killed by a signal
					if ws, ok := ee.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
						code = 128 + int(ws.Signal())
					}
				}
				return agentExit{code: code}
			}
			if err != nil {
				return fmt.Errorf("wrap: %s: %w", bin, err)
			}
			return nil
		}
	}
}
