package tuning

import (
	"encoding/csv"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/pruneadvisor/pruneadvisor/advisor/fitted"
)

// dumpRowsHead is rows.csv's header after the features: the raw signals the
// features are computed from (cards.Signals), for features tried outside Go.
var dumpRowsHead = []string{"s_step", "s_age", "s_tokens", "s_chars", "s_action", "s_uses", "s_last_use_ago", "s_names",
	"s_path_idle", "s_path_reads", "s_runs", "s_recent_uses", "s_is_error", "s_edited_since", "s_live", "s_live_undigested",
	"s_live_plain", "s_live_phrase", "s_live_path", "s_live_dotted", "s_live_digits", "s_live_code", "s_live_other"}

// Dump writes the training set into dir (created when missing) as two CSV
// files, for probing other models and features outside Go (fit's hidden
// --dump-rows flag; docs/EVALUATION.md shows a probe):
//
//   - rows.csv, one line per training row, in Train's order: out (its output's line
//     in outputs.csv, from 0), ask_step, session, used (the label, 0 or 1), every
//     feature of fitted.Features by name, then the raw signals (dumpRowsHead);
//   - outputs.csv, one line per output of the replay, what calibrate's
//     decision-level figures need: out, session, key, tokens, step, candidate_from,
//     end_step, rule_dead_at, stub_tokens, uses (the steps of its counting uses,
//     space-separated: a row is used exactly when its output has a use at a step >=
//     ask_step), held (per use, 1 when the advisor's stub digest holds it:
//     calibrate.Output.Held) and agent (its session's, calibrate.Calls.Agent).
//
// Errors: os.MkdirAll's and os.Create's; a write's, naming the file.
func (t *TrainingSet) Dump(dir string) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	head := append(append([]string{"out", "ask_step", "session", "used"}, fitted.FeatureNames()...), dumpRowsHead...)
	var v []float64
	err := writeCSV(filepath.Join(dir, "rows.csv"), head, len(t.Rows), func(i int) []string {
		r, s := &t.Rows[i], &t.Rows[i].Signals
		rec := []string{strconv.Itoa(t.RowOut[i]), strconv.Itoa(t.RowStep[i]), r.Session, b01(r.Used)}
		v = fitted.Vector(v, s)
		for _, x := range v {
			rec = append(rec, strconv.FormatFloat(x, 'g', -1, 64))
		}
		rec = append(rec, strconv.Itoa(s.Step), strconv.Itoa(s.Age), strconv.Itoa(s.Tokens), strconv.Itoa(s.Chars), s.Action,
			strconv.Itoa(s.Uses), strconv.Itoa(s.LastUseAgo), strconv.Itoa(s.Names), strconv.Itoa(s.PathIdle),
			strconv.Itoa(s.PathReads), strconv.Itoa(s.Runs), strconv.Itoa(s.RecentUses), b01(s.IsError), b01(s.EditedSince),
			strconv.Itoa(s.Live), strconv.Itoa(s.LiveUndigested))
		for _, n := range s.LiveShapes {
			rec = append(rec, strconv.Itoa(n))
		}
		return rec
	})
	if err != nil {
		return err
	}
	head = []string{"out", "session", "key", "tokens", "step", "candidate_from", "end_step", "rule_dead_at", "stub_tokens", "uses", "held", "agent"}
	agents := make(map[string]string, len(t.Calls))
	for _, s := range t.Calls {
		agents[s.Name] = s.Agent
	}
	return writeCSV(filepath.Join(dir, "outputs.csv"), head, len(t.Outs), func(i int) []string {
		o := &t.Outs[i]
		uses, held := make([]string, len(o.Uses)), make([]string, len(o.Uses))
		for k, u := range o.Uses {
			uses[k], held[k] = strconv.Itoa(u), b01(k < len(o.Held) && o.Held[k])
		}
		return []string{strconv.Itoa(i), o.Session, o.Key, strconv.Itoa(o.Tokens), strconv.Itoa(o.Step), strconv.Itoa(o.CandidateFrom),
			strconv.Itoa(o.EndStep), strconv.Itoa(o.RuleDeadAt), strconv.Itoa(o.StubTokens), strings.Join(uses, " "), strings.Join(held, " "), agents[o.Session]}
	})
}

// writeCSV writes a CSV file at path: head, then record(i) for i in [0, n).
func writeCSV(path string, head []string, n int, record func(i int) []string) error {
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	w := csv.NewWriter(f)
	w.Write(head)
	for i := 0; i < n; i++ {
		w.Write(record(i))
	}
	w.Flush()
	err = w.Error()
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("%s: %w", path, err)
	}
	return nil
}

// b01 is "1" for true, "0" for false.
func b01(b bool) string {
	if b {
		return "1"
	}
	return "0"
}
