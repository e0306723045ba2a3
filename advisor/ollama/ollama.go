// Package ollama is the small-model scorer (DESIGN.md step 5): all due cards go to a
// local Ollama server in one non-streaming /api/chat request whose `format` is a JSON
// schema with one required integer 0-100 property per card ("c1".."cN"), and the
// answer, validated strictly, gives each card's keep-probability value/100.
//
// Any failure — timeout, unreachable server, HTTP error, truncated or invalid answer —
// is "no score" for the whole batch: every Score is not OK and the error wraps one of
// the sentinel errors below (FailKind names it for counting). Wire facts the request
// and the validation rely on are in /work/shared/docs/OLLAMA-WIRE.md (Ollama 0.17.4).
package ollama

import (
	"bytes"
	"context"
	_ "embed"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math"
	"net"
	"net/url"
	"strconv"
	"strings"
	"syscall"
	"text/template"
	"time"

	"github.com/invopop/jsonschema"
	"github.com/ollama/ollama/api"

	"github.com/pruneadvisor/pruneadvisor/cards"
	"github.com/pruneadvisor/pruneadvisor/transcript"
)

// Failure is the type of the sentinel errors below: Kind names the failure kind for
// counting (advisor.FailKind looks for a Kind() string method along the chain).
type Failure struct {
	kind, msg string
}

// Error returns the sentinel's message.
func (f *Failure) Error() string { return f.msg }

// Kind returns the failure kind: "timeout", "canceled", "unreachable", "http",
// "truncated", "invalid" or "too_large".
func (f *Failure) Kind() string { return f.kind }

// Failure kinds. Every error Score and Ping return wraps exactly one of them.
var (
	// ErrTimeout: no complete answer before the per-request deadline (Scorer.Timeout)
	// or the caller's deadline.
	ErrTimeout error = &Failure{"timeout", "ollama: timeout"}
	// ErrCanceled: the caller canceled the context.
	ErrCanceled error = &Failure{"canceled", "ollama: canceled"}
	// ErrUnreachable: the connection was refused, reset, or closed before a complete
	// answer arrived.
	ErrUnreachable error = &Failure{"unreachable", "ollama: server unreachable"}
	// ErrHTTP: the server answered with an error status (4xx/5xx) or an in-band
	// {"error": …} line; the message includes the status and the server's text
	// (for an unknown model: `model "x" not found, try pulling it first`).
	ErrHTTP error = &Failure{"http", "ollama: server error"}
	// ErrTruncated: the answer stopped early: "done" was not true (Ollama stops a
	// repeating generation and still answers 200, with no done_reason), or
	// done_reason was "length" (num_predict reached).
	ErrTruncated error = &Failure{"truncated", "ollama: answer truncated"}
	// ErrInvalidAnswer: the answer was not a JSON object holding every card id
	// exactly once, no other key, and integer values 0-100.
	ErrInvalidAnswer error = &Failure{"invalid", "ollama: invalid answer"}
	// ErrTooLarge: one card, even cut down (see Scorer.Score), does not fit NumCtx
	// next to the prompt; only with a very small NumCtx.
	ErrTooLarge error = &Failure{"too_large", "ollama: card does not fit the context window"}
)

// FailKind names the failure kind of an error from Score or Ping, for counting:
// "timeout", "canceled", "unreachable", "http", "truncated", "invalid", "too_large"
// (the Kind of the *Failure it wraps); "" for nil and "other" for an error wrapping
// no *Failure.
func FailKind(err error) string {
	if err == nil {
		return ""
	}
	var f *Failure
	if errors.As(err, &f) {
		return f.Kind()
	}
	return "other"
}

// Defaults for the Scorer's option fields.
const (
	DefaultModel     = "qwen2.5:0.5b"   // small, fast on CPU, follows a JSON grammar
	DefaultNumCtx    = 8192             // tokens; fixed, since changing num_ctx between requests reloads the model (OLLAMA-WIRE.md)
	DefaultTimeout   = 60 * time.Second // per request; api.Client has no timeout of its own (OLLAMA-WIRE.md)
	DefaultKeepAlive = 2 * time.Minute  // how long the server keeps the model loaded after a request
	DefaultSeed      = 42               // any fixed value; -1 would ask the server for a random seed
)

