package server

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/pruneadvisor/pruneadvisor/ledger"
)

// readUsage reads a whole response the way the ledger does: an event stream through
// the scanner in chunks of the given size (0: all at once), else as a document.
func readUsage(f usageFormat, body []byte, stream bool, chunk int) *usageAcc {
	acc := &usageAcc{format: f}
	if !stream {
		acc.document(body)
		return acc
	}
	s := &sseScanner{acc: acc}
	if chunk <= 0 {
		chunk = len(body)
	}
	for len(body) > 0 {
		n := min(chunk, len(body))
		s.write(body[:n])
		body = body[n:]
	}
	s.end()
	return acc
}

type usageWant struct {
	usage  ledger.Usage
	result ledger.Result
	model  string
	note   string
}

func gotUsage(acc *usageAcc, status int) usageWant {
	r, note := acc.result(status)
	u := acc.usage
	if r != ledger.ResultOK {
		u = ledger.Usage{}
	}
	return usageWant{usage: u, result: r, model: acc.model, note: note}
}

// The recorded-shape responses of every API, each number checked by hand against
// its file (testdata/usage): Input is the uncached input, CacheRead the cached part,
// the writes Anthropic's 5-minute and 1-hour cache creation.
func TestUsageFixtures(t *testing.T) {
	tests := []struct {
		file   string
		format usageFormat
		status int
		want   usageWant
	}{
		{"anthropic-message.json", usageAnthropic, 200, usageWant{
			usage:  ledger.Usage{Input: 9, CacheRead: 19099, CacheWrite5m: 616, Output: 6},
			result: ledger.ResultOK, model: "claude-sonnet-4-5-20250929"}},
		// message_start's split (4210 + 2000) kept through message_delta's totals;
		// output from message_delta (412, cumulative), not message_start's 3. The text
		// delta with an escaped "usage" in it is not taken for a usage.
		{"anthropic-stream.sse", usageAnthropic, 200, usageWant{
			usage:  ledger.Usage{Input: 9, CacheRead: 14058, CacheWrite5m: 4210, CacheWrite1h: 2000, Output: 412},
			result: ledger.ResultOK, model: "claude-sonnet-4-5-20250929"}},
		// An older message_delta with output_tokens only: the rest from message_start;
		// no split given, so every write is 5-minute.
		{"anthropic-stream-delta-output-only.sse", usageAnthropic, 200, usageWant{
			usage:  ledger.Usage{Input: 25, CacheWrite5m: 1000, Output: 15},
			result: ledger.ResultOK, model: "claude-3-5-sonnet-20241022"}},
		{"anthropic-stream-error.sse", usageAnthropic, 200, usageWant{
			usage:  ledger.Usage{Input: 12, CacheRead: 30000, Output: 1},
			result: ledger.ResultOK, model: "claude-sonnet-4-5-20250929", note: "error event in the stream: overloaded_error"}},
		{"anthropic-error.json", usageAnthropic, 429, usageWant{
			result: ledger.ResultError, note: "error response: rate_limit_error"}},
		{"chat.json", usageChat, 200, usageWant{
			usage: ledger.Usage{Input: 19, Output: 10}, result: ledger.ResultOK, model: "gpt-4.1-2025-04-14"}},
		// 2006 prompt tokens of which 1920 cached.
		{"chat-stream.sse", usageChat, 200, usageWant{
			usage: ledger.Usage{Input: 86, CacheRead: 1920, Output: 300}, result: ledger.ResultOK, model: "gpt-4o-2024-08-06"}},
		{"chat-stream-no-usage.sse", usageChat, 200, usageWant{
			result: ledger.ResultNone, model: "gpt-4o-2024-08-06", note: "no usage in the response"}},
		{"chat-error.json", usageChat, 429, usageWant{result: ledger.ResultError, note: "error response: tokens"}},
		{"responses.json", usageResponses, 200, usageWant{
			usage: ledger.Usage{Input: 36, Output: 87}, result: ledger.ResultOK, model: "gpt-4.1-2025-04-14"}},
		// 37000 input of which 35840 cached; output 1200 (896 of them reasoning).
		{"responses-stream.sse", usageResponses, 200, usageWant{
			usage: ledger.Usage{Input: 1160, CacheRead: 35840, Output: 1200}, result: ledger.ResultOK, model: "gpt-5-codex"}},
		{"gemini.json", usageGemini, 200, usageWant{
			usage: ledger.Usage{Input: 1200, Output: 40}, result: ledger.ResultOK, model: "gemini-2.5-flash"}},
		// CRLF lines; the last chunk's usageMetadata: 9000 prompt of which 8000
		// cached, 150 candidates + 200 thoughts.
		{"gemini-stream.sse", usageGemini, 200, usageWant{
			usage: ledger.Usage{Input: 1000, CacheRead: 8000, Output: 350}, result: ledger.ResultOK, model: "gemini-2.5-pro"}},
		// streamGenerateContent without alt=sse: a JSON array; the last element counts
		// (500 prompt + 30 tool-use prompt, 20 candidates + 5 thoughts).
		{"gemini-stream-array.json", usageGemini, 200, usageWant{
			usage: ledger.Usage{Input: 530, Output: 25}, result: ledger.ResultOK, model: "gemini-2.5-flash"}},
	}
	for _, tt := range tests {
		t.Run(tt.file, func(t *testing.T) {
			body, err := os.ReadFile(filepath.Join("testdata", "usage", tt.file))
			if err != nil {
				t.Fatal(err)
			}
			stream := strings.HasSuffix(tt.file, ".sse")
			if d := cmp.Diff(tt.want, gotUsage(readUsage(tt.format, body, stream, 0), tt.status), cmp.AllowUnexported(usageWant{})); d != "" {
				t.Errorf("(-want +got):\n%s", d)
			}
			if !stream {
				return
			}
			// The same stream in any cut: byte by byte, and in two pieces at every
			// position, reads the same.
			for _, chunk := range []int{1, 7, 100} {
				if d := cmp.Diff(tt.want, gotUsage(readUsage(tt.format, body, true, chunk), tt.status), cmp.AllowUnexported(usageWant{})); d != "" {
					t.Errorf("in chunks of %d (-want +got):\n%s", chunk, d)
				}
			}
			for i := 1; i < len(body); i++ {
				acc := &usageAcc{format: tt.format}
				s := &sseScanner{acc: acc}
				s.write(body[:i])
				s.write(body[i:])
				s.end()
				if got := gotUsage(acc, tt.status); got != tt.want {
					t.Fatalf("cut at byte %d: %+v; want %+v", i, got, tt.want)
				}
			}
		})
	}
}

