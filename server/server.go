// Package server is pruneadvisor's HTTP side (docs/DESIGN.md "Ways in"): a sidecar that
// advises on message lists (POST /v1/advise), serves recalls (GET /v1/recall/{id}),
// health and Prometheus metrics, and a transparent proxy for OpenAI Chat Completions
// (POST /v1/chat/completions) and Anthropic Messages (POST /v1/messages) requests that
// prunes old tool outputs in the raw request bytes and forwards everything else as the
// client sent it. Any other path under /v1/ is passed through to the upstream
// untouched (Anthropic's when the request carries an anthropic-version header, else
// OpenAI's), so count_tokens or model listing keep working behind the proxy.
//
// The ledger (ledger.go, usage.go): every upstream response of a proxied model call
// is read, as it is forwarded and without a byte of it changed, for the provider's
// own usage, priced against keep-all, counted in /metrics and stored
// (Options.Ledger).
//
// Session state: decisions and stubs are frozen in the Store (SQLite), so a stub's
// bytes are the same on every later request, across restarts. The advisors' in-memory
// state is bounded by Options.MaxSessions (least recently used idle sessions are
// forgotten and rebuilt from the store when they come back).
package server

import (
	"bytes"
	"cmp"
	"context"
	"crypto/subtle"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"runtime"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/pruneadvisor/pruneadvisor/advisor"
	"github.com/pruneadvisor/pruneadvisor/evidence"
	"github.com/pruneadvisor/pruneadvisor/internal/jsonscan"
	"github.com/pruneadvisor/pruneadvisor/prices"
	"github.com/pruneadvisor/pruneadvisor/recall"
	"github.com/pruneadvisor/pruneadvisor/transcript"
)

// Sentinel errors.
var (
	// ErrOptions wraps every error New returns for bad Options.
	ErrOptions = errors.New("invalid server options")
	// ErrExposed means a non-loopback listen address was given without a token.
	ErrExposed = errors.New("refusing to listen beyond loopback without a token")
)

// Defaults for Options.
const (
	// DefaultMaxBody is the largest request body read (32 MiB): a 200k-token request
	// is about 1 MB of JSON, images and documents included rarely pass 20 MB.
	DefaultMaxBody = 32 << 20
	// DefaultMaxSessions bounds the sessions held in memory.
	DefaultMaxSessions = 1024
	// DefaultMaxMemory is the memory the serve command gives the process (384 MiB,
	// Options.MaxMemory): 200 live sessions of 200,000 tokens each, advised at
	// concurrency 24, peak under 400 MB of RSS (docs/PERFORMANCE.md, "The proxy under
	// load").
	DefaultMaxMemory = 384 << 20
	// NonGoReserve is the part of MaxMemory the Go heap leaves to what the Go
	// runtime's memory limit does not count (64 MiB): SQLite's page caches and
	// statements, allocated in modernc.org/libc outside the Go heap, and the pages
	// the runtime has freed but not yet returned. Measured at 45 to 60 MiB of RSS
	// above the Go limit with 200 live 200k-token sessions (docs/PERFORMANCE.md,
	// "Staying under --max-memory").
	NonGoReserve = 64 << 20
	// DefaultSessionIdle is how long a session's advisor state stays in memory
	// without a request (1 hour, the longest prompt-cache TTL: past it the provider's
	// cache is cold, a rewrite costs no cache write, and reading the session again
	// costs one first request). Its stubs and history stay in the store.
	DefaultSessionIdle = time.Hour
	// DefaultAdviseTimeout bounds advising one request; past it the request is
	// forwarded unchanged (fail open).
	DefaultAdviseTimeout = 10 * time.Second
	// DefaultShutdownTimeout is how long Serve waits for in-flight requests
	// (streams included) after its context ends.
	DefaultShutdownTimeout = 10 * time.Second
	// DefaultHeaderTimeout bounds reading a request's headers (slowloris).
	DefaultHeaderTimeout = 30 * time.Second
	// DefaultBodyTimeout bounds reading a request's body once its headers are in:
	// 32 MiB (DefaultMaxBody) at about 1 MB/s; a local client sends a 1 MB body in
	// milliseconds.
	DefaultBodyTimeout = 30 * time.Second
	// DefaultIdleTimeout is how long a keep-alive connection may wait for its next
	// request: 60 s, under the 90 s Go's and curl's clients keep idle connections,
	// so a client's reused connection is rarely one the server is closing.
	DefaultIdleTimeout = 60 * time.Second
	// DefaultOpenAIUpstream and DefaultAnthropicUpstream are the public APIs.
	DefaultOpenAIUpstream    = "https://api.openai.com"
	DefaultAnthropicUpstream = "https://api.anthropic.com"
	// DefaultGeminiUpstream is the Gemini API (what Gemini CLI calls with an API key).
	DefaultGeminiUpstream = "https://generativelanguage.googleapis.com"
)

