package model

import (
	"regexp"
	"strconv"
	"strings"
)

// Pix key types, spelled as derive and the pix.charge schema spell them.
const (
	KeyCPF   = "cpf"
	KeyCNPJ  = "cnpj"
	KeyEmail = "email"
	KeyPhone = "phone"
	KeyEVP   = "evp"
)

// Facts is what the stand-in understood from a customer's message: the
// values, never their spelling. Spelling is chosen per answer (see
// render.go), which is the whole point: one set of facts, many surface
// forms, and derive must bring them back to one payload.
type Facts struct {
	// WantsToPay: the text asks to pay, in words or by giving an amount
	// together with a key or an invoice.
	WantsToPay bool
	// AmountCents is the amount in centavos when HasAmount.
	AmountCents int64
	HasAmount   bool
	// PixKey is the key in a canonical spelling: digits for CPF and CNPJ,
	// "+" and digits for phones, lower case for e-mail and EVP. Empty when
	// no key was found.
	PixKey     string
	PixKeyType string
	// Invoice is the invoice reference as written ("NF-123"), or "".
	Invoice string
	// Customer is a customer id stated as "customer_id: X", "cliente: X"
	// and the like (normally in the system prompt), or "".
	Customer string
}

// Merge returns f with the fields g found overriding f's: later messages
// of a conversation correct earlier ones.
func (f Facts) Merge(g Facts) Facts {
	f.WantsToPay = f.WantsToPay || g.WantsToPay
	if g.HasAmount {
		f.AmountCents, f.HasAmount = g.AmountCents, true
	}
	if g.PixKey != "" {
		f.PixKey, f.PixKeyType = g.PixKey, g.PixKeyType
	}
	if g.Invoice != "" {
		f.Invoice = g.Invoice
	}
	if g.Customer != "" {
		f.Customer = g.Customer
	}
	return f
}

// maxText bounds what the regexps scan: a model reads a long message too,
// but the sandbox need not spend its two cores on it.
const maxText = 16 << 10

// maxReaisDigits keeps every extracted amount far inside int64 centavos and
// inside what derive accepts.
const maxReaisDigits = 13

var (
	reEmail = regexp.MustCompile(`[A-Za-z0-9._%+\-]+@[A-Za-z0-9\-]+(?:\.[A-Za-z0-9\-]+)*\.[A-Za-z]{2,}`)
	reEVP   = regexp.MustCompile(`[0-9A-Fa-f]{8}-[0-9A-Fa-f]{4}-[0-9A-Fa-f]{4}-[0-9A-Fa-f]{4}-[0-9A-Fa-f]{12}`)
	reCNPJ  = regexp.MustCompile(`\d{2}\.?\d{3}\.?\d{3}/?\d{4}-?\d{2}`)
	reCPF   = regexp.MustCompile(`\d{3}\.?\d{3}\.?\d{3}-?\d{2}`)
	// Phones: international with "+", Brazilian with the area code in
	// parentheses, or a bare area code followed by 8 or 9 digits.
	rePhone = regexp.MustCompile(`\+\s?\d{1,3}(?:[\s\-.]?\(?\d{1,5}\)?){1,5}|\(\s?\d{2}\s?\)\s?\d{4,5}[\s\-.]?\d{4}|\d{2}\s?\d{4,5}[\s\-.]?\d{4}`)

	reInvoiceCode = regexp.MustCompile(`(?i)\b(?:NFS-?e|NF-?e|NF|INV|FAT)[\s\-#:º°.]*\d[0-9A-Za-z\-/]*`)
	reInvoiceWord = regexp.MustCompile(`(?i)\b(?:fatura|invoice|boleto)\s+(?:n[º°o.]*\s*|#\s*)?([0-9A-Za-z\-/]*\d[0-9A-Za-z\-/]*)`)

	reCustomer = regexp.MustCompile(`(?i)\b(?:customer[_ ]?id|client[_ ]?id|cliente[_ ]?id|id do cliente|customer|cliente)\s*[:=#]\s*["']?([0-9A-Za-z][0-9A-Za-z._:\-]*)`)

	reMoneyRS    = regexp.MustCompile(`(?i)R\$\s*(\d[\d.,]*)`)
	reMoneyReais = regexp.MustCompile(`(?i)(\d[\d.,]*)\s*(?:reais|real|brl)\b`)
	reMoneyDec   = regexp.MustCompile(`\d[\d.]*,\d{2}|\d+\.\d{2}`)

	phoneWords = []string{"cel", "tel", "fone", "whats", "zap", "phone"}
	payWords   = []string{"pagar", "pague", "pagamento", "pago", "quitar", "pay", "pix", "cobra", "acertar"}
)

