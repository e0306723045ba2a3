// Package evidence is the one definition of later use (docs/DESIGN.md "Replay and
// later-use evidence"), with two uses: replay records, for every output, the steps at
// which the agent used it over the whole session (the labels calibration and fitting
// learn from), and the advisor runs the same Tracker live, as messages arrive, to give
// every card its use history (the steps so far at which the agent used the output).
// A Tracker processes each message once, when it is added; at any moment its answers
// depend only on the messages added so far.
//
// An output O was used at step u when the agent's own words at u (its assistant
// Text or its tool-call Args) hold a name (see Names) for which every clause holds:
//
//   - Specific. By shape: a digit or one of `_ . / \ : - @ # =` (names have at
//     least MinNameLen characters), or a quoted phrase of several words; or a plain
//     word (letters only, any case: Plain) that agents rarely write anyway: one the
//     Tracker's Background does not report Common (written by the agent in under
//     DefaultMinShare of a background set of sessions; the statistics ship in the
//     fitted model file, made by `fit` from the sessions it fits on). Letters-only
//     names with inner capitals are plain words here too: "GitHub" and
//     "JavaScript" are written in many sessions, a rare "BetterDis" passes the
//     statistics anyway. A plain word of the agent's prose (outside quotes and
//     code fences) is never evidence (see Names).
//   - Whole names. A name matches only as a whole token: the pieces the tokenizer
//     splits at '.' and '-' ("code" of "claude-code", "history" of
//     "history.jsonl") neither carry a name for an output nor are evidence. Path
//     suffixes at '/' ("src/a.go" of "/r/src/a.go") are whole names.
//   - New in O. The name appeared in no message before O: not the user's or
//     system's words, not an earlier output, not the agent's text, arguments or
//     thinking, allowing for the spellings people write (variants: a path's
//     directory prefixes, a leading dot dropped, a quoted string's core without the
//     punctuation around it).
//   - Latest carrier. The use is credited to the latest output, before u, holding
//     the name as a whole token: with O pruned the agent still had the name from
//     that later output. A user or system message holding the name (after O too)
//     is a carrier no output is credited for.
//   - Not carried by the agent. The agent had not written the name (text or
//     arguments) since it appeared: its own words stay in context. Thinking is not
//     carried: providers drop earlier turns' thinking from the context, so thinking
//     counts only for New in O.
//   - Re-reads are not uses. A later read of the same file or a later identical
//     call fetches the information again and costs the same whether O was pruned
//     or not: it is no use of O (it becomes the latest carrier of what it shows).
//   - In context. O was still in the agent's context at u: a compaction the
//     transcript records (Message.AgentCompaction) between O and u that did not
//     keep O (Message.CompactionKept) dropped it, so the agent had the name from
//     elsewhere (its summary, a later output, its own knowledge). Such a name is
//     no use of O, nor of anything (a later output that holds it again is its
//     latest carrier as usual). Every judged row of ../shared/label-audit whose
//     use comes after a recorded compaction that dropped O is NOISE.
//   - A recall (AddRecall) is always a use, the strongest there is.
//
// Names that occur in many outputs carry less evidence: each name weighs its IDF
// over the outputs added when the use is found (weightOf); names of one compound
// of the agent's words count once, separate compounds add up, and the use counts
// at UseThreshold. A use's weight is fixed when it is found.
//
// Steps. A use at step u means the assistant message of step u (written by the model
// call u) holds the evidence. The advisor's plan for step T runs before model call T,
// so an output pruned at plan step T is missing from the context of call T on: the
// prune misses when the output is used at a step >= T, i.e. when UsedAfter(key, T-1)
// holds. A use before the decision step never counts against it.
//
// The rule is checked against people's judgment: TestLabelAudit replays the rows
// of ../shared/label-audit/judged.csv (docs/EVALUATION.md gives its figures).
//
// Known under-counting: the agent may use an output without repeating any of its
// names (it acts on a test result, or paraphrases); names are ASCII only;
// snake_case and camelCase spellings of one name never match; a quoted phrase
// matches only byte for byte; a common plain word ("origin" of "git push origin")
// is never evidence, even when the agent took it from O. Known over-counting: a
// rare plain word of boilerplate the agent writes in new code ("stylesheet") still
// counts; path suffixes may link a name to another file with the same tail.
package evidence

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"hash/fnv"
	"hash/maphash"
	"math"
	"slices"
	"sort"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/tidwall/gjson"

	"github.com/pruneadvisor/pruneadvisor/transcript"
)

// Sentinel errors returned (wrapped) by the Tracker.
var (
	// ErrEvidenceOrder means a message was added with a step lower than a message
	// added before it, or a nil message was added.
	ErrEvidenceOrder = errors.New("evidence: message out of order")
	// ErrEvidenceDuplicate means an output key was added twice.
	ErrEvidenceDuplicate = errors.New("evidence: duplicate output key")
	// ErrEvidenceUnknown means a recall names an output key the tracker has not seen.
	ErrEvidenceUnknown = errors.New("evidence: unknown output key")
	// ErrEvidenceStep means a recall step is not after the output's step.
	ErrEvidenceStep = errors.New("evidence: recall step not after the output")
)

// Name-tokenizer limits, in bytes (all name bytes are ASCII, so also characters).
const (
	// MinNameLen is the shortest name: docs/DESIGN.md's "at least 4 characters".
	MinNameLen = 4
	// MaxNameLen is the longest name kept. Longer runs are blobs (base64, minified
	// code, hashes of hashes) that agents do not retype; dropping them keeps the
	// name index small.
	MaxNameLen = 256
	// MaxQuotedLen is the longest quoted string (or whole argument value) taken as
	// a name; longer quoted spans are text, not names.
	MaxQuotedLen = 120
)

// UseThreshold is the weight from which a use counts as "used" (UsedAfter, LastUse,
// UseSteps). Recalls weigh 1. A name use weighs the IDF weight of its names
// (weightOf, in [0,1], over the outputs added when it is found): names from one
// compound of the agent's words (a path and its suffixes) contribute their maximum,
// separate compounds add up, the sum is capped at 1. With weight ln(N/df)/ln(N), a
// single name counts exactly when it occurs in at most √N of the N outputs so far, and two independent names count together when each occurs in at most
// N^(3/4) outputs. 0.5 is the midpoint of the scale; it was chosen for that √N
// reading, not fitted to data.
const UseThreshold = 0.5

// UseKind is the kind of evidence behind a Use.
type UseKind string

// Use kinds, strongest first. When several kinds hold for one output at one step,
// the Use carries the strongest kind and its proof.
const (
	UseRecall UseKind = "recall" // the output was recalled (AddRecall)
	// UseReread and UseCommand (a re-read, an identical call) were uses before
	// replay-5; the Tracker no longer finds them (clause Re-reads are not uses),
	// and stores written before may still hold them.
	UseReread  UseKind = "reread"
	UseCommand UseKind = "command"
	UseName    UseKind = "name" // the agent wrote a specific name the output carried
)

func kindRank(k UseKind) int {
	switch k {
	case UseRecall:
		return 3
	case UseReread:
		return 2
	case UseCommand:
		return 1
	}
	return 0
}

