package main

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"text/tabwriter"

	"github.com/spf13/cobra"

	"github.com/pruneadvisor/pruneadvisor/internal/textcut"
	"github.com/pruneadvisor/pruneadvisor/rules"
	"github.com/pruneadvisor/pruneadvisor/transcript"
)

// inspectReport is one file's row of `pruneadvisor inspect --json`.
type inspectReport struct {
	File         string         `json:"file"`
	Format       string         `json:"format"`
	Error        string         `json:"error,omitempty"`
	Steps        int            `json:"steps"`
	Messages     int            `json:"messages"`
	Calls        int            `json:"calls"`
	ByTool       map[string]int `json:"calls_by_tool"`
	ByAction     map[string]int `json:"calls_by_action"`
	OutputTokens int            `json:"output_tokens"`
	Superseded   []deadRow      `json:"superseded"`
	Duplicates   []deadRow      `json:"duplicates"`
	FreeTokens   int            `json:"tokens_freed"` // tokens of the superseded and duplicate outputs
	Unanswered   []string       `json:"unanswered"`   // call ids without a result
	Orphans      int            `json:"orphan_results"`
	Skipped      int            `json:"skipped_lines"`
	Warnings     []string       `json:"warnings,omitempty"` // the reader's first warnings (skipped lines, repeated ids)
}

// deadRow is one output the rules found dead.
type deadRow struct {
	Key    string `json:"key"`
	Tool   string `json:"tool"`
	Target string `json:"target"`
	Tokens int    `json:"tokens"`
	By     string `json:"by"` // the call that made it dead
}

func inspectCmd(e *env) *cobra.Command {
	var (
		asJSON bool
		strict bool
		format string
	)
	c := &cobra.Command{
		Use:   "inspect FILE...",
		Short: "Summarise sessions: format, steps, tool calls, output tokens, and what the rules find dead",
		Long: `inspect reads each session file (format detected from its content, or --format)
and prints one block per file: the format, steps, tool calls by tool and by action,
tool-output tokens (o200k_base), reads superseded by a later edit and re-read (and by
which call), duplicate outputs, the tokens those would free, and unanswered calls.
inspect is a report, so it reads leniently: malformed lines are skipped, counted and
the first ones named (file:line: what was wrong); --strict fails on the first one
instead, as advise and replay do without --lenient. A file that fails to read is
reported and the others go on; the exit code is 1 if any failed.`,
		Args: cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := checkFormat(format); err != nil {
				return err
			}
			opts := transcript.Options{Format: transcript.Format(format), Lenient: !strict}
			var reports []inspectReport
			failed := 0
			for _, f := range args {
				r := inspectFile(f, opts)
				if r.Error != "" {
					failed++
				}
				reports = append(reports, r)
			}
			if asJSON {
				if err := e.printJSON(reports); err != nil {
					return err
				}
			} else {
				printInspect(e, reports)
			}
			if failed > 0 {
				return fmt.Errorf("%d of %d files could not be read", failed, len(args))
			}
			return nil
		},
	}
	c.Flags().BoolVar(&asJSON, "json", false, "print JSON instead of a table")
	c.Flags().BoolVar(&strict, "strict", false, "fail on the first malformed line instead of skipping and counting")
	c.Flags().StringVar(&format, "format", "", "force a format ("+formatNames()+")")
	return c
}

// checkFormat refuses a --format that names no reader (exit 2, as a bad flag);
// "" is detection.
func checkFormat(format string) error {
	if format == "" || slices.Contains(transcript.Formats(), transcript.Format(format)) {
		return nil
	}
	return usageError{fmt.Errorf("--format %q: want one of %s (or none: detected from the content)", format, formatNames())}
}

func formatNames() string {
	var names []string
	for _, f := range transcript.Formats() {
		names = append(names, string(f))
	}
	return strings.Join(names, ", ")
}