// Headers addressed to the server itself. They are never forwarded upstream.
const (
	// HeaderSession names the session a proxied request belongs to. Without it the
	// session is a hash of the system prompt and the first user message.
	HeaderSession = "X-Pruneadvisor-Session"
	// HeaderToken carries the server's token (Options.Token). Proxy routes accept
	// only this header, since Authorization belongs to the upstream; the other routes
	// also accept "Authorization: Bearer <token>".
	HeaderToken = "X-Pruneadvisor-Token"
	// HeaderRecallTool names the recall tool as the agent sending the request sees
	// it (mcp__pruneadvisor__recall for Claude Code, ...): the stubs of the
	// request's session name it. Without it, Options.Config.RecallTool. A stub keeps
	// the name it was made with (stubs are frozen).
	HeaderRecallTool = "X-Pruneadvisor-Recall-Tool"
	// HeaderAgent names the coding agent sending the request ("claude", "codex",
	// "pi", "gemini", "opencode", or one the config's compaction_points adds):
	// its compaction point is the session's hard limit (advisor.CompactionPoints).
	// wrap sends it. Without it, Config.Agent (serve --agent), else the agent the
	// User-Agent header names, else none (the window fraction). An unknown name
	// gets 400.
	HeaderAgent = "X-Pruneadvisor-Agent"
)

// Store is what the server needs from storage: the advisor's store and the recall
// service's. storage.DB and advisor.MemoryStore implement it.
type Store interface {
	advisor.Store
	recall.Store
	// RecordBatch stores asks, decisions and step records in one commit (all or
	// none), as the advisor.Store methods would one by one: the record queue writes
	// each round with it (records.go). The commit must survive the process's death
	// (what SessionHistoryBetween reads back after a restart); it need not survive a power
	// failure (storage.DB.RecordBatch). Empty slices are no-ops.
	RecordBatch(ctx context.Context, asks []advisor.AskRecord, decisions []advisor.DecisionRecord, steps []advisor.StepRecord) error
}

// GoMemoryLimit is the Go runtime's soft memory limit for a process meant to stay
// under maxMemory bytes: maxMemory less NonGoReserve, and at least half of
// maxMemory. serve sets it (debug.SetMemoryLimit); New sizes the message cache by it.
func GoMemoryLimit(maxMemory int64) int64 {
	return max(maxMemory-NonGoReserve, maxMemory/2)
}

