package calibrate

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"slices"
	"text/tabwriter"
)

// ScorerInput is one scorer's replay records: the same outputs as the report's base
// outputs, with this scorer's asks.
type ScorerInput struct {
	Name    string   // scorer name as stored, e.g. "lexical", "ollama:qwen2.5:0.5b"
	Outputs []Output // one record per base output (any order)
}

// ScorerReport is the calibration of one scorer.
type ScorerReport struct {
	Scorer      string      `json:"scorer"`
	Reliability Reliability `json:"reliability"`
	Sweep       []Result    `json:"sweep"` // one per cutoff, in cutoff order
	// Random holds the random baseline at the prune rate of each sweep entry (same
	// index, same cutoff).
	Random         []Result       `json:"random"`
	Recommendation Recommendation `json:"recommendation"`
}

// Report is a whole calibration: baselines and scorers over the same outputs.
type Report struct {
	Options    Options        `json:"options"`
	TargetMiss float64        `json:"target_miss"`
	Objective  Objective      `json:"objective"`
	Outputs    int            `json:"outputs"`
	Sessions   int            `json:"sessions"`
	Baselines  []Result       `json:"baselines"` // keep-all, rules, recency-N…, oracle
	Scorers    []ScorerReport `json:"scorers"`
}

// ReportConfig selects what NewReport computes. The zero value of each field means
// its default.
type ReportConfig struct {
	Options Options   // simulation settings; zero value: DefaultOptions()
	Cutoffs []float64 // cutoffs swept, each in [0,1]; nil: DefaultCutoffs()
	Recency []int     // recency windows; nil: DefaultRecency
	// TargetMiss is the miss-rate target of the recommendation, in [0,1]; 0 is a
	// valid target (no misses at all), so there is no default: set it.
	TargetMiss float64
	Objective  Objective // what the recommendation maximises; "": ObjectiveNet
}

// NewReport evaluates the baselines over base (asks ignored) and, for every scorer,
// its reliability table, its sweep over the cutoffs (sorted ascending), random at
// the prune rate of each cutoff, and the recommended cutoff. A scorer without a
// qualifying cutoff gets a Recommendation with None set; that is not an error. It
// fails (ErrInvalid, ErrNoSession) on invalid options, records, cutoffs, target or
// objective, and when a scorer's outputs are not the base outputs (same keys, and
// the same fields other than Asks).
func NewReport(base []Output, sessions []Session, scorers []ScorerInput, cfg ReportConfig) (Report, error) {
	opts := cfg.Options
	if opts == (Options{}) {
		opts = DefaultOptions()
	}
	targetMiss := cfg.TargetMiss
	if math.IsNaN(targetMiss) || targetMiss < 0 || targetMiss > 1 {
		return Report{}, fmt.Errorf("%w: target miss rate %v outside [0,1]", ErrInvalid, targetMiss)
	}
	ob := cfg.Objective
	if ob == "" {
		ob = ObjectiveNet
	}
	if ob != ObjectiveNet && ob != ObjectiveTokenSteps {
		return Report{}, fmt.Errorf("%w: objective %q", ErrInvalid, ob)
	}
	cutoffs, recency := cfg.Cutoffs, cfg.Recency
	if cutoffs == nil {
		cutoffs = DefaultCutoffs()
	}
	cutoffs = slices.Clone(cutoffs)
	slices.Sort(cutoffs)
	for _, c := range cutoffs {
		if math.IsNaN(c) || c < 0 || c > 1 {
			return Report{}, fmt.Errorf("%w: cutoff %v outside [0,1]", ErrInvalid, c)
		}
	}
	be, err := NewEvaluator(base, sessions, opts)
	if err != nil {
		return Report{}, fmt.Errorf("base outputs: %w", err)
	}
	rep := Report{Options: opts, TargetMiss: targetMiss, Objective: ob, Outputs: len(base), Sessions: len(be.sessions), Baselines: be.Baselines(recency)}
	index := map[[2]string]int{}
	for i, o := range base {
		index[[2]string{o.Session, o.Key}] = i
	}
	for _, sc := range scorers {
		if len(sc.Outputs) != len(base) {
			return Report{}, fmt.Errorf("%w: scorer %q: %d outputs, base has %d", ErrInvalid, sc.Name, len(sc.Outputs), len(base))
		}
		for _, o := range sc.Outputs {
			i, ok := index[[2]string{o.Session, o.Key}]
			if !ok {
				return Report{}, fmt.Errorf("%w: scorer %q: output %q of session %q is not in the base outputs", ErrInvalid, sc.Name, o.Key, o.Session)
			}
			if !sameOutput(o, base[i]) {
				return Report{}, fmt.Errorf("%w: scorer %q: output %q of session %q differs from the base record beyond its asks", ErrInvalid, sc.Name, o.Key, o.Session)
			}
		}
		ev, err := NewEvaluator(sc.Outputs, sessions, opts)
		if err != nil {
			return Report{}, fmt.Errorf("scorer %q: %w", sc.Name, err)
		}
		sr := ScorerReport{Scorer: sc.Name, Reliability: ReliabilityOf(ev.outs, opts.Bins), Sweep: ev.Sweep(sc.Name, cutoffs)}
		for _, r := range sr.Sweep {
			sr.Random = append(sr.Random, ev.Random(r))
		}
		rec, err := RecommendBy(sr.Sweep, targetMiss, ob)
		if err != nil && !errors.Is(err, ErrNoCutoff) {
			return Report{}, fmt.Errorf("scorer %q: %w", sc.Name, err)
		}
		sr.Recommendation = rec
		rep.Scorers = append(rep.Scorers, sr)
	}
	return rep, nil
}