// PromptVersion identifies the embedded prompt template (prompt_v1.tmpl); it is
// part of Name, so asks recorded under different prompts are never mixed. Change
// it whenever the template or the schema changes.
const PromptVersion = "p1"

// Token estimate constants (see Fits). The prompt is counted with o200k_base
// (transcript.CountTokens), not the model's own tokenizer, so a margin covers the
// difference; qwen2.5's tokenizer is of similar efficiency on English and code.
const (
	// TokenMargin multiplies the counted prompt tokens.
	TokenMargin = 1.10
	// TemplateTokens is added per request for the chat template's role markers
	// (qwen2.5: "<|im_start|>system\n", "<|im_end|>\n", …, about 5 per message).
	TemplateTokens = 32
	// AnswerBaseTokens and AnswerCardTokens give the automatic num_predict:
	// AnswerBaseTokens + AnswerCardTokens·n. One entry `"c12": 100, ` is about 7
	// tokens; the rest is room for the whitespace a weak model pads the JSON with
	// (OLLAMA-WIRE.md: the grammar allows it).
	AnswerBaseTokens = 32
	AnswerCardTokens = 16
)

// Cut-down card sizes, in characters, for a single card that does not fit NumCtx
// next to the prompt: it is sent once more with these limits before giving up with
// ErrTooLarge.
const (
	ShrunkArgsChars     = 80
	ShrunkHeadChars     = 120
	ShrunkReactionChars = 80
)

//go:embed prompt_v1.tmpl
var promptText string

var prompts = template.Must(template.New("prompt_v1.tmpl").
	Funcs(template.FuncMap{"join": strings.Join}).
	Parse(promptText))

// Scorer asks an Ollama server for keep-probabilities. Set option fields before the
// first Score; a Scorer is then safe for concurrent use. A zero or negative option
// field means its default.
type Scorer struct {
	// Model is the Ollama model name. Default DefaultModel ("qwen2.5:0.5b").
	Model string
	// NumCtx is the context window requested from the server, in tokens (option
	// num_ctx). Batches that would not fit are split. Default DefaultNumCtx (8192).
	NumCtx int
	// NumPredict caps the answer, in tokens (option num_predict). 0 means automatic:
	// AnswerBaseTokens + AnswerCardTokens per card of the request.
	NumPredict int
	// Timeout bounds each request (context deadline on every call; api.Client has
	// none). Default DefaultTimeout (60 s).
	Timeout time.Duration
	// KeepAlive is how long the server keeps the model loaded after a request
	// (keep_alive). Default DefaultKeepAlive (2 minutes).
	KeepAlive time.Duration
	// Seed is the sampling seed (option seed); with temperature 0 it only matters
	// for ties. Default DefaultSeed; the zero value also means the default.
	Seed int
	// Logger receives one Debug line per request (cards, estimated prompt tokens,
	// the server's token counts and durations) and one per split. Default: discard.
	// Failures are returned, not logged.
	Logger *slog.Logger

	client *api.Client
}

// New returns a scorer that talks to client (for example api.ClientFromEnvironment(),
// which honours OLLAMA_HOST) using model ("" means DefaultModel). Other options take
// their defaults; change the fields before the first Score.
func New(client *api.Client, model string) *Scorer {
	if model == "" {
		model = DefaultModel
	}
	return &Scorer{
		Model:     model,
		NumCtx:    DefaultNumCtx,
		Timeout:   DefaultTimeout,
		KeepAlive: DefaultKeepAlive,
		Seed:      DefaultSeed,
		client:    client,
	}
}

func (s *Scorer) model() string { return cmpOr(s.Model, DefaultModel) }
func (s *Scorer) numCtx() int {
	if s.NumCtx <= 0 {
		return DefaultNumCtx
	}
	return s.NumCtx
}
func (s *Scorer) timeout() time.Duration {
	if s.Timeout <= 0 {
		return DefaultTimeout
	}
	return s.Timeout
}
func (s *Scorer) keepAlive() time.Duration {
	if s.KeepAlive <= 0 {
		return DefaultKeepAlive
	}
	return s.KeepAlive
}
func (s *Scorer) seed() int { return cmpOr(s.Seed, DefaultSeed) }
func (s *Scorer) logger() *slog.Logger {
	if s.Logger == nil {
		return slog.New(slog.DiscardHandler)
	}
	return s.Logger
}

