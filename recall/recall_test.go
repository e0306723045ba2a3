package recall

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"log/slog"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/pruneadvisor/pruneadvisor/advisor"
	"github.com/pruneadvisor/pruneadvisor/storage"
)

var update = flag.Bool("update", false, "rewrite testdata golden files")

// openStore returns a real SQLite store in a temporary directory holding one original.
func openStore(t *testing.T, text string) (*storage.DB, advisor.Original) {
	t.Helper()
	db, err := storage.Open(t.Context(), filepath.Join(t.TempDir(), "recall.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	o := advisor.Original{RecallID: advisor.RecallID("sess", "toolu_01"), SessionID: "sess", OutputKey: "toolu_01",
		Tool: "Read", Summary: "src/get.rs", Text: text, Tokens: 4210, Step: 2}
	if err := db.SaveOriginal(t.Context(), o); err != nil {
		t.Fatal(err)
	}
	return db, o
}

// fixedClock returns a clock that yields t0, t0+1s, t0+2s...
func fixedClock(t0 time.Time) func() time.Time {
	n := 0
	return func() time.Time {
		n++
		return t0.Add(time.Duration(n-1) * time.Second)
	}
}

func TestRecallReturnsOriginalAndRecords(t *testing.T) {
	ctx := t.Context()
	text := "fn get() {}\n\x00\xff\xfe not utf-8\r\n" + strings.Repeat("line\n", 1000)
	db, o := openStore(t, text)
	t0 := time.Date(2025, 5, 6, 7, 8, 9, 0, time.UTC)
	svc := New(db)
	svc.Clock = fixedClock(t0)
	for i := range 2 {
		got, err := svc.Recall(ctx, o.RecallID)
		if err != nil {
			t.Fatalf("recall %d: %v", i+1, err)
		}
		if got != text {
			t.Fatalf("recall %d: got %d bytes, want the %d original bytes", i+1, len(got), len(text))
		}
	}
	events, err := db.SessionRecalls(ctx, "sess")
	if err != nil {
		t.Fatal(err)
	}
	want := []advisor.RecallEvent{
		{RecallID: o.RecallID, SessionID: "sess", OutputKey: "toolu_01", At: t0},
		{RecallID: o.RecallID, SessionID: "sess", OutputKey: "toolu_01", At: t0.Add(time.Second)},
	}
	if diff := cmp.Diff(want, events); diff != "" {
		t.Errorf("recorded events (-want +got):\n%s", diff)
	}
}

func TestRecallUnknownID(t *testing.T) {
	db, _ := openStore(t, "x")
	_, err := New(db).Recall(t.Context(), "o_0123456789")
	if !errors.Is(err, ErrNotFound) || !errors.Is(err, advisor.ErrNotFound) {
		t.Fatalf("Recall(unknown) = %v, want ErrNotFound", err)
	}
	if want := `recall "o_0123456789": no pruned output with this id`; err.Error() != want {
		t.Errorf("error text\n got %q\nwant %q", err, want)
	}
	events, err := db.SessionRecalls(t.Context(), "sess")
	if err != nil || len(events) != 0 {
		t.Errorf("events after a failed recall = %v, %v; want none", events, err)
	}
}

// fakeStore counts calls and returns canned results.
type fakeStore struct {
	original            advisor.Original
	originalErr, recErr error
	originalCalls       int
	recorded            []advisor.RecallEvent
}

func (f *fakeStore) Original(_ context.Context, id string) (advisor.Original, error) {
	f.originalCalls++
	return f.original, f.originalErr
}

func (f *fakeStore) RecordRecall(_ context.Context, e advisor.RecallEvent) error {
	if f.recErr != nil {
		return f.recErr
	}
	f.recorded = append(f.recorded, e)
	return nil
}

func TestRecallInvalidID(t *testing.T) {
	tests := []struct{ id, wantText string }{
		{"", `recall "": invalid recall id: want "o_" followed by 12 digits (or, in stubs made before December 2026, 10 lowercase hex digits), as the stub shows it`},
		{"garbage", `recall "garbage": invalid recall id`},
		{"o_7f3a9c", `recall "o_7f3a9c": invalid recall id`},
		{"O_0123456789", `recall "O_0123456789": invalid recall id`},
		{"o_0123456789 ", `recall "o_0123456789 ": invalid recall id`},
		{`recall("o_0123456789")`, `recall "recall(\"o_0123456789\")": invalid recall id`},
		{strings.Repeat("z", 5000), `recall "zzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzz"... (5000 bytes): invalid recall id`},
	}
	for _, tt := range tests {
		f := &fakeStore{}
		_, err := New(f).Recall(t.Context(), tt.id)
		if !errors.Is(err, ErrInvalidID) || !strings.HasPrefix(err.Error(), tt.wantText) {
			t.Errorf("Recall(%.20q) = %v, want ErrInvalidID starting %q", tt.id, err, tt.wantText)
		}
		if f.originalCalls != 0 {
			t.Errorf("Recall(%.20q) asked the store %d times, want 0", tt.id, f.originalCalls)
		}
	}
}

func TestRecallStoreErrors(t *testing.T) {
	ctx := t.Context()
	id := "o_0123456789"
	broken := errors.New("disk on fire")
	_, err := New(&fakeStore{originalErr: broken}).Recall(ctx, id)
	if !errors.Is(err, broken) || err.Error() != `recall "o_0123456789": disk on fire` {
		t.Errorf("Recall with a failing store = %v, want the store error wrapped", err)
	}
	_, err = (&Service{}).Recall(ctx, id)
	if !errors.Is(err, ErrNoStore) {
		t.Errorf("Recall without a store = %v, want ErrNoStore", err)
	}
}

// TestRecallRecordFailureStillServes: the text comes back and the failure is logged once.
func TestRecallRecordFailureStillServes(t *testing.T) {
	f := &fakeStore{original: advisor.Original{SessionID: "s", OutputKey: "k", Text: "original"}, recErr: errors.New("database is locked")}
	var logs bytes.Buffer
	svc := New(f)
	svc.Logger = slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{ReplaceAttr: func(_ []string, a slog.Attr) slog.Attr {
		if a.Key == slog.TimeKey {
			return slog.Attr{}
		}
		return a
	}}))
	got, err := svc.Recall(t.Context(), "o_0123456789")
	if err != nil || got != "original" {
		t.Fatalf("Recall = %q, %v; want the text and no error", got, err)
	}
	want := `level=WARN msg="recall served but not recorded" id=o_0123456789 session=s output=k err="database is locked"` + "\n"
	if logs.String() != want {
		t.Errorf("log\n got %q\nwant %q", logs.String(), want)
	}
}

