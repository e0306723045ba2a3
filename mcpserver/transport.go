package mcpserver

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"sync"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// JSON-RPC 2.0 error codes (https://www.jsonrpc.org/specification section 5.1).
const (
	// CodeParseError answers a line that is not JSON.
	CodeParseError = -32700
	// CodeInvalidRequest answers JSON that is no JSON-RPC message (a batch
	// included: MCP dropped batches in protocol version 2025-06-18).
	CodeInvalidRequest = -32600
)

// MaxLineBytes is the longest line Transport reads (the go-sdk's own default frame
// limit, mcp.DefaultMaxLineLength, 16 MiB); a longer one is answered with a parse
// error and skipped.
const MaxLineBytes = mcp.DefaultMaxLineLength

// Transport returns the stdio transport Run serves on: newline-delimited JSON-RPC
// read from r and written to w, as mcp.IOTransport, except that one bad line does not
// end the session. A line that is not JSON gets a JSON-RPC parse error (-32700), one
// that is JSON but no JSON-RPC message, a batch included, gets invalid request
// (-32600), both with id null as the specification requires; the line is logged to
// logger (nil: slog.Default()) and the server reads on. Blank lines are skipped; CRLF
// line ends are accepted. The go-sdk ends a session on the first such line (its
// decoder has no way to resynchronise), taking the recall tool away from the agent.
func Transport(r io.Reader, w io.Writer, logger *slog.Logger) mcp.Transport {
	if logger == nil {
		logger = slog.Default()
	}
	lw := &lockedWriter{w: w}
	return &answeringTransport{Transport: &mcp.IOTransport{
		Reader: &lineFilter{src: bufio.NewReaderSize(r, 64<<10), out: lw, log: logger},
		Writer: lw,
	}, wait: AnswerWait}
}

// AnswerWait bounds how long Transport's session, at the end of its input, waits for
// the answers to the calls it has read (answeringTransport): a recall is one store
// read, so 10 seconds is ample, and a handler stuck longer does not keep the process
// from ending.
const AnswerWait = 10 * time.Second

// answeringTransport is a transport whose connection reports the end of its input
// (or a read error) only once every call read before it is answered, or after wait.
// The go-sdk ends a session at the first read error and drops the answers of calls
// still being handled, so a client that writes its calls and closes its input (a
// script piping requests into `pruneadvisor mcp`) lost the answers it was owed.
type answeringTransport struct {
	mcp.Transport
	wait time.Duration
}

// Connect implements mcp.Transport.
func (t *answeringTransport) Connect(ctx context.Context) (mcp.Connection, error) {
	c, err := t.Transport.Connect(ctx)
	if err != nil {
		return nil, err
	}
	return &answeringConn{Connection: c, wait: t.wait, idle: make(chan struct{})}, nil
}

// answeringConn counts the calls read and not yet answered (see answeringTransport).
type answeringConn struct {
	mcp.Connection
	wait time.Duration

	mu      sync.Mutex
	pending int           // calls read, not answered
	idle    chan struct{} // closed when pending is 0 while draining
	drain   bool          // the input ended: idle closes at pending 0
	closed  bool          // idle is closed
}

// settle closes idle when the input ended and every call is answered; c.mu held.
func (c *answeringConn) settle() {
	if c.drain && c.pending == 0 && !c.closed {
		close(c.idle)
		c.closed = true
	}
}

// Read implements mcp.Connection.
func (c *answeringConn) Read(ctx context.Context) (jsonrpc.Message, error) {
	msg, err := c.Connection.Read(ctx)
	if err == nil {
		if req, ok := msg.(*jsonrpc.Request); ok && req.IsCall() {
			c.mu.Lock()
			c.pending++
			c.mu.Unlock()
		}
		return msg, nil
	}
	c.mu.Lock()
	c.drain = true
	c.settle()
	c.mu.Unlock()
	t := time.NewTimer(c.wait)
	defer t.Stop()
	select {
	case <-c.idle:
	case <-t.C:
	case <-ctx.Done():
	}
	return nil, err
}

