package tools

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net"
	"syscall"
)

// Class is a failure class: what the executor may do after the error.
type Class string

// Failure classes. See the package documentation.
const (
	ClassDefinitive Class = "definitive"
	ClassTransient  Class = "transient"
	ClassUncertain  Class = "uncertain"
)

var (
	// ErrNotFound: Lookup found no action under the key at the provider.
	ErrNotFound = errors.New("tools: provider has no record of the key")
	// ErrLookupUnsupported: the tool cannot be asked about a key.
	ErrLookupUnsupported = errors.New("tools: lookup not supported")
	// ErrUnknownTool: no tool is registered under the name.
	ErrUnknownTool = errors.New("tools: unknown tool")
)

// Error is a classified tool failure. Message and Code must not hold
// personal data (no CPF, Pix key or payload): they are stored and logged.
type Error struct {
	Class   Class
	Code    string // short machine code, e.g. "http_422", "timeout"
	Status  int    // provider HTTP status, 0 when there was no response
	Message string
	Err     error // underlying error, if any (not stored)
}

func (e *Error) Error() string {
	msg := fmt.Sprintf("%s failure", e.Class)
	if e.Code != "" {
		msg += " (" + e.Code + ")"
	}
	if e.Message != "" {
		msg += ": " + e.Message
	}
	return msg
}

func (e *Error) Unwrap() error { return e.Err }

// Definitive wraps err as a definitive failure.
func Definitive(code, message string, err error) error {
	return &Error{Class: ClassDefinitive, Code: code, Message: message, Err: err}
}

// Transient wraps err as a failure that certainly did not act.
func Transient(code, message string, err error) error {
	return &Error{Class: ClassTransient, Code: code, Message: message, Err: err}
}

// Uncertain wraps err as a failure after which the provider may have acted.
func Uncertain(code, message string, err error) error {
	return &Error{Class: ClassUncertain, Code: code, Message: message, Err: err}
}

// Classify returns err as an *Error, classifying unclassified errors:
// a dial failure or a failed TLS handshake (the request never reached the
// provider) is transient, a deadline, a reset, an unexpected EOF or
// anything unknown is uncertain. It returns nil for nil.
func Classify(err error) *Error {
	if err == nil {
		return nil
	}
	var te *Error
	if errors.As(err, &te) {
		return te
	}
	var op *net.OpError
	if errors.As(err, &op) && op.Op == "dial" {
		return &Error{Class: ClassTransient, Code: "dial", Message: "could not connect", Err: err}
	}
	if handshakeFailed(err) {
		return &Error{Class: ClassTransient, Code: "tls", Message: "the TLS handshake with the provider failed", Err: err}
	}
	switch {
	case errors.Is(err, context.DeadlineExceeded):
		return &Error{Class: ClassUncertain, Code: "timeout", Message: "no answer before the timeout", Err: err}
	case errors.Is(err, context.Canceled):
		return &Error{Class: ClassUncertain, Code: "canceled", Message: "call canceled", Err: err}
	case errors.Is(err, syscall.ECONNRESET), errors.Is(err, io.ErrUnexpectedEOF), errors.Is(err, io.EOF):
		return &Error{Class: ClassUncertain, Code: "reset", Message: "connection lost before the answer", Err: err}
	}
	var ne net.Error
	if errors.As(err, &ne) && ne.Timeout() {
		return &Error{Class: ClassUncertain, Code: "timeout", Message: "no answer before the timeout", Err: err}
	}
	return &Error{Class: ClassUncertain, Code: "unknown", Message: "unclassified tool error", Err: err}
}

// handshakeAlerts are the alerts a server sends when it refuses a
// handshake, the client's certificate above all (RFC 8446 6.2: bad,
// unsupported, revoked, expired or unknown certificate, unknown CA, access
// denied, certificate required). Under TLS 1.3 the client may have
// written its request before one arrives, but a server reads no
// application data on a handshake it failed.
var handshakeAlerts = []tls.AlertError{40, 42, 43, 44, 45, 46, 48, 49, 116}

// handshakeFailed reports whether err is a TLS handshake that failed
// before the provider could read a request: the server's certificate did
// not verify here, or the server refused the handshake with one of
// handshakeAlerts. (A malformed record is not among them: one can come
// after the answer was sent.)
func handshakeFailed(err error) bool {
	var cv *tls.CertificateVerificationError
	if errors.As(err, &cv) {
		return true
	}
	// crypto/tls reports a peer's alert as a net.OpError "remote error"
	// around its unexported alert type, whose text AlertError shares.
	var op *net.OpError
	if errors.As(err, &op) && op.Op == "remote error" && op.Err != nil {
		for _, a := range handshakeAlerts {
			if op.Err.Error() == a.Error() {
				return true
			}
		}
	}
	return false
}
