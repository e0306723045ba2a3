// Package fitted is the fitted scorer (docs/DESIGN.md steps 5 and "The embedded
// default"): a logistic regression over features every card carries (features.go),
// trained by `pruneadvisor fit` on the evidence of a replay store (train.go), saved
// as a versioned JSON model file (this file). The binary embeds default weights
// fitted on ../shared/corpus (default.go), so the advisor has a real scorer with no
// model server; a user can fit their own on their sessions.
//
// The regression is p(used at or after this step) = σ(b + Σ w_i · (x_i - mean_i) / scale_i),
// σ the logistic function, x the feature vector of the card's signals. A version 2
// model (the embedded default among them: `fit --trees`) adds gradient-boosted trees
// over the same features, and its keep-probability is the mean of the regression's
// and the trees'; a Blend mixes in a second model fitted on another label
// (Model.Predict). It is a probability of later use, so it is a keep-probability as
// docs/DESIGN.md means it, and the cutoff applies to it directly.
package fitted

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"slices"
	"strings"

	"github.com/pruneadvisor/pruneadvisor/cards"
	"github.com/pruneadvisor/pruneadvisor/evidence"
)

// Model file identity.
const (
	// Format is the "format" field of every model file.
	Format = "pruneadvisor.fitted"
	// Version is the version of a model file of the logistic regression alone
	// over standardised features.
	Version = 1
	// VersionBoost is the version of a model file that also holds gradient-boosted
	// trees (Model.Boost): the keep-probability is the mean of the regression's and
	// the trees'. This package reads and writes both.
	VersionBoost = 2
)

// Sentinel errors (wrapped, with the file and field).
var (
	// ErrModel means a model file is not ours, of an unknown version, or invalid.
	ErrModel = errors.New("invalid fitted model")
	// ErrTooFew means a training set lacks positive or negative rows.
	ErrTooFew = errors.New("too few rows to fit")
)

// Model is a fitted model as its JSON file holds it.
type Model struct {
	Format   string    `json:"format"`   // Format
	Version  int       `json:"version"`  // Version
	Features []string  `json:"features"` // feature names, FeatureNames() order
	Mean     []float64 `json:"mean"`     // per feature: subtracted before scaling
	Scale    []float64 `json:"scale"`    // per feature: divisor (> 0)
	Weights  []float64 `json:"weights"`  // per feature, on standardised inputs
	Bias     float64   `json:"bias"`
	// Training summarises the rows it was fitted on.
	Training Training `json:"training"`
	// CV holds the cross-validated figures, when fit computed them.
	CV *CV `json:"cv,omitempty"`
	// Words is the plain-word statistics of the sessions the model was fitted on
	// (evidence.Background: which plain words agents write anyway), that the
	// later-use evidence — the labels the model learnt from and the use history it
	// reads — is found under. Model files written before version 1 had it lack it:
	// BackgroundOr then gives the embedded default's.
	Words *evidence.Background `json:"words,omitempty"`
	// Boost is the gradient-boosted trees of a version 2 file (fit --trees N), nil
	// in a version 1 file: Predict then averages their probability with the
	// regression's.
	Boost *Boost `json:"boost,omitempty"`
	// Blend, when set, is a second model Predict mixes in at BlendWeight (0 <
	// BlendWeight < 1): (1 - BlendWeight) x this model's keep-probability +
	// BlendWeight x Blend's. fit trains this model on the miss label (a later
	// use its stub's digest would not hold: Row.Miss) and Blend on the use label
	// (Row.Used), blended at Options.Blend (docs/EVALUATION.md, "The miss label
	// blended with the use label"). Blend has no Blend of its own.
	Blend       *Model  `json:"blend,omitempty"`
	BlendWeight float64 `json:"blend_weight,omitempty"`

	// filled lists the features this program has that the file lacked (Parse
	// weighted them 0: a file written before they existed).
	filled []string
}

// Filled returns the features the model file lacked, which Parse added with
// weight 0 (mean 0, scale 1), so that the model predicts as it did when it was
// fitted; nil when it had them all.
func (m *Model) Filled() []string { return m.filled }

// addedLater are the features added after model files were first written (issue
// 30): a file without them still loads, with them weighted 0 (fillMissing).
var addedLater = map[string]bool{"log_outputs_since": true, "log_tokens_after": true, "never_x_log_outputs_since": true,
	"log_live": true, "no_live": true, "log_live_undigested": true, "no_live_undigested": true,
	"log_live_plain": true, "log_live_phrase": true, "log_live_path": true, "log_live_dotted": true,
	"log_live_digits": true, "log_live_code": true, "log_live_other": true}

