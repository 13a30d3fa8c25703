package derive

import (
	"encoding/json"
	"math"
	"strconv"
	"strings"
	"unicode"
)

// maxCentsDigits keeps every amount inside int64 cents with room to spare
// (10^17 cents is a quadrillion reais).
const maxCentsDigits = 17

// normalizeMoney returns the amount as integer cents in decimal, without
// leading zeros ("18000", "0", "-150" when negatives are allowed). From
// version 3 a zero amount ("0,00", "-0") is refused unless allowZero: a
// charge of nothing is a mistake, and a provider refuses it definitively.
func normalizeMoney(raw any, version int, allowNegative, allowZero bool) (string, error) {
	s, err := normalizeMoneyAny(raw, version, allowNegative)
	if err == nil && s == "0" && version >= 3 && !allowZero {
		return "", invalid("zero amount")
	}
	return s, err
}

func normalizeMoneyAny(raw any, version int, allowNegative bool) (string, error) {
	var (
		neg  bool
		ip   string // integer digits
		fp   string // fraction digits
		exp  int
		err  error
		text string
	)
	switch v := raw.(type) {
	case nil:
		return "", errEmpty
	case string:
		if strings.IndexByte(v, 0) >= 0 {
			return "", invalid("contains a NUL character")
		}
		neg, ip, fp, exp, err = parseMoneyString(v, version)
	case json.Number:
		neg, ip, fp, exp, err = parseNumber(string(v))
	case float64:
		if math.IsNaN(v) || math.IsInf(v, 0) {
			return "", invalid("amount must be a finite number")
		}
		// The shortest representation that reads back as the same float:
		// 180.0 -> "1.8e+02", 0.1+0.2 -> "3.0000000000000004e-01", which
		// is then refused as sub-cent instead of being rounded.
		text = strconv.FormatFloat(v, 'e', -1, 64)
		neg, ip, fp, exp, err = parseNumber(text)
	case float32:
		return normalizeMoneyAny(float64(v), version, allowNegative)
	case int:
		return centsFromInt(int64(v), allowNegative)
	case int64:
		return centsFromInt(v, allowNegative)
	case int32:
		return centsFromInt(int64(v), allowNegative)
	default:
		return "", invalid("amount must be a string or a number")
	}
	if err != nil {
		return "", err
	}
	cents, err := centsFromParts(ip, fp, exp)
	if err != nil {
		return "", err
	}
	if cents == 0 {
		return "0", nil
	}
	if neg {
		if !allowNegative {
			return "", invalid("negative amount")
		}
		cents = -cents
	}
	return strconv.FormatInt(cents, 10), nil
}

func centsFromInt(v int64, allowNegative bool) (string, error) {
	if v < 0 && !allowNegative {
		return "", invalid("negative amount")
	}
	if v > math.MaxInt64/100 || v < math.MinInt64/100 {
		return "", invalid("amount too large")
	}
	return strconv.FormatInt(v*100, 10), nil
}

// centsFromParts computes ip.fp × 10^exp in cents exactly, refusing any
// nonzero digit below the cent.
func centsFromParts(ip, fp string, exp int) (int64, error) {
	digits := ip + fp
	point := len(ip) + exp // digits[:point] is the integer part
	// Drop leading zeros; they move nothing.
	i := 0
	for i < len(digits) && digits[i] == '0' {
		i++
	}
	digits, point = digits[i:], point-i
	// Drop trailing zeros; they carry no value.
	j := len(digits)
	for j > 0 && digits[j-1] == '0' {
		j--
	}
	digits = digits[:j]
	if digits == "" {
		return 0, nil
	}
	centsEnd := point + 2 // digits[:centsEnd] are whole cents
	if len(digits) > centsEnd {
		return 0, invalid("sub-cent amount: amounts are never rounded")
	}
	if centsEnd > maxCentsDigits {
		return 0, invalid("amount too large")
	}
	var cents int64
	for k := range centsEnd {
		cents *= 10
		if k < len(digits) {
			cents += int64(digits[k] - '0')
		}
	}
	return cents, nil
}

var errNotNumber = &ruleError{reason: "not a number", kind: ErrInvalidField}

// parseNumber reads the JSON number grammar (and the Python Decimal one for
// strings: optional '+', ".5", "5."), exponent included.
func parseNumber(s string) (neg bool, ip, fp string, exp int, err error) {
	if s == "" {
		return false, "", "", 0, errEmpty
	}
	switch s[0] {
	case '-':
		neg, s = true, s[1:]
	case '+':
		s = s[1:]
	}
	n := 0
	for n < len(s) && isDigit(s[n]) {
		n++
	}
	ip, s = s[:n], s[n:]
	if s != "" && s[0] == '.' {
		s = s[1:]
		n = 0
		for n < len(s) && isDigit(s[n]) {
			n++
		}
		fp, s = s[:n], s[n:]
	}
	if ip == "" && fp == "" {
		return false, "", "", 0, errNotNumber
	}
	if s != "" {
		if s[0] != 'e' && s[0] != 'E' {
			return false, "", "", 0, errNotNumber
		}
		e, perr := strconv.Atoi(s[1:])
		if perr != nil || len(s) < 2 || s[1] == ' ' {
			return false, "", "", 0, errNotNumber
		}
		// Beyond this the amount is either far too large or far below a
		// cent; refusing early keeps the digit arithmetic bounded.
		if e > 64 || e < -64 {
			if strings.Trim(ip+fp, "0") == "" {
				return neg, "0", "", 0, nil
			}
			if e > 0 {
				return false, "", "", 0, invalid("amount too large")
			}
			return false, "", "", 0, invalid("sub-cent amount: amounts are never rounded")
		}
		exp = e
	}
	return neg, ip, fp, exp, nil
}

