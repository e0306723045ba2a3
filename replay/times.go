package replay

import (
	"time"

	"github.com/pruneadvisor/pruneadvisor/transcript"
)

// CallTimes returns, for each step t = 1..s.Steps(), the time of model call t as the
// transcript gives it, whether the prompt cache had expired before it (more than ttl
// since call t-1, both times known), and the steps whose time is missing or wrong.
//
// The call for step t is made once every message before the t-th assistant message
// is written, so its time is the latest timestamp among those messages
// (transcript.Message.Time; the assistant's own line is written after the call
// returns). Taking the latest keeps a clock that went back from faking a gap. A step
// with no timestamp before it is missing (zero time, never cold); a step after a
// message timed before an earlier one is counted unordered, and one after a message
// timed after now (the replay's wall clock) is counted future: that time is ignored.
// Steps without a usable time are priced warm, as docs/DESIGN.md asks.
func CallTimes(s *transcript.Session, ttl time.Duration, now time.Time) (at []time.Time, cold []bool, stats TimeStats) {
	var latest, prev, last time.Time
	unordered, future := false, false
	for _, m := range s.Messages {
		if m.Role == transcript.RoleAssistant {
			switch {
			case latest.IsZero():
				stats.Missing++
			case future:
				stats.Future++
			case unordered:
				stats.Unordered++
			}
			at = append(at, latest)
			cold = append(cold, !latest.IsZero() && !prev.IsZero() && latest.Sub(prev) > ttl)
			prev = latest
			unordered, future = false, false
		}
		t := m.Time
		switch {
		case t.IsZero():
		case t.After(now):
			future = true
		default:
			if !last.IsZero() && t.Before(last) {
				unordered = true
			}
			last = t
			if t.After(latest) {
				latest = t
			}
		}
	}
	return at, cold, stats
}
