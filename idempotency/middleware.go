package idempotency

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"math/rand/v2"
	"net/http"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/retrysafe/retrysafe/internal/backoff"
	"github.com/retrysafe/retrysafe/internal/lostconn"
)

// DB is what the middleware needs of a database: *pgxpool.Pool satisfies
// it. It must be safe for concurrent use, so a single *pgx.Conn will not do.
type DB interface {
	Begin(ctx context.Context) (pgx.Tx, error)
	Exec(ctx context.Context, sql string, args ...any) (pgconn.CommandTag, error)
	QueryRow(ctx context.Context, sql string, args ...any) pgx.Row
	SendBatch(ctx context.Context, b *pgx.Batch) pgx.BatchResults
}

// Mode says when the key is committed relative to the handler's effects.
type Mode int

const (
	// ModeTransactional commits key, handler writes and answer together.
	ModeTransactional Mode = iota + 1
	// ModeReservation commits the key with a lease before the handler runs.
	ModeReservation
)

func (m Mode) String() string {
	switch m {
	case ModeTransactional:
		return "transactional"
	case ModeReservation:
		return "reservation"
	}
	return fmt.Sprintf("Mode(%d)", int(m))
}

// Route configures the middleware for one route.
type Route struct {
	// Operation is the scope's middle part: one name per route, for
	// example its pattern "POST /v1/pix/charges". Required. Two routes must
	// not share an operation, and one operation must keep its mode.
	Operation string
	// KeyOptional lets requests without an Idempotency-Key through,
	// unprotected (in transactional mode the handler still gets a
	// transaction). By default a missing key answers 400.
	KeyOptional bool
	// Wait, when positive, makes a duplicate of an unfinished request wait
	// up to this long for the first one's answer (polling, holding no
	// connection between polls) before answering 409.
	Wait time.Duration
}

func (rt Route) validate() {
	if rt.Operation == "" {
		panic(&ConfigError{Field: "Route.Operation", Reason: "is required"})
	}
	if rt.Wait < 0 {
		panic(&ConfigError{Field: "Route.Wait", Reason: "must not be negative"})
	}
}

// TxHandlerFunc is a transactional route's handler. It must do all of its
// database work through tx (never a second connection from the pool, which
// could deadlock under load), must not commit or roll it back (both return
// ErrTxOwned), and should answer whatever it would answer without the
// middleware: its status, headers and body are stored in tx and sent once
// tx has committed.
type TxHandlerFunc func(w http.ResponseWriter, r *http.Request, tx pgx.Tx)

// Info describes the key a handler runs under; see FromContext.
type Info struct {
	Scope
	Mode Mode
	// Attempt counts executions for this key: above 1 in reservation mode
	// when an earlier attempt's lease ran out (it may or may not have
	// reached its provider).
	Attempt int32
}

type infoKey struct{}

// FromContext returns the key a handler runs under; ok is false outside
// the middleware or for a request without a key on a KeyOptional route.
func FromContext(ctx context.Context) (Info, bool) {
	info, ok := ctx.Value(infoKey{}).(Info)
	return info, ok
}

// Middleware wraps routes. Create it once with New and share it.
type Middleware struct {
	db   DB
	cfg  Config
	keep map[string]bool
}

// New validates cfg (after defaults) and returns a Middleware on db, whose
// schema must hold the idempotency_requests table (migration 002).
func New(db DB, cfg Config) (*Middleware, error) {
	if db == nil {
		return nil, &ConfigError{Field: "db", Reason: "is nil"}
	}
	cfg = cfg.WithDefaults()
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	return &Middleware{db: db, cfg: cfg, keep: cfg.storeHeaderSet()}, nil
}

// Config returns the effective configuration (defaults applied).
func (m *Middleware) Config() Config { return m.cfg }

// Transactional protects h: the key is inserted in the transaction h
// receives, and key, h's writes and h's answer commit together or not at
// all. A crash anywhere before the commit leaves nothing, and a retry runs
// h afresh. It panics with a *ConfigError on an invalid route.
func (m *Middleware) Transactional(route Route, h TxHandlerFunc) http.Handler {
	route.validate()
	return &handler{m: m, route: route, mode: ModeTransactional, tx: h}
}

// Reservation protects h, whose effects leave the database: the key is
// committed as running with a lease before h runs, h runs holding no
// connection of the middleware's, and its answer is stored afterwards.
//
// h must tolerate running twice for one key: if the process dies while h
// runs (or h panics), the key stays reserved until its lease ends and the
// next request with the key then runs h again, with Info.Attempt
// incremented. Pass Info.Key to the provider as its idempotency key (or ask
// the provider whether the first attempt went through) so that the second
// run does not repeat the effect. h's context is cancelled when its lease
// ends. It panics with a *ConfigError on an invalid route.
func (m *Middleware) Reservation(route Route, h http.Handler) http.Handler {
	route.validate()
	return &handler{m: m, route: route, mode: ModeReservation, plain: h}
}

