package derive

import (
	"errors"
	"fmt"
	"strings"
)

// Sentinel errors. Use errors.Is; a *FieldError also matches the sentinel
// that classifies it.
var (
	// ErrSecretTooShort: the HMAC secret has fewer than MinSecretLen bytes.
	ErrSecretTooShort = errors.New("derive: HMAC secret must be at least 32 bytes")
	// ErrUnknownAction: no schema is registered for the action.
	ErrUnknownAction = errors.New("derive: unknown action")
	// ErrUnknownVersion: the action has no schema for the requested version.
	ErrUnknownVersion = errors.New("derive: unknown rule version for action")
	// ErrMissingField: a required field is absent, null or empty.
	ErrMissingField = errors.New("missing required field")
	// ErrInvalidField: a field's value breaks its rule.
	ErrInvalidField = errors.New("invalid field")
	// ErrAmbiguous: a value admits two readings and the rule refuses to
	// guess (an amount like "1.800", an 11-digit Pix key that is both a
	// valid CPF and a plausible phone).
	ErrAmbiguous = errors.New("ambiguous field")
	// ErrSchema: a schema is malformed (found by New, at start-up).
	ErrSchema = errors.New("derive: invalid schema")
	// ErrBadTenant: the tenant is empty or not valid UTF-8.
	ErrBadTenant = errors.New("derive: tenant must be non-empty valid UTF-8")
)

// FieldError explains why one field could not be normalized. It never
// includes the field's value: values can be personal data (a CPF).
type FieldError struct {
	Field  string
	Reason string
	Kind   error // ErrMissingField, ErrInvalidField or ErrAmbiguous
}

func (e *FieldError) Error() string {
	if e.Kind == ErrMissingField {
		return fmt.Sprintf("field %q: %s", e.Field, ErrMissingField)
	}
	return fmt.Sprintf("field %q: %s", e.Field, e.Reason)
}

// Is reports whether target is the sentinel that classifies e.
func (e *FieldError) Is(target error) bool { return target == e.Kind }

// FieldErrors is what Derive returns when more than one field could not be
// normalized: each field's error, in the schema's canonical order. It
// unwraps to them, so errors.As finds the first *FieldError and errors.Is
// matches the sentinel of any of them.
type FieldErrors []*FieldError

func (e FieldErrors) Error() string {
	var b strings.Builder
	for i, fe := range e {
		if i > 0 {
			b.WriteString("; ")
		}
		b.WriteString(fe.Error())
	}
	return b.String()
}

// Unwrap exposes each field's error.
func (e FieldErrors) Unwrap() []error {
	errs := make([]error, len(e))
	for i, fe := range e {
		errs[i] = fe
	}
	return errs
}

// FieldErrorsOf returns every field error in err's chain: a FieldErrors'
// fields, or the one *FieldError; nil when there is none.
func FieldErrorsOf(err error) []*FieldError {
	var many FieldErrors
	if errors.As(err, &many) {
		return many
	}
	var fe *FieldError
	if errors.As(err, &fe) {
		return []*FieldError{fe}
	}
	return nil
}

// ruleError is what rules return; Derive wraps it with the field's name.
type ruleError struct {
	reason string
	kind   error
}

func (e *ruleError) Error() string { return e.reason }

func invalid(format string, args ...any) error {
	return &ruleError{reason: fmt.Sprintf(format, args...), kind: ErrInvalidField}
}

func ambiguous(format string, args ...any) error {
	return &ruleError{reason: fmt.Sprintf(format, args...), kind: ErrAmbiguous}
}

var errEmpty = &ruleError{reason: "empty", kind: ErrMissingField}

func fieldError(field string, err error) *FieldError {
	var re *ruleError
	if errors.As(err, &re) {
		return &FieldError{Field: field, Reason: re.reason, Kind: re.kind}
	}
	return &FieldError{Field: field, Reason: err.Error(), Kind: ErrInvalidField}
}
