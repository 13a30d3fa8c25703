package agent

import (
	"errors"
	"fmt"
	"time"

	"github.com/retrysafe/retrysafe/internal/outbox"
)

// Sentinel errors.
var (
	// ErrConfig: invalid Config or RiverConfig.
	ErrConfig = errors.New("agent: invalid config")
	// ErrNotFound: no such message, conversation or turn. An inbox job
	// whose message is not stored cannot happen through Receive, which
	// stores both in one transaction; the River worker cancels it.
	ErrNotFound = errors.New("agent: not found")
	// ErrBusy: another worker holds a live claim on the message, or the
	// tool's action is in flight elsewhere. Not a failure: try again after
	// BusyError.RetryAfter (the River worker snoozes the job).
	ErrBusy = outbox.ErrBusy
	// ErrModel: the model API failed. A *ModelError carries the details.
	ErrModel = errors.New("agent: model call failed")
	// ErrToolCall: the model's tool call cannot be executed as it stands
	// (bad JSON, unknown tool, missing or invalid fields). Nothing was
	// frozen. A *ToolCallError carries the details.
	ErrToolCall = errors.New("agent: malformed tool call")
	// ErrInvalid: a required argument is empty or malformed.
	ErrInvalid = errors.New("agent: invalid argument")
)

// BusyError says when to try again. What is "message" (another worker
// holds its claim) or the action name. The webhook's relay returns the
// same type (internal/outbox).
type BusyError = outbox.BusyError

// ModelError is a failed model call.
type ModelError struct {
	Status    int    // HTTP status, 0 when there was no response
	Code      string // short machine code: "http_429", "timeout", "no_choices"...
	Retryable bool   // may succeed later: River should retry
	// RetryAfter is what the API said to wait (a 429's Retry-After, read
	// by RetryAfterTransport); 0 when it said nothing.
	RetryAfter time.Duration
	Err        error
}

func (e *ModelError) Error() string {
	return fmt.Sprintf("agent: model call failed (%s, retryable=%t): %v", e.Code, e.Retryable, e.Err)
}

// Unwrap exposes the underlying error.
func (e *ModelError) Unwrap() error { return e.Err }

// Is makes a *ModelError match ErrModel.
func (e *ModelError) Is(target error) bool { return target == ErrModel }

// ToolCallError is a tool call that was refused before anything was frozen.
type ToolCallError struct {
	Function string // the function name the model used
	Code     string // "unknown_tool", "bad_arguments", "missing_field", "invalid_field", "ambiguous_field", "key_in_use"
	Field    string // the offending field, when one is to blame
	Err      error
}

func (e *ToolCallError) Error() string {
	s := fmt.Sprintf("agent: tool call %q refused (%s", e.Function, e.Code)
	if e.Field != "" {
		s += ", field " + e.Field
	}
	return s + ")"
}

// Unwrap exposes the underlying error.
func (e *ToolCallError) Unwrap() error { return e.Err }

// Is makes a *ToolCallError match ErrToolCall.
func (e *ToolCallError) Is(target error) bool { return target == ErrToolCall }