// Usages that cannot be read are malformed, naming the field; a missing or null
// usage is no usage.
func TestUsageFaults(t *testing.T) {
	tests := []struct {
		name   string
		format usageFormat
		body   string
		stream bool
		status int
		result ledger.Result
		note   string
	}{
		{"count is a string", usageAnthropic, `{"type":"message","usage":{"input_tokens":"many","output_tokens":3}}`, false, 200,
			ledger.ResultMalformed, `usage.input_tokens: "many" is not a token count`},
		{"negative count", usageChat, `{"usage":{"prompt_tokens":-5,"completion_tokens":3}}`, false, 200,
			ledger.ResultMalformed, `usage.prompt_tokens: -5 is not a token count`},
		{"fractional count", usageResponses, `{"usage":{"input_tokens":10.5,"output_tokens":3}}`, false, 200,
			ledger.ResultMalformed, `usage.input_tokens: 10.5 is not a token count`},
		{"required count missing", usageAnthropic, `{"type":"message","usage":{"input_tokens":10}}`, false, 200,
			ledger.ResultMalformed, `usage.output_tokens is missing`},
		{"cached above the prompt", usageChat, `{"usage":{"prompt_tokens":10,"completion_tokens":1,"prompt_tokens_details":{"cached_tokens":11}}}`, false, 200,
			ledger.ResultMalformed, `usage: 11 cached tokens of a prompt_tokens of 10`},
		{"gemini cached above the prompt", usageGemini, `{"usageMetadata":{"promptTokenCount":10,"cachedContentTokenCount":20}}`, false, 200,
			ledger.ResultMalformed, `usageMetadata: 20 cached tokens of a promptTokenCount of 10`},
		{"usage not an object", usageChat, `{"usage":[1,2]}`, false, 200,
			ledger.ResultMalformed, `usage is [1,2], not an object`},
		{"huge count", usageResponses, `{"usage":{"input_tokens":1e15,"output_tokens":3}}`, false, 200,
			ledger.ResultMalformed, `usage.input_tokens: 1e15 is not a token count`},
		{"malformed delta spoils the stream", usageAnthropic,
			"event: message_start\ndata: {\"type\":\"message_start\",\"message\":{\"usage\":{\"input_tokens\":5,\"output_tokens\":1}}}\n\n" +
				"event: message_delta\ndata: {\"type\":\"message_delta\",\"usage\":{\"output_tokens\":null,\"input_tokens\":true}}\n\n", true, 200,
			ledger.ResultMalformed, `message_delta: usage.input_tokens: true is not a token count`},
		{"null usage", usageChat, `{"id":"x","usage":null}`, false, 200, ledger.ResultNone, "no usage in the response"},
		{"not JSON", usageAnthropic, `<html>502 Bad Gateway</html>`, false, 200, ledger.ResultNone, "response body is not JSON"},
		{"not JSON, error status", usageAnthropic, `<html>502 Bad Gateway</html>`, false, 502, ledger.ResultError, "response body is not JSON"},
		{"stream cut before its usage", usageChat, "data: {\"model\":\"gpt-x\",\"choices\":[{\"delta\":{\"content\":\"Hi\"}}],\"usage\":null}\n\ndata: {\"model\":\"gpt-x\",\"cho", true, 200,
			ledger.ResultNone, "no usage in the response"},
		{"event without its blank line still read", usageResponses,
			"event: response.completed\ndata: {\"type\":\"response.completed\",\"response\":{\"usage\":{\"input_tokens\":4,\"output_tokens\":2}}}", true, 200,
			ledger.ResultOK, ""},
		{"multi-line data joined", usageChat, "data: {\"usage\":\ndata: {\"prompt_tokens\":4,\"completion_tokens\":2}}\n\n", true, 200,
			ledger.ResultOK, ""},
		{"comments and unknown fields ignored", usageChat, ": keep-alive\nid: 7\nretry: 100\ndata: {\"usage\":{\"prompt_tokens\":4,\"completion_tokens\":2}}\n\n", true, 200,
			ledger.ResultOK, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			acc := readUsage(tt.format, []byte(tt.body), tt.stream, 3)
			r, note := acc.result(tt.status)
			if r != tt.result || note != tt.note {
				t.Errorf("result %q, note %q; want %q, %q", r, note, tt.result, tt.note)
			}
		})
	}
}