// sameOutput compares every field but Asks.
func sameOutput(a, b Output) bool {
	return a.Session == b.Session && a.Key == b.Key && a.Tokens == b.Tokens && a.Step == b.Step &&
		a.CandidateFrom == b.CandidateFrom && a.EndStep == b.EndStep && a.RuleDeadAt == b.RuleDeadAt &&
		slices.Equal(a.Uses, b.Uses)
}

// WriteText writes the report as plain-text tables: baselines, then per scorer the
// reliability table, the sweep (with random at equal prune rate) and the
// recommendation. Money is in US dollars.
func (r Report) WriteText(w io.Writer) error {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	p := r.Options.Prices
	fmt.Fprintf(tw, "%d outputs in %d sessions; budget %d tokens, hard limit %d, rewrite at %.0f%% of budget\n",
		r.Outputs, r.Sessions, r.Options.Budget, r.Options.HardLimit, 100*r.Options.RewriteFraction)
	fmt.Fprintf(tw, "prices per Mtok: input $%.2f, cached $%.2f, cache write %.2fx input; recall overhead %d tokens\n\n",
		p.InputPerMTok, p.CachedInputPerMTok, p.CacheWriteFactor, p.RecallOverheadTokens)
	header := "pruner\tcutoff\tpruned\tprune rate\tmisses\tmiss rate\ttoken-steps\tshare\trewrites\tnet $\t\n"
	row := func(x Result) {
		c := "-"
		if x.Cutoff >= 0 {
			c = fmt.Sprintf("%.2f", x.Cutoff)
		}
		fmt.Fprintf(tw, "%s\t%s\t%d\t%.3f\t%d\t%.3f\t%d\t%.3f\t%d\t%.4f\t\n",
			x.Name, c, x.Pruned, x.PruneRate, x.Misses, x.MissRate, x.TokenSteps, x.SavedShare(), x.Rewrites, x.NetUSD)
	}
	fmt.Fprint(tw, "baselines\n"+header)
	for _, b := range r.Baselines {
		row(b)
	}
	for _, s := range r.Scorers {
		rel := s.Reliability
		fmt.Fprintf(tw, "\nscorer %s: %d asks (%d without score), %d used later; Brier %.4f, AUC %.4f\n", s.Scorer, rel.N, rel.Failed, rel.Used, rel.Brier, rel.AUC)
		fmt.Fprint(tw, "bin\tn\tused later\trate\tmean score\t\n")
		for _, b := range rel.Bins {
			fmt.Fprintf(tw, "[%.2f,%.2f)\t%d\t%d\t%.3f\t%.3f\t\n", b.Lo, b.Hi, b.N, b.Used, b.Rate, b.MeanScore)
		}
		fmt.Fprint(tw, "\n"+header)
		for i, x := range s.Sweep {
			row(x)
			if i < len(s.Random) {
				row(s.Random[i])
			}
		}
		rec := s.Recommendation
		if rec.None {
			fmt.Fprintf(tw, "recommended cutoff: none (%s)\n", rec.Reason)
		} else {
			fmt.Fprintf(tw, "recommended cutoff: %.2f (%s)\n", rec.Cutoff, rec.Reason)
		}
	}
	return tw.Flush()
}

// MarshalJSON writes NaN Brier and AUC (no examples, or one class only) as null.
func (r Reliability) MarshalJSON() ([]byte, error) {
	type plain Reliability
	nan := func(f float64) *float64 {
		if math.IsNaN(f) {
			return nil
		}
		return &f
	}
	return json.Marshal(struct {
		plain
		Brier *float64 `json:"brier"`
		AUC   *float64 `json:"auc"`
	}{plain(r), nan(r.Brier), nan(r.AUC)})
}
