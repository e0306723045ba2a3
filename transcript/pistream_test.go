package transcript

import (
	"bytes"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"reflect"
	"runtime"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/pruneadvisor/pruneadvisor/internal/memtest"
)

// piStreamInputs returns the real pi sessions and variants of one of them that
// exercise the readers' line handling and error paths: CRLF line ends, a BOM and
// blank lines, a malformed line, a line cut short at the end, a repeated entry id,
// a second header, a line with a broken second object, and no header at all.
func piStreamInputs(t *testing.T) map[string][]byte {
	t.Helper()
	out := map[string][]byte{}
	for _, f := range []string{"session.jsonl", "large-session.jsonl", "before-compaction.jsonl"} {
		data, err := os.ReadFile(filepath.Join(rdrSessions, "pi", f))
		if err != nil {
			t.Fatal(err)
		}
		out[f] = data
	}
	base := out["session.jsonl"]
	lines := strings.SplitAfter(string(base), "\n")
	with := func(at int, insert string) []byte {
		l := append([]string{}, lines[:at]...)
		l = append(l, insert)
		return []byte(strings.Join(append(l, lines[at:]...), ""))
	}
	out["crlf"] = bytes.ReplaceAll(base, []byte("\n"), []byte("\r\n"))
	out["bom-blanks"] = append([]byte("\xef\xbb\xbf\n  \n"), bytes.ReplaceAll(base, []byte("\n"), []byte("\n\n \t\n"))...)
	out["malformed"] = with(40, "{\"type\":\"message\",\"message\":{\"role\":\n")
	out["cut-short"] = base[:len(base)-200]
	out["repeated-id"] = with(60, lines[30])
	out["second-header"] = with(10, lines[0])
	out["broken-second"] = with(50, strings.TrimSuffix(lines[49], "\n")+`{"type":`+"\n")
	out["no-header"] = []byte(strings.Join(lines[1:], ""))
	out["bad-role"] = with(70, `{"type":"message","id":"zz1","parentId":null,"message":{"role":7}}`+"\n")
	out["no-toolcallid"] = with(80, `{"type":"message","id":"zz2","parentId":null,"message":{"role":"toolResult","content":[]}}`+"\n")
	return out
}

// sessionsDiff compares two sessions read from the same content, unexported
// locations included (both must be released): reflect.DeepEqual, and cmp.Diff (far
// slower on a large session) to show a difference.
func sessionsDiff(want, got *Session) string {
	if reflect.DeepEqual(want, got) {
		return ""
	}
	if d := cmp.Diff(want, got, cmp.AllowUnexported(Session{}, ToolOutput{}, unit{})); d != "" {
		return d
	}
	return "the sessions differ (reflect.DeepEqual), but cmp.Diff shows no difference"
}

// TestPiStreamSameSession reads every input with readPi (held whole) and with
// readPiStream (two passes over the lines), strict and lenient: the sessions,
// errors and warnings are the same.
func TestPiStreamSameSession(t *testing.T) {
	for name, data := range piStreamInputs(t) {
		for _, lenient := range []bool{false, true} {
			t.Run(fmt.Sprintf("%s/lenient=%v", name, lenient), func(t *testing.T) {
				opts := Options{Lenient: lenient}
				want, werr := readPi(name, data, opts)
				got, gerr := readPiStream(name, bytes.NewReader(data), opts)
				if fmt.Sprint(werr) != fmt.Sprint(gerr) {
					t.Fatalf("error: held whole %v, streamed %v", werr, gerr)
				}
				if werr != nil {
					return
				}
				want.ReleaseBytes()
				if d := sessionsDiff(want, got); d != "" {
					t.Errorf("streamed session differs (-whole +streamed):\n%s", d)
				}
				if len(got.Messages) == 0 {
					t.Errorf("no messages")
				}
			})
		}
	}
}

