// Package derive turns the fields a model extracted for a tool call into the
// normalized payload that gets frozen, the canonical bytes of that payload,
// and the idempotency key: lowercase hex HMAC-SHA256(secret, canonical).
//
// # Design
//
// Every action has an explicit Schema per rule version: an ordered list of
// fields, each with a Rule. Only fields the schema names reach the key; any
// other field is reported in Result.Ignored and dropped, so adding a field to
// a tool never silently changes every key. A schema that names an unknown
// rule is rejected by New, at start-up, not at the first call.
//
// Rules return strings. Money becomes integer cents, parsed digit by digit:
// no float64 arithmetic, no rounding (a general-purpose decimal parser rounds
// past its precision, and a key must never come from a rounded amount), and a
// sub-cent amount is an error. Text is NFC-normalized and trimmed; e-mail is
// lower-cased too; CPF/CNPJ keep digits only; phones become E.164.
//
// Canonical bytes are {"a":action,"p":{field:value,...},"t":tenant,"v":version}
// with keys sorted by code point, no white space, UTF-8 and only the escapes
// JSON requires (\" \\ \b \f \n \r \t and \u00XX for other control
// characters). This is byte-for-byte what the reference derivation produces,
// so another service implementing it computes the same keys.
//
// Rule versions: version 1 reproduces the reference derivation (see
// testdata/derive-v1.jsonl). Version 2 types and validates Pix keys (CPF and
// CNPJ check digits, phones through libphonenumber to E.164, EVP as a
// lower-case UUID) and refuses ambiguous amounts such as "1.800". A frozen
// intent keeps the version it was frozen with: retries read the frozen key and
// never derive again.
//
// The key is an HMAC, not a bare hash: the inputs (an amount, a CPF) have
// little entropy and a bare digest could be enumerated. The secret must be at
// least 32 bytes.
//
// # Imports
//
// derive knows nothing of databases or transports: it imports only the
// standard library, golang.org/x/text and github.com/nyaruka/phonenumbers.
package derive
