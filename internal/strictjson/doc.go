// Package strictjson checks a JSON document before anything decodes it,
// for the edges that take JSON from outside (the sidecar's requests, the
// MCP server's tool calls): encoding/json accepts what a ledger must not.
//
// encoding/json keeps the last of two members with one name
// ({"amount":"1,00","amount":"9999,00"} is 9999,00), replaces invalid
// UTF-8 and unpaired surrogate escapes with U+FFFD, and passes "\u0000"
// through to PostgreSQL, which refuses it in text and jsonb. Check refuses
// all of these, naming where (a JSON Pointer, never the value), so that a
// caller answers 400 before anything is frozen or sent.
//
// The syntax, duplicate-name and UTF-8 checks are github.com/go-json-
// experiment/json's jsontext (the proposed encoding/json/v2), whose
// defaults are exactly these; strictjson adds the NUL check and the error
// type. After Check, decode with encoding/json as before: the document is
// one that both read alike.
//
// # Imports
//
// strictjson imports jsontext only.
package strictjson