// Write implements mcp.Connection.
func (c *answeringConn) Write(ctx context.Context, msg jsonrpc.Message) error {
	err := c.Connection.Write(ctx, msg)
	if _, ok := msg.(*jsonrpc.Response); ok {
		c.mu.Lock()
		if c.pending > 0 {
			c.pending--
			c.settle()
		}
		c.mu.Unlock()
	}
	return err
}

// lockedWriter serialises whole writes: the SDK writes each message in one Write,
// and so does lineFilter, so their messages never interleave.
type lockedWriter struct {
	mu sync.Mutex
	w  io.Writer
}

func (l *lockedWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(p)
}

func (l *lockedWriter) Close() error { return nil } // the process's stdout stays open

// lineFilter passes the SDK only lines that are single JSON-RPC messages and answers
// every other line itself.
type lineFilter struct {
	src  *bufio.Reader
	out  io.Writer
	log  *slog.Logger
	line int    // lines read so far
	buf  []byte // a valid line waiting to be read, with its newline
}

func (f *lineFilter) Read(p []byte) (int, error) {
	for len(f.buf) == 0 {
		line, tooLong, err := f.next()
		if (len(line) > 0 || tooLong) && f.check(line, tooLong) {
			f.buf = append(line, '\n')
		}
		if err != nil && len(f.buf) == 0 {
			return 0, err
		}
		if err != nil {
			break // serve the last line, then the error on the next Read
		}
	}
	n := copy(p, f.buf)
	f.buf = f.buf[n:]
	return n, nil
}

func (f *lineFilter) Close() error { return nil }

// next reads one line without its line end; tooLong reports a line over
// MaxLineBytes, which is read to its end and dropped.
func (f *lineFilter) next() (line []byte, tooLong bool, err error) {
	var buf []byte
	for {
		chunk, err := f.src.ReadSlice('\n')
		if len(buf)+len(chunk) > MaxLineBytes {
			tooLong, buf = true, nil
		} else if !tooLong {
			buf = append(buf, chunk...)
		}
		if errors.Is(err, bufio.ErrBufferFull) {
			continue
		}
		if len(chunk) > 0 || tooLong || len(buf) > 0 {
			f.line++
		}
		return bytes.TrimSpace(buf), tooLong, err
	}
}

// check reports whether line is one JSON-RPC message; if not it answers it.
func (f *lineFilter) check(line []byte, tooLong bool) bool {
	var code int
	var why string
	switch {
	case tooLong:
		code, why = CodeParseError, fmt.Sprintf("line longer than %d bytes", MaxLineBytes)
	case !json.Valid(line):
		code, why = CodeParseError, "not JSON: "+jsonProblem(line)
	case line[0] == '[':
		code, why = CodeInvalidRequest, "JSON-RPC batches are not supported (MCP 2025-06-18 removed them); send one message per line"
	default:
		if _, err := jsonrpc.DecodeMessage(line); err != nil {
			code, why = CodeInvalidRequest, "not a JSON-RPC 2.0 message: "+err.Error()
		}
	}
	if code == 0 {
		return true
	}
	msg := "Parse error"
	if code == CodeInvalidRequest {
		msg = "Invalid Request"
	}
	resp, _ := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": nil,
		"error": map[string]any{"code": code, "message": msg + ": line " + fmt.Sprint(f.line) + ": " + why}})
	f.log.Warn("mcp: bad line answered with an error; still serving", "line", f.line, "code", code, "why", why)
	if _, err := f.out.Write(append(resp, '\n')); err != nil {
		f.log.Warn("mcp: writing the error response", "err", err)
	}
	return false
}

// jsonProblem is encoding/json's reason a line is not JSON, with its byte offset.
func jsonProblem(line []byte) string {
	var v any
	err := json.Unmarshal(line, &v)
	var se *json.SyntaxError
	if errors.As(err, &se) {
		return fmt.Sprintf("%v at byte %d", se, se.Offset)
	}
	if err != nil {
		return err.Error()
	}
	return "invalid"
}
