package idempotency

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
)

// dbtx runs statements. *pgxpool.Pool, *pgx.Conn and pgx.Tx satisfy it,
// so every statement of the table runs inside or outside a transaction.
type dbtx interface {
	Exec(ctx context.Context, sql string, args ...any) (pgconn.CommandTag, error)
	QueryRow(ctx context.Context, sql string, args ...any) pgx.Row
	SendBatch(ctx context.Context, b *pgx.Batch) pgx.BatchResults
}

// Scope identifies one key: the primary key of idempotency_requests.
type Scope struct {
	Tenant    string
	Operation string
	Key       string
}

// rowStatus is a stored key's status column.
type rowStatus string

const (
	statusRunning rowStatus = "running" // reserved; the handler has not stored an answer
	statusDone    rowStatus = "done"    // the answer is stored
)

// response is a stored answer.
type response struct {
	Status int
	Header http.Header // only the headers that matter (Config.StoreHeaders)
	Body   []byte
}

// requestRow is a row of idempotency_requests. The booleans and LeaseLeft
// are computed by the database with its own now() when the row was read,
// so that no decision depends on the Go clock.
type requestRow struct {
	Scope
	Fingerprint  []byte
	Status       rowStatus
	Attempt      int32
	Response     *response     // nil while running
	Expired      bool          // past expires_at: the key counts as unused
	LeaseExpired bool          // running and past its lease: may be taken over
	LeaseLeft    time.Duration // running: time until the lease ends (<= 0 when expired)
	Holder       int64         // the reserving request's holder (0: none recorded)
}

// reserveParams describes a reservation (or a takeover).
type reserveParams struct {
	Scope
	Fingerprint []byte
	Lease       time.Duration // running rows may be taken over after it
	Retention   time.Duration // the row's expires_at, from now; >= Lease
	// LockTimeout, when positive and e is a transaction, bounds the wait on
	// a concurrent uncommitted writer of the same key; exceeding it fails
	// with SQLSTATE 55P03 (see isLockTimeout) and aborts the transaction.
	// The previous lock_timeout is restored afterwards, so that the rest of
	// the transaction (the handler's writes) runs with its usual setting.
	LockTimeout time.Duration
	// Holder is the request's own random number, stored with the rows it
	// reserves or takes over: a running row under it is the request's
	// (its reservation lost with its connection, then found; see claim).
	Holder int64
}

// reservation is a key reserved for the caller.
type reservation struct {
	Attempt   int32         // fencing token for requestComplete
	LeaseLeft time.Duration // by the database clock
}

const requestReserveSQL = `
INSERT INTO idempotency_requests
    (tenant_id, operation, idem_key, fingerprint, status, attempt, lease_until, expires_at, holder)
VALUES ($1, $2, $3, $4, 'running', 1, now() + $5::interval, now() + $6::interval, $7)
ON CONFLICT (tenant_id, operation, idem_key) DO NOTHING
RETURNING attempt, lease_until - now()`

// requestReserve inserts the key as running. ok is false when the key
// already exists: the caller must then read it with requestGet in a new
// statement, because in READ COMMITTED a conflict with a row committed
// while this statement waited is not visible to this statement's snapshot.
func requestReserve(ctx context.Context, e dbtx, p reserveParams) (reservation, bool, error) {
	return reserveRow(ctx, e, p, "reserve", requestReserveSQL,
		p.Tenant, p.Operation, p.Key, p.Fingerprint, p.Lease, p.Retention, p.Holder)
}

const requestTakeOverSQL = `
UPDATE idempotency_requests
SET fingerprint = $4, status = 'running', attempt = attempt + 1,
    lease_until = now() + $5::interval, expires_at = now() + $6::interval,
    response_status = NULL, response_headers = NULL, response_body = NULL,
    finished_at = NULL, updated_at = now(), holder = $8
WHERE tenant_id = $1 AND operation = $2 AND idem_key = $3 AND attempt = $7
  AND (expires_at <= now()
       OR (status = 'running' AND lease_until <= now() AND fingerprint = $4))
RETURNING attempt, lease_until - now()`

