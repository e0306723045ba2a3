package replay

import (
	"context"
	"errors"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/pruneadvisor/pruneadvisor/transcript"
)

// Sink stores replays; storage.DB implements it.
type Sink interface {
	// ReplayDone reports whether a complete replay of the content under the
	// settings is stored: committed, and not Incomplete (no ask failed in a way a
	// new ask could mend), so Run skips it.
	ReplayDone(ctx context.Context, contentHash, settingsHash string) (bool, error)
	// CommitReplay stores rec (its session, asks, decisions, evidence, facts and a
	// finished run) in one transaction, replacing whatever was stored under rec.ID.
	// When it returns nil the rows are durable; when it fails nothing was stored.
	// An Incomplete rec is stored all the same, but ReplayDone then reports false.
	CommitReplay(ctx context.Context, rec *Record) error
}

// FinalFailKinds are the scorer failure kinds (advisor.AskRecord.FailKind) that an
// ask under the same settings cannot mend: "empty_query" (the lexical scorer:
// the task and the agent's words hold no terms) and "too_large" (a card that
// does not fit the model's context even cut down). Every other kind (timeout,
// unreachable, http, not_pulled, truncated, invalid, …) may go away when the
// scorer works again.
var FinalFailKinds = map[string]bool{"empty_query": true, "too_large": true}

// AskFailures counts rec's asks that got no score, by failure kind
// (advisor.AskRecord.FailKind; "error" when a failed ask has none). nil when
// every ask was scored.
func AskFailures(rec *Record) map[string]int {
	var out map[string]int
	for _, a := range rec.Asks {
		if a.OK {
			continue
		}
		if out == nil {
			out = map[string]int{}
		}
		k := a.FailKind
		if k == "" {
			k = "error"
		}
		out[k]++
	}
	return out
}

// Incomplete reports whether an ask of rec failed with a kind not in
// FinalFailKinds. Such a replay is committed (its scored asks and evidence are
// kept) but not marked done, so the next Run replays the session and asks again.
func Incomplete(rec *Record) bool {
	for _, a := range rec.Asks {
		if !a.OK && !FinalFailKinds[a.FailKind] {
			return true
		}
	}
	return false
}

// EventKind says what an Event reports.
type EventKind int

// Event kinds.
const (
	// EventPlanned comes once, after the scan: Total sessions to replay, Bytes to
	// read.
	EventPlanned EventKind = iota
	// EventDone: the session at Path was replayed and committed (Record).
	EventDone
	// EventFailed: the session at Path failed (Err); the others go on.
	EventFailed
	// EventTick comes about every TickEvery while sessions run, with Steps.
	EventTick
)

// TickEvery is how often EventTick is sent while a replay runs.
const TickEvery = 200 * time.Millisecond

// Event reports the progress of Runner.Run. Done, Total, Steps and BytesDone are
// running totals at the time of the event.
type Event struct {
	Kind   EventKind
	Path   string  // EventDone, EventFailed
	Record *Record // EventDone
	Err    error   // EventFailed
	Done   int     // sessions finished (committed or failed)
	Total  int     // sessions to replay (not already stored)
	Steps  int64   // steps replayed, including sessions still running
	// Bytes is the total size of the files to replay (every event); BytesDone the
	// size of the finished ones.
	Bytes, BytesDone int64
}

// Runner replays many session files into a Sink, several at a time.
type Runner struct {
	Replayer *Replayer // required
	Sink     Sink      // required
	// Workers is the number of sessions replayed at once; < 1 means
	// runtime.NumCPU(). Each session is replayed by one goroutine from start to end.
	Workers int
	// Events, when set, receives progress, from one goroutine at a time.
	Events func(Event)
	// Shard, when set, restricts the run to the session files it Has; the others
	// are counted in Summary.OtherShards and not read.
	Shard Shard
}

