package derive

import (
	"strings"

	"github.com/nyaruka/phonenumbers"
	"golang.org/x/text/unicode/norm"
)

// PixKeyType is the type of a Pix key as the DICT knows it.
type PixKeyType string

// Pix key types.
const (
	PixCPF   PixKeyType = "cpf"
	PixCNPJ  PixKeyType = "cnpj"
	PixEmail PixKeyType = "email"
	PixPhone PixKeyType = "phone"
	PixEVP   PixKeyType = "evp"
)

var pixKeyTypeNames = map[string]PixKeyType{
	"cpf": PixCPF, "cnpj": PixCNPJ,
	"email": PixEmail, "e-mail": PixEmail,
	"phone": PixPhone, "telefone": PixPhone, "celular": PixPhone,
	"evp": PixEVP, "random": PixEVP, "aleatoria": PixEVP, "aleatória": PixEVP, "chave aleatoria": PixEVP, "chave aleatória": PixEVP,
}

func parsePixKeyType(s string) (PixKeyType, error) {
	s = strings.ToLower(nfcTrim(s))
	if s == "" {
		return "", errEmpty
	}
	t, ok := pixKeyTypeNames[s]
	if !ok {
		return "", invalid("unknown Pix key type (want cpf, cnpj, email, phone or evp)")
	}
	return t, nil
}

// normalizePixKey returns the normalized key and its type. stated is the
// already-normalized type from the schema's TypeField ("" when absent).
func normalizePixKey(raw any, stated PixKeyType, version int, f *Field) (string, PixKeyType, error) {
	s, err := asDocument(raw, version)
	if err != nil {
		return "", "", err
	}
	if version == 1 {
		// The reference: unicodedata.normalize("NFC", s).strip(), then
		// str.lower() for an e-mail, or the str.isalnum() characters
		// lower-cased for any other key.
		s = pyStrip(norm.NFC.String(s))
		if s == "" {
			return "", "", errEmpty
		}
		k := pixKeyV1(s)
		if k == "" {
			return "", "", invalid("not a Pix key: no letters or digits")
		}
		return k, "", nil
	}
	s = nfcTrim(s)
	if s == "" {
		return "", "", errEmpty
	}
	if version >= 3 {
		return pixKeyV3(s, stated, f)
	}
	t := stated
	if t == "" {
		if t, err = inferPixKeyType(s); err != nil {
			return "", "", err
		}
	}
	var key string
	switch t {
	case PixEmail:
		key, err = normalizeEmail(s, version, f)
	case PixCPF, PixCNPJ:
		key, _, err = normalizeTaxID(s, version)
		if err == nil && (len(key) == 11) != (t == PixCPF) {
			err = invalid("Pix key of type %s has the wrong number of digits", t)
		}
	case PixPhone:
		key, err = normalizePhone(s)
	case PixEVP:
		key, err = normalizeEVP(s)
	default:
		err = invalid("unknown Pix key type")
	}
	if err != nil {
		return "", "", err
	}
	return key, t, nil
}

// pixKeyV1 is the reference derivation: e-mail keys lower-cased, every other
// key reduced to its str.isalnum() characters, then lower-cased (s is
// already NFC and stripped).
func pixKeyV1(s string) string {
	if strings.Contains(s, "@") {
		return pyLower(s)
	}
	if ascii, ok := asciiAlnumLower(s); ok {
		return ascii
	}
	var b strings.Builder
	b.Grow(len(s))
	for _, r := range s {
		if pyIsAlnum(r) {
			b.WriteRune(r)
		}
	}
	return pyLower(b.String())
}

// asciiAlnumLower is pixKeyV1's fast path for the common all-ASCII key:
// ok is false when s has a non-ASCII byte. It copies only when something
// changes (a character dropped or lower-cased).
func asciiAlnumLower(s string) (string, bool) {
	same := true
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case c >= 0x80:
			return "", false
		case isDigit(c) || ('a' <= c && c <= 'z'):
		default:
			same = false
		}
	}
	if same {
		return s, true // already normalized: no copy
	}
	b := make([]byte, 0, len(s))
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case isDigit(c) || ('a' <= c && c <= 'z'):
			b = append(b, c)
		case 'A' <= c && c <= 'Z':
			b = append(b, c+('a'-'A'))
		}
	}
	return string(b), true
}

