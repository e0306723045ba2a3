package transcript

import (
	"bytes"
	"fmt"
	"strings"

	"github.com/tidwall/gjson"
	"github.com/tidwall/sjson"
)

// PrunedPiece is the text Rewrite leaves in a further text block of a pruned
// Messages API tool result that carries a cache_control marker (see Rewrite).
const PrunedPiece = "[pruned]"

// setOpts makes sjson replace an existing value with one copy of the document
// (Optimistic); Rewrite checks first that every path exists. Not ReplaceInPlace: the
// session's raw bytes must stay as read.
var setOpts = &sjson.Options{Optimistic: true}

// Rewrite returns the session's original bytes with the text of each output named in
// stubs (keyed by ToolOutput.Key) replaced by the stub text. The stub goes into the
// first text piece of the result and the other text pieces are emptied, so the result
// slot, its call id, image blocks and cache markers stay where they were; every byte
// outside the replaced values is unchanged. In the Messages API shape (formats
// anthropic and claude-code), where the API rejects empty text blocks ("text content
// blocks must be non-empty"), the other text blocks of the result are removed
// instead, except one carrying a cache_control marker, which keeps its place and the
// marker with the text "[pruned]". It fails for an unknown key, an output the reader
// could not locate, or a located path the bytes do not hold (it never adds a key).
func (s *Session) Rewrite(stubs map[string]string) ([]byte, error) {
	if len(stubs) == 0 {
		return bytes.Clone(s.raw), nil
	}
	byKey := map[string]*ToolOutput{}
	for _, m := range s.Messages {
		for _, o := range m.Outputs {
			byKey[o.Key] = o
		}
	}
	patched := map[int][]byte{}
	for _, k := range sortedKeys(stubs) {
		o, ok := byKey[k]
		if !ok {
			return nil, fmt.Errorf("rewrite %s: no output %q", s.Name, k)
		}
		if o.unit == 0 || len(o.paths) == 0 {
			return nil, fmt.Errorf("rewrite %s: output %q cannot be located in the source", s.Name, k)
		}
		u := o.unit - 1
		b, ok := patched[u]
		if !ok {
			b = s.raw[s.units[u].start:s.units[u].end]
		}
		for _, p := range o.paths {
			if !gjson.GetBytes(b, p).Exists() {
				return nil, fmt.Errorf("rewrite %s: output %q: no value at %s in the source", s.Name, k, p)
			}
		}
		apiShape := s.Format == FormatAnthropic || s.Format == FormatClaudeCode
		// Last piece first: removing a block shifts only the blocks after it.
		for i := len(o.paths) - 1; i >= 0; i-- {
			p := o.paths[i]
			var err error
			switch block, isBlock := strings.CutSuffix(p, ".text"); {
			case i == 0:
				b, err = sjson.SetBytesOptions(b, p, stubs[k], setOpts)
			case !apiShape || !isBlock:
				b, err = sjson.SetBytesOptions(b, p, "", setOpts)
			case gjson.GetBytes(b, block+".cache_control").Exists():
				b, err = sjson.SetBytesOptions(b, p, PrunedPiece, setOpts)
			default:
				b, err = sjson.DeleteBytes(b, block)
			}
			if err != nil {
				return nil, fmt.Errorf("rewrite %s: output %q at %s: %w", s.Name, k, p, err)
			}
		}
		patched[u] = b
	}
	var out bytes.Buffer
	pos := 0
	for i, u := range s.units {
		b, ok := patched[i]
		if !ok {
			continue
		}
		out.Write(s.raw[pos:u.start])
		out.Write(b)
		pos = u.end
	}
	out.Write(s.raw[pos:])
	return out.Bytes(), nil
}

// WithStubs returns a copy of the messages in which each output named in stubs
// (keyed by ToolOutput.Key) has its Text replaced by the stub. Messages without a
// replaced output are shared, not copied.
func (s *Session) WithStubs(msgs []*Message, stubs map[string]string) []*Message {
	out := make([]*Message, len(msgs))
	for i, m := range msgs {
		out[i] = m
		changed := false
		for _, o := range m.Outputs {
			if _, ok := stubs[o.Key]; ok {
				changed = true
				break
			}
		}
		if !changed {
			continue
		}
		cp := *m
		cp.Outputs = make([]*ToolOutput, len(m.Outputs))
		for j, o := range m.Outputs {
			if st, ok := stubs[o.Key]; ok {
				oc := *o
				oc.Text = st
				cp.Outputs[j] = &oc
			} else {
				cp.Outputs[j] = o
			}
		}
		out[i] = &cp
	}
	return out
}