// Options configure New. Store is required; every other field has a default.
type Options struct {
	// Config is the advisor configuration (validated by New); the zero value means
	// advisor.DefaultConfig(). POST /v1/advise may override Budget per request.
	Config advisor.Config
	// Scorer gives keep-probabilities; nil means rules only.
	Scorer advisor.Scorer
	// Store keeps originals, stubs, decisions and recalls. Required. Asks and
	// decisions reach it in the background, in order (see Server.Flush); originals
	// and stubs are written before the request they prune is forwarded.
	Store Store
	// Ledger receives one entry per upstream response of a proxied model call: its
	// usage, what it cost, what keep-all would have cost (ledger.go). storage.DB
	// implements it. nil keeps the ledger in /metrics only.
	Ledger LedgerStore
	// OpenAIUpstream and AnthropicUpstream are the base URLs requests are forwarded
	// to: the request path is appended (https://api.openai.com + /v1/chat/completions).
	// "" means DefaultOpenAIUpstream / DefaultAnthropicUpstream. A URL must be http or
	// https and must not carry credentials.
	OpenAIUpstream    string
	AnthropicUpstream string
	// GeminiUpstream is the base URL Gemini API requests (/v1beta/...) go to; ""
	// means DefaultGeminiUpstream. The same rules as OpenAIUpstream apply.
	GeminiUpstream string
	// Token, when set, is required on every route but /healthz (see HeaderToken).
	Token string
	// AllowedHosts are the Host header values accepted besides loopback names and
	// addresses when Token is empty (see CheckHost): exact host names or IP
	// addresses, or "*.example.com" for every name under example.com; any port.
	// Without a token, a request naming any other host gets 403: a web page that
	// points its own domain at 127.0.0.1 (DNS rebinding) names that domain. With a
	// token every host is accepted.
	AllowedHosts []string
	// RecallSecret keys the recall ids of new stubs (advisor.Advisor.RecallSecret):
	// the store's own secret (storage.DB.RecallSecret). nil means unkeyed ids.
	RecallSecret []byte
	// Background is the plain-word statistics of the use history
	// (advisor.Advisor.Background); nil keeps the advisor's default, the embedded
	// model's.
	Background *evidence.Background
	// MaxBody is the largest request body read, in bytes; larger ones get 413.
	// Zero means DefaultMaxBody.
	MaxBody int64
	// MaxSessions bounds the sessions held in memory. Zero means DefaultMaxSessions.
	MaxSessions int
	// MessageCacheBytes bounds, in bytes of what the entries hold (decoded texts,
	// hashes and structs: transcript.MessageCache), the proxied request messages kept
	// decoded from one request to the next (one cache shared by every session): a
	// request whose history the proxy has seen costs reading its new messages, not
	// the whole history. Zero means 3/8 of GoMemoryLimit(MaxMemory) (of
	// DefaultMaxMemory when MaxMemory is zero: 120 MiB, the decoded history of about
	// 140 sessions of 200,000 tokens; a half left the live heap so close to the limit
	// that the collector's CPU cap let the heap pass it: docs/PERFORMANCE.md,
	// "Staying under --max-memory, again"); negative turns the cache off.
	MessageCacheBytes int64
	// MaxMemory is the memory, in bytes, the process is meant to stay under: the
	// serve command sets the Go runtime's soft memory limit to GoMemoryLimit of it
	// (debug.SetMemoryLimit, serve --max-memory), so the collector works harder
	// before the heap passes it; New itself changes no process-wide setting. Here it
	// sizes the message cache: 3/8 of GoMemoryLimit(MaxMemory) (of
	// DefaultMaxMemory when zero) unless MessageCacheBytes is set.
	MaxMemory int64
	// SessionIdle is how long (on the wall clock, not Clock) a session's advisor
	// state stays in memory without a request; past it the next request of any session drops it (advisor.Forget;
	// its stubs and history stay in the store and come back on its next request).
	// Zero means DefaultSessionIdle.
	SessionIdle time.Duration
	// MaxAdvising bounds the requests advised at once (read, advised and rewritten;
	// forwarding is not bounded): the others wait their turn, within AdviseTimeout,
	// and past it are forwarded unchanged. Advising is CPU work, so more at once
	// than there are CPUs only holds more request bodies in memory at the same
	// time. Zero means runtime.GOMAXPROCS(0).
	MaxAdvising int
	// AdviseTimeout bounds advising one request. Zero means DefaultAdviseTimeout.
	AdviseTimeout time.Duration
	// ShutdownTimeout bounds Serve's graceful shutdown. Zero means
	// DefaultShutdownTimeout.
	ShutdownTimeout time.Duration
	// HeaderTimeout bounds reading a request's headers (Serve). Zero means
	// DefaultHeaderTimeout.
	HeaderTimeout time.Duration
	// BodyTimeout bounds reading a request's body, from the handler's start to the
	// body's end; a body not in by then gets 408 (on every route, the passthrough's
	// streamed bodies included). The deadline ends with the body: a response, streamed
	// or not, is never cut by a timeout (the server sets no write timeout). Zero means
	// DefaultBodyTimeout.
	BodyTimeout time.Duration
	// IdleTimeout is how long Serve keeps an idle keep-alive connection open. Zero
	// means DefaultIdleTimeout.
	IdleTimeout time.Duration
	// Logger receives one line per failure (never a header value or a body). Default
	// slog.Default().
	Logger *slog.Logger
	// Registry receives the metrics and is what GET /metrics serves. Default: a new
	// registry holding only this server's metrics.
	Registry *prometheus.Registry
	// Transport forwards requests upstream. Default: a clone of
	// http.DefaultTransport with compression handling off (Accept-Encoding and
	// compressed bodies pass through untouched), 256 idle connections per host, and
	// TCP connections that write an advised body's parts in one writev
	// (upstreamconn.go).
	Transport http.RoundTripper
	// Clock is the advisors' clock for the cache-TTL rule. Default time.Now.
	Clock func() time.Time
	// BackgroundAsks runs the scorer off the request path (advisor.Advisor.Asks,
	// one advisor.AskRunner for the server): a request is advised with the scores
	// the session already has and forwarded at once, its due cards are asked in
	// the background (one ask in flight per session), and their scores count from
	// the session's next request on. Default false: asks on the request path, for a
	// scorer that answers in microseconds (fitted, lexical). Serve, and Close, stop
	// the asks still running.
	BackgroundAsks bool
	// Fallback ranks the candidates not scored yet when a rewrite is forced by the
	// hard limit while asks run in the background (advisor.Advisor.Fallback): an
	// in-process scorer, the fitted one. nil ranks them after the scored ones.
	// Used only with BackgroundAsks.
	Fallback advisor.Scorer
	// AskTimeout bounds one background ask (advisor.AskRunner.Timeout); zero means
	// advisor.DefaultAskTimeout.
	AskTimeout time.Duration
}

