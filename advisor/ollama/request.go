package ollama

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strings"
	"syscall"
	"time"

	"github.com/ollama/ollama/api"
)

// Version returns the server's version from /api/version, within Timeout. Errors
// wrap ErrTimeout, ErrCanceled, ErrUnreachable or ErrHTTP.
func (s *Scorer) Version(ctx context.Context) (string, error) {
	ctx, cancel := context.WithTimeout(ctx, s.timeout())
	defer cancel()
	v, err := s.client.Version(ctx)
	if err != nil {
		return "", fmt.Errorf("asking the ollama version: %w", s.classify(ctx, err))
	}
	return v, nil
}

// Ping checks that the server answers /api/version within Timeout (it does not
// check that Model is pulled: CheckModel does). Errors as Version.
func (s *Scorer) Ping(ctx context.Context) error {
	_, err := s.Version(ctx)
	return err
}

// CheckModel asks the server about Model with POST /api/show, within Timeout. It
// returns nil when the server has the model; an error wrapping ErrNotPulled
// ("model X is not pulled: ollama pull X") when it answers 404 `model 'X' not
// found`; otherwise an error wrapping ErrTimeout, ErrCanceled, ErrUnreachable or
// ErrHTTP. /api/show resolves the name as /api/chat does ("qwen2.5" is
// "qwen2.5:latest"), which a match against /api/tags would have to redo.
func (s *Scorer) CheckModel(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, s.timeout())
	defer cancel()
	if _, err := s.client.Show(ctx, &api.ShowRequest{Model: s.model()}); err != nil {
		return fmt.Errorf("POST /api/show: %w", s.classify(ctx, err))
	}
	return nil
}

// ask sends one request and returns the validated values 0-100, in key order: the
// answer must be complete (complete) and valid (ParseAnswer); its time is measured
// for the card-time estimate, and a timeout is noted (timedOut).
func (s *Scorer) ask(ctx context.Context, p Prompt) ([]int, error) {
	a, err := s.chat(ctx, s.chatRequest(p))
	if err != nil {
		if errors.Is(err, ErrTimeout) && ctx.Err() == nil {
			s.timedOut(len(p.Keys))
		}
		return nil, fmt.Errorf("POST /api/chat: %w", err)
	}
	if err := s.complete(a.last, a.lines, len(a.content), p); err != nil {
		return nil, fmt.Errorf("POST /api/chat: %w", err)
	}
	vals, err := ParseAnswer(a.content, p.Keys)
	if err != nil {
		return nil, err
	}
	s.measured(a.wall-a.last.LoadDuration, len(p.Keys))
	s.logger().Debug("ollama: asked", "model", s.model(), "cards", len(p.Keys),
		"estimated_tokens", s.estimate(p), "prompt_eval_count", a.last.PromptEvalCount,
		"eval_count", a.last.EvalCount, "load", a.last.LoadDuration, "total", a.last.TotalDuration,
		"wall", a.wall, "card_time", s.CardTimeEstimate())
	return vals, nil
}

// chatRequest is the /api/chat request for p: not streamed, the schema as format,
// no thinking, neither truncated nor shifted, temperature 0 and the scorer's
// num_ctx, num_predict and seed.
func (s *Scorer) chatRequest(p Prompt) *api.ChatRequest {
	no := false
	return &api.ChatRequest{
		Model: s.model(),
		Messages: []api.Message{
			{Role: "system", Content: p.System},
			{Role: "user", Content: p.User},
		},
		Stream:    &no,
		Format:    p.Format,
		KeepAlive: &api.Duration{Duration: s.keepAlive()},
		Think:     &api.ThinkValue{Value: false},
		// Without truncate false a prompt over num_ctx is cut from the front and
		// still answered; without shift false an answer that runs out of context
		// shifts it silently (OLLAMA-WIRE.md).
		Truncate: &no,
		Shift:    &no,
		Options: map[string]any{
			"temperature": 0,
			"num_ctx":     s.numCtx(),
			"num_predict": s.numPredict(p.Keys),
			"seed":        s.seed(),
		},
	}
}

