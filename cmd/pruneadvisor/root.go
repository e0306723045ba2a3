package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"strings"
	"syscall"

	"github.com/spf13/cobra"
)

// Exit codes, documented in docs/COMMANDS.md.
const (
	exitOK    = 0 // success
	exitError = 1 // the command failed (bad input, storage, upstream); the message says why
	exitUsage = 2 // bad flags or arguments
	// exitNoScores: replay stored sessions of which every ask failed (the scorer
	// gave no score at all, e.g. Ollama stopped or the model not pulled).
	exitNoScores = 3
)

// usageError marks errors that are the caller's wording (exit 2).
type usageError struct{ error }

// codedError is an error with its own exit code.
type codedError struct {
	error
	code int
}

// env carries the process's streams to every subcommand.
type env struct {
	stdin  io.Reader
	stdout io.Writer
	stderr io.Writer
	log    *slog.Logger
}

// printJSON writes v to stdout as --json prints every result: indented by two
// spaces, one value, a newline after it.
func (e *env) printJSON(v any) error {
	enc := json.NewEncoder(e.stdout)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}

// run executes the CLI with args and returns the exit code.
func run(args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	e := &env{stdin: stdin, stdout: stdout, stderr: stderr,
		log: newLogger(stderr, slog.LevelWarn)}
	root := &cobra.Command{
		Use:           "pruneadvisor",
		Short:         "Keep coding agents' context lean: prune old tool outputs to recallable stubs",
		SilenceUsage:  true,
		SilenceErrors: true,
	}
	root.SetOut(stdout)
	root.SetErr(stderr)
	root.SetIn(stdin)
	root.SetArgs(args)
	root.SetFlagErrorFunc(func(_ *cobra.Command, err error) error { return usageError{err} })
	for _, c := range commands(e) {
		if c.Args != nil {
			c.Args = withUsage(c.Args)
		}
		root.AddCommand(c)
	}
	stopProfile := startProfile(stderr)
	err := root.ExecuteContext(ctx)
	stopProfile()
	if err == nil {
		return exitOK
	}
	var ae agentExit
	if errors.As(err, &ae) {
		return ae.code // the wrapped agent's own exit code; it said why itself
	}
	fmt.Fprintln(stderr, "pruneadvisor:", err)
	var ue usageError
	if errors.As(err, &ue) || isCobraUsage(err) {
		return exitUsage
	}
	var ce codedError
	if errors.As(err, &ce) {
		return ce.code
	}
	return exitError
}

// withUsage wraps a command's argument check so that its error (cobra's "accepts
// 1 arg(s), received 0") says how the command is called, as a usageError (exit
// 2): "accepts 1 arg(s), received 0; usage: pruneadvisor advise FILE [flags]".
func withUsage(check cobra.PositionalArgs) cobra.PositionalArgs {
	return func(c *cobra.Command, args []string) error {
		if err := check(c, args); err != nil {
			return usageError{fmt.Errorf("%w; usage: %s", err, c.UseLine())}
		}
		return nil
	}
}

// isCobraUsage recognises cobra's own argument errors.
func isCobraUsage(err error) bool {
	msg := err.Error()
	for _, p := range []string{"unknown command", "unknown flag", "unknown shorthand", "accepts ", "requires at least", "invalid argument"} {
		if strings.Contains(msg, p) {
			return true
		}
	}
	return false
}

// commands lists the subcommands; each lives in its own file.
func commands(e *env) []*cobra.Command {
	return []*cobra.Command{
		inspectCmd(e),
		adviseCmd(e),
		recallCmd(e),
		ledgerCmd(e),
		replayCmd(e),
		calibrateCmd(e),
		reportCmd(e),
		fitCmd(e),
		backoffCmd(e),
		serveCmd(e),
		mcpCmd(e),
		wrapCmd(e),
	}
}

// newLogger returns the CLI's stderr logger: logfmt lines at level and above,
// without the timestamp (a person reads them as they happen; serve's access logs
// keep theirs, see serve.go).
func newLogger(w io.Writer, level slog.Level) *slog.Logger {
	return slog.New(slog.NewTextHandler(w, &slog.HandlerOptions{
		Level: level,
		ReplaceAttr: func(groups []string, a slog.Attr) slog.Attr {
			if len(groups) == 0 && a.Key == slog.TimeKey {
				return slog.Attr{}
			}
			return a
		},
	}))
}