// fillMissing adds, with weight 0, the features of addedLater that m lacks, when
// m's features are this program's in order less some (a file written before
// they existed); anything else (unknown names, another order, mismatched arrays)
// is left for Validate to refuse.
func (m *Model) fillMissing() {
	want := FeatureNames()
	if len(m.Features) >= len(want) || len(m.Mean) != len(m.Features) || len(m.Scale) != len(m.Features) || len(m.Weights) != len(m.Features) {
		return
	}
	var f []string
	var mean, scale, w []float64
	var filled []string
	j := 0
	for _, name := range want {
		if j < len(m.Features) && m.Features[j] == name {
			f, mean, scale, w = append(f, name), append(mean, m.Mean[j]), append(scale, m.Scale[j]), append(w, m.Weights[j])
			j++
			continue
		}
		if !addedLater[name] {
			return // a feature every model file has: refused by Validate
		}
		f, mean, scale, w = append(f, name), append(mean, 0), append(scale, 1), append(w, 0)
		filled = append(filled, name)
	}
	if j != len(m.Features) {
		return // names this program does not know, or another order
	}
	m.Features, m.Mean, m.Scale, m.Weights, m.filled = f, mean, scale, w, filled
}

// BackgroundOr returns the model's word statistics, or fallback and true when the
// model file has none (an older file).
func (m *Model) BackgroundOr(fallback *evidence.Background) (*evidence.Background, bool) {
	if m.Words != nil {
		return m.Words, false
	}
	return fallback, true
}

// Training is the summary of a training set.
type Training struct {
	Source    string  `json:"source,omitempty"` // what was replayed (paths as given)
	Sessions  int     `json:"sessions"`
	Rows      int     `json:"rows"` // asks with signals
	Positives int     `json:"positives"`
	Negatives int     `json:"negatives"`
	Lambda    float64 `json:"lambda"` // L2 penalty (mean log-loss + lambda/2 ||w||^2)
	// Settings is the replay settings hash the rows were recorded under.
	Settings string `json:"settings,omitempty"`
}

// CV is the cross-validation by session (no session on both sides of a fold).
type CV struct {
	Folds   int       `json:"folds"`
	AUC     float64   `json:"auc"`
	Brier   float64   `json:"brier"`
	PerFold []FoldFit `json:"per_fold"`
	// TokenStepsShare is the decision-level token-steps saved at the best cutoff with
	// miss rate <= TargetMiss, out of fold, divided by the oracle's; MissRate and
	// Cutoff are that cutoff's.
	TargetMiss      float64 `json:"target_miss"`
	Cutoff          float64 `json:"cutoff"`
	MissRate        float64 `json:"miss_rate"`
	TokenStepsShare float64 `json:"token_steps_share_of_oracle"`
}

// FoldFit is one fold's held-out figures.
type FoldFit struct {
	Sessions int     `json:"sessions"`
	Rows     int     `json:"rows"`
	AUC      float64 `json:"auc"`
	Brier    float64 `json:"brier"`
}

// Validate checks that m is a model this version reads: the format, the version,
// exactly the feature list of this program (in order; missing and extra names are
// listed), one finite mean, positive finite scale and finite weight per feature, and
// a finite bias. Errors wrap ErrModel and name the field.
func (m *Model) Validate() error {
	bad := func(field, format string, args ...any) error {
		return fmt.Errorf("%w: %s: %s", ErrModel, field, fmt.Sprintf(format, args...))
	}
	switch {
	case m.Format != Format:
		return bad("format", "%q, want %q (not a pruneadvisor model file)", m.Format, Format)
	case m.Version != Version && m.Version != VersionBoost:
		return bad("version", "%d, this program reads versions %d and %d", m.Version, Version, VersionBoost)
	case m.Version == VersionBoost && m.Boost == nil:
		return bad("boost", "missing: a version %d file holds trees", VersionBoost)
	case m.Version == Version && m.Boost != nil:
		return bad("boost", "present in a version %d file (trees are version %d)", Version, VersionBoost)
	}
	want := FeatureNames()
	if !slices.Equal(m.Features, want) {
		return bad("features", "%s", featureListDiff(m.Features, want))
	}
	n := len(want)
	for _, arr := range []struct {
		name string
		v    []float64
	}{{"mean", m.Mean}, {"scale", m.Scale}, {"weights", m.Weights}} {
		if len(arr.v) != n {
			return bad(arr.name, "%d values for %d features", len(arr.v), n)
		}
		for i, x := range arr.v {
			if math.IsNaN(x) || math.IsInf(x, 0) || arr.name == "scale" && x <= 0 {
				return bad(fmt.Sprintf("%s[%d] (%s)", arr.name, i, want[i]), "%v is not a finite number%s", x, map[bool]string{true: " > 0", false: ""}[arr.name == "scale"])
			}
		}
	}
	if math.IsNaN(m.Bias) || math.IsInf(m.Bias, 0) {
		return bad("bias", "%v is not a finite number", m.Bias)
	}
	if m.Boost != nil {
		if err := m.Boost.validate(n); err != nil {
			return err
		}
	}
	if m.Words != nil {
		if err := m.Words.Validate(); err != nil {
			return fmt.Errorf("%w: words: %w", ErrModel, err)
		}
	}
	return m.validateBlend()
}

