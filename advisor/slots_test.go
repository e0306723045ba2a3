package advisor_test

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/pruneadvisor/pruneadvisor/advisor"
	"github.com/pruneadvisor/pruneadvisor/cards"
	"github.com/pruneadvisor/pruneadvisor/recall"
	"github.com/pruneadvisor/pruneadvisor/tokencount"
	"github.com/pruneadvisor/pruneadvisor/transcript"
)

// Three parallel calls in one assistant message, one of them pruned (a read of b.go
// superseded by an edit and a re-read): all three results are still there, in order,
// with their ids — in the returned messages and in the rewritten file re-read.
func TestParallelCallsKeepTheirSlots(t *testing.T) {
	c := newChat("Fix b.go")
	a, b, cc := filler("a.go", 300), filler("b.go old", 300), filler("c.go", 300)
	c.turn("Reading the three files.", []tc{
		{"Read", `{"file_path":"/p/a.go"}`}, {"Read", `{"file_path":"/p/b.go"}`}, {"Read", `{"file_path":"/p/c.go"}`},
	}, a, b, cc)
	c.call("Fixing b.", "Edit", `{"file_path":"/p/b.go","old_string":"x","new_string":"y"}`, "The file /p/b.go has been updated.")
	c.read("", "/p/b.go", filler("b.go new", 300))
	for i := 0; i < 3; i++ {
		c.call("", "Bash", fmt.Sprintf(`{"command":"echo %d"}`, i), fmt.Sprint(i))
	}
	s := c.session(t, "parallel.json")
	cfg := advisor.DefaultConfig()
	cfg.RemainingMin = 100_000 // every pending prune pays for itself at once
	steps := simulate(t, newAdvisor(t, cfg, nil, advisor.NewMemoryStore(), newClock()), s)
	last := steps[len(steps)-1]
	it := item(t, last.plan, "c2")
	if it.Decision != advisor.DecisionPruned || it.By != "c5" {
		t.Fatalf("c2 is %s by %q, want pruned, superseded by c5", it.Decision, it.By)
	}
	for _, k := range []string{"c1", "c3"} {
		if d := item(t, last.plan, k).Decision; d == advisor.DecisionPruned {
			t.Fatalf("%s pruned", k)
		}
	}
	type slot struct{ Role, CallID, Text string }
	want := []slot{{"tool", "c1", a}, {"tool", "c2", it.Stub}, {"tool", "c3", cc}}
	var got []slot
	for _, m := range last.out[2:5] {
		for _, o := range m.Outputs {
			got = append(got, slot{string(m.Role), o.CallID, o.Text})
		}
	}
	if d := cmp.Diff(want, got); d != "" {
		t.Errorf("returned messages 2..4 (-want +got):\n%s", d)
	}
	if n := len(last.out[1].Calls); n != 3 {
		t.Errorf("assistant message has %d calls, want 3", n)
	}

	data, err := s.Rewrite(map[string]string{"c2": it.Stub})
	if err != nil {
		t.Fatal(err)
	}
	// The raw JSON: messages 2..4 are the three tool messages, in order.
	var raw []struct {
		Role       string `json:"role"`
		ToolCallID string `json:"tool_call_id"`
		Content    string `json:"content"`
	}
	if err := json.Unmarshal(data, &raw); err != nil {
		t.Fatal(err)
	}
	var gotRaw []slot
	for _, m := range raw[2:5] {
		gotRaw = append(gotRaw, slot{m.Role, m.ToolCallID, m.Content})
	}
	if d := cmp.Diff(want, gotRaw); d != "" {
		t.Errorf("rewritten JSON messages 2..4 (-want +got):\n%s", d)
	}
	re, err := transcript.Read("parallel.json", data, transcript.Options{Format: s.Format})
	if err != nil {
		t.Fatalf("re-reading the rewritten session: %v", err)
	}
	if len(re.Calls) != len(s.Calls) || len(re.Outputs()) != len(s.Outputs()) || len(re.Unanswered()) != 0 {
		t.Errorf("re-read: %d calls, %d outputs, %d unanswered; want %d, %d, 0",
			len(re.Calls), len(re.Outputs()), len(re.Unanswered()), len(s.Calls), len(s.Outputs()))
	}
	var reSlots []slot
	for _, m := range re.Messages[2:5] {
		for _, o := range m.Outputs {
			reSlots = append(reSlots, slot{string(m.Role), o.CallID, o.Text})
		}
	}
	if d := cmp.Diff(want, reSlots); d != "" {
		t.Errorf("re-read messages 2..4 (-want +got):\n%s", d)
	}
}

