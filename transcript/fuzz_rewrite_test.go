package transcript

import (
	"bytes"
	"encoding/json"
	"errors"
	"os"
	"sort"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/tidwall/gjson"
)

// FuzzRewrite checks Rewrite's byte-faithfulness on request bodies (formats
// anthropic and openai, what the proxy rewrites): for any body that reads, stubbing
// any subset of the locatable outputs (chosen by mask) must
//   - leave every byte outside the stubbed results identical: the output is the
//     input with each stubbed result's region (its text value, or the content array
//     holding its text pieces) replaced by one JSON value;
//   - re-read to the same structure: the same messages, roles, calls and output
//     keys, the stubbed outputs' text starting with their stub and every other
//     output's text unchanged.
func FuzzRewrite(f *testing.F) {
	for _, p := range []string{
		docOwn("openai/chat-completions.json"),
		docOwn("bad/anthropic-healthy.json"),
		docOwn("bad/anthropic-unknown-blocks.json"),
		docOwn("bad/anthropic-result-without-call.json"),
		docOwn("bad/openai-healthy.json"),
		docOwn("bad/openai-lone-surrogate.json"),
		docOwn("bad/openai-duplicate-keys.json"),
	} {
		data, err := os.ReadFile(p)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(data, uint64(0xffffffffffffffff), "[pruned: Bash ls, 1,020 tokens, score 0.08; recall(\"o_7f3a9c0b1d\") restores it]")
	}
	f.Add([]byte(`{"model":"m","messages":[{"role":"user","content":"x"},{"role":"assistant","content":[{"type":"tool_use","id":"t1","name":"Read","input":{}}]},`+
		`{"role":"user","content":[{"type":"tool_result","tool_use_id":"t1","content":[{"type":"text","text":"a"},{"type":"text","text":"b","cache_control":{"type":"ephemeral"}},{"type":"text","text":"c"}]}]}]}`),
		uint64(1), "S")
	f.Add([]byte(`{"messages":[{"role":"assistant","tool_calls":[{"id":"c","type":"function","function":{"name":"f","arguments":"{}"}}]},`+
		`{"role":"tool","tool_call_id":"c","content":[{"type":"text","text":"p1"},{"type":"text","text":"p2"}]}]}`), uint64(1), "")
	f.Add([]byte(codexBody), uint64(5), "S")
	f.Add([]byte(geminiBody), uint64(0xff), "S")
	f.Fuzz(func(t *testing.T, data []byte, mask uint64, stub string) {
		if !utf8.ValidString(stub) {
			stub = strings.ToValidUTF8(stub, "?")
		}
		for _, format := range []Format{FormatAnthropic, FormatOpenAI, FormatResponses, FormatGeminiAPI} {
			for _, lenient := range []bool{false, true} {
				s, err := Read("fuzz", data, Options{Format: format, Lenient: lenient})
				if err != nil {
					if !errors.Is(err, ErrMalformed) && !errors.Is(err, ErrEmpty) {
						t.Fatalf("%s lenient=%v: error is neither ErrMalformed nor ErrEmpty: %v", format, lenient, err)
					}
					continue
				}
				checkRewrite(t, s, format, lenient, mask, stub)
			}
		}
	})
}

