package derive

import (
	"encoding/json"
	"math"
	"strconv"
	"strings"
	"unicode"
	"unicode/utf8"

	"golang.org/x/text/unicode/norm"
)

// Rule names how one field is normalized. The zero value is not a rule:
// a schema field without one is a schema error.
type Rule string

// The rules. Their behaviour per version is documented on each.
const (
	// RuleText: NFC, then trim white space. Case is kept. Version 1 trims
	// Python's white space (str.strip). Version 3 refuses control
	// characters and U+FFFD.
	RuleText Rule = "text"
	// RuleRef: references (invoice numbers, intent refs, ids). Version 1
	// trims only; version 2 also applies NFC; version 3 also refuses
	// control and invisible format characters (Cf: zero-width, bidi), so
	// "REF" and "REF\u200b" cannot be two intents. Case-sensitive.
	RuleRef Rule = "ref"
	// RuleTemplate: template names: NFC, trim, lower case. Version 1 is
	// Python's str.lower (full case mapping, final sigma); version 2 Go's
	// simple case mapping; version 3 the full mapping again, NFC after it,
	// and no control or format characters.
	RuleTemplate Rule = "template"
	// RuleEmail: NFC, trim, lower case; version 2 also checks a loose
	// shape; version 3 a practical RFC 5321 address (see checkEmailV3).
	RuleEmail Rule = "email"
	// RuleMoney: integer cents. See normalizeMoney. Version 3 refuses zero
	// unless the field allows it.
	RuleMoney Rule = "money"
	// RuleTaxID: CPF or CNPJ. Versions 1 and 2: digits only (2 checks
	// length and check digits). Version 3: CPF, numeric CNPJ and
	// alphanumeric CNPJ (IN RFB 2.229/2024), check digits verified,
	// punctuation stripped, letters upper-cased, JSON numbers refused.
	RuleTaxID Rule = "taxid"
	// RulePhone: E.164 through libphonenumber (default region BR).
	// Version 3 refuses a leading 00 (international or carrier prefix:
	// ambiguous for a Brazilian sender) instead of guessing a country.
	RulePhone Rule = "phone"
	// RulePixKey: a Pix key of any type. Version 1 lower-cases e-mail keys
	// and keeps only letters and digits of the others (the reference
	// behaviour). Version 2 types the key (stated by Field.TypeField, or
	// inferred), validates it, and writes the type into the payload.
	// Version 3 adds the alphanumeric CNPJ, accepts only Brazilian mobile
	// numbers as phone keys, never reads a value with CPF/CNPJ punctuation
	// as a phone, and refuses JSON numbers.
	RulePixKey Rule = "pix_key"
	// RulePixKeyType: cpf, cnpj, email, phone or evp. Only meaningful as
	// the TypeField of a RulePixKey field.
	RulePixKeyType Rule = "pix_key_type"
)

var knownRules = map[Rule]bool{
	RuleText: true, RuleRef: true, RuleTemplate: true, RuleEmail: true, RuleMoney: true,
	RuleTaxID: true, RulePhone: true, RulePixKey: true, RulePixKeyType: true,
}

// Versions this package implements.
const (
	MinVersion = 1
	MaxVersion = 3
)

// DefaultMaxLen bounds, in characters, a version-3 field whose schema sets
// no MaxLen: nothing unbounded is ever frozen.
const DefaultMaxLen = 1024

// maxPixKeyLen is the DICT's limit for a key of any type (API Pix:
// chave maxLength 77).
const maxPixKeyLen = 77

// Rules lists every rule, for help texts.
func Rules() []Rule {
	return []Rule{RuleText, RuleRef, RuleTemplate, RuleEmail, RuleMoney, RuleTaxID, RulePhone, RulePixKey, RulePixKeyType}
}

