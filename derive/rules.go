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
	// RuleText: NFC, then trim white space. Case is kept.
	RuleText Rule = "text"
	// RuleRef: references (invoice numbers, intent refs). Version 1 trims
	// only; version 2 also applies NFC. Case-sensitive.
	RuleRef Rule = "ref"
	// RuleTemplate: template names: NFC, trim, lower case.
	RuleTemplate Rule = "template"
	// RuleEmail: NFC, trim, lower case; version 2 also checks the shape.
	RuleEmail Rule = "email"
	// RuleMoney: integer cents. See normalizeMoney.
	RuleMoney Rule = "money"
	// RuleTaxID: CPF or CNPJ, digits only; version 2 checks length and
	// check digits.
	RuleTaxID Rule = "taxid"
	// RulePhone: E.164 through libphonenumber (default region BR).
	RulePhone Rule = "phone"
	// RulePixKey: a Pix key of any type. Version 1 lower-cases e-mail keys
	// and keeps only letters and digits of the others (the reference
	// behaviour). Version 2 types the key (stated by Field.TypeField, or
	// inferred), validates it, and writes the type into the payload.
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
	MaxVersion = 2
)

// asText accepts strings and, for identifiers a model may emit as numbers,
// JSON numbers and integers in their literal spelling.
func asText(raw any) (string, error) {
	switch v := raw.(type) {
	case nil:
		return "", errEmpty
	case string:
		if !utf8.ValidString(v) {
			return "", invalid("not valid UTF-8")
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

func trim(s string) string { return strings.TrimFunc(s, unicode.IsSpace) }

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

func normalizeText(raw any) (string, error) {
	s, err := asText(raw)
	if err != nil {
		return "", err
	}
	return nonEmpty(nfcTrim(s))
}

func normalizeRef(raw any, version int) (string, error) {
	s, err := asText(raw)
	if err != nil {
		return "", err
	}
	if version >= 2 {
		return nonEmpty(nfcTrim(s))
	}
	return nonEmpty(trim(s))
}

func normalizeLower(raw any) (string, error) {
	s, err := asText(raw)
	if err != nil {
		return "", err
	}
	// Lower-casing can produce non-NFC sequences (İ -> i + U+0307) and
	// NFC can produce upper-case compositions: iterate to a fixed point.
	for range 4 {
		next := nfcTrim(strings.ToLower(nfcTrim(s)))
		if next == s {
			break
		}
		s = next
	}
	return nonEmpty(s)
}

func normalizeEmail(raw any, version int) (string, error) {
	s, err := normalizeLower(raw)
	if err != nil || version < 2 {
		return s, err
	}
	return s, checkEmail(s)
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

func normalizeTaxID(raw any, version int) (string, error) {
	s, err := asText(raw)
	if err != nil {
		return "", err
	}
	s = trim(s)
	if version >= 2 {
		if strings.IndexFunc(s, func(r rune) bool { return !strings.ContainsRune("0123456789./- ", r) }) >= 0 {
			return "", invalid("CPF/CNPJ may hold only digits and . / - punctuation")
		}
	}
	d := onlyDigits(s)
	if d == "" {
		return "", errEmpty
	}
	if version >= 2 {
		switch len(d) {
		case 11:
			if !validCPF(d) {
				return "", invalid("CPF check digits do not match")
			}
		case 14:
			if !validCNPJ(d) {
				return "", invalid("CNPJ check digits do not match")
			}
		default:
			return "", invalid("CPF has 11 digits and CNPJ 14, got %d", len(d))
		}
	}
	return d, nil
}

// normalize applies rule r (at version) to one raw value. RulePixKey is
// handled by the schema walker because it may read a sibling field.
func (r Rule) normalize(raw any, version int, f *Field) (string, error) {
	switch r {
	case RuleText:
		return normalizeText(raw)
	case RuleRef:
		return normalizeRef(raw, version)
	case RuleTemplate:
		return normalizeLower(raw)
	case RuleEmail:
		return normalizeEmail(raw, version)
	case RuleMoney:
		return normalizeMoney(raw, version, f.AllowNegative)
	case RuleTaxID:
		return normalizeTaxID(raw, version)
	case RulePhone:
		s, err := asText(raw)
		if err != nil {
			return "", err
		}
		return normalizePhone(s)
	case RulePixKeyType:
		s, err := asText(raw)
		if err != nil {
			return "", err
		}
		t, err := parsePixKeyType(s)
		return string(t), err
	case RulePixKey:
		k, _, err := normalizePixKey(raw, "", version)
		return k, err
	}
	return "", invalid("unknown rule %q", r)
}