// An assistant turn with a signed thinking block and a tool call whose result is
// pruned: Session.Rewrite changes only the result's text; the thinking block is
// byte-identical (Anthropic request body format).
func TestThinkingBlockUntouched(t *testing.T) {
	result := filler("a.go source", 400)
	resJSON, _ := json.Marshal(result)
	thinking := `{"type":"thinking","thinking":"The bug is probably in a.go; read it first.","signature":"EqQBCkYIBxgCKkDsigXyZ+/0a1b2c3d4e5f6=="}`
	var b strings.Builder
	b.WriteString(`{"model":"claude-sonnet-4-5","max_tokens":1024,"messages":[`)
	b.WriteString(`{"role":"user","content":"Fix the bug in /w/a.go"},`)
	b.WriteString(`{"role":"assistant","content":[` + thinking + `,{"type":"text","text":"Reading a.go."},{"type":"tool_use","id":"toolu_1","name":"Read","input":{"file_path":"/w/a.go"}}]},`)
	b.WriteString(`{"role":"user","content":[{"type":"tool_result","tool_use_id":"toolu_1","content":` + string(resJSON) + `}]}`)
	for i := 2; i <= 5; i++ {
		fmt.Fprintf(&b, `,{"role":"assistant","content":[{"type":"tool_use","id":"toolu_%d","name":"Bash","input":{"command":"echo %d"}}]}`, i, i)
		fmt.Fprintf(&b, `,{"role":"user","content":[{"type":"tool_result","tool_use_id":"toolu_%d","content":"%d"}]}`, i, i)
	}
	b.WriteString(`]}`)
	raw := []byte(b.String())
	s, err := transcript.Read("thinking.json", raw, transcript.Options{Format: transcript.FormatAnthropic})
	if err != nil {
		t.Fatal(err)
	}
	cfg := advisor.DefaultConfig()
	cfg.RemainingMin = 100_000 // every pending prune pays for itself at once
	steps := simulate(t, newAdvisor(t, cfg, constScorer(0), advisor.NewMemoryStore(), newClock()), s)
	it := item(t, steps[len(steps)-1].plan, "toolu_1")
	if it.Decision != advisor.DecisionPruned {
		t.Fatalf("toolu_1 is %s, want pruned", it.Decision)
	}
	got, err := s.Rewrite(map[string]string{"toolu_1": it.Stub})
	if err != nil {
		t.Fatal(err)
	}
	stubJSON, _ := json.Marshal(it.Stub)
	want := strings.Replace(string(raw), string(resJSON), string(stubJSON), 1)
	if string(got) != want {
		t.Errorf("rewritten body differs from the original with only the result replaced:\n got %s\nwant %s", got, want)
	}
	if !strings.Contains(string(got), thinking) {
		t.Errorf("the thinking block is not byte-identical in the rewritten body")
	}
	if _, err := transcript.Read("thinking.json", got, transcript.Options{Format: transcript.FormatAnthropic}); err != nil {
		t.Errorf("re-reading the rewritten body: %v", err)
	}
}

