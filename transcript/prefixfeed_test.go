package transcript

import (
	"bytes"
	"testing"
)

// A feed given a body in pieces measures its common prefix with the memory of the
// conversation's previous body, as Read would; Read then reads as afresh.
func TestPrefixFeed(t *testing.T) {
	prev := bodyHistory(6, func(k int) string { return "out " + string(rune('a'+k)) })
	next := bodyHistory(7, func(k int) string { return "out " + string(rune('a'+k)) })
	want := commonPrefix(prev, next)
	if want < len(prev)/2 {
		t.Fatalf("common prefix %d of %d bytes: the bodies do not share a history", want, len(prev))
	}
	for _, pieces := range []int{1, 2, 7, len(next)} {
		c := NewMessageCache(0)
		if _, err := Read("body", prev, Options{Format: FormatAnthropic, Cache: c}); err != nil {
			t.Fatal(err)
		}
		f := feedBody(c, next, pieces)
		if len(f.cands) != 1 {
			t.Fatalf("%d pieces: %d candidates; want the one memory", pieces, len(f.cands))
		}
		if got := f.cands[0]; got.p != want || !got.done {
			t.Errorf("%d pieces: the feed measured %d bytes (final %v); want %d, final", pieces, got.p, got.done, want)
		}
		memoCheckFed(t, c, next, f)
	}

	// Given the first half alone, the feed's measure is not final: Read compares on
	// from there and takes as many messages from the memory as without a feed.
	c := NewMessageCache(0)
	if _, err := Read("body", prev, Options{Format: FormatAnthropic, Cache: c}); err != nil {
		t.Fatal(err)
	}
	f := c.NewPrefixFeed()
	f.Add(next[:len(next)/2])
	if got := f.cands[0]; got.p != len(next)/2 || got.done {
		t.Errorf("half fed: the feed measured %d bytes (final %v); want %d, not final", got.p, got.done, len(next)/2)
	}
	got, err := Read("body", next, Options{Format: FormatAnthropic, Cache: c, Prefix: f})
	if err != nil {
		t.Fatal(err)
	}
	if w := refReused(t, prev, next); reused(got) != w {
		t.Errorf("half fed: %d messages from the memory; without a feed %d", reused(got), w)
	}
}

// refReused is how many messages a read of next after prev, through a cache of
// its own and without a feed, takes from the memory.
func refReused(t *testing.T, prev, next []byte) int {
	t.Helper()
	c := NewMessageCache(0)
	if _, err := Read("body", prev, Options{Format: FormatAnthropic, Cache: c}); err != nil {
		t.Fatal(err)
	}
	s, err := Read("body", next, Options{Format: FormatAnthropic, Cache: c})
	if err != nil {
		t.Fatal(err)
	}
	return reused(s)
}

// memoCheckFed reads body through c with feed and checks that it reads as afresh.
func memoCheckFed(t *testing.T, c *MessageCache, body []byte, feed *PrefixFeed) {
	t.Helper()
	want, err := Read("body", body, Options{Format: FormatAnthropic})
	if err != nil {
		t.Fatal(err)
	}
	got, err := Read("body", body, Options{Format: FormatAnthropic, Cache: c, Prefix: feed})
	if err != nil {
		t.Fatal(err)
	}
	if d := bodyDiff(want, got); d != "" {
		t.Fatalf("session differs (-fresh +fed):\n%s", d)
	}
	if reused(got) <= 0 {
		t.Errorf("nothing taken from the memory")
	}
}

// A memory that recorded another body after the feed compared it, or that another
// read held meanwhile, is compared whole again: the feed's measure is of bytes the
// memory no longer holds.
func TestPrefixFeedStale(t *testing.T) {
	out := func(k int) string { return "out " + string(rune('a'+k)) }
	prev := bodyHistory(6, out)
	next := bodyHistory(7, out)
	// other is prev with its last result changed: recorded in the memory after the
	// feed compared next, it leaves the memory's bytes different from where the
	// feed measured them.
	other := bytes.Replace(prev, []byte("out f"), []byte("OUT F"), 1)
	if bytes.Equal(other, prev) {
		t.Fatal("no result to change")
	}
	c := NewMessageCache(0)
	if _, err := Read("body", prev, Options{Format: FormatAnthropic, Cache: c}); err != nil {
		t.Fatal(err)
	}
	f := feedBody(c, next, 3)
	if _, err := Read("body", other, Options{Format: FormatAnthropic, Cache: c}); err != nil {
		t.Fatal(err)
	}
	if p, _ := f.known(f.head, f.cands[0].m); p != 0 {
		t.Errorf("the feed still knows %d bytes of a memory that changed", p)
	}
	memoCheckFed(t, c, next, f)

	// Held by another read while fed: not compared by the feed.
	c = NewMessageCache(0)
	if _, err := Read("body", prev, Options{Format: FormatAnthropic, Cache: c}); err != nil {
		t.Fatal(err)
	}
	head, _ := anthropicHead(next)
	m, _ := c.checkoutMemo(head, next, nil)
	f = feedBody(c, next, 3)
	c.returnMemo(m)
	if p, final := f.known(head, m); p != 0 || final {
		t.Errorf("the feed measured %d bytes (final %v) of a memory another read held", p, final)
	}
	memoCheckFed(t, c, next, f)
}

// A feed finds nothing in a body that is not an Anthropic request, in one cut
// before its first message ends, or through no cache.
func TestPrefixFeedNoHead(t *testing.T) {
	body := bodyHistory(3, func(k int) string { return "x" })
	c := NewMessageCache(0)
	if _, err := Read("body", body, Options{Format: FormatAnthropic, Cache: c}); err != nil {
		t.Fatal(err)
	}
	first := bytes.Index(body, []byte(`"messages":[`)) + len(`"messages":[`) + 5
	for name, data := range map[string][]byte{
		"not json":      []byte("not json at all, but long enough to look at"),
		"first message": body[:first],
	} {
		f := c.NewPrefixFeed()
		f.Add(data)
		if f.headOK || len(f.cands) != 0 {
			t.Errorf("%s: head found (%v), %d candidates", name, f.headOK, len(f.cands))
		}
	}
	var none *MessageCache
	none.NewPrefixFeed().Add(body) // nil: does nothing
}