// Server is the sidecar and proxy. Create it with New; it is safe for concurrent use.
type Server struct {
	cfg           advisor.Config
	store         Store
	recall        *recall.Service
	upstream      map[prices.Provider]*url.URL // by provider (wire.Spec.Provider)
	token         string
	hosts         hostPolicy
	maxBody       int64
	adviseTimeout time.Duration
	shutdown      time.Duration
	headerTimeout time.Duration
	bodyTimeout   time.Duration
	idleTimeout   time.Duration
	log           *slog.Logger
	registry      *prometheus.Registry
	metrics       *metrics
	transport     http.RoundTripper
	dialer        *bodyDialer            // the default transport's; nil with Options.Transport
	forwarder     *httputil.ReverseProxy // every proxied request goes upstream through it (forward.go)
	sessions      *sessionTable
	advising      chan struct{}            // a slot per request being advised (Options.MaxAdvising)
	records       *recordQueue             // asks and decisions on their way to the store
	ledger        *ledgerWriter            // responses on their way to the ledger
	msgCache      *transcript.MessageCache // nil when off
	bodies        bodyPool                 // request body buffers (bodypool.go)
	handler       http.Handler             // the routes behind the Host check
	asks          *advisor.AskRunner       // background asks (Options.BackgroundAsks); nil when off
	// warnedAgent is set once the server logged that a request's agent is not
	// known and its hard limit is the window fraction (agentOf).
	warnedAgent atomic.Bool
}

