// Package recall gets a pruned output's original back by its recall id (docs/DESIGN.md
// "Recall") and records the recall as later-use evidence. It also describes the
// recall tool for agents: its JSON schema is generated from Args.
package recall

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/go-playground/validator/v10"
	"github.com/invopop/jsonschema"

	"github.com/pruneadvisor/pruneadvisor/advisor"
)

// Errors returned (wrapped) by Recall; test with errors.Is.
var (
	// ErrNotFound means no pruned output has the id. It is advisor.ErrNotFound, the
	// sentinel a Store wraps for unknown ids.
	ErrNotFound = advisor.ErrNotFound
	// ErrInvalidID means the argument is not shaped like a recall id.
	ErrInvalidID = errors.New(`invalid recall id: want "o_" followed by 12 digits (or, in stubs made before December 2026, 10 lowercase hex digits), as the stub shows it`)
	// ErrNoStore means the Service has no Store.
	ErrNoStore = errors.New("no store configured")
)

// Store is what recall needs from storage; storage.DB implements it.
type Store interface {
	// Original returns the original saved under recall id id, its Text byte for
	// byte; for an unknown id the error wraps advisor.ErrNotFound.
	Original(ctx context.Context, id string) (advisor.Original, error)
	// RecordRecall stores one recall event.
	RecordRecall(ctx context.Context, e advisor.RecallEvent) error
}

// DefaultToolName is the tool name ToolDefinition uses for an empty name.
const DefaultToolName = "recall"

// ToolDescription is the recall tool's description as agents see it.
const ToolDescription = `Get back the full original text of an earlier tool output that was pruned from this conversation to save context. ` +
	`A pruned output was replaced by a stub such as [pruned: read src/get.rs, 4,210 tokens, score 0.08; recall("o_754312282865") restores it]; ` +
	`pass the id from the stub. Returns the original output exactly as it was. ` +
	`For part of a long output add lines ("200-250"; "200-" to the end) or grep (a regular expression; context adds lines ` +
	`around each match): you get those lines with their numbers, as grep -n prints them.`

// Args is the recall tool's argument, as an agent sends it ({"id":"o_754312282865"},
// or {"id":"o_754312282865","lines":"200-250"}, {"id":"o_754312282865","grep":"Timeout","context":2}).
// Its JSON schema (ToolSchema) and the id's validation (Validate) come from the tags
// below; Lines, Grep and Context are checked as Part (Args.Part).
type Args struct {
	ID string `json:"id" jsonschema:"pattern=^o_([0-9]{12}|[0-9a-f]{10})$,example=o_754312282865" jsonschema_description:"The recall id shown in the stub of the pruned output: o_ followed by 12 digits (10 lowercase hex digits in stubs made before December 2026)." validate:"required,recallid"`
	// Lines is Part.Lines: "N", "N-M" or "N-". Optional.
	Lines string `json:"lines,omitempty" jsonschema:"pattern=^[1-9][0-9]*(-([1-9][0-9]*)?)?$,example=200-250" jsonschema_description:"Optional: only these lines of the original, numbered from 1: N, N-M or N- (to the end)."`
	// Grep is Part.Grep: a Go (RE2) regular expression. Optional.
	Grep string `json:"grep,omitempty" jsonschema:"example=Timeout" jsonschema_description:"Optional: only the lines matching this Go (RE2) regular expression, with their line numbers ((?i) for any case). With lines, searches only those lines."`
	// Context is Part.Context: lines shown around each grep match, 0 to MaxContext.
	Context int `json:"context,omitempty" jsonschema:"minimum=0,maximum=20" jsonschema_description:"Optional, with grep: lines to show before and after each match (0-20), as grep -C."`
}

// Part returns the part of the original a asks for (the zero Part: all of it).
func (a Args) Part() Part {
	return Part{Lines: a.Lines, Grep: a.Grep, Context: a.Context}
}

// Service serves recalls from a Store. Create it with New; the exported fields may
// be changed before first use.
type Service struct {
	Store Store
	// Clock stamps recall events. Default time.Now.
	Clock func() time.Time
	// Logger receives one warning when a recall is served but its event could not be
	// recorded. Default slog.Default().
	Logger *slog.Logger
}

// New returns a Service reading from and recording into store.
func New(store Store) *Service {
	return &Service{Store: store, Clock: time.Now, Logger: slog.Default()}
}

// Recall returns the original of the pruned output with recall id id, byte for
// byte, and records a recall event (session, output, At = Clock(); Step 0 =
// unknown, since the service does not see the session). Errors, all starting
// `recall "<id>": ` (the id cut to 40 bytes): ErrInvalidID when id is not shaped like
// a recall id (the store is not asked), ErrNotFound when no output has it, ErrNoStore
// without a Store, or the store's error wrapped. Failing to record the event does not
// fail the recall: the agent needs its text more than the evidence needs the row, so
// that failure is logged to Logger instead.
func (s *Service) Recall(ctx context.Context, id string) (string, error) {
	return s.RecallPart(ctx, id, Part{})
}