// numPredict returns the answer cap for a request of n cards, in tokens.
func (s *Scorer) numPredict(n int) int {
	if s.NumPredict > 0 {
		return s.NumPredict
	}
	return AnswerBaseTokens + AnswerCardTokens*n
}

func cmpOr[T comparable](v, def T) T {
	var zero T
	if v == zero {
		return def
	}
	return v
}

// Name identifies the scorer in the store and in logs: "ollama:MODEL:PROMPT", e.g.
// "ollama:qwen2.5:0.5b:p1".
func (s *Scorer) Name() string { return "ollama:" + s.model() + ":" + PromptVersion }

// Version returns the server's version from /api/version, within Timeout. Errors
// wrap ErrTimeout, ErrCanceled, ErrUnreachable or ErrHTTP.
func (s *Scorer) Version(ctx context.Context) (string, error) {
	ctx, cancel := context.WithTimeout(ctx, s.timeout())
	defer cancel()
	v, err := s.client.Version(ctx)
	if err != nil {
		return "", fmt.Errorf("asking the ollama version: %w", classify(ctx, err))
	}
	return v, nil
}

// Ping checks that the server answers /api/version within Timeout (it does not
// check that Model is pulled). Errors as Version.
func (s *Scorer) Ping(ctx context.Context) error {
	_, err := s.Version(ctx)
	return err
}

// Score asks for a keep-probability per card: one /api/chat request when the batch
// fits NumCtx (Fits), otherwise the batch is split in halves, recursively, and each
// part asked in turn (ids restart at c1 in every request). A single card that does
// not fit is cut down (args, head and reaction to ShrunkArgsChars, ShrunkHeadChars,
// ShrunkReactionChars characters, no tail) and, if it still does not fit, the batch
// fails with ErrTooLarge. The first failing request stops the batch: every Score is
// then not OK and the error wraps one of the failure kinds (see FailKind). On
// success every Score is OK with Keep = value/100.
func (s *Scorer) Score(ctx context.Context, b cards.Batch) ([]cards.Score, error) {
	out := make([]cards.Score, len(b.Cards))
	if len(b.Cards) == 0 {
		return out, nil
	}
	if err := s.scoreRange(ctx, b, b.Cards, out); err != nil {
		clear(out)
		return out, fmt.Errorf("scoring %d cards with %s: %w", len(b.Cards), s.Name(), err)
	}
	return out, nil
}

func (s *Scorer) scoreRange(ctx context.Context, b cards.Batch, cs []cards.Card, out []cards.Score) error {
	prompt, err := s.render(b, cs)
	if err != nil {
		return err
	}
	if !s.fits(prompt, len(cs)) {
		if len(cs) > 1 {
			half := len(cs) / 2
			s.logger().Debug("ollama: batch too large for num_ctx, splitting",
				"cards", len(cs), "estimated_tokens", s.estimate(prompt, len(cs)), "num_ctx", s.numCtx())
			if err := s.scoreRange(ctx, b, cs[:half], out[:half]); err != nil {
				return err
			}
			return s.scoreRange(ctx, b, cs[half:], out[half:])
		}
		small := []cards.Card{shrink(cs[0])}
		if prompt, err = s.render(b, small); err != nil {
			return err
		}
		if !s.fits(prompt, 1) {
			return fmt.Errorf("%w: card %s needs about %d tokens with the prompt, num_ctx is %d",
				ErrTooLarge, cs[0].ID, s.estimate(prompt, 1), s.numCtx())
		}
	}
	vals, err := s.ask(ctx, prompt)
	if err != nil {
		return err
	}
	for i, v := range vals {
		out[i] = cards.Score{Keep: float64(v) / 100, OK: true}
	}
	return nil
}

