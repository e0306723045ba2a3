package server

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/go-playground/validator/v10"

	"github.com/pruneadvisor/pruneadvisor/advisor"
	"github.com/pruneadvisor/pruneadvisor/recall"
	"github.com/pruneadvisor/pruneadvisor/transcript"
)

// AdviseRequest is the body of POST /v1/advise.
type AdviseRequest struct {
	// SessionID names the conversation; the advisor keeps its state and frozen stubs
	// under it. 1 to 200 bytes.
	SessionID string `json:"session_id" validate:"required,max=200"`
	// Format is the shape of Messages: "openai" (Chat Completions messages, tool
	// results as role "tool" messages) or "anthropic" (Messages API messages, tool
	// results as tool_result blocks).
	Format string `json:"format" validate:"required,oneof=openai anthropic"`
	// Messages is the message list the agent is about to send, as a JSON array.
	Messages json.RawMessage `json:"messages" validate:"required"`
	// Budget, when > 0, is the context budget in tokens for this session instead of
	// the server's; keep it the same on every request of a session. At most the
	// server's context window.
	Budget int `json:"budget,omitempty" validate:"omitempty,gte=1"`
	// Task, when set, is the user's request that started the current task (the
	// default is the first real user prompt in Messages).
	Task string `json:"task,omitempty"`
	// Now, when set, is taken as the agent's latest words: it replaces the text of the
	// last assistant message for the advisor (cards' "now" and reactions).
	Now string `json:"now,omitempty"`
}

// AdviseResponse is the answer of POST /v1/advise.
type AdviseResponse struct {
	// Messages is the request's message list with the content of each pruned tool
	// result replaced by its stub, every other byte as sent.
	Messages json.RawMessage `json:"messages"`
	// Plan is the advisor's plan for this step: a decision per tool output (Key is the
	// tool call id; Stub is set for pruned outputs).
	Plan advisor.Plan `json:"plan"`
}

var validate = sync.OnceValue(func() *validator.Validate {
	return validator.New(validator.WithRequiredStructEnabled())
})

// advise handles POST /v1/advise. Client errors (bad JSON with its position, failed
// validation naming the field, messages the reader cannot read) give 400; an advisor
// failure gives 500 with the reason.
func (s *Server) advise(w http.ResponseWriter, r *http.Request) {
	body, buf, ok := s.readBody(w, r, func(code int, msg string) { writeError(w, code, "%s", msg) }, nil)
	if !ok {
		return
	}
	defer buf.release() // the request decodes into copies
	start := time.Now()
	req, code, err := s.adviseRequest(r, body)
	if err != nil {
		writeError(w, code, "%s", err)
		return
	}
	sess, doc, err := adviseSession(req)
	if err != nil {
		writeError(w, http.StatusBadRequest, "%s", err)
		return
	}
	plan, out, code, err := s.adviseStep(r.Context(), req, sess, doc)
	if err != nil {
		if code != 0 {
			writeError(w, code, "%s", err)
		}
		return
	}
	s.metrics.adviseSeconds.WithLabelValues("advise").Observe(time.Since(start).Seconds())
	// The step's asks and step record are in the store before the client has the
	// plan, as for a proxied request's response: the session's next step, on any
	// replica or after a restart, reads them (docs/TEAM.md, "Several replicas").
	if err := s.records.writtenUpTo(r.Context(), s.records.mark()); err != nil {
		return // the client is gone
	}
	writeAdvice(w, out, plan)
}

// adviseRequest decodes and validates an /v1/advise body: the request, or the
// status and the error to answer with.
func (s *Server) adviseRequest(r *http.Request, body []byte) (AdviseRequest, int, error) {
	var req AdviseRequest
	body, _, err := s.decodeRequest("advise", r, body)
	if err != nil {
		return req, decodeStatus(err), err
	}
	if at := jsonErrorAt(body); at != "" {
		return req, http.StatusBadRequest, errors.New(at)
	}
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&req); err != nil {
		return req, http.StatusBadRequest, fmt.Errorf("request: %s", decodeProblem(err))
	}
	if err := validate().Struct(req); err != nil {
		return req, http.StatusBadRequest, fmt.Errorf("request: %s", validationProblem(err))
	}
	if req.Budget > s.cfg.ContextWindow {
		return req, http.StatusBadRequest, fmt.Errorf("request: budget %d is over the context window of %d tokens", req.Budget, s.cfg.ContextWindow)
	}
	if msgs := bytes.TrimSpace(req.Messages); len(msgs) == 0 || msgs[0] != '[' {
		return req, http.StatusBadRequest, errors.New("request: messages must be a JSON array of messages")
	}
	return req, 0, nil
}

