package transcript

import (
	"bytes"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/pruneadvisor/pruneadvisor/internal/jsonscan"
	"github.com/pruneadvisor/pruneadvisor/internal/widetext"
)

// Options control how a session is read.
type Options struct {
	// Format forces a reader; "" detects the format from the content.
	Format Format
	// Lenient skips malformed lines (counted in Session.Skipped, described in
	// Session.Warnings) instead of failing on the first one.
	Lenient bool
	// Cache, when set, lets the request-body readers (formats anthropic and openai)
	// reuse the messages it holds from earlier reads and keep the new ones (see
	// MessageCache); nil decodes every message. The openai-responses and gemini-api
	// readers decode every item but take the token counts and hashes of output texts
	// they measured before from it. Other formats ignore it. The session read is the
	// same with or without it.
	Cache *MessageCache
	// Prefix, when set, is the feed (of Cache) that compared this body with the
	// cache's body memories while it was read (PrefixFeed); Read goes on from where
	// it stopped. Anthropic request bodies only; the session read is the same with
	// or without it.
	Prefix *PrefixFeed
}

// reader is one format's reader.
type reader struct {
	format Format
	// detect looks at the first DetectBytes of the content (leading blanks
	// trimmed), or at its skeleton (Detect).
	detect func(head []byte) bool
	// read parses the whole content. name is used in errors.
	read func(name string, data []byte, opts Options) (*Session, error)
}

// DetectBytes is how much of a file the format detectors look at first. When none
// claims it and the file is longer, they judge its skeleton instead
// (jsonscan.SkeletonOf: every key of the first values, in order, each value cut
// short), so a format is recognised wherever in the file its telling keys are.
const DetectBytes = 64 << 10

// readers lists every format's reader in detection order: Detect asks each detector
// in turn and the first that claims the content decides. Formats, error messages
// ("tried anthropic, claude-code, …") and `inspect` list the formats in this order.
//
// Why this order: the detectors are written to exclude each other on what the agents
// write, each demanding keys or shapes only its format has (several also reject the
// others' signs outright), so no real session, no file of our own and none of their
// cut-off heads is claimed twice (TestDetectorsDisjoint). The order decides only for
// crafted content that satisfies two detectors, and there the narrower wins:
//   - anthropic first: its detector asks the most (one JSON object and nothing after
//     it, a messages list of user/assistant roles only, an Anthropic-only sign and no
//     OpenAI-only one), so a body that also carries Gemini CLI's sessionId and
//     projectHash keys is read as the request body it is;
//   - the JSONL formats (claude-code, codex) before the whole-document ones: their
//     detectors judge the first lines by keys no JSON document format has at its top;
//   - gemini-cli (three keys of its own) before the chat-completions family (openai,
//     mini-swe-agent, swe-agent), and openai before openhands: a list whose elements
//     carry both a role and an OpenHands source and action reads as a chat list;
//   - pi: one test of the first object ({"type":"session","id":…}), a type no
//     other format writes;
//   - openai-responses and gemini-api last (added after the others, so that error
//     messages keep their order): request bodies whose detectors demand their own
//     top-level list (input, contents) and refuse the keys of the others (messages,
//     payload, type, sessionId).
var readers = []reader{
	{FormatAnthropic, detectAnthropic, readAnthropic},
	{FormatClaudeCode, detectClaude, readClaude},
	{FormatCodex, detectCodex, readCodex},
	{FormatGemini, detectGemini, readGemini},
	{FormatOpenAI, detectOpenAI, readOpenAI},
	{FormatMiniSWEAgent, detectMiniSWEAgent, readMiniSWEAgent},
	{FormatSWEAgent, detectSWEAgent, readSWEAgent},
	{FormatOpenHands, detectOpenHands, readOpenHands},
	{FormatPi, detectPi, readPi},
	{FormatResponses, detectResponses, readResponses},
	{FormatGeminiAPI, detectGeminiAPI, readGeminiAPI},
}