// Use is the evidence that one output was used at one step.
type Use struct {
	Key  string // the output's key (transcript.ToolOutput.Key)
	Step int    // step of the assistant message (or recall) holding the evidence
	Kind UseKind
	// Proof says what was found: `name "parseConfig"` (the heaviest name; "+N more"
	// when several), "recall" (and, in stores from before replay-5, "re-read
	// /x/y.go", "same command").
	Proof string
	// Weight is the evidence's strength in [0,1]; the use counts when Weight >=
	// UseThreshold. Name weights are IDF over the outputs added when the use was
	// found, fixed from then on.
	Weight float64
	// Digest is the least digest budget, in tokens, at which the output's stub
	// digest (digest.go) holds every name of the use, so that the use is no miss
	// of a stub with that budget or more; 0 when no digest holds it (and for a
	// recall).
	Digest int
	// Preview reports that the output's first and last PreviewChars characters
	// (Gemini CLI's masking keeps them in place of the output) hold every name of
	// the use, so that the use is no miss of that stub; false for a recall.
	Preview bool
	// NameDigests is, for each name of the use (each compound of the agent's
	// words that made it, in the order the tracker reads them, an argument
	// object's values in key order; a path and its base name are one name), the
	// least digest budget, in tokens, at which the output's digest
	// holds it; 0 when none does. Digest is their maximum when none is 0. nil for
	// a recall. Issue 39 counts its digest's coverage per name as well as per use:
	// a use of several names is held only when all are, a name when it is.
	NameDigests []int
	// NamesPreviewed counts the names of NameDigests that the output's first and
	// last PreviewChars characters hold (Preview: all of them).
	NamesPreviewed int
}

// PreviewChars is how many characters of an output's head and of its tail Gemini
// CLI's tool-output masking keeps in its placeholder (issue 39 quotes 250 + 250 from
// packages/core's masking service); Use.Preview is measured against them.
const PreviewChars = 250

// Counts reports whether the use is strong enough to count as "used".
func (u Use) Counts() bool { return u.Weight >= UseThreshold }

// TrackerStats counts the Tracker's work, to show each message is processed once.
type TrackerStats struct {
	Messages int // messages added
	Outputs  int // tool outputs added
	// Names is the number of distinct names scanned, summed over message parts
	// (assistant Text, each call's Args, each output's Text, other messages' Text):
	// it equals the sum of len(Names(part)) (len(ArgNames(args)) for arguments)
	// over the parts added, whatever the session's length before them.
	Names int
}

// Tracker finds later-use evidence incrementally: each message is processed once,
// when added, against an index of names built as messages arrive; queries only read
// the index. Not safe for concurrent use.
type Tracker struct {
	// Background holds the plain-word statistics (clause Specific): a plain word
	// is evidence only when Background.Common says it is rare. nil (NewTracker's
	// default) has no statistics: no plain word is evidence. Set it before the
	// first Add and do not change it after.
	Background *Background
	// DigestTokens is the largest digest budget, in tokens, that Digest serves
	// (more for a long output under DigestShare): the tracker keeps per output
	// the names of the first DigestKeep x DigestTokens tokens of its digest
	// order, so that a digest of DigestTokens is still full
	// after names ahead in the order stopped being live (0, the default: none kept,
	// and Use.Digest is measured on the order as it was made). DigestMinTokens is
	// the least size, in tokens (ToolOutput.Tokens), of an output whose digest is
	// kept: the advisor's minimum candidate size. Set both before the first Add.
	DigestTokens    int
	DigestMinTokens int
	// DigestShare grows the digest budget of a long output past DigestTokens:
	// an output of T tokens has DigestBudgetFor(T, DigestTokens, DigestShare),
	// and the tracker keeps DigestKeep times that of its order. 0 (the default):
	// every output's budget is DigestTokens. Set it before the first Add. A
	// kept name past an output's 255th is never marked no longer live
	// (nameInfo.kpos is a byte), so the digest of a very long output (6% of
	// 6,000 tokens or more keeps some 250 names) may still name a few of those.
	DigestShare float64
	// DigestFrom is how many steps after an output Use.Digest and Use.NameDigests
	// measure its stub's digest: the names ahead of a use's name in the digest
	// order that stopped being live for the output by step O+DigestFrom (or by the
	// step before the use, when that comes first) are left out ahead of it, as
	// Digest leaves them out of a stub made then. A stub made later leaves out as
	// many or more, so it holds every use the measure says it holds. The advisor
	// sets Config.ProtectedSteps, the first step its output can be a candidate;
	// NewTracker's default is DefaultDigestFrom. Set it before the first Add.
	DigestFrom int

	names map[uint64]int32 // nameKey(name) -> index of its entry in infos
	infos []nameInfo
	outs  []*outEvidence
	// goneTo: outs[:goneTo] are gone (dropBefore); outputs come in message order,
	// so each is dropped once and a compaction looks only at those not gone yet.
	goneTo int
	byKey  map[string]int
	runs   map[uint64]int // hash of tool name + compact args -> outputs of such calls so far
	part   int32          // number of the part being scanned (scan)
	order  []visited      // scratch: the current part's names in first-seen order
	// orderNames is the scratch of scan for the agent's words: the order's names.
	orderNames []string
	ev         map[int]*rawUse // scratch: evidence of the current assistant message
	buf        bytes.Buffer    // scratch of cmdHashOf
	// weighIdx is the scratch of weigh: the order of a use's names.
	weighIdx []int
	// written is the scratch of nameUses: the names of the agent's words whose
	// variants are pinned once the message is done.
	written []string
	// cands and carried are the scratch of addOutput: the output's digest
	// candidates and every name it carries.
	cands   []digestCand
	carried []carriedName
	// deaths holds, per output index, for each name of its kept digest
	// (outEvidence.digest), when it stopped being live for the output (written by
	// a message that is not an output, or carried by a later output: no later use
	// is credited to the output for it): 1 + the steps since the output (0 to
	// 253), or deathLate when later; 0 while it is live. An output has an entry
	// once the first of them stops: a byte a name, and nothing for the outputs
	// whose names all stay live (replay's TestReplayBigSession bounds the live
	// heap a message).
	deaths map[int32][]uint8
	// candGroups holds the compounds with a candidate, and then their digest cost.
	candGroups map[int32]int32
	// digestBuf is setDigest's scratch for the digest string it builds.
	digestBuf []byte
	// prev is the names of the head and tail of the output being added
	// (previewNames), scratch of addOutput.
	prev  map[string]struct{}
	step  int // step of the last message added
	stats TrackerStats
}

// nameSeed seeds nameKey, once per process.
var nameSeed = maphash.MakeSeed()

// nameKey identifies a name in Tracker.names by its 64-bit maphash: the names
// themselves are not kept. A map of every name a session has seen holds millions of
// them at 10^6 messages, and a string key costs a slot of 24 bytes, a copy of the
// name, and a second cache miss on the key's bytes for each lookup that finds it
// (docs/PERFORMANCE.md, "Does a step's cost grow with the session?"); a uint64 key,
// a slot of 16 bytes and none of that. Two names sharing a key would share an entry:
// for n distinct names the odds are about n^2/2^65 (3 x 10^-6 for 10^7 names, 3 x
// 10^-12 for the 10^4 of a long real session).
func nameKey(name string) uint64 { return maphash.String(nameSeed, name) }

// nameInfo is the index entry of one name (the name itself is not kept: nameKey;
// 28 bytes a name here).
type nameInfo struct {
	// carrier is 1 + index of the latest output holding the name as a whole token,
	// while the name is new in some output and no other message holds it; 0 = no
	// output can be credited with it.
	carrier int32
	// dcost is the digest budget, in tokens, at which the carrier's digest holds
	// the name (its compound's representative); 0 = the digest never does.
	dcost int32
	// preview: the carrier's head and tail (PreviewChars each) hold the name.
	preview bool
	// kpos is 1 + the name's place among its carrier's kept digest names
	// (outEvidence.digest) when it is its compound's candidate there (setDigest),
	// so that digestDied finds it without a walk; 0 otherwise, and past the 255th
	// kept name (its death then goes unrecorded: the stub keeps it, and a use's
	// digest budget counts it). In the padding after preview: no larger entry.
	kpos uint8
	df   int32 // outputs whose text holds the name
	// Scratch of scan: part is the number of the last part that visited the name,
	// pos its entry in Tracker.order during that part.
	part int32
	pos  int32
	seen bool // the name appeared in some message already added
	// pinned: a message that is not a tool output holds the name (the user's or
	// system's words, or the agent's text, arguments or thinking): those stay in
	// context, so no output is needed for it any more.
	pinned bool
	// spec: the name is Specific (set when an output first carries it): while it
	// is unpinned it counts as live for its carrier (outEvidence.live).
	spec bool
	// shape is the name's NameShape (set with spec): which of its carrier's
	// liveShape counts it is in.
	shape NameShape
}