// chatAnswer is what one /api/chat exchange gave.
type chatAnswer struct {
	content string           // the content of every response line, joined
	last    api.ChatResponse // the last line: done, done_reason, counts and durations
	lines   int              // how many response lines came
	wall    time.Duration    // from the request to the last line
}

// chat sends req under the scorer's timeout and collects the answer. A deadline
// that hits while the body is being read is an error too (api.Client does not
// report a read error on a cut body); errors are classified (classify).
func (s *Scorer) chat(ctx context.Context, req *api.ChatRequest) (chatAnswer, error) {
	rctx, cancel := context.WithTimeout(ctx, s.timeout())
	defer cancel()
	start := time.Now()
	var (
		a       chatAnswer
		content strings.Builder
	)
	err := s.client.Chat(rctx, req, func(r api.ChatResponse) error {
		a.lines++
		content.WriteString(r.Message.Content)
		a.last = r
		return nil
	})
	if err == nil && (a.lines == 0 || !a.last.Done) && rctx.Err() != nil {
		err = rctx.Err()
	}
	if err != nil {
		return a, s.classify(rctx, err)
	}
	a.wall = time.Since(start)
	a.content = content.String()
	return a, nil
}

// complete checks that the last response line closes a whole answer to the whole
// prompt: some line came, done is true, the prompt was not cut (prompt_eval_count
// under num_ctx: a server that ignores truncate cuts it to exactly num_ctx) and
// the answer did not stop at a limit (done_reason "length": ErrTooLarge when the
// context was full, ErrTruncated when num_predict was reached).
func (s *Scorer) complete(last api.ChatResponse, lines, chars int, p Prompt) error {
	numCtx := s.numCtx()
	switch {
	case lines == 0:
		return fmt.Errorf("%w: the connection closed before any answer", ErrUnreachable)
	case !last.Done:
		return fmt.Errorf("%w: done is false after %d characters", ErrTruncated, chars)
	case last.PromptEvalCount >= numCtx:
		return fmt.Errorf("%w: prompt_eval_count %d reached num_ctx %d: the server cut the prompt", ErrTooLarge, last.PromptEvalCount, numCtx)
	case last.DoneReason == "length" && last.PromptEvalCount+last.EvalCount >= numCtx:
		return fmt.Errorf("%w: done_reason length with the context full (%d prompt + %d answer tokens, num_ctx %d)",
			ErrTooLarge, last.PromptEvalCount, last.EvalCount, numCtx)
	case last.DoneReason == "length":
		return fmt.Errorf("%w: done_reason length (num_predict %d reached)", ErrTruncated, s.numPredict(p.Keys))
	}
	return nil
}

// contextExceeded is the runner's error text for a prompt over num_ctx under
// `truncate: false` (runner/ollamarunner: errorInputTooLong, HTTP 400).
const contextExceeded = "exceeds the context length"

// classify wraps err in its failure kind. ctx is the request's context.
func (s *Scorer) classify(ctx context.Context, err error) error {
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
		return s.statusFailure(status)
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

// statusFailure names the kind of an error status: 404 `model 'x' not found` is
// ErrNotPulled, 400 "the input length exceeds the context length" ErrTooLarge,
// anything else ErrHTTP; the server's text is kept.
func (s *Scorer) statusFailure(st api.StatusError) error {
	msg := strings.TrimSpace(st.ErrorMessage)
	switch {
	case st.StatusCode == http.StatusNotFound && strings.Contains(msg, "model") && strings.Contains(msg, "not found"):
		return fmt.Errorf("%w: model %s is not pulled: ollama pull %s (HTTP 404: %s)", ErrNotPulled, s.model(), s.model(), msg)
	case st.StatusCode == http.StatusBadRequest && strings.Contains(msg, contextExceeded):
		return fmt.Errorf("%w: HTTP 400: %s (num_ctx %d)", ErrTooLarge, msg, s.numCtx())
	}
	return fmt.Errorf("%w: HTTP %d: %s", ErrHTTP, st.StatusCode, msg)
}
