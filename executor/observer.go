package executor

import (
	"context"
	"errors"
	"time"

	"github.com/retrysafe/retrysafe/internal/lostconn"
	"github.com/retrysafe/retrysafe/tools"
)

// Observer is told what the executor did, synchronously, on the goroutine
// that did it: metrics (server/metrics implements it), traces, test
// probes. It is passed down in Config.Observer rather than wrapped around
// the tools from above, so that what the executor knows (the tenant, the
// attempt, whether this call took over an expired lease) reaches it as
// facts, not as inferences. Methods must be safe for concurrent use and
// quick: a provider call's completion waits for them. Embed NopObserver
// to implement only some of them.
type Observer interface {
	// ProviderCalled: a tool's Execute returned (or panicked, reported as
	// the uncertain failure the executor records).
	ProviderCalled(ProviderEvent)
	// LookupDone: a tool's Lookup returned.
	LookupDone(ProviderEvent)
	// ExecutionFinished: Execute or ExecuteKey is about to return.
	ExecutionFinished(ExecutionEvent)
	// WriteLost: one of the executor's writes (a claim, a takeover, a
	// completion, a release) lost its connection after it was sent, so
	// that it may or may not have committed, and was sent again until it
	// got through or the database stayed out of reach for
	// Config.LostWriteRetry (10 s by default). Rare, and the moment a call is nearest to not knowing what
	// it did: an operator wants to see each one.
	WriteLost(WriteEvent)
}

// ProviderEvent is one Execute or Lookup of a tool.
type ProviderEvent struct {
	Tenant, Action, Key string
	Attempt             int
	Elapsed             time.Duration
	// Err is what the tool returned; nil on success.
	Err error
	// Class is Err's class (tools.Classify); "" on success and when
	// NotFound.
	Class tools.Class
	// NotFound: a Lookup answered tools.ErrNotFound, the provider has
	// nothing under the key (an answer, not a failure).
	NotFound bool
}

// ExecutionEvent is one Execute or ExecuteKey, as returned to its caller.
type ExecutionEvent struct {
	Tenant, Action string
	// Outcome is what the caller gets; nil when no answer could be given
	// (Err says why: bad fields, an unknown tool, the database).
	Outcome *Outcome
	// Err is the error returned with it (ErrLeaseLost beside an Outcome).
	Err error
	// TookOver: this call won the compare-and-set takeover of an expired
	// lease (and so spent an attempt), whatever it then found.
	TookOver bool
	Elapsed  time.Duration
}

// The writes a WriteEvent names.
const (
	WriteClaim      = "claim"      // the freeze and claim, or ExecuteKey's claim
	WriteTakeover   = "takeover"   // the takeover of an expired lease
	WriteCompletion = "completion" // an attempt's outcome
	WriteRelease    = "release"    // a lease cut to its backoff after a transient failure
)

// WriteEvent is a write lost with its connection, and how sending it again
// ended.
type WriteEvent struct {
	Tenant, Action string
	// Write is WriteClaim, WriteTakeover, WriteCompletion or WriteRelease.
	Write string
	// Attempt is the attempt a completion or a release was for; 0 for a
	// claim or a takeover, whose attempt was in the answer that was lost.
	Attempt int
	// Lost is what the first send ended in.
	Lost error
	// Err is what the last send again ended in: nil, the write got through
	// (and what it found says whether the lost one had committed);
	// otherwise the call returns it, and its action is settled later
	// under its lease.
	Err error
	// Sends counts the sends after the loss; Elapsed runs from the loss
	// to the last one's end.
	Sends   int
	Elapsed time.Duration
}

// NopObserver ignores every event: the default Observer, and the struct
// to embed in an Observer that cares about only some events.
type NopObserver struct{}

func (NopObserver) ProviderCalled(ProviderEvent)     {}
func (NopObserver) LookupDone(ProviderEvent)         {}
func (NopObserver) ExecutionFinished(ExecutionEvent) {}
func (NopObserver) WriteLost(WriteEvent)             {}

// Failpoint names, hit on Config.Failpoints around every provider call
// (not a Lookup) and where a claim was lost, each also with "."+action
// appended
// ("agent.action-claimed.pix.charge") so that a crash test can target one
// tool. They keep the "agent." prefix of the tool wrapper that hit them
// before the executor did: RETRYSAFE_FAILPOINTS settings and the restart
// test name them so.
const (
	// FailActionClaimed: the claim (started + lease) is committed and the
	// provider is about to be called.
	FailActionClaimed = "agent.action-claimed"
	// FailProviderAnswered: the provider answered; the completion is not
	// recorded.
	FailProviderAnswered = "agent.provider-answered"
	// FailClaimLost: a claim's or a takeover's connection was lost after
	// it was sent, so it may or may not have committed; it is about to be
	// sent again to find out.
	FailClaimLost = "executor.claim-lost"
)

