package idempotency

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net/http"
	"time"

	"github.com/retrysafe/retrysafe/internal/lostconn"
)

// What the middleware does when its connection is lost with a write sent
// after the handler ran: the write may have committed or not (see
// internal/lostconn).

// commitLost answers a transactional request whose COMMIT was sent on a
// connection that was then lost: the transaction committed, or not, and
// the server may still be finishing it. What it left is read on another
// connection once no transaction writes the key any more
// (requestSettled), sent again while the database cannot be reached, as
// a reservation's answer is (up to Config.LostWriteRetry). Committed, the
// answer stored under the key (this request's, unless a duplicate ran
// after this one rolled back: then that one's, a replay) goes to the
// client; rolled back, not-committed, truthfully; unknown still (the
// database away, or the lost session's locks held that long), 503
// commit-unknown: a retry with the key gets the stored answer if it
// committed and runs afresh if it did not.
func (m *Middleware) commitLost(ctx context.Context, w http.ResponseWriter, p reserveParams, attempt int32, rec *recorder, lost error) (outcome, error) {
	m.cfg.Logger.Warn("idempotency: commit's connection lost, reading what it left",
		"operation", p.Operation, "attempt", attempt, "err", lost)
	var row *requestRow
	lw := LostWrite{Operation: p.Operation, Write: WriteCommit, Attempt: attempt, Lost: lost}
	err := m.sendAgain(ctx, lw, func() error {
		var err error
		row, err = requestSettled(ctx, m.db, p, m.cfg.LostWriteRetry)
		if errors.Is(err, errNotFound) {
			row, err = nil, nil
		}
		return err
	})
	switch {
	case err != nil:
		m.cfg.Logger.Error("idempotency: commit's outcome unknown", "operation", p.Operation, "err", err)
		return answered, fmt.Errorf("%w: %w", errCommitUnknown, err)
	case row == nil || row.Status != statusDone || !bytes.Equal(row.Fingerprint, p.Fingerprint):
		m.cfg.Logger.Info("idempotency: the lost commit rolled back", "operation", p.Operation, "attempt", attempt)
		return answered, errNotCommitted
	case row.Attempt == attempt && sameResponse(row.Response, rec.stored(m.keep)):
		m.cfg.Logger.Info("idempotency: the lost commit committed", "operation", p.Operation, "attempt", attempt)
		rec.writeTo(w)
	default:
		writeResponse(w, row.Response, true)
	}
	return answered, nil
}

// reserve claims the key for a reservation-mode request. A claim whose
// connection was lost may have committed or not; it is sent again while
// the database cannot be reached (up to Config.LostWriteRetry, or the client's
// going away). Sent again, it reserves the key if the lost one did not, or
// finds the key running under this request's own holder (claim,
// decideAdopt): its lost reservation, which nobody else can hold, and the
// handler runs under it. Before, the request answered 503, and its retry
// met the lost reservation's 409 for the whole lease.
func (m *Middleware) reserve(ctx context.Context, p reserveParams) (claimed, error) {
	c, err := claim(ctx, m.db, p)
	if err == nil || !lostconn.Lost(err) {
		return c, err
	}
	m.cfg.Logger.Warn("idempotency: reservation's connection lost, sending it again",
		"operation", p.Operation, "err", err)
	lw := LostWrite{Operation: p.Operation, Write: WriteReservation, Lost: err}
	err = m.sendAgain(ctx, lw, func() error {
		var err error
		c, err = claim(ctx, m.db, p)
		return err
	})
	if err == nil && c.adopted {
		m.cfg.Logger.Info("idempotency: the lost reservation had committed; running under it",
			"operation", p.Operation, "attempt", c.res.Attempt)
	}
	return c, err
}

// sendAgain sends again a write whose connection was lost after it was
// sent (lostconn.SendAgain, up to Config.LostWriteRetry) and tells
// Config.OnLostWrite how that ended. lw holds what the loss knew.
func (m *Middleware) sendAgain(ctx context.Context, lw LostWrite, send func() error) error {
	start := time.Now()
	err := lostconn.SendAgain(ctx, m.cfg.LostWriteRetry, func() error {
		lw.Sends++
		return send()
	})
	if m.cfg.OnLostWrite != nil {
		lw.Err, lw.Elapsed = err, time.Since(start)
		m.cfg.OnLostWrite(lw)
	}
	return err
}

// complete stores attempt's answer. A try whose connection was lost may
// have committed or not: it is sent again while the server cannot be
// reached, up to Config.LostWriteRetry, as the executor sends its completions
// (internal/lostconn). Sent again, it is fenced by its attempt like the
// first: it stores the answer, or matches nothing because the first try
// did, which the row then shows (still this attempt, done: nobody else
// finishes an attempt), or because a newer attempt took the key over
// (errFenced).
func (m *Middleware) complete(ctx context.Context, p reserveParams, attempt int32, resp *response) error {
	err := requestComplete(ctx, m.db, p.Scope, attempt, resp, m.cfg.Retention)
	if err == nil || !lostconn.Lost(err) {
		return err
	}
	m.cfg.Logger.Warn("idempotency: answer's connection lost, storing it again",
		"operation", p.Operation, "attempt", attempt, "err", err)
	lw := LostWrite{Operation: p.Operation, Write: WriteAnswer, Attempt: attempt, Lost: err}
	return m.sendAgain(ctx, lw, func() error {
		err := requestComplete(ctx, m.db, p.Scope, attempt, resp, m.cfg.Retention)
		if !errors.Is(err, errFenced) {
			return err
		}
		row, gerr := requestGet(ctx, m.db, p.Scope)
		if gerr != nil && !errors.Is(gerr, errNotFound) {
			return gerr
		}
		if gerr == nil && row.Attempt == attempt && row.Status == statusDone {
			return nil // the lost try's
		}
		return errFenced
	})
}

// release ends attempt's lease now. Lost, it is sent again like an answer
// (complete): ending a lease that already ended changes nothing, and a
// newer attempt's lease is fenced off by the attempt.
func (m *Middleware) release(ctx context.Context, p reserveParams, attempt int32) error {
	err := requestRelease(ctx, m.db, p.Scope, attempt)
	if err == nil || !lostconn.Lost(err) {
		return err
	}
	m.cfg.Logger.Warn("idempotency: release's connection lost, sending it again",
		"operation", p.Operation, "attempt", attempt, "err", err)
	lw := LostWrite{Operation: p.Operation, Write: WriteRelease, Attempt: attempt, Lost: err}
	return m.sendAgain(ctx, lw, func() error {
		return requestRelease(ctx, m.db, p.Scope, attempt)
	})
}
