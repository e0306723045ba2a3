package calibrate

import (
	"cmp"
	"math"
	"slices"

	"github.com/pruneadvisor/pruneadvisor/planner"
)

// policy decides, before each call of one session, which outputs to stub.
type policy interface {
	// stub returns positions in sd.outs (visible, not stubbed yet) to stub before
	// call v.s.
	stub(v *view) []int
}

// view is the state of one session's simulation at one call.
type view struct {
	e       *Evaluator
	sd      *sessionData
	s       int // the call
	ctx     int // the context as it would be sent before this call's rewrite
	visible int // sd.outs[:visible] are visible (produced before call s)
	stubbed []bool
	saved   int     // tokens the stubs remove
	fen     fenwick // stub savings by position
	first   []int   // first[j]: the first position in output j's message
	appends []appendAt
	// stubSize is the stub size the policy uses in place of each output's own
	// StubTokens (the anchors' placeholders), -1 for none; hold is what its stubs
	// keep of an output.
	stubSize int
	hold     hold
	// gone[j]: a compaction dropped output j (it can be neither stubbed nor
	// recalled any more).
	gone []bool
	// added is what repairs of misses appended to the context, in tokens; cut is
	// what compactions removed net of their summaries.
	added, cut int
}

// placeholderer is a policy whose stubs are all of one size and hold the same
// kind of thing: an anchor's.
type placeholderer interface{ placeholder() (tokens int, h hold) }

// hold is what a pruner's stub keeps of an output, which decides which later uses
// of it miss.
type hold int

const (
	// holdDigest: the advisor's stub, whose digest holds some uses (Output.Held).
	holdDigest hold = iota
	// holdNothing: a placeholder ("[Old tool result content cleared]").
	holdNothing
	// holdPreview: Gemini CLI's masking, which keeps the output's head and tail
	// (Output.Previewed).
	holdPreview
)

// savesOf is what a stub of output j removes under the policy, in tokens (>= 0).
func (v *view) savesOf(j int) int {
	o := v.out(j)
	if v.stubSize >= 0 {
		return max(o.Tokens-v.stubSize, 0)
	}
	return o.saves()
}

// appendAt is an original brought back into the context after call step, in
// tokens (the original and RecallOverheadTokens): a stub miss's recall or a
// compaction miss's fetch (missPhase). It is a copy of the output at position orig,
// the n-th one (1: the first). Once its protection has passed any pruner may stub
// it again, as the live advisor prunes a recall's result like any other output
// (docs/DESIGN.md "Recall"): an anchor by its rule over every tool result
// (sequence), any other as it decided its original, at the same age (decisions),
// and a scorer's rewrite forced by the hard limit as a last candidate
// (copyCandidates); saved is then what its stub removes. gone: a compaction
// dropped it. next caches copyRaw's k, plus one (0: not computed yet).
type appendAt struct {
	step, tokens int
	orig, n      int
	saved        int
	stubbed      bool
	gone         bool
	next         int
}

func newView(e *Evaluator, sd *sessionData) *view {
	v := &view{e: e, sd: sd, stubbed: make([]bool, len(sd.outs)), gone: make([]bool, len(sd.outs)), fen: make(fenwick, len(sd.outs)), first: make([]int, len(sd.outs)), stubSize: -1}
	for j := range sd.outs {
		v.first[j] = j
		if j > 0 && e.outs[sd.outs[j]].Offset == e.outs[sd.outs[j-1]].Offset {
			v.first[j] = v.first[j-1]
		}
	}
	return v
}

// out returns the output at position j.
func (v *view) out(j int) *Output { return &v.e.outs[v.sd.outs[j]] }

// offset returns the tokens before output j's message as the context is sent now:
// its offset, less the stubs before that message, plus the recalled originals
// appended before it, less what compactions cut (only meaningful for an output
// not gone).
func (v *view) offset(j int) int {
	o := v.out(j)
	off := o.Offset - v.fen.sum(v.first[j]) - v.cut
	for _, a := range v.appends {
		if a.step > o.Step {
			break
		}
		off += a.tokens - a.saved
	}
	return off
}