// parseMoneyString reads what people and models write: "180,00",
// "R$ 1.800,00", "1,800.00", "-R$ 10", "10.5", "1e3".
func parseMoneyString(s string, version int) (neg bool, ip, fp string, exp int, err error) {
	space := unicode.IsSpace
	if version == 1 {
		space = pyIsSpace
	}
	s = strings.TrimFunc(s, space)
	signSeen := false
	for {
		switch {
		case strings.HasPrefix(s, "-") || strings.HasPrefix(s, "+"):
			if signSeen {
				return false, "", "", 0, invalid("not an amount")
			}
			signSeen, neg = true, s[0] == '-'
			s = s[1:]
		case len(s) >= 2 && (s[0] == 'R' || s[0] == 'r') && s[1] == '$':
			s = s[2:]
		default:
			goto body
		}
		s = strings.TrimLeftFunc(s, space)
	}
body:
	if s == "" {
		return false, "", "", 0, errEmpty
	}
	if strings.ContainsAny(s, "eE") && !strings.Contains(s, ",") {
		n, ip, fp, exp, err := parseNumber(s)
		if n && err == nil {
			if signSeen {
				return false, "", "", 0, invalid("not an amount")
			}
			neg = true
		}
		return neg, ip, fp, exp, err
	}
	for i := 0; i < len(s); i++ {
		if c := s[i]; !isDigit(c) && c != '.' && c != ',' {
			return false, "", "", 0, invalid("not an amount")
		}
	}
	ip, fp, err = splitSeparators(s, version)
	if err != nil {
		return false, "", "", 0, err
	}
	return neg, ip, fp, 0, nil
}

// splitSeparators splits the digits and separators of an amount into its
// integer and fraction digits: with both '.' and ',' the last one is the
// decimal point; a lone separator is one, unless version 2 finds it
// ambiguous; one separator repeated groups thousands.
func splitSeparators(s string, version int) (ip, fp string, err error) {
	lastDot, lastComma := strings.LastIndexByte(s, '.'), strings.LastIndexByte(s, ',')
	switch {
	case lastDot < 0 && lastComma < 0:
		return s, "", nil
	case lastDot >= 0 && lastComma >= 0:
		// Both separators: the last one is the decimal point.
		dec, thou := byte('.'), byte(',')
		at := lastDot
		if lastComma > lastDot {
			dec, thou, at = ',', '.', lastComma
		}
		if strings.IndexByte(s, dec) != at {
			return "", "", invalid("not an amount: decimal separator %q appears twice", dec)
		}
		ip, ok := ungroup(s[:at], thou)
		if !ok {
			return "", "", invalid("not an amount: misplaced thousands separator")
		}
		return ip, s[at+1:], nil
	}
	sep := byte('.')
	at := lastDot
	if lastComma >= 0 {
		sep, at = ',', lastComma
	}
	if strings.IndexByte(s, sep) == at {
		// One lone separator: a decimal point, unless (version 2) exactly
		// three digits follow, when "1.800" may mean 1800 or 1.8.
		if version >= 2 && len(s)-at-1 == 3 && at >= 1 && at <= 3 && s[0] != '0' {
			return "", "", ambiguous("ambiguous amount: %q followed by three digits may be a thousands or a decimal separator; write it with cents (e.g. 1.800,00)", sep)
		}
		return s[:at], s[at+1:], nil
	}
	// The same separator several times: thousands groups, no cents.
	ip, ok := ungroup(s, sep)
	if !ok {
		return "", "", invalid("not an amount: misplaced thousands separator")
	}
	return ip, "", nil
}

// ungroup removes thousands separators, insisting on groups of three after a
// first group of one to three digits.
func ungroup(s string, sep byte) (string, bool) {
	if strings.IndexByte(s, sep) < 0 {
		return s, true
	}
	var b strings.Builder
	b.Grow(len(s))
	for i, g := range strings.Split(s, string(sep)) {
		if (i == 0 && (len(g) < 1 || len(g) > 3)) || (i > 0 && len(g) != 3) {
			return "", false
		}
		b.WriteString(g)
	}
	return b.String(), true
}

func isDigit(c byte) bool { return '0' <= c && c <= '9' }