// asText accepts strings and, for identifiers a model may emit as numbers,
// JSON numbers and integers in their literal spelling. A NUL is refused in
// every version: PostgreSQL cannot store one, so no version ever froze it.
func asText(raw any) (string, error) {
	switch v := raw.(type) {
	case nil:
		return "", errEmpty
	case string:
		if !utf8.ValidString(v) {
			return "", invalid("not valid UTF-8")
		}
		if strings.IndexByte(v, 0) >= 0 {
			return "", invalid("contains a NUL character")
		}
		return v, nil
	case json.Number:
		return string(v), nil
	case int:
		return strconv.Itoa(v), nil
	case int64:
		return strconv.FormatInt(v, 10), nil
	case float64:
		if math.IsNaN(v) || math.IsInf(v, 0) {
			return "", invalid("must be text")
		}
		return strconv.FormatFloat(v, 'f', -1, 64), nil
	default:
		return "", invalid("must be text")
	}
}

// asDocument is asText for CPF/CNPJ and Pix keys: from version 3 only a
// JSON string is accepted, since a number has already lost a CPF's or
// CNPJ's leading zeros (and a CPF read as a number looks like a phone).
func asDocument(raw any, version int) (string, error) {
	if version >= 3 {
		switch raw.(type) {
		case string, nil:
		default:
			return "", invalid("must be a JSON string, not a number: a number loses leading zeros")
		}
	}
	return asText(raw)
}

// checkClean is version 3's input hygiene on a normalized value: no control
// characters (C0, DEL, C1), no U+FFFD (left where a decoder met invalid
// UTF-8 or an unpaired surrogate), and, when noFormat, no invisible format
// characters (category Cf: zero-width, bidirectional controls), which make
// two different values look identical.
func checkClean(s string, noFormat bool) error {
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c < 0x20 || c == 0x7f {
			return invalid("contains a control character")
		}
		if c < utf8.RuneSelf {
			continue
		}
		r, n := utf8.DecodeRuneInString(s[i:])
		switch {
		case r < 0xa0:
			return invalid("contains a control character")
		case r == utf8.RuneError:
			return invalid("contains U+FFFD: the input had invalid UTF-8 or an unpaired surrogate")
		case noFormat && unicode.Is(unicode.Cf, r):
			return invalid("contains an invisible format character (zero-width or bidirectional control)")
		}
		i += n - 1
	}
	return nil
}

func trim(s string) string { return strings.TrimFunc(s, unicode.IsSpace) }

// trimFor is the white-space trim of a version: Python's in version 1.
func trimFor(s string, version int) string {
	if version == 1 {
		return pyStrip(s)
	}
	return trim(s)
}

// nfcTrim normalizes then trims, and normalizes again only when trimming
// exposed a combining mark at the start (so the result is a fixed point).
func nfcTrim(s string) string {
	n := norm.NFC.String(s)
	t := trim(n)
	for len(t) != len(n) && norm.NFC.QuickSpanString(t) != len(t) {
		n = norm.NFC.String(t)
		t = trim(n)
	}
	return t
}

func nonEmpty(s string) (string, error) {
	if s == "" {
		return "", errEmpty
	}
	return s, nil
}

// cleanNonEmpty is nonEmpty plus, in version 3, checkClean.
func cleanNonEmpty(s string, version int, noFormat bool) (string, error) {
	if s == "" {
		return "", errEmpty
	}
	if version >= 3 {
		if err := checkClean(s, noFormat); err != nil {
			return "", err
		}
	}
	return s, nil
}

func normalizeText(raw any, version int) (string, error) {
	s, err := asText(raw)
	if err != nil {
		return "", err
	}
	if version == 1 {
		// The reference: unicodedata.normalize("NFC", s).strip().
		return nonEmpty(pyStrip(norm.NFC.String(s)))
	}
	return cleanNonEmpty(nfcTrim(s), version, false)
}

func normalizeRef(raw any, version int) (string, error) {
	s, err := asText(raw)
	if err != nil {
		return "", err
	}
	if version == 1 {
		return nonEmpty(pyStrip(s))
	}
	return cleanNonEmpty(nfcTrim(s), version, true)
}

// normalizeLower is the template rule (and the start of the e-mail rule).
func normalizeLower(raw any, version int) (string, error) {
	s, err := asText(raw)
	if err != nil {
		return "", err
	}
	switch version {
	case 1:
		// The reference: NFC, str.strip(), str.lower(), once.
		return nonEmpty(pyLower(pyStrip(norm.NFC.String(s))))
	case 2:
		// Lower-casing can produce non-NFC sequences and NFC can produce
		// upper-case compositions: iterate to a fixed point.
		for range 4 {
			next := nfcTrim(strings.ToLower(nfcTrim(s)))
			if next == s {
				break
			}
			s = next
		}
		return nonEmpty(s)
	}
	for range 4 {
		next := nfcTrim(pyLower(nfcTrim(s)))
		if next == s {
			break
		}
		s = next
	}
	return cleanNonEmpty(s, version, true)
}