// outEvidence is one output's entry.
type outEvidence struct {
	key   string
	step  int
	msg   int  // index of the message that brought it (transcript.ToolOutput.Message)
	gone  bool // a compaction the transcript records dropped it (clause In context)
	uses  []*rawUse
	owned int // distinct names first seen in this output (its distinctive names)
	runs  int // calls with the same tool and arguments so far, this one included
	// digest is the output's digest names within DigestKeep x its digest
	// budget (dbudget), in digest order (digest.go), each after its length as
	// a uvarint, in one string (one allocation an output, not one a name); ""
	// unless kept (Tracker.deaths says which of them are no longer live). dfull is
	// the whole digest's cost.
	digest string
	dfull  int
	// dbudget is the output's digest budget (DigestBudgetFor its tokens): what
	// liveOut measures against, and DigestKeep times it what digest keeps.
	dbudget int32
	// live is how many specific names this output carries as their latest carrier
	// that no message other than an output has written since (the names whose
	// first written use would still be credited to it: each name counts for one
	// use at most, since the agent's own words then carry it); liveOut the live
	// names its digest at its digest budget (dbudget) does not hold.
	live, liveOut int
	// liveShape is live counted by the names' shapes (NameShape order).
	liveShape [NumShapes]int32
}

// rawUse is evidence at one step before weighting; weights are computed on query so
// that IDF reflects every output added so far.
type rawUse struct {
	step   int
	kind   UseKind // UseRecall when strong > 0, else UseName
	proof  string  // proof of kind when strong > 0
	strong float64 // recalls: 1 each
	// nameW and nameProof are the weight and proof of the names (fixName).
	nameW     float64
	nameProof string
	// digest is the least digest budget, in tokens, whose digest of the output
	// holds the use's names (fixName); 0 = none does. preview: the output's head
	// and tail hold them (fixName).
	digest  int
	preview bool
	// nameDigests and namesPrev are Use.NameDigests and Use.NamesPreviewed (fixName).
	nameDigests []int
	namesPrev   int
	// The names found, until fixName weighs them.
	names  []string
	ids    []int32 // each name's index entry (Tracker.infos)
	groups []int32 // compound of the agent's words each name came from
	dcosts []int32 // each name's digest cost in the carrier's digest when found
	inPrev []bool  // each name held by the carrier's head and tail when found
}

// NewTracker returns an empty tracker for one session, without word statistics
// (set Tracker.Background).
func NewTracker() *Tracker {
	return &Tracker{
		DigestFrom: DefaultDigestFrom,

		names: map[uint64]int32{},
		byKey: map[string]int{},
		runs:  map[uint64]int{},
		ev:    map[int]*rawUse{},

		candGroups: map[int32]int32{},
		deaths:     map[int32][]uint8{},
	}
}

// Stats returns the work counters.
func (t *Tracker) Stats() TrackerStats { return t.stats }

// Keys returns the keys of the outputs added, in order.
func (t *Tracker) Keys() []string {
	out := make([]string, len(t.outs))
	for i, o := range t.outs {
		out[i] = o.key
	}
	return out
}

// Add processes message m (messages must be added in session order, each once) and
// returns the uses it holds, ordered by output. Only assistant messages hold uses.
// It fails, changing nothing, with ErrEvidenceOrder for a nil message or one whose
// Step is lower than the previous message's, and with ErrEvidenceDuplicate when one of
// m's outputs has a key already added.
func (t *Tracker) Add(m *transcript.Message) ([]Use, error) {
	if m == nil {
		return nil, fmt.Errorf("add message: %w: nil message", ErrEvidenceOrder)
	}
	if m.Step < t.step {
		return nil, fmt.Errorf("add message %d: %w: step %d after step %d", m.Index, ErrEvidenceOrder, m.Step, t.step)
	}
	for i, o := range m.Outputs {
		if _, dup := t.byKey[o.Key]; dup {
			return nil, fmt.Errorf("add message %d: output %q: %w", m.Index, o.Key, ErrEvidenceDuplicate)
		}
		for _, p := range m.Outputs[:i] {
			if p.Key == o.Key {
				return nil, fmt.Errorf("add message %d: output %q: %w", m.Index, o.Key, ErrEvidenceDuplicate)
			}
		}
	}
	t.step = m.Step
	t.stats.Messages++
	var uses []Use
	if m.Role == transcript.RoleAssistant {
		uses = t.addWords(m)
	}
	if m.AgentCompaction {
		t.dropBefore(m.Index - m.CompactionKept)
	}
	for _, o := range m.Outputs {
		t.addOutput(o)
	}
	if m.Role != transcript.RoleAssistant && m.Text != "" {
		t.pinText(m.Text)
	}
	return uses, nil
}

// scrEntry is one distinct name of the part being scanned.
type scrEntry struct {
	group int32 // compound or quoted string it came from (first whole code emission)
	flags uint8 // nameProse, namePart: set only when every occurrence in the part had it
}

// visited is the scratch of scan for one distinct name of the part: its index
// entry and its scrEntry (12 bytes).
type visited struct {
	idx int32
	e   scrEntry
}

// scan visits the distinct names of one part (text, or args when args != nil) in
// order of first appearance: for each it counts the part in the name's document
// frequency when the part is a tool output (output), and calls f with the name
// (when names is set, else ""; a piece of the part's text or of a string decoded
// from args: f copies what it keeps), its scratch entry, and the index and address
// of its index entry (created when new), which f may change in place. A name seen
// both as a prose word (or a piece) and as a whole code name takes the code entry.
// Each occurrence of a name costs one map lookup: the index entry itself marks the
// part that last visited it, so no per-part set is needed.
func (t *Tracker) scan(text string, args json.RawMessage, output, names bool, g *int32, f func(name string, e scrEntry, idx int32, info *nameInfo)) {
	t.part++
	visit := func(name string, group int32, flags uint8) {
		idx := t.entry(name)
		info := &t.infos[idx]
		if info.part == t.part {
			if v := &t.order[info.pos]; v.e.flags&^flags != 0 {
				v.e = scrEntry{group: group, flags: v.e.flags & flags}
			}
			return
		}
		info.part, info.pos = t.part, int32(len(t.order))
		t.order = append(t.order, visited{idx: idx, e: scrEntry{group: group, flags: flags}})
		if names {
			t.orderNames = append(t.orderNames, name)
		}
	}
	if args != nil {
		visitArgNames(args, g, visit)
	} else {
		visitNames(text, g, visit)
	}
	for i, v := range t.order {
		info := &t.infos[v.idx]
		if output {
			info.df++
		}
		name := ""
		if names {
			name = t.orderNames[i]
		}
		f(name, v.e, v.idx, info)
	}
	t.stats.Names += len(t.order)
	t.order = t.order[:0]
	clear(t.orderNames) // pieces of the text: not kept past the scan
	t.orderNames = t.orderNames[:0]
}

// entry returns the index of name's entry, creating it.
func (t *Tracker) entry(name string) int32 {
	k := nameKey(name)
	idx, ok := t.names[k]
	if !ok {
		idx = int32(len(t.infos))
		t.infos = append(t.infos, nameInfo{})
		t.names[k] = idx
	}
	return idx
}

