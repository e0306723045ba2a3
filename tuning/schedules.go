package tuning

import (
	"context"
	"strings"

	"github.com/pruneadvisor/pruneadvisor/advisor"
	"github.com/pruneadvisor/pruneadvisor/backoff"
	"github.com/pruneadvisor/pruneadvisor/replay"
)

// ParseSchedules splits text at ';' into ask schedules, each in the advisor's
// syntax (backoff.Parse), drops repeats (by their canonical form) and puts
// every-step asking ("1"), the reference of a Comparison, first, adding it when
// missing. Errors: backoff.Parse's.
func ParseSchedules(text string) ([]string, error) {
	var out []string
	seen := map[string]bool{}
	hasRef := false
	for _, part := range strings.Split(text, ";") {
		p := strings.TrimSpace(part)
		if p == "" {
			continue
		}
		s, err := backoff.Parse(p)
		if err != nil {
			return nil, err
		}
		key := s.String()
		if seen[key] {
			continue
		}
		seen[key] = true
		if key == "1" {
			hasRef = true
			out = append([]string{p}, out...)
			continue
		}
		out = append(out, p)
	}
	if !hasRef {
		out = append([]string{"1"}, out...)
	}
	return out, nil
}

// ScheduleReplayers returns one replayer per schedule: cfg (the stored replay's
// config, its budget perhaps changed) with that schedule, scorer, and g's reading
// and modelled ask lag, sizing asks with sizer. Errors: the config's validation
// error (advisor.Config.Validate) for a schedule it refuses.
func ScheduleReplayers(g *Group, cfg advisor.Config, scorer advisor.Scorer, schedules []string, sizer replay.RequestSizer) ([]*replay.Replayer, error) {
	out := make([]*replay.Replayer, len(schedules))
	for i, s := range schedules {
		c := cfg
		c.Schedule, c.ScorerSchedules = s, nil // the schedule under test, whatever the scorer
		if err := c.Validate(); err != nil {
			return nil, err
		}
		out[i] = &replay.Replayer{Config: c, Scorer: scorer, Lenient: g.Settings.Lenient, Sizer: sizer,
			AskLag: g.Settings.AskLag, AskLatency: g.Settings.AskLatency} // the stored replay's modelled lag
	}
	return out, nil
}

// ReplaySchedules replays each of sessions, read again from its file (LoadSource,
// lenient as it was replayed), under every one of replayers (one per schedule, in
// c's order), workers sessions at once (InOrder), and adds each session's
// replays to c in session order (Comparison.Add), keeping no replay past that:
// memory stays flat in the number of sessions. A session that cannot be read,
// replayed or added is left out and told to drop, with its path and the error.
// When ctx is cancelled it returns ctx's error (the sessions it interrupted are
// not told to drop).
func ReplaySchedules(ctx context.Context, sessions []Replayed, lenient bool, replayers []*replay.Replayer, c *Comparison, workers int, drop func(path string, err error)) error {
	InOrder(len(sessions), workers, func(i int) ([]*replay.Record, error) {
		src, err := LoadSource(sessions[i], lenient)
		if err != nil {
			return nil, err
		}
		recs := make([]*replay.Record, len(replayers))
		for k, rp := range replayers {
			if recs[k], err = rp.Replay(ctx, src); err != nil {
				return nil, err
			}
			recs[k].Decisions = nil
		}
		return recs, nil
	}, func(i int, recs []*replay.Record, err error) {
		if err == nil {
			err = c.Add(recs)
		}
		if err != nil && ctx.Err() == nil {
			drop(sessions[i].Path, err)
		}
	})
	return ctx.Err()
}