type handler struct {
	m     *Middleware
	route Route
	mode  Mode
	tx    TxHandlerFunc
	plain http.Handler
}

// maxRounds bounds the reserve/read/take-over loop when rows vanish (purged)
// or change (taken over) between statements; past it the request is
// answered as in flight, which is always safe.
const maxRounds = 8

// outcome of one round of a request.
type outcome int

const (
	answered outcome = iota // the client has its answer
	busy                    // another request holds the key: wait or 409
)

func (h *handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	p, ok := h.params(w, r)
	if !ok {
		return
	}
	cfg := &h.m.cfg
	// The wait bound is local patience, not lease arithmetic: the Go clock
	// is fine for it.
	deadline := time.Now().Add(h.route.Wait)
	for round := 1; ; round++ {
		var out outcome
		var err error
		if h.mode == ModeTransactional {
			out, err = h.serveTx(w, r, p)
		} else {
			out, err = h.serveReservation(w, r, p)
		}
		if err != nil {
			writeError(w, err)
			return
		}
		if out == answered {
			return
		}
		waiting := h.route.Wait > 0 && time.Until(deadline) > 0
		if cfg.OnInFlight != nil {
			cfg.OnInFlight(InFlight{Operation: h.route.Operation, Round: round, Waiting: waiting})
		}
		if !waiting {
			writeError(w, &InFlightError{RetryAfter: cfg.RetryAfter})
			return
		}
		// Jitter keeps a crowd of waiting duplicates from polling in step.
		pause := backoff.Exponential(cfg.PollInterval, 16*cfg.PollInterval, round)
		select {
		case <-r.Context().Done():
			return // the client is gone; nothing was executed for it
		case <-time.After(min(backoff.UpperHalf(pause), time.Until(deadline))):
		}
	}
}

// params reads what identifies the request: its tenant, key and
// fingerprint. ok is false when it has answered on its own: a request
// that cannot be identified, or one without a key (refused, or let
// through unprotected on a KeyOptional route).
func (h *handler) params(w http.ResponseWriter, r *http.Request) (p reserveParams, ok bool) {
	cfg := &h.m.cfg
	tenant, err := cfg.Tenant(r)
	if err != nil || tenant == "" {
		writeError(w, ErrUnauthenticated)
		return p, false
	}
	key, present, err := ParseKey(r)
	if err != nil {
		writeError(w, err)
		return p, false
	}
	if !present {
		if !h.route.KeyOptional {
			writeError(w, ErrKeyMissing)
		} else {
			h.serveUnprotected(w, r)
		}
		return p, false
	}
	body, err := readBody(r, cfg.MaxBodyBytes)
	if err != nil {
		writeError(w, err)
		return p, false
	}
	fp := Fingerprint(r.Method, r.URL.Path, r.URL.RawQuery, body)
	return reserveParams{
		Scope:       Scope{Tenant: tenant, Operation: h.route.Operation, Key: key},
		Fingerprint: fp[:],
		Lease:       cfg.Lease,
		Retention:   cfg.Retention,
		Holder:      rand.Int64N(math.MaxInt64) + 1, // never 0, which reads as none
	}, true
}

// decision is what an existing row means for a new request with its key.
type decision int

const (
	decideAdopt decision = iota // running under this request's own holder: its lost reservation
	decideReplay
	decideReused
	decideBusy
	decideTakeOver
)

func decide(row *requestRow, p reserveParams) decision {
	switch {
	case row.Expired:
		return decideTakeOver // retention ended: the key counts as unused, whatever its old request
	case !bytes.Equal(row.Fingerprint, p.Fingerprint):
		return decideReused
	case row.Status == statusRunning && !row.LeaseExpired && p.Holder != 0 && row.Holder == p.Holder:
		return decideAdopt
	case row.Status == statusDone:
		return decideReplay
	case row.LeaseExpired:
		return decideTakeOver
	default:
		return decideBusy
	}
}

// claimed is what claim found.
type claimed struct {
	res    reservation // the key is this request's, at res.Attempt
	replay *response   // the key is done, for the same request: its answer
	busy   bool        // another request holds the key
	// adopted: res is this request's reservation sent earlier, whose
	// connection was lost after it committed.
	adopted bool
}

// owned reports whether the key is now this request's.
func (c claimed) owned() bool { return c.res.Attempt > 0 }

// finish ends a round whose key is not this request's: err, a busy key, or
// a replay of the stored answer.
func (c claimed) finish(w http.ResponseWriter, err error) (outcome, error) {
	switch {
	case err != nil:
		return answered, err
	case c.busy:
		return busy, nil
	}
	writeResponse(w, c.replay, true)
	return answered, nil
}