// lookup returns name's entry, nil when the name was never seen.
func (t *Tracker) lookup(name string) *nameInfo {
	if idx, ok := t.names[nameKey(name)]; ok {
		return &t.infos[idx]
	}
	return nil
}

// pin marks name, and the variants people write for it (variants), as held by a
// message that is not a tool output (clauses New in O and Not carried by the
// agent).
func (t *Tracker) pin(name string) {
	t.pinOne(name)
	variants(name, t.pinOne)
}

// pinOne marks name alone as held by a message that is not a tool output.
func (t *Tracker) pinOne(name string) {
	t.pinInfo(&t.infos[t.entry(name)])
}

// pinInfo marks a name's entry seen and pinned; a live name (outEvidence.live)
// is live no more.
func (t *Tracker) pinInfo(info *nameInfo) {
	if !info.pinned {
		t.unlive(info)
	}
	info.seen, info.pinned = true, true
}

// unlive takes an unpinned name off its carrier's live counts (outEvidence.live,
// liveOut) and out of its digest (digestDied) before the name is pinned or
// carried by a later output.
func (t *Tracker) unlive(info *nameInfo) {
	if info.carrier <= 0 || !info.spec {
		return
	}
	o := t.outs[info.carrier-1]
	if o.gone {
		return // dropBefore cleared its counts
	}
	t.digestDied(info.carrier-1, info.kpos)
	o.live--
	o.liveShape[info.shape]--
	if !o.digestHolds(info.dcost) {
		o.liveOut--
	}
}

// digestHolds reports whether a name of digest cost dcost (nameInfo.dcost) is in
// the digest of o, its carrier, at o's digest budget (Tracker.DigestTokens, or
// more for a long output under Tracker.DigestShare).
func (o *outEvidence) digestHolds(dcost int32) bool {
	return dcost > 0 && dcost <= o.dbudget
}

// pinText pins every name of a text that is not a tool output nor the agent's
// evidence-bearing words: the user's or system's text.
func (t *Tracker) pinText(text string) {
	var g int32
	t.scan(text, nil, false, true, &g, func(name string, _ scrEntry, _ int32, info *nameInfo) {
		t.pinInfo(info)
		variants(name, t.pinOne)
	})
}

// seeText marks every name of the agent's thinking, and its variants, as seen:
// an output after it is not where the name is new (clause New in O). Thinking does
// not pin: providers drop the thinking of earlier turns from the context the agent
// is sent (Anthropic strips earlier assistant turns' thinking blocks; Gemini keeps
// only signatures), so a name the agent only thought of after O still comes from
// O.
func (t *Tracker) seeText(text string) {
	see := func(v string) { t.infos[t.entry(v)].seen = true }
	var g int32
	t.scan(text, nil, false, true, &g, func(name string, _ scrEntry, _ int32, info *nameInfo) {
		info.seen = true
		variants(name, see)
	})
}

// variants calls f with the other spellings of name that a message holding name
// makes known too, for clauses New in O and Not carried by the agent (docs/DESIGN.md:
// "a path and its prefix or base name, a leading dot dropped, quoted or not, a
// trailing period"): each directory prefix of a path ("/a/b" of "/a/b/c.go"; base
// names and the other suffixes are emitted by the tokenizer itself), and the
// spellings of sameName. Each variant has MinNameLen bytes or more and a word
// byte.
func variants(name string, f func(string)) {
	if strings.IndexByte(name, ' ') < 0 {
		for i := len(name) - 1; i > 0; i-- {
			if name[i] == '/' && variantOK(name, name[:i]) {
				f(name[:i])
			}
		}
	}
	sameName(name, f)
}

// sameName calls f with the spellings of name that are the same name: without
// its leading dots (".gitleaks.toml" and "gitleaks.toml"), and the core of a
// quoted string without the punctuation around it ("#008899" and "008899", "No
// model selected." and "No model selected").
func sameName(name string, f func(string)) {
	if strings.IndexByte(name, ' ') < 0 {
		if d := strings.TrimLeft(name, "."); variantOK(name, d) {
			f(d)
		}
	}
	if c := core(name); variantOK(name, c) {
		f(c)
	}
}

// variantOK reports whether v is a variant worth a name entry: not name itself,
// MinNameLen bytes or more, holding a word byte.
func variantOK(name, v string) bool {
	return v != name && len(v) >= MinNameLen && hasWordByte(v)
}

// core is name without the bytes that are not word bytes at both of its ends.
func core(name string) string {
	i, j := 0, len(name)
	for i < j && !isWordByte(name[i]) {
		i++
	}
	for j > i && !isWordByte(name[j-1]) {
		j--
	}
	return name[i:j]
}

// pinnedVariant reports whether a message that is not a tool output already held
// another spelling of the same name (sameName).
func (t *Tracker) pinnedVariant(name string) bool {
	found := false
	sameName(name, func(v string) {
		if info := t.lookup(v); info != nil && info.pinned {
			found = true
		}
	})
	return found
}

// Specific reports whether a name the agent writes is specific enough to be
// evidence (docs/DESIGN.md clause Specific): a quoted phrase of several words; or a
// name with a digit or one of `_ . / \ : - @ # =` (the tokenizer guarantees
// MinNameLen bytes); or a plain word (letters only, any case: Plain) that bg
// does not report Common. Inner capitals alone do not make a name specific here:
// "GitHub" and "JavaScript" are plain words that agents write in many sessions,
// while a rare one ("BetterDis", "readmePath") passes the background test anyway.
func Specific(name string, bg *Background) bool {
	if strings.IndexByte(name, ' ') > 0 {
		return true // a quoted phrase: the tokenizer trims spaces at its ends
	}
	if Plain(name) {
		return !bg.Common(name)
	}
	return true
}

// addWords handles an assistant message at step u: the names of its text and call
// arguments, then its thinking. It returns the step's uses, ordered by output.
func (t *Tracker) addWords(m *transcript.Message) []Use {
	clear(t.ev)
	t.nameUses(m)
	if m.Thinking != "" {
		t.seeText(m.Thinking)
	}
	return t.takeUses()
}

// stepUse returns the use of output idx at step u being gathered, creating it.
func (t *Tracker) stepUse(idx, u int) *rawUse {
	r := t.ev[idx]
	if r == nil {
		r = &rawUse{step: u, kind: UseName}
		t.ev[idx] = r
	}
	return r
}

// nameUses gathers the uses by name in m's text and call arguments: a whole,
// specific name that no message other than outputs held before is a use of the
// latest output carrying it. Every name the agent writes is pinned, and after the
// message the other spellings of each (variants): pinned at once, the core of a
// quoted "this.ui.start()" would hide the name this.ui.start written in it.
func (t *Tracker) nameUses(m *transcript.Message) {
	// One group counter over all parts, so groups never collide.
	var g int32
	word := func(name string, e scrEntry, idx int32, info *nameInfo) {
		if info.pinned {
			return
		}
		carrier := info.carrier
		t.pinInfo(info)
		if carrier > 0 && !t.outs[carrier-1].gone && e.flags == 0 && Specific(name, t.Background) && !t.pinnedVariant(name) {
			r := t.stepUse(int(carrier)-1, m.Step)
			r.names = append(r.names, strings.Clone(name))
			r.ids = append(r.ids, idx)
			r.groups = append(r.groups, e.group)
			r.dcosts = append(r.dcosts, t.liveNeed(carrier-1, info.dcost, m.Step))
			r.inPrev = append(r.inPrev, info.preview)
		}
		t.written = append(t.written, name)
	}
	if m.Text != "" {
		t.scan(m.Text, nil, false, true, &g, word)
	}
	for _, c := range m.Calls {
		if len(c.Args) > 0 {
			t.scan("", c.Args, false, true, &g, word)
		}
	}
	for _, name := range t.written {
		variants(name, t.pinOne)
	}
	clear(t.written) // pieces of the message: not kept
	t.written = t.written[:0]
}

