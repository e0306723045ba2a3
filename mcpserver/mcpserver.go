// Package mcpserver offers pruneadvisor's recall tool over the Model Context Protocol
// (github.com/modelcontextprotocol/go-sdk), so an agent that speaks MCP can get a
// pruned output back without any change to its code (docs/DESIGN.md "Recall"). The
// tool's input schema is recall.ToolSchema, generated from recall.Args with
// invopop/jsonschema.
package mcpserver

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"regexp"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/pruneadvisor/pruneadvisor/recall"
)

// ErrToolName means the tool name is not one MCP allows: 1 to 128 characters from
// A-Z, a-z, 0-9, '_', '-' and '.'.
var ErrToolName = errors.New("invalid MCP tool name")

// ServerName is the implementation name the server announces. Claude Code prefixes
// its tools with the name the server was added under (`claude mcp add pruneadvisor
// ...` gives mcp__pruneadvisor__recall).
const ServerName = "pruneadvisor"

var toolNameRe = regexp.MustCompile(`^[A-Za-z0-9_.-]{1,128}$`)

// Options configure New.
type Options struct {
	// ToolName is the tool's name as the server lists it. Default
	// recall.DefaultToolName ("recall").
	ToolName string
	// Version is the version the server announces. Default "dev".
	Version string
	// Logger receives the SDK's log lines and one line per failed recall. Default
	// slog.Default().
	Logger *slog.Logger
}

// New returns an MCP server offering one tool that serves svc.RecallPart: the
// arguments are recall.Args ({"id"}, and optionally "lines", "grep" and "context"
// for part of the original). A call with a malformed or unknown id, a bad line range,
// pattern or context (recall.ErrBadRange, ErrBadPattern, ErrBadContext), or one the
// store cannot answer, returns a tool error (CallToolResult.IsError with the reason
// as text), never a protocol error, so the agent reads what went wrong. Errors:
// ErrToolName for a bad Options.ToolName.
func New(svc *recall.Service, opts Options) (*mcp.Server, error) {
	name := opts.ToolName
	if name == "" {
		name = recall.DefaultToolName
	}
	if !toolNameRe.MatchString(name) {
		return nil, fmt.Errorf("%w %q: use 1-128 of A-Z a-z 0-9 _ - .", ErrToolName, name)
	}
	version := opts.Version
	if version == "" {
		version = "dev"
	}
	logger := opts.Logger
	if logger == nil {
		logger = slog.Default()
	}
	srv := mcp.NewServer(&mcp.Implementation{Name: ServerName, Version: version}, &mcp.ServerOptions{
		Logger: logger,
		Instructions: "Tool outputs pruned from the conversation to save context were replaced by stubs such as " +
			`[pruned: Read src/get.rs, 4,210 tokens, ...; ` + name + `("o_754312282865") restores it]. ` +
			"Call " + name + " with the id from the stub to get the original output back, byte for byte, " +
			`or only some of its lines: add "lines" ("200-250") or "grep" (a regular expression, with "context" lines around each match).`,
	})
	srv.AddTool(&mcp.Tool{
		Name:        name,
		Description: recall.ToolDescription,
		InputSchema: json.RawMessage(recall.ToolSchema()),
	}, func(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		var args recall.Args
		if raw := req.Params.Arguments; len(raw) > 0 {
			if err := json.Unmarshal(raw, &args); err != nil {
				return toolError(fmt.Sprintf("arguments: want {\"id\": \"o_...\"}, optionally with \"lines\": \"200-250\", \"grep\": \"pattern\", \"context\": 2: %v", err)), nil
			}
		}
		text, err := svc.RecallPart(ctx, args.ID, args.Part())
		if err != nil {
			if !isCallerError(err) {
				logger.Warn("recall failed", "err", err)
			}
			return toolError(err.Error()), nil
		}
		return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: text}}}, nil
	})
	return srv, nil
}

// isCallerError reports whether err is the caller's (a malformed or unknown id, a
// bad part), not worth a warning.
func isCallerError(err error) bool {
	for _, e := range []error{recall.ErrInvalidID, recall.ErrNotFound, recall.ErrBadRange, recall.ErrBadPattern, recall.ErrBadContext} {
		if errors.Is(err, e) {
			return true
		}
	}
	return false
}

func toolError(msg string) *mcp.CallToolResult {
	return &mcp.CallToolResult{IsError: true, Content: []mcp.Content{&mcp.TextContent{Text: msg}}}
}

// Run serves svc over transport until the client disconnects or ctx ends.
func Run(ctx context.Context, svc *recall.Service, opts Options, transport mcp.Transport) error {
	srv, err := New(svc, opts)
	if err != nil {
		return err
	}
	if err := srv.Run(ctx, transport); err != nil && ctx.Err() == nil {
		return fmt.Errorf("mcp server: %w", err)
	}
	return nil
}