func inspectFile(file string, opts transcript.Options) inspectReport {
	r := inspectReport{File: file, ByTool: map[string]int{}, ByAction: map[string]int{},
		Superseded: []deadRow{}, Duplicates: []deadRow{}, Unanswered: []string{}}
	if fi, err := os.Stat(file); err == nil && fi.IsDir() {
		r.Error = file + " is a directory: inspect reads session files (name them, e.g. " + filepath.Join(file, "*.jsonl") + "; replay reads folders of them)"
		return r
	}
	s, err := transcript.ReadFile(file, opts)
	if err != nil {
		r.Error = err.Error()
		return r
	}
	r.Format = string(s.Format)
	r.Steps = s.Steps()
	r.Messages = len(s.Messages)
	r.Calls = len(s.Calls)
	r.Skipped = s.Skipped
	r.Warnings = firstN(s.Warnings, 3)
	r.Orphans = len(s.Orphans)
	for _, c := range s.Calls {
		r.ByTool[c.Name]++
		r.ByAction[string(c.Action)]++
		if c.Output == nil {
			r.Unanswered = append(r.Unanswered, c.ID)
		}
	}
	byKey := map[string]*transcript.ToolOutput{}
	for _, o := range s.Outputs() {
		r.OutputTokens += o.Tokens
		byKey[o.Key] = o
	}
	for _, d := range rules.Analyze(s) {
		o := byKey[d.OutputKey]
		if o == nil {
			continue
		}
		row := deadRow{Key: d.OutputKey, Tokens: o.Tokens, By: d.By}
		if o.Call != nil {
			row.Tool, row.Target = o.Call.Name, o.Call.Summary
		}
		r.FreeTokens += o.Tokens
		if d.Rule == rules.RuleDuplicate {
			r.Duplicates = append(r.Duplicates, row)
		} else {
			r.Superseded = append(r.Superseded, row)
		}
	}
	return r
}

func printInspect(e *env, reports []inspectReport) {
	var out bytes.Buffer
	defer func() { _, _ = e.stdout.Write(trimLines(out.Bytes())) }()
	for i, r := range reports {
		if i > 0 {
			fmt.Fprintln(&out)
		}
		fmt.Fprintf(&out, "%s\n", safe(r.File))
		if r.Error != "" {
			fmt.Fprintf(&out, "  error: %s\n", safe(r.Error))
			continue
		}
		tw := tabwriter.NewWriter(&out, 2, 4, 2, ' ', 0)
		fmt.Fprintf(tw, "  format\t%s\n", r.Format)
		fmt.Fprintf(tw, "  steps\t%d\t(%d messages)\n", r.Steps, r.Messages)
		fmt.Fprintf(tw, "  tool calls\t%d\t%s\n", r.Calls, countList(r.ByAction))
		fmt.Fprintf(tw, "  by tool\t\t%s\n", countList(r.ByTool))
		fmt.Fprintf(tw, "  output tokens\t%d\n", r.OutputTokens)
		fmt.Fprintf(tw, "  superseded reads\t%d\t%d tokens\n", len(r.Superseded), sumTokens(r.Superseded))
		fmt.Fprintf(tw, "  duplicates\t%d\t%d tokens\n", len(r.Duplicates), sumTokens(r.Duplicates))
		fmt.Fprintf(tw, "  rules would free\t%d tokens\t%.1f%% of output tokens\n", r.FreeTokens, pct(r.FreeTokens, r.OutputTokens))
		fmt.Fprintf(tw, "  unanswered calls\t%d\t%s\n", len(r.Unanswered), strings.Join(safeAll(firstN(r.Unanswered, 5)), " "))
		if r.Orphans > 0 {
			fmt.Fprintf(tw, "  results without a call\t%d\n", r.Orphans)
		}
		if r.Skipped > 0 {
			fmt.Fprintf(tw, "  malformed lines skipped\t%d\n", r.Skipped)
		}
		for _, w := range r.Warnings {
			fmt.Fprintf(tw, "  warning\t%s\n", safe(textcut.RunesEllipsis(w, 150)))
		}
		tw.Flush()
		for _, d := range r.Superseded {
			fmt.Fprintf(&out, "    superseded %s %s (%d tokens) by %s\n", safe(d.Tool), safe(d.Target), d.Tokens, safe(d.By))
		}
		for _, d := range r.Duplicates {
			fmt.Fprintf(&out, "    duplicate  %s %s (%d tokens) by %s\n", safe(d.Tool), safe(textcut.RunesEllipsis(d.Target, 60)), d.Tokens, safe(d.By))
		}
	}
}

func countList(m map[string]int) string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Slice(keys, func(i, j int) bool {
		if m[keys[i]] != m[keys[j]] {
			return m[keys[i]] > m[keys[j]]
		}
		return keys[i] < keys[j]
	})
	parts := make([]string, len(keys))
	for i, k := range keys {
		parts[i] = fmt.Sprintf("%s %d", safe(k), m[k])
	}
	return strings.Join(parts, ", ")
}

func sumTokens(rows []deadRow) int {
	n := 0
	for _, r := range rows {
		n += r.Tokens
	}
	return n
}

func pct(a, b int) float64 {
	if b == 0 {
		return 0
	}
	return 100 * float64(a) / float64(b)
}

func firstN(s []string, n int) []string {
	if len(s) > n {
		return append(append([]string(nil), s[:n]...), fmt.Sprintf("(+%d more)", len(s)-n))
	}
	return s
}
