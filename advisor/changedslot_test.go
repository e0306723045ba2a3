package advisor_test

import (
	"context"
	"testing"

	"github.com/pruneadvisor/pruneadvisor/advisor"
	"github.com/pruneadvisor/pruneadvisor/transcript"
)

// TestChangedSlotNeverStubbed: an output is stubbed only while its slot holds the
// text the advisor indexed (and stores as the original). A library caller that
// edits an old output in place after the advisor indexed it (the advisor indexes
// each message once, when it appears) gets no stub for it: a stub there would stand
// for text the slot no longer holds, and recall would restore text the agent never
// had there. The control, the same session with the slot unchanged, stubs it.
// (Issue 40: with the guard removed from prunesOf the edited slot got a stub.)
func TestChangedSlotNeverStubbed(t *testing.T) {
	for _, changed := range []bool{false, true} {
		c := newChat("Fix the parser.")
		c.read("Reading the parser.", "/app/parse.go", filler("parse.go", 2000))
		c.say("Read it.")
		for i := 0; i < 6; i++ {
			c.read("Reading more.", "/app/more.go", filler("more.go part "+string(rune('a'+i)), 300))
		}
		c.say("Done reading.")
		s := c.session(t, "s.json")
		cfg := advisor.DefaultConfig()
		cfg.RemainingMin = 100_000 // every prune pays at once
		a := newAdvisor(t, cfg, constScorer(0), advisor.NewMemoryStore(), newClock())
		view := *s
		view.Messages = s.Messages[:4] // the task, c1's call and result, "Read it."
		if _, err := a.Advise(context.Background(), &view); err != nil {
			t.Fatal(err)
		}
		var slot *transcript.ToolOutput
		for _, m := range s.Messages {
			for _, o := range m.Outputs {
				if o.Key == "c1" {
					slot = o
				}
			}
		}
		if slot == nil {
			t.Fatal("no output c1")
		}
		if changed {
			slot.Text = "[edited by the caller]\n" + filler("parse.go edited", 1500)
			slot.Hash = transcript.TextHash(slot.Text)
		}
		p, err := a.Advise(context.Background(), s)
		if err != nil {
			t.Fatal(err)
		}
		_, stubbed := p.Stubs["c1"]
		if stubbed == changed {
			t.Errorf("slot changed %v: c1 stubbed %v (%d stubs); want %v", changed, stubbed, len(p.Stubs), !changed)
		}
		if !changed && len(p.Stubs) < 2 {
			t.Errorf("control: %d stubs; want c1 and more", len(p.Stubs))
		}
	}
}
