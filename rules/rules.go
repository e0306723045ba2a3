// Package rules implements docs/DESIGN.md step 3, the deterministic layer of the advisor:
// tool outputs that are dead whatever the agent does next.
//
// Superseded read: a read R of path P at step i is dead once a later successful edit
// or write of P happened at step j > i and the file's current content is again in
// context after j — a later successful read (at a step after j) whose range covers R's
// range (toolcall.Range.Covers), or a successful write whose input holds the whole
// file (toolcall.FileOp.Content). A failed edit (ToolOutput.Failed: an error result,
// "String to replace not found", "Could not find the exact text", a non-zero exit)
// supersedes nothing; a partial read is superseded only by content covering its range;
// a read that came back as an "unchanged since last read" stub (ToolOutput.Unchanged)
// is no content in context and keeps the earlier read alive. A read call that reads
// several files (cat a b) dies when each of its files is superseded.
//
// Duplicate: an output identical to a later output of the same tool (ToolCall.Name)
// with the same arguments (ToolCall.Args as canonical JSON) is dead, the texts
// compared after removing the annotations agents' harnesses add to every result and
// that change from call to call (the Annotations table: Claude Code's
// <system-reminder> block, Codex's Chunk ID / Wall time lines).
//
// Each Death names the later call that decided it. Calls of the same step count as
// simultaneous (parallel tool calls): a read and an edit in one step never supersede
// each other; only within one shell command line is the order of its operations
// known (sed -i … f && cat f).
package rules

import (
	"strings"

	"github.com/pruneadvisor/pruneadvisor/toolcall"
	"github.com/pruneadvisor/pruneadvisor/transcript"
)

// Rule names the rule that killed an output.
type Rule string

// The rules.
const (
	RuleSuperseded Rule = "superseded" // a read made stale by an edit, its content back in context
	RuleDuplicate  Rule = "duplicate"  // byte-identical to a later output of the same call
)

// Death is one rule decision: the output OutputKey is dead.
type Death struct {
	OutputKey string `json:"output"`         // transcript.ToolOutput.Key of the dead output
	Rule      Rule   `json:"rule"`           // which rule
	By        string `json:"by"`             // ID of the later call that superseded or repeated it
	ByOutput  string `json:"by_output"`      // Key of that call's output
	Step      int    `json:"step"`           // step of the By call: the output is dead from this step on
	Path      string `json:"path,omitempty"` // for RuleSuperseded, the file (the last one, for multi-file reads)
}

// Index finds dead outputs incrementally. Add each message once, in session order,
// when it appears; each call to Add costs work proportional to the new message plus
// the live reads of the files it touches (reads are kept per path), never to the
// session's length. It remembers which outputs died, not the decisions: those are
// what Add returns, for the caller to keep (Analyze collects them), so a long
// session's index holds a key per dead output, not a Death. The zero value is not
// usable; call NewIndex.
type Index struct {
	files map[string]*fileState // by normalised path
	dups  map[string]string     // duplicate key -> key of the latest output with it
	dead  map[string]struct{}   // keys of the dead outputs
	seen  map[string]bool       // keys of the outputs indexed
	seq   int                   // calls indexed so far; numbers each call for pos
}

// NewIndex returns an empty index.
func NewIndex() *Index {
	return &Index{
		files: map[string]*fileState{},
		dups:  map[string]string{},
		dead:  map[string]struct{}{},
		seen:  map[string]bool{},
	}
}

// fileState holds the live reads of one file: fresh ones (no successful edit since)
// and stale ones (an edit came after them; they wait for the content to return).
type fileState struct {
	fresh []*target
	stale []*target
}

// target is one file a read output shows.
type target struct {
	cand    *candidate
	rng     toolcall.Range
	at      pos
	staleAt pos // the first successful edit after the read
	done    bool
}

// candidate is a read-only output that the superseded rule may kill.
type candidate struct {
	key  string
	left int // targets not yet superseded
}

// pos orders file operations: by step, and inside one call by operation index.
type pos struct {
	step int
	call int // the call's sequence number in the index (not a pointer: the index must not keep outputs alive)
	op   int
}

// before reports whether p certainly happened before q: an earlier step, or an
// earlier operation of the same call. Calls of one step are simultaneous.
func (p pos) before(q pos) bool {
	return p.step < q.step || p.call == q.call && p.op < q.op
}

// Add indexes the outputs m carries and returns the outputs that died because of
// them, in order (nil when none). An output whose Key was indexed before is skipped,
// so adding a message twice, or a rebuilt copy of the same history, changes
// nothing. Outputs whose call is unknown (orphans) are skipped.
func (x *Index) Add(m *transcript.Message) []Death {
	if m == nil {
		return nil
	}
	var out []Death
	for _, o := range m.Outputs {
		if x.seen[o.Key] {
			continue
		}
		x.seen[o.Key] = true
		out = append(out, x.output(o)...)
	}
	return out
}

// Analyze runs a fresh Index over the whole session and returns every decision, in
// the order the outputs died.
func Analyze(s *transcript.Session) []Death {
	x := NewIndex()
	var all []Death
	for _, m := range s.Messages {
		all = append(all, x.Add(m)...)
	}
	return all
}

