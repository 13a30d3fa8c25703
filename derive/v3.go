package derive

import (
	"net/netip"
	"strconv"
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/nyaruka/phonenumbers"
)

// Version 3's document, phone, e-mail and Pix key rules.

// taxIDV3 reads a CPF (11 digits) or a CNPJ (14 characters: 12 of [0-9A-Z]
// and two check digits, IN RFB 2.229/2024), with or without its
// punctuation, in either case. The canonical form is upper case without
// punctuation.
func taxIDV3(s string) (string, PixKeyType, error) {
	s = trim(s)
	var buf [14]byte
	n := 0
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case isDigit(c), 'A' <= c && c <= 'Z':
		case 'a' <= c && c <= 'z':
			c -= 'a' - 'A'
		case c == '.' || c == '/' || c == '-' || c == ' ':
			continue
		default:
			return "", "", invalid("a CPF or CNPJ holds only digits, letters (alphanumeric CNPJ) and . / - punctuation")
		}
		if n == len(buf) {
			return "", "", invalid("too long: a CPF has 11 digits and a CNPJ 14 characters")
		}
		buf[n] = c
		n++
	}
	d := buf[:n]
	switch n {
	case 0:
		return "", "", errEmpty
	case 11:
		for _, c := range d {
			if !isDigit(c) {
				return "", "", invalid("a CPF has only digits (11)")
			}
		}
		cpf := string(d)
		if !validCPF(cpf) {
			return "", "", invalid("CPF check digits do not match")
		}
		return cpf, PixCPF, nil
	case 14:
		if !validCNPJAlnum(d) {
			return "", "", invalid("CNPJ check digits do not match")
		}
		return string(d), PixCNPJ, nil
	}
	return "", "", invalid("a CPF has 11 digits and a CNPJ 14 characters, got %d", n)
}

// validCNPJAlnum checks a 14-character upper-case CNPJ: each of the first 12
// characters is worth its ASCII code minus 48 (digits 0..9, A=17 .. Z=42),
// the last two are digits computed modulo 11 (remainder 0 or 1 gives 0).
// An all-digit CNPJ of one repeated digit is refused, as in version 2.
func validCNPJAlnum(d []byte) bool {
	if !isDigit(d[12]) || !isDigit(d[13]) {
		return false
	}
	same := true
	for _, c := range d {
		same = same && c == d[0]
	}
	if same {
		return false
	}
	w := [13]int{6, 5, 4, 3, 2, 9, 8, 7, 6, 5, 4, 3, 2}
	check := func(m int) byte {
		sum := 0
		for i := range m {
			sum += int(d[i]-'0') * w[13-m+i]
		}
		if r := sum % 11; r >= 2 {
			return byte('0' + 11 - r)
		}
		return '0'
	}
	return check(12) == d[12] && check(13) == d[13]
}

// phoneChars are the characters a phone number may be written with besides
// digits.
const phoneChars = " +()-."

// ambiguousDialing explains why a leading 00 is refused: in Brazil 00 opens
// an international call through a carrier (00 + carrier + country), so
// "0055 35 98262-7235" may be +55 35 ... dialled without a carrier or a
// call to +359 (Bulgaria) through carrier 55; libphonenumber picks the
// second.
const ambiguousDialing = "ambiguous phone number: a leading 00 may be an international prefix or a Brazilian carrier selection; write it as +<country code> <number>"

// normalizePhoneV3 formats a phone number as E.164. Numbers without a
// country code are read as Brazilian; a value that reads two ways is
// refused.
func normalizePhoneV3(s string) (string, error) {
	n, err := parsePhoneV3(s)
	if err != nil {
		return "", err
	}
	return phonenumbers.Format(n, phonenumbers.E164), nil
}