// copyRaw returns where copy i (v.appends[i]) lies in the unpruned history: after
// every output made before its call, so at the offset of the first output k made
// at or after it (the raw context of its call when there is none, k then
// len(sd.outs)).
func (v *view) copyRaw(i int) (raw, k int) {
	a, sd := &v.appends[i], v.sd
	if a.next == 0 {
		a.next = len(sd.outs) + 1
		for k := range sd.outs {
			if v.out(k).Step >= a.step {
				a.next = k + 1
				break
			}
		}
	}
	if k = a.next - 1; k < len(sd.outs) {
		return v.out(k).Offset, k
	}
	return sd.context[min(a.step, len(sd.context))-1], k
}

// sequence returns, in the order of the context, the outputs visible at call v.s
// and the copies in it (a copy as -i-1 for v.appends[i], just before the first
// output made at or after its call: copyRaw), leaving out what a compaction
// dropped: every tool result the agent sends, as an anchor regime sees them.
func (v *view) sequence() []int {
	seq := make([]int, 0, v.visible+len(v.appends))
	c := 0 // the next copy
	for j := 0; j < v.visible; j++ {
		for ; c < len(v.appends); c++ {
			if _, k := v.copyRaw(c); k > j {
				break
			}
			if !v.appends[c].gone {
				seq = append(seq, -c-1)
			}
		}
		if !v.gone[j] {
			seq = append(seq, j)
		}
	}
	for ; c < len(v.appends); c++ {
		if !v.appends[c].gone {
			seq = append(seq, -c-1)
		}
	}
	return seq
}

// tokensAt is the tokens of the output at sequence position p (an output's
// Tokens; a copy's original's, its round trip's overhead left out, as the
// anchors count tool results).
func (v *view) tokensAt(p int) int {
	if p < 0 {
		return v.out(v.appends[-p-1].orig).Tokens
	}
	return v.out(p).Tokens
}

// stubbedAt reports whether the output at sequence position p is stubbed.
func (v *view) stubbedAt(p int) bool {
	if p < 0 {
		return v.appends[-p-1].stubbed
	}
	return v.stubbed[p]
}

// savesAt is what a stub of the output at sequence position p removes under the
// policy (savesOf; a copy's, its original's).
func (v *view) savesAt(p int) int {
	if p < 0 {
		return v.savesOf(v.appends[-p-1].orig)
	}
	return v.savesOf(p)
}

// copyOffset returns the tokens before copy i (v.appends[i]) in the context as it
// is sent now: it follows every output made before its call, and the copies before
// it.
func (v *view) copyOffset(i int) int {
	raw, k := v.copyRaw(i)
	stubs := v.fen.sum(len(v.sd.outs))
	if k < len(v.sd.outs) {
		stubs = v.fen.sum(v.first[k])
	}
	off := raw - stubs - v.cut
	for _, b := range v.appends[:i] {
		off += b.tokens - b.saved
	}
	return max(off, 0)
}

// copyCandidates returns the copies (as -i-1 for v.appends[i]) a rewrite at call
// v.s may stub: not stubbed, not gone, past the last Options.ProtectedSteps steps
// and past the recall window Options.RecallWindows gives the n-th recall of their
// original (the live advisor's protection of a recall's result,
// advisor.Advisor.protection), with a stub shorter than they are.
func (v *view) copyCandidates() []int {
	w := v.e.opts.RecallWindows
	var out []int
	for i, a := range v.appends {
		if a.stubbed || a.gone || v.s-a.step <= v.e.opts.ProtectedSteps || v.s <= a.step+w.Gap(a.n) || v.savesOf(a.orig) <= 0 {
			continue
		}
		out = append(out, -i-1)
	}
	return out
}

// stubCopy stubs copy i (v.appends[i]) at call v.s with its original's stub (the
// policy's: savesOf), and registers in missAt (as -i-1) the first later use that
// stub does not hold. It returns first lowered to the copy's offset.
func (v *view) stubCopy(i, first int, missAt map[int][]int) int {
	a := &v.appends[i]
	n := v.savesOf(a.orig)
	if a.stubbed || a.gone || n <= 0 {
		return first
	}
	if off := v.copyOffset(i); first < 0 || off < first {
		first = off
	}
	a.stubbed, a.saved = true, n
	v.saved += n
	if u := v.out(a.orig).missFrom(v.s, v.hold); u != 0 {
		missAt[u] = append(missAt[u], -i-1)
	}
	return first
}

