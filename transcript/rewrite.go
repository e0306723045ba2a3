package transcript

import (
	"bytes"
	"fmt"

	"github.com/tidwall/sjson"
)

// Rewrite returns the session's original bytes with the text of each output named in
// stubs (keyed by ToolOutput.Key) replaced by the stub text. The stub goes into the
// first text piece of the result and the other text pieces are emptied, so the result
// slot, its call id, image blocks and cache markers stay where they were; every byte
// outside the replaced values is unchanged. It fails for an unknown key or an output
// the reader could not locate.
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
		for i, p := range o.paths {
			v := ""
			if i == 0 {
				v = stubs[k]
			}
			nb, err := sjson.SetBytes(bytes.Clone(b), p, v)
			if err != nil {
				return nil, fmt.Errorf("rewrite %s: output %q at %s: %w", s.Name, k, p, err)
			}
			b = nb
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