func parsePhoneV3(s string) (*phonenumbers.PhoneNumber, error) {
	s = trim(s)
	if s == "" {
		return nil, errEmpty
	}
	for i := 0; i < len(s); i++ {
		if c := s[i]; !isDigit(c) && strings.IndexByte(phoneChars, c) < 0 {
			return nil, invalid("not a phone number: only digits, spaces and + ( ) - . are accepted")
		}
	}
	if strings.LastIndexByte(s, '+') > 0 {
		return nil, invalid("not a phone number: + may only start it")
	}
	d := onlyDigits(s)
	plus := s[0] == '+'
	if !plus && strings.HasPrefix(d, "00") {
		return nil, ambiguous(ambiguousDialing)
	}
	// libphonenumber reads "5511999999999" as a national number; a leading
	// 55 followed by a full Brazilian number is the country code (no
	// Brazilian national number has 12 or 13 digits).
	if !plus && len(d) >= 12 && strings.HasPrefix(d, "55") {
		s = "+" + d
	}
	n, err := phonenumbers.Parse(s, "BR")
	if err != nil || !phonenumbers.IsValidNumber(n) {
		return nil, invalid("not a valid phone number")
	}
	// A national 0 may be followed by a carrier code (0 21 11 9xxxx-xxxx):
	// when the digits after the 0 are also a valid Brazilian number by
	// themselves, the two readings differ and nobody can tell which is meant.
	if !plus && len(d) > 1 && d[0] == '0' && n.GetCountryCode() == 55 {
		if alt, err := phonenumbers.Parse(d[1:], "BR"); err == nil && phonenumbers.IsValidNumberForRegion(alt, "BR") &&
			alt.GetNationalNumber() != n.GetNationalNumber() {
			return nil, ambiguous("ambiguous phone number: the digits after the leading 0 read both as a carrier code and a number and as a number alone; write it as +55 <area code> <number>")
		}
	}
	return n, nil
}

// pixPhoneV3 is a DICT phone key: a Brazilian mobile number in E.164.
func pixPhoneV3(s string) (string, error) {
	if strings.ContainsAny(s, "./") {
		return "", invalid("a Pix phone key cannot carry CPF/CNPJ punctuation (. or /)")
	}
	n, err := parsePhoneV3(s)
	if err != nil {
		return "", err
	}
	if n.GetCountryCode() != 55 || !phonenumbers.IsValidNumberForRegion(n, "BR") {
		return "", invalid("a Pix phone key is a Brazilian mobile number (+55)")
	}
	if phonenumbers.GetNumberType(n) != phonenumbers.MOBILE {
		return "", invalid("a Pix phone key is a mobile number: this is a landline or a service number")
	}
	return phonenumbers.Format(n, phonenumbers.E164), nil
}

// plausibleBRMobile: digits are exactly an area code and a mobile number,
// with no dialing prefix for libphonenumber to strip.
func plausibleBRMobile(digits string) bool {
	n, err := phonenumbers.Parse("+55"+digits, "BR")
	return err == nil && phonenumbers.IsValidNumberForRegion(n, "BR") && phonenumbers.GetNumberType(n) == phonenumbers.MOBILE &&
		strconv.FormatUint(n.GetNationalNumber(), 10) == digits
}

// pixKeyV3 types (unless stated) and normalizes a Pix key; s is NFC and
// trimmed.
func pixKeyV3(s string, stated PixKeyType, f *Field) (string, PixKeyType, error) {
	if err := checkClean(s, true); err != nil {
		return "", "", err
	}
	t := stated
	if t == "" {
		var err error
		if t, err = inferPixKeyTypeV3(s); err != nil {
			return "", "", err
		}
	}
	var (
		key string
		err error
	)
	switch t {
	case PixEmail:
		key, err = normalizeEmail(s, 3, f)
	case PixCPF, PixCNPJ:
		var got PixKeyType
		key, got, err = taxIDV3(s)
		if err == nil && got != t {
			err = invalid("Pix key stated as %s is a %s", t, got)
		}
	case PixPhone:
		key, err = pixPhoneV3(s)
	case PixEVP:
		key, err = normalizeEVP(s)
	default:
		err = invalid("unknown Pix key type")
	}
	if err != nil {
		return "", "", err
	}
	if utf8.RuneCountInString(key) > maxPixKeyLen {
		return "", "", invalid("a Pix key has at most %d characters", maxPixKeyLen)
	}
	return key, t, nil
}