// liveCopy reports whether a copy of the output at position j is in the context
// (stubbed or not).
func (v *view) liveCopy(j int) bool {
	for _, a := range v.appends {
		if a.orig == j && !a.gone {
			return true
		}
	}
	return false
}

// drop marks gone the outputs at positions outs and the copies copies (indexes in
// v.appends), dropped by a compaction before call v.s, and registers in lost, at
// its first use from v.s on, each original that no copy in the context still
// brings back: the outputs dropped, and the originals of the copies dropped that
// an earlier compaction dropped.
func (v *view) drop(outs, copies []int, lost map[int][]int) {
	check := slices.Clone(outs)
	for _, i := range copies {
		v.appends[i].gone = true
		if j := v.appends[i].orig; v.gone[j] && !slices.Contains(check, j) {
			check = append(check, j)
		}
	}
	for _, j := range outs {
		v.gone[j] = true
	}
	for _, j := range check {
		if v.liveCopy(j) {
			continue
		}
		if u := v.out(j).UsedFrom(v.s); u != 0 {
			lost[u] = append(lost[u], j)
		}
	}
}

// simulate runs one session under p (nil: keep-all, nothing stubbed) and prices
// it against keep-all. Each call goes through three phases: the policy's stubs
// (stubPhase), the agent's compaction when the context passes its point
// (compactPhase), and the call's price with the misses it meets (missPhase).
func (e *Evaluator) simulate(sd *sessionData, p policy) Level { return e.simulateInto(sd, p, nil) }

// simulateInto is simulate that also records, when tr is not nil, the context sent
// at every call, the calls that rewrote, the calls whose stub was recalled and the
// calls before which the agent compacted.
func (e *Evaluator) simulateInto(sd *sessionData, p policy, tr *Series) Level {
	v := newView(e, sd)
	if ph, ok := p.(placeholderer); ok {
		v.stubSize, v.hold = ph.placeholder()
	}
	var l Level
	lastSent := 0
	missAt := map[int][]int{} // call -> positions first used then after their stub
	lost := map[int][]int{}   // call -> positions a compaction dropped, first used then
	for s := 1; s <= sd.end; s++ {
		v.s = s
		came := 0 // tokens of the outputs that came since call s-1
		for v.visible < len(sd.outs) && v.out(v.visible).Step < s {
			came += v.out(v.visible).Tokens
			v.visible++
		}
		full := sd.context[s-1] + v.added
		v.ctx = full - v.saved - v.cut
		compacted := false
		// A compaction before the call reads what the last call sent from the cache
		// unless the cache went cold.
		early := min(lastSent, v.ctx)
		if sd.cold[s-1] {
			early = 0
		}
		if rc, ok := sd.recorded[s]; ok {
			// The transcript records the agent's compaction before this call.
			v.ctx, compacted = v.recordedPhase(&l, v.ctx, early, rc, lost), true
		} else if v.decidesEarly(lastSent, came) {
			// The agent compacts before the proxy sees the call.
			v.ctx, compacted = v.compactPhase(&l, v.ctx, early, lost), true
		}
		first := v.stubPhase(p, missAt)
		ctx := full - v.saved - v.cut
		cached := min(lastSent, ctx)
		if first >= 0 {
			l.Rewrites++
			cached = min(cached, first)
		}
		if sd.cold[s-1] || compacted {
			cached = 0
		}
		if c := sd.compaction; !compacted && c.Point > 0 && (c.Decides == DecidesSent && ctx > c.Point || c.Decides == DecidesTurn && c.Window > 0 && ctx > c.Window) {
			// Past the point as sent, or past the window mid-turn (the provider
			// refuses the request: overflow).
			ctx, cached, compacted = v.compactPhase(&l, ctx, cached, lost), 0, true
		}
		l.PaidUSD += sd.price.Call(cached, ctx)
		if ctx > e.opts.Budget {
			l.StepsOverBudget++
		}
		l.PeakContext = max(l.PeakContext, ctx)
		l.TokenSteps += int64(sd.context[s-1] - ctx - v.cut)
		if tr != nil {
			tr.record(s, ctx, first >= 0, compacted, len(missAt[s]) > 0)
		}
		lastSent = v.missPhase(&l, ctx, missAt[s], lost[s])
	}
	if p != nil {
		l.NetUSD = sd.keepAll.PaidUSD - l.PaidUSD
	}
	return l
}