// advisePrefix opens the document adviseSession reads the messages from.
const advisePrefix = `{"messages":`

// adviseSession reads req's messages as a session (the request's format) from the
// document {"messages": ...}, which it returns too, with req's id, task and now.
func adviseSession(req AdviseRequest) (*transcript.Session, []byte, error) {
	msgs := bytes.TrimSpace(req.Messages)
	doc := make([]byte, 0, len(advisePrefix)+len(msgs)+1)
	doc = append(append(append(doc, advisePrefix...), msgs...), '}')
	sess, err := transcript.Read("messages", doc, transcript.Options{Format: formatOf(apiKind(req.Format))})
	if err != nil {
		return nil, nil, errors.New(strings.TrimPrefix(err.Error(), "messages: "))
	}
	sess.ID = req.SessionID
	if req.Task != "" {
		sess.Task = req.Task
	}
	if req.Now != "" {
		for i := len(sess.Messages) - 1; i >= 0; i-- {
			if sess.Messages[i].Role == transcript.RoleAssistant {
				sess.Messages[i].Text = req.Now
				break
			}
		}
	}
	return sess, doc, nil
}

// adviseStep runs the session's step and puts the plan's stubs into doc. On
// failure it returns the status and error to answer with (status 0: the client is
// gone, answer nothing).
func (s *Server) adviseStep(ctx context.Context, req AdviseRequest, sess *transcript.Session, doc []byte) (advisor.Plan, []byte, int, error) {
	e, err := s.sessions.acquire(advisorKey{budget: req.Budget}, req.SessionID)
	if err != nil {
		return advisor.Plan{}, nil, http.StatusBadRequest, fmt.Errorf("request: budget: %v", err)
	}
	defer s.sessions.release(e)
	plan, err := s.runStep(ctx, e, sess)
	if err != nil {
		if ctx.Err() != nil {
			return plan, nil, 0, err
		}
		s.log.Warn("advise failed", "route", "advise", "session", req.SessionID, "err", err)
		return plan, nil, http.StatusInternalServerError, fmt.Errorf("advise: %v", err)
	}
	s.metrics.observePlan(plan)
	out := doc
	if stubs := plan.Stubs; len(stubs) > 0 {
		if out, err = sess.Rewrite(stubs); err != nil {
			s.log.Warn("rewrite failed", "route", "advise", "session", req.SessionID, "err", err)
			return plan, nil, http.StatusInternalServerError, fmt.Errorf("rewrite: %v", err)
		}
	}
	return plan, out, 0, nil
}

// writeAdvice answers {"messages": the messages of out, "plan": plan}. Written by
// hand, not marshalled: encoding/json would compact the messages, and they must
// come back byte for byte but for the stubs.
func writeAdvice(w http.ResponseWriter, out []byte, plan advisor.Plan) {
	var buf bytes.Buffer
	buf.WriteString(advisePrefix)
	buf.Write(out[len(advisePrefix) : len(out)-1])
	buf.WriteString(`,"plan":`)
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(plan); err != nil {
		writeError(w, http.StatusInternalServerError, "encoding the plan: %v", err)
		return
	}
	buf.Truncate(buf.Len() - 1) // Encode's newline
	buf.WriteString("}\n")
	w.Header().Set("Content-Type", "application/json")
	_, _ = w.Write(buf.Bytes())
}

// decodeProblem words a json decoding error for a client.
func decodeProblem(err error) string {
	var te *json.UnmarshalTypeError
	if errors.As(err, &te) {
		return fmt.Sprintf("field %s: expected %s, got JSON %s (byte %d)", te.Field, te.Type, te.Value, te.Offset)
	}
	if errors.Is(err, io.EOF) {
		return "empty body; want a JSON object"
	}
	return strings.TrimPrefix(err.Error(), "json: ")
}

