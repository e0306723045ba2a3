package server

import (
	"context"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/pruneadvisor/pruneadvisor/advisor"
	"github.com/pruneadvisor/pruneadvisor/cards"
	"github.com/pruneadvisor/pruneadvisor/planner"
	"github.com/pruneadvisor/pruneadvisor/tokencount"
)

// metrics are the Prometheus series GET /metrics exposes. Every name starts with
// "pruneadvisor_"; docs/INTEGRATIONS.md lists them.
type metrics struct {
	requests         *prometheus.CounterVec   // route, code
	pruned           *prometheus.CounterVec   // reason
	tokensSaved      prometheus.Counter       // tokens removed when stubs are applied
	tokenStepsSaved  prometheus.Counter       // sum over advised requests of the tokens stubs remove
	rewrites         *prometheus.CounterVec   // reason
	asks             prometheus.Counter       // cards sent to the scorer
	scorerFailures   *prometheus.CounterVec   // kind
	scorerSeconds    prometheus.Histogram     // one scorer request (a batch of cards)
	adviseSeconds    *prometheus.HistogramVec // route: parse + advise + rewrite, the latency the proxy adds
	adviseFailures   *prometheus.CounterVec   // route, stage: requests forwarded unchanged because advising failed
	requestEncodings *prometheus.CounterVec   // route, encoding: request bodies by Content-Encoding
	storageErrors    prometheus.Counter       // advised requests whose plan reports a storage failure
	recalls          *prometheus.CounterVec   // result
	untouched        *prometheus.CounterVec   // route, reason: proxied requests forwarded untouched by design
	refused          *prometheus.CounterVec   // route, reason: proxied requests refused before forwarding (checkCredentials)
	sessions         prometheus.Gauge         // sessions with in-memory advisor state
}

// latencyBuckets run from 0.25 ms to about 8 s, doubling: the proxy's added latency
// sits in the low milliseconds, a local model's scoring in the seconds.
var latencyBuckets = prometheus.ExponentialBuckets(0.00025, 2, 16)

func newMetrics(reg prometheus.Registerer) *metrics {
	m := &metrics{
		requests: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "pruneadvisor_requests_total",
			Help: "HTTP requests served, by route and status code (\"aborted\": a response the upstream cut short; \"canceled\": the client left before any response).",
		}, []string{"route", "code"}),
		pruned: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "pruneadvisor_outputs_pruned_total",
			Help: "Tool outputs replaced by a stub, by reason (superseded, duplicate, score: under the cutoff or the over-budget cutoff, hard_limit: taken by a rewrite forced by the hard limit, disposable, other).",
		}, []string{"reason"}),
		tokensSaved: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "pruneadvisor_tokens_saved_total",
			Help: "Tokens removed from the context by stubs when they were applied (original minus stub tokens, o200k_base).",
		}),
		tokenStepsSaved: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "pruneadvisor_token_steps_saved_total",
			Help: "Token-steps saved: over every advised request, the tokens the applied stubs removed from it.",
		}),
		rewrites: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "pruneadvisor_rewrites_total",
			Help: "Steps at which pending prunes were applied (a prompt-cache rewrite), by the planner's reason (cold-cache, over-budget, hard-limit, pays).",
		}, []string{"reason"}),
		asks: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "pruneadvisor_asks_total",
			Help: "Cards sent to the scorer.",
		}),
		scorerFailures: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "pruneadvisor_scorer_failures_total",
			Help: "Cards that got no score, by failure kind (timeout, http, invalid, ...).",
		}, []string{"kind"}),
		scorerSeconds: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name:    "pruneadvisor_scorer_seconds",
			Help:    "Wall time of one scorer request (all due cards of a step in one batch).",
			Buckets: latencyBuckets,
		}),
		adviseSeconds: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "pruneadvisor_advise_seconds",
			Help:    "Time spent advising one request (read, advise, rewrite): the latency the proxy adds before forwarding.",
			Buckets: latencyBuckets,
		}, []string{"route"}),
		adviseFailures: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "pruneadvisor_advise_failures_total",
			Help: "Proxy requests forwarded unchanged because advising failed (fail open), by route and stage (read, advise, rewrite, encode).",
		}, []string{"route", "stage"}),
		requestEncodings: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "pruneadvisor_request_encodings_total",
			Help: "Request bodies read on the proxy and advise routes, by route and Content-Encoding (identity, gzip, deflate, br, zstd, multiple, unknown). Unknown ones are forwarded untouched by the proxy and refused with 415 by /v1/advise.",
		}, []string{"route", "encoding"}),
		storageErrors: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "pruneadvisor_storage_errors_total",
			Help: "Advised requests at which storage failed (nothing new was pruned).",
		}),
		recalls: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "pruneadvisor_recalls_total",
			Help: "Recalls served over HTTP, by result (ok, not_found, invalid, error).",
		}, []string{"result"}),
		sessions: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "pruneadvisor_sessions",
			Help: "Sessions whose advisor state is held in memory (bounded by the server's MaxSessions).",
		}),
	}
	m.untouched = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "pruneadvisor_requests_untouched_total",
		Help: "Proxied requests forwarded untouched by design, by route and reason (previous_response_id: a Responses request whose history the provider holds).",
	}, []string{"route", "reason"})
	m.refused = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "pruneadvisor_requests_refused_total",
		Help: "Proxy requests refused with 400 instead of forwarded, by the route whose shape answered and reason (two_providers: credentials of two providers; wrong_route: a credential of another provider than the route's).",
	}, []string{"route", "reason"})
	reg.MustRegister(m.refused, m.requests, m.pruned, m.tokensSaved, m.tokenStepsSaved, m.rewrites, m.asks,
		m.scorerFailures, m.scorerSeconds, m.adviseSeconds, m.adviseFailures, m.requestEncodings, m.storageErrors,
		m.recalls, m.untouched, m.sessions)
	return m
}