// takeUses adds the gathered uses to their outputs and returns them weighed, ordered
// by output (nil when there are none).
func (t *Tracker) takeUses() []Use {
	if len(t.ev) == 0 {
		return nil
	}
	idxs := make([]int, 0, len(t.ev))
	for idx := range t.ev {
		idxs = append(idxs, idx)
	}
	sort.Ints(idxs)
	uses := make([]Use, 0, len(idxs))
	for _, idx := range idxs {
		o := t.outs[idx]
		r := t.ev[idx]
		t.fixName(r)
		o.uses = append(o.uses, r)
		uses = append(uses, t.weigh(o, r))
	}
	clear(t.ev)
	return uses
}

// addOutput indexes one tool output: its names (document frequency; ownership of
// the whole names never seen before; the latest-carrier credit of the names that
// only outputs held so far), and, through its call, how many identical calls ran.
func (t *Tracker) addOutput(o *transcript.ToolOutput) {
	idx := len(t.outs)
	oe := &outEvidence{key: o.Key, step: o.Step, msg: o.Message}
	t.outs = append(t.outs, oe)
	t.byKey[o.Key] = idx
	t.stats.Outputs++
	var g int32
	t.cands, t.carried = t.cands[:0], t.carried[:0]
	clear(t.candGroups) // the groups with a candidate: one candidate a compound
	t.previewNames(o.Text)
	t.scan(o.Text, nil, true, true, &g, func(name string, e scrEntry, i int32, info *nameInfo) {
		switch {
		case e.flags&namePart != 0:
			return // a piece of a longer token: neither new nor a carrier here
		case !info.seen:
			info.seen = true
			info.carrier = int32(idx) + 1
			info.spec = Specific(name, t.Background)
			info.shape = ShapeOf(name)
			oe.owned++
		case !info.pinned && info.carrier > 0:
			t.unlive(info) // the earlier carrier's; live here once its digest cost is known
			info.carrier = int32(idx) + 1
		default:
			return
		}
		t.carried = append(t.carried, carriedName{idx: i, group: e.group})
		_, info.preview = t.prev[name]
		info.kpos = 0 // setDigest sets it for this output's kept candidates
		if _, taken := t.candGroups[e.group]; !taken {
			if info.spec { // Specific(name), set when an output first carried it
				t.candGroups[e.group] = 0 // its cost comes with setDigest
				t.cands = append(t.cands, digestCand{name: name, id: i, group: e.group, pos: len(t.cands), spec: digestSpec(name)})
			}
		} else if c := &t.cands[len(t.cands)-1]; c.group == e.group && shorterRep(c.name, name) {
			c.name, c.id, c.spec = name, i, digestSpec(name)
		}
	})
	t.setDigest(oe, o.Tokens)
	for _, m := range t.carried {
		if info := &t.infos[m.idx]; info.spec {
			oe.live++
			oe.liveShape[info.shape]++
			if !oe.digestHolds(info.dcost) {
				oe.liveOut++
			}
		}
	}
	clear(t.prev)  // pieces of the output's text: not kept past the call
	clear(t.cands) // the same
	t.cands = t.cands[:0]
	if c := o.Call; c != nil {
		h := t.cmdHash(c)
		t.runs[h]++
		oe.runs = t.runs[h]
	}
}

// dropBefore marks gone every output whose message comes before message index
// from (the agent's compaction dropped them: clause In context) and clears their
// live counts, since no later use can be credited to them. Outputs are added in
// message order, so it goes on from the last one it dropped: each output once.
func (t *Tracker) dropBefore(from int) {
	for ; t.goneTo < len(t.outs) && t.outs[t.goneTo].msg < from; t.goneTo++ {
		o := t.outs[t.goneTo]
		o.gone = true
		o.live, o.liveOut, o.liveShape = 0, 0, [NumShapes]int32{}
	}
}

// Owned returns how many distinct names output key was the first to hold (the names
// whose later use would count for it); 0 for an unknown key.
func (t *Tracker) Owned(key string) int {
	if idx, ok := t.byKey[key]; ok {
		return t.outs[idx].owned
	}
	return 0
}

// Live returns how many specific names output key carries that a later use would
// still credit to it (outEvidence.live: it is their latest carrier and no message
// other than an output has written them since), and how many of those its digest
// at its digest budget (DigestBudgetFor) does not hold; 0, 0 for an unknown key.
// A name counts for one use at most (the agent's own words carry it after), so
// an output with no live name can be used again only by a recall.
func (t *Tracker) Live(key string) (live, undigested int) {
	if idx, ok := t.byKey[key]; ok {
		return t.outs[idx].live, t.outs[idx].liveOut
	}
	return 0, 0
}

// Runs returns how many calls with the same tool and arguments as output key's had
// been made when it came, its own included (1 for a first run); 0 for an unknown key
// or an output without a call.
func (t *Tracker) Runs(key string) int {
	if idx, ok := t.byKey[key]; ok {
		return t.outs[idx].runs
	}
	return 0
}

// AddRecall records that output key was recalled at step (from live use): the
// strongest evidence, weight 1. It fails with ErrEvidenceUnknown for a key not added
// and ErrEvidenceStep for a step not after the output's step.
func (t *Tracker) AddRecall(key string, step int) error {
	idx, ok := t.byKey[key]
	if !ok {
		return fmt.Errorf("recall of %q at step %d: %w", key, step, ErrEvidenceUnknown)
	}
	o := t.outs[idx]
	if step <= o.step {
		return fmt.Errorf("recall of %q at step %d: %w (output step %d)", key, step, ErrEvidenceStep, o.step)
	}
	i := sort.Search(len(o.uses), func(i int) bool { return o.uses[i].step >= step })
	if i < len(o.uses) && o.uses[i].step == step {
		r := o.uses[i]
		if r.strong == 0 || kindRank(UseRecall) > kindRank(r.kind) {
			r.kind, r.proof = UseRecall, "recall"
		}
		r.strong++
		return nil
	}
	r := &rawUse{step: step, kind: UseRecall, proof: "recall", strong: 1}
	o.uses = append(o.uses, nil)
	copy(o.uses[i+1:], o.uses[i:])
	o.uses[i] = r
	return nil
}

// Uses returns every use of output key, counting or not, in step order; nil for an
// unknown key. Weights are fixed when each use was found.
func (t *Tracker) Uses(key string) []Use {
	idx, ok := t.byKey[key]
	if !ok {
		return nil
	}
	o := t.outs[idx]
	out := make([]Use, len(o.uses))
	for i, r := range o.uses {
		out[i] = t.weigh(o, r)
	}
	return out
}

// UsedAfter returns the first counting use of output key at a step > step. For a
// prune applied at plan step T, the prune misses iff UsedAfter(key, T-1) holds.
func (t *Tracker) UsedAfter(key string, step int) (Use, bool) {
	idx, ok := t.byKey[key]
	if !ok {
		return Use{}, false
	}
	o := t.outs[idx]
	for _, r := range o.uses {
		if r.step <= step {
			continue
		}
		if u := t.weigh(o, r); u.Counts() {
			return u, true
		}
	}
	return Use{}, false
}

// LastUse returns the step of the last counting use of output key, 0 when none.
func (t *Tracker) LastUse(key string) int {
	steps := t.UseSteps(key)
	if len(steps) == 0 {
		return 0
	}
	return steps[len(steps)-1]
}

