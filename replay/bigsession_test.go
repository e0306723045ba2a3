package replay

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"runtime"
	"runtime/pprof"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/pruneadvisor/pruneadvisor/advisor"
	"github.com/pruneadvisor/pruneadvisor/advisor/fitted"
	"github.com/pruneadvisor/pruneadvisor/internal/memtest"
	"github.com/pruneadvisor/pruneadvisor/tokencount"
)

// writeBigSession writes a generated pi session of about messages messages to w:
// the session line, one user task, then (messages-1)/2 steps of an assistant message with one
// tool call and its tool result. In every ten steps: seven small listings, a read
// of one of 200 files (about 2,000 characters of code with names of its own), an
// edit of it and a read of it again (the superseded-read rule), and a test run
// (every other one the same command and output as ten steps before: the duplicate
// rule); every
// third step's text names a function of a read about 40 steps back (later-use
// evidence).
// Call times advance 2 s a step, with a 10-minute pause every 500 steps (cold
// cache). Only characters that need no JSON escape are written, besides \n.
func writeBigSession(w io.Writer, messages int) error {
	bw := bufio.NewWriterSize(w, 1<<20)
	t0 := time.Date(2025, 12, 1, 9, 0, 0, 0, time.UTC)
	at := t0
	stamp := func() string { return at.Format("2006-01-02T15:04:05.000Z") }
	fmt.Fprintf(bw, `{"type":"session","id":"big-%d","timestamp":"%s","cwd":"/work/big","provider":"anthropic","modelId":"claude-sonnet-4-5"}`+"\n", messages, stamp())
	fmt.Fprintf(bw, `{"type":"message","timestamp":"%s","message":{"role":"user","content":[{"type":"text","text":"Make every store of /work/big validate its input."}]}}`+"\n", stamp())
	steps := max((messages-1)/2, 1)
	for s := 1; s <= steps; s++ {
		at = at.Add(2 * time.Second)
		if s%500 == 0 {
			at = at.Add(10 * time.Minute)
		}
		name, args, result := bigCall(s)
		text := "Next step."
		if s > 40 && s%3 == 0 {
			text = "errShort" + strconv.Itoa(s-s%10-35) + " is wrong there."
		}
		id := "call_" + strconv.Itoa(s)
		fmt.Fprintf(bw, `{"type":"message","timestamp":"%s","message":{"role":"assistant","content":[{"type":"text","text":"%s"},{"type":"toolCall","id":"%s","name":"%s","arguments":%s}],"stopReason":"toolUse"}}`+"\n",
			stamp(), text, id, name, args)
		fmt.Fprintf(bw, `{"type":"message","timestamp":"%s","message":{"role":"toolResult","toolCallId":"%s","toolName":"%s","content":[{"type":"text","text":"%s"}],"isError":false}}`+"\n",
			stamp(), id, name, result)
	}
	return bw.Flush()
}

// bigCall returns step s's tool name, arguments (JSON) and result text (JSON
// string content).
func bigCall(s int) (name, args, result string) {
	file := fmt.Sprintf("/work/big/src/mod%03d/impl.go", s%200)
	switch {
	case s%10 == 7 && s > 10: // edit of the file read fully 2 steps ago
		prev := fmt.Sprintf("/work/big/src/mod%03d/impl.go", (s-2)%200)
		return "edit", `{"path":"` + prev + `","oldText":"return nil","newText":"return validate(req)"}`, "Successfully replaced text in " + prev + "."
	case s%10 == 8 && s > 10: // the file edited a step ago, read again in full
		prev := fmt.Sprintf("/work/big/src/mod%03d/impl.go", (s-3)%200)
		return "read", `{"path":"` + prev + `"}`, bigCode(s-3, 12)
	case s%20 == 9 && s > 20: // the test run of 10 steps ago again, same output
		return "bash", `{"command":"go test ./src/mod` + strconv.Itoa((s-10)%200) + `/..."}`, bigLog(s - 10)
	case s%10 == 9:
		return "bash", `{"command":"go test ./src/mod` + strconv.Itoa(s%200) + `/..."}`, bigLog(s)
	case s%10 == 5:
		return "read", `{"path":"` + file + `"}`, bigCode(s, 12)
	default:
		return "bash", `{"command":"ls src/mod` + strconv.Itoa(s%200) + `"}`, "impl.go\\nimpl_test.go\\ncache.go"
	}
}

