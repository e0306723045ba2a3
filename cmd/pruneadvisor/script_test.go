package main

import (
	"encoding/json"
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/rogpeppe/go-internal/testscript"

	"github.com/pruneadvisor/pruneadvisor/advisor"
)

// updateScripts makes TestScript rewrite the golden files its scripts compare with.
var updateScripts = flag.Bool("update-scripts", false, "rewrite testscript golden files in place")

// TestMain lets testscript run this test binary as the pruneadvisor command
// (`exec pruneadvisor ...` in scripts), and as the fake agent of wrap's tests
// (fakeAgentMain, wrap_test.go).
func TestMain(m *testing.M) {
	testscript.Main(m, map[string]func(){
		"pruneadvisor": func() { os.Exit(run(os.Args[1:], os.Stdin, os.Stdout, os.Stderr)) },
		fakeAgentName:  fakeAgentMain,
	})
}

// TestScript runs every script in testdata/script (*.txtar). Scripts see $REPO,
// the repository root, and $SHARED, the real sessions (../shared/sessions from the
// root), as absolute paths; $PRUNEADVISOR_DB points into the script's $WORK so no
// script touches the user's database. Run with -update-scripts to rewrite failing cmp
// golden files in place.
func TestScript(t *testing.T) {
	repo, err := filepath.Abs(filepath.Join("..", ".."))
	if err != nil {
		t.Fatal(err)
	}
	testscript.Run(t, testscript.Params{
		Dir:                 filepath.Join("testdata", "script"),
		RequireExplicitExec: true,
		UpdateScripts:       *updateScripts,
		Cmds: map[string]func(ts *testscript.TestScript, neg bool, args []string){
			"setrecallid":   cmdSetRecallID,
			"ledgertraffic": cmdLedgerTraffic, // ledger.txtar, from ledger_script_test.go
			// newcomer.txtar's commands, from reliability_script_test.go.
			"cleancopy": reliabilityCmds["cleancopy"],
			"freeport":  reliabilityCmds["freeport"],
			"waithttp":  reliabilityCmds["waithttp"],
			"setmatch":  reliabilityCmds["setmatch"],
		},
		Setup: func(env *testscript.Env) error {
			env.Setenv("REPO", repo)
			env.Setenv("SHARED", filepath.Join(filepath.Dir(repo), "shared", "sessions"))
			env.Setenv("PRUNEADVISOR_DB", filepath.Join(env.WorkDir, "pruneadvisor.db"))
			return scriptGoEnv(env) // the go command, offline, for newcomer.txtar's `go run`
		},
	})
}

// cmdSetRecallID is the script command `setrecallid FILE SUMMARY`: FILE holds the
// JSON of `advise --json`; it sets $RECALLID to the recall id of the pruned plan item
// whose summary is SUMMARY (the rest of the arguments, joined by spaces).
func cmdSetRecallID(ts *testscript.TestScript, neg bool, args []string) {
	if neg || len(args) < 2 {
		ts.Fatalf("usage: setrecallid FILE SUMMARY")
	}
	var out struct {
		Plan advisor.Plan `json:"plan"`
	}
	if err := json.Unmarshal([]byte(ts.ReadFile(args[0])), &out); err != nil {
		ts.Fatalf("setrecallid: %v", err)
	}
	want := strings.Join(args[1:], " ")
	for _, it := range out.Plan.Items {
		if it.Summary == want && it.Decision == advisor.DecisionPruned {
			ts.Setenv("RECALLID", it.RecallID)
			return
		}
	}
	ts.Fatalf("setrecallid: no pruned item with summary %q", want)
}