func TestValidateAgreesWithSchemaPattern(t *testing.T) {
	var schema struct {
		Properties struct {
			ID struct {
				Pattern string `json:"pattern"`
			} `json:"id"`
		} `json:"properties"`
	}
	if err := json.Unmarshal(ToolSchema(), &schema); err != nil {
		t.Fatal(err)
	}
	if schema.Properties.ID.Pattern != advisor.RecallIDPattern {
		t.Errorf("schema pattern %q, want advisor.RecallIDPattern %q", schema.Properties.ID.Pattern, advisor.RecallIDPattern)
	}
	re, err := regexp.Compile(schema.Properties.ID.Pattern)
	if err != nil {
		t.Fatalf("schema pattern %q: %v", schema.Properties.ID.Pattern, err)
	}
	for _, id := range []string{advisor.RecallID("a", "b"), "o_0123456789", "o_abcdef0123", "o_ABCDEF0123", "o_012345678", "o_01234567890", "x_0123456789", "", "o_012345678g", "o_012345678901", "o_01234567890a", "o_0123456789012", "x_012345678901"} {
		schemaOK, validOK := re.MatchString(id), Validate(Args{ID: id}) == nil
		if schemaOK != validOK || validOK != advisor.ValidRecallID(id) {
			t.Errorf("id %q: schema pattern %v, Validate %v, advisor.ValidRecallID %v; want all equal", id, schemaOK, validOK, advisor.ValidRecallID(id))
		}
	}
}

// TestToolDefinitionGolden pins the generated tool definition; run with -update
// after changing Args or the description.
func TestToolDefinitionGolden(t *testing.T) {
	got, err := json.MarshalIndent(ToolDefinition(""), "", "  ")
	if err != nil {
		t.Fatal(err)
	}
	got = append(got, '\n')
	golden := filepath.Join("testdata", "tool_definition.json")
	if *update {
		if err := os.MkdirAll("testdata", 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(golden, got, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(golden)
	if err != nil {
		t.Fatalf("%v (run go test -update to create it)", err)
	}
	if diff := cmp.Diff(string(want), string(got)); diff != "" {
		t.Errorf("tool definition (-%s +generated):\n%s", golden, diff)
	}

	// The shape an Anthropic tool list needs, checked field by field.
	var def struct {
		Name        string `json:"name"`
		InputSchema struct {
			Schema               *string         `json:"$schema"`
			Type                 string          `json:"type"`
			Required             []string        `json:"required"`
			AdditionalProperties *bool           `json:"additionalProperties"`
			Properties           map[string]any  `json:"properties"`
			Defs                 json.RawMessage `json:"$defs"`
		} `json:"input_schema"`
	}
	if err := json.Unmarshal(got, &def); err != nil {
		t.Fatal(err)
	}
	s := def.InputSchema
	if def.Name != "recall" || s.Type != "object" || s.Schema != nil || s.Defs != nil ||
		!cmp.Equal(s.Required, []string{"id"}) || s.AdditionalProperties == nil || *s.AdditionalProperties || len(s.Properties) != 4 {
		t.Errorf("tool definition = %s; want name recall, an object schema of id, lines, grep and context requiring only id, no $schema/$defs, additionalProperties false", got)
	}
	if name := ToolDefinition("mcp__pruneadvisor__recall").Name; name != "mcp__pruneadvisor__recall" {
		t.Errorf("ToolDefinition(name).Name = %q", name)
	}
}

func TestToolSchemaIsACopy(t *testing.T) {
	a := ToolSchema()
	a[0] = 'X'
	if b := ToolSchema(); b[0] != '{' {
		t.Errorf("changing one ToolSchema result changed the next: %q", b[:1])
	}
}