// validationProblem names each failed field by its JSON name and rule.
func validationProblem(err error) string {
	var verrs validator.ValidationErrors
	if !errors.As(err, &verrs) {
		return err.Error()
	}
	names := map[string]string{"SessionID": "session_id", "Format": "format", "Messages": "messages", "Budget": "budget"}
	var parts []string
	for _, fe := range verrs {
		name := names[fe.StructField()]
		if name == "" {
			name = fe.StructField()
		}
		switch fe.Tag() {
		case "required":
			parts = append(parts, name+" is required")
		case "oneof":
			parts = append(parts, fmt.Sprintf("%s %q: want one of %s", name, fe.Value(), strings.ReplaceAll(fe.Param(), " ", ", ")))
		default:
			parts = append(parts, fmt.Sprintf("%s fails %s %s", name, fe.Tag(), fe.Param()))
		}
	}
	return strings.Join(parts, "; ")
}

// recallHandler handles GET /v1/recall/{id}: the original, byte for byte, as
// text/plain; 400 for a malformed id, 404 for an unknown one. The query may ask for
// part of it (recall.Part): lines=200-250, grep=PATTERN, context=N (with grep); the
// answer is then the numbered lines recall.Select gives. A bad range, pattern or
// context, a parameter given twice or one of another name is 400, the JSON error
// naming the parameter.
func (s *Server) recallHandler(w http.ResponseWriter, r *http.Request) {
	id := r.PathValue("id")
	part, err := recallPart(r)
	if err == nil {
		var text string
		text, err = s.recall.RecallPart(r.Context(), id, part)
		if err == nil {
			s.metrics.recalls.WithLabelValues("ok").Inc()
			w.Header().Set("Content-Type", "text/plain; charset=utf-8")
			w.Header().Set("X-Content-Type-Options", "nosniff")
			_, _ = io.WriteString(w, text)
			return
		}
	}
	switch {
	case errors.Is(err, recall.ErrInvalidID), errors.Is(err, recall.ErrBadRange), errors.Is(err, recall.ErrBadPattern),
		errors.Is(err, recall.ErrBadContext), errors.Is(err, errRecallQuery):
		s.metrics.recalls.WithLabelValues("invalid").Inc()
		writeError(w, http.StatusBadRequest, "%v", err)
	case errors.Is(err, recall.ErrNotFound):
		s.metrics.recalls.WithLabelValues("not_found").Inc()
		writeError(w, http.StatusNotFound, "%v", err)
	default:
		s.metrics.recalls.WithLabelValues("error").Inc()
		s.log.Warn("recall failed", "id", id, "err", err)
		writeError(w, http.StatusInternalServerError, "%v", err)
	}
}

// errRecallQuery marks a recall query that is not lines, grep and context once each.
var errRecallQuery = errors.New("bad recall query")

// recallPart reads the part a recall's query asks for: lines, grep and context,
// each at most once and lines and grep not empty, no other parameter. Its form is
// checked by RecallPart.
func recallPart(r *http.Request) (recall.Part, error) {
	var p recall.Part
	q, err := url.ParseQuery(r.URL.RawQuery)
	if err != nil {
		return p, fmt.Errorf("%w: %v", errRecallQuery, err)
	}
	for _, name := range slices.Sorted(maps.Keys(q)) {
		vs := q[name]
		if len(vs) > 1 {
			return p, fmt.Errorf("%w: %s given %d times; give it once", errRecallQuery, name, len(vs))
		}
		v := vs[0]
		if left := recall.LeftOut(name); v == "" && left != "" {
			return p, fmt.Errorf("%w: %s is empty; leave it out for %s", errRecallQuery, name, left)
		}
		switch name {
		case "lines":
			p.Lines = v
		case "grep":
			p.Grep = v
		case "context":
			n, err := strconv.Atoi(v)
			if err != nil {
				return p, fmt.Errorf("%w: context %q: want a number of lines from 0 to %d", recall.ErrBadContext, v, recall.MaxContext)
			}
			p.Context = n
		default:
			return p, fmt.Errorf("%w: unknown parameter %q: want lines, grep or context", errRecallQuery, name)
		}
	}
	return p, nil
}