type span struct{ start, end int }

func overlaps(used []span, s span) bool {
	for _, u := range used {
		if s.start < u.end && u.start < s.end {
			return true
		}
	}
	return false
}

func isDigit(c byte) bool { return '0' <= c && c <= '9' }

// isolated reports whether text[start:end] is a whole number-like token:
// no digit glued before it, and no digit (or separator then digit) after
// it. Go's regexp has no look-around, so the boundary is checked here.
func isolated(text string, start, end int) bool {
	if start > 0 {
		c := text[start-1]
		if isDigit(c) || ((c == '.' || c == ',' || c == '/' || c == '-') && start > 1 && isDigit(text[start-2])) {
			return false
		}
	}
	if end < len(text) {
		c := text[end]
		if isDigit(c) {
			return false
		}
		if (c == '.' || c == ',' || c == '/' || c == '-') && end+1 < len(text) && isDigit(text[end+1]) {
			return false
		}
	}
	return true
}

func digitsOf(s string) string {
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if isDigit(s[i]) {
			b.WriteByte(s[i])
		}
	}
	return b.String()
}

// ValidCPF checks a CPF's two modulus-11 check digits.
func ValidCPF(d string) bool {
	if len(d) != 11 || strings.Count(d, d[:1]) == len(d) {
		return false
	}
	check := func(digits string, w int) byte {
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
	return check(d[:9], 10) == d[9] && check(d[:10], 11) == d[10]
}

type keyCandidate struct {
	span
	typ, key string
}

// Extract reads one message. It never fails: what it cannot find it leaves
// empty, as a model would ask again rather than refuse.
func Extract(text string) Facts {
	if len(text) > maxText {
		text = text[:maxText]
	}
	lower := strings.ToLower(text)
	var f Facts
	var used []span

	// Every key-shaped token is masked, chosen or not, so that a second
	// CPF or a phone number is never read as an amount or an invoice.
	k, all, ok := findKey(text, lower)
	if ok {
		f.PixKey, f.PixKeyType = k.key, k.typ
	}
	used = append(used, all...)

	if s, inv, ok := findInvoice(text, used); ok {
		f.Invoice = inv
		used = append(used, s)
	}
	if m := reCustomer.FindStringSubmatch(text); m != nil {
		f.Customer = strings.TrimRight(m[1], ".:-")
	}
	f.AmountCents, f.HasAmount = findAmount(text, used)

	// An amount with a key or an invoice is a payment request even
	// without the word ("agora a NF-124, R$ 50,00").
	f.WantsToPay = f.HasAmount && (f.PixKey != "" || f.Invoice != "")
	for _, w := range payWords {
		if strings.Contains(lower, w) {
			f.WantsToPay = true
			break
		}
	}
	return f
}

// findKey picks the Pix key: the first candidate after the word "chave" (or
// "pix") when there is one, else the first in the text. It also returns
// the spans of every candidate.
func findKey(text, lower string) (keyCandidate, []span, bool) {
	var cands []keyCandidate
	var used []span
	add := func(c keyCandidate) {
		if !overlaps(used, c.span) {
			cands = append(cands, c)
			used = append(used, c.span)
		}
	}
	for _, m := range reEmail.FindAllStringIndex(text, -1) {
		add(keyCandidate{span{m[0], m[1]}, KeyEmail, strings.ToLower(text[m[0]:m[1]])})
	}
	for _, m := range reEVP.FindAllStringIndex(text, -1) {
		if isolatedWord(text, m[0], m[1]) {
			add(keyCandidate{span{m[0], m[1]}, KeyEVP, strings.ToLower(text[m[0]:m[1]])})
		}
	}
	for _, m := range reCNPJ.FindAllStringIndex(text, -1) {
		if isolated(text, m[0], m[1]) {
			add(keyCandidate{span{m[0], m[1]}, KeyCNPJ, digitsOf(text[m[0]:m[1]])})
		}
	}
	for _, m := range reCPF.FindAllStringIndex(text, -1) {
		if !isolated(text, m[0], m[1]) {
			continue
		}
		raw := text[m[0]:m[1]]
		d := digitsOf(raw)
		if !strings.ContainsAny(raw, ".-") && looksLikePhone(lower, m[0], d) {
			// Eleven bare digits: read as a phone when the words around
			// say so or it is not a CPF; rePhone below picks it up.
			continue
		}
		add(keyCandidate{span{m[0], m[1]}, KeyCPF, d})
	}
	for _, m := range rePhone.FindAllStringIndex(text, -1) {
		start, end, ok := trimPhone(text, m[0], m[1])
		if !ok || !isolated(text, start, end) {
			continue
		}
		if k, ok := phoneKey(text[start:end]); ok {
			add(keyCandidate{span{start, end}, KeyPhone, k})
		}
	}
	if len(cands) == 0 {
		return keyCandidate{}, nil, false
	}
	best := cands[0]
	for _, c := range cands[1:] {
		if c.start < best.start {
			best = c
		}
	}
	anchor := strings.Index(lower, "chave")
	if anchor < 0 {
		anchor = strings.Index(lower, "pix")
	}
	if anchor >= 0 {
		var after *keyCandidate
		for i := range cands {
			if cands[i].start >= anchor && (after == nil || cands[i].start < after.start) {
				after = &cands[i]
			}
		}
		if after != nil {
			best = *after
		}
	}
	return best, used, true
}

// trimPhone shortens an international match that swallowed the numbers
// written after it ("+55 11 98765-4321 180"): groups are dropped from the
// end until the digits fit a phone number.
func trimPhone(text string, start, end int) (int, int, bool) {
	for {
		for end > start && !isDigit(text[end-1]) {
			end-- // "+55 (11) 9..." may end on a separator
		}
		raw := text[start:end]
		d := digitsOf(raw)
		limit := 15
		if strings.HasPrefix(d, "55") {
			limit = 13
		}
		if len(d) <= limit || raw[0] != '+' {
			return start, end, end > start
		}
		cut := strings.LastIndexAny(raw, " -.()")
		if cut <= 1 {
			return start, end, false
		}
		end = start + cut
	}
}

// isolatedWord is isolated for hex tokens: no letter or digit glued on.
func isolatedWord(text string, start, end int) bool {
	alnum := func(c byte) bool { return isDigit(c) || ('a' <= c|0x20 && c|0x20 <= 'z') }
	return (start == 0 || !alnum(text[start-1])) && (end == len(text) || !alnum(text[end]))
}

// looksLikePhone decides eleven bare digits: the words just before them
// first ("CPF" or "celular"), then the CPF check digits.
func looksLikePhone(lower string, at int, digits string) bool {
	before := lower[max(0, at-24):at]
	if strings.Contains(before, "cpf") {
		return false
	}
	for _, w := range phoneWords {
		if strings.Contains(before, w) {
			return true
		}
	}
	return !ValidCPF(digits) && digits[2] == '9'
}

// phoneKey is the E.164-like spelling of a phone as written: numbers
// without a country code are Brazilian.
func phoneKey(raw string) (string, bool) {
	d := digitsOf(raw)
	if strings.HasPrefix(strings.TrimSpace(raw), "+") {
		if len(d) < 8 || len(d) > 15 {
			return "", false
		}
		return "+" + d, true
	}
	switch {
	case len(d) == 10 || len(d) == 11:
		return "+55" + d, true
	case (len(d) == 12 || len(d) == 13) && strings.HasPrefix(d, "55"):
		return "+" + d, true
	}
	return "", false
}

func findInvoice(text string, used []span) (span, string, bool) {
	for _, m := range reInvoiceCode.FindAllStringIndex(text, -1) {
		s := span{m[0], m[1]}
		if overlaps(used, s) {
			continue
		}
		inv := strings.TrimRight(text[m[0]:m[1]], "-/")
		return span{m[0], m[0] + len(inv)}, inv, true
	}
	for _, m := range reInvoiceWord.FindAllStringSubmatchIndex(text, -1) {
		s := span{m[2], m[3]}
		if overlaps(used, s) {
			continue
		}
		inv := strings.TrimRight(text[m[2]:m[3]], "-/")
		if inv == "" {
			continue
		}
		return span{m[2], m[2] + len(inv)}, inv, true
	}
	return span{}, "", false
}

// findAmount prefers an amount marked as money ("R$ 180,00", "180 reais"),
// then any number with cents.
func findAmount(text string, used []span) (int64, bool) {
	for _, re := range []*regexp.Regexp{reMoneyRS, reMoneyReais, reMoneyDec} {
		for _, m := range re.FindAllStringSubmatchIndex(text, -1) {
			start, end := m[0], m[1]
			if len(m) >= 4 && m[2] >= 0 {
				start, end = m[2], m[3]
			}
			for end > start && (text[end-1] == '.' || text[end-1] == ',') {
				end-- // the sentence's full stop, not a separator
			}
			if overlaps(used, span{start, end}) || !isolated(text, start, end) {
				continue
			}
			if c, ok := ParseBRL(text[start:end]); ok {
				return c, true
			}
		}
	}
	return 0, false
}

// ParseBRL reads an amount as Brazilians write it ("1.800,00", "180,5",
// "180") and, when the last separator is a dot followed by one or two
// digits, as others do ("180.00"). A lone dot followed by three digits is a
// thousands separator, as it is in Brazil ("R$ 1.800"). It refuses what it
// cannot read unambiguously.
func ParseBRL(s string) (int64, bool) {
	if s == "" || !isDigit(s[0]) {
		return 0, false
	}
	ip, fp := s, ""
	if i := strings.LastIndexByte(s, ','); i >= 0 {
		ip, fp = s[:i], s[i+1:]
		if strings.Contains(fp, ".") || len(fp) == 0 || len(fp) > 2 {
			return 0, false
		}
		if strings.Contains(ip, ",") {
			return 0, false
		}
		var ok bool
		if ip, ok = ungroup(ip); !ok {
			return 0, false
		}
	} else if i := strings.LastIndexByte(s, '.'); i >= 0 {
		tail := s[i+1:]
		switch {
		case strings.Count(s, ".") == 1 && (len(tail) == 1 || len(tail) == 2):
			ip, fp = s[:i], tail
		default:
			var ok bool
			if ip, ok = ungroup(s); !ok {
				return 0, false
			}
		}
	}
	ip = strings.TrimLeft(ip, "0")
	if ip == "" {
		ip = "0"
	}
	if len(ip) > maxReaisDigits || digitsOf(ip) != ip || digitsOf(fp) != fp {
		return 0, false
	}
	for len(fp) < 2 {
		fp += "0"
	}
	reais, err := strconv.ParseInt(ip, 10, 64)
	if err != nil {
		return 0, false
	}
	cents, _ := strconv.ParseInt(fp, 10, 64)
	return reais*100 + cents, true
}

// ungroup removes dots that separate thousands ("1.800.000"), insisting on
// groups of three.
func ungroup(s string) (string, bool) {
	if !strings.Contains(s, ".") {
		return s, s != ""
	}
	parts := strings.Split(s, ".")
	if len(parts[0]) == 0 || len(parts[0]) > 3 {
		return "", false
	}
	for _, p := range parts[1:] {
		if len(p) != 3 {
			return "", false
		}
	}
	return strings.Join(parts, ""), true
}