// Failpoints is hit at the named points above; a crash test kills the
// process there (internal/failpoint.Hit, through FailpointFunc). The
// default does nothing.
type Failpoints interface {
	Hit(name string)
}

// FailpointFunc adapts a function to Failpoints.
type FailpointFunc func(name string)

// Hit calls f(name).
func (f FailpointFunc) Hit(name string) { f(name) }

type noFailpoints struct{}

func (noFailpoints) Hit(string) {}

// defaultHooks fills the no-op Observer and Failpoints (Config.validate).
func (c *Config) defaultHooks() {
	if c.Observer == nil {
		c.Observer = NopObserver{}
	}
	if c.Failpoints == nil {
		c.Failpoints = noFailpoints{}
	}
}

// observed reports whether an Observer other than the no-op one is
// installed: without one the hot path does not even read the clock.
func (e *Executor) observed() bool {
	_, nop := e.cfg.Observer.(NopObserver)
	return !nop
}

// start reads the clock for an event's Elapsed; nothing observing, it
// does not.
func (e *Executor) start() time.Time {
	if !e.observed() {
		return time.Time{}
	}
	return time.Now()
}

// hit hits the failpoint name and name.action. The names are built only
// when failpoints are installed: unset, nothing is allocated.
func (e *Executor) hit(name, action string) {
	if _, off := e.cfg.Failpoints.(noFailpoints); off {
		return
	}
	e.cfg.Failpoints.Hit(name)
	e.cfg.Failpoints.Hit(name + "." + action)
}

// calling runs just before a tool's Execute (call): the claimed
// failpoint, then the clock for called.
func (e *Executor) calling(h held) time.Time {
	e.hit(FailActionClaimed, h.action)
	return e.start()
}

// called runs, deferred, once a tool's Execute returned or panicked: the
// answered failpoint, then the Observer. *errp is the call's final error.
func (e *Executor) called(h held, start time.Time, errp *error) {
	e.hit(FailProviderAnswered, h.action)
	if !e.observed() {
		return
	}
	e.cfg.Observer.ProviderCalled(providerEvent(h, start, *errp, false))
}

// looked runs, deferred, once a tool's Lookup returned or panicked.
func (e *Executor) looked(h held, start time.Time, errp *error) {
	if !e.observed() {
		return
	}
	e.cfg.Observer.LookupDone(providerEvent(h, start, *errp, true))
}

func providerEvent(h held, start time.Time, err error, lookup bool) ProviderEvent {
	ev := ProviderEvent{Tenant: h.tenant, Action: h.action, Key: h.key, Attempt: h.attempt, Elapsed: time.Since(start), Err: err}
	switch {
	case err == nil:
	case lookup && errors.Is(err, tools.ErrNotFound):
		ev.NotFound = true
	default:
		ev.Class = tools.Classify(err).Class
	}
	return ev
}

// sendAgain sends again a write whose connection was lost after it was
// sent (lostconn.SendAgain, up to Config.LostWriteRetry) and tells the Observer how
// that ended. ev holds what the loss knew (tenant, action, write,
// attempt, the loss).
func (e *Executor) sendAgain(ctx context.Context, ev WriteEvent, send func() error) error {
	start := e.start()
	err := e.resend(ctx, &ev, send)
	e.wroteAgain(ev, start, err)
	return err
}

// resend is sendAgain's sending alone, each send counted in ev.Sends:
// for the freeze and claim, whose report starts earlier (at the first
// loss) and may follow no resend at all (see freezeAndClaim).
func (e *Executor) resend(ctx context.Context, ev *WriteEvent, send func() error) error {
	return lostconn.SendAgain(ctx, e.cfg.LostWriteRetry, func() error {
		ev.Sends++
		return send()
	})
}

// wroteAgain reports a lost write sent again since start, ending in err.
func (e *Executor) wroteAgain(ev WriteEvent, start time.Time, err error) {
	if !e.observed() {
		return
	}
	ev.Err, ev.Elapsed = err, time.Since(start)
	e.cfg.Observer.WriteLost(ev)
}

// finished reports an Execute or ExecuteKey (action: the call's, or
// out's when the caller named only a key).
func (e *Executor) finished(tenant, action string, start time.Time, out *Outcome, err error) {
	if !e.observed() {
		return
	}
	ev := ExecutionEvent{Tenant: tenant, Action: action, Outcome: out, Err: err, Elapsed: time.Since(start)}
	if out != nil {
		ev.Action, ev.TookOver = out.Action, out.tookOver
	}
	e.cfg.Observer.ExecutionFinished(ev)
}