// New validates opts and returns a Server. Errors wrap ErrOptions (or
// advisor.ErrConfig for a bad Config).
func New(opts Options) (*Server, error) {
	cfg := opts.Config
	if cfg.ContextWindow == 0 && cfg.Schedule == "" && cfg.RecallTool == "" {
		cfg = advisor.DefaultConfig()
	}
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if opts.Store == nil {
		return nil, fmt.Errorf("%w: a store is required", ErrOptions)
	}
	s := &Server{
		cfg:           cfg,
		store:         opts.Store,
		token:         opts.Token,
		hosts:         newHostPolicy(opts.Token, opts.AllowedHosts),
		maxBody:       opts.MaxBody,
		adviseTimeout: opts.AdviseTimeout,
		shutdown:      opts.ShutdownTimeout,
		headerTimeout: orDefault(opts.HeaderTimeout, DefaultHeaderTimeout),
		bodyTimeout:   orDefault(opts.BodyTimeout, DefaultBodyTimeout),
		idleTimeout:   orDefault(opts.IdleTimeout, DefaultIdleTimeout),
		log:           opts.Logger,
		registry:      opts.Registry,
		transport:     opts.Transport,
		upstream:      map[prices.Provider]*url.URL{},
	}
	if s.maxBody <= 0 {
		s.maxBody = DefaultMaxBody
	}
	if opts.MaxMemory < 0 || opts.MaxAdvising < 0 || opts.SessionIdle < 0 {
		return nil, fmt.Errorf("%w: MaxMemory, MaxAdvising and SessionIdle must not be negative", ErrOptions)
	}
	if cacheBytes := opts.MessageCacheBytes; cacheBytes >= 0 {
		if cacheBytes == 0 {
			cacheBytes = GoMemoryLimit(cmp.Or(opts.MaxMemory, DefaultMaxMemory)) * 3 / 8
		}
		s.msgCache = transcript.NewMessageCache(cacheBytes)
	}
	s.advising = make(chan struct{}, cmp.Or(opts.MaxAdvising, runtime.GOMAXPROCS(0)))
	if s.adviseTimeout <= 0 {
		s.adviseTimeout = DefaultAdviseTimeout
	}
	if s.shutdown <= 0 {
		s.shutdown = DefaultShutdownTimeout
	}
	if s.log == nil {
		s.log = slog.Default()
	}
	if s.registry == nil {
		s.registry = prometheus.NewRegistry()
	}
	if s.transport == nil {
		t := http.DefaultTransport.(*http.Transport).Clone()
		t.DisableCompression = true
		t.MaxIdleConns = 1024
		t.MaxIdleConnsPerHost = 256
		s.dialer = newBodyDialer()
		t.DialContext = s.dialer.DialContext
		s.transport = t
	}
	for p, raw := range map[prices.Provider]string{prices.OpenAI: opts.OpenAIUpstream, prices.Anthropic: opts.AnthropicUpstream, prices.Gemini: opts.GeminiUpstream} {
		if raw == "" {
			raw = defaultUpstream(p)
		}
		u, err := parseUpstream(raw)
		if err != nil {
			return nil, fmt.Errorf("%w: %s upstream: %v", ErrOptions, p, err)
		}
		s.upstream[p] = u
	}
	maxSessions := opts.MaxSessions
	if maxSessions <= 0 {
		maxSessions = DefaultMaxSessions
	}
	s.metrics = newMetrics(s.registry)
	scorer := opts.Scorer
	if scorer != nil {
		scorer = timedScorer{Scorer: scorer, seconds: s.metrics.scorerSeconds}
	}
	clock := opts.Clock
	if clock == nil {
		clock = time.Now
	}
	s.ledger = newLedgerWriter(opts.Ledger, cfg.PriceModel, clock, s.log, s.registry)
	s.ledger.window = cfg.ContextWindow
	advStore, records := newRecordQueue(opts.Store, s.log)
	s.records = records
	if opts.BackgroundAsks && scorer != nil {
		s.asks = advisor.NewAskRunner()
		s.asks.Timeout = opts.AskTimeout
	}
	build := func(k advisorKey) (*advisor.Advisor, error) {
		c := cfg
		if k.budget > 0 {
			c.Budget = k.budget
		}
		if k.recallTool != "" {
			c.RecallTool = k.recallTool
		}
		if k.provider != "" {
			c.Provider = string(k.provider)
		}
		if k.agent != "" {
			c.Agent = k.agent
		}
		a, err := advisor.New(c, scorer, advStore)
		if err != nil {
			return nil, err
		}
		a.Logger = s.log
		a.Clock = clock
		a.RecallSecret = opts.RecallSecret
		if opts.Background != nil {
			a.Background = opts.Background
		}
		a.NoRecallTool = k.noRecall
		a.Asks = s.asks
		if s.asks != nil {
			a.Fallback = opts.Fallback
		}
		return a, nil
	}
	if _, err := build(advisorKey{}); err != nil {
		return nil, err
	}
	s.sessions = newSessionTable(maxSessions, build, func(n int) { s.metrics.sessions.Set(float64(n)) })
	s.sessions.idle = cmp.Or(opts.SessionIdle, DefaultSessionIdle) // on the wall clock, not Options.Clock
	s.recall = recall.New(opts.Store)
	s.recall.Logger = s.log
	s.forwarder = s.newForwarder()
	s.handler = s.bodyDeadline(s.checkHost(s.routes()))
	return s, nil
}

// orDefault is d when it is positive, else def.
func orDefault(d, def time.Duration) time.Duration {
	if d > 0 {
		return d
	}
	return def
}

// parseUpstream checks an upstream base URL: absolute http(s), no credentials, no
// query or fragment.
func parseUpstream(raw string) (*url.URL, error) {
	u, err := url.Parse(raw)
	if err != nil {
		return nil, fmt.Errorf("not a URL: %v", err)
	}
	if u.Scheme != "http" && u.Scheme != "https" || u.Host == "" {
		return nil, fmt.Errorf("%q: want an absolute http or https URL", u.Redacted())
	}
	if u.User != nil {
		return nil, fmt.Errorf("%q: the URL must not carry credentials (clients send their own headers)", u.Redacted())
	}
	if u.RawQuery != "" || u.Fragment != "" {
		return nil, fmt.Errorf("%q: the URL must not have a query or fragment", u.Redacted())
	}
	return u, nil
}