// decidesEarly reports whether the agent compacts before call v.s by a count it
// makes before the proxy's rewrite of the call (Compaction.Decides): the
// estimate, the context as it would be sent (v.ctx); the usage, what call s-1
// sent (lastSent) plus the growth since less the outputs that came (came
// tokens), for s > 1, and for DecidesTurn only at a call that starts a turn.
func (v *view) decidesEarly(lastSent, came int) bool {
	c, s := v.sd.compaction, v.s
	switch {
	case c.Point <= 0:
		return false
	case c.Decides == DecidesEstimate:
		return v.ctx > c.Point
	case s == 1 || !c.CountsLastUsage():
		return false
	case c.Decides == DecidesTurn && v.sd.turn != nil && !v.sd.turn[s-1]:
		return false // mid-turn: the agent does not count
	}
	return lastSent+v.sd.context[s-1]-v.sd.context[s-2]-came > c.Point
}

// stubPhase applies the policy's stubs at call v.s, registers the misses they will
// meet in missAt, and returns the offset of the first changed message (-1: none).
func (v *view) stubPhase(p policy, missAt map[int][]int) int {
	if p == nil {
		return -1
	}
	first := -1
	for _, j := range p.stub(v) {
		if j < 0 {
			first = v.stubCopy(-j-1, first, missAt)
			continue
		}
		if v.stubbed[j] || v.gone[j] || v.savesOf(j) <= 0 {
			continue
		}
		if off := v.offset(j); first < 0 || off < first {
			first = off
		}
		v.stubbed[j] = true
		n := v.savesOf(j)
		v.fen.add(j, n)
		v.saved += n
		// A placeholder holds nothing, a preview the uses its head and tail name,
		// the advisor's stub the uses its digest names.
		if u := v.out(j).missFrom(v.s, v.hold); u != 0 {
			missAt[u] = append(missAt[u], j)
		}
	}
	return first
}

// compactPhase prices the agent's compaction before call v.s over a context of ctx
// tokens of which cached are cache reads: the summarising call reads the context
// and writes the summary as its answer (output tokens). It returns the context
// after the compaction, which the call then writes whole.
func (v *view) compactPhase(l *Level, ctx, cached int, lost map[int][]int) int {
	sd := v.sd
	l.Compactions++
	l.PeakContext = max(l.PeakContext, ctx)
	l.PaidUSD += sd.price.Call(cached, ctx) + float64(sd.compaction.SummaryTokens)*sd.price.Output()
	return v.compact(ctx, lost)
}

// recordedPhase prices the compaction the transcript records before call v.s
// (RecordedCompaction) over a context of ctx tokens of which cached are cache
// reads, as compactPhase prices a modelled one, and applies it: every visible
// output whose message lies before the kept tail is gone (a later use of it is a
// compaction miss, as in compact; the later-use evidence credits none), and the
// context loses what the pruner still sends of the dropped history. It returns
// the context after it.
func (v *view) recordedPhase(l *Level, ctx, cached int, rc RecordedCompaction, lost map[int][]int) int {
	sd := v.sd
	l.RecordedCompactions++
	l.PeakContext = max(l.PeakContext, ctx)
	l.PaidUSD += sd.price.Call(cached, ctx) + float64(rc.SummaryTokens)*sd.price.Output()
	// k: the first output of the kept tail; start: where the tail begins in the
	// context as sent now (the history before it less its stubs and what earlier
	// compactions cut, plus the originals recalled before it).
	k, _ := slices.BinarySearchFunc(sd.outs, rc.Dropped, func(i, dropped int) int { return cmp.Compare(v.e.outs[i].Offset, dropped) })
	start := rc.Dropped - v.fen.sum(k) - v.cut
	var outs, copies []int
	for i, a := range v.appends {
		// The copies before the kept history (by where they lie in it, copyRaw)
		// go with it; appends are in the order of the context, so the first
		// past it ends them.
		if raw, _ := v.copyRaw(i); raw >= rc.Dropped {
			break
		}
		start += a.tokens - a.saved
		if !a.gone {
			copies = append(copies, i)
		}
	}
	for j := 0; j < k && j < v.visible; j++ {
		if !v.gone[j] {
			outs = append(outs, j)
		}
	}
	v.drop(outs, copies, lost)
	start = min(max(start, 0), ctx)
	v.cut += start
	return ctx - start
}

