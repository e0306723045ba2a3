package mcpserver

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"sync"

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
	return &mcp.IOTransport{
		Reader: &lineFilter{src: bufio.NewReaderSize(r, 64<<10), out: lw, log: logger},
		Writer: lw,
	}
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