// shrink cuts a card's free-text fields for a card that alone does not fit.
func shrink(c cards.Card) cards.Card {
	c.Args = cards.Cut(c.Args, ShrunkArgsChars)
	c.Head = cards.Cut(c.Head, ShrunkHeadChars)
	c.Tail = ""
	c.Reaction = cards.Cut(c.Reaction, ShrunkReactionChars)
	return c
}

// Prompt is one rendered request: the system and user messages, the card keys in
// order, and the format schema.
type Prompt struct {
	System string
	User   string
	Keys   []string        // "c1".."cN", card i has key Keys[i]
	Format json.RawMessage // the JSON schema sent as `format`
}

// RenderPrompt renders the request for all of b's cards as Score would send it
// when they fit in one request (for tests, docs and the replay's records).
func RenderPrompt(b cards.Batch) (Prompt, error) {
	return (&Scorer{}).render(b, b.Cards)
}

func (s *Scorer) render(b cards.Batch, cs []cards.Card) (Prompt, error) {
	keys := Keys(len(cs))
	texts := make([]string, len(cs))
	for i, c := range cs {
		texts[i] = c.Text(keys[i])
	}
	data := struct {
		Task, Now string
		Cards     []string
		Keys      []string
	}{cmpOr(strings.TrimSpace(b.Task), "(none)"), cmpOr(strings.TrimSpace(b.Now), "(none)"), texts, keys}
	var sys, user bytes.Buffer
	if err := prompts.ExecuteTemplate(&sys, "system", data); err != nil {
		return Prompt{}, fmt.Errorf("rendering %s system prompt: %w", PromptVersion, err)
	}
	if err := prompts.ExecuteTemplate(&user, "user", data); err != nil {
		return Prompt{}, fmt.Errorf("rendering %s user prompt: %w", PromptVersion, err)
	}
	format, err := Format(keys)
	if err != nil {
		return Prompt{}, err
	}
	return Prompt{System: sys.String(), User: user.String(), Keys: keys, Format: format}, nil
}

// Keys returns the request ids of n cards: "c1".."cN".
func Keys(n int) []string {
	keys := make([]string, n)
	for i := range keys {
		keys[i] = "c" + strconv.Itoa(i+1)
	}
	return keys
}

// percent is reflected once to get the schema of one card's value; the tags are
// the single source of its range.
type percent struct {
	Keep int `json:"keep" jsonschema:"minimum=0,maximum=100"`
}

// percentSchema is {"type":"integer","minimum":0,"maximum":100}. OLLAMA-WIRE.md:
// integer bounds are enforced by Ollama's grammar, number bounds are not.
var percentSchema = func() *jsonschema.Schema {
	r := jsonschema.Reflector{Anonymous: true, DoNotReference: true, ExpandedStruct: true}
	p, ok := r.Reflect(&percent{}).Properties.Get("keep")
	if !ok {
		panic("ollama: reflecting percent gave no keep property")
	}
	return p
}()

// Format returns the `format` JSON schema for the given keys: an object with one
// required integer 0-100 property per key and no other properties, e.g. for two
// cards {"properties":{"c1":{"type":"integer","minimum":0,"maximum":100},"c2":{…}},
// "additionalProperties":false,"type":"object","required":["c1","c2"]}. An object
// with required keys forces exactly one value per card; an array of {id, keep}
// lets ids repeat or go missing (OLLAMA-WIRE.md).
func Format(keys []string) (json.RawMessage, error) {
	props := jsonschema.NewProperties()
	for _, k := range keys {
		props.Set(k, percentSchema)
	}
	schema := &jsonschema.Schema{
		Type:                 "object",
		Properties:           props,
		Required:             append([]string(nil), keys...),
		AdditionalProperties: jsonschema.FalseSchema,
	}
	raw, err := json.Marshal(schema)
	if err != nil {
		return nil, fmt.Errorf("marshalling the answer schema: %w", err)
	}
	return raw, nil
}