// missPhase repairs, after call v.s sent ctx tokens, the stub misses (positions,
// or -i-1 for a stubbed copy v.appends[i]) and the compaction misses first met
// there, and returns what the last call sent. A stub miss is a recall; a
// compaction miss is the agent fetching the output again (a tool call, priced as
// a recall round trip: a lower bound on what the loss costs). Either way one more
// round trip reads the context and writes the original and RecallOverheadTokens:
// a copy in the context (appendAt) until a compaction drops it or a rewrite
// stubs it again.
func (v *view) missPhase(l *Level, ctx int, stubMisses, compactionMisses []int) int {
	sent := ctx
	repair := func(j int) {
		back := v.out(j).Tokens + v.e.opts.RecallOverheadTokens
		l.PaidUSD += v.sd.price.Call(sent, sent+back)
		v.added += back
		n := 1
		for _, a := range v.appends {
			if a.orig == j {
				n++
			}
		}
		v.appends = append(v.appends, appendAt{step: v.s, tokens: back, orig: j, n: n})
		sent += back
	}
	for _, j := range stubMisses {
		if j < 0 {
			// A copy's stub missed (stubCopy); a compaction that dropped the copy
			// registered the use as lost instead (drop).
			if a := v.appends[-j-1]; !a.gone {
				l.Misses++
				repair(a.orig)
			}
			continue
		}
		if v.gone[j] {
			continue // a compaction dropped the stub too: a compaction miss
		}
		l.Misses++
		repair(j)
	}
	for _, j := range compactionMisses {
		l.CompactionMisses++
		repair(j)
	}
	return sent
}

// bySession groups decided steps by call for one session: step -> positions.
func bySession(e *Evaluator, sd *sessionData, ds []PruneAt) map[int][]int {
	out := map[int][]int{}
	for j, i := range sd.outs {
		if st := ds[i].Step; st >= 1 && st <= sd.end {
			out[st] = append(out[st], j)
		}
	}
	return out
}

// decisions are a pruner's decisions for one session: at, the positions decided at
// each call (bySession); decidedAt[j], the call at which output j is decided (0:
// never); each copy of it is decided at the same age (decidedCopies).
type decisions struct {
	at        map[int][]int
	decidedAt []int
}

func decide(e *Evaluator, sd *sessionData, ds []PruneAt) decisions {
	d := decisions{at: bySession(e, sd, ds), decidedAt: make([]int, len(sd.outs))}
	for s, js := range d.at {
		for _, j := range js {
			d.decidedAt[j] = s
		}
	}
	return d
}

// decided reports whether the copy -c-1 (v.appends[-c-1]) is decided at call v.s:
// its original is, and the copy is as old as its original was when it was
// decided (a scorer scores a copy as it scored its original at the same age:
// docs/EVALUATION.md "Every pruner's copies"), and never before its original's
// decision (the oracle's comes after the original's last use).
func (d decisions) decided(v *view, c int) bool {
	a := v.appends[-c-1]
	at := d.decidedAt[a.orig]
	if at == 0 {
		return false
	}
	return v.s >= max(at, a.step+at-v.out(a.orig).Step)
}

// copiesDue splits the copies due at call v.s (copyCandidates) into those decided
// by then (decided: a copy is decided as its original was, at the same age) and
// the others.
func (d decisions) copiesDue(v *view) (decided, undecided []int) {
	for _, c := range v.copyCandidates() {
		if d.decided(v, c) {
			decided = append(decided, c)
		} else {
			undecided = append(undecided, c)
		}
	}
	return decided, undecided
}

// decidedCopies is copiesDue's decided copies.
func (d decisions) decidedCopies(v *view) []int {
	decided, _ := d.copiesDue(v)
	return decided
}

// immediateP applies every decision at its step, and each decided copy as soon as
// it is due: the decision level.
type immediateP struct{ decisions }

func (p *immediateP) stub(v *view) []int {
	return append(slices.Clone(p.at[v.s]), p.decidedCopies(v)...)
}