// writePiSession writes a pi v3 session of n steps (a user prompt, then per step an
// assistant call and its ~1 KB result) to a file in dir and returns its path.
func writePiSession(t *testing.T, dir string, n int) string {
	t.Helper()
	var sb strings.Builder
	sb.WriteString(piHeader + "\n")
	sb.WriteString(piUser("u0", "", "look around") + "\n")
	parent := "u0"
	pad := strings.Repeat("line of the file with some words in it\n", 25)
	for i := range n {
		a, r := fmt.Sprintf("a%d", i), fmt.Sprintf("r%d", i)
		sb.WriteString(piCall(a, parent, fmt.Sprintf(`c%d:read {"path":"f%d.go"}`, i, i%50)) + "\n")
		sb.WriteString(piE(r, a, fmt.Sprintf(`"message":{"role":"toolResult","toolCallId":"c%d","toolName":"read","content":[{"type":"text","text":%q}]}`, i, fmt.Sprint(i)+pad)) + "\n")
		parent = r
	}
	path := filepath.Join(dir, "big.jsonl")
	if err := os.WriteFile(path, []byte(sb.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

// TestReadFileStreamed reads a generated pi session far longer than the detectors'
// head with ReadFileStreamed, which takes the streaming path, and with ReadFile:
// the same session.
func TestReadFileStreamed(t *testing.T) {
	path := writePiSession(t, t.TempDir(), 2000)
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if len(data) <= headBytes || !streamsPi(data[:headBytes], Options{}) {
		t.Fatalf("the generated file (%d bytes) is not read by streaming", len(data))
	}
	want, err := ReadFile(path, Options{})
	if err != nil {
		t.Fatal(err)
	}
	want.ReleaseBytes()
	got, err := ReadFileStreamed(path, Options{})
	if err != nil {
		t.Fatal(err)
	}
	if d := sessionsDiff(want, got); d != "" {
		t.Errorf("ReadFileStreamed differs from ReadFile (-ReadFile +streamed):\n%s", d)
	}
	if f, err := DetectFile(path); err != nil || f != FormatPi {
		t.Errorf("DetectFile = %q, %v; want pi", f, err)
	}
	if got.Steps() != 2000 {
		t.Errorf("steps %d, want 2000", got.Steps())
	}
}

// heapAtEOF is a reader that measures the live heap (after a collection) each time
// its reader reports the end of the file.
type heapAtEOF struct {
	io.ReadSeeker
	live []int64
}

func (h *heapAtEOF) Read(p []byte) (int, error) {
	n, err := h.ReadSeeker.Read(p)
	if err == io.EOF {
		h.live = append(h.live, memtest.LiveHeap())
	}
	return n, err
}

// TestPiStreamHoldsNoFile fails when streaming holds the file again: at the end of
// each pass the live heap, less the finished session's own, must stay under a
// quarter of the file's size (held whole, the file alone is all of it; the first
// pass holds the entry tree, the second the builder's maps and a read buffer). The file
// is read from disk, so the test's copy is not on the heap.
func TestPiStreamHoldsNoFile(t *testing.T) {
	path := writePiSession(t, t.TempDir(), 8000)
	st, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	before := memtest.LiveHeap()
	h := &heapAtEOF{ReadSeeker: f}
	s, err := readPiStream(path, h, Options{})
	if err != nil {
		t.Fatal(err)
	}
	after := memtest.LiveHeap() // the session and nothing else of the read
	runtime.KeepAlive(s)
	if len(h.live) != 2 {
		t.Fatalf("%d ends of file seen, want 2 (two passes)", len(h.live))
	}
	session := after - before
	for pass, live := range h.live {
		extra := live - before
		if pass == 1 {
			extra -= session // the session is built in the second pass
		}
		t.Logf("pass %d: live heap %d bytes beyond the start and the session built so far (%d bytes at the end); file %d bytes", pass+1, extra, session, st.Size())
		if extra > st.Size()/4 {
			t.Errorf("pass %d: %d bytes live beyond the session, more than a quarter of the file (%d bytes)", pass+1, extra, st.Size())
		}
	}
}

// swapOnSeek reads first, then, after the Seek back to the start, second: a file
// that changed between readPiStream's passes.
type swapOnSeek struct {
	r      *bytes.Reader
	second []byte
}

func (s *swapOnSeek) Read(p []byte) (int, error) { return s.r.Read(p) }
func (s *swapOnSeek) Seek(off int64, whence int) (int64, error) {
	s.r = bytes.NewReader(s.second)
	return s.r.Seek(off, whence)
}

// TestPiStreamFileChanged: a file that loses lines or moves them between the two
// passes fails the read with an error naming it, never a wrong session.
func TestPiStreamFileChanged(t *testing.T) {
	data := piStreamInputs(t)["session.jsonl"]
	lines := strings.SplitAfter(string(data), "\n")
	for name, second := range map[string][]byte{
		"cut":     data[:len(data)/2],
		"shifted": []byte(lines[0] + "\n" + strings.Join(lines[1:], "")),
		"emptied": nil,
	} {
		t.Run(name, func(t *testing.T) {
			_, err := readPiStream("s.jsonl", &swapOnSeek{r: bytes.NewReader(data), second: second}, Options{})
			if err == nil || !strings.Contains(err.Error(), "s.jsonl") || !strings.Contains(err.Error(), "the file changed while it was read") {
				t.Errorf("err = %v, want the file named and changed", err)
			}
		})
	}
}