// UseSteps returns the steps of the counting uses of output key, ascending (the
// calibrate package's Output.Uses).
func (t *Tracker) UseSteps(key string) []int {
	var out []int
	for _, u := range t.Uses(key) {
		if u.Counts() {
			out = append(out, u.Step)
		}
	}
	return out
}

// weigh turns raw evidence into a Use: the recalls (1 each) plus the weight its
// names had when the use was found (fixName), capped at 1.
func (t *Tracker) weigh(o *outEvidence, r *rawUse) Use {
	u := Use{Key: o.key, Step: r.step, Kind: r.kind, Proof: r.proof, Weight: min(r.strong+r.nameW, 1)}
	if r.strong == 0 {
		u.Digest, u.Preview = r.digest, r.preview
		u.NameDigests, u.NamesPreviewed = r.nameDigests, r.namesPrev
		u.Kind, u.Proof = UseName, r.nameProof
	}
	return u
}

// fixName weighs the names of a use found now, with the IDF of each over the
// outputs added so far (weightOf), and keeps the weight and the proof in r: a
// use's weight is fixed when it is found, so the use history the advisor sees at a
// step and the label replay records for it agree. Names of one compound count
// once, at their best weight; compounds add up. The names themselves are dropped.
func (t *Tracker) fixName(r *rawUse) {
	if len(r.names) == 0 {
		return
	}
	best, bestW := "", -1.0
	// Sum in order of group number so the result does not depend on map order (the
	// names come in that order unless a prose word later turned code).
	idx := t.weighIdx[:0]
	for i := range r.names {
		idx = append(idx, i)
	}
	if !slices.IsSorted(r.groups) {
		sort.SliceStable(idx, func(a, b int) bool { return r.groups[idx[a]] < r.groups[idx[b]] })
	}
	t.weighIdx = idx
	w, groupMax := 0.0, 0.0
	for k, i := range idx {
		n := r.names[i]
		nw := t.weightOf(r.ids[i])
		if k > 0 && r.groups[i] != r.groups[idx[k-1]] {
			w += groupMax
			groupMax = 0
		}
		groupMax = max(groupMax, nw)
		if nw > bestW || nw == bestW && (len(n) > len(best) || len(n) == len(best) && n < best) {
			best, bestW = n, nw
		}
	}
	r.nameW = w + groupMax
	r.nameProof = "name " + strconv.Quote(best) // fmt's %q of a string
	if len(r.names) > 1 {
		r.nameProof += " +" + strconv.Itoa(len(r.names)-1) + " more"
	}
	r.nameDigests, r.namesPrev = nameNeeds(idx, r.groups, r.dcosts, r.inPrev)
	r.digest, r.preview = useNeed(r.nameDigests), r.namesPrev == len(r.nameDigests)
	r.names, r.ids, r.groups, r.dcosts, r.inPrev = nil, nil, nil, nil, nil
}

// useNeed is the least digest budget that holds every name of a use, given each
// name's (nameNeeds): their largest, or 0 when a name has none (no digest holds
// the use).
func useNeed(needs []int) int {
	need := 0
	for _, n := range needs {
		if n == 0 {
			return 0
		}
		need = max(need, n)
	}
	return need
}

// nameNeeds returns, per compound of the agent's words in a use (idx orders its
// names by group), the least digest budget that holds it (the smallest positive
// digest cost among its names: a compound is held when any of its names is; 0
// when none has one), and how many compounds the output's head and tail hold (any
// of its names in them). The use is held when every compound is (useNeed; the
// preview: all of them).
func nameNeeds(idx []int, groups, dcosts []int32, in []bool) ([]int, int) {
	var needs []int
	prev := 0
	groupMin, held := int32(0), false
	for k, i := range idx {
		if k > 0 && groups[i] != groups[idx[k-1]] {
			needs = append(needs, int(groupMin))
			if held {
				prev++
			}
			groupMin, held = 0, false
		}
		if c := dcosts[i]; c > 0 && (groupMin == 0 || c < groupMin) {
			groupMin = c
		}
		held = held || in[i]
	}
	if len(idx) > 0 {
		needs = append(needs, int(groupMin))
		if held {
			prev++
		}
	}
	return needs, prev
}

// weightOf is the IDF weight of the name of index entry i over the N outputs added
// so far: ln(N/df)/ln(N), the standard IDF ln(N/df) divided by its largest value
// ln(N) so that it lies in [0,1]: 1 for a name in one output, 0 for a name in every
// output. With fewer than two outputs every name weighs 1 (nothing to compare with),
// and so does a name in no output.
func (t *Tracker) weightOf(i int32) float64 {
	n := len(t.outs)
	df := int(t.infos[i].df)
	if n < 2 || df < 1 {
		return 1
	}
	w := math.Log(float64(n)/float64(df)) / math.Log(float64(n))
	return min(max(w, 0), 1)
}

// cmdHash is cmdHashOf(c) with the tracker's scratch buffer.
func (t *Tracker) cmdHash(c *transcript.ToolCall) uint64 { return cmdHashOf(c, &t.buf) }

// cmdHashOf identifies a call by tool name and arguments (JSON compacted by
// json.Compact, so whitespace does not matter; key order does; arguments that are
// not JSON are trimmed by bytes.TrimSpace): FNV-1a 64. buf is scratch.
func cmdHashOf(c *transcript.ToolCall, buf *bytes.Buffer) uint64 {
	h := fnv.New64a()
	h.Write([]byte(c.Name))
	h.Write([]byte{0})
	if compactJSON(c.Args) {
		h.Write(c.Args)
		return h.Sum64()
	}
	buf.Reset()
	if err := json.Compact(buf, c.Args); err == nil {
		h.Write(buf.Bytes())
	} else {
		h.Write(bytes.TrimSpace(c.Args))
	}
	return h.Sum64()
}

// compactJSON reports that args are what cmdHashOf would hash after compacting
// them: they start and end with an ASCII byte that is not a space (so
// bytes.TrimSpace, the fallback for text that is not JSON, keeps them whole) and
// hold no JSON white space (' ', '\t', '\n', '\r') outside strings (so
// json.Compact, which removes exactly that, keeps valid JSON whole). Strings are
// followed by their quotes and backslash escapes, which in valid JSON finds exactly
// the strings; for text that is not JSON only the ends matter.
func compactJSON(args []byte) bool {
	n := len(args)
	if n == 0 || !asciiNonSpace(args[0]) || !asciiNonSpace(args[n-1]) {
		return false
	}
	in := false
	for i := 0; i < n; i++ {
		switch b := args[i]; {
		case in && b == '\\':
			i++
		case b == '"':
			in = !in
		case !in && (b == ' ' || b == '\t' || b == '\n' || b == '\r'):
			return false
		}
	}
	return true
}

// asciiNonSpace reports whether b is an ASCII byte that unicode.IsSpace rejects.
func asciiNonSpace(b byte) bool {
	return b < 0x80 && b != ' ' && (b < '\t' || b > '\r')
}