// checkRewrite stubs the outputs mask selects (bit i for the i-th locatable output,
// repeating every 64) and checks the two properties of FuzzRewrite.
func checkRewrite(t *testing.T, s *Session, format Format, lenient bool, mask uint64, stub string) {
	t.Helper()
	stubs := map[string]string{}
	i := 0
	for _, o := range s.Outputs() {
		if o.unit == 0 || len(o.paths) == 0 {
			continue
		}
		if mask&(1<<(i%64)) != 0 {
			stubs[o.Key] = stub + "#" + o.Key
		}
		i++
	}
	out, err := s.Rewrite(stubs)
	if err != nil {
		t.Fatalf("%s lenient=%v: Rewrite: %v", format, lenient, err)
	}
	if len(stubs) == 0 {
		if !bytes.Equal(out, s.raw) {
			t.Fatalf("Rewrite with no stubs changed the bytes")
		}
		return
	}

	// Byte-faithfulness: the regions of the stubbed results, in the input.
	type region struct{ start, end int }
	var regions []region
	for _, o := range s.Outputs() {
		if _, ok := stubs[o.Key]; !ok {
			continue
		}
		u := s.units[o.unit-1]
		ub := s.raw[u.start:u.end]
		p := commonPath(o.paths)
		r := gjson.GetBytes(ub, p)
		if !r.Exists() || r.Index+len(r.Raw) > len(ub) || !bytes.Equal(ub[r.Index:r.Index+len(r.Raw)], []byte(r.Raw)) {
			t.Fatalf("output %q: its region %q is not where the reader said (unit %d..%d)", o.Key, p, u.start, u.end)
		}
		regions = append(regions, region{u.start + r.Index, u.start + r.Index + len(r.Raw)})
	}
	sort.Slice(regions, func(a, b int) bool { return regions[a].start < regions[b].start })
	merged := regions[:1]
	for _, r := range regions[1:] {
		last := &merged[len(merged)-1]
		if r.start < last.end {
			last.end = max(last.end, r.end)
			continue
		}
		merged = append(merged, r)
	}
	pos, prev := 0, 0
	for _, r := range merged {
		keep := s.raw[prev:r.start]
		if !bytes.HasPrefix(out[pos:], keep) {
			t.Fatalf("%s: bytes %d..%d outside the stubbed results changed:\nin:  %q\nout: %q", format, prev, r.start,
				fzClip(keep), fzClip(out[pos:min(len(out), pos+len(keep))]))
		}
		pos += len(keep)
		dec := json.NewDecoder(bytes.NewReader(out[pos:]))
		var v json.RawMessage
		if err := dec.Decode(&v); err != nil || !bytes.HasPrefix(out[pos:], v) {
			t.Fatalf("%s: no JSON value where the result at %d..%d was: %v", format, r.start, r.end, err)
		}
		pos += int(dec.InputOffset())
		prev = r.end
	}
	if !bytes.Equal(out[pos:], s.raw[prev:]) {
		t.Fatalf("%s: bytes after the last stubbed result changed:\nin:  %q\nout: %q", format, fzClip(s.raw[prev:]), fzClip(out[pos:]))
	}

	// Structure: the rewritten body reads back the same, stubs in place.
	s2, err := Read("fuzz", out, Options{Format: format, Lenient: lenient})
	if err != nil {
		t.Fatalf("%s lenient=%v: re-read after rewrite: %v", format, lenient, err)
	}
	if len(s2.Messages) != len(s.Messages) || len(s2.Calls) != len(s.Calls) {
		t.Fatalf("%s: %d messages, %d calls became %d, %d", format, len(s.Messages), len(s.Calls), len(s2.Messages), len(s2.Calls))
	}
	for mi, m := range s.Messages {
		m2 := s2.Messages[mi]
		if m2.Role != m.Role || m2.Text != m.Text || len(m2.Calls) != len(m.Calls) || len(m2.Outputs) != len(m.Outputs) {
			t.Fatalf("%s: message %d changed: %s %q %d calls %d outputs -> %s %q %d %d", format, mi,
				m.Role, fzClip([]byte(m.Text)), len(m.Calls), len(m.Outputs), m2.Role, fzClip([]byte(m2.Text)), len(m2.Calls), len(m2.Outputs))
		}
		for ci, c := range m.Calls {
			if c2 := m2.Calls[ci]; c2.ID != c.ID || c2.Name != c.Name || !bytes.Equal(c2.Args, c.Args) {
				t.Fatalf("%s: call %q of message %d changed", format, c.ID, mi)
			}
		}
		for oi, o := range m.Outputs {
			o2 := m2.Outputs[oi]
			if o2.Key != o.Key || o2.HasImage != o.HasImage {
				t.Fatalf("%s: output %q of message %d became %q", format, o.Key, mi, o2.Key)
			}
			if st, ok := stubs[o.Key]; ok {
				if !strings.HasPrefix(o2.Text, st) {
					t.Fatalf("%s: stubbed output %q reads back as %q; want it to start with %q", format, o.Key, fzClip([]byte(o2.Text)), st)
				}
			} else if o2.Text != o.Text {
				t.Fatalf("%s: output %q was not stubbed but its text changed: %q -> %q", format, o.Key, fzClip([]byte(o.Text)), fzClip([]byte(o2.Text)))
			}
		}
	}
}

// commonPath is the longest common prefix, in path segments, of gjson paths: the
// value holding every text piece of one result.
func commonPath(paths []string) string {
	common := splitPath(paths[0])
	for _, p := range paths[1:] {
		seg := splitPath(p)
		n := 0
		for n < len(common) && n < len(seg) && common[n] == seg[n] {
			n++
		}
		common = common[:n]
	}
	return strings.Join(common, ".")
}

// splitPath splits a gjson path at its unescaped dots.
func splitPath(p string) []string {
	var out []string
	start := 0
	for i := 0; i < len(p); i++ {
		switch p[i] {
		case '\\':
			i++
		case '.':
			out = append(out, p[start:i])
			start = i + 1
		}
	}
	return append(out, p[start:])
}

// fzClip shortens b for a failure message.
func fzClip(b []byte) []byte {
	if len(b) > 200 {
		return append(bytes.Clone(b[:200]), "…"...)
	}
	return b
}
