package tuning

import (
	"errors"
	"io/fs"
	"path/filepath"

	"github.com/pruneadvisor/pruneadvisor/advisor"
)

// WriteCutoff sets, in the advisor config file at path, the cutoff of scorer
// (scorer_cutoffs, and cutoff itself for the lexical scorer and others without a
// default entry), the size exponent and cap it was chosen under (size_exponent,
// size_cap_tokens: the replay's, since a cutoff means a threshold only with
// them) and, when
// factor > 0, the remaining-steps factor the replayed sessions fit (capped at
// 100), keeping its other fields (a missing file starts from the defaults).
// Errors: UpdateConfig's.
func WriteCutoff(path, scorer string, cutoff, exponent float64, capTokens int, factor float64) error {
	return UpdateConfig(path, func(cfg *advisor.Config) {
		cfg.SizeExponent, cfg.SizeCapTokens = exponent, capTokens
		if cfg.ScorerCutoffs == nil {
			cfg.ScorerCutoffs = map[string]float64{}
		}
		cfg.ScorerCutoffs[scorer] = cutoff
		if _, ok := advisor.DefaultConfig().ScorerCutoffs[scorer]; !ok {
			cfg.Cutoff = cutoff
		}
		if factor > 0 {
			cfg.RemainingFactor = min(factor, 100)
		}
	})
}

// WriteModelFile sets model_file in the advisor config file at path (created
// with the defaults when missing, its other fields kept) to model's absolute
// path, so every advising command run with that config scores with that model.
// Errors: filepath.Abs's, UpdateConfig's.
func WriteModelFile(path, model string) error {
	abs, err := filepath.Abs(model)
	if err != nil {
		return err
	}
	return UpdateConfig(path, func(cfg *advisor.Config) { cfg.ModelFile = abs })
}

// UpdateConfig applies change to the advisor config file at path and writes it
// back (advisor.WriteConfig), keeping its other fields; a missing file starts
// from advisor.DefaultConfig. Errors: the file's read or validation error
// (advisor.LoadConfig, naming it), or the write's.
func UpdateConfig(path string, change func(*advisor.Config)) error {
	cfg, err := advisor.LoadConfig(path)
	if err != nil {
		if !errors.Is(err, fs.ErrNotExist) {
			return err
		}
		cfg = advisor.DefaultConfig()
	}
	change(&cfg)
	return advisor.WriteConfig(path, cfg)
}
