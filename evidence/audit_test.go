package evidence_test

import (
	"encoding/csv"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"testing"

	"github.com/pruneadvisor/pruneadvisor/advisor/fitted"
	"github.com/pruneadvisor/pruneadvisor/evidence"
	"github.com/pruneadvisor/pruneadvisor/transcript"
)

// auditRow is one row of ../shared/label-audit/judged.csv (its README gives the
// columns).
type auditRow struct {
	file, key, proof, stratum, verdict string
	outStep, useStep                   int
	laterCarrier                       bool
}

func readAudit(t testing.TB, path string) []auditRow {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Skipf("label audit not found: %v", err)
	}
	defer f.Close()
	recs, err := csv.NewReader(f).ReadAll()
	if err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	col := map[string]int{}
	for i, h := range recs[0] {
		col[h] = i
	}
	var rows []auditRow
	for n, r := range recs[1:] {
		atoi := func(c string) int {
			v, err := strconv.Atoi(r[col[c]])
			if err != nil {
				t.Fatalf("%s: line %d: %s: %v", path, n+2, c, err)
			}
			return v
		}
		rows = append(rows, auditRow{
			file: r[col["session_file"]], key: r[col["output_key"]], proof: r[col["proof"]],
			stratum: r[col["stratum"]], verdict: r[col["verdict"]],
			outStep: atoi("output_step"), useStep: atoi("use_step"),
			laterCarrier: r[col["later_carrier"]] == "yes",
		})
	}
	return rows
}

// auditScore replays the sessions the rows name with bg and returns, per row,
// whether the rule counts a use of the row's output at the row's step.
func auditScore(t testing.TB, root string, rows []auditRow, bg *evidence.Background) []bool {
	t.Helper()
	trackers := map[string]*evidence.Tracker{}
	got := make([]bool, len(rows))
	for i, r := range rows {
		tr := trackers[r.file]
		if tr == nil {
			path := filepath.Join(root, r.file)
			s, err := transcript.ReadFile(path, transcript.Options{Lenient: true})
			if err != nil {
				t.Fatalf("%s: %v", path, err)
			}
			tr = evidence.NewTracker()
			tr.Background = bg
			for _, m := range s.Messages {
				if _, err := tr.Add(m); err != nil {
					t.Fatalf("%s: %v", path, err)
				}
			}
			trackers[r.file] = tr
		}
		for _, u := range tr.Uses(r.key) {
			if u.Step == r.useStep && u.Counts() {
				got[i] = true
			}
		}
	}
	return got
}

// auditFigures is the share of REAL rows kept and of NOISE rows dropped; REAL rows
// whose name a later output also carried are left out of both (their credit may
// move to that output), and so are UNSURE rows.
func auditFigures(rows []auditRow, kept []bool) (realKept, noiseDropped float64, nReal, nNoise int, lines []string) {
	var k, d int
	for i, r := range rows {
		switch {
		case r.verdict == "REAL" && !r.laterCarrier:
			nReal++
			if kept[i] {
				k++
			} else {
				lines = append(lines, fmt.Sprintf("REAL dropped: %s step %d %s %s", r.file, r.useStep, r.key, r.proof))
			}
		case r.verdict == "NOISE":
			nNoise++
			if !kept[i] {
				d++
			} else {
				lines = append(lines, fmt.Sprintf("NOISE kept: %s step %d %s %s", r.file, r.useStep, r.key, r.proof))
			}
		}
	}
	return float64(k) / float64(nReal), float64(d) / float64(nNoise), nReal, nNoise, lines
}

// TestLabelAudit checks the later-use rule against people's judgment (docs/DESIGN.md
// "The rule is checked against people's judgment"): it replays the sessions
// ../shared/label-audit/judged.csv names, under the embedded default model's
// word statistics, and prints the share of REAL rows the rule keeps (a counting
// use of the row's output at the row's step) and of NOISE rows it drops. REAL
// rows whose name a later output also carried are left out of both (their credit
// may move to that output), and so are UNSURE rows. The rule must keep at least
// 90% of the REAL rows and drop at least 80% of the NOISE rows. The figures are in
// docs/EVALUATION.md ("Later-use evidence").
func TestLabelAudit(t *testing.T) {
	rows := readAudit(t, filepath.Join("..", "..", "shared", "label-audit", "judged.csv"))
	if len(rows) != 120 {
		t.Fatalf("%d rows, want the 120 of the audit", len(rows))
	}
	bg := fitted.DefaultBackground()
	if bg == nil {
		t.Fatal("the embedded model has no word statistics")
	}
	kept := auditScore(t, filepath.Join("..", "..", "shared", "sessions"), rows, bg)
	realKept, noiseDropped, nReal, nNoise, lines := auditFigures(rows, kept)
	for _, l := range lines {
		t.Log(l)
	}
	fmt.Printf("label audit: REAL kept %.1f%% of %d, NOISE dropped %.1f%% of %d\n", 100*realKept, nReal, 100*noiseDropped, nNoise)
	if nReal != 34 || nNoise != 76 {
		t.Errorf("%d REAL rows without a later carrier and %d NOISE rows, want 34 and 76 (the README's counts)", nReal, nNoise)
	}
	if realKept < 0.90 {
		t.Errorf("REAL kept %.1f%%, want at least 90%%", 100*realKept)
	}
	if noiseDropped < 0.80 {
		t.Errorf("NOISE dropped %.1f%%, want at least 80%%", 100*noiseDropped)
	}
}