// Handler returns the server's HTTP handler.
func (s *Server) Handler() http.Handler { return s.handler }

// Registry returns the registry the metrics are registered in.
func (s *Server) Registry() *prometheus.Registry { return s.registry }

// MessageCacheStats returns the message cache's counters (zero when the cache is
// off, Options.MessageCacheBytes < 0).
func (s *Server) MessageCacheStats() transcript.MessageCacheStats {
	if s.msgCache == nil {
		return transcript.MessageCacheStats{}
	}
	return s.msgCache.Stats()
}

// Sessions returns the number of sessions whose advisor state is in memory.
func (s *Server) Sessions() int { return s.sessions.len() }

func (s *Server) routes() *http.ServeMux {
	mux := http.NewServeMux()
	// Every proxy path goes through one dispatcher that routes it by the table of
	// wire APIs (dispatch): the advised routes, and every other request passed
	// through to the provider it belongs to. Credentials are checked after the token
	// (checkCredentials).
	proxy := s.dispatch()
	mux.Handle("/v1beta", proxy)
	mux.Handle("/v1beta/", proxy)
	mux.Handle("/v1/advise", s.instrument("advise", s.auth(false, methods(s.advise, http.MethodPost))))
	mux.Handle("/v1/recall/{id}", s.instrument("recall", s.auth(false, methods(s.recallHandler, http.MethodGet, http.MethodHead))))
	// Any other path under /v1/recall is a malformed recall, answered here: never
	// passed through to a provider as the /v1/ paths are.
	badRecall := s.instrument("recall", s.auth(false, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		writeError(w, http.StatusNotFound, "no recall route %s %s: want GET /v1/recall/{id}, the id one path segment (optionally ?lines=, ?grep=, ?context=)", r.Method, r.URL.Path)
	})))
	mux.Handle("/v1/recall", badRecall)
	mux.Handle("/v1/recall/", badRecall)
	mux.Handle("/v1/", proxy)
	mux.Handle("/healthz", s.instrument("healthz", methods(s.healthz, http.MethodGet, http.MethodHead)))
	mux.Handle("/ui/", s.instrument("ui", s.auth(false, methods(s.ui, http.MethodGet, http.MethodHead))))
	mux.Handle("/metrics", s.instrument("metrics", s.auth(false, methods(
		promhttp.HandlerFor(s.registry, promhttp.HandlerOpts{}).ServeHTTP, http.MethodGet))))
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		writeError(w, http.StatusNotFound, "no route %s %s; see docs/INTEGRATIONS.md", r.Method, r.URL.Path)
	})
	return mux
}

// methods allows only the given methods (405 otherwise, with Allow).
func methods(h http.HandlerFunc, allowed ...string) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		for _, m := range allowed {
			if r.Method == m {
				h(w, r)
				return
			}
		}
		w.Header().Set("Allow", strings.Join(allowed, ", "))
		writeError(w, http.StatusMethodNotAllowed, "method %s not allowed; use %s", r.Method, strings.Join(allowed, " or "))
	})
}

// auth enforces Options.Token. proxy routes accept only HeaderToken (Authorization
// is the client's upstream credential there); the others also accept a bearer token.
func (s *Server) auth(proxy bool, h http.Handler) http.Handler {
	if s.token == "" {
		return h
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		ok := tokenEqual(r.Header.Get(HeaderToken), s.token)
		if !ok && !proxy {
			if b, found := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer "); found {
				ok = tokenEqual(strings.TrimSpace(b), s.token)
			}
		}
		if !ok {
			msg := "missing or wrong pruneadvisor token: send it in the " + HeaderToken + " header"
			if !proxy {
				msg += " or as Authorization: Bearer"
			}
			if k, isProxy := proxyKind(r); isProxy {
				writeAPIError(w, k, http.StatusUnauthorized, "authentication_error", msg)
				return
			}
			writeError(w, http.StatusUnauthorized, "%s", msg)
			return
		}
		h.ServeHTTP(w, r)
	})
}