// Summary is what Runner.Run did.
type Summary struct {
	Found       int    // files selected by Discover
	Ignored     int    // files a folder walk passed over by name
	NotSessions int    // files found by a walk whose content no reader recognised
	Skips       []Skip // paths passed over, with the reason (not sessions, loops, duplicates)
	AlreadyDone int    // sessions already stored with the same content and settings
	Duplicates  int    // files with the same bytes as an earlier file of this run
	OtherShards int    // files left to the other shards (Runner.Shard)
	Replayed    int    // sessions replayed and committed by this run
	Failures    []Failure
	Steps       int // steps replayed by this run
	Outputs     int // tool outputs in the sessions replayed
	Asks        int // cards sent to the scorer (failed asks included)
	// ScorerFailures counts the asks of the replayed sessions that got no score,
	// by failure kind (AskFailures); nil when there were none.
	ScorerFailures map[string]int
	FailedAsks     int // the sum of ScorerFailures
	// Incomplete lists the sessions committed with asks to ask again (Incomplete):
	// not marked done, replayed by the next run. In the order they finished.
	Incomplete []string
	// AllAsksFailed lists the sessions with asks of which none got a score.
	AllAsksFailed []string
	Pruned        int   // outputs pruned (stub applied) by the advisor
	Evidence      int   // later uses recorded (counting or not)
	SkippedLine   int   // malformed lines skipped (lenient reading)
	Bytes         int64 // bytes of the sessions replayed
	Duration      time.Duration
}

// job is one session to replay.
type job struct {
	Found
	hash string
}

// outcome is one worker's answer for a job.
type outcome struct {
	job
	rec *Record
	err error
}

// Run discovers the session files under paths (Discover), skips files that are no
// session, duplicates and sessions already stored with the same settings
// (Sink.ReplayDone: a session whose asks failed is not, see Incomplete), and
// replays the rest with Workers goroutines, committing each session when it is
// finished. Scorer failures do not fail a session: they are counted in
// Summary.ScorerFailures, Incomplete and AllAsksFailed. A session that fails (unreadable, malformed,
// commit error) is counted in Summary.Failures and the others go on. When ctx is
// cancelled Run stops starting sessions, abandons the running ones (nothing of them
// is stored; a later Run replays them again) and returns the summary so far with
// ctx's error. Errors other than ctx's are reported per session, never returned.
func (r *Runner) Run(ctx context.Context, paths []string) (Summary, error) {
	start := time.Now()
	var sum Summary
	found, skips, ignored, fails := Discover(paths)
	sum.Found, sum.Skips, sum.Ignored, sum.Failures = len(found), skips, ignored, fails
	jobs, total, err := r.plan(ctx, found, &sum)
	if err != nil {
		sum.Duration = time.Since(start)
		return sum, err
	}
	run := &running{r: r, sum: &sum, ev: Event{Kind: EventPlanned, Total: len(jobs), Bytes: total}}
	run.emit()
	results := r.start(ctx, jobs, &run.steps)
	interrupted := run.collect(ctx, results)
	sum.Duration = time.Since(start)
	if err := ctx.Err(); err != nil || interrupted {
		if err == nil {
			err = context.Canceled
		}
		return sum, err
	}
	return sum, nil
}

// plan returns the jobs of a run among the files found, with their total size:
// the files of the runner's shard that are sessions, not duplicates of an earlier
// file and not already stored under the settings (Sink.ReplayDone); the others
// are counted in sum. Neither the hash nor detection holds the whole file (a
// session may be hundreds of megabytes): the hash streams it, detection reads its
// head. The error is ctx's, when cancelled.
func (r *Runner) plan(ctx context.Context, found []Found, sum *Summary) ([]job, int64, error) {
	settingsHash := r.Replayer.Settings().Hash()
	var jobs []job
	var total int64
	seen := map[string]string{}
	for _, f := range found {
		if err := ctx.Err(); err != nil {
			return nil, 0, err
		}
		if !r.Shard.Has(f.Path) {
			sum.OtherShards++
			continue
		}
		hash, size, ok := sum.examine(f)
		if !ok {
			continue
		}
		if first, ok := seen[hash]; ok {
			sum.Duplicates++
			sum.Skips = append(sum.Skips, Skip{Path: f.Path, Reason: "same content as " + first})
			continue
		}
		seen[hash] = f.Path
		done, err := r.Sink.ReplayDone(ctx, hash, settingsHash)
		if err != nil {
			if cerr := ctx.Err(); cerr != nil {
				return nil, 0, cerr
			}
			sum.Failures = append(sum.Failures, Failure{Path: f.Path, Err: err})
			continue
		}
		if done {
			sum.AlreadyDone++
			continue
		}
		f.Size = size
		jobs = append(jobs, job{Found: f, hash: hash})
		total += f.Size
	}
	return jobs, total, nil
}

