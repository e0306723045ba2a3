package layers

import (
	"bytes"
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

const module = "github.com/pruneadvisor/pruneadvisor"

// domain lists the packages that must link no HTTP stack, no model client and no
// plotting (issue 15; HELPERS.md "House style"): the store's adapter and the
// offline pipeline included (replay, calibrate and tuning, which reads a store
// through its own interface and leaves plotting to the commands), since what
// they need from a scorer (its request-size estimate) comes through an
// interface; report, which renders the report and live pages from the domain's
// structures (the command writes the one, server serves the other); and the
// tool-call classification and the token counter that left transcript (issue
// 36).
var domain = []string{"storage", "replay", "calibrate", "tuning", "advisor", "planner", "rules", "cards", "evidence", "backoff", "recall", "wire", "report",
	"toolcall", "tokencount"}

// forbidden are the import paths (or path prefixes, ending in "/") no domain package
// may depend on, directly or not.
var forbidden = []string{"net/http", "github.com/ollama/ollama/", "gonum.org/v1/plot/", module + "/advisor/ollama"}

// TestDomainImports runs `go list -deps` on each domain package: none may depend on
// a forbidden package, and none but storage itself (and the commands and the
// server, which are not domain packages) may depend on storage.
func TestDomainImports(t *testing.T) {
	if _, err := exec.LookPath("go"); err != nil {
		t.Skip("no go command")
	}
	for _, p := range domain {
		t.Run(p, func(t *testing.T) {
			out, err := exec.Command("go", "list", "-deps", "-f", "{{.ImportPath}}", "../../"+p).CombinedOutput()
			if err != nil {
				t.Fatalf("go list -deps ./%s: %v\n%s", p, err, out)
			}
			deps := strings.Fields(string(out))
			if len(deps) < 2 {
				t.Fatalf("go list -deps ./%s listed %d packages: %q", p, len(deps), out)
			}
			for _, d := range deps {
				for _, f := range forbidden {
					if d == f || d == strings.TrimSuffix(f, "/") || strings.HasSuffix(f, "/") && strings.HasPrefix(d, f) {
						t.Errorf("%s depends on %s", p, d)
					}
				}
				if p != "storage" && d == module+"/storage" {
					t.Errorf("domain package %s depends on storage", p)
				}
			}
		})
	}
}

// replayOnly lists what replay must not depend on (issue 36): it replays sessions
// into records, and turning records into calibrations, training rows and
// schedule comparisons is tuning's, on top of calibrate.
var replayOnly = []string{module + "/calibrate", module + "/tuning"}

// TestReplayOnlyReplays runs `go list -deps` on replay: neither calibrate nor
// tuning may be among its dependencies, directly or not.
func TestReplayOnlyReplays(t *testing.T) {
	if _, err := exec.LookPath("go"); err != nil {
		t.Skip("no go command")
	}
	out, err := exec.Command("go", "list", "-deps", "-f", "{{.ImportPath}}", "../../replay").CombinedOutput()
	if err != nil {
		t.Fatalf("go list -deps ./replay: %v\n%s", err, out)
	}
	deps := strings.Fields(string(out))
	if !slices.Contains(deps, module+"/replay") {
		t.Fatalf("go list -deps ./replay did not list replay itself: %q", out)
	}
	for _, d := range deps {
		if slices.Contains(replayOnly, d) {
			t.Errorf("replay depends on %s", d)
		}
	}
}

// perStep lists the packages on the per-step path (docs/DESIGN.md "Per-step pipeline"):
// the advisor and its scorers (the fitted one it ships with, the lexical
// baseline, the Ollama scorer it asks), the planner, the rules and the tool-call
// classification they read, the cards, the use history, the proxy's routing table
// (every proxied request is routed) and recall (every recall call the agent
// makes).
var perStep = []string{"advisor", "advisor/fitted", "advisor/lexical", "advisor/ollama", "planner", "rules", "toolcall", "cards", "evidence", "wire", "recall"}

// perRequest lists the files outside those packages that run on every proxied
// request: the proxy's handlers, forwarding, record queue and ledger, and the
// request-body readers, their message cache, the token counter (with the tool
// definitions' count) and the rewrite.
// (The session-file readers run once per file in replay, and New once per process.)
var perRequest = []string{
	"server/proxy.go", "server/forward.go", "server/records.go", "server/batch.go", "server/ledger.go",
	"server/usage.go", "server/sidecar.go", "server/sessions.go", "server/encoding.go",
	"transcript/body.go", "transcript/anthropic.go", "transcript/openai.go", "transcript/responses.go",
	"transcript/geminiapi.go", "transcript/rewrite.go", "tokencount/count.go", "tokencount/tools.go",
}

// maxLines is the longest a function on the per-step path may be, from its func
// line to its closing brace (HELPERS.md: "Functions on the per-step path stay under
// about 60 lines: name the phases").
const maxLines = 60

// TestPerStepFunctionLength parses the non-test files of the per-step packages and
// the per-request files, and fails listing every function (or method) longer than
// maxLines lines.
func TestPerStepFunctionLength(t *testing.T) {
	fset := token.NewFileSet()
	funcs := 0
	var files []string
	for _, p := range perStep {
		matched, err := filepath.Glob(filepath.Join("..", "..", p, "*.go"))
		if err != nil || len(matched) == 0 {
			t.Fatalf("no Go files in %s: %v", p, err)
		}
		files = append(files, matched...)
	}
	for _, f := range perRequest {
		files = append(files, filepath.Join("..", "..", f))
	}
	for _, file := range files {
		if strings.HasSuffix(file, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(fset, file, nil, parser.SkipObjectResolution)
		if err != nil {
			t.Fatal(err)
		}
		for _, d := range f.Decls {
			fd, ok := d.(*ast.FuncDecl)
			if !ok || fd.Body == nil {
				continue
			}
			funcs++
			n := fset.Position(fd.End()).Line - fset.Position(fd.Pos()).Line + 1
			if n > maxLines {
				t.Errorf("%s: %s is %d lines (at most %d)", fset.Position(fd.Pos()), funcName(fd), n, maxLines)
			}
		}
	}
	if funcs < 100 {
		t.Fatalf("only %d functions parsed: the packages moved?", funcs)
	}
}

// funcName is "Recv.Name" for a method, "Name" for a function.
func funcName(fd *ast.FuncDecl) string {
	if fd.Recv == nil || len(fd.Recv.List) == 0 {
		return fd.Name.Name
	}
	typ := fd.Recv.List[0].Type
	if s, ok := typ.(*ast.StarExpr); ok {
		typ = s.X
	}
	if id, ok := typ.(*ast.Ident); ok {
		return id.Name + "." + fd.Name.Name
	}
	return fd.Name.Name
}

// maxTranscriptLines bounds the non-test lines of transcript and its subfolders
// (issue 36: the session model, the readers and the request-body fast path, 12.8k
// lines with five jobs before tool-call classification, token counting, the
// frequency sketch and the wide-text decoding left it).
const maxTranscriptLines = 9000

// TestTranscriptSize counts the lines (newlines, as wc -l does) of every non-test
// Go file under transcript/ and fails at maxTranscriptLines or more: a new job
// gets a package of its own.
func TestTranscriptSize(t *testing.T) {
	lines, files := 0, 0
	err := filepath.WalkDir(filepath.Join("..", "..", "transcript"), func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() || !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
			return err
		}
		data, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		lines += bytes.Count(data, []byte("\n"))
		files++
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if files < 20 {
		t.Fatalf("only %d Go files under transcript/: the package moved?", files)
	}
	if lines >= maxTranscriptLines {
		t.Errorf("transcript holds %d non-test lines in %d files (at most %d): move a whole job out", lines, files, maxTranscriptLines-1)
	}
}

// scorerFree lists the scorer packages that must not link the transcript readers,
// and transcriptVia the module packages through which they still do: cards, whose
// New, Build and ReactionOf build a card from transcript's ToolOutput and Message.
// The scorers' own code counts tokens with tokencount, not transcript (issue 36);
// when cards builds its cards from a view of its own, transcriptVia empties and
// the scorers stop depending on transcript at all.
var (
	scorerFree    = []string{"advisor/ollama"}
	transcriptVia = []string{"cards"}
)

// TestScorerWithoutTranscript runs `go list -deps` on each scorerFree package: of
// the module's packages it depends on, only those of transcriptVia may import
// transcript (or a package under it), and each of those must still do (else the
// list is out of date).
func TestScorerWithoutTranscript(t *testing.T) {
	if _, err := exec.LookPath("go"); err != nil {
		t.Skip("no go command")
	}
	for _, p := range scorerFree {
		t.Run(p, func(t *testing.T) {
			out, err := exec.Command("go", "list", "-deps", "-f", "{{.ImportPath}} {{join .Imports \" \"}}", "../../"+p).CombinedOutput()
			if err != nil {
				t.Fatalf("go list -deps ./%s: %v\n%s", p, err, out)
			}
			seen, via := map[string]bool{}, map[string]bool{}
			for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
				f := strings.Fields(line)
				if len(f) == 0 || !strings.HasPrefix(f[0], module+"/") || isTranscript(f[0]) {
					continue
				}
				pkg := strings.TrimPrefix(f[0], module+"/")
				seen[pkg] = true
				for _, imp := range f[1:] {
					switch {
					case !isTranscript(imp):
					case slices.Contains(transcriptVia, pkg):
						via[pkg] = true
					default:
						t.Errorf("%s depends on %s, which imports %s", p, pkg, imp)
					}
				}
			}
			if !seen[p] {
				t.Fatalf("go list -deps ./%s did not list %s: %q", p, p, out)
			}
			for _, v := range transcriptVia {
				if !via[v] {
					t.Errorf("transcriptVia lists %s, through which %s no longer reaches transcript: take it off", v, p)
				}
			}
		})
	}
}

// isTranscript reports whether import path imp is transcript or a package under it.
func isTranscript(imp string) bool {
	return imp == module+"/transcript" || strings.HasPrefix(imp, module+"/transcript/")
}