// inferPixKeyType guesses the type only where the spelling leaves no doubt.
// An 11-digit value that is both a valid CPF and a plausible Brazilian
// mobile number is refused: charging the wrong key is not recoverable.
func inferPixKeyType(s string) (PixKeyType, error) {
	switch {
	case strings.Contains(s, "@"):
		return PixEmail, nil
	case isUUID(s):
		return PixEVP, nil
	case strings.HasPrefix(s, "+") || strings.ContainsAny(s, "()"):
		return PixPhone, nil
	}
	if strings.IndexFunc(s, func(r rune) bool { return !strings.ContainsRune("0123456789./- ", r) }) >= 0 {
		return "", invalid("not a Pix key: expected a CPF, CNPJ, e-mail, phone or random (EVP) key")
	}
	d := onlyDigits(s)
	switch len(d) {
	case 14:
		return PixCNPJ, nil
	case 13:
		if strings.HasPrefix(d, "55") {
			return PixPhone, nil
		}
	case 11:
		cpf, phone := validCPF(d), plausibleBRPhone(d)
		switch {
		case cpf && phone:
			return "", ambiguous("ambiguous Pix key: 11 digits that are both a valid CPF and a plausible phone; state pix_key_type (cpf or phone)")
		case cpf:
			return PixCPF, nil
		case phone:
			return PixPhone, nil
		}
		return "", invalid("not a Pix key: 11 digits that are neither a valid CPF nor a Brazilian phone")
	case 10:
		if plausibleBRPhone(d) {
			return PixPhone, nil
		}
	}
	return "", invalid("not a Pix key: cannot tell its type from %d digits; state pix_key_type", len(d))
}

func plausibleBRPhone(digits string) bool {
	n, err := phonenumbers.Parse(digits, "BR")
	return err == nil && phonenumbers.IsValidNumberForRegion(n, "BR")
}

// normalizePhone formats a phone number as E.164 (+5511999999999). Numbers
// without a country code are read as Brazilian.
func normalizePhone(s string) (string, error) {
	s = trim(s)
	if s == "" {
		return "", errEmpty
	}
	// libphonenumber reads "5511999999999" as a national number; a leading
	// 55 followed by a full Brazilian number is the country code.
	if d := onlyDigits(s); !strings.HasPrefix(s, "+") && len(d) >= 12 && strings.HasPrefix(d, "55") && d == strings.Map(keepPhoneRune, s) {
		s = "+" + d
	}
	n, err := phonenumbers.Parse(s, "BR")
	if err != nil || !phonenumbers.IsValidNumber(n) {
		return "", invalid("not a valid phone number")
	}
	return phonenumbers.Format(n, phonenumbers.E164), nil
}

func keepPhoneRune(r rune) rune {
	if r >= '0' && r <= '9' {
		return r
	}
	return -1
}

func isUUID(s string) bool {
	switch len(s) {
	case 32:
	case 36:
		if s[8] != '-' || s[13] != '-' || s[18] != '-' || s[23] != '-' {
			return false
		}
	default:
		return false
	}
	for i := 0; i < len(s); i++ {
		if len(s) == 36 && (i == 8 || i == 13 || i == 18 || i == 23) {
			continue
		}
		c := s[i] | 0x20
		if !isDigit(s[i]) && (c < 'a' || c > 'f') {
			return false
		}
	}
	return true
}

// normalizeEVP returns the canonical lower-case, hyphenated UUID.
func normalizeEVP(s string) (string, error) {
	if !isUUID(s) {
		return "", invalid("a random (EVP) Pix key is a UUID")
	}
	h := strings.ToLower(strings.ReplaceAll(s, "-", ""))
	return h[0:8] + "-" + h[8:12] + "-" + h[12:16] + "-" + h[16:20] + "-" + h[20:32], nil
}

func validCPF(d string) bool {
	if len(d) != 11 || allSame(d) {
		return false
	}
	return checkDigit(d[:9], 10) == d[9] && checkDigit(d[:10], 11) == d[10]
}

// checkDigit is the CPF modulus-11 digit over digits weighted from w down.
func checkDigit(digits string, w int) byte {
	sum := 0
	for i := 0; i < len(digits); i++ {
		sum += int(digits[i]-'0') * (w - i)
	}
	r := sum * 10 % 11
	if r == 10 {
		r = 0
	}
	return byte('0' + r)
}

func validCNPJ(d string) bool {
	if len(d) != 14 || allSame(d) {
		return false
	}
	w1 := []int{5, 4, 3, 2, 9, 8, 7, 6, 5, 4, 3, 2}
	w2 := []int{6, 5, 4, 3, 2, 9, 8, 7, 6, 5, 4, 3, 2}
	return cnpjDigit(d[:12], w1) == d[12] && cnpjDigit(d[:13], w2) == d[13]
}

func cnpjDigit(digits string, w []int) byte {
	sum := 0
	for i := 0; i < len(digits); i++ {
		sum += int(digits[i]-'0') * w[i]
	}
	r := sum % 11
	if r < 2 {
		return '0'
	}
	return byte('0' + 11 - r)
}

func allSame(d string) bool {
	return strings.Count(d, d[:1]) == len(d)
}