// Names returns the distinct names in text, in order of first appearance. The
// tokenizer (ASCII; a "word byte" is a letter, digit or '_'):
//
//   - Compounds: maximal runs of word bytes and '.', '/', '-', '~'; leading "./",
//     "../", '.' and '-' and trailing '.', '-', '/', '~' are trimmed; a run with no
//     word byte is ignored. A Windows drive path (C:\x\y or C:/x/y) is one compound
//     with '\' read as '/'.
//   - A compound holding '/' is a path: the path itself, each suffix after a '/'
//     ("/r/src/a.go" gives "r/src/a.go", "src/a.go", "a.go"), and the parts of its
//     last element split at '.' and '-' ("config_parser" of "config_parser.py").
//   - Otherwise a compound holding '.' or '-' is a dotted or hyphenated name
//     ("os.path.join", "3.14159", "foo-bar"): the whole and its parts.
//   - Otherwise it is an identifier or number (snake_case and camelCase stay whole).
//   - Quoted strings: the text between two equal quotes (", ', `) on one line, when
//     the opening quote does not follow a word byte and the closing one is not
//     followed by one, and the text neither starts nor ends with a space. A quoted
//     string that is one compound run (`src/a.go`, "./lib/io.py") is one compound
//     with the names of the run inside it: a path in backquotes counts, and gets
//     its one digest candidate, as the same path unquoted.
//
// Every name has MinNameLen to MaxNameLen bytes (quoted strings at most
// MaxQuotedLen). Names are case-sensitive.
//
// Prose words. In the agent's own text (assistant Text, not tool-call arguments), a
// plain word — a lone identifier made of letters only, all lower case or only its
// first letter upper case ("found", "Config") — that stands outside a quoted string
// or a ``` fenced block is prose, not a name the agent took from an output: it marks
// the word as written but is not evidence. Identifiers with a digit, '_', an inner
// or all-capital spelling (parseConfig, MAX_SIZE, STRICT), paths, dotted names,
// numbers and anything quoted or fenced count anywhere. This is a rule about shape
// and markup, not a stop list: without it, ordinary words the agent writes for the
// first time ("have", "should") are the most frequent name uses in real sessions.
func Names(text string) []string {
	var out []string
	seen := map[string]bool{}
	var g int32
	visitNames(text, &g, func(name string, _ int32, _ uint8) {
		if !seen[name] {
			seen[name] = true
			out = append(out, name)
		}
	})
	return out
}

// ProseWords returns the distinct names of text that are prose words (see Names),
// in order of first appearance: the names of an assistant text that are not
// evidence. A word that also occurs in code context in text is not listed.
func ProseWords(text string) []string {
	prose := map[string]bool{}
	var order []string
	var g int32
	visitNames(text, &g, func(name string, _ int32, fl uint8) {
		p := fl&nameProse != 0
		was, ok := prose[name]
		if !ok {
			order = append(order, name)
			prose[name] = p
		} else if was && !p {
			prose[name] = false
		}
	})
	var out []string
	for _, n := range order {
		if prose[n] {
			out = append(out, n)
		}
	}
	return out
}

// ArgNames returns the distinct names in a tool call's JSON arguments: the names of
// every string and number value (keys are the tool's schema, not the agent's words),
// in document order with object keys sorted, plus each one-line string value of
// MinNameLen to MaxQuotedLen bytes taken whole, as if quoted. Arguments that are not
// JSON are read as text. Arguments are code context: they hold no prose words.
func ArgNames(args json.RawMessage) []string {
	var out []string
	seen := map[string]bool{}
	var g int32
	visitArgNames(args, &g, func(name string, _ int32, _ uint8) {
		if !seen[name] {
			seen[name] = true
			out = append(out, name)
		}
	})
	return out
}

// Flags of an emitted name (emitFunc): what kind of occurrence it is.
const (
	// nameProse: a plain word of the agent's prose (see Names): written, not evidence.
	nameProse uint8 = 1 << iota
	// namePart: a piece of a longer token split at '.' or '-' ("code" of
	// "claude-code", "history" of "history.jsonl"): a name matches only as a whole
	// token (docs/DESIGN.md clause Whole names), so a piece is never evidence nor a carrier.
	namePart
)

// emitFunc receives one name, the group (compound or quoted string) it came from,
// and its flags (nameProse, namePart).
type emitFunc func(name string, group int32, flags uint8)

// visitArgNames walks the JSON arguments and visits the names of their values
// (see ArgNames). It reads the JSON with gjson, without building a tree: tool
// arguments are on every assistant message, and decoding them into maps was the
// largest single cost of Tracker.Add.
func visitArgNames(args json.RawMessage, g *int32, emit emitFunc) {
	if !gjson.ValidBytes(args) {
		visitNames(string(args), g, emit)
		return
	}
	walkArgs(gjson.ParseBytes(args), g, emit)
}

// walkArgs visits one JSON value: strings and numbers, array elements in order,
// object values in key order (the last of repeated keys, as encoding/json keeps).
func walkArgs(v gjson.Result, g *int32, emit emitFunc) {
	switch v.Type {
	case gjson.String:
		x := v.Str
		if len(x) >= MinNameLen && len(x) <= MaxQuotedLen && strings.TrimSpace(x) == x &&
			!strings.ContainsAny(x, "\r\n") && hasWordByte(x) {
			*g++
			emit(x, *g, 0)
		}
		visitNames(x, g, emit)
	case gjson.Number:
		visitNames(v.Raw, g, emit)
	case gjson.JSON:
		if v.IsArray() {
			v.ForEach(func(_, e gjson.Result) bool {
				walkArgs(e, g, emit)
				return true
			})
			return
		}
		type kv struct {
			k string
			v gjson.Result
		}
		var fields []kv
		v.ForEach(func(k, e gjson.Result) bool {
			for i := range fields {
				if fields[i].k == k.Str {
					fields[i].v = e
					return true
				}
			}
			fields = append(fields, kv{k.Str, e})
			return true
		})
		// The keys are distinct (a repeated key was merged above), so any sort gives
		// the one order.
		slices.SortFunc(fields, func(a, b kv) int { return strings.Compare(a.k, b.k) })
		for _, f := range fields {
			walkArgs(f.v, g, emit)
		}
	}
}

// Byte classes of the tokenizer (see Names), as bits of byteClass.
const (
	clWord     = 1 << iota // a letter, digit or '_'
	clCompound             // a word byte or '.', '/', '-', '~'
	clLetter               // an ASCII letter
	clUpper                // an upper-case ASCII letter
	clStop                 // a byte visitNames must look at: compound or '"', '\'', '`'
)

// byteClass[b] holds the classes of byte b; 0 for every byte the tokenizer skips.
var byteClass = func() (t [256]uint8) {
	for b := 0; b < 256; b++ {
		c := byte(b)
		var k uint8
		if c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' {
			k |= clLetter
		}
		if c >= 'A' && c <= 'Z' {
			k |= clUpper
		}
		if k&clLetter != 0 || c >= '0' && c <= '9' || c == '_' {
			k |= clWord
		}
		if k&clWord != 0 || c == '.' || c == '/' || c == '-' || c == '~' {
			k |= clCompound
		}
		if k&clCompound != 0 || c == '"' || c == '\'' || c == '`' {
			k |= clStop
		}
		t[b] = k
	}
	return t
}()

func isWordByte(b byte) bool { return byteClass[b]&clWord != 0 }

func isCompoundByte(b byte) bool { return byteClass[b]&clCompound != 0 }

func isLetter(b byte) bool { return byteClass[b]&clLetter != 0 }

func isUpper(b byte) bool { return byteClass[b]&clUpper != 0 }

func hasWordByte(s string) bool {
	for i := 0; i < len(s); i++ {
		if isWordByte(s[i]) {
			return true
		}
	}
	return false
}

// plainWord reports whether s (a lone identifier) is spelled like an ordinary
// word: letters only, no upper-case letter after the first.
func plainWord(s string) bool {
	for i := 0; i < len(s); i++ {
		b := s[i]
		if !isLetter(b) || i > 0 && isUpper(b) {
			return false
		}
	}
	return true
}

const fence = "```"