// Formats lists the formats with a reader, in detection order.
func Formats() []Format {
	out := make([]Format, len(readers))
	for i, r := range readers {
		out[i] = r.format
	}
	return out
}

// ReadFile reads one session file. See Read for errors.
func ReadFile(path string, opts Options) (*Session, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("read session: %w", err)
	}
	return Read(path, data, opts)
}

// ReadFileStreamed reads one session file as ReadFile does (the same session,
// errors and warnings) without holding the whole file: a pi session longer than
// the detectors' head is read line by line in two passes (readPiStream), so beside
// the session only one line is held at a time; other formats are read whole. The
// session returned holds no bytes (Session.ReleaseBytes: Rewrite fails with
// ErrReleased), so it suits callers that only walk the messages (replay).
func ReadFileStreamed(path string, opts Options) (*Session, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("read session: %w", err)
	}
	defer f.Close()
	head, whole, err := readHead(f)
	if err != nil {
		return nil, fmt.Errorf("read session: %w", err)
	}
	if !whole && streamsPi(head, opts) {
		if _, err := f.Seek(0, io.SeekStart); err != nil {
			return nil, fmt.Errorf("read session: %w", err)
		}
		return readPiStream(path, f, opts)
	}
	data := head
	if !whole {
		rest, err := io.ReadAll(f)
		if err != nil {
			return nil, fmt.Errorf("read session: %w", err)
		}
		data = append(head, rest...)
	}
	s, err := Read(path, data, opts)
	if s != nil {
		s.ReleaseBytes()
	}
	return s, err
}

// DetectFile returns the format of the file at path as Detect returns that of its
// bytes, reading only its head when the head decides (a detector claims its first
// DetectBytes); otherwise it reads the whole file.
func DetectFile(path string) (Format, error) {
	f, err := os.Open(path)
	if err != nil {
		return "", fmt.Errorf("read session: %w", err)
	}
	defer f.Close()
	head, whole, err := readHead(f)
	if err != nil {
		return "", fmt.Errorf("read session: %w", err)
	}
	if !whole {
		if format, ok := headFormat(head); ok {
			return format, nil
		}
		rest, err := io.ReadAll(f)
		if err != nil {
			return "", fmt.Errorf("read session: %w", err)
		}
		head = append(head, rest...)
	}
	return Detect(path, head)
}

// headBytes is how much of a file ReadFileStreamed and DetectFile read first: room
// for leading blanks before the DetectBytes the detectors judge.
const headBytes = 4 * DetectBytes

// readHead reads up to headBytes from f; whole reports that f ended within them.
func readHead(f *os.File) (head []byte, whole bool, err error) {
	size := headBytes
	if st, err := f.Stat(); err == nil && st.Mode().IsRegular() && st.Size() < headBytes {
		size = int(st.Size()) + 1 // one more, to see the end (a file may grow)
	}
	head = make([]byte, size)
	n, err := io.ReadFull(f, head)
	if err == io.EOF || err == io.ErrUnexpectedEOF {
		return head[:n], true, nil
	}
	return head[:n], false, err
}

// headFormat is Detect's verdict on a file of which head is only the start, when
// the start decides it: UTF-8 content whose first DetectBytes (leading blanks
// trimmed) a detector claims. ok is false when the rest of the file may matter.
func headFormat(head []byte) (Format, bool) {
	if widetext.Sniff(head) != nil {
		return "", false
	}
	h := bytes.TrimLeft(head, " \t\r\n\ufeff")
	h = bytes.TrimPrefix(h, []byte("\xef\xbb\xbf"))
	if len(h) < DetectBytes {
		return "", false
	}
	return detectIn(h[:DetectBytes])
}

// streamsPi reports whether a file starting with head (not the whole file) can be
// read by readPiStream as Read would read it whole: pi content (detected, or the
// format forced) in UTF-8 whose lines end at '\n' (a file without any '\n' splits
// at '\r', lineSep).
func streamsPi(head []byte, opts Options) bool {
	if widetext.Sniff(head) != nil || bytes.IndexByte(head, '\n') < 0 {
		return false
	}
	if opts.Format != "" {
		return opts.Format == FormatPi
	}
	f, ok := headFormat(head)
	return ok && f == FormatPi
}

