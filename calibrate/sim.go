package calibrate

import (
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
	// StubTokens (the anchors' placeholders), -1 for none.
	stubSize int
}

// placeholderer is a policy whose stubs are all of one size.
type placeholderer interface{ placeholder() int }

// savesOf is what a stub of output j removes under the policy, in tokens (>= 0).
func (v *view) savesOf(j int) int {
	o := v.out(j)
	if v.stubSize >= 0 {
		return max(o.Tokens-v.stubSize, 0)
	}
	return o.saves()
}

// appendAt is a recall's original, appended to the context after call step.
type appendAt struct{ step, tokens int }

func newView(e *Evaluator, sd *sessionData) *view {
	v := &view{e: e, sd: sd, stubbed: make([]bool, len(sd.outs)), fen: make(fenwick, len(sd.outs)), first: make([]int, len(sd.outs)), stubSize: -1}
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
// appended before it.
func (v *view) offset(j int) int {
	o := v.out(j)
	off := o.Offset - v.fen.sum(v.first[j])
	for _, a := range v.appends {
		if a.step > o.Step {
			break
		}
		off += a.tokens
	}
	return off
}

// simulate runs one session under p and prices it against keep-all.
func (e *Evaluator) simulate(sd *sessionData, p policy) Level { return e.simulateInto(sd, p, nil) }

// simulateInto is simulate that also records, when tr is not nil, the context sent
// at every call, the calls that rewrote and the calls whose stub was recalled.
func (e *Evaluator) simulateInto(sd *sessionData, p policy, tr *Series) Level {
	v := newView(e, sd)
	if ph, ok := p.(placeholderer); ok {
		v.stubSize = ph.placeholder()
	}
	var l Level
	lastSent, added := 0, 0
	missAt := map[int][]int{} // call -> positions first used then after their stub
	for s := 1; s <= sd.end; s++ {
		v.s = s
		for v.visible < len(sd.outs) && v.out(v.visible).Step < s {
			v.visible++
		}
		full := sd.context[s-1] + added
		v.ctx = full - v.saved
		first := -1
		for _, j := range p.stub(v) {
			if v.stubbed[j] || v.savesOf(j) <= 0 {
				continue
			}
			if off := v.offset(j); first < 0 || off < first {
				first = off
			}
			v.stubbed[j] = true
			n := v.savesOf(j)
			v.fen.add(j, n)
			v.saved += n
			// A placeholder (stubSize >= 0) holds nothing; the advisor's stub holds
			// the uses its digest names.
			if u := v.out(j).missFrom(s, v.stubSize < 0); u != 0 {
				missAt[u] = append(missAt[u], j)
			}
		}
		ctx := full - v.saved
		cached := min(lastSent, ctx)
		if first >= 0 {
			l.Rewrites++
			cached = min(cached, first)
		}
		if sd.cold[s-1] {
			cached = 0
		}
		l.PaidUSD += sd.price.Call(cached, ctx)
		if ctx > e.opts.Budget {
			l.StepsOverBudget++
		}
		l.PeakContext = max(l.PeakContext, ctx)
		l.TokenSteps += int64(sd.context[s-1] - ctx)
		lastSent = ctx
		if tr != nil {
			tr.Context = append(tr.Context, ctx)
			if first >= 0 {
				tr.Rewrites = append(tr.Rewrites, s)
			}
			if len(missAt[s]) > 0 {
				tr.Recalls = append(tr.Recalls, s)
			}
		}
		for _, j := range missAt[s] {
			// The call went out without the output: one more round trip reads the
			// context and writes the recall and the original, which stays.
			back := v.out(j).Tokens + e.opts.RecallOverheadTokens
			l.Misses++
			l.PaidUSD += sd.price.Call(ctx, ctx+back)
			added += back
			v.appends = append(v.appends, appendAt{s, back})
			lastSent = ctx + back
			ctx += back
		}
	}
	l.NetUSD = sd.keepAll.PaidUSD - l.PaidUSD
	return l
}

// bySession groups decided steps by call for one session: step -> positions.
func bySession(e *Evaluator, sd *sessionData, ds []Decision) map[int][]int {
	out := map[int][]int{}
	for j, i := range sd.outs {
		if st := ds[i].Step; st >= 1 && st <= sd.end {
			out[st] = append(out[st], j)
		}
	}
	return out
}

// immediateP applies every decision at its step: the decision level.
type immediateP struct{ at map[int][]int }

func (p *immediateP) stub(v *view) []int { return p.at[v.s] }

// regimeP makes decisions pending prunes and lets the planner apply them: the
// applied level, as the advisor does live.
type regimeP struct {
	at      map[int][]int
	ds      []Decision
	pending []int // positions, ascending
}

func (e *Evaluator) regime(sd *sessionData, ds []Decision) policy {
	return &regimeP{at: bySession(e, sd, ds), ds: ds}
}

func (p *regimeP) stub(v *view) []int {
	for _, j := range p.at[v.s] {
		if k, found := slices.BinarySearch(p.pending, j); !found {
			p.pending = slices.Insert(p.pending, k, j)
		}
	}
	if len(p.pending) == 0 {
		return nil
	}
	e, sd := v.e, v.sd
	o := e.opts
	in := planner.Input{
		Context: v.ctx, Budget: o.Budget, HardLimit: o.HardLimit,
		LowWater:     int(o.LowWaterFraction * float64(o.Budget)),
		LeastRewrite: int(ceil(o.RewriteFraction * float64(o.Budget))),
		Cold:         sd.cold[v.s-1], Remaining: o.Estimator.Remaining(v.s),
		Read: sd.price.Read(), Premium: max(sd.price.Write()-sd.price.Read(), 0), PayFactor: o.PayFactor,
		PriceForced: o.PriceForced,
	}
	if !in.Urgent() && !planner.PaysDue(v.s, len(p.pending)) {
		return nil
	}
	in.Pending = make([]planner.Pending, len(p.pending))
	for k, j := range p.pending {
		d := p.ds[sd.outs[j]]
		in.Pending[k] = planner.Pending{Offset: v.offset(j), Saves: max(v.savesOf(j), 1), Keep: clamp01(d.Keep), Rule: d.Rule}
	}
	dec := planner.Plan(in)
	if len(dec.Apply) == 0 {
		return nil
	}
	if o.OnRewrite != nil {
		o.OnRewrite(sd.name, v.s, dec)
	}
	out := make([]int, len(dec.Apply))
	drop := make(map[int]bool, len(dec.Apply))
	for k, a := range dec.Apply {
		out[k] = p.pending[a]
		drop[a] = true
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
// its replay).
type appliedP struct{ at map[int][]int }

func (p *appliedP) stub(v *view) []int { return p.at[v.s] }

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
