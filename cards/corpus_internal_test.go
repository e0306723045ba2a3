package cards

import (
	"strings"
	"testing"
	"unsafe"
)

// The corpus keeps no piece of the texts it counts: counting a term it knows must
// not store the new occurrence (a piece of the new text) as the map's key, which
// would keep that whole text alive.
func TestCorpusKeepsNoText(t *testing.T) {
	c := NewCorpus()
	texts := []string{
		strings.Repeat("alpha beta gamma src/get.rs ", 50),
		strings.Repeat("beta gamma delta src/get.rs ", 50),
	}
	for _, text := range texts {
		c.Add(text)
	}
	for term := range c.terms {
		p := uintptr(unsafe.Pointer(unsafe.StringData(term)))
		for i, text := range texts {
			lo := uintptr(unsafe.Pointer(unsafe.StringData(text)))
			if p >= lo && p < lo+uintptr(len(text)) {
				t.Errorf("term %q is a piece of text %d", term, i)
			}
		}
	}
	if c.DF("gamma") != 2 || c.DF("delta") != 1 || c.DF("zeta") != 0 {
		t.Errorf("DF gamma %d, delta %d, zeta %d; want 2, 1, 0", c.DF("gamma"), c.DF("delta"), c.DF("zeta"))
	}
}