// An event larger than maxEventBytes is skipped and noted; the scanner goes on.
func TestUsageOversizedEvent(t *testing.T) {
	big := "data: {\"x\":\"" + strings.Repeat("a", maxEventBytes) + "\"}\n\n"
	acc := readUsage(usageChat, []byte(big+"data: {\"usage\":{\"prompt_tokens\":4,\"completion_tokens\":2}}\n\n"), true, 32<<10)
	if got := gotUsage(acc, 200); got.result != ledger.ResultOK || got.usage != (ledger.Usage{Input: 4, Output: 2}) ||
		got.note != "an event over 16777216 bytes was not read" {
		t.Errorf("got %+v; want the usage after the big event, and a note", got)
	}
}

// A stream's last event marks it finished, so a client that leaves after it (the
// OpenAI SDK stops reading at [DONE], before the body's end) is not noted as gone
// before the end; one that leaves before it is.
func TestUsageFinished(t *testing.T) {
	for _, tt := range []struct {
		name   string
		format usageFormat
		stream string
		want   bool
	}{
		{"chat [DONE]", usageChat, "data: {\"usage\":{\"prompt_tokens\":4,\"completion_tokens\":2}}\n\ndata: [DONE]\n\n", true},
		{"chat before [DONE]", usageChat, "data: {\"usage\":{\"prompt_tokens\":4,\"completion_tokens\":2}}\n\n", false},
		{"anthropic message_stop", usageAnthropic, "event: message_delta\ndata: {\"type\":\"message_delta\",\"usage\":{\"output_tokens\":2}}\n\nevent: message_stop\ndata: {\"type\":\"message_stop\"}\n\n", true},
		{"anthropic before message_stop", usageAnthropic, "event: message_delta\ndata: {\"type\":\"message_delta\",\"usage\":{\"output_tokens\":2}}\n\n", false},
		{"responses completed", usageResponses, "event: response.completed\ndata: {\"type\":\"response.completed\",\"response\":{\"usage\":{\"input_tokens\":4,\"output_tokens\":2}}}\n\n", true},
		{"responses before completed", usageResponses, "event: response.output_text.delta\ndata: {\"type\":\"response.output_text.delta\",\"delta\":\"hi\"}\n\n", false},
	} {
		tee := &usageTee{job: &ledgerJob{acc: usageAcc{format: tt.format}}}
		tee.sse = &sseScanner{acc: &tee.job.acc}
		tee.write([]byte(tt.stream))
		tee.sse.end()
		tee.cutByClient()
		if tee.job.acc.finished != tt.want || (tee.job.cut == clientGone) == tt.want {
			t.Errorf("%s: finished %v, cut %q; want finished %v", tt.name, tee.job.acc.finished, tee.job.cut, tt.want)
		}
	}
}