// Read parses data as a session. name appears in every error. It returns an error
// wrapping ErrEmpty for empty input, ErrUnknownFormat (listing the formats tried)
// when no reader recognises the content or an unknown Options.Format is given, and
// ErrMalformed (as *ParseError naming line and field) for bad input in strict mode.
//
// UTF-16 and UTF-32 content (with a byte-order mark, or recognised by its NULs) is
// converted to UTF-8 and read when the format is detected, with a warning naming
// the encoding; the session then reads (and Rewrite writes) UTF-8. With
// Options.Format set (a request body, or a format the caller names) it is malformed:
// the error names the encoding.
func Read(name string, data []byte, opts Options) (*Session, error) {
	if w := widetext.Sniff(data); w != nil {
		return readWide(name, data, opts, w)
	}
	if len(bytes.TrimSpace(data)) == 0 {
		return nil, fmt.Errorf("%s: %w: the file holds no data", name, ErrEmpty)
	}
	if opts.Format != "" {
		for _, r := range readers {
			if r.format == opts.Format {
				return r.read(name, data, opts)
			}
		}
		return nil, fmt.Errorf("%s: %w %q; known formats: %s", name, ErrUnknownFormat, opts.Format, formatList())
	}
	f, err := Detect(name, data)
	if err != nil {
		return nil, err
	}
	opts.Format = f
	return Read(name, data, opts)
}

// Detect returns the format of data, judged by content alone. It returns an error
// wrapping ErrEmpty when data holds only blanks (as Read does), else ErrUnknownFormat
// when no reader recognises it.
func Detect(name string, data []byte) (Format, error) {
	if w := widetext.Sniff(data); w != nil {
		text, err := w.Decode(data[:min(len(data), 4*DetectBytes)])
		if err != nil {
			return "", fmt.Errorf("%s: %w: %s: %v", name, ErrUnknownFormat, w, err)
		}
		data = text
	}
	head := bytes.TrimLeft(data, " \t\r\n\ufeff")
	head = bytes.TrimPrefix(head, []byte("\xef\xbb\xbf"))
	if len(bytes.TrimSpace(head)) == 0 {
		return "", fmt.Errorf("%s: %w: the file holds no data", name, ErrEmpty)
	}
	if f, ok := detectIn(head[:min(len(head), DetectBytes)]); ok {
		return f, nil
	}
	if len(head) > DetectBytes {
		// The telling keys may come later: mini-swe-agent writes info (with a
		// submission of any size) before messages and trajectory_format. Judge
		// the condensed whole: every key, in order, with the start of each value.
		if skel, ok := jsonscan.SkeletonOf(head); ok {
			if f, ok := detectIn(skel); ok {
				return f, nil
			}
		}
	}
	return "", fmt.Errorf("%s: %w: tried %s", name, ErrUnknownFormat, formatList())
}

// detectIn asks every detector in turn about head.
func detectIn(head []byte) (Format, bool) {
	for _, r := range readers {
		if r.detect(head) {
			return r.format, true
		}
	}
	return "", false
}

// readWide reads UTF-16 or UTF-32 content (see Read).
func readWide(name string, data []byte, opts Options, w *widetext.Text) (*Session, error) {
	if opts.Format != "" {
		return nil, &ParseError{File: name, Line: 1, Msg: fmt.Sprintf("the content is %s; format %s is read as UTF-8 (leave the format to detection to convert it)", w, opts.Format)}
	}
	text, err := w.Decode(data)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", name, err)
	}
	s, err := Read(name, text, opts)
	if s != nil {
		s.Warnings = append(s.Warnings, fmt.Sprintf("the file is %s: read as converted to UTF-8", w))
	}
	return s, err
}

func formatList() string {
	names := make([]string, len(readers))
	for i, r := range readers {
		names[i] = string(r.format)
	}
	return strings.Join(names, ", ")
}