// output applies both rules to one tool output and returns the deaths it causes.
func (x *Index) output(o *transcript.ToolOutput) []Death {
	c := o.Call
	if c == nil {
		return nil
	}
	out := x.duplicate(c, o)
	// Superseded: only what really happened counts.
	if o.Failed() || o.Unchanged {
		return out
	}
	return append(out, x.supersede(c, o)...)
}

// duplicate kills the latest earlier output with the same tool, arguments and text
// as o, and makes o the latest.
func (x *Index) duplicate(c *transcript.ToolCall, o *transcript.ToolOutput) []Death {
	var out []Death
	k := dupKey(c, o)
	if prev, ok := x.dups[k]; ok && prev != o.Key {
		if d, ok := x.kill(prev, RuleDuplicate, c, o, ""); ok {
			out = append(out, d)
		}
	}
	x.dups[k] = o.Key
	return out
}

// supersede applies the file ops of o's call (successful, not "unchanged"): reads
// cover earlier reads of their files (and a pure read becomes a candidate itself),
// edits and writes mark the files changed, a write's content covers the whole file.
func (x *Index) supersede(c *transcript.ToolCall, o *transcript.ToolOutput) []Death {
	var out []Death
	ops := c.FileOps()
	reads := 0
	for _, op := range ops {
		if op.Action == toolcall.ActionRead {
			reads++
		}
	}
	var cand *candidate
	if c.Action == toolcall.ActionRead && reads == len(ops) && reads > 0 {
		cand = &candidate{key: o.Key, left: reads}
	}
	// what the output really shows (truncation notes, elisions): a superseding read
	// covers, and a dead read needs covered, only the lines it shows. Only reads need
	// it, and a call of several reads only whether the text was cut: computed once,
	// when a read op needs it (it scans the whole text).
	cut := reads > 1 && !toolcall.VisibleRange(toolcall.Range{}, o.Text).Whole()
	x.seq++
	seq := x.seq
	for i, op := range ops {
		fs := x.file(op.Path)
		at := pos{step: c.Step, call: seq, op: 2 * i}
		switch op.Action {
		case toolcall.ActionRead:
			shown := op.Range
			if reads == 1 {
				shown = toolcall.VisibleRange(op.Range, o.Text)
			} else if cut {
				shown = toolcall.UnknownRange()
			}
			out = append(out, x.cover(fs, shown, at, c, o, op.Path)...)
			if cand != nil {
				fs.fresh = append(fs.fresh, &target{cand: cand, rng: shown, at: at})
			}
		case toolcall.ActionEdit, toolcall.ActionWrite:
			x.edit(fs, at)
			if op.Action == toolcall.ActionWrite {
				// the whole new content is in the call's input, after the edit itself
				out = append(out, x.cover(fs, toolcall.Range{}, pos{step: c.Step, call: seq, op: 2*i + 1}, c, o, op.Path)...)
			}
		}
	}
	return out
}

func (x *Index) file(p string) *fileState {
	fs, ok := x.files[p]
	if !ok {
		fs = &fileState{}
		x.files[strings.Clone(p)] = fs // p may be a piece of a larger text
	}
	return fs
}

// edit marks the fresh reads of a file made before at as stale.
func (x *Index) edit(fs *fileState, at pos) {
	keep := fs.fresh[:0]
	for _, t := range fs.fresh {
		switch {
		case t.done || x.isDead(t.cand.key):
		case t.at.before(at):
			t.staleAt = at
			fs.stale = append(fs.stale, t)
		default:
			keep = append(keep, t)
		}
	}
	clear(fs.fresh[len(keep):])
	fs.fresh = keep
}

// cover supersedes the stale reads of a file that content shown at `at`, covering
// rng, replaces; it returns the outputs that died.
func (x *Index) cover(fs *fileState, rng toolcall.Range, at pos, c *transcript.ToolCall, o *transcript.ToolOutput, path string) []Death {
	var out []Death
	keep := fs.stale[:0]
	for _, t := range fs.stale {
		if t.done || x.isDead(t.cand.key) {
			continue
		}
		if !t.staleAt.before(at) || !rng.Covers(t.rng) {
			keep = append(keep, t)
			continue
		}
		t.done = true
		t.cand.left--
		if t.cand.left == 0 {
			if d, ok := x.kill(t.cand.key, RuleSuperseded, c, o, path); ok {
				out = append(out, d)
			}
		}
	}
	clear(fs.stale[len(keep):])
	fs.stale = keep
	return out
}

func (x *Index) isDead(key string) bool {
	_, ok := x.dead[key]
	return ok
}

// kill records key as dead (once).
func (x *Index) kill(key string, r Rule, by *transcript.ToolCall, o *transcript.ToolOutput, path string) (Death, bool) {
	if x.isDead(key) {
		return Death{}, false
	}
	d := Death{OutputKey: key, Rule: r, By: by.ID, ByOutput: o.Key, Step: by.Step, Path: path}
	x.dead[key] = struct{}{}
	return d, true
}

// dupKey identifies (tool, canonical arguments, output text without the harness
// annotations of the Annotations table).
func dupKey(c *transcript.ToolCall, o *transcript.ToolOutput) string {
	h := o.Hash
	if t := StripAnnotations(o.Text); t != o.Text {
		h = transcript.TextHash(t)
	}
	return c.Name + "\x00" + transcript.TextHash(canonArgs(c.Args)) + "\x00" + h
}