// visitNames is the tokenizer documented on Names. emit receives each name with the
// group of the compound or quoted string it came from (*g counts groups) and
// whether it is a prose word.
func visitNames(text string, g *int32, emit emitFunc) {
	n := len(text)
	codeEnd := 0   // text[:codeEnd] up to here is inside a quoted string or fence
	fenceEnd := -1 // index of the closing fence of the open fenced block
	for i := 0; i < n; {
		b := text[i]
		if byteClass[b]&clStop == 0 {
			i++
			continue
		}
		if b == '`' && strings.HasPrefix(text[i:], fence) {
			if i == fenceEnd {
				fenceEnd = -1
			} else if fenceEnd < 0 {
				k := strings.Index(text[i+3:], fence)
				if k < 0 {
					fenceEnd = n
				} else {
					fenceEnd = i + 3 + k
				}
				codeEnd = max(codeEnd, fenceEnd)
			}
			i += 3
			continue
		}
		if b == '"' || b == '\'' || b == '`' {
			if end := visitQuoted(text, i, g, emit); end > 0 {
				codeEnd = max(codeEnd, end)
				if oneRun(text[i+1 : end]) {
					// The quoted string is one compound run (`src/server.go`): the
					// run visited next gives its names the quoted string's group,
					// one compound as unquoted.
					*g--
				}
			}
			i++
			continue
		}
		if !isCompoundByte(b) {
			i++
			continue
		}
		i = visitRun(text, i, i < codeEnd, g, emit)
	}
}

// oneRun reports whether s is one compound run as visitRun reads it: not empty,
// every byte a compound byte.
func oneRun(s string) bool {
	for i := 0; i < len(s); i++ {
		if !isCompoundByte(s[i]) {
			return false
		}
	}
	return len(s) > 0
}

// visitRun emits the names of the compound run starting at text[i] (a compound
// byte; code: inside a quoted string or fenced block) and returns the index after
// the run.
func visitRun(text string, i int, code bool, g *int32, emit emitFunc) int {
	n, start, drive := len(text), i, false
	if isLetter(text[i]) && i+3 < n && text[i+1] == ':' && (text[i+2] == '\\' || text[i+2] == '/') &&
		(i == 0 || !isWordByte(text[i-1])) && isWordByte(text[i+3]) {
		drive = true
		i += 3
	}
	// all is the classes every byte of the run has: a run of word bytes alone is an
	// identifier or number, which needs none of visitCompound's trimming and
	// splitting.
	all := uint8(clWord | clLetter)
	for i < n {
		k := byteClass[text[i]]
		if k&clCompound == 0 && !(drive && text[i] == '\\') {
			break
		}
		all &= k
		i++
	}
	*g++
	if !drive && all&clWord != 0 {
		if w := text[start:i]; len(w) >= MinNameLen && len(w) <= MaxNameLen {
			emit(w, *g, proseFlag(!code && all&clLetter != 0 && plainWord(w)))
		}
		return i
	}
	visitCompound(text[start:i], drive, code, *g, emit)
	return i
}

// visitQuoted emits the quoted string opening at text[i], if it is one, and
// returns the index of its closing quote (0 when it is not one).
func visitQuoted(text string, i int, g *int32, emit emitFunc) int {
	q := text[i]
	if i > 0 && isWordByte(text[i-1]) {
		return 0
	}
	end := min(len(text), i+2+MaxQuotedLen)
	for j := i + 1; j < end; j++ {
		c := text[j]
		if c == '\n' || c == '\r' {
			return 0
		}
		if c != q {
			continue
		}
		if j+1 < len(text) && isWordByte(text[j+1]) {
			return 0
		}
		s := text[i+1 : j]
		if len(s) < MinNameLen || s[0] == ' ' || s[0] == '\t' || s[len(s)-1] == ' ' || s[len(s)-1] == '\t' || !hasWordByte(s) {
			return 0
		}
		*g++
		emit(s, *g, 0)
		return j
	}
	return 0
}

// visitCompound emits the names of one compound run (see Names); code reports that
// it lies inside a quoted string or fenced block.
func visitCompound(s string, drive, code bool, group int32, emit emitFunc) {
	if !drive {
	trim:
		for len(s) > 0 {
			switch {
			case strings.HasPrefix(s, "./"):
				s = s[2:]
			case strings.HasPrefix(s, "../"):
				s = s[3:]
			case s[0] == '.' || s[0] == '-':
				s = s[1:]
			default:
				break trim
			}
		}
	}
	for len(s) > 0 {
		c := s[len(s)-1]
		if c != '.' && c != '-' && c != '/' && c != '~' && c != '\\' {
			break
		}
		s = s[:len(s)-1]
	}
	if len(s) < MinNameLen || len(s) > MaxNameLen || !hasWordByte(s) {
		return
	}
	if drive {
		s = strings.ReplaceAll(s, `\`, "/")
	}
	if drive || strings.IndexByte(s, '/') >= 0 {
		emit(s, group, 0)
		for j := 0; j < len(s)-1; j++ {
			if s[j] != '/' {
				continue
			}
			suf := s[j+1:]
			if len(suf) >= MinNameLen && suf[0] != '/' && hasWordByte(suf) {
				emit(suf, group, 0)
			}
		}
		base := s[strings.LastIndexByte(s, '/')+1:]
		if indexDotDash(base) >= 0 {
			emitParts(base, group, emit)
		}
		return
	}
	if indexDotDash(s) >= 0 {
		emit(s, group, 0)
		emitParts(s, group, emit)
		return
	}
	emit(s, group, proseFlag(!code && plainWord(s)))
}

// proseFlag is nameProse when prose holds, else 0.
func proseFlag(prose bool) uint8 {
	if prose {
		return nameProse
	}
	return 0
}

// indexDotDash is strings.IndexAny(s, ".-") for the short strings of names,
// without IndexAny's set building.
func indexDotDash(s string) int {
	for i := 0; i < len(s); i++ {
		if s[i] == '.' || s[i] == '-' {
			return i
		}
	}
	return -1
}

// emitParts emits the pieces of s split at '.' and '-' that are long enough.
func emitParts(s string, group int32, emit emitFunc) {
	for len(s) > 0 {
		k := indexDotDash(s)
		part := s
		if k >= 0 {
			part, s = s[:k], s[k+1:]
		} else {
			s = ""
		}
		if len(part) >= MinNameLen && hasWordByte(part) {
			emit(part, group, namePart)
		}
	}
}

// Of runs a Tracker under the word statistics bg over the whole session and
// returns every use of every output (Tracker.Uses: counting or not), by output in
// session order, then by step. Errors are the Tracker's.
func Of(s *transcript.Session, bg *Background) ([]Use, error) {
	tr := NewTracker()
	tr.Background = bg
	for _, m := range s.Messages {
		if _, err := tr.Add(m); err != nil {
			return nil, err
		}
	}
	return tr.All(), nil
}

// All returns every use of every output added so far (Uses of each key, in the
// order the outputs were added), nil when there is none.
func (t *Tracker) All() []Use {
	var out []Use
	for _, k := range t.Keys() {
		out = append(out, t.Uses(k)...)
	}
	return out
}

// previewNames sets t.prev to the whole names of text's first and last
// PreviewChars characters (Gemini CLI's masking preview), each read as the
// separate text the preview shows; all of text when it is no longer than both.
// A name cut at a preview's edge is a different, shorter name there.
func (t *Tracker) previewNames(text string) {
	if t.prev == nil {
		t.prev = map[string]struct{}{}
	}
	clear(t.prev)
	add := func(part string) {
		var g int32
		visitNames(part, &g, func(name string, _ int32, _ uint8) { t.prev[name] = struct{}{} })
	}
	n := utf8.RuneCountInString(text)
	if n <= 2*PreviewChars {
		add(text)
		return
	}
	head, tail, k := 0, 0, 0
	for i := range text { // i: the byte offset of rune k
		if k == PreviewChars {
			head = i
		}
		if k == n-PreviewChars {
			tail = i
			break
		}
		k++
	}
	add(text[:head])
	add(text[tail:])
}
