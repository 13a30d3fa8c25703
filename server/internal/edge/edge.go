package edge

import (
	"context"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/json"
	"errors"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/retrysafe/retrysafe/derive"
	"github.com/retrysafe/retrysafe/executor"
	"github.com/retrysafe/retrysafe/intent"
	"github.com/retrysafe/retrysafe/tools"
)

// Limits on identifiers, well inside what the tables and providers accept.
const (
	MaxRefLen    = 200
	MaxSourceLen = 255
	MaxTenantLen = 100
)

// CleanIdentifier reports whether s is valid UTF-8 without leading or
// trailing white space or control characters: " inv-1" and "inv-1" would
// be two intents whose payloads (the ref rule trims) give one key.
func CleanIdentifier(s string) bool {
	if !utf8.ValidString(s) || strings.TrimSpace(s) != s {
		return false
	}
	return !strings.ContainsFunc(s, unicode.IsControl)
}

// ValidTenant reports whether t can name a tenant: 1 to MaxTenantLen bytes
// of UTF-8 without white space or control characters (it becomes a metric
// label and a log field).
func ValidTenant(t string) bool {
	return t != "" && len(t) <= MaxTenantLen && utf8.ValidString(t) && !strings.ContainsFunc(t, IsControlOrSpace)
}

// IsControlOrSpace reports a rune no tenant or token may hold.
func IsControlOrSpace(r rune) bool {
	return r <= ' ' || r == 0x7f || r == utf8.RuneError
}

// Authenticator maps bearer tokens to tenants in constant time.
//
// Tokens are compared as SHA-256 digests: subtle.ConstantTimeCompare is
// constant-time only for inputs of equal length, and digests hide the
// configured tokens' lengths too. Every configured token is compared on
// every request, and the match is selected with ConstantTimeSelect rather
// than a branch, so timing does not say which entry matched or how far the
// scan got.
type Authenticator struct {
	digests [][sha256.Size]byte
	tenants []string
}

// Add accepts token as tenant's. The caller has checked both.
func (a *Authenticator) Add(tenant, token string) {
	a.digests = append(a.digests, sha256.Sum256([]byte(token)))
	a.tenants = append(a.tenants, tenant)
}

// Tenant returns the tenant of token, if it is a configured one.
func (a *Authenticator) Tenant(token string) (string, bool) {
	d := sha256.Sum256([]byte(token))
	match := -1
	for i := range a.digests {
		eq := subtle.ConstantTimeCompare(d[:], a.digests[i][:])
		match = subtle.ConstantTimeSelect(eq, i, match)
	}
	if match < 0 {
		return "", false
	}
	return a.tenants[match], true
}

// Execute runs call for a remote caller: with executor.Opts.NoWait (a
// transient failure is answered in flight, and the caller's retry is the
// retry), on a context detached from ctx and bounded by timeout, so that a
// caller who hangs up does not cut the provider call halfway (it finishes,
// is recorded, and the retry replays it).
//
// When another worker took the action over while this one called the
// provider, this call's result was dropped: out is the row as the taker
// left it (in flight, or settled), which is the answer that counts, err is
// nil and lost carries executor.ErrLeaseLost for the log.
func Execute(ctx context.Context, ex *executor.Executor, timeout time.Duration, call executor.Call) (out *executor.Outcome, lost, err error) {
	xctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), timeout)
	defer cancel()
	out, err = ex.Execute(xctx, call, &executor.Opts{NoWait: true})
	if out != nil && errors.Is(err, executor.ErrLeaseLost) {
		return out, err, nil
	}
	return out, nil, err
}

// Kind is what an execution that got no outcome means for the caller.
type Kind int

const (
	// Unavailable: the database or a timeout; nothing was answered and
	// the same call again is safe (every path to an effect goes through
	// the frozen key).
	Unavailable Kind = iota
	// InvalidFields: the fields could not be normalized and no intent is
	// frozen under the reference yet; nothing was frozen or called.
	InvalidFields
	// InvalidCall: the call itself is malformed (intent.ErrInvalid).
	InvalidCall
	// RefusedData: the database refused a value (executor.ErrRefused);
	// the same call would be refused again.
	RefusedData
	// UnknownAction: no tool or rule for the action or version.
	UnknownAction
	// KeyInUse: another reference of the tenant froze the same payload.
	KeyInUse
)

// Classify tells what err, from Execute without an outcome, means. fes
// are the field errors when there are any, every field that could not be
// normalized (they never carry the value).
func Classify(err error) (k Kind, fes []*derive.FieldError) {
	if fes = derive.FieldErrorsOf(err); fes != nil {
		return InvalidFields, fes
	}
	switch {
	case errors.Is(err, derive.ErrMissingField) || errors.Is(err, derive.ErrInvalidField) || errors.Is(err, derive.ErrAmbiguous):
		return InvalidFields, nil
	case errors.Is(err, intent.ErrInvalid):
		return InvalidCall, nil
	case errors.Is(err, executor.ErrRefused):
		return RefusedData, nil
	case errors.Is(err, executor.ErrUnknownTool), errors.Is(err, tools.ErrUnknownTool), errors.Is(err, derive.ErrUnknownAction), errors.Is(err, derive.ErrUnknownVersion):
		return UnknownAction, nil
	case errors.Is(err, intent.ErrKeyInUse):
		return KeyInUse, nil
	}
	return Unavailable, nil
}

// Answer is the part of an edge's answer that comes from the executor's
// Outcome: the same members, under the same names, in the sidecar's
// execute response and in the MCP server's result.
type Answer struct {
	// IdempotencyKey is the frozen key the provider saw (or will see).
	IdempotencyKey string `json:"idempotency_key,omitempty"`
	// Replayed: this call did not reach the provider; the stored outcome
	// of an earlier call is returned.
	Replayed bool `json:"replayed"`
	// Created: this call froze the intent.
	Created bool `json:"created"`
	Attempt int  `json:"attempt,omitempty"`
	// DivergentFields names the fields of this call that differ from the
	// frozen payload. Their values were dropped: the frozen ones were used.
	DivergentFields []string `json:"divergent_fields"`
	// IgnoredFields names fields the tool's schema does not know.
	IgnoredFields []string `json:"ignored_fields"`
	// Response is the provider's answer (completed).
	Response json.RawMessage `json:"response,omitempty"`
	// Error is the stored failure (failed, review).
	Error *executor.ToolFailure `json:"error,omitempty"`
	// RetryAfterMillis is when to call again: in_flight (when the current
	// lease ends, at least the edge's minimum) and, for the MCP server,
	// error.
	RetryAfterMillis int64 `json:"retry_after_ms,omitempty"`
}

// AnswerOf is out's answer; the field lists are never null.
func AnswerOf(out *executor.Outcome) Answer {
	return Answer{
		IdempotencyKey:  out.Key,
		Replayed:        out.Replayed,
		Created:         out.Created,
		Attempt:         out.Attempt,
		DivergentFields: NonNil(out.Divergent),
		IgnoredFields:   NonNil(out.Ignored),
		Response:        out.Response,
		Error:           out.Failure,
	}
}

// NonNil returns s, or an empty list for nil (a JSON [] rather than null).
func NonNil(s []string) []string {
	if s == nil {
		return []string{}
	}
	return s
}
