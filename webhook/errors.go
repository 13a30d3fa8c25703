package webhook

import (
	"errors"
	"fmt"

	"github.com/retrysafe/retrysafe/internal/outbox"
)

// Sentinel errors.
var (
	// ErrConfig: invalid Config, Provider, or RelayConfig.
	ErrConfig = errors.New("webhook: invalid config")
	// ErrUnknownProvider: no provider is configured under the path's name
	// (HTTP 404).
	ErrUnknownProvider = errors.New("webhook: unknown provider")
	// ErrSignature: the signature header is missing, malformed or does not
	// match the body (HTTP 401).
	ErrSignature = errors.New("webhook: bad signature")
	// ErrSignatureExpired: the signature is valid but its timestamp is
	// outside the provider's tolerance: a replay of an old delivery, or a
	// clock far off (HTTP 401).
	ErrSignatureExpired = errors.New("webhook: signature timestamp outside tolerance")
	// ErrMalformed: the body is not an event this package understands
	// (HTTP 400). A *MalformedError carries the reason.
	ErrMalformed = errors.New("webhook: malformed event")
	// ErrTooLarge: the body exceeds Config.MaxBodyBytes (HTTP 413).
	ErrTooLarge = errors.New("webhook: body too large")
	// ErrNotFound: no such order or notification.
	ErrNotFound = errors.New("webhook: not found")
	// ErrInvalid: a required argument is empty or malformed.
	ErrInvalid = errors.New("webhook: invalid argument")
	// ErrBusy: the notification's action is in flight elsewhere, or the
	// database answered with a transient error. Not a failure: try again
	// after BusyError.RetryAfter (the River worker snoozes the job).
	ErrBusy = outbox.ErrBusy
)

// MalformedError is an event refused for its shape. Code is short and
// machine readable ("json", "no_id", "no_order_ref", "unknown_tenant", ...);
// it never quotes the body.
type MalformedError struct {
	Code   string
	Detail string
}

func (e *MalformedError) Error() string {
	if e.Detail == "" {
		return "webhook: malformed event (" + e.Code + ")"
	}
	return "webhook: malformed event (" + e.Code + "): " + e.Detail
}

// Is makes a *MalformedError match ErrMalformed.
func (e *MalformedError) Is(target error) bool { return target == ErrMalformed }

func malformed(code, format string, args ...any) *MalformedError {
	return &MalformedError{Code: code, Detail: fmt.Sprintf(format, args...)}
}

// BusyError says when to try again (What is "notification"). The agent's
// workers return the same type (internal/outbox).
type BusyError = outbox.BusyError
