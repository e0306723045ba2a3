package cards

import (
	"fmt"
	"testing"
)

// Every distinct term keeps its own document frequency: 3,000 terms of 5 bytes
// (more than the 2,048 slots of the short-term cache, so many share a slot) and
// 3,000 terms of 15 bytes alike in their first 8, each in a document of its own
// and then all of them again in one more document. The expected counts are
// counted apart: every term is in 2 documents.
func TestEveryTermKeepsItsOwnDocumentFrequency(t *testing.T) {
	c := NewCorpus()
	var terms []string
	for i := range 3000 {
		terms = append(terms, fmt.Sprintf("t%04d", i), fmt.Sprintf("identifier_%04d", i))
	}
	all := ""
	for _, term := range terms {
		c.Add(term)
		all += term + " "
	}
	c.Add(all)
	if c.Docs != 6001 || c.Tokens != 12000 {
		t.Errorf("Docs, Tokens = %d, %d; want 6001, 12000", c.Docs, c.Tokens)
	}
	wrong := 0
	for _, term := range terms {
		if df := c.DF(term); df != 2 {
			if wrong++; wrong <= 5 {
				t.Errorf("DF(%q) = %d; want 2", term, df)
			}
		}
	}
	if wrong > 5 {
		t.Errorf("... and %d more terms with a wrong DF", wrong-5)
	}
	if df := c.DF("t3000"); df != 0 {
		t.Errorf("DF of a term never added = %d; want 0", df)
	}
}
