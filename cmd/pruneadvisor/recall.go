package main

import (
	"encoding/json"
	"fmt"
	"io"
	"log/slog"

	"github.com/spf13/cobra"

	"github.com/pruneadvisor/pruneadvisor/recall"
)

func recallCmd(e *env) *cobra.Command {
	var (
		db     string
		asJSON bool
	)
	c := &cobra.Command{
		Use:   "recall ID",
		Short: "Print a pruned output's original, byte for byte",
		Long: `recall looks up the original of a pruned output by the id its stub names
(for example o_7f3a9c0b1d) and writes it to stdout exactly as it was. The recall is
recorded as later-use evidence; on a database that cannot be written (a read-only
file system) it is opened read-only, and the recall is served but not recorded.
Exit code 1 when no pruned output has the id or --db names no database.`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := requireStore(db, hintMadeByAny); err != nil {
				return err
			}
			store, closeStore, err := openStoreReading(cmd.Context(), e.stderr, db)
			if err != nil {
				return err
			}
			defer closeStore()
			svc := recall.New(store)
			if store.ReadOnly() {
				svc.Logger = slog.New(slog.DiscardHandler) // the note said it: not recorded
			}
			text, err := svc.Recall(cmd.Context(), args[0])
			if err != nil {
				return err
			}
			if asJSON {
				return json.NewEncoder(e.stdout).Encode(map[string]string{"id": args[0], "text": text})
			}
			_, err = io.WriteString(e.stdout, text)
			if err != nil {
				return fmt.Errorf("write: %w", err)
			}
			return nil
		},
	}
	c.Flags().StringVar(&db, "db", defaultDBPath(), "store the stubs were stored in: an SQLite file, or a postgres:// URL")
	c.Flags().BoolVar(&asJSON, "json", false, `print {"id","text"} as JSON`)
	return c
}
