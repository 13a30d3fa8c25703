package model

import (
	"bytes"
	"encoding/json"
	"math/rand/v2"
	"regexp"
	"strconv"
	"strings"
)

// The spellings below are the ones real models produce for the same value.
// Every one of them must normalize, through derive's rules, to the same
// payload: a spelling that derive would refuse or read differently belongs
// in the fault switches (wrong amount, malformed JSON), not here. The
// tests check this property for each spelling, and the fuzz target for
// whatever the parser extracts.

// AmountSpellings lists the JSON values (raw JSON text) a model may emit for
// an amount in centavos: strings in Brazilian and international notation,
// with and without "R$", and bare JSON numbers.
func AmountSpellings(cents int64) []string {
	reais, frac := cents/100, cents%100
	r := strconv.FormatInt(reais, 10)
	c := twoDigits(frac)
	out := []string{
		quote("R$ " + groupThousands(r) + "," + c),
		quote(r + "." + c),
		quote(r + "," + c),
		quote("R$" + r + "," + c),
		quote(groupThousands(r) + "," + c),
	}
	if frac == 0 {
		out = append(out, r, quote(r), r+".00")
	} else {
		num := r + "." + c
		if frac%10 == 0 {
			num = r + "." + c[:1] // 180.5, as JSON encoders write it
		}
		out = append(out, num)
	}
	return out
}

func twoDigits(n int64) string {
	if n < 10 {
		return "0" + strconv.FormatInt(n, 10)
	}
	return strconv.FormatInt(n, 10)
}

// groupThousands writes "1800000" as "1.800.000".
func groupThousands(r string) string {
	if len(r) <= 3 {
		return r
	}
	var b strings.Builder
	head := len(r) % 3
	if head == 0 {
		head = 3
	}
	b.WriteString(r[:head])
	for i := head; i < len(r); i += 3 {
		b.WriteByte('.')
		b.WriteString(r[i : i+3])
	}
	return b.String()
}

// KeySpelling is one way of writing a Pix key, with the type words that may
// go with it. An empty entry in Types means "leave pix_key_type out",
// offered only where derive can infer the type from the spelling alone.
type KeySpelling struct {
	Key   string
	Types []string
}

// KeySpellings lists the ways a model may write a canonical key of type typ
// (as Extract returns it).
func KeySpellings(typ, key string) []KeySpelling {
	switch typ {
	case KeyCPF:
		if len(key) != 11 {
			break
		}
		// Eleven digits may also be a phone: the type is always stated.
		ts := []string{"cpf", "CPF"}
		return []KeySpelling{
			{key[:3] + "." + key[3:6] + "." + key[6:9] + "-" + key[9:], ts},
			{key, ts},
			{key[:9] + "-" + key[9:], ts},
		}
	case KeyCNPJ:
		if len(key) != 14 {
			break
		}
		ts := []string{"", "cnpj", "CNPJ"}
		return []KeySpelling{
			{key[:2] + "." + key[2:5] + "." + key[5:8] + "/" + key[8:12] + "-" + key[12:], ts},
			{key, ts},
			{key[:8] + "/" + key[8:12] + "-" + key[12:], ts},
		}
	case KeyPhone:
		return phoneSpellings(key)
	case KeyEmail:
		ts := []string{"", "email", "e-mail"}
		local, domain, _ := strings.Cut(key, "@")
		return []KeySpelling{
			{key, ts},
			{strings.ToUpper(key[:1]) + key[1:], ts},
			{local + "@" + strings.ToUpper(domain), ts},
		}
	case KeyEVP:
		ts := []string{"", "evp", "random", "aleatoria"}
		return []KeySpelling{
			{key, ts},
			{strings.ToUpper(key), ts},
			{strings.ReplaceAll(key, "-", ""), ts},
		}
	}
	return []KeySpelling{{key, []string{typ}}}
}

