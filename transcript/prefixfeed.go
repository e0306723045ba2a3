package transcript

// PrefixFeed measures a request body's common prefix with the body memories of its
// conversation (see MessageCache) while the body is still arriving: a proxy reading
// an 844 KB body off a socket calls Add after each read, and the comparison runs
// between reads instead of after the last one. Read, given the feed
// (Options.Prefix), starts each memory's comparison where the feed left it, so the
// session read is the same with or without a feed; only where the work happens
// changes.
//
// A feed is for one body and one goroutine. The zero value and nil do nothing.
type PrefixFeed struct {
	c      *MessageCache
	head   uint64
	headOK bool
	tried  int // len(data) at the last look for the head
	cands  []feedCand
}

// feedCand is one memory of the body's head and how much of it the body repeats.
type feedCand struct {
	m *bodyMemo
	// gen is m.gen when p was measured: a memory that recorded another body since
	// (gen moved) holds other bytes, so p says nothing about it.
	gen uint64
	p   int // the bytes of m.raw known to equal the body's
	// done: p is final, a difference was found there or m.raw ends there.
	done bool
}

// NewPrefixFeed returns a feed for a body read through c; nil (which does nothing)
// when c is nil.
func (c *MessageCache) NewPrefixFeed() *PrefixFeed {
	if c == nil {
		return nil
	}
	return &PrefixFeed{c: c}
}

// Add compares the bytes data adds since the previous call with the memories of
// the body's conversation. data is the body read so far: each call's data must
// begin with the previous call's, unchanged. A memory another read holds is
// skipped (Read compares it whole).
func (f *PrefixFeed) Add(data []byte) {
	if f == nil || f.c == nil {
		return
	}
	if !f.headOK && !f.findHead(data) {
		return
	}
	for i := range f.cands {
		f.cands[i].advance(data)
	}
}

// findHead looks for the body's head (its bytes up to the end of the first
// message) in data and, once found, takes the memories recorded under it as the
// feed's candidates. It looks again only once the body has doubled since the last
// look, so the head is scanned less than twice its length in all, however small
// the reads.
func (f *PrefixFeed) findHead(data []byte) bool {
	if len(data) == 0 || len(data) < 2*f.tried {
		return false
	}
	f.tried = len(data)
	head, ok := anthropicHead(data)
	if !ok {
		return false
	}
	f.head, f.headOK = head, true
	f.c.mu.Lock()
	for _, m := range f.c.memos[head] {
		f.cands = append(f.cands, feedCand{m: m})
	}
	f.c.mu.Unlock()
	return true
}

// advance compares data past c.p with the memory's bytes.
func (c *feedCand) advance(data []byte) {
	if c.done || !c.m.mu.TryLock() {
		return
	}
	defer c.m.mu.Unlock()
	if c.m.gen != c.gen {
		c.gen, c.p = c.m.gen, 0
	}
	raw := c.m.raw
	n := min(len(raw), len(data))
	if c.p >= n {
		c.done = len(raw) <= len(data)
		return
	}
	c.p += commonPrefix(raw[c.p:n], data[c.p:n])
	c.done = c.p < n || len(raw) <= len(data)
}

// known returns how much of m (locked by the caller) the feed found data to
// repeat, and whether that is the whole common prefix; 0 and false when the feed
// has not compared m as it is now.
func (f *PrefixFeed) known(head uint64, m *bodyMemo) (p int, final bool) {
	if f == nil || !f.headOK || f.head != head {
		return 0, false
	}
	for _, c := range f.cands {
		if c.m == m && c.gen == m.gen {
			return c.p, c.done
		}
	}
	return 0, false
}
