package strictjson

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"strings"

	"github.com/go-json-experiment/json/jsontext"
)

// Reasons an Error gives.
const (
	ReasonSyntax      = "invalid JSON"
	ReasonDuplicate   = "duplicate member"
	ReasonInvalidUTF8 = "invalid UTF-8 or unpaired surrogate"
	ReasonNUL         = "NUL character"
	ReasonTrailing    = "more than one JSON value"
	ReasonEmpty       = "empty document"
)

// ErrStrict matches every *Error.
var ErrStrict = errors.New("strictjson: refused")

// Error is the first problem Check found. It never holds the document's
// values (they may be personal data), only where.
type Error struct {
	// Pointer is the RFC 6901 JSON Pointer of the value or member at
	// fault ("" for the whole document).
	Pointer string
	// Offset is the byte offset at or after which it was found.
	Offset int64
	Reason string
}

func (e *Error) Error() string {
	if e.Pointer == "" {
		return fmt.Sprintf("strictjson: %s at byte %d", e.Reason, e.Offset)
	}
	return fmt.Sprintf("strictjson: %s at %s (%s)", e.Reason, e.Field(), e.Pointer)
}

// Is makes every *Error match ErrStrict.
func (e *Error) Is(target error) bool { return target == ErrStrict }

// Field is the pointer as a dotted path of member names and array
// indexes ("fields.amount", "items.0.sku"); "" for the whole document.
func (e *Error) Field() string {
	if e.Pointer == "" {
		return ""
	}
	var parts []string
	for tok := range jsontext.Pointer(e.Pointer).Tokens() {
		parts = append(parts, tok)
	}
	return strings.Join(parts, ".")
}

// Check reads data as exactly one JSON value and returns an *Error for
// the first of: a syntax error, an object with two members of one name,
// invalid UTF-8 (raw, or an unpaired surrogate escape), a NUL character
// in any string (name or value, raw or escaped), anything after the value.
func Check(data []byte) error {
	if len(bytes.TrimSpace(data)) == 0 {
		return &Error{Reason: ReasonEmpty}
	}
	dec := jsontext.NewDecoder(bytes.NewReader(data))
	for depth := 0; ; {
		tok, err := dec.ReadToken()
		if err != nil {
			return fromDecoder(dec, err)
		}
		switch k := tok.Kind(); k {
		case '{', '[':
			depth++
		case '}', ']':
			depth--
		case '"':
			if strings.IndexByte(tok.String(), 0) >= 0 {
				return &Error{Pointer: string(dec.StackPointer()), Offset: dec.InputOffset(), Reason: ReasonNUL}
			}
		}
		if depth == 0 {
			break
		}
	}
	if _, err := dec.ReadToken(); err != io.EOF {
		if err == nil {
			return &Error{Offset: dec.InputOffset(), Reason: ReasonTrailing}
		}
		return fromDecoder(dec, err)
	}
	return nil
}

func fromDecoder(dec *jsontext.Decoder, err error) error {
	if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
		return &Error{Offset: dec.InputOffset(), Reason: ReasonSyntax}
	}
	var se *jsontext.SyntacticError
	if !errors.As(err, &se) {
		return &Error{Offset: dec.InputOffset(), Reason: ReasonSyntax}
	}
	e := &Error{Pointer: string(se.JSONPointer), Offset: se.ByteOffset, Reason: ReasonSyntax}
	switch {
	case errors.Is(se.Err, jsontext.ErrDuplicateName):
		e.Reason = ReasonDuplicate
	case isInvalidUTF8(se.Err):
		e.Reason = ReasonInvalidUTF8
	}
	return e
}

// isInvalidUTF8: jsontext exports no sentinel for these; its messages
// are stable ("invalid UTF-8 within string", "invalid surrogate pair").
func isInvalidUTF8(err error) bool {
	if err == nil {
		return false
	}
	m := err.Error()
	return strings.Contains(m, "invalid UTF-8") || strings.Contains(m, "surrogate")
}