func phoneSpellings(key string) []KeySpelling {
	opt := []string{"", "phone", "telefone", "celular"}
	req := []string{"phone", "telefone", "celular"}
	d := strings.TrimPrefix(key, "+")
	if !strings.HasPrefix(d, "55") || (len(d) != 12 && len(d) != 13) {
		return []KeySpelling{{key, opt}}
	}
	n := d[2:] // area code and number
	ddd, num := n[:2], n[2:]
	if !brazilianNumber(ddd, num) {
		// National spellings of a number libphonenumber would not accept
		// need not mean the same to it: offer only the E.164 one.
		return []KeySpelling{{key, opt}}
	}
	split := len(num) - 4
	dashed := num[:split] + "-" + num[split:]
	return []KeySpelling{
		{"+55 " + ddd + " " + dashed, opt},
		{key, opt},
		{"+55 (" + ddd + ") " + dashed, opt},
		{"(" + ddd + ") " + dashed, opt},
		// Bare digits could be a CPF: derive needs the type.
		{n, req},
		{ddd + " " + dashed, req},
		{d, req},
	}
}

// brazilianNumber: area codes have no zero digit; mobiles have nine digits
// starting with 9, landlines eight starting with 2 to 5.
func brazilianNumber(ddd, num string) bool {
	if ddd[0] == '0' || ddd[1] == '0' {
		return false
	}
	switch len(num) {
	case 9:
		return num[0] == '9'
	case 8:
		return num[0] >= '2' && num[0] <= '5'
	}
	return false
}

// wrongAmount returns a plausible misreading of the right amount: the
// invoice number taken for the amount, a slipped decimal point, a
// neighbouring value. Never the right amount itself.
func wrongAmount(rng *rand.Rand, right int64, invoice string) int64 {
	var opts []int64
	if d := digitsOf(invoice); d != "" && len(d) <= 7 {
		if n, err := strconv.ParseInt(d, 10, 64); err == nil {
			opts = append(opts, n*100)
		}
	}
	opts = append(opts, right*10, right*100, right+1000, right+100)
	if right%10 == 0 {
		opts = append(opts, right/10)
	}
	if right > 1000 {
		opts = append(opts, right-1000)
	}
	rng.Shuffle(len(opts), func(i, j int) { opts[i], opts[j] = opts[j], opts[i] })
	for _, o := range opts {
		if o != right && o > 0 && o < 1e15 {
			return o
		}
	}
	return right + 1
}

// quote encodes s as a JSON string without HTML escaping, as models write.
func quote(s string) string {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	enc.Encode(s) //nolint:errcheck // a string always encodes
	return strings.TrimSuffix(b.String(), "\n")
}

type argPair struct{ name, value string } // value is raw JSON

// writeArgs writes the arguments object in one of the layouts models use:
// compact, spaced, or indented, in schema order or shuffled.
func writeArgs(rng *rand.Rand, pairs []argPair) string {
	pairs = append([]argPair(nil), pairs...)
	if rng.IntN(4) == 0 {
		rng.Shuffle(len(pairs), func(i, j int) { pairs[i], pairs[j] = pairs[j], pairs[i] })
	}
	sep, colon, open, end := ",", ":", "{", "}"
	switch rng.IntN(3) {
	case 1:
		sep, colon = ", ", ": "
	case 2:
		sep, colon, open, end = ",\n  ", ": ", "{\n  ", "\n}"
	}
	var b strings.Builder
	b.WriteString(open)
	for i, p := range pairs {
		if i > 0 {
			b.WriteString(sep)
		}
		b.WriteString(quote(p.name))
		b.WriteString(colon)
		b.WriteString(p.value)
	}
	b.WriteString(end)
	return b.String()
}

// malform breaks valid arguments the ways models do.
func malform(rng *rand.Rand, args string) string {
	switch rng.IntN(5) {
	case 0: // cut off (max_tokens, a dropped stream)
		return args[:len(args)*2/3]
	case 1: // Python dict
		return strings.ReplaceAll(args, `"`, `'`)
	case 2:
		return strings.TrimSuffix(strings.TrimSpace(args), "}") + ",}"
	case 3: // wrapped in a Markdown fence
		return "```json\n" + args + "\n```"
	default: // JavaScript object keys
		return reObjectKey.ReplaceAllString(args, "$1$2")
	}
}

var reObjectKey = regexp.MustCompile(`([{,]\s*)"(\w+)"`)