// requestTakeOver reuses a key whose row has expired, or whose running
// lease has ended (then only for the same fingerprint). It is a
// compare-and-set on the attempt the caller read: of several concurrent
// takers exactly one gets ok, and the attempt it gets fences the previous
// holder out of requestComplete.
func requestTakeOver(ctx context.Context, e dbtx, p reserveParams, seenAttempt int32) (reservation, bool, error) {
	return reserveRow(ctx, e, p, "take over", requestTakeOverSQL,
		p.Tenant, p.Operation, p.Key, p.Fingerprint, p.Lease, p.Retention, seenAttempt, p.Holder)
}

// reserveRow runs a statement that makes the row running for the caller
// and returns its attempt and lease; ok is false when it matched no row.
func reserveRow(ctx context.Context, e dbtx, p reserveParams, what, sql string, args ...any) (res reservation, ok bool, err error) {
	err = withLockTimeout(ctx, e, p.LockTimeout, sql, args, &res.Attempt, &res.LeaseLeft)
	if errors.Is(err, pgx.ErrNoRows) {
		return reservation{}, false, nil
	}
	if err != nil {
		return reservation{}, false, fmt.Errorf("idempotency: %s: %w", what, err)
	}
	return res, true, nil
}

const requestGetSQL = `
SELECT fingerprint, status, attempt, response_status, response_headers, response_body,
       expires_at <= now(),
       coalesce(status = 'running' AND lease_until <= now(), false),
       coalesce(lease_until - now(), interval '0'),
       coalesce(holder, 0)
FROM idempotency_requests
WHERE tenant_id = $1 AND operation = $2 AND idem_key = $3`

// errNotFound: no row for the key.
var errNotFound = errors.New("idempotency: key not found")

// requestGet reads a key; errNotFound when there is none.
func requestGet(ctx context.Context, e dbtx, s Scope) (*requestRow, error) {
	r := &requestRow{Scope: s}
	var (
		status     string
		respStatus *int16
		respHeader http.Header
		respBody   []byte
	)
	err := e.QueryRow(ctx, requestGetSQL, s.Tenant, s.Operation, s.Key).Scan(
		&r.Fingerprint, &status, &r.Attempt, &respStatus, &respHeader, &respBody,
		&r.Expired, &r.LeaseExpired, &r.LeaseLeft, &r.Holder)
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, errNotFound
	}
	if err != nil {
		return nil, fmt.Errorf("idempotency: get: %w", err)
	}
	r.Status = rowStatus(status)
	if respStatus != nil {
		if respBody == nil {
			respBody = []byte{}
		}
		r.Response = &response{Status: int(*respStatus), Header: respHeader, Body: respBody}
	}
	return r, nil
}

// requestSettled reads the key once no other transaction is writing it: a
// transaction whose COMMIT was sent on a connection that was then lost may
// still be running on the server, and a plain read would see the row as it
// was before it. The reservation's insert waits for it: ON CONFLICT's
// check of the key waits for an uncommitted insert of it and for an
// uncommitted update of its row (a takeover) alike (TestCommitLost's
// takeover case), bounded by wait (lock_timeout). The insert and the read
// after it run in a transaction that is rolled back. errNotFound when no
// row is committed: the insert went in, and is rolled back with the rest.
func requestSettled(ctx context.Context, db DB, p reserveParams, wait time.Duration) (*requestRow, error) {
	tx, err := db.Begin(ctx)
	if err != nil {
		return nil, fmt.Errorf("idempotency: settle: %w", err)
	}
	defer tx.Rollback(ctx) //nolint:errcheck // a broken connection is discarded; nothing of it may commit
	p.LockTimeout = wait
	if _, ok, err := requestReserve(ctx, tx, p); err != nil {
		return nil, err
	} else if ok {
		return nil, errNotFound
	}
	return requestGet(ctx, tx, p.Scope)
}

// errFenced: a completion or release whose attempt is no longer the row's
// (its lease was taken over); its result is dropped.
var errFenced = errors.New("idempotency: lease lost to a newer attempt")

const requestCompleteSQL = `
UPDATE idempotency_requests
SET status = 'done', lease_until = NULL,
    response_status = $5, response_headers = $6, response_body = $7,
    finished_at = now(), updated_at = now(), expires_at = now() + $8::interval
WHERE tenant_id = $1 AND operation = $2 AND idem_key = $3
  AND attempt = $4 AND status = 'running'`