// A 30 KB JSON output whose needed record sits in the middle: the card shows its
// head and tail (not the middle), the stub names the recall id, and recall returns
// the whole output.
func TestLargeJSONOutputRecall(t *testing.T) {
	var b strings.Builder
	b.WriteString("[")
	for i := 0; i < 300; i++ {
		if i > 0 {
			b.WriteString(",\n")
		}
		name := fmt.Sprintf("customer-%04d", i)
		if i == 150 {
			name = "needle-4242"
		}
		fmt.Fprintf(&b, `{"id":%d,"name":%q,"plan":"standard","balance_cents":%d,"region":"eu-west-%d"}`, i, name, i*1037%99991, i%3)
	}
	b.WriteString("]")
	big := b.String()
	if len(big) < 28_000 || len(big) > 32_000 {
		t.Fatalf("output is %d bytes, want about 30 KB", len(big))
	}
	mid := strings.Index(big, "needle-4242")
	c := newChat("Find the customer with the wrong balance")
	c.call("Fetching the records.", "Bash", `{"command":"curl -s localhost:8080/api/customers"}`, big)
	for i := 0; i < 4; i++ {
		c.call("", "Bash", fmt.Sprintf(`{"command":"echo %d"}`, i), fmt.Sprint(i))
	}
	s := c.session(t, "bigjson.json")
	cfg := advisor.DefaultConfig()
	cfg.RemainingMin = 100_000 // every pending prune pays for itself at once
	cfg.SizeExponent = 0       // the stub's reason names the cutoff itself
	store := advisor.NewMemoryStore()
	sc := constScorer(0)
	steps := simulate(t, newAdvisor(t, cfg, sc, store, newClock()), s)

	var card *cards.Card
	for _, bt := range sc.batches {
		for i := range bt.Cards {
			if bt.Cards[i].ID == "c1" {
				card = &bt.Cards[i]
			}
		}
	}
	if card == nil {
		t.Fatal("c1 was never asked")
	}
	// ASCII text: characters are bytes.
	if card.Head != big[:300] || card.Tail != big[len(big)-100:] || card.Chars != len(big) || card.Age != 4 {
		t.Errorf("card head %d bytes, tail %d bytes, chars %d, age %d; want the first 300, the last 100, %d, 4",
			len(card.Head), len(card.Tail), card.Chars, card.Age, len(big))
	}
	if strings.Contains(card.Text("c1"), "needle-4242") || mid < 1000 || mid > len(big)-1000 {
		t.Errorf("the needed record (at byte %d) is in the card", mid)
	}
	it := item(t, steps[len(steps)-1].plan, "c1")
	// python3: d = sha256(b"bigjson.json\x00c1").digest(); "o_%012d" % (int.from_bytes(d[:8], "big") % 10**12)
	const id = "o_011772712473"
	head := fmt.Sprintf(`[pruned: Bash curl -s localhost:8080/api/customers, %s tokens, score 0.00; it named `,
		commas(tokencount.Count(big)))
	tail := fmt.Sprintf(`; recall("%s") restores it]`, id)
	// The digest (issue 39) holds the most specific names per token, in order of
	// first appearance on ties: the rare plain word "region" (1 of 1 token),
	// then the shaped names of the first records (2 of 3 or 4), each a
	// whole name costing its o200k tokens with the space before it, within the
	// digest budget. The needle, one of 300 names of the same shape and cost,
	// comes too late for it: recall gets it back.
	names := strings.TrimSuffix(strings.TrimPrefix(it.Stub, head), tail)
	wantNames := []string{"region", "balance_cents", "customer-0000", "eu-west-0", "customer-0001", "eu-west-1", "customer-0002", "eu-west-2"}
	if it.Decision != advisor.DecisionPruned || it.RecallID != id || !strings.HasPrefix(it.Stub, head) ||
		!strings.HasSuffix(it.Stub, tail) || !strings.HasPrefix(names, strings.Join(wantNames, " ")+" ") || strings.Contains(names, "needle-4242") {
		t.Fatalf("c1: %s, id %s, stub %q; want pruned, %s, %q%s …%q without the needle", it.Decision, it.RecallID, it.Stub, id, head, strings.Join(wantNames, " "), tail)
	}
	cost := 0
	for _, n := range strings.Split(names, " ") {
		cost += tokencount.Count(" " + n)
	}
	if cost > cfg.DigestTokens || cost+tokencount.Count(" customer-0028") <= cfg.DigestTokens {
		t.Errorf("the digest's names cost %d tokens; want the most that fit in %d", cost, cfg.DigestTokens)
	}
	got, err := recall.New(store).Recall(context.Background(), id)
	if err != nil {
		t.Fatal(err)
	}
	if got != big {
		t.Errorf("recall returned %d bytes, want the %d-byte original", len(got), len(big))
	}
}
