package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/pruneadvisor/pruneadvisor/internal/browsertest"
)

// TestReportBrowser replays the repository's sessions into a fresh store, prints
// calibrate --json for it and writes its report, then loads the report in
// Chromium: the page has the plots (the Pareto front, the reliability diagram, one
// context plot per session), names every replayed session, shows the same figures
// as calibrate --json (every figure checked field by field, and the overview's
// keep-all, advisor, baselines and anchors at every budget present), its filter
// works, it raises no console error and requests nothing but itself.
// -update-screenshots writes docs/report.png.
func TestReportBrowser(t *testing.T) {
	b := browsertest.New(t, nil)
	dir := t.TempDir()
	db := filepath.Join(dir, "r.db")
	repo := filepath.Join("..", "..")
	code, _, stderr := runCLI(t, "replay", "--scorer", "fitted", "--db", db, "--progress", "none",
		filepath.Join(repo, "testdata", "replay"), filepath.Join(repo, "testdata", "codex"), filepath.Join(repo, "testdata", "sessions"))
	if code != 0 {
		t.Fatalf("replay: exit %d\n%s", code, stderr)
	}
	code, js, stderr := runCLI(t, "calibrate", "--db", db, "--json")
	if code != 0 {
		t.Fatalf("calibrate --json: exit %d\n%s", code, stderr)
	}
	out := filepath.Join(dir, "report.html")
	code, stdout, stderr := runCLI(t, "report", "--db", db, "--out", out)
	if code != 0 {
		t.Fatalf("report: exit %d\n%s", code, stderr)
	}
	if !strings.HasPrefix(stdout, "wrote "+out+": 4 sessions, ") {
		t.Errorf("report printed %q", stdout)
	}
	dec := json.NewDecoder(strings.NewReader(js))
	dec.UseNumber()
	var doc any
	if err := dec.Decode(&doc); err != nil {
		t.Fatal(err)
	}
	var cal struct {
		Sessions []string `json:"sessions"`
		Report   struct {
			Scorers []struct{ Scorer string } `json:"scorers"`
			Budgets []struct {
				Baselines []struct{ Name string } `json:"baselines"`
				Anchors   []struct{ Name string } `json:"anchors"`
			} `json:"budgets"`
		} `json:"report"`
	}
	if err := json.Unmarshal([]byte(js), &cal); err != nil {
		t.Fatal(err)
	}
	if len(cal.Sessions) != 4 {
		t.Fatalf("calibrate --json names %d sessions, want 4", len(cal.Sessions))
	}

	url := "file://" + out
	b.Open(url)
	var page struct {
		Sessions     []string `json:"sessions"`
		Pareto       int      `json:"pareto"`
		ParetoDots   int      `json:"paretoDots"`
		Reliability  int      `json:"reliability"`
		ContextPlots int      `json:"contextPlots"`
		ContextLines int      `json:"contextLines"`
	}
	b.Eval(`({
		sessions: Array.from(document.querySelectorAll('#sessions h3.path')).map(e => e.textContent),
		pareto: document.querySelectorAll('#pareto svg polyline').length,
		paretoDots: document.querySelectorAll('#pareto svg circle').length,
		reliability: document.querySelectorAll('#reliability svg circle').length,
		contextPlots: document.querySelectorAll('#sessions figure.chart svg').length,
		contextLines: document.querySelectorAll('#sessions figure.chart svg polyline').length,
	})`, &page)
	if diff := cmp.Diff(cal.Sessions, page.Sessions); diff != "" {
		t.Errorf("sessions named on the page (-calibrate --json +page):\n%s", diff)
	}
	nb := len(cal.Report.Budgets)
	if page.Pareto < len(cal.Report.Scorers) || page.ParetoDots < len(cal.Report.Budgets[0].Baselines)+len(cal.Report.Budgets[0].Anchors) || page.Reliability == 0 {
		t.Errorf("plots: %d Pareto lines (want >= %d scorers), %d Pareto dots, %d reliability dots", page.Pareto, len(cal.Report.Scorers), page.ParetoDots, page.Reliability)
	}
	if page.ContextPlots != 4 || page.ContextLines != 3*4 {
		t.Errorf("%d context plots with %d lines, want 4 with 3 each (keep-all, advisor, oracle)", page.ContextPlots, page.ContextLines)
	}

	fields := b.Fields()
	seen := browsertest.CheckFields(t, doc, fields)
	t.Logf("%d figures checked against calibrate --json", len(fields))
	want := []string{"report.sessions", "report.outputs", "report.target_miss", "digest_budget_recommended"}
	for i := range nb {
		p := "report.budgets." + strconv.Itoa(i)
		want = append(want, p+".budget", p+".keep_all_usd", p+".advisor.applied.net_usd", p+".advisor.applied.paid_usd", p+".advisor.applied.misses")
		for j := range cal.Report.Budgets[i].Baselines {
			want = append(want, p+".baselines."+strconv.Itoa(j)+".applied.paid_usd")
		}
		for j := range cal.Report.Budgets[i].Anchors {
			want = append(want, p+".anchors."+strconv.Itoa(j)+".applied.paid_usd", p+".anchors."+strconv.Itoa(j)+".miss_rate")
		}
	}
	for i := range cal.Report.Scorers {
		want = append(want, "report.scorers."+strconv.Itoa(i)+".reliability.n")
	}
	for _, p := range want {
		if !seen[p] {
			t.Errorf("the page shows no figure %s", p)
		}
	}

	var rows [2]int
	b.Eval(`(() => {
		const i = document.querySelector('input[data-filter="stub-table"]');
		const visible = () => document.querySelectorAll('#stub-table tbody tr:not([hidden])').length;
		const all = visible();
		i.value = 'no stub says this';
		i.dispatchEvent(new Event('input'));
		const none = visible();
		i.value = '';
		i.dispatchEvent(new Event('input'));
		return [all, none];
	})()`, &rows)
	if rows[0] == 0 || rows[1] != 0 {
		t.Errorf("stub filter: %d rows, %d after filtering on a text no stub holds; want some, then none", rows[0], rows[1])
	}
	if errs := b.ConsoleErrors(); len(errs) > 0 {
		t.Errorf("console errors:\n%s", strings.Join(errs, "\n"))
	}
	if diff := cmp.Diff([]string{url}, b.Requests()); diff != "" {
		t.Errorf("requests (-want +got):\n%s", diff)
	}
	b.Screenshot("report.png", 2600)
}

// TestReportNoStore: a store that does not exist is exit 1, naming the fix.
func TestReportNoStore(t *testing.T) {
	db := filepath.Join(t.TempDir(), "none.db")
	code, _, stderr := runCLI(t, "report", "--db", db, "--out", filepath.Join(t.TempDir(), "r.html"))
	if code != exitError || !strings.Contains(stderr, "pruneadvisor replay --db") {
		t.Errorf("exit %d, stderr %q; want 1 and the replay hint", code, stderr)
	}
	if _, err := os.Stat(db); !os.IsNotExist(err) {
		t.Errorf("report created %s", db)
	}
}
