package transcript

import "unsafe"

// A conversation's next request body repeats the previous one's messages byte for
// byte, so the session read from it is the previous session with a turn added. The
// body memory (bodymemo.go) already finds those messages without scanning them,
// but each read still copied every one from its cached template and linked the
// copies again (numbering, call registration, pairing): some 180 messages and
// their calls and outputs for each request of a 200,000-token conversation. A
// caller that is done with a session can give it back (Session.Recycle): its
// conversation's memory then keeps it, and the next read of that conversation
// takes its messages as they are, linked, instead of copying and linking them.
//
// Why the result is the session a fresh read gives: messages [0, k) of the new body
// are byte-identical to the previous body's, at the same offsets (the memory's
// common prefix, scanFromMemo), and everything outside the messages array is
// identical too (scanFromMemo checks it). Decoding a message depends only on its
// bytes; linking message i depends only on messages [0, i) and on i. So the
// recycled session's messages [0, k), their calls and outputs, and the builder's
// state after them are what a fresh read computes, except for what later messages
// changed: a call of [0, k) answered in message k or later was paired with that
// output. resume undoes the later messages' linking (the exact inverse of link, in
// reverse order) to get the state after message k-1, and the read goes on from
// message k as usual, pairing such calls with the new body's outputs.

// linkMark is the builder's state before one message of a request body was taken:
// what resume cuts the recycled session back to.
type linkMark struct {
	calls, orphans, warnings int // len of Session.Calls, Orphans, Warnings
	step                     int // builder.step
	task                     string
}

// carry is what a session read from a request body keeps for Recycle: the
// builder's maps after its last message, and a mark before each message of the
// body's messages array (one more after the last).
type carry struct {
	pending map[string][]*ToolCall
	seenIDs map[string]int
	outKeys map[string]int
	marks   []linkMark
	// sysN is how many of the session's messages come before the array's (1 when
	// the system value has text, else 0).
	sysN int
}

// recycled is a session given back with Recycle, held by its conversation's body
// memory until the next read of that conversation takes it.
type recycled struct {
	s    *Session
	cr   *carry
	gen  uint64 // the memory's update that recorded s's body (memoRef.gen)
	size int64  // what it holds, for the memory's bound (recycledBytes)
}

// Recycle gives the session back to the MessageCache it was read with: the next
// read of the same conversation (the next request body, sharing this one's
// messages) takes its messages, calls and outputs as they are instead of copying
// them from the cache and linking them again. The caller must not use s, or
// anything reached from it (messages, calls, outputs), after Recycle: a later read
// links those values into its own session, and changes some of them (a call whose
// output came in a message the next body changed is paired anew). Rewrite and
// RewriteParts fail with ErrReleased afterwards; the parts RewriteParts returned
// before stay valid. A session read without a cache, or not from an Anthropic
// request body, or whose conversation has had a later body since, is simply
// dropped. Safe to call more than once.
func (s *Session) Recycle() {
	ref, cr := s.memo, s.carry
	s.raw, s.units, s.released, s.memo, s.carry = nil, nil, true, nil, nil
	if ref == nil || cr == nil || s.cache == nil || !ref.m.mu.TryLock() {
		return
	}
	m := ref.m
	if m.gen != ref.gen {
		m.mu.Unlock()
		return
	}
	m.recycled = &recycled{s: s, cr: cr, gen: ref.gen, size: recycledBytes(s, cr)}
	s.cache.returnMemo(m)
}

// takeRecycled returns the session recycled into sc's memory (locked) with its
// carry when it is the one whose body the memory holds and sc's scan came from
// that memory; it forgets it either way, as the memory is about to record the new
// body.
func takeRecycled(sc *bodyScan) (*Session, *carry) {
	m := sc.memo
	if m == nil || m.recycled == nil {
		return nil, nil
	}
	r := m.recycled
	m.recycled = nil
	if !sc.scanned || r.gen != m.gen || sc.kept >= len(r.cr.marks) || len(r.s.Messages) != r.cr.sysN+len(r.cr.marks)-1 {
		return nil, nil
	}
	return r.s, r.cr
}

