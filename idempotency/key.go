package idempotency

import (
	"net/http"
	"strings"
)

// HeaderKey and HeaderReplayed are the header names the middleware reads
// and writes.
const (
	HeaderKey      = "Idempotency-Key"
	HeaderReplayed = "Idempotent-Replayed"
)

// ParseKey extracts the Idempotency-Key of r. ok is false when there is
// none (ErrKeyMissing is the caller's to decide); err is a *KeyError when
// the header is present but unusable: repeated, empty, longer than
// MaxKeyLength, or not printable ASCII. The draft's sf-string form
// ("...", with \" and \\ escapes) and Stripe's bare form are both accepted.
func ParseKey(r *http.Request) (key string, ok bool, err error) {
	vals := r.Header.Values(HeaderKey)
	if len(vals) == 0 {
		return "", false, nil
	}
	if len(vals) > 1 {
		return "", true, &KeyError{Reason: "the header is repeated"}
	}
	key = strings.Trim(vals[0], " \t")
	if strings.HasPrefix(key, `"`) {
		key, err = unquoteSFString(key)
		if err != nil {
			return "", true, err
		}
	}
	switch {
	case key == "":
		return "", true, &KeyError{Reason: "the key is empty"}
	case len(key) > MaxKeyLength:
		return "", true, &KeyError{Reason: "the key is longer than 255 characters"}
	}
	for i := 0; i < len(key); i++ {
		if key[i] < 0x20 || key[i] > 0x7e {
			return "", true, &KeyError{Reason: "the key must be printable ASCII"}
		}
	}
	return key, true, nil
}

// unquoteSFString parses an RFC 8941 sf-string.
func unquoteSFString(s string) (string, error) {
	if len(s) < 2 || s[len(s)-1] != '"' {
		return "", &KeyError{Reason: "unterminated quoted key"}
	}
	inner := s[1 : len(s)-1]
	var b strings.Builder
	for i := 0; i < len(inner); i++ {
		c := inner[i]
		switch c {
		case '\\':
			i++
			if i == len(inner) || (inner[i] != '"' && inner[i] != '\\') {
				return "", &KeyError{Reason: `a quoted key may only escape " and \`}
			}
			b.WriteByte(inner[i])
		case '"':
			return "", &KeyError{Reason: "unescaped quote inside a quoted key"}
		default:
			b.WriteByte(c)
		}
	}
	return b.String(), nil
}