// bigCode is a read's result: lines of Go with names of step s's own.
func bigCode(s, funcs int) string {
	var b strings.Builder
	b.WriteString("package impl\\n\\n")
	for j := range funcs {
		fmt.Fprintf(&b, "func compute%dx%d(buf []byte, n int) error {\\n\\tif len(buf) < n {\\n\\t\\treturn errShort%d\\n\\t}\\n\\treturn nil\\n}\\n\\n", s, j, s)
	}
	return b.String()
}

// bigLog is a test run's output for the module of step s: one line per test.
func bigLog(s int) string {
	var b strings.Builder
	for j := range 40 {
		fmt.Fprintf(&b, "=== RUN   TestCompute%dx%d\\n--- PASS: TestCompute%dx%d (0.00s)\\n", s, j, s, j)
	}
	fmt.Fprintf(&b, "ok  \\tbig/src/mod%d\\t0.%03ds", s%200, s%1000)
	return b.String()
}

// bigMessages is the size of the generated session TestReplayBigSession replays:
// PRUNEADVISOR_BIG_MESSAGES when set (docs/PERFORMANCE.md's figure is 1,000,000),
// else 20,000, small enough for every test run.
func bigMessages(tb testing.TB) int {
	n := 20_000
	if v := os.Getenv("PRUNEADVISOR_BIG_MESSAGES"); v != "" {
		var err error
		if n, err = strconv.Atoi(v); err != nil || n < 4 {
			tb.Fatalf("PRUNEADVISOR_BIG_MESSAGES=%q: want a number of messages >= 4", v)
		}
	}
	return n
}

