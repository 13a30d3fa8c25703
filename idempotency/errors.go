package idempotency

import (
	"errors"
	"fmt"
	"time"
)

// Sentinel errors. Each names an answer the middleware gives on its own,
// before any effect (problemFor maps each to its status and problem
// type); ErrTxOwned is what a transactional handler gets from the
// transaction it must not end.
var (
	ErrKeyMissing      = errors.New("idempotency: Idempotency-Key header is required")
	ErrKeyInvalid      = errors.New("idempotency: invalid Idempotency-Key")
	ErrKeyReused       = errors.New("idempotency: key reused with a different request")
	ErrInFlight        = errors.New("idempotency: a request with this key is in progress")
	ErrUnauthenticated = errors.New("idempotency: no authenticated tenant")
	ErrBodyTooLarge    = errors.New("idempotency: request body too large")
	ErrTxOwned         = errors.New("idempotency: the middleware commits or rolls back this transaction")
)

// Errors of the middleware's own: the first three are answered (problemFor)
// as 400, 500 and 503; the table's errNotFound (no row for the key) and
// errFenced (a completion or release whose attempt is no longer the row's:
// its lease was taken over, and its result is dropped) never leave it.
var (
	errBodyRead     = errors.New("idempotency: reading the request body")
	errNotCommitted = errors.New("idempotency: transaction not committed")
	errStore        = errors.New("idempotency: store unavailable")
	errNotFound     = errors.New("idempotency: key not found")
	errFenced       = errors.New("idempotency: lease lost to a newer attempt")
)

// InFlightError is ErrInFlight with the pause the client is told to wait.
type InFlightError struct {
	RetryAfter time.Duration
}

func (e *InFlightError) Error() string {
	return fmt.Sprintf("%v (retry after %v)", ErrInFlight, e.RetryAfter)
}

// Is makes errors.Is(err, ErrInFlight) true.
func (e *InFlightError) Is(target error) bool { return target == ErrInFlight }

// KeyError is ErrKeyInvalid with the reason.
type KeyError struct {
	Reason string
}

func (e *KeyError) Error() string { return fmt.Sprintf("%v: %s", ErrKeyInvalid, e.Reason) }

// Is makes errors.Is(err, ErrKeyInvalid) true.
func (e *KeyError) Is(target error) bool { return target == ErrKeyInvalid }

// ConfigError reports an invalid Config or Route field.
type ConfigError struct {
	Field  string
	Reason string
}

func (e *ConfigError) Error() string {
	return fmt.Sprintf("idempotency: config %s %s", e.Field, e.Reason)
}