// claim makes the key this request's, on q (the request's transaction, or
// the pool): it inserts the key, or reads the row the insert conflicted
// with and decides. A row whose retention or lease has ended is taken over
// by compare-and-set on the attempt just read. Each read is a new
// statement: in READ COMMITTED, the insert's own snapshot cannot see a row
// committed while it waited.
func claim(ctx context.Context, q dbtx, p reserveParams) (claimed, error) {
	res, ok, err := requestReserve(ctx, q, p)
	for round := 0; !ok; round++ {
		if p.LockTimeout > 0 && isLockTimeout(err) {
			return claimed{busy: true}, nil
		}
		if err != nil {
			return claimed{}, fmt.Errorf("%w: %w", errStore, err)
		}
		if round == maxRounds {
			return claimed{busy: true}, nil
		}
		var row *requestRow
		row, err = requestGet(ctx, q, p.Scope)
		if errors.Is(err, errNotFound) { // purged since: reserve again
			res, ok, err = requestReserve(ctx, q, p)
			continue
		}
		if err != nil {
			return claimed{}, fmt.Errorf("%w: %w", errStore, err)
		}
		switch decide(row, p) {
		case decideAdopt:
			return claimed{res: reservation{Attempt: row.Attempt, LeaseLeft: row.LeaseLeft}, adopted: true}, nil
		case decideReplay:
			return claimed{replay: row.Response}, nil
		case decideReused:
			return claimed{}, ErrKeyReused
		case decideBusy:
			return claimed{busy: true}, nil
		case decideTakeOver:
			res, ok, err = requestTakeOver(ctx, q, p, row.Attempt)
		}
	}
	return claimed{res: res}, nil
}

// serveTx runs one round in transactional mode. Everything happens on the
// transaction's one connection, which is given back before any wait.
func (h *handler) serveTx(w http.ResponseWriter, r *http.Request, p reserveParams) (outcome, error) {
	m := h.m
	ctx := r.Context()
	tx, err := m.db.Begin(ctx)
	if err != nil {
		return answered, fmt.Errorf("%w: %w", errStore, err)
	}
	// release ends the transaction without committing; it runs before any
	// answer is written (a slow client must not keep the connection) and,
	// deferred, on a handler panic: nothing of this request survives.
	done := false
	release := func() {
		if !done {
			done = true
			rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
			tx.Rollback(rctx) //nolint:errcheck // the connection is discarded if this fails
			cancel()
		}
	}
	defer release()

	// A duplicate of a request that is running right now blocks on the
	// first one's uncommitted key; LockTimeout turns a long wait into
	// "busy" so that the duplicate frees its connection. The lock_timeout
	// is restored before the handler's statements.
	p.LockTimeout = m.cfg.LockTimeout
	c, err := claim(ctx, tx, p)
	if err != nil || !c.owned() {
		release()
		return c.finish(w, err)
	}
	res := c.res

	rec := newRecorder()
	info := Info{Scope: p.Scope, Mode: ModeTransactional, Attempt: res.Attempt}
	h.tx(rec, r.WithContext(context.WithValue(ctx, infoKey{}, info)), ownedTx{tx})
	rec.finish()
	if abandoned(ctx, rec) {
		release()
		m.cfg.Logger.Info("idempotency: client gone and handler failed; rolled back, nothing stored",
			"operation", p.Operation, "status", rec.status)
		rec.writeTo(w)
		return answered, nil
	}

	// The client may have gone while the handler ran: its answer is still
	// worth committing, so that its retry gets a replay.
	cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
	defer cancel()
	if err := requestComplete(cctx, tx, p.Scope, res.Attempt, rec.stored(m.keep), m.cfg.Retention); err != nil {
		release()
		m.cfg.Logger.Warn("idempotency: answer not stored; rolled back", "operation", p.Operation, "err", err)
		return answered, errNotCommitted
	}
	done = true // a failed Commit rolls back by itself
	if err := tx.Commit(cctx); err != nil {
		if lostconn.Lost(err) {
			return m.commitLost(cctx, w, p, res.Attempt, rec, err)
		}
		m.cfg.Logger.Warn("idempotency: commit failed; rolled back", "operation", p.Operation, "err", err)
		return answered, errNotCommitted
	}
	rec.writeTo(w)
	return answered, nil
}

