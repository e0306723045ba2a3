package rules

import (
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"github.com/pruneadvisor/pruneadvisor/transcript"
)

func TestDump(t *testing.T) {
	files, _ := filepath.Glob("/work/shared/sessions/*/*")
	out, _ := os.Create("/tmp/dump/out.txt")
	defer out.Close()
	for _, f := range files {
		s, err := transcript.ReadFile(f, transcript.Options{Lenient: true})
		if err != nil {
			fmt.Fprintf(out, "## %s: %v\n", f, err)
			continue
		}
		fmt.Fprintf(out, "## %s %s cwd=%s calls=%d\n", f, s.Format, s.Cwd, len(s.Calls))
		for _, c := range s.Calls {
			cmd := c.Command
			if len(cmd) > 100 { cmd = cmd[:100] }
			fail := ""
			if c.Output != nil && c.Output.Failed() { fail = " FAILED" }
			fmt.Fprintf(out, "%d %s [%s] path=%s range=%s ops=%v%s | %q\n", c.Step, c.Name, c.Action, c.Path, c.Range, len(c.Ops), fail, cmd)
			for _, op := range c.Ops {
				fmt.Fprintf(out, "    op %s %s %s %d\n", op.Action, op.Path, op.Range, len(op.Content))
			}
		}
	}
}

func TestDumpDeaths(t *testing.T) {
	files, _ := filepath.Glob("/work/shared/sessions/*/*")
	out, _ := os.Create("/tmp/dump/deaths.txt")
	defer out.Close()
	for _, f := range files {
		s, err := transcript.ReadFile(f, transcript.Options{Lenient: true})
		if err != nil {
			continue
		}
		ds := Analyze(s)
		sup, dup := 0, 0
		for _, d := range ds {
			if d.Rule == RuleSuperseded { sup++ } else { dup++ }
		}
		fmt.Fprintf(out, "## %s outputs=%d superseded=%d duplicate=%d\n", f, len(s.Outputs()), sup, dup)
		byKey := map[string]*transcript.ToolOutput{}
		for _, o := range s.Outputs() { byKey[o.Key] = o }
		for _, d := range ds {
			o := byKey[d.OutputKey]
			fmt.Fprintf(out, "  %s %s step=%d by=%s step=%d path=%s | %s\n", d.Rule, d.OutputKey, o.Step, d.By, d.Step, d.Path, o.Call.Summary)
		}
	}
}