func tokenEqual(got, want string) bool {
	return got != "" && subtle.ConstantTimeCompare([]byte(got), []byte(want)) == 1
}

func (s *Server) healthz(w http.ResponseWriter, _ *http.Request) {
	w.Header().Set("Content-Type", "application/json")
	_, _ = w.Write([]byte(`{"status":"ok"}` + "\n"))
}

// statusRecorder remembers the status code for the request counter. Unwrap lets
// http.ResponseController reach the underlying writer's Flush.
type statusRecorder struct {
	http.ResponseWriter
	code int
}

func (r *statusRecorder) WriteHeader(code int) {
	if r.code == 0 && code >= 200 { // an interim 1xx (100 Continue, 103 Early Hints) is not the status
		r.code = code
	}
	r.ResponseWriter.WriteHeader(code)
}

func (r *statusRecorder) Write(b []byte) (int, error) {
	if r.code == 0 {
		r.code = http.StatusOK
	}
	return r.ResponseWriter.Write(b)
}

func (r *statusRecorder) Unwrap() http.ResponseWriter { return r.ResponseWriter }

// instrument counts requests by route and status code: "aborted" for a response cut
// short (see forward), "canceled" for a client that left before any response (an
// upstream that never answered: nothing was written, and the client got no status),
// else the first final status written (interim 1xx ones are not statuses; a handler
// that wrote nothing answered 200).
func (s *Server) instrument(route string, h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		rec := &statusRecorder{ResponseWriter: w}
		defer func() {
			if p := recover(); p != nil {
				s.metrics.requests.WithLabelValues(route, "aborted").Inc()
				panic(p)
			}
		}()
		h.ServeHTTP(rec, r)
		label := strconv.Itoa(rec.code)
		switch {
		case rec.code == 0 && r.Context().Err() != nil:
			label = "canceled"
			s.log.Info("the client left before any response", "route", route, "path", r.URL.Path)
		case rec.code == 0:
			label = strconv.Itoa(http.StatusOK)
		}
		s.metrics.requests.WithLabelValues(route, label).Inc()
	})
}

// CheckListen refuses a listen address beyond loopback when token is empty: the
// sidecar serves originals of tool outputs and the proxy spends the clients' API keys.
// The host must be a loopback IP, "localhost" or a name under ".localhost"; an empty
// host (every interface) counts as exposed. The error wraps ErrExposed.
func CheckListen(addr, token string) error {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return fmt.Errorf("listen address %q: %w", addr, err)
	}
	if token != "" {
		return nil
	}
	if isLoopbackHost(host) {
		return nil
	}
	return fmt.Errorf("%w: %q is not a loopback address; set a token (--token or $PRUNEADVISOR_TOKEN) or listen on 127.0.0.1", ErrExposed, addr)
}

// Serve serves on ln until ctx ends, then shuts down gracefully: it stops accepting,
// waits up to Options.ShutdownTimeout for in-flight requests (streams included),
// closes what is left, and closes idle upstream connections. It returns nil after a
// shutdown caused by ctx, else the listener's error.
func (s *Server) Serve(ctx context.Context, ln net.Listener) error {
	hs := &http.Server{
		Handler:           s.handler,
		ReadHeaderTimeout: s.headerTimeout,
		IdleTimeout:       s.idleTimeout,
		// No ReadTimeout or WriteTimeout: either would cut a response stream that is
		// still flowing (a read deadline left on the connection cancels the request's
		// context when it passes). The body's own deadline is BodyTimeout.
		ErrorLog: slog.NewLogLogger(s.log.Handler(), slog.LevelWarn),
	}
	errc := make(chan error, 1)
	go func() { errc <- hs.Serve(ln) }()
	select {
	case err := <-errc:
		s.Close()
		s.closeIdle()
		fctx, cancel := context.WithTimeout(context.Background(), s.shutdown)
		defer cancel()
		_ = s.Flush(fctx)
		s.stopWriters()
		return err
	case <-ctx.Done():
	}
	sctx, cancel := context.WithTimeout(context.Background(), s.shutdown)
	defer cancel()
	if err := hs.Shutdown(sctx); err != nil {
		s.log.Warn("shutdown: closing connections still open", "err", err)
		_ = hs.Close()
	}
	<-errc
	s.Close()
	s.closeIdle()
	if err := s.Flush(sctx); err != nil {
		s.log.Warn("shutdown: asks, decisions and ledger entries not all written", "err", err)
	}
	s.stopWriters()
	return nil
}