// examine hashes a found file and detects its format: ok when it may be a
// session; otherwise it is counted in s as a failure (it cannot be read, or it
// was given by name and is no session) or a skip (found by a walk, no reader
// recognises it).
func (s *Summary) examine(f Found) (hash string, size int64, ok bool) {
	hash, size, err := hashFile(f.Path)
	if err != nil {
		s.Failures = append(s.Failures, Failure{Path: f.Path, Err: err})
		return "", 0, false
	}
	if _, err := transcript.DetectFile(f.Path); err != nil {
		switch {
		case !errors.Is(err, transcript.ErrUnknownFormat) && !errors.Is(err, transcript.ErrEmpty):
			s.Failures = append(s.Failures, Failure{Path: f.Path, Err: err})
		case f.Explicit:
			s.Failures = append(s.Failures, Failure{Path: f.Path, Err: notSessionError(f.Path, err)})
		default:
			s.NotSessions++
			s.Skips = append(s.Skips, Skip{Path: f.Path, Reason: "not a session: no reader recognises the content"})
		}
		return "", 0, false
	}
	return hash, size, true
}

// start replays jobs on Workers goroutines (each session by one goroutine from
// start to end), counting every step replayed in steps, and returns their
// outcomes, closed when every worker is done. Once ctx is cancelled no job is
// started.
func (r *Runner) start(ctx context.Context, jobs []job, steps *atomic.Int64) <-chan outcome {
	workers := r.Workers
	if workers < 1 {
		workers = runtime.NumCPU()
	}
	workers = min(workers, max(len(jobs), 1))
	rp := *r.Replayer
	prev := rp.OnStep
	rp.OnStep = func(path string, step int) {
		steps.Add(1)
		if prev != nil {
			prev(path, step)
		}
	}
	todo := make(chan job)
	results := make(chan outcome)
	var wg sync.WaitGroup
	for range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for j := range todo {
				rec, err := r.one(ctx, &rp, j)
				results <- outcome{job: j, rec: rec, err: err}
			}
		}()
	}
	go func() {
		defer close(todo)
		for _, j := range jobs {
			select {
			case todo <- j:
			case <-ctx.Done():
				return
			}
		}
	}()
	go func() {
		wg.Wait()
		close(results)
	}()
	return results
}

// running is a run's progress while its sessions are replayed: the summary, the
// latest event (its running totals) and the steps replayed so far.
type running struct {
	r     *Runner
	sum   *Summary
	ev    Event
	steps atomic.Int64
}

// emit sends the current event to Runner.Events, when set.
func (run *running) emit() {
	if run.r.Events != nil {
		run.r.Events(run.ev)
	}
}

// collect folds every outcome into the summary and events as it arrives, with an
// EventTick every TickEvery, until results is closed; interrupted reports that a
// session was abandoned because ctx was cancelled.
func (run *running) collect(ctx context.Context, results <-chan outcome) (interrupted bool) {
	tick := time.NewTicker(TickEvery)
	defer tick.Stop()
	for {
		select {
		case res, ok := <-results:
			if !ok {
				return interrupted
			}
			event, abandoned := run.outcome(ctx, res)
			if event {
				run.emit()
			}
			interrupted = interrupted || abandoned
		case <-tick.C:
			run.ev.Kind, run.ev.Path, run.ev.Record, run.ev.Err = EventTick, "", nil, nil
			run.ev.Steps = run.steps.Load()
			run.emit()
		}
	}
}