// inferPixKeyTypeV3 tells the type from the spelling only where it leaves no
// doubt. A value carrying CPF/CNPJ punctuation (. or /) is a CPF/CNPJ or an
// error, never a phone: a mistyped CPF must not charge a stranger's phone.
func inferPixKeyTypeV3(s string) (PixKeyType, error) {
	if strings.Contains(s, "@") {
		return PixEmail, nil
	}
	if isUUID(s) {
		return PixEVP, nil
	}
	var letters, docPunct, phonePunct bool
	n := 0
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case isDigit(c):
			n++
		case ('A' <= c && c <= 'Z') || ('a' <= c && c <= 'z'):
			letters = true
			n++
		case c == '.' || c == '/':
			docPunct = true
		case c == '+' || c == '(' || c == ')':
			phonePunct = true
		case c == '-' || c == ' ':
		default:
			return "", invalid("not a Pix key: expected a CPF, CNPJ, e-mail, phone or random (EVP) key")
		}
	}
	switch {
	case phonePunct && (docPunct || letters):
		return "", invalid("not a Pix key: mixes phone and CPF/CNPJ punctuation")
	case phonePunct:
		return PixPhone, nil
	case letters:
		if n == 14 {
			return PixCNPJ, nil
		}
		return "", invalid("not a Pix key: a key with letters is an e-mail, a random (EVP) key or an alphanumeric CNPJ (14 characters)")
	case docPunct:
		switch n {
		case 11:
			return PixCPF, nil
		case 14:
			return PixCNPJ, nil
		}
		return "", invalid("not a Pix key: CPF/CNPJ punctuation, but %d digits (a CPF has 11, a CNPJ 14)", n)
	}
	d := onlyDigits(s)
	if len(d) != 14 && len(d) != 11 && strings.HasPrefix(d, "00") {
		return "", ambiguous(ambiguousDialing)
	}
	switch len(d) {
	case 14:
		if strings.ContainsAny(s, " -") {
			return "", ambiguous("ambiguous Pix key: 14 digits written with spaces or dashes may be a phone number with a dialing prefix or a CNPJ; write a CNPJ bare or with its mask (12.345.678/0001-95), a phone as +55")
		}
		return PixCNPJ, nil
	case 13:
		if strings.HasPrefix(d, "55") && plausibleBRMobile(d[2:]) {
			return PixPhone, nil
		}
	case 11:
		cpf, phone := validCPF(d), plausibleBRMobile(d)
		switch {
		case cpf && phone:
			return "", ambiguous("ambiguous Pix key: 11 digits that are both a valid CPF and a plausible mobile number; state pix_key_type (cpf or phone)")
		case cpf:
			return PixCPF, nil
		case phone:
			return PixPhone, nil
		}
		return "", invalid("not a Pix key: 11 digits that are neither a valid CPF nor a Brazilian mobile number")
	case 10:
		return "", invalid("not a Pix key: 10 digits read as a landline, and a Pix phone key is a mobile number")
	}
	return "", invalid("not a Pix key: cannot tell its type from %d digits; state pix_key_type", len(d))
}

