package idempotency

import (
	"errors"
	"fmt"
	"time"
)

// Sentinel errors. Each but ErrTxOwned names an answer the middleware
// gives on its own, before any effect (its status in parentheses).
var (
	// ErrKeyMissing: the route requires an Idempotency-Key and got none (400).
	ErrKeyMissing = errors.New("idempotency: Idempotency-Key header is required")
	// ErrKeyInvalid: the key is empty, too long, repeated or not printable
	// ASCII (400).
	ErrKeyInvalid = errors.New("idempotency: invalid Idempotency-Key")
	// ErrKeyReused: the key was first used with another request (422).
	ErrKeyReused = errors.New("idempotency: key reused with a different request")
	// ErrInFlight: the first request with the key has not finished (409).
	ErrInFlight = errors.New("idempotency: a request with this key is in progress")
	// ErrUnauthenticated: Config.Tenant named no tenant (401).
	ErrUnauthenticated = errors.New("idempotency: no authenticated tenant")
	// ErrBodyTooLarge: the body exceeds Config.MaxBodyBytes (413).
	ErrBodyTooLarge = errors.New("idempotency: request body too large")
	// ErrTxOwned: a transactional handler tried to end the transaction the
	// middleware owns.
	ErrTxOwned = errors.New("idempotency: the middleware commits or rolls back this transaction")
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
