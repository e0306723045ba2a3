package shell

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func rd(p string, r Range) Op { return Op{Kind: Read, Path: p, Range: r} }
func ed(p string) Op          { return Op{Kind: Edit, Path: p} }
func wr(p, content string) Op { return Op{Kind: Write, Path: p, Content: content} }
func rg(start, end int) Range { return Range{Start: start, End: end} }

// shortName is cmd on one line, cut to 60 runes, for subtest names.
func shortName(cmd string) string {
	r := []rune(strings.Join(strings.Fields(cmd), " "))
	if len(r) > 60 {
		return string(r[:59]) + "…"
	}
	return string(r)
}

// TestAnalyze runs real command lines taken from ../shared/sessions (noted per row)
// through the analysis. toolcall's TestClassifyShell runs ten more through
// Classify, one for each kind and range form.
func TestAnalyze(t *testing.T) {
	const dj = "/testbed/django/db/models/constraints.py"
	tests := []struct {
		src string // which session the command comes from
		cmd string
		dir string
		act Kind
		ops []Op
	}{
		{"django", "cat django/db/models/constraints.py", "/testbed", Read, []Op{rd(dj, Range{})}},
		{"django", "sed -n '329p' django/db/models/constraints.py", "/testbed", Read, []Op{rd(dj, rg(329, 329))}},
		{"django", "cat -A django/db/models/constraints.py | sed -n '130,140p'", "/testbed", Read, []Op{rd(dj, rg(130, 140))}},
		{"django", `sed -i '21a\    violation_error_code = None' django/db/models/constraints.py`, "/testbed", Edit, []Op{ed(dj)}},
		{"django", `sed -i '25s/def __init__(self, \*args, name=None, violation_error_message=None):/def __init__(self, *args, name=None, violation_error_message=None, violation_error_code=None):/' django/db/models/constraints.py`, "/testbed", Edit, []Op{ed(dj)}},
		{"django", "sed -i '301,319d' django/db/models/constraints.py && sed -i '300r unique_constraint_repr.py' django/db/models/constraints.py", "/testbed", Edit, []Op{ed(dj), ed(dj)}},
		{"django", "sed -i '348,$d' django/db/models/constraints.py && cat unique_constraint_validate.py >> django/db/models/constraints.py", "/testbed", Edit, []Op{ed(dj), ed(dj)}},
		{"django", "ls -R | grep \":$\" | head -n 20 && grep -r \"class BaseConstraint\" .", "/testbed", Search, nil},
		{"django", "echo COMPLETE_TASK_AND_SUBMIT_FINAL_OUTPUT && git add -A && git diff --cached", "/testbed", Other, nil},
		{"sympy", "sed -n '340,360p;1270,1290p' sympy/sets/sets.py", "/testbed", Read,
			[]Op{rd("/testbed/sympy/sets/sets.py", rg(340, 360)), rd("/testbed/sympy/sets/sets.py", rg(1270, 1290))}},
		{"sympy", "sed -n '692,800p' sympy/sets/sets.py | grep \"def is_subset\"", "/testbed", Search, nil},
		{"sympy", "head -n 50 sympy/sets/sets.py", "/testbed", Read, []Op{rd("/testbed/sympy/sets/sets.py", rg(1, 50))}},
		{"sympy", "cat <<'EOF' >> reproduce_issue.py\n\nprint(1)\nEOF", "/testbed", Edit, []Op{ed("/testbed/reproduce_issue.py")}},
		{"sympy", "git checkout sympy/sets/sets.py", "/testbed", Other, []Op{ed("/testbed/sympy/sets/sets.py")}},
		{"pytest", "cat -A src/_pytest/reports.py | head -n 230 | tail -n 10", "/testbed", Read, []Op{rd("/testbed/src/_pytest/reports.py", rg(221, 230))}},
		{"pytest", "sed -i '165,186d' src/_pytest/reports.py && sed -i '164r new_disassembled_report.py' src/_pytest/reports.py", "/testbed", Edit,
			[]Op{ed("/testbed/src/_pytest/reports.py"), ed("/testbed/src/_pytest/reports.py")}},
		{"matplotlib", "nl -ba lib/matplotlib/_mathtext.py | sed -n '102,115p'", "/testbed", Read, []Op{rd("/testbed/lib/matplotlib/_mathtext.py", rg(102, 115))}},
		{"matplotlib", "cat lib/matplotlib/mathtext.py | head -n 20", "/testbed", Read, []Op{rd("/testbed/lib/matplotlib/mathtext.py", rg(1, 20))}},
		{"matplotlib", "nl -ba sympy/sets/sets.py | grep -n \"def is_subset\"", "/testbed", Search, nil},
		{"github_issue", "cat /Users/fuchur/Documents/24/git_sync/swe-agent-test-repo/tests/./missing_colon.py", "", Read,
			[]Op{rd("/Users/fuchur/Documents/24/git_sync/swe-agent-test-repo/tests/missing_colon.py", Range{})}},
		{"github_issue", "cat > tests/missing_colon.py << 'EOF'\ndef division(a, b):\n    return a / b\nEOF", "", Write,
			[]Op{wr("tests/missing_colon.py", "def division(a, b):\n    return a / b\n")}},
		{"pi", "sed -i '' 's/main-new/main/g' /Users/badlogic/workspaces/pi-mono/packages/coding-agent/src/cli.ts", "", Edit,
			[]Op{ed("/Users/badlogic/workspaces/pi-mono/packages/coding-agent/src/cli.ts")}},
		{"pi", "sed -n '/^## Philosophy/,/^## Development/p' /Users/badlogic/workspaces/pi-mono/packages/coding-agent/README.md | head -80", "", Read,
			[]Op{rd("/Users/badlogic/workspaces/pi-mono/packages/coding-agent/README.md", unknownRange())}},
		{"pi", "cd packages/coding-agent && npm run build 2>&1 | tail -3", "/p", Other, nil},
		{"pi", "mkdir -p ~/.pi/agent/themes && cp packages/coding-agent/src/theme/dark.json ~/.pi/agent/themes/test.json", "/p", Other,
			[]Op{ed("~/.pi/agent/themes/test.json")}},
		{"pi", "grep -rn \"turn_end\" /Users/badlogic/workspaces/pi-mono/packages/agent/src/ | grep -v \"types.ts\"", "", Search, nil},
		{"pi", "head -50 /Users/badlogic/workspaces/pi-mono/CHANGELOG.md", "", Read, []Op{rd("/Users/badlogic/workspaces/pi-mono/CHANGELOG.md", rg(1, 50))}},
		{"claude", `cd /c/Users/[USER]/.claude-worktrees/M-Claude/unruffled-mcclintock && head -50 CHAT_LOGS-markdown/README.md 2>/dev/null || echo "not found"`, "", Read,
			[]Op{rd("/c/Users/[USER]/.claude-worktrees/M-Claude/unruffled-mcclintock/CHAT_LOGS-markdown/README.md", rg(1, 50))}},
		{"claude", "cd \"C:\\Users\\Mischa\\x\" && git commit -m \"$(cat <<'EOF'\nFix: don't break\n\nCo-Authored-By: Claude\nEOF\n)\"", "", Other, nil},
		{"claude", `echo "" >> .gitignore && echo "# Gitleaks reports" >> .gitignore`, "/Users/u/M", Edit,
			[]Op{ed("/Users/u/M/.gitignore"), ed("/Users/u/M/.gitignore")}},
		{"claude", `ls -la ~/Library/Application\ Support/Raycast/*/shortcuts* 2>/dev/null; ls ~/Library/Application\ Support/Raycast/ 2>/dev/null | head -20`, "", Search, nil},
		{"claude", `mv ~/Applications/Claude-Mw.app ~/Applications/Claude\ Tmux.app`, "", Edit,
			[]Op{ed("~/Applications/Claude-Mw.app"), ed("~/Applications/Claude Tmux.app")}},
		{"gemini", "cat Gemini-Playground/index.html Gemini-Playground/style.css Gemini-Playground/script.js", "/home/m", Read,
			[]Op{rd("/home/m/Gemini-Playground/index.html", Range{}), rd("/home/m/Gemini-Playground/style.css", Range{}), rd("/home/m/Gemini-Playground/script.js", Range{})}},
		{"gemini", "# Create dark.toml\ncat <<EOF > ~/.config/alacritty/dark.toml\n[colors]\nx = \"0x1e1e1e\"\nEOF\n\n# Create light.toml\ncat <<EOF > ~/.config/alacritty/light.toml\ny = $HOME\nEOF\ncp ~/.config/alacritty/dark.toml ~/.config/alacritty/current_theme.toml\n", "", Edit,
			[]Op{wr("~/.config/alacritty/dark.toml", "[colors]\nx = \"0x1e1e1e\"\n"), ed("~/.config/alacritty/light.toml"), ed("~/.config/alacritty/current_theme.toml")}},
		// shapes seen in agents' commands generally
		{"shell", "for f in a.py b.py; do cat $f; done", "/r", Other, nil},
		{"shell", "if [ -f a.py ]; then cat a.py; fi", "/r", Other, nil},
		{"shell", "(cd sub && cat a.py); cat a.py", "/r", Read, []Op{rd("/r/sub/a.py", Range{}), rd("/r/a.py", Range{})}},
		{"shell", "cd $HOME && cat a.py", "/r", Other, nil},
		{"shell", "cat a.py > b.py", "/r", Edit, []Op{ed("/r/b.py")}},
		{"shell", "cat < a.py", "/r", Read, []Op{rd("/r/a.py", Range{})}},
		{"shell", "tee notes.txt <<'EOF'\nhello\nEOF", "/r", Write, []Op{wr("/r/notes.txt", "hello\n")}},
		{"shell", "perl -pi -e 's/a/b/' x.txt y.txt", "/r", Edit, []Op{ed("/r/x.txt"), ed("/r/y.txt")}},
		{"shell", "awk 'NR>=5 && NR<=9' a.py", "/r", Read, []Op{rd("/r/a.py", rg(5, 9))}},
		{"shell", "tail -n +40 a.py | head -n 10", "/r", Read, []Op{rd("/r/a.py", rg(40, 49))}},
		{"shell", "head -c 100 a.py", "/r", Read, []Op{rd("/r/a.py", unknownRange())}},
		{"shell", "tail -f log.txt", "/r", Other, nil},
		{"shell", "bash -lc 'cd src && sed -n \"1,9p\" a.go'", "/r", Read, []Op{rd("/r/src/a.go", rg(1, 9))}},
		{"shell", "sed 's/a/b/' a.py", "/r", Other, nil},
		{"shell", "sed -n '1,5p' a.py b.py", "/r", Other, nil},
		{"shell", "cat a.py |\n  head -n 3 &&\n  cat b.py", "/r", Read, []Op{rd("/r/a.py", rg(1, 3)), rd("/r/b.py", Range{})}},
		{"shell", "diff <(cat a.py) <(cat b.py)", "/r", Other, nil},
		{"shell", "cat a.py | python -c 'import sys; print(len(sys.stdin.read()))'", "/r", Other, nil},
		{"shell", "sed -n '1,10p' a.py > /dev/null", "/r", Other, nil},
		{"shell", "cat a.py 2>&1 | tee copy.txt", "/r", Edit, []Op{ed("/r/copy.txt"), rd("/r/a.py", Range{})}},
		{"shell", "cat 'unterminated", "/r", Other, nil},
	}
	for _, tt := range tests {
		t.Run(tt.src+": "+shortName(tt.cmd), func(t *testing.T) {
			res := Analyze(tt.cmd, tt.dir)
			if got := res.Kind(); got != tt.act {
				t.Errorf("Kind = %s, want %s", got, tt.act)
			}
			if diff := cmp.Diff(tt.ops, res.Ops); diff != "" {
				t.Errorf("Ops (-want +got):\n%s", diff)
			}
		})
	}
}
