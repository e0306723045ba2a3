package main

import (
	"errors"
	"fmt"
	"log/slog"
	"os"

	"github.com/spf13/cobra"

	"github.com/pruneadvisor/pruneadvisor/mcpserver"
	"github.com/pruneadvisor/pruneadvisor/recall"
	"github.com/pruneadvisor/pruneadvisor/storage"
)

func mcpCmd(e *env) *cobra.Command {
	var (
		db       string
		toolName string
	)
	c := &cobra.Command{
		Use:   "mcp",
		Short: "Serve the recall tool over MCP on stdin/stdout",
		Long: `mcp runs a Model Context Protocol server on stdin/stdout offering one tool, the
recall tool: given the id a stub names, it returns the pruned output's original,
byte for byte, from the same database the proxy or advise command stored it
in, or with "lines" ("200-250") or "grep" (a Go regular expression, "context" lines
around each match) only those lines, numbered as grep -n prints them. Register it
with an agent, for example Claude Code:

  claude mcp add pruneadvisor -- pruneadvisor mcp --db ~/.local/share/pruneadvisor/pruneadvisor.db

Claude Code then shows the tool as mcp__pruneadvisor__recall: start the proxy with
--recall-tool mcp__pruneadvisor__recall so the stubs name it that way. An unknown or
malformed id, or a bad range or pattern, is a tool error the agent can read, not a
protocol failure; a line that
is not JSON gets a JSON-RPC parse error (-32700) and the server reads on. Logs go to
stderr.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if _, err := os.Stat(db); err == nil {
				// A folder or an empty file is not a database to make.
				if err := requireStore(db, hintMadeByAny); err != nil {
					return err
				}
			} else if !storage.IsPostgres(db) {
				// A missing file is made (the proxy may not have stored a stub yet),
				// and said: a mistyped --db would otherwise answer every recall
				// with "no pruned output".
				fmt.Fprintf(e.stderr, "pruneadvisor: mcp: no database at %s yet: making it; recalls find only what a proxy stores there (serve and wrap with the same --db)\n", safe(db))
			}
			store, closeStore, err := openStoreReading(cmd.Context(), e.stderr, db, noteRecallsNotRecorded)
			if err != nil {
				return err
			}
			defer closeStore()
			svc := recall.New(store)
			svc.Logger = e.log
			if store.ReadOnly() {
				svc.Logger = slog.New(slog.DiscardHandler) // the note said it: not recorded
			}
			logger := newLogger(e.stderr, slog.LevelWarn)
			err = mcpserver.Run(cmd.Context(), svc, mcpserver.Options{ToolName: toolName, Logger: logger},
				mcpserver.Transport(e.stdin, e.stdout, logger))
			if errors.Is(err, mcpserver.ErrToolName) {
				return usageError{fmt.Errorf("--tool-name: %w", err)}
			}
			return err
		},
	}
	c.Flags().StringVar(&db, "db", defaultDBPath(), "store the stubs were stored in: an SQLite file, or a postgres:// URL")
	c.Flags().StringVar(&toolName, "tool-name", recall.DefaultToolName, "the tool's name as the server lists it")
	return c
}