// outcome folds one session's outcome into the summary and the event: done
// (EventDone), failed (EventFailed), or, without an event, abandoned because ctx
// was cancelled (whatever the error says: a context error, or the driver's
// "interrupted"; nothing of it is stored) or, found by a walk and recognised by
// its first bytes, holding no session (an empty Claude Code or Gemini CLI file:
// skipped, as files no reader recognises are).
func (run *running) outcome(ctx context.Context, res outcome) (event, abandoned bool) {
	sum, ev := run.sum, &run.ev
	ev.Done++
	ev.BytesDone += res.Size
	ev.Steps = run.steps.Load()
	ev.Path, ev.Record, ev.Err = res.Path, nil, nil
	switch {
	case res.err == nil:
		ev.Kind, ev.Record = EventDone, res.rec
		sum.add(res.Path, res.Size, res.rec)
	case ctx.Err() != nil:
		return false, true
	case errors.Is(res.err, ErrNotSession) && !res.Explicit:
		sum.NotSessions++
		reason := "not a session: " + res.err.Error()
		if errors.Is(res.err, transcript.ErrEmpty) {
			reason = "not a session: it holds no messages"
		}
		sum.Skips = append(sum.Skips, Skip{Path: res.Path, Reason: reason})
		return false, false
	default:
		ev.Kind, ev.Err = EventFailed, res.err
		sum.Failures = append(sum.Failures, Failure{Path: res.Path, Err: res.err})
	}
	return true, false
}

// add counts one session replayed and committed: its bytes, steps, outputs,
// asks, scorer failures, evidence, skipped lines and pruned outputs.
func (s *Summary) add(path string, size int64, rec *Record) {
	s.Replayed++
	s.Bytes += size
	s.Steps += rec.Steps
	s.Outputs += len(rec.Outputs)
	s.Asks += len(rec.Asks)
	s.countFailures(path, rec)
	s.Evidence += len(rec.Evidence)
	s.SkippedLine += rec.Skipped
	for _, o := range rec.Outputs {
		if o.PrunedAt > 0 {
			s.Pruned++
		}
	}
}

// countFailures adds the scorer failures of rec, replayed from path.
func (s *Summary) countFailures(path string, rec *Record) {
	failed := 0
	for k, n := range AskFailures(rec) {
		if s.ScorerFailures == nil {
			s.ScorerFailures = map[string]int{}
		}
		s.ScorerFailures[k] += n
		failed += n
	}
	s.FailedAsks += failed
	if Incomplete(rec) {
		s.Incomplete = append(s.Incomplete, path)
	}
	if failed > 0 && failed == len(rec.Asks) {
		s.AllAsksFailed = append(s.AllAsksFailed, path)
	}
}

// one replays and commits one session.
func (r *Runner) one(ctx context.Context, rp *Replayer, j job) (*Record, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	src, err := Load(j.Path, rp.Lenient)
	if err != nil {
		return nil, err
	}
	rec, err := rp.Consume(ctx, src) // replayed once: its messages go as the replay goes
	if err != nil {
		return nil, err
	}
	if err := r.Sink.CommitReplay(ctx, rec); err != nil {
		return nil, err
	}
	return rec, nil
}

// notSessionError is the failure of a file given by name that no reader takes: it
// wraps ErrNotSession and the reader's error err, whose text, printed after the
// file's path, does not name the path again. An empty file is said to be one
// ("empty session: the file holds no data", as inspect says), not "not a session
// file".
func notSessionError(path string, err error) error {
	text := strings.TrimPrefix(err.Error(), path+": ")
	if !errors.Is(err, transcript.ErrEmpty) {
		text = ErrNotSession.Error() + ": " + text
	}
	return &fileError{text: text, errs: []error{ErrNotSession, err}}
}

// fileError is an error with its own text wrapping errs.
type fileError struct {
	text string
	errs []error
}

func (e *fileError) Error() string   { return e.text }
func (e *fileError) Unwrap() []error { return e.errs }
