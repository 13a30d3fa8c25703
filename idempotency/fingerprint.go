package idempotency

import (
	"bytes"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"io"
	"slices"
	"strings"
	"unicode/utf8"
)

// maxJSONDepth bounds the canonicalizer's recursion; deeper bodies are
// fingerprinted as raw bytes.
const maxJSONDepth = 512

var errNotCanonical = errors.New("not canonicalizable JSON")

// CanonicalJSON re-encodes a JSON document so that documents that differ
// only in object key order, insignificant white space and string escapes
// have the same bytes: objects with keys sorted by code point, no white
// space, strings escaped only where JSON requires it (no HTML escaping, no
// \u for printable characters). Numbers keep their literal text, so 1 and
// 1.0 stay distinct: a fingerprint may err towards "different request"
// (422) but never towards replaying another request's answer.
//
// ok is false when data is not a single valid JSON value, holds invalid
// UTF-8, repeats a key within an object, or nests deeper than 512 levels:
// such bodies are fingerprinted as raw bytes, since a repeated key would
// otherwise let two different bodies canonicalize alike.
func CanonicalJSON(data []byte) (out []byte, ok bool) {
	if !utf8.Valid(data) {
		return nil, false
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	var buf bytes.Buffer
	buf.Grow(len(data))
	if err := canonValue(dec, &buf, 0); err != nil {
		return nil, false
	}
	if _, err := dec.Token(); err != io.EOF {
		return nil, false // trailing data after the value
	}
	return buf.Bytes(), true
}

func canonValue(dec *json.Decoder, buf *bytes.Buffer, depth int) error {
	if depth > maxJSONDepth {
		return errNotCanonical
	}
	tok, err := dec.Token()
	if err != nil {
		return err
	}
	switch t := tok.(type) {
	case json.Delim:
		switch t {
		case '{':
			return canonObject(dec, buf, depth)
		case '[':
			buf.WriteByte('[')
			for i := 0; dec.More(); i++ {
				if i > 0 {
					buf.WriteByte(',')
				}
				if err := canonValue(dec, buf, depth+1); err != nil {
					return err
				}
			}
			if _, err := dec.Token(); err != nil { // ']'
				return err
			}
			buf.WriteByte(']')
			return nil
		default:
			return errNotCanonical
		}
	case string:
		writeJSONString(buf, t)
	case json.Number:
		buf.WriteString(string(t))
	case bool:
		if t {
			buf.WriteString("true")
		} else {
			buf.WriteString("false")
		}
	case nil:
		buf.WriteString("null")
	default:
		return errNotCanonical
	}
	return nil
}

func canonObject(dec *json.Decoder, buf *bytes.Buffer, depth int) error {
	type member struct {
		key   string
		value []byte
	}
	var members []member
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			return err
		}
		key, ok := tok.(string)
		if !ok {
			return errNotCanonical
		}
		var vb bytes.Buffer
		if err := canonValue(dec, &vb, depth+1); err != nil {
			return err
		}
		members = append(members, member{key, vb.Bytes()})
	}
	if _, err := dec.Token(); err != nil { // '}'
		return err
	}
	// Go compares strings bytewise, and UTF-8 byte order is code point order.
	slices.SortFunc(members, func(a, b member) int { return strings.Compare(a.key, b.key) })
	buf.WriteByte('{')
	for i, m := range members {
		if i > 0 {
			if members[i-1].key == m.key {
				return errNotCanonical
			}
			buf.WriteByte(',')
		}
		writeJSONString(buf, m.key)
		buf.WriteByte(':')
		buf.Write(m.value)
	}
	buf.WriteByte('}')
	return nil
}

// writeJSONString escapes only what RFC 8259 requires: the quote, the
// backslash and control characters.
func writeJSONString(buf *bytes.Buffer, s string) {
	const hex = "0123456789abcdef"
	buf.WriteByte('"')
	start := 0
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c >= 0x20 && c != '"' && c != '\\' {
			continue
		}
		buf.WriteString(s[start:i])
		switch c {
		case '"', '\\':
			buf.WriteByte('\\')
			buf.WriteByte(c)
		case '\n':
			buf.WriteString(`\n`)
		case '\r':
			buf.WriteString(`\r`)
		case '\t':
			buf.WriteString(`\t`)
		case '\b':
			buf.WriteString(`\b`)
		case '\f':
			buf.WriteString(`\f`)
		default:
			buf.WriteString(`\u00`)
			buf.WriteByte(hex[c>>4])
			buf.WriteByte(hex[c&0xf])
		}
		start = i + 1
	}
	buf.WriteString(s[start:])
	buf.WriteByte('"')
}

// Fingerprint is the digest that tells whether a request repeated with a
// key is the same request: SHA-256 over the method, the path, the query with
// its parameters sorted and the body, canonical JSON when the body is JSON
// and the raw bytes otherwise. Each part is length-prefixed so that no two
// different requests can produce the same input.
func Fingerprint(method, path, rawQuery string, body []byte) [32]byte {
	h := sha256.New()
	writePart := func(kind byte, p []byte) {
		var n [9]byte
		n[0] = kind
		l := uint64(len(p))
		for i := 8; i >= 1; i-- {
			n[i] = byte(l)
			l >>= 8
		}
		h.Write(n[:])
		h.Write(p)
	}
	writePart('v', []byte("retrysafe-idempotency-fingerprint-v1"))
	writePart('m', []byte(strings.ToUpper(method)))
	writePart('p', []byte(path))
	writePart('q', []byte(canonicalQuery(rawQuery)))
	if len(body) == 0 {
		writePart('e', nil)
	} else if c, ok := CanonicalJSON(body); ok {
		writePart('j', c)
	} else {
		writePart('r', body)
	}
	var sum [32]byte
	h.Sum(sum[:0])
	return sum
}

// canonicalQuery sorts the query's parameters; an unparseable query is
// kept as sent.
func canonicalQuery(raw string) string {
	if raw == "" {
		return ""
	}
	parts := strings.Split(raw, "&")
	slices.Sort(parts)
	return strings.Join(parts, "&")
}