// estimate returns the tokens a request needs: the prompt (o200k_base count times
// TokenMargin, plus TemplateTokens) and the answer cap.
func (s *Scorer) estimate(p Prompt, n int) int {
	prompt := transcript.CountTokens(p.System) + transcript.CountTokens(p.User)
	return int(math.Ceil(float64(prompt)*TokenMargin)) + TemplateTokens + s.numPredict(n)
}

func (s *Scorer) fits(p Prompt, n int) bool { return s.estimate(p, n) <= s.numCtx() }

// Fits reports whether a request with all of b's cards fits NumCtx, and the tokens
// it is estimated to need: ceil(TokenMargin · (o200k tokens of the system and user
// messages)) + TemplateTokens + num_predict.
func (s *Scorer) Fits(b cards.Batch) (bool, int, error) {
	p, err := s.render(b, b.Cards)
	if err != nil {
		return false, 0, err
	}
	return s.fits(p, len(b.Cards)), s.estimate(p, len(b.Cards)), nil
}

// ask sends one request and returns the validated values 0-100, in key order.
func (s *Scorer) ask(ctx context.Context, p Prompt) ([]int, error) {
	stream := false
	req := &api.ChatRequest{
		Model: s.model(),
		Messages: []api.Message{
			{Role: "system", Content: p.System},
			{Role: "user", Content: p.User},
		},
		Stream:    &stream,
		Format:    p.Format,
		KeepAlive: &api.Duration{Duration: s.keepAlive()},
		Think:     &api.ThinkValue{Value: false},
		Options: map[string]any{
			"temperature": 0,
			"num_ctx":     s.numCtx(),
			"num_predict": s.numPredict(len(p.Keys)),
			"seed":        s.seed(),
		},
	}
	rctx, cancel := context.WithTimeout(ctx, s.timeout())
	defer cancel()
	start := time.Now()
	var (
		content strings.Builder
		last    api.ChatResponse
		lines   int
	)
	err := s.client.Chat(rctx, req, func(r api.ChatResponse) error {
		lines++
		content.WriteString(r.Message.Content)
		last = r
		return nil
	})
	if err == nil && (lines == 0 || !last.Done) && rctx.Err() != nil {
		// The deadline hit while the body was being read: api.Client does not
		// report a read error on a cut body.
		err = rctx.Err()
	}
	if err != nil {
		return nil, fmt.Errorf("POST /api/chat: %w", classify(rctx, err))
	}
	if lines == 0 {
		return nil, fmt.Errorf("POST /api/chat: %w: the connection closed before any answer", ErrUnreachable)
	}
	if !last.Done {
		return nil, fmt.Errorf("POST /api/chat: %w: done is false after %d characters", ErrTruncated, content.Len())
	}
	if last.DoneReason == "length" {
		return nil, fmt.Errorf("POST /api/chat: %w: done_reason length (num_predict %d reached)", ErrTruncated, s.numPredict(len(p.Keys)))
	}
	vals, err := ParseAnswer(content.String(), p.Keys)
	if err != nil {
		return nil, err
	}
	s.logger().Debug("ollama: asked", "model", s.model(), "cards", len(p.Keys),
		"estimated_tokens", s.estimate(p, len(p.Keys)), "prompt_eval_count", last.PromptEvalCount,
		"eval_count", last.EvalCount, "load", last.LoadDuration, "total", last.TotalDuration,
		"wall", time.Since(start))
	return vals, nil
}

