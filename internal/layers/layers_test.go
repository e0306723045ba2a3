package layers

import (
	"go/ast"
	"go/parser"
	"go/token"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

const module = "github.com/pruneadvisor/pruneadvisor"

// domain lists the packages that must link no HTTP stack, no model client and no
// plotting (issue 15; HELPERS.md "House style"): the store's adapter and the
// offline pipeline included, since what they need from a scorer (its request-size
// estimate) comes through an interface; and report, which renders the report and
// live pages from the domain's structures (the command writes the one, server
// serves the other).
var domain = []string{"storage", "replay", "calibrate", "advisor", "planner", "rules", "cards", "evidence", "backoff", "recall", "wire", "report"}

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

// perStep lists the packages on the per-step path (DESIGN.md "Per-step pipeline"):
// the advisor and the scorer it ships with, the planner, the rules, the cards and
// the use history.
var perStep = []string{"advisor", "advisor/fitted", "planner", "rules", "cards", "evidence"}

// perRequest lists the files outside those packages that run on every proxied
// request: the proxy's handlers, forwarding, record queue and ledger, and the
// request-body readers, their message cache, the token counter and the rewrite.
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
