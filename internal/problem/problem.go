// Package problem writes RFC 9457 problem details: the body of every error
// answer retrysafe's HTTP servers give on their own (the sidecar, the
// idempotency middleware, the sandbox stand-ins' injected faults).
//
// What they share is here: the members RFC 9457 defines (Details, which is
// the idempotency middleware's public Problem and the faults' body; the
// sidecar's Problem repeats them in its own type because it adds field
// errors), the page that documents every type URI, and how an answer goes
// on the wire (a Content-Length, so that a client sees a complete body, and
// Retry-After in the whole seconds HTTP requires).
//
// # Imports
//
// This package imports only the standard library.
package problem

import (
	"encoding/json"
	"net/http"
	"strconv"
	"time"
)

// ContentType is the media type of a problem details document.
const ContentType = "application/problem+json"

// Docs is where every problem type is documented: each type URI is this
// URL and the anchor of its section (docs/problems.md in the repository).
const Docs = "https://github.com/retrysafe/retrysafe/blob/main/docs/problems.md"

// Details holds the members RFC 9457 defines. A problem with extension
// members is a struct of its own with these four first (encoding/json keeps
// the field order), or a map of members.
type Details struct {
	Type   string `json:"type"`
	Title  string `json:"title"`
	Status int    `json:"status"`
	Detail string `json:"detail,omitempty"`
}

// Opts are the optional parts of an answer. A nil *Opts means none.
type Opts struct {
	// RetryAfter, when positive, is sent as Retry-After, rounded up to
	// whole seconds.
	RetryAfter time.Duration
	// NoStore sends Cache-Control: no-store, for answers about state that
	// changes (and may carry personal data).
	NoStore bool
	// Newline ends the body with a newline, as encoding/json's Encoder
	// does; Content-Length counts it.
	Newline bool
}

// Write answers status with v, a problem document, encoded as JSON. The
// callers' documents are strings, numbers and raw JSON, which always
// encode; one that does not is answered as RFC 9457's untyped 500
// (about:blank) rather than with half a body.
func Write(w http.ResponseWriter, status int, v any, opts *Opts) {
	body, err := json.Marshal(v)
	if err != nil {
		status = http.StatusInternalServerError
		body, _ = json.Marshal(Details{Type: "about:blank", Title: "Internal Server Error", Status: status})
	}
	if opts == nil {
		opts = &Opts{}
	}
	if opts.Newline {
		body = append(body, '\n')
	}
	h := w.Header()
	h.Set("Content-Type", ContentType)
	if opts.NoStore {
		h.Set("Cache-Control", "no-store")
	}
	h.Set("Content-Length", strconv.Itoa(len(body)))
	if opts.RetryAfter > 0 {
		h.Set("Retry-After", strconv.FormatInt(RetryAfterSeconds(opts.RetryAfter), 10))
	}
	w.WriteHeader(status)
	w.Write(body) //nolint:errcheck // the client may be gone
}

// RetryAfterSeconds rounds d up to whole seconds, HTTP's unit for
// Retry-After: a client told less than d would come back too early.
func RetryAfterSeconds(d time.Duration) int64 {
	return int64((d + time.Second - 1) / time.Second)
}