// classify wraps err in its failure kind. ctx is the request's context.
func classify(ctx context.Context, err error) error {
	var (
		status api.StatusError
		auth   api.AuthorizationError
		netErr net.Error
		opErr  *net.OpError
		urlErr *url.Error
	)
	switch {
	case errors.Is(err, context.DeadlineExceeded) || errors.Is(ctx.Err(), context.DeadlineExceeded):
		return fmt.Errorf("%w: %v", ErrTimeout, err)
	case errors.Is(err, context.Canceled):
		return fmt.Errorf("%w: %v", ErrCanceled, err)
	case errors.As(err, &status):
		return fmt.Errorf("%w: HTTP %d: %s", ErrHTTP, status.StatusCode, status.ErrorMessage)
	case errors.As(err, &auth):
		return fmt.Errorf("%w: HTTP %d: %s", ErrHTTP, auth.StatusCode, cmpOr(auth.Status, "unauthorized"))
	case errors.As(err, &netErr) && netErr.Timeout():
		return fmt.Errorf("%w: %v", ErrTimeout, err)
	case errors.Is(err, syscall.ECONNREFUSED), errors.Is(err, syscall.ECONNRESET), errors.Is(err, syscall.EPIPE),
		errors.Is(err, io.ErrUnexpectedEOF), errors.Is(err, io.EOF),
		errors.As(err, &opErr), errors.As(err, &urlErr):
		return fmt.Errorf("%w: %v", ErrUnreachable, err)
	}
	// api.Client turns a 200 body line that is not JSON into an error holding that
	// line (a body cut mid-way), and an in-band {"error": "..."} into its message.
	msg := err.Error()
	if strings.HasPrefix(strings.TrimSpace(msg), "{") {
		return fmt.Errorf("%w: the answer body was cut off: %s", ErrUnreachable, snippet(msg))
	}
	return fmt.Errorf("%w: %s", ErrHTTP, msg)
}

// ParseAnswer validates the model's content against keys and returns one value per
// key, in order. The content must be one JSON object (surrounding whitespace
// allowed) holding each key exactly once, no other key, and values that are JSON
// numbers equal to an integer in [0, 100] (JSON Schema's "integer": 40 and 40.0
// both pass; 101, -1, 1e308, 40.5, "40" and null do not). Repeated keys are caught
// by walking the tokens (encoding/json would keep the last). Errors wrap
// ErrInvalidAnswer and quote the offending part.
func ParseAnswer(content string, keys []string) ([]int, error) {
	bad := func(format string, args ...any) error {
		return fmt.Errorf("%w: %s in %s", ErrInvalidAnswer, fmt.Sprintf(format, args...), snippet(content))
	}
	index := make(map[string]int, len(keys))
	for i, k := range keys {
		index[k] = i
	}
	dec := json.NewDecoder(strings.NewReader(content))
	dec.UseNumber()
	tok, err := dec.Token()
	if err != nil {
		return nil, bad("not JSON (%v)", err)
	}
	if tok != json.Delim('{') {
		return nil, bad("not a JSON object (starts with %v)", tok)
	}
	vals := make([]int, len(keys))
	seen := make([]bool, len(keys))
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			return nil, bad("not JSON (%v)", err)
		}
		key, _ := tok.(string)
		i, ok := index[key]
		if !ok {
			return nil, bad("unknown id %q", key)
		}
		if seen[i] {
			return nil, bad("id %q repeated", key)
		}
		seen[i] = true
		tok, err = dec.Token()
		if err != nil {
			return nil, bad("not JSON (%v)", err)
		}
		num, ok := tok.(json.Number)
		if !ok {
			return nil, bad("value of %q is %v, not a number", key, describe(tok))
		}
		f, err := strconv.ParseFloat(string(num), 64)
		if err != nil || math.IsInf(f, 0) || f != math.Trunc(f) || f < 0 || f > 100 {
			return nil, bad("value of %q is %s, not an integer from 0 to 100", key, num)
		}
		vals[i] = int(f)
	}
	if _, err := dec.Token(); err != nil {
		return nil, bad("not JSON (%v)", err)
	}
	if tok, err := dec.Token(); err != io.EOF {
		if err != nil {
			return nil, bad("text after the object (%v)", err)
		}
		return nil, bad("text after the object (%v)", describe(tok))
	}
	var missing []string
	for i, ok := range seen {
		if !ok {
			missing = append(missing, keys[i])
		}
	}
	if len(missing) > 0 {
		return nil, bad("ids missing: %s", strings.Join(missing, ", "))
	}
	return vals, nil
}

func describe(tok json.Token) string {
	switch v := tok.(type) {
	case nil:
		return "null"
	case json.Delim:
		return "'" + v.String() + "'"
	case string:
		return strconv.Quote(v)
	}
	return fmt.Sprint(tok)
}

// snippet quotes at most 120 characters of s for an error message.
func snippet(s string) string { return strconv.Quote(cards.Cut(s, 120)) }