// RecallPart is Recall of part of the original: the lines p selects, numbered, as
// Select returns them (the zero Part: the whole original, byte for byte, as Recall).
// A partial recall is recorded as a recall event exactly as a whole one is, when it
// answers (a pattern that matches nothing answers). Errors: Recall's; p's form is
// checked before the store is asked (ErrBadRange, ErrBadPattern, ErrBadContext,
// wrapped, starting `recall "<id>": `), and a Lines start past the original's end is
// ErrBadRange, not recorded.
func (s *Service) RecallPart(ctx context.Context, id string, p Part) (string, error) {
	if err := Validate(Args{ID: id}); err != nil {
		return "", err
	}
	if err := p.Validate(); err != nil {
		return "", fmt.Errorf("recall %s: %w", quoteID(id), err)
	}
	if s.Store == nil {
		return "", fmt.Errorf("recall %s: %w", quoteID(id), ErrNoStore)
	}
	o, err := s.Store.Original(ctx, id)
	if errors.Is(err, ErrNotFound) {
		return "", fmt.Errorf("recall %s: %w", quoteID(id), ErrNotFound)
	}
	if err != nil {
		return "", fmt.Errorf("recall %s: %w", quoteID(id), err)
	}
	text, err := Select(o.Text, p)
	if err != nil {
		return "", fmt.Errorf("recall %s: %w", quoteID(id), err)
	}
	clock := s.Clock
	if clock == nil {
		clock = time.Now
	}
	ev := advisor.RecallEvent{RecallID: id, SessionID: o.SessionID, OutputKey: o.OutputKey, At: clock()}
	if err := s.Store.RecordRecall(ctx, ev); err != nil {
		logger := s.Logger
		if logger == nil {
			logger = slog.Default()
		}
		logger.WarnContext(ctx, "recall served but not recorded", "id", id, "session", o.SessionID, "output", o.OutputKey, "err", err)
	}
	return text, nil
}

// Validate checks a's tags (validate:"required,recallid"). The error wraps
// ErrInvalidID and names the id.
func Validate(a Args) error {
	if err := validate().Struct(a); err != nil {
		var verrs validator.ValidationErrors
		if errors.As(err, &verrs) {
			return fmt.Errorf("recall %s: %w", quoteID(a.ID), ErrInvalidID)
		}
		return fmt.Errorf("recall %s: validating arguments: %w", quoteID(a.ID), err)
	}
	return nil
}

// validate is the validator with the "recallid" tag (advisor.ValidRecallID).
var validate = sync.OnceValue(func() *validator.Validate {
	v := validator.New(validator.WithRequiredStructEnabled())
	if err := v.RegisterValidation("recallid", func(fl validator.FieldLevel) bool {
		return advisor.ValidRecallID(fl.Field().String())
	}); err != nil {
		panic(fmt.Sprintf("recall: registering the recallid validation: %v", err)) // static tag name; cannot fail
	}
	return v
})

// quoteID quotes id for an error message, cut to 40 bytes so garbage input cannot
// flood a log.
func quoteID(id string) string {
	const max = 40
	if len(id) > max {
		return fmt.Sprintf("%q... (%d bytes)", id[:max], len(id))
	}
	return fmt.Sprintf("%q", id)
}

// ToolSchema returns the JSON schema of Args, generated with invopop/jsonschema:
// an object with one required string property "id" and its pattern, no additional
// properties, without $schema or $id (tool-list ready). The result is a fresh copy.
func ToolSchema() json.RawMessage {
	return append(json.RawMessage(nil), toolSchema()...)
}

var toolSchema = sync.OnceValue(func() json.RawMessage {
	r := jsonschema.Reflector{Anonymous: true, DoNotReference: true, ExpandedStruct: true}
	s := r.Reflect(&Args{})
	s.Version = ""
	b, err := json.Marshal(s)
	if err != nil {
		panic(fmt.Sprintf("recall: marshalling the Args schema: %v", err)) // static type; cannot fail
	}
	return b
})

// Tool is a tool definition in the Anthropic Messages API shape ({name, description,
// input_schema}), ready to append to an agent's tool list.
type Tool struct {
	Name        string          `json:"name"`
	Description string          `json:"description"`
	InputSchema json.RawMessage `json:"input_schema"`
}

// ToolDefinition returns the recall tool named name (DefaultToolName when empty) with
// ToolDescription and ToolSchema.
func ToolDefinition(name string) Tool {
	if name == "" {
		name = DefaultToolName
	}
	return Tool{Name: name, Description: ToolDescription, InputSchema: ToolSchema()}
}
