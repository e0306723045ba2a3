package jsonscan

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// TestSkeletonOf: the skeleton keeps every key in order, small values whole, and
// cuts long strings to valid JSON wherever the cut falls (inside an escape, a
// \uXXXX sequence or a multi-byte rune).
func TestSkeletonOf(t *testing.T) {
	for _, fill := range []string{`\\`, `\"`, `\u00e9`, `é`, `€`, `a\nb`, `x`} {
		for pad := 0; pad < 7; pad++ {
			long := strings.Repeat("p", pad) + strings.Repeat(fill, 3*SkeletonValue/len(fill))
			doc := `{"a":"` + long + `","b":{"c":"` + long + `","d":1},"e":[` +
				strings.Repeat(`"`+long+`",`, 20) + `2],"f":"last"}`
			skel, ok := SkeletonOf([]byte("  " + doc))
			if !ok {
				t.Fatalf("fill %q pad %d: not ok", fill, pad)
			}
			if !json.Valid(skel) {
				t.Fatalf("fill %q pad %d: invalid skeleton %.200s", fill, pad, skel)
			}
			if len(skel) > SkeletonArray+4*SkeletonValue+200 {
				t.Errorf("fill %q pad %d: skeleton of %d bytes", fill, pad, len(skel))
			}
			h := ScanHead(skel)
			if d := cmp.Diff([]string{"a", "b", "e", "f"}, h.Order); d != "" {
				t.Errorf("fill %q pad %d: keys (-want +got):\n%s", fill, pad, d)
			}
			if f, _ := String(h.Vals["f"]); f != "last" {
				t.Errorf("fill %q pad %d: f = %q", fill, pad, f)
			}
			var b struct{ D int }
			if err := json.Unmarshal(h.Vals["b"], &b); err != nil || b.D != 1 {
				t.Errorf("fill %q pad %d: b = %s (%v)", fill, pad, h.Vals["b"], err)
			}
		}
	}
}

// TestSkeletonOfLines: a JSONL file gives one condensed line per value, up to
// SkeletonLines; input that is no object or array, or that breaks, gives none.
func TestSkeletonOfLines(t *testing.T) {
	line := `{"type":"user","text":"` + strings.Repeat("z", 3*SkeletonValue) + `","uuid":"u"}`
	skel, ok := SkeletonOf([]byte(strings.Repeat(line+"\n", 12)))
	if !ok || strings.Count(string(skel), "\n") != SkeletonLines-1 || !strings.HasSuffix(string(skel), `"uuid":"u"}`) {
		t.Errorf("JSONL skeleton: ok %v, %d lines", ok, strings.Count(string(skel), "\n")+1)
	}
	for _, bad := range []string{``, `"just a string"`, `{"a":`, `{"a" 1}`, `12`} {
		if skel, ok := SkeletonOf([]byte(bad)); ok {
			t.Errorf("SkeletonOf(%q) = %q, ok", bad, skel)
		}
	}
}