// TestReplayBigSession generates a session of bigMessages messages (pi format),
// loads it and replays it with the default (fitted) scorer, and checks the record
// covers every step and output; it logs the time and the heap. With
// PRUNEADVISOR_BIG_HEAPPROFILE set it writes the live heap near the last step
// there.
//
// It fails when the live heap near the last step, less the heap before the file
// was read, is above maxLiveBytesPerMessage a message: what the advisor, the
// record and the messages still held keep grows with the session, and a change
// that keeps more per output (the parsed session whole, a card template for every
// output) crosses the bound.
func TestReplayBigSession(t *testing.T) {
	n := bigMessages(t)
	path := filepath.Join(t.TempDir(), "big.jsonl")
	writeBigFile(t, path, n)
	tokencount.Count("warm") // the o200k vocabulary is not the session's
	base := memtest.LiveHeap()
	start := time.Now()
	src, err := Load(path, false)
	if err != nil {
		t.Fatal(err)
	}
	loaded := time.Since(start)
	steps := max((n-1)/2, 1)
	if got := len(src.Session.Messages); got != 1+2*steps {
		t.Fatalf("%d messages read, want %d", got, 1+2*steps)
	}
	scorer, err := fitted.NewDefault()
	if err != nil {
		t.Fatal(err)
	}
	r := &Replayer{Config: advisor.DefaultConfig(), Scorer: scorer}
	// The wall time of the second and the last tenth of the steps (the first
	// holds the cache warming up), to see whether a step costs more as the
	// outputs pile up; and, when asked, the live heap near the end of the replay,
	// the advisor's state at its largest.
	hp := os.Getenv("PRUNEADVISOR_BIG_HEAPPROFILE")
	tenth := max(steps/10, 1)
	marks := map[int]time.Time{}
	var live int64
	r.OnStep = func(_ string, step int) {
		if step == tenth || step == 2*tenth || step == steps-tenth || step == steps {
			marks[step] = time.Now()
		}
		if step == steps-1 {
			live = memtest.LiveHeap()
			if hp != "" {
				writeHeapProfile(t, hp)
			}
		}
	}
	start = time.Now()
	rec, err := r.Consume(context.Background(), src)
	if err != nil {
		t.Fatal(err)
	}
	replayed := time.Since(start)
	if rec.Steps != steps || len(rec.Outputs) != steps || len(rec.StepFacts) != steps {
		t.Fatalf("record: %d steps, %d outputs, %d step facts; want %d each", rec.Steps, len(rec.Outputs), len(rec.StepFacts), steps)
	}
	rules, pruned := 0, 0
	for _, o := range rec.Outputs {
		if o.RuleDeadAt > 0 {
			rules++
		}
		if o.PrunedAt > 0 {
			pruned++
		}
	}
	if rules == 0 || pruned == 0 || len(rec.Evidence) == 0 {
		t.Errorf("%d rule-dead, %d pruned outputs, %d evidence items: the session exercises nothing", rules, pruned, len(rec.Evidence))
	}
	perMessage := float64(live-min(base, live)) / float64(n)
	if perMessage > maxLiveBytesPerMessage {
		t.Errorf("live heap near the last step %d MB over %d MB before reading: %.0f bytes a message, want <= %d",
			live>>20, base>>20, perMessage, maxLiveBytesPerMessage)
	}
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	perStep := func(from, to int) time.Duration { return marks[to].Sub(marks[from]) / time.Duration(max(to-from, 1)) }
	t.Logf("%d messages, %d steps: load %v, replay %v (%.0f steps/s; %v a step in the second tenth, %v in the last), %d rule-dead, %d pruned, %d asks; heap in use %d MB, sys %d MB",
		n, steps, loaded.Round(time.Millisecond), replayed.Round(time.Millisecond), float64(steps)/replayed.Seconds(),
		perStep(tenth, 2*tenth).Round(time.Microsecond), perStep(steps-tenth, steps).Round(time.Microsecond),
		rules, pruned, len(rec.Asks), ms.HeapInuse>>20, ms.Sys>>20)
	t.Logf("live heap near the last step: %d MB, %.0f bytes a message over the %d MB before reading", live>>20, perMessage, base>>20)
}

// maxLiveBytesPerMessage bounds TestReplayBigSession's live heap a message near
// the last step. Measured (docs/PERFORMANCE.md, "A session of 10^6 messages"):
// about 1,300 bytes at 20,000 messages and 1,200 at 100,000; 1,540 and 1,460
// before the advisor's per-output state, the rules index and the replay's record
// shrank (H22), 2,420 before the advisor shed card templates and the replay let go
// of the messages it no longer needed. 1,434 before the digest of live names
// (replay-14), which keeps twice the digest's names per output and a byte a name
// for when each stopped being live: 1,473 (docs/PERFORMANCE.md, "Live names in
// the digest"); the bound went from 1,450 to 1,500.
const maxLiveBytesPerMessage = 1_500

// writeHeapProfile writes the live heap to path.
func writeHeapProfile(t *testing.T, path string) {
	runtime.GC()
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if err := pprof.WriteHeapProfile(f); err != nil {
		t.Fatal(err)
	}
}

// writeBigFile writes a generated session of n messages to path.
func writeBigFile(t *testing.T, path string, n int) {
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := writeBigSession(f, n); err != nil {
		t.Fatal(err)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
}

// TestWriteBigSession writes the generated session of bigMessages messages to
// $PRUNEADVISOR_BIG_SESSION_OUT, for measuring the commands on it
// (docs/PERFORMANCE.md); without it the test is skipped.
func TestWriteBigSession(t *testing.T) {
	out := os.Getenv("PRUNEADVISOR_BIG_SESSION_OUT")
	if out == "" {
		t.Skip("PRUNEADVISOR_BIG_SESSION_OUT not set")
	}
	writeBigFile(t, out, bigMessages(t))
}