// observePlan counts what one advised step did and returns how many outputs its
// rewrite pruned (0 without one).
func (m *metrics) observePlan(p advisor.Plan) (pruned int) {
	m.asks.Add(float64(p.Asked))
	for kind, n := range p.ScorerFailures {
		m.scorerFailures.WithLabelValues(kind).Add(float64(n))
	}
	if p.StorageError != "" {
		m.storageErrors.Inc()
	}
	m.tokenStepsSaved.Add(float64(max(p.SavedTokens, 0)))
	if !p.Rewrite {
		return 0
	}
	m.rewrites.WithLabelValues(rewriteReason(p.RewriteReason)).Inc()
	for _, it := range p.Items {
		if it.Decision != advisor.DecisionPruned || it.DecidedAt != p.Step {
			continue
		}
		pruned++
		m.pruned.WithLabelValues(pruneReason(it)).Inc()
		m.tokensSaved.Add(float64(max(it.Tokens-tokencount.Count(it.Stub), 0)))
	}
	return pruned
}

// pruneReason maps a pruned item's free-text reason onto a small label set.
func pruneReason(it advisor.Item) string {
	r := it.Reason
	switch {
	case strings.HasPrefix(r, "superseded"):
		return "superseded"
	case strings.HasPrefix(r, "duplicate"):
		return "duplicate"
	case strings.HasPrefix(r, "score"), strings.HasPrefix(r, "over budget"):
		return "score" // under the cutoff, or under the over-budget cutoff
	case strings.HasPrefix(r, "hard limit"):
		return "hard_limit"
	case strings.HasPrefix(r, "disposable"):
		return "disposable"
	}
	return "other"
}

// rewriteReason maps advisor.Plan.RewriteReason (the planner's reasons) onto the
// label set; anything else is "other".
func rewriteReason(r string) string {
	switch planner.Reason(r) {
	case planner.ReasonColdCache, planner.ReasonOverBudget, planner.ReasonHardLimit, planner.ReasonPays:
		return r
	}
	return "other"
}

// timedScorer wraps a Scorer to observe each request's wall time.
type timedScorer struct {
	advisor.Scorer
	seconds prometheus.Histogram
}

// Score implements advisor.Scorer.
func (t timedScorer) Score(ctx context.Context, b cards.Batch) ([]cards.Score, error) {
	start := time.Now()
	s, err := t.Scorer.Score(ctx, b)
	t.seconds.Observe(time.Since(start).Seconds())
	return s, err
}

// logPlan logs at info level (serve --verbose) what a step did to the request: a
// rewrite, with its reason and the outputs it pruned (observePlan's count), or,
// over the budget, why there was none (the plan's Waiting, or nothing pending).
func (s *Server) logPlan(id string, p advisor.Plan, pruned int) {
	switch {
	case p.Rewrite:
		s.log.Info("rewrite", "session", id, "step", p.Step, "reason", p.RewriteReason, "pruned", pruned,
			"context_tokens", p.ContextTokens, "saved_tokens", p.SavedTokens)
	case p.OverBudget:
		why := p.Waiting
		if why == "" && p.PendingTokens == 0 {
			why = "nothing pending: no candidate is rule-dead or scored under its cutoff"
		}
		s.log.Info("over budget, no rewrite", "session", id, "step", p.Step, "context_tokens", p.ContextTokens,
			"budget", p.Budget, "hard_limit", p.HardLimit, "why", why)
	}
}