// regimeP makes decisions pending prunes and lets the planner apply them: the
// applied level, as the advisor does live. With extra set (a scorer's decisions,
// as the advisor's are), a rewrite forced by the hard limit may also prune
// candidates that are not pending, lowest last score first (never scored: 1), as
// the live advisor does (advisor's extraCandidates, docs/DESIGN.md step 6(c)),
// and the copies recalls brought back once their protection has passed
// (copyCandidates, never scored); the baselines have no such candidates.
type regimeP struct {
	decisions
	ds      []PruneAt
	pending []int // positions, ascending (a copy as -i-1: decidedCopies)
	extra   bool
}

func (e *Evaluator) regime(sd *sessionData, ds []PruneAt) policy {
	return &regimeP{decisions: decide(e, sd, ds), ds: ds}
}

func (p *regimeP) stub(v *view) []int {
	decided, undecided := p.copiesDue(v)
	for _, j := range append(slices.Clone(p.at[v.s]), decided...) {
		if k, found := slices.BinarySearch(p.pending, j); !found {
			p.pending = slices.Insert(p.pending, k, j)
		}
	}
	p.pending = slices.DeleteFunc(p.pending, func(j int) bool {
		if j < 0 {
			return v.appends[-j-1].gone // a copy a compaction dropped
		}
		return v.gone[j]
	})
	in := p.input(v)
	var extra, prot []int
	switch {
	case p.extra && in.Context > in.HardLimit:
		// The copies not decided yet are candidates too, never scored.
		extra = append(p.extraCandidates(v), undecided...)
		if v.e.opts.LastResort && v.ctx > v.lastResortLimit() {
			prot = lastResort(v)
		}
	case p.extra && in.Context > in.Budget && v.e.opts.OverBudgetCutoff > 0:
		extra = p.overBudgetCandidates(v)
	}
	if len(p.pending) == 0 && len(extra) == 0 && len(prot) == 0 {
		return nil
	}
	if !in.Urgent() && !planner.PaysDue(v.s, len(p.pending)) {
		return nil
	}
	sd := v.sd
	in.Pending = make([]planner.Pending, len(p.pending))
	for k, j := range p.pending {
		if j < 0 {
			// A decided copy, as its original was decided.
			a := v.appends[-j-1]
			d := p.ds[sd.outs[a.orig]]
			in.Pending[k] = planner.Pending{Offset: v.copyOffset(-j - 1), Saves: max(v.savesOf(a.orig), 1), Keep: clamp01(d.Keep), Rule: d.Rule}
			continue
		}
		d := p.ds[sd.outs[j]]
		in.Pending[k] = planner.Pending{Offset: v.offset(j), Saves: max(v.savesOf(j), 1), Keep: clamp01(d.Keep), Rule: d.Rule}
	}
	in.Extra = make([]planner.Pending, len(extra))
	for k, j := range extra {
		if j < 0 {
			// A copy: never scored (keep 1), as a recall's result before its first ask.
			in.Extra[k] = planner.Pending{Offset: v.copyOffset(-j - 1), Saves: max(v.savesOf(v.appends[-j-1].orig), 1), Keep: 1}
			continue
		}
		in.Extra[k] = planner.Pending{Offset: v.offset(j), Saves: max(v.savesOf(j), 1), Keep: lastKeep(v.out(j), v.s)}
	}
	in.Protected = make([]planner.Pending, len(prot))
	for k, j := range prot {
		in.Protected[k] = planner.Pending{Offset: v.offset(j), Saves: max(v.savesOf(j), 1), Keep: lastKeep(v.out(j), v.s)}
	}
	dec := planner.Decide(in)
	if len(dec.Apply) == 0 && len(dec.Extra) == 0 && len(dec.Protected) == 0 {
		return nil
	}
	if f := v.e.opts.OnRewrite; f != nil {
		f(sd.name, v.s, dec)
	}
	out := p.take(dec, extra)
	for _, k := range dec.Protected {
		out = append(out, prot[k])
	}
	return out
}

// input is the planner's input at call v.s, without the prunes. The budget is
// never above the hard limit, as the live advisor's (advisor.Advisor.limit).
func (p *regimeP) input(v *view) planner.Input {
	o, sd := v.e.opts, v.sd
	hard := v.hardLimit()
	budget := min(o.Budget, hard)
	return planner.Input{
		Context: v.ctx, Budget: budget, HardLimit: hard,
		LowWater:     int(o.LowWaterFraction * float64(budget)),
		LeastRewrite: int(ceil(o.RewriteFraction * float64(budget))),
		Cold:         sd.cold[v.s-1], Remaining: o.estimatorAt(v.ctx > budget).Remaining(v.s),
		Read: sd.price.Read(), Premium: max(sd.price.Write()-sd.price.Read(), 0), PayFactor: o.PayFactor,
		PriceForced:  o.PriceForced,
		HardLowWater: int(o.HardLimitLowWaterFraction * float64(hard)),
	}
}