// Close stops the background asks (Options.BackgroundAsks): those in flight are
// cancelled and dropped, and Close returns once their goroutines have (nothing
// decided is lost: an answer only counts at a later request, and an unanswered
// ask is asked again after a restart). Later requests are advised with the
// scores their sessions have, asking nothing. Serve calls it when it shuts down;
// a caller that serves Handler itself calls it before Flush. It may be called
// more than once.
func (s *Server) Close() {
	if s.asks != nil {
		s.asks.Close()
	}
}

// AsksRunning returns the number of background asks whose goroutine has not
// returned (0 when Options.BackgroundAsks is off).
func (s *Server) AsksRunning() int {
	if s.asks == nil {
		return 0
	}
	return s.asks.Running()
}

// stopWriters ends the record queue's and the ledger's writer goroutines once they
// are idle (batchQueue.stop); a write queued later still happens.
func (s *Server) stopWriters() {
	s.records.stop()
	s.ledger.queue.stop()
}

// Flush waits until the asks and decisions the advisors recorded so far are in the
// store, and the responses being forwarded have ended and are counted in /metrics
// and in the ledger, or ctx ends (its error). The server writes those records in the background
// (originals and stubs are written before a request goes on); Serve flushes when it
// shuts down, and a caller that serves Handler itself calls Flush before closing the
// store.
func (s *Server) Flush(ctx context.Context) error {
	return errors.Join(s.records.flush(ctx), s.ledger.flush(ctx))
}

func (s *Server) closeIdle() {
	if t, ok := s.transport.(interface{ CloseIdleConnections() }); ok {
		t.CloseIdleConnections()
	}
}

// writeError writes the sidecar's JSON error {"error": msg}.
func writeError(w http.ResponseWriter, code int, format string, args ...any) {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("X-Content-Type-Options", "nosniff")
	w.WriteHeader(code)
	b, _ := json.Marshal(map[string]string{"error": fmt.Sprintf(format, args...)})
	_, _ = w.Write(append(b, '\n'))
}

// writeAPIError writes an error in the shape the client's SDK parses: OpenAI's
// {"error":{"message","type","code"}} or Anthropic's {"type":"error","error":{"type","message"}}.
func writeAPIError(w http.ResponseWriter, k apiKind, code int, typ, msg string) {
	var body any
	switch k {
	case kindAnthropic:
		body = map[string]any{"type": "error", "error": map[string]string{"type": typ, "message": "pruneadvisor: " + msg}}
	case kindGemini:
		body = map[string]any{"error": map[string]any{"code": code, "message": "pruneadvisor: " + msg, "status": googleStatus(code)}}
	default:
		body = map[string]any{"error": map[string]any{"message": "pruneadvisor: " + msg, "type": typ, "code": nil, "param": nil}}
	}
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	_ = enc.Encode(body)
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("X-Content-Type-Options", "nosniff")
	w.WriteHeader(code)
	_, _ = w.Write(buf.Bytes())
}

// googleStatus is the google.rpc status name Google APIs give with an HTTP code.
func googleStatus(code int) string {
	switch code {
	case http.StatusBadRequest, http.StatusRequestEntityTooLarge:
		return "INVALID_ARGUMENT"
	case http.StatusUnauthorized:
		return "UNAUTHENTICATED"
	case http.StatusForbidden:
		return "PERMISSION_DENIED"
	case http.StatusNotFound:
		return "NOT_FOUND"
	case http.StatusUnsupportedMediaType:
		return "INVALID_ARGUMENT"
	case http.StatusBadGateway:
		return "UNAVAILABLE"
	}
	return "UNKNOWN"
}

// jsonErrorAt describes where data stops being valid JSON, as "line L, column C
// (byte B)"; "" when data is valid.
func jsonErrorAt(data []byte) string {
	var v json.RawMessage
	err := json.Unmarshal(data, &v)
	if err == nil {
		return ""
	}
	var se *json.SyntaxError
	if !errors.As(err, &se) {
		return err.Error()
	}
	off, _ := jsonscan.ErrorOffset(data, err)
	line, col := jsonscan.Position(data, off)
	return fmt.Sprintf("invalid JSON at line %d, column %d (byte offset %d): %s", line, col, off, se.Error())
}