// requestComplete stores the answer of attempt. Retention counts from now.
// errFenced when the row has moved on to another attempt (or is gone).
func requestComplete(ctx context.Context, e dbtx, s Scope, attempt int32, resp *response, retention time.Duration) error {
	header := resp.Header
	if header == nil {
		header = http.Header{}
	}
	body := resp.Body
	if body == nil {
		body = []byte{}
	}
	tag, err := e.Exec(ctx, requestCompleteSQL, s.Tenant, s.Operation, s.Key, attempt,
		int16(resp.Status), header, body, retention)
	return fenced("complete", tag, err)
}

// fenced is the result of a statement fenced by its attempt: errFenced
// when it matched no row.
func fenced(what string, tag pgconn.CommandTag, err error) error {
	if err != nil {
		return fmt.Errorf("idempotency: %s: %w", what, err)
	}
	if tag.RowsAffected() == 0 {
		return errFenced
	}
	return nil
}

const requestReleaseSQL = `
UPDATE idempotency_requests
SET lease_until = now(), updated_at = now()
WHERE tenant_id = $1 AND operation = $2 AND idem_key = $3
  AND attempt = $4 AND status = 'running'`

// requestRelease ends attempt's lease now, so that the next request with the
// key takes it over at once instead of waiting for the lease to run out
// (used when a reservation handler panics: whether its effect happened is
// unknown, exactly as after a crash). errFenced when attempt is not current.
func requestRelease(ctx context.Context, e dbtx, s Scope, attempt int32) error {
	tag, err := e.Exec(ctx, requestReleaseSQL, s.Tenant, s.Operation, s.Key, attempt)
	return fenced("release", tag, err)
}

// requestPurgeSQL deletes one batch of expired rows. SKIP LOCKED makes the
// purge pass over rows a request is taking over right now instead of
// waiting for it, and the LIMIT keeps each statement (and its locks) short.
// A running row is only purged once its lease has also ended.
const requestPurgeSQL = `
DELETE FROM idempotency_requests r
USING (
    SELECT tenant_id, operation, idem_key
    FROM idempotency_requests
    WHERE expires_at <= now() AND (status = 'done' OR lease_until <= now())
    ORDER BY expires_at
    LIMIT $1
    FOR UPDATE SKIP LOCKED
) d
WHERE r.tenant_id = d.tenant_id AND r.operation = d.operation AND r.idem_key = d.idem_key`

// requestPurge deletes at most limit expired keys in one statement and
// returns how many it deleted.
func requestPurge(ctx context.Context, e dbtx, limit int) (int, error) {
	tag, err := e.Exec(ctx, requestPurgeSQL, limit)
	if err != nil {
		return 0, fmt.Errorf("idempotency: purge: %w", err)
	}
	return int(tag.RowsAffected()), nil
}

// withLockTimeout runs one single-row statement, inside a bounded
// lock_timeout when timeout > 0. The save, set, statement and restore go in
// one batch: one round trip. The previous value is parked in a
// transaction-local custom setting because the restore cannot know it when
// the batch is built.
func withLockTimeout(ctx context.Context, e dbtx, timeout time.Duration, sql string, args []any, dest ...any) error {
	if timeout <= 0 {
		return e.QueryRow(ctx, sql, args...).Scan(dest...)
	}
	b := &pgx.Batch{}
	b.Queue(`SELECT set_config('retrysafe.saved_lock_timeout', current_setting('lock_timeout'), true)`)
	b.Queue(`SELECT set_config('lock_timeout', $1, true)`, fmt.Sprintf("%dms", max(1, timeout.Milliseconds())))
	b.Queue(sql, args...)
	b.Queue(`SELECT set_config('lock_timeout', current_setting('retrysafe.saved_lock_timeout'), true)`)
	br := e.SendBatch(ctx, b)
	_, err := br.Exec()
	if err == nil {
		_, err = br.Exec()
	}
	if err == nil {
		err = br.QueryRow().Scan(dest...)
	}
	if err == nil || errors.Is(err, pgx.ErrNoRows) {
		if _, rerr := br.Exec(); rerr != nil {
			err = rerr
		}
	}
	if cerr := br.Close(); err == nil && cerr != nil {
		err = cerr
	}
	return err
}

// isLockTimeout reports whether err is PostgreSQL's lock_not_available
// (55P03): the key is held by an uncommitted concurrent request.
func isLockTimeout(err error) bool {
	var pgErr *pgconn.PgError
	return errors.As(err, &pgErr) && pgErr.Code == "55P03"
}