// serveReservation runs one round in reservation mode. Each statement takes
// a pool connection and gives it back; none is held while the handler runs.
func (h *handler) serveReservation(w http.ResponseWriter, r *http.Request, p reserveParams) (outcome, error) {
	m := h.m
	ctx := r.Context()
	c, err := m.reserve(ctx, p)
	if err != nil || !c.owned() {
		return c.finish(w, err)
	}
	res := c.res

	// From here on the key is committed as ours: whatever happens, the
	// answer (or the end of the lease) must reach the database even if the
	// client goes away.
	detached := context.WithoutCancel(ctx)
	info := Info{Scope: p.Scope, Mode: ModeReservation, Attempt: res.Attempt}
	hctx, cancel := context.WithTimeout(context.WithValue(ctx, infoKey{}, info), res.LeaseLeft)
	defer cancel()
	rec := newRecorder()
	finished := false
	defer func() {
		if finished {
			return
		}
		// The handler panicked: its effect may or may not have happened,
		// exactly as after a crash. End the lease now so the client's retry
		// runs it again at once rather than after the lease.
		rctx, cancel := context.WithTimeout(detached, 5*time.Second)
		defer cancel()
		if err := m.release(rctx, p, res.Attempt); err != nil && !errors.Is(err, errFenced) {
			m.cfg.Logger.Warn("idempotency: lease not released after panic", "operation", p.Operation, "err", err)
		}
	}()
	h.plain.ServeHTTP(rec, r.WithContext(hctx))
	finished = true
	rec.finish()

	cctx, ccancel := context.WithTimeout(detached, 30*time.Second)
	defer ccancel()
	if abandoned(ctx, rec) {
		// As after a crash: whether the effect happened is unknown, and
		// the handler tolerates a second run. End the lease so that the
		// retry runs it now.
		if err := m.release(cctx, p, res.Attempt); err != nil && !errors.Is(err, errFenced) {
			m.cfg.Logger.Warn("idempotency: lease not released after an abandoned request", "operation", p.Operation, "err", err)
		}
		m.cfg.Logger.Info("idempotency: client gone and handler failed; lease released, nothing stored",
			"operation", p.Operation, "status", rec.status)
		rec.writeTo(w)
		return answered, nil
	}
	switch err := m.complete(cctx, p, res.Attempt, rec.stored(m.keep)); {
	case errors.Is(err, errFenced):
		// Our lease ran out and a newer attempt owns the key: its answer
		// is the one kept. Ours still describes what happened here.
		m.cfg.Logger.Warn("idempotency: lease lost before the answer was stored; answer not kept",
			"operation", p.Operation, "attempt", res.Attempt)
	case err != nil:
		// The effect happened; the client gets its answer. The row stays
		// running and a retry after the lease runs the handler again.
		m.cfg.Logger.Error("idempotency: answer not stored", "operation", p.Operation, "err", err)
	}
	rec.writeTo(w)
	return answered, nil
}

// abandoned reports a 5xx answer given after the client's request was
// canceled (the client hung up or timed out, or the server is shutting
// down). Such an answer reached no one, and it is most often the
// cancellation's own echo: a handler's query refused for a canceled
// context, which pgx reports before touching the transaction. Stored, it
// would answer every retry of the key with a failure that the retry's own
// run would not have; so it is not stored, and the retry runs the handler
// again. A 5xx given while the client still waited is stored as any answer.
func abandoned(ctx context.Context, rec *recorder) bool {
	return rec.status >= 500 && ctx.Err() != nil
}

// serveUnprotected runs a KeyOptional route's handler for a request without
// a key.
func (h *handler) serveUnprotected(w http.ResponseWriter, r *http.Request) {
	if h.mode == ModeReservation {
		h.plain.ServeHTTP(w, r)
		return
	}
	ctx := r.Context()
	tx, err := h.m.db.Begin(ctx)
	if err != nil {
		writeError(w, fmt.Errorf("%w: %w", errStore, err))
		return
	}
	committed := false
	defer func() {
		if !committed {
			rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
			tx.Rollback(rctx) //nolint:errcheck
			cancel()
		}
	}()
	rec := newRecorder()
	h.tx(rec, r, ownedTx{tx})
	rec.finish()
	if err := tx.Commit(context.WithoutCancel(ctx)); err != nil {
		writeError(w, errNotCommitted)
		return
	}
	committed = true
	rec.writeTo(w)
}

func readBody(r *http.Request, limit int64) ([]byte, error) {
	if r.Body == nil || r.Body == http.NoBody {
		r.Body = http.NoBody
		return nil, nil
	}
	body, err := io.ReadAll(io.LimitReader(r.Body, limit+1))
	r.Body.Close()
	if err != nil {
		return nil, fmt.Errorf("%w: %w", errBodyRead, err)
	}
	if int64(len(body)) > limit {
		return nil, ErrBodyTooLarge
	}
	r.Body = io.NopCloser(bytes.NewReader(body))
	return body, nil
}

// ownedTx is the transaction as a handler sees it: everything but ending it.
type ownedTx struct{ pgx.Tx }

func (ownedTx) Commit(context.Context) error   { return ErrTxOwned }
func (ownedTx) Rollback(context.Context) error { return ErrTxOwned }
