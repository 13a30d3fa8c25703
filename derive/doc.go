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
// NormalizeValue applies one rule outside any schema (retrysafe normalize).
// An extraction that cannot be normalized is refused whole, with every
// field that broke its rule named (FieldErrors, FieldErrorsOf) and no
// value: a model told of one broken field at a time would spend a turn on
// each.
//
// Canonical bytes are {"a":action,"p":{field:value,...},"t":tenant,"v":version}
// with keys sorted by code point, no white space, UTF-8 and only the escapes
// JSON requires (\" \\ \b \f \n \r \t and \u00XX for other control
// characters). This is byte-for-byte what the reference derivation produces,
// so another service implementing it computes the same keys.
//
// Rule versions: version 1 reproduces the reference derivation (see
// testdata/derive-v1.jsonl), which is written in Python: python.go gives Go
// the exact str.strip, str.lower (final sigma, İ) and str.isalnum it uses,
// and the differential test (derive/difftest) runs CPython on the same
// inputs. Version 2 types and validates Pix keys (CPF and CNPJ check digits,
// phones through libphonenumber to E.164, EVP as a lower-case UUID) and
// refuses ambiguous amounts such as "1.800". Version 3 (v3.go) reads the
// alphanumeric CNPJ (IN RFB 2.229/2024), takes only Brazilian mobiles as Pix
// phone keys and never types a value with CPF/CNPJ punctuation as a phone,
// refuses a leading 00 on phones, checks e-mail as a practical RFC 5321
// address, refuses JSON numbers for documents and keys, zero amounts,
// control characters and U+FFFD everywhere, invisible format characters in
// refs, keys and addresses, and bounds every field (Field.MaxLen, else
// DefaultMaxLen). A NUL is refused in every version. A version never changes
// the keys of input it accepted, except where it broke its own contract (as
// version 1 did before it followed Python exactly). A frozen intent keeps
// the version it was frozen with: retries read the frozen key and never
// derive again.
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
