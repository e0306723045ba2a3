package advisor

import (
	"errors"
	"fmt"
	"log/slog"
	"runtime"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/pruneadvisor/pruneadvisor/advisor/fitted"
	"github.com/pruneadvisor/pruneadvisor/evidence"
	"github.com/pruneadvisor/pruneadvisor/transcript"
)

// TestTrackAheadMatchesInOrder indexes real sessions whole, once with the tracker
// fed on its own goroutine (trackAhead) and once in order, and compares the index
// digests; each session also once with a message out of order halfway, so that
// the tracker stops there (the use history then ends at the same message on both
// paths). TestIndexMatchesDigests compares the goroutine path with the old code's
// digests; this test covers the tracker error, which no real session has.
func TestTrackAheadMatchesInOrder(t *testing.T) {
	if runtime.GOMAXPROCS(0) < 2 {
		t.Skip("one processor: the tracker is never fed ahead")
	}
	files := identitySessions(t)
	a, err := New(DefaultConfig(), nil, NewMemoryStore())
	if err != nil {
		t.Fatal(err)
	}
	a.Logger = slog.New(slog.DiscardHandler)
	digest := func(s *transcript.Session, ahead bool) (string, error) {
		old := trackAheadMessages
		defer func() { trackAheadMessages = old }()
		if !ahead {
			trackAheadMessages = 1 << 30
		}
		st := newState(SessionKey(s), fitted.DefaultBackground(), 64, 0, 200, 3)
		sp := &stepState{s: s, msgs: s.Messages, T: len(s.Messages)}
		d := indexDigest(t, a, s)
		a.index(st, sp)
		return d, st.trackErr
	}
	tried, stopped := 0, 0
	for _, f := range files {
		s, err := transcript.ReadFile(f, transcript.Options{Lenient: true})
		if err != nil || len(s.Messages) < 2*trackAheadMessages {
			continue
		}
		tried++
		broken := *s
		broken.Messages = append([]*transcript.Message(nil), s.Messages...)
		for k := len(s.Messages) / 2; k < len(s.Messages); k++ {
			if m := s.Messages[k]; m.Step > s.Messages[0].Step {
				c := *m
				c.Step = s.Messages[0].Step - 1
				broken.Messages[k] = &c
				break
			}
		}
		for _, in := range []*transcript.Session{s, &broken} {
			seq, seqErr := digest(in, false)
			par, parErr := digest(in, true)
			if d := cmp.Diff(seq, par); d != "" {
				t.Errorf("%s: index digest on the goroutine differs (-in order +ahead):\n%s", f, d)
			}
			if fmt.Sprint(seqErr) != fmt.Sprint(parErr) {
				t.Errorf("%s: tracker error %v in order, %v ahead", f, seqErr, parErr)
			}
			if in == &broken && errors.Is(parErr, evidence.ErrEvidenceOrder) {
				stopped++
			}
		}
		if tried == 12 {
			break
		}
	}
	if tried < 5 || stopped < tried {
		t.Fatalf("%d sessions of %d messages or more, the tracker stopped in %d", tried, 2*trackAheadMessages, stopped)
	}
}