// resume starts b (fresh) from the recycled session r with its carry cr: its first
// sysN+k messages (the system message and the array's first k), with the builder
// state as it was before array message k. False, with b untouched, when r's
// links do not undo as recorded (r is then of no further use).
func (b *builder) resume(r *Session, cr *carry, k int) bool {
	n := cr.sysN + k
	for j := len(r.Messages) - 1; j >= n; j-- {
		if !cr.unlink(r.Messages[j]) {
			return false
		}
	}
	mk := cr.marks[k]
	s := b.s
	s.Messages = r.Messages[:n]
	s.Calls = r.Calls[:mk.calls]
	s.Orphans = r.Orphans[:mk.orphans]
	s.Warnings = r.Warnings[:mk.warnings]
	s.Task = mk.task
	b.step, b.sysN = mk.step, cr.sysN
	b.pending, b.seenIDs, b.outKeys = cr.pending, cr.seenIDs, cr.outKeys
	b.marks = cr.marks[:k]
	return true
}

// unlink undoes link(m) on the builder maps of cr: its outputs in reverse (each
// paired call goes back to the front of its id's queue, unanswered), then its
// calls in reverse (each leaves the back of its queue, where link put it); false
// when a call is not where link put it.
func (cr *carry) unlink(m *Message) bool {
	for i := len(m.Outputs) - 1; i >= 0; i-- {
		o := m.Outputs[i]
		decr(cr.outKeys, o.CallID)
		if c := o.Call; c != nil {
			cr.pending[o.CallID] = append([]*ToolCall{c}, cr.pending[o.CallID]...)
			c.Output = nil
		}
	}
	for i := len(m.Calls) - 1; i >= 0; i-- {
		c := m.Calls[i]
		decr(cr.seenIDs, c.ID)
		q := cr.pending[c.ID]
		if len(q) == 0 || q[len(q)-1] != c {
			return false
		}
		if len(q) == 1 {
			delete(cr.pending, c.ID)
		} else {
			cr.pending[c.ID] = q[:len(q)-1]
		}
	}
	return true
}

// decr takes one from counts[k], deleting it at zero.
func decr(counts map[string]int, k string) {
	if counts[k]--; counts[k] <= 0 {
		delete(counts, k)
	}
}

// mark records the builder's state before the next message of a request body's
// messages array (see carry).
func (b *builder) mark() {
	s := b.s
	b.marks = append(b.marks, linkMark{calls: len(s.Calls), orphans: len(s.Orphans), warnings: len(s.Warnings), step: b.step, task: s.Task})
}

// recycledBytes is what a recycled session holds, for its memory's bound: its
// messages as the cache counts a template's (messageBytes), their slots in the
// session's slices, and the carry's marks and map entries (mapEntryBytes each).
// Most texts are shared with the cache's templates and counted there as well: an
// upper bound.
func recycledBytes(s *Session, cr *carry) int64 {
	ptr := int64(unsafe.Sizeof(uintptr(0)))
	n := int64(len(s.Task)) + int64(len(s.Messages)+len(s.Calls)+len(s.Orphans))*ptr + stringsBytes(s.Warnings)
	for _, m := range s.Messages {
		n += messageBytes(m)
	}
	return n + int64(cap(cr.marks))*int64(unsafe.Sizeof(linkMark{})) + int64(len(cr.pending)+len(cr.seenIDs)+len(cr.outKeys))*mapEntryBytes
}

// mapEntryBytes is what one entry of the carry's maps is counted as: its string
// key's header (16 bytes), a value of at most a slice header (24) and the slot's
// control byte and padding in Go's swiss-table maps, rounded up to 64 (an
// estimate; the keys' bytes are the calls' ids, counted with the calls).
const mapEntryBytes = 64