// validateBlend checks the Blend: none and BlendWeight 0, or a valid model
// without a Blend of its own and 0 < BlendWeight < 1.
func (m *Model) validateBlend() error {
	switch {
	case m.Blend == nil && m.BlendWeight != 0:
		return fmt.Errorf("%w: blend_weight: %v without a blend", ErrModel, m.BlendWeight)
	case m.Blend == nil:
		return nil
	case math.IsNaN(m.BlendWeight) || m.BlendWeight <= 0 || m.BlendWeight >= 1:
		return fmt.Errorf("%w: blend_weight: %v, want a number between 0 and 1", ErrModel, m.BlendWeight)
	case m.Blend.Blend != nil:
		return fmt.Errorf("%w: blend: a blend of its own (one level only)", ErrModel)
	}
	if err := m.Blend.Validate(); err != nil {
		return fmt.Errorf("blend: %w", err)
	}
	return nil
}

// featureListDiff says how a model file's feature list got differs from this
// program's, want: the names missing from it, those it has that this program does
// not know, or, with the same names, that their order differs.
func featureListDiff(got, want []string) string {
	var missing, extra []string
	for _, f := range want {
		if !slices.Contains(got, f) {
			missing = append(missing, f)
		}
	}
	for _, f := range got {
		if !slices.Contains(want, f) {
			extra = append(extra, f)
		}
	}
	msg := "not this program's feature list"
	if len(missing) > 0 {
		msg += "; missing " + strings.Join(missing, ", ")
	}
	if len(extra) > 0 {
		msg += "; unknown " + strings.Join(extra, ", ")
	}
	if len(missing) == 0 && len(extra) == 0 {
		msg += " (same names, another order)"
	}
	return msg
}

// Parse reads a model from JSON (unknown fields refused) and validates it; name is
// used in errors (the file).
func Parse(name string, data []byte) (*Model, error) {
	var m Model
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&m); err != nil {
		return nil, fmt.Errorf("model %s: %w: %v", name, ErrModel, err)
	}
	if _, err := dec.Token(); err != io.EOF {
		return nil, fmt.Errorf("model %s: %w: data after the JSON object", name, ErrModel)
	}
	m.fillMissing()
	if m.Blend != nil {
		m.Blend.fillMissing()
	}
	if err := m.Validate(); err != nil {
		return nil, fmt.Errorf("model %s: %w", name, err)
	}
	return &m, nil
}

// Load reads and validates the model file at path.
func Load(path string) (*Model, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("model: %w", err)
	}
	return Parse(path, data)
}

// Marshal returns the model as indented JSON with a final newline.
func (m *Model) Marshal() ([]byte, error) {
	data, err := json.MarshalIndent(m, "", "  ")
	if err != nil {
		return nil, fmt.Errorf("model: %w", err)
	}
	return append(data, '\n'), nil
}

// Save validates m and writes it to path.
func (m *Model) Save(path string) error {
	if err := m.Validate(); err != nil {
		return err
	}
	data, err := m.Marshal()
	if err != nil {
		return err
	}
	if err := os.WriteFile(path, data, 0o644); err != nil {
		return fmt.Errorf("model: %w", err)
	}
	return nil
}

// Predict returns the keep-probability of a card with signals s: the
// regression's σ(z), or with trees (Boost) the mean of σ(z) and the trees'
// σ(Base + Σ tree(x)); with a Blend, mixed with the Blend's at BlendWeight.
func (m *Model) Predict(s *cards.Signals) float64 {
	p := m.predictOne(s)
	if m.Blend != nil {
		p = (1-m.BlendWeight)*p + m.BlendWeight*m.Blend.predictOne(s)
	}
	return p
}

// predictOne is Predict without the Blend.
func (m *Model) predictOne(s *cards.Signals) float64 {
	if m.Boost == nil {
		z := m.Bias
		for i, f := range Features {
			z += m.Weights[i] * (f.f(s) - m.Mean[i]) / m.Scale[i]
		}
		return sigmoid(z)
	}
	var buf [64]float64
	x := Vector(buf[:0], s) // the trees read the features too: computed once
	z := m.Bias
	for i, v := range x {
		z += m.Weights[i] * (v - m.Mean[i]) / m.Scale[i]
	}
	return (sigmoid(z) + sigmoid(m.Boost.logOdds(x))) / 2
}

// sigmoid is the logistic function, computed without overflow.
func sigmoid(z float64) float64 {
	if z >= 0 {
		return 1 / (1 + math.Exp(-z))
	}
	e := math.Exp(z)
	return e / (1 + e)
}