// checkEmailV3 accepts a practical RFC 5321 address (s is NFC and lower
// case): a dot-atom local part of 1 to 64 bytes (letters of any script
// allowed, RFC 6531), a host name of at least two labels whose last is
// alphabetic (or an IDNA xn-- label), at most 254 bytes in all. Refused,
// each with its own reason: display names and <...>, mailto:, comments,
// quoted local parts, empty labels and leading, trailing or double dots,
// and address literals ([192.0.2.1]) unless allowLiteral.
func checkEmailV3(s string, allowLiteral bool) error {
	switch {
	case strings.HasPrefix(s, "mailto:"):
		return invalid("not an e-mail address: write the bare address, without mailto:")
	case strings.ContainsAny(s, "<>"):
		return invalid("not an e-mail address: write the bare address, without a display name or <...>")
	case strings.ContainsAny(s, "()"):
		return invalid("not an e-mail address: comments are not accepted")
	case strings.ContainsRune(s, '"'):
		return invalid("not an e-mail address: quoted local parts are not accepted")
	case len(s) > 254:
		return invalid("not an e-mail address: longer than 254 bytes")
	}
	at := strings.IndexByte(s, '@')
	if at < 0 {
		return invalid("not an e-mail address: no @")
	}
	local, domain := s[:at], s[at+1:]
	if strings.IndexByte(domain, '@') >= 0 {
		return invalid("not an e-mail address: more than one @")
	}
	if local == "" || len(local) > 64 {
		return invalid("not an e-mail address: the part before @ must have 1 to 64 bytes")
	}
	for _, atom := range strings.Split(local, ".") {
		if atom == "" {
			return invalid("not an e-mail address: empty part before @ (leading, trailing or double dot)")
		}
		for _, r := range atom {
			if !atext(r) {
				return invalid("not an e-mail address: a character before @ is not allowed")
			}
		}
	}
	if strings.HasPrefix(domain, "[") {
		if !allowLiteral {
			return invalid("not an e-mail address: IP address literals are not accepted")
		}
		return checkAddressLiteral(domain)
	}
	return checkHostname(domain)
}

// atext is RFC 5322's atext plus, for RFC 6531, letters, marks and digits of
// any script.
func atext(r rune) bool {
	if r < utf8.RuneSelf {
		c := byte(r)
		return isDigit(c) || ('a' <= c && c <= 'z') || ('A' <= c && c <= 'Z') || strings.IndexByte("!#$%&'*+-/=?^_`{|}~", c) >= 0
	}
	return unicode.In(r, unicode.L, unicode.M, unicode.N)
}

func checkHostname(domain string) error {
	if domain == "" || len(domain) > 253 {
		return invalid("not an e-mail address: the domain must have 1 to 253 bytes")
	}
	labels := strings.Split(domain, ".")
	if len(labels) < 2 {
		return invalid("not an e-mail address: the domain needs at least two labels")
	}
	for _, l := range labels {
		if l == "" || len(l) > 63 {
			return invalid("not an e-mail address: empty or over-long domain label (leading, trailing or double dot)")
		}
		if l[0] == '-' || l[len(l)-1] == '-' {
			return invalid("not an e-mail address: a domain label starts or ends with -")
		}
		for _, r := range l {
			ok := r == '-' || (r < utf8.RuneSelf && (isDigit(byte(r)) || ('a' <= r && r <= 'z'))) ||
				(r >= utf8.RuneSelf && unicode.In(r, unicode.L, unicode.M, unicode.N))
			if !ok {
				return invalid("not an e-mail address: a character of the domain is not allowed")
			}
		}
	}
	tld := labels[len(labels)-1]
	if strings.HasPrefix(tld, "xn--") && len(tld) > 4 {
		return nil
	}
	if utf8.RuneCountInString(tld) < 2 || strings.IndexFunc(tld, func(r rune) bool { return !unicode.IsLetter(r) }) >= 0 {
		return invalid("not an e-mail address: the top-level domain must be alphabetic (at least two letters)")
	}
	return nil
}

func checkAddressLiteral(domain string) error {
	if !strings.HasSuffix(domain, "]") {
		return invalid("not an e-mail address: unterminated address literal")
	}
	lit := domain[1 : len(domain)-1]
	v6 := strings.HasPrefix(lit, "ipv6:")
	if v6 {
		lit = lit[len("ipv6:"):]
	}
	a, err := netip.ParseAddr(lit)
	if err != nil || a.Is6() != v6 || a.Zone() != "" {
		return invalid("not an e-mail address: bad address literal")
	}
	return nil
}