// overBudgetCandidates returns the extra candidates (extraCandidates) whose last
// score is under Options.OverBudgetCutoff: never one not scored yet (lastKeep 1),
// as the live advisor's overBudgetCandidates.
func (p *regimeP) overBudgetCandidates(v *view) []int {
	return slices.DeleteFunc(p.extraCandidates(v), func(j int) bool {
		return lastKeep(v.out(j), v.s) >= v.e.opts.OverBudgetCutoff
	})
}

// extraCandidates returns the positions of the visible candidates (CandidateFrom
// reached) that are neither pending, stubbed nor gone and whose stub is shorter.
func (p *regimeP) extraCandidates(v *view) []int {
	var out []int
	for j := 0; j < v.visible; j++ {
		o := v.out(j)
		if v.stubbed[j] || v.gone[j] || o.CandidateFrom == 0 || o.CandidateFrom > v.s || v.savesOf(j) <= 0 {
			continue
		}
		if _, pending := slices.BinarySearch(p.pending, j); !pending {
			out = append(out, j)
		}
	}
	return out
}

// lastResort returns the positions of the visible outputs still protected at call
// v.s (CandidateFrom after v.s: the last K steps) whose stub is shorter,
// neither stubbed nor gone: what a rewrite forced by the hard limit takes last
// (planner.Input.Protected). With a compaction modelled, only those the
// compaction would drop (before the tail the agent keeps).
func lastResort(v *view) []int {
	tail := math.MaxInt
	if v.sd.compaction.Point > 0 {
		tail = v.tailStart(v.ctx)
	}
	var out []int
	for j := 0; j < v.visible; j++ {
		o := v.out(j)
		if v.stubbed[j] || v.gone[j] || o.CandidateFrom <= v.s || v.savesOf(j) <= 0 || v.offset(j) >= tail {
			continue
		}
		out = append(out, j)
	}
	return out
}

// lastKeep is o's last scored keep-probability at or before step s; 1 when none.
func lastKeep(o *Output, s int) float64 {
	keep := 1.0
	for _, a := range o.Asks {
		if a.Step > s {
			break
		}
		if a.OK {
			keep = clamp01(a.Keep)
		}
	}
	return keep
}

// take returns the positions the planner chose (pending ones and extra ones) and
// drops the chosen pending ones from the pending list.
func (p *regimeP) take(dec planner.Rewrite, extra []int) []int {
	out := make([]int, 0, len(dec.Apply)+len(dec.Extra))
	drop := make(map[int]bool, len(dec.Apply))
	for _, a := range dec.Apply {
		out = append(out, p.pending[a])
		drop[a] = true
	}
	for _, k := range dec.Extra {
		out = append(out, extra[k])
	}
	kept := p.pending[:0]
	for k, j := range p.pending {
		if !drop[k] {
			kept = append(kept, j)
		}
	}
	p.pending = kept
	return out
}

// appliedP stubs each output at a given step (the advisor's own rewrites, read from
// its replay). A decided copy (decidedCopies) rides along with the next of those
// rewrites, as a pending prune of the live advisor does.
type appliedP struct{ decisions }

func (p *appliedP) stub(v *view) []int {
	if len(p.at[v.s]) == 0 {
		return nil
	}
	return append(slices.Clone(p.at[v.s]), p.decidedCopies(v)...)
}

func clamp01(f float64) float64 { return min(max(f, 0), 1) }

func ceil(f float64) float64 {
	n := float64(int64(f))
	if n < f {
		n++
	}
	return n
}

// fenwick is a binary indexed tree of per-position sums (Fenwick 1994).
type fenwick []int

func (f fenwick) add(i, v int) {
	for n := i + 1; n <= len(f); n += n & -n {
		f[n-1] += v
	}
}

// sum returns the sum over positions [0, i).
func (f fenwick) sum(i int) int {
	s := 0
	for n := min(i, len(f)); n > 0; n -= n & -n {
		s += f[n-1]
	}
	return s
}
