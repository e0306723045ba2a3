package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"strings"

	"github.com/spf13/cobra"

	"github.com/pruneadvisor/pruneadvisor/recall"
)

func recallCmd(e *env) *cobra.Command {
	var (
		db     string
		asJSON bool
		part   recall.Part
	)
	c := &cobra.Command{
		Use:   "recall ID",
		Short: "Print a pruned output's original, byte for byte, or some of its lines",
		Long: `recall looks up the original of a pruned output by the id its stub names
(for example o_754312282865) and writes it to stdout exactly as it was. The recall is
recorded as later-use evidence; on a database that cannot be written (a read-only
file system) it is opened read-only, and the recall is served but not recorded.

--lines and --grep print only part of it, as grep -n does: each line as its number,
':' and its text, and a last line in brackets saying what was shown ("[lines
200-250 of 1234]", "[no line matches ...]"). --lines is N, N-M or N- (to the end),
from 1; --grep a Go (RE2) regular expression, searched within --lines when both are
given; --context N (0-20) adds N lines around each match, as grep -C. At most 2000
lines and 100000 bytes, 2000 bytes a line; the last line says how to ask for more.

Exit code 1 when no pruned output has the id or --db names no database; 2 for an id
not shaped like a recall id, or a bad or empty --lines, --grep or --context (a
--lines start past the last line included).`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := recall.Validate(recall.Args{ID: args[0]}); err != nil {
				return usageError{err}
			}
			for _, name := range []string{"lines", "grep"} {
				if f := cmd.Flags().Lookup(name); f.Changed && f.Value.String() == "" {
					return usageError{fmt.Errorf("--%s \"\": empty; leave --%s out for %s", name, name, recall.LeftOut(name))}
				}
			}
			if err := part.Validate(); err != nil {
				return usageError{flagError(err)}
			}
			if err := requireStore(db, hintMadeByAny); err != nil {
				return err
			}
			store, closeStore, err := openStoreReading(cmd.Context(), e.stderr, db, noteRecallsNotRecorded)
			if err != nil {
				return err
			}
			defer closeStore()
			svc := recall.New(store)
			if store.ReadOnly() {
				svc.Logger = slog.New(slog.DiscardHandler) // the note said it: not recorded
			}
			text, err := svc.RecallPart(cmd.Context(), args[0], part)
			if errors.Is(err, recall.ErrBadRange) {
				return usageError{flagError(err)} // a start past the last line
			}
			if errors.Is(err, recall.ErrNotFound) {
				where := ""
				if !cmd.Flags().Changed("db") {
					where = "; without --db: a serve or wrap started with another --db keeps its originals there, so give recall the same --db, or set $PRUNEADVISOR_DB for both"
				}
				return fmt.Errorf("%w in %s (a replay's stubs name ids too, but a replay keeps no originals: recall serves those advise, serve and wrap stored%s)", err, safe(store.Path()), where)
			}
			if err != nil {
				return err
			}
			if asJSON {
				return json.NewEncoder(e.stdout).Encode(recallJSON{ID: args[0], Lines: part.Lines, Grep: part.Grep, Context: part.Context, Text: text})
			}
			_, err = io.WriteString(e.stdout, text)
			if err != nil {
				return fmt.Errorf("write: %w", err)
			}
			return nil
		},
	}
	c.Flags().StringVar(&db, "db", defaultDBPath(), "store the stubs were stored in: an SQLite file, or a postgres:// URL")
	c.Flags().BoolVar(&asJSON, "json", false, `print {"id","text"} as JSON (and "lines", "grep", "context" when given)`)
	c.Flags().StringVar(&part.Lines, "lines", "", "print only these lines, numbered: N, N-M or N- (to the end)")
	c.Flags().StringVar(&part.Grep, "grep", "", "print only the lines matching this Go (RE2) regular expression, numbered")
	c.Flags().IntVarP(&part.Context, "context", "C", 0, "with --grep: lines to print before and after each match (0-20)")
	return c
}

// recallJSON is what recall --json prints.
type recallJSON struct {
	ID      string `json:"id"`
	Lines   string `json:"lines,omitempty"`
	Grep    string `json:"grep,omitempty"`
	Context int    `json:"context,omitempty"`
	Text    string `json:"text"`
}

// flagError words a bad part's error with its flag's name: recall's errors name the
// argument as the recall tool has it (lines "0"), the command's flag is --lines.
// The result wraps err.
func flagError(err error) error {
	msg := err.Error()
	for _, name := range []string{"lines", "grep", "context"} {
		msg = strings.Replace(msg, ": "+name+" ", ": --"+name+" ", 1)
	}
	return renamedError{msg: msg, err: err}
}

// renamedError is err with another text.
type renamedError struct {
	msg string
	err error
}

func (e renamedError) Error() string { return e.msg }
func (e renamedError) Unwrap() error { return e.err }