func normalizeEmail(raw any, version int, f *Field) (string, error) {
	s, err := normalizeLower(raw, version)
	if err != nil || version < 2 {
		return s, err
	}
	if version == 2 {
		return s, checkEmail(s)
	}
	return s, checkEmailV3(s, f != nil && f.AllowAddressLiteral)
}

func checkEmail(s string) error {
	local, domain, ok := strings.Cut(s, "@")
	if !ok || local == "" || domain == "" || strings.Contains(domain, "@") ||
		strings.IndexFunc(s, unicode.IsSpace) >= 0 || !strings.Contains(domain, ".") ||
		strings.HasPrefix(domain, ".") || strings.HasSuffix(domain, ".") {
		return invalid("not an e-mail address")
	}
	return nil
}

// onlyDigits keeps the ASCII digits of s.
func onlyDigits(s string) string {
	n := 0
	for i := 0; i < len(s); i++ {
		if isDigit(s[i]) {
			n++
		}
	}
	if n == len(s) {
		return s
	}
	b := make([]byte, 0, n)
	for i := 0; i < len(s); i++ {
		if isDigit(s[i]) {
			b = append(b, s[i])
		}
	}
	return string(b)
}

// normalizeTaxID returns the CPF or CNPJ and, from version 3, its type.
func normalizeTaxID(raw any, version int) (string, PixKeyType, error) {
	s, err := asDocument(raw, version)
	if err != nil {
		return "", "", err
	}
	if version >= 3 {
		return taxIDV3(s)
	}
	s = trimFor(s, version)
	if version >= 2 {
		if strings.IndexFunc(s, func(r rune) bool { return !strings.ContainsRune("0123456789./- ", r) }) >= 0 {
			return "", "", invalid("CPF/CNPJ may hold only digits and . / - punctuation")
		}
	}
	d := onlyDigits(s)
	if d == "" {
		return "", "", errEmpty
	}
	if version >= 2 {
		switch len(d) {
		case 11:
			if !validCPF(d) {
				return "", "", invalid("CPF check digits do not match")
			}
		case 14:
			if !validCNPJ(d) {
				return "", "", invalid("CNPJ check digits do not match")
			}
		default:
			return "", "", invalid("CPF has 11 digits and CNPJ 14, got %d", len(d))
		}
	}
	return d, "", nil
}

// normalize applies rule r (at version) to one raw value and returns the
// value and, for taxid and pix_key from version 2 on, its type. RulePixKey
// with a TypeField is handled by the schema walker, which reads the
// sibling field.
func (r Rule) normalize(raw any, version int, f *Field) (string, PixKeyType, error) {
	switch r {
	case RuleText:
		s, err := normalizeText(raw, version)
		return s, "", err
	case RuleRef:
		s, err := normalizeRef(raw, version)
		return s, "", err
	case RuleTemplate:
		s, err := normalizeLower(raw, version)
		return s, "", err
	case RuleEmail:
		s, err := normalizeEmail(raw, version, f)
		return s, "", err
	case RuleMoney:
		s, err := normalizeMoney(raw, version, f.AllowNegative, f.AllowZero)
		return s, "", err
	case RuleTaxID:
		return normalizeTaxID(raw, version)
	case RulePhone:
		s, err := asText(raw)
		if err != nil {
			return "", "", err
		}
		if version >= 3 {
			s, err = normalizePhoneV3(s)
		} else {
			s, err = normalizePhone(s)
		}
		return s, "", err
	case RulePixKeyType:
		s, err := asText(raw)
		if err != nil {
			return "", "", err
		}
		t, err := parsePixKeyType(s)
		return string(t), "", err
	case RulePixKey:
		return normalizePixKey(raw, "", version, f)
	}
	return "", "", invalid("unknown rule %q", r)
}
