package replay

import (
	"context"

	"github.com/pruneadvisor/pruneadvisor/advisor"
	"github.com/pruneadvisor/pruneadvisor/transcript"
)

// Simulate runs adv over s step by step as a live agent would have called it: step
// t sees only the messages before the t-th assistant message (the advisor runs
// before model call t), for t = 1..s.Steps(). With final, one more step sees every
// message (the plan for a call that never happened, which `advise` prints). The
// advisor keeps its state under id (the view's ID is replaced; s is not changed).
//
// each, when not nil, is called after every step with its plan and the messages
// the advisor saw; an error from it stops the run and is returned. Simulate
// returns the last plan, and the advisor's error (a context error) as is.
func Simulate(ctx context.Context, adv *advisor.Advisor, s *transcript.Session, id string, final bool,
	each func(p advisor.Plan, view []*transcript.Message) error) (advisor.Plan, error) {
	view := *s
	view.ID = id
	var plan advisor.Plan
	stepAt := func(end int) error {
		view.Messages = s.Messages[:end]
		p, err := adv.Advise(ctx, &view)
		if err != nil {
			return err
		}
		plan = p
		if each != nil {
			return each(p, view.Messages)
		}
		return nil
	}
	for i, m := range s.Messages {
		if m.Role == transcript.RoleAssistant {
			if err := stepAt(i); err != nil {
				return plan, err
			}
		}
	}
	if final {
		if err := stepAt(len(s.Messages)); err != nil {
			return plan, err
		}
	}
	return plan, nil
}
