package difftest

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"unicode"
	"unicode/utf8"

	"github.com/retrysafe/retrysafe/derive"
)

// python is Debian's interpreter, the one python3-phonenumbers installs for.
const python = "/usr/bin/python3"

// batch runs one implementation over every request (one process, requests
// on stdin, one answer per line on stdout) and returns the answers in order.
func batch(t *testing.T, name string, cmd *exec.Cmd, reqs []map[string]any) []map[string]any {
	t.Helper()
	var in bytes.Buffer
	enc := json.NewEncoder(&in)
	enc.SetEscapeHTML(false)
	for _, r := range reqs {
		if err := enc.Encode(r); err != nil {
			t.Fatal(err)
		}
	}
	cmd.Stdin = &in
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("%s: %v\n%s", name, err, stderr.String())
	}
	var res []map[string]any
	sc := bufio.NewScanner(bytes.NewReader(out))
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		var m map[string]any
		if err := json.Unmarshal(sc.Bytes(), &m); err != nil {
			t.Fatalf("%s: answer %d: %v", name, len(res)+1, err)
		}
		res = append(res, m)
	}
	if len(res) != len(reqs) {
		t.Fatalf("%s: %d answers for %d requests\n%s", name, len(res), len(reqs), stderr.String())
	}
	return res
}

// ours is derive's answer for one input.
type ours struct {
	ok    bool
	value string
	typ   string
	err   error
}

func derived(rule derive.Rule, version int, s string) ours {
	n, err := derive.NormalizeValue(rule, version, s)
	if err != nil {
		return ours{err: err}
	}
	return ours{ok: true, value: n.Value, typ: string(n.Type)}
}

// check is one comparison: an input, derive's answer and another
// implementation's.
type check struct {
	rule, impl, in string
	us             ours
	them           map[string]any
	agree          bool
}

func (c *check) str(k string) string { s, _ := c.them[k].(string); return s }
func (c *check) bool(k string) bool  { b, _ := c.them[k].(bool); return b }
func (c *check) ambiguous() bool     { return errors.Is(c.us.err, derive.ErrAmbiguous) }

// allowance is one allow-listed kind of difference: where derive and a
// library differ by design, and why derive is right.
type allowance struct {
	rule, impl, name string
	match            func(c *check) bool
}

func hasDocPunct(s string) bool { return strings.ContainsAny(s, "./") }

func digitsOf(s string) string {
	return strings.Map(func(r rune) rune {
		if r >= '0' && r <= '9' {
			return r
		}
		return -1
	}, s)
}

// outsideDocChars: a character other than digits, ASCII letters, . / - and
// space (after trimming).
func outsideDocChars(s string) bool {
	return strings.IndexFunc(strings.TrimSpace(s), func(r rune) bool {
		return !(r >= '0' && r <= '9' || r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || strings.ContainsRune("./- ", r))
	}) >= 0
}

func alnumCount(s string) int {
	n := 0
	for _, r := range s {
		if r >= '0' && r <= '9' || r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' {
			n++
		}
	}
	return n
}

// looseStrip: derive refused a value that cpf-cnpj-validator's loose mode
// accepted by deleting characters (a stray separator, or words around the
// number).
func looseStrip(c *check) bool {
	v := c.str("value")
	if v == "" {
		v = c.str("ccvValue")
	}
	return !c.us.ok && (outsideDocChars(c.in) || (v != "" && len(v) < alnumCount(c.in)))
}

// goUnassigned: a character Go's Unicode 15.0 tables do not have (V8/ICU
// in node 20 is newer).
func goUnassigned(s string) bool {
	for _, r := range s {
		found := false
		for name, tab := range unicode.Categories {
			if name != "C" && name != "Cn" && unicode.Is(tab, r) {
				found = true
				break
			}
		}
		if !found {
			return true
		}
	}
	return false
}

var allowList = []allowance{
	// cpf-cnpj-validator's default (loose) mode deletes every character
	// that is not a letter or digit, so "529*982*247#25" or "CPF 529..."
	// pass. derive takes only the official punctuation: a stray character
	// is a typo or a different field, and must not pass silently.
	{"taxid", "cpf-cnpj-validator", "loose mode strips any character", looseStrip},
	{"pix_key", "per-type libraries", "loose mode strips any character", looseStrip},
	// brazilian-utils reads any 11 digits whose area code exists as a
	// mobile; a Brazilian mobile's number starts with 9 (libphonenumber
	// agrees with derive: not a valid number).
	{"pix_key", "brazilian-utils", "not a mobile range (no leading 9)", func(c *check) bool {
		d := digitsOf(c.in)
		return !c.us.ok && c.str("type") == "phone" && len(d) >= 11 && d[len(d)-9] != '9'
	}},
	// A Pix phone key is written +55, area code, number (or the bare 11
	// digits). libphonenumber strips national dialing prefixes (0, or 0 or
	// 90 plus a carrier code): for a key, derive does not guess them.
	{"pix_key", "per-type libraries", "dialing prefix before a key", func(c *check) bool {
		d := digitsOf(c.in)
		types, _ := c.them["types"].([]string)
		phone := c.str("type") == "phone" || (len(types) == 2 && types[1] == "phone")
		return phone && (!c.us.ok || c.us.typ != "phone") && !strings.Contains(c.in, "+") && (d[0] == '0' || strings.HasPrefix(d, "90"))
	}},
	// "(11) 93537-9836" is written as a phone; cpf-cnpj-validator's loose
	// mode deletes the ( ) and finds a valid CPF. Phone punctuation makes
	// it a phone for derive, as for brazilian-utils.
	{"pix_key", "per-type libraries", "phone punctuation is not a CPF", func(c *check) bool {
		types, _ := c.them["types"].([]string)
		return c.us.ok && c.us.typ == "phone" && strings.ContainsAny(c.in, "()+") && len(types) == 2
	}},
	// 14 digits spelled like a phone ("0055 41 5824-1909") that happen to
	// pass the CNPJ check: derive refuses to guess (brazilian-utils does
	// not read them as a CNPJ either); a CNPJ is written bare or masked.
	{"pix_key", "per-type libraries", "CNPJ in a phone's spelling", func(c *check) bool {
		return c.ambiguous() && c.str("type") == "cnpj" && !hasDocPunct(c.in)
	}},
	// "+1 8901987097" is a US number: brazilian-utils reads any + and 11
	// digits as +55. derive reads the country code that is written.
	{"pix_key", "brazilian-utils", "another country code is not +55", func(c *check) bool {
		in := strings.TrimSpace(c.in)
		return !c.us.ok && c.str("type") == "phone" && strings.HasPrefix(in, "+") && !strings.HasPrefix(in, "+55")
	}},
	// Internationalized e-mail keys (RFC 6531): brazilian-utils is
	// ASCII-only; validator.isEmail accepts them (see "email vs validator").
	{"pix_key", "brazilian-utils", "internationalized e-mail", func(c *check) bool {
		return c.us.ok && c.us.typ == "email" && strings.IndexFunc(c.in, func(r rune) bool { return r > 0x7f }) >= 0
	}},
	// 32 hexadecimal digits without dashes can only be a random key:
	// derive writes the DICT form (lower case, dashed); brazilian-utils
	// recognises only the dashed spelling.
	{"pix_key", "brazilian-utils", "undashed UUID", func(c *check) bool {
		return c.us.ok && c.us.typ == "evp" && len(strings.TrimSpace(c.in)) == 32
	}},
	{"pix_key", "per-type libraries", "undashed UUID", func(c *check) bool {
		return c.us.ok && c.us.typ == "evp" && len(strings.TrimSpace(c.in)) == 32
	}},
	// Ten digits are an area code and eight digits: since ANATEL's ninth
	// digit (completed 2016) no Brazilian mobile has eight; brazilian-utils
	// agrees, libphonenumber-js's metadata still types some as mobile.
	{"pix_key", "per-type libraries", "eight-digit numbers are not mobiles", func(c *check) bool {
		return !c.us.ok && c.str("type") == "phone" && !strings.Contains(c.in, "+") && len(digitsOf(c.in)) == 10
	}},
	// Internationalized addresses (RFC 6531 local parts, IDN domains):
	// validator.isEmail accepts them, brazilian-utils is ASCII-only.
	{"email", "brazilian-utils", "internationalized address (validator agrees)", func(c *check) bool {
		return c.us.ok && strings.IndexFunc(c.in, func(r rune) bool { return r > 0x7f }) >= 0 && c.bool("validator")
	}},
	// A zero-width or bidirectional control hides inside an address or
	// key (issue 18): derive refuses it, validator.isEmail does not look.
	{"email", "validator", "invisible format character", func(c *check) bool {
		return !c.us.ok && strings.Contains(c.us.err.Error(), "invisible format")
	}},
	{"pix_key", "per-type libraries", "invisible format character", func(c *check) bool {
		return !c.us.ok && strings.Contains(c.us.err.Error(), "invisible format")
	}},
	// The reference gives a negative amount for "-10"; NormalizeValue's
	// field does not allow negatives (a negative charge is a mistake, the
	// schema must say AllowNegative), so derive refuses it.
	{"v1", "python", "negative amount needs AllowNegative", func(c *check) bool {
		return !c.us.ok && strings.Contains(c.us.err.Error(), "negative amount")
	}},
	{"v1", "node", "character unassigned in Go's Unicode 15.0", func(c *check) bool { return goUnassigned(c.in) }},
	// @brazilian-utils getPixKeyInfo reads "829.631.334-09" (CPF mask,
	// wrong check digits) as the phone +5582963133409: a charge could go
	// to a stranger's phone key (issue 17). derive: a value with CPF/CNPJ
	// punctuation is a CPF/CNPJ or an error, never a phone.
	{"pix_key", "brazilian-utils", "CPF/CNPJ punctuation is never a phone", func(c *check) bool {
		return !c.us.ok && c.str("type") == "phone" && hasDocPunct(c.in)
	}},
	{"pix_key", "per-type libraries", "CPF/CNPJ punctuation is never a phone", func(c *check) bool {
		if !hasDocPunct(c.in) {
			return false
		}
		types, _ := c.them["types"].([]string)
		return (!c.us.ok && c.str("type") == "phone") || (c.us.ok && len(types) == 2 && types[1] == "phone" && types[0] == c.us.typ)
	}},
	// 11 digits that are both a valid CPF and a valid mobile number:
	// brazilian-utils picks the CPF; derive refuses and asks for
	// pix_key_type, since either guess can charge the wrong person.
	{"pix_key", "brazilian-utils", "CPF or mobile: derive asks for the type", func(c *check) bool {
		return c.ambiguous() && c.str("type") == "cpf"
	}},
	// A leading 00 before 55: brazilian-utils reads 0055... as +55...
	// (and libphonenumber as 00 + carrier + another country). For a
	// Brazilian sender both readings exist; derive refuses to guess.
	{"pix_key", "brazilian-utils", "leading 00 is ambiguous", func(c *check) bool {
		return c.ambiguous() && strings.HasPrefix(digitsOf(c.in), "00") && !strings.HasPrefix(strings.TrimSpace(c.in), "+")
	}},
	{"phone", "libphonenumber-js", "leading 00 is ambiguous", func(c *check) bool {
		return c.ambiguous() && strings.HasPrefix(digitsOf(c.in), "00")
	}},
	{"phone", "python-phonenumbers", "leading 00 is ambiguous", func(c *check) bool {
		return c.ambiguous() && strings.HasPrefix(digitsOf(c.in), "00")
	}},
	// The two libphonenumber ports carry different metadata (Debian's
	// python3-phonenumbers 8.12.57 is from 2022, libphonenumber-js and
	// derive's nyaruka/phonenumbers are newer, each of its own date):
	// where they disagree with each other, derive agrees with one of them.
	{"phone", "python-phonenumbers", "metadata differs (libphonenumber-js agrees with derive)", func(c *check) bool {
		return c.them["otherAgrees"] == true
	}},
	{"phone", "libphonenumber-js", "metadata differs (python-phonenumbers agrees with derive)", func(c *check) bool {
		return c.them["otherAgrees"] == true
	}},
	// validator.isEmail accepts quoted local parts ("a b"@x.com) by
	// default; derive refuses them: no provider or DICT accepts them as a
	// key, and quoting gives one mailbox two spellings.
	{"email", "validator", "quoted local part", func(c *check) bool {
		return !c.us.ok && strings.Contains(c.in, `"`)
	}},
	// Version 1 and Unicode versions: CPython 3.11 has Unicode 14.0, Go
	// and V8 have 15.0. A character unassigned in 14.0 has no case or
	// letter property in Python; derive follows the newer table, as a
	// reference running a newer Python would.
	{"v1", "python", "character unassigned in Python's Unicode 14.0", func(c *check) bool {
		return c.them["unassigned"] == true
	}},
}

type tally struct {
	inputs, agree int
	allowed       map[string]int
	bad           []string
}

// reporter counts and prints per rule and implementation.
type reporter struct {
	t      *testing.T
	counts map[string]*tally
}

func (r *reporter) add(c *check) {
	k := c.rule + " vs " + c.impl
	tl := r.counts[k]
	if tl == nil {
		tl = &tally{allowed: map[string]int{}}
		r.counts[k] = tl
	}
	tl.inputs++
	if c.agree {
		tl.agree++
		return
	}
	for _, a := range allowList {
		if (a.rule == c.rule || strings.HasPrefix(c.rule, a.rule+" ")) && a.impl == c.impl && a.match(c) {
			tl.allowed[a.name]++
			return
		}
	}
	us := fmt.Sprintf("%q %s", c.us.value, c.us.typ)
	if !c.us.ok {
		us = "error: " + c.us.err.Error()
	}
	them, _ := json.Marshal(c.them)
	tl.bad = append(tl.bad, fmt.Sprintf("%q: derive %s; %s %s", c.in, us, c.impl, them))
}

func (r *reporter) finish() {
	keys := make([]string, 0, len(r.counts))
	for k := range r.counts {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		tl := r.counts[k]
		n := 0
		var names []string
		for name, c := range tl.allowed {
			n += c
			names = append(names, fmt.Sprintf("%s: %d", name, c))
		}
		sort.Strings(names)
		line := fmt.Sprintf("%-44s inputs %6d  agree %6d  allow-listed %5d", k, tl.inputs, tl.agree, n)
		if len(names) > 0 {
			line += "  (" + strings.Join(names, "; ") + ")"
		}
		if len(tl.bad) > 0 {
			line += fmt.Sprintf("  DISAGREE %d", len(tl.bad))
		}
		fmt.Println(line)
		for i, b := range tl.bad {
			if i == 15 && os.Getenv("DIFFTEST_ALL") == "" {
				r.t.Errorf("%s: ... %d more", k, len(tl.bad)-i)
				break
			}
			r.t.Errorf("%s: %s", k, b)
		}
	}
}

// ---- generators ----

func cpfFrom(base string) string {
	d := []byte(base)
	for _, n := range []int{9, 10} {
		sum := 0
		for i := range n {
			sum += int(d[i]-'0') * (n + 1 - i)
		}
		r := sum * 10 % 11
		if r == 10 {
			r = 0
		}
		d = append(d, byte('0'+r))
	}
	return string(d)
}

func cnpjFrom(base string) string {
	d := []byte(base)
	w := []int{6, 5, 4, 3, 2, 9, 8, 7, 6, 5, 4, 3, 2}
	for _, n := range []int{12, 13} {
		sum := 0
		for i := range n {
			sum += int(d[i]-'0') * w[13-n+i]
		}
		r := sum % 11
		c := byte('0')
		if r >= 2 {
			c = byte('0' + 11 - r)
		}
		d = append(d, c)
	}
	return string(d)
}

const alnumUpper = "0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZ"

func randDigits(rng *rand.Rand, n int) string {
	b := make([]byte, n)
	for i := range b {
		b[i] = byte('0' + rng.IntN(10))
	}
	return string(b)
}

func randAlnum(rng *rand.Rand, n int) string {
	b := make([]byte, n)
	for i := range b {
		b[i] = alnumUpper[rng.IntN(len(alnumUpper))]
	}
	return string(b)
}

func maskCPF(d string) string { return d[:3] + "." + d[3:6] + "." + d[6:9] + "-" + d[9:] }
func maskCNPJ(d string) string {
	return d[:2] + "." + d[2:5] + "." + d[5:8] + "/" + d[8:12] + "-" + d[12:]
}

func bumpLast(s string) string {
	return s[:len(s)-1] + string(rune('0'+(s[len(s)-1]-'0'+1)%10))
}

// docSpellings writes one document many ways.
func docSpellings(rng *rand.Rand, d string) []string {
	var masked string
	if len(d) == 11 {
		masked = maskCPF(d)
	} else {
		masked = maskCNPJ(d)
	}
	out := []string{d, masked, strings.ToLower(masked), " " + d + " ", strings.ReplaceAll(masked, ".", " ")}
	switch rng.IntN(4) {
	case 0:
		out = append(out, strings.ReplaceAll(masked, "-", "_"))
	case 1:
		out = append(out, d[:len(d)-1])
	case 2:
		out = append(out, d+"0")
	case 3:
		out = append(out, "CPF "+masked)
	}
	return out
}

func genTaxIDs(rng *rand.Rand) []string {
	var in []string
	for range 500 {
		cpf := cpfFrom(randDigits(rng, 9))
		in = append(in, docSpellings(rng, cpf)...)
		in = append(in, bumpLast(cpf), maskCPF(bumpLast(cpf)))
		num := cnpjFrom(randDigits(rng, 12))
		in = append(in, docSpellings(rng, num)...)
		in = append(in, bumpLast(num))
		alnum := cnpjFrom(randAlnum(rng, 12))
		in = append(in, docSpellings(rng, alnum)...)
		in = append(in, bumpLast(alnum), maskCNPJ(bumpLast(alnum)))
	}
	in = append(in, "12.ABC.345/01DE-35", "12ABC34501DE35", "12abc34501de35", "12ABC34501DE36", "00000000000", "00000000000000",
		"11111111111", "829.631.334-09", "529.982.247-25", "11.222.333/0001-81", "", "ABCDEFGHIJKL00")
	return in
}

// phones: Brazilian mobiles and landlines, and other countries, in many
// spellings.
func genPhones(rng *rand.Rand) []string {
	ddds := []string{"11", "21", "31", "35", "41", "51", "61", "63", "71", "82", "85", "91", "99"}
	var in []string
	for range 400 {
		ddd := ddds[rng.IntN(len(ddds))]
		mob := "9" + randDigits(rng, 8)
		land := string(rune('2'+rng.IntN(4))) + randDigits(rng, 7)
		for _, sub := range []string{mob, land} {
			h := len(sub) - 4
			in = append(in,
				"+55 ("+ddd+") "+sub[:h]+"-"+sub[h:],
				"+55"+ddd+sub,
				"55"+ddd+sub,
				"("+ddd+") "+sub[:h]+"-"+sub[h:],
				ddd+sub,
				"0"+ddd+sub,
				"0055 "+ddd+" "+sub[:h]+"-"+sub[h:],
				"0 21 "+ddd+" "+sub,
				sub,
			)
		}
		in = append(in,
			"+1 415 "+randDigits(rng, 3)+" "+randDigits(rng, 4),
			"+351 9"+randDigits(rng, 8),
			"+54 9 11 "+randDigits(rng, 8),
			"+44 7"+randDigits(rng, 9),
			"+49 15"+randDigits(rng, 9),
			"+"+randDigits(rng, 1+rng.IntN(14)),
			randDigits(rng, 1+rng.IntN(15)),
		)
	}
	in = append(in, "+55 (63) 3475-8930", "+1 415 674 7752", "0055 35 98262-7235", "+55 (11) 99999-9999", "", "+", "abc")
	return in
}

var muts = []rune(".@-_ +<>()[]\"")

func genEmails(rng *rand.Rand) []string {
	locals := []string{"maria", "Maria.Silva", "joao+cobranca", "a_b", "x", "o'neil", "joão", "ZÉ", "user-1", "a.b.c"}
	domains := []string{"exemplo.com.br", "Example.COM", "x.io", "correio.gov.br", "müller.de", "xn--mller-kva.de", "mail.example.org"}
	bad := []string{"a..b@x.com", ".a@x.com", "a.@x.com", "a@-x.com", "a@x-.com", "<a@x.com>", "Maria <a@x.com>", "mailto:a@x.com",
		"a(c)@x.com", "a@[192.0.2.1]", "a@192.0.2.1", "a@b.c", "a@x..com", "a@.x.com", "a@x.com.", "a@x", "@x.com", "a@", "a@@x.com",
		"a b@x.com", `"a b"@x.com`, `"a"@x.com`, "a@x_y.com", "a@x.c0m", "a@x.123", "a\u200b@x.com", "a@x.com\u200e"}
	var in []string
	for range 400 {
		l := locals[rng.IntN(len(locals))]
		d := domains[rng.IntN(len(domains))]
		in = append(in, l+"@"+d, " "+l+"@"+d+" ", strings.ToUpper(l)+"@"+d)
		b := bad[rng.IntN(len(bad))]
		in = append(in, b, strings.ReplaceAll(b, "x.com", d))
		// A random mutation of a good address.
		s := []rune(l + "@" + d)
		s[rng.IntN(len(s))] = muts[rng.IntN(len(muts))]
		in = append(in, string(s))
	}
	return append(in, bad...)
}

func genEVPs(rng *rand.Rand) []string {
	var in []string
	for range 300 {
		h := fmt.Sprintf("%016x%016x", rng.Uint64(), rng.Uint64())
		dashed := h[:8] + "-" + h[8:12] + "-" + h[12:16] + "-" + h[16:20] + "-" + h[20:]
		in = append(in, dashed, strings.ToUpper(dashed), h, strings.ToUpper(h), dashed[:35], dashed+"0")
	}
	return in
}

// genV1 draws strings from characters that exercise Python's string
// semantics: its white space, case mappings with context, letters and
// numbers of many scripts.
func genV1(rng *rand.Rand) []string {
	pool := []rune("aAzZ09 -./@_\t\n\x1c\x1d\x1e\x1f\u0085\u00a0\u2028\u3000\ufeffΣσςΟΔΑΒİIıiÅÉéĲǅẞßŉΐⅫⅻ①²٣߀ǲſKÅ\u0301\u0307\u200b\u200d'’:·ΆΈΉ\u0345ͅ")
	var in []string
	for range 6000 {
		n := 1 + rng.IntN(8)
		b := make([]rune, n)
		for i := range b {
			b[i] = pool[rng.IntN(len(pool))]
		}
		in = append(in, string(b))
	}
	in = append(in, "ΟΔΟΣ", "ΟΔΟΣ ΑΒ", "İstanbul", "\x1flembrete\x1c", "123E4567E89B12D3A456426614174000",
		"123E4567-E89B-12D3-A456-426614174000", "ABC123", "Σ", "ΑΣ", "Α.Σ", "ΑΣ'Α", "Ⅻ-2026")
	return in
}

// every character of the planes in use, alone and after a letter: Python's
// case and isalnum tables against derive's.
func genCodePoints() []string {
	var in []string
	for r := rune(0x20); r < 0x32000; r++ {
		if (r >= 0xd800 && r < 0xe000) || (r >= 0x3400 && r < 0x4db0) || (r >= 0x4e00 && r < 0xa000) ||
			(r >= 0xac00 && r < 0xd7a4) || (r >= 0x20000 && r < 0x2fa20 && r%64 != 0) {
			continue // blocks of letters without case, sampled
		}
		if !utf8.ValidRune(r) {
			continue
		}
		in = append(in, "A"+string(r))
	}
	return in
}

func genMoney(rng *rand.Rand) []string {
	var in []string
	for range 1500 {
		whole := randDigits(rng, 1+rng.IntN(8))
		frac := randDigits(rng, rng.IntN(5))
		s := whole
		if frac != "" || rng.IntN(3) == 0 {
			s += "." + frac
		}
		if rng.IntN(5) == 0 {
			s += fmt.Sprintf("e%d", rng.IntN(7)-3)
		}
		if rng.IntN(6) == 0 {
			s = "-" + s
		}
		in = append(in, s, " "+s+"\x1f")
	}
	return in
}

// ---- the test ----

func TestDifferential(t *testing.T) {
	node, err := exec.LookPath("node")
	if err != nil {
		t.Fatalf("node is required (apt-get install nodejs npm; then scripts/difftest-deps.sh): %v", err)
	}
	if _, err := os.Stat(filepath.Join("testdata", "node_modules", "libphonenumber-js")); err != nil {
		t.Fatalf("testdata/node_modules is missing: run scripts/difftest-deps.sh: %v", err)
	}
	if _, err := os.Stat(python); err != nil {
		t.Fatalf("%s is required (with python3-phonenumbers): %v", python, err)
	}
	rng := rand.New(rand.NewPCG(17, 2026))

	type req struct {
		rule   string
		us     ours
		input  string
		js, py map[string]any
		jsReq  map[string]any
		pyReq  map[string]any
	}
	var reqs []*req
	addJS := func(rule string, us ours, in string, js, py map[string]any) {
		reqs = append(reqs, &req{rule: rule, us: us, input: in, jsReq: js, pyReq: py})
	}
	for _, s := range genTaxIDs(rng) {
		addJS("taxid v3", derived(derive.RuleTaxID, 3, s), s, map[string]any{"k": "taxid", "value": s}, nil)
	}
	pixInputs := append(append(append(genTaxIDs(rng), genPhones(rng)...), genEmails(rng)...), genEVPs(rng)...)
	for _, s := range pixInputs {
		us := derived(derive.RulePixKey, 3, s)
		addJS("pix_key v3", us, s, map[string]any{"k": "pix", "value": s}, nil)
		addJS("pix_key v3 per-type", us, s, map[string]any{"k": "taxid", "value": s}, nil)
		addJS("pix_key v3 phone", us, s, map[string]any{"k": "phone", "value": s}, nil)
		addJS("pix_key v3 email", us, s, map[string]any{"k": "email", "value": strings.TrimSpace(s)}, nil)
	}
	for _, s := range genPhones(rng) {
		addJS("phone v3", derived(derive.RulePhone, 3, s), s, map[string]any{"k": "phone", "value": s}, map[string]any{"k": "phone", "value": s})
	}
	for _, s := range genEmails(rng) {
		// derive trims white space as part of the rule; the libraries
		// judge the address itself.
		addJS("email v3", derived(derive.RuleEmail, 3, s), s, map[string]any{"k": "email", "value": strings.TrimSpace(s)}, nil)
	}
	v1in := append(genV1(rng), genEVPs(rng)...)
	for _, rule := range []derive.Rule{derive.RuleText, derive.RuleRef, derive.RuleTemplate, derive.RuleEmail, derive.RulePixKey} {
		for _, s := range v1in {
			addJS("v1 "+string(rule), derived(rule, 1, s), s,
				map[string]any{"k": "v1", "rule": string(rule), "value": s}, map[string]any{"k": "v1", "rule": string(rule), "value": s})
		}
	}
	for _, s := range genCodePoints() {
		for _, rule := range []derive.Rule{derive.RuleTemplate, derive.RulePixKey} {
			addJS("v1 "+string(rule)+" code points", derived(rule, 1, s), s,
				map[string]any{"k": "v1", "rule": string(rule), "value": s}, map[string]any{"k": "v1", "rule": string(rule), "value": s})
		}
	}
	for _, s := range genMoney(rng) {
		addJS("v1 money", derived(derive.RuleMoney, 1, s), s, nil, map[string]any{"k": "v1", "rule": "money", "value": s})
	}

	var jsReqs, pyReqs []map[string]any
	for _, r := range reqs {
		if r.jsReq != nil {
			jsReqs = append(jsReqs, r.jsReq)
		}
		if r.pyReq != nil {
			pyReqs = append(pyReqs, r.pyReq)
		}
	}
	jsCmd := exec.Command(node, "jsref.cjs")
	jsCmd.Dir = "testdata"
	pyCmd := exec.Command(python, "pyref.py")
	pyCmd.Dir = "testdata"
	var jsOut, pyOut []map[string]any
	done := make(chan struct{})
	go func() { defer close(done); pyOut = batch(t, "python", pyCmd, pyReqs) }()
	jsOut = batch(t, "node", jsCmd, jsReqs)
	<-done
	if t.Failed() {
		return
	}
	ji, pi := 0, 0
	for _, r := range reqs {
		if r.jsReq != nil {
			r.js = jsOut[ji]
			ji++
		}
		if r.pyReq != nil {
			r.py = pyOut[pi]
			pi++
		}
	}
	rep := &reporter{t: t, counts: map[string]*tally{}}
	for _, r := range reqs {
		compare(rep, r.rule, r.input, r.us, r.js, r.py)
	}
	rep.finish()
}

func str(m map[string]any, k string) string { s, _ := m[k].(string); return s }
func boolean(m map[string]any, k string) bool {
	b, _ := m[k].(bool)
	return b
}

// brMobile: libphonenumber's verdict that this is a Pix phone key.
func brMobile(m map[string]any) bool {
	return boolean(m, "valid") && str(m, "region") == "BR" && strings.EqualFold(str(m, "type"), "mobile")
}

func compare(rep *reporter, rule, in string, us ours, js, py map[string]any) {
	add := func(impl string, them map[string]any, agree bool) {
		rep.add(&check{rule: strings.Fields(rule)[0], impl: impl, in: in, us: us, them: them, agree: agree})
	}
	switch rule {
	case "taxid v3":
		add("cpf-cnpj-validator", js, us.ok == boolean(js, "ccv") && (!us.ok || us.value == str(js, "ccvValue")))
		add("brazilian-utils", js, us.ok == boolean(js, "bu"))
	case "pix_key v3":
		bt := str(js, "type")
		add("brazilian-utils", js, us.ok == (bt != "") && (!us.ok || (us.typ == bt && us.value == str(js, "value"))))
	case "pix_key v3 per-type", "pix_key v3 phone", "pix_key v3 email":
		// Collected per input in pixTypes, compared once all three are in.
		pixTypes(rep, rule, in, us, js)
	case "phone v3":
		jsOK := boolean(js, "valid") && str(js, "error") == ""
		pyOK := boolean(py, "valid") && str(py, "error") == ""
		jsAgree := us.ok == jsOK && (!us.ok || us.value == str(js, "value"))
		pyAgree := us.ok == pyOK && (!us.ok || us.value == str(py, "value"))
		js["otherAgrees"], py["otherAgrees"] = pyAgree, jsAgree
		add("libphonenumber-js", js, jsAgree)
		add("python-phonenumbers", py, pyAgree)
	case "email v3":
		add("validator", js, us.ok == boolean(js, "validator"))
		add("brazilian-utils", js, us.ok == boolean(js, "bu"))
	default: // version 1
		agree := func(m map[string]any) bool {
			if str(m, "error") != "" {
				return !us.ok
			}
			return us.ok && us.value == str(m, "value")
		}
		r := "v1 " + strings.Fields(rule)[1]
		if py != nil {
			rep.add(&check{rule: r, impl: "python", in: in, us: us, them: py, agree: agree(py)})
		}
		if js != nil {
			rep.add(&check{rule: r, impl: "node", in: in, us: us, them: js, agree: agree(js)})
		}
	}
}

// pending holds the per-type library answers of one pix_key input until
// all three have arrived.
var pending = map[string]map[string]any{}

// pixTypes builds the second pix_key implementation out of the per-type
// libraries: the types whose library accepts the value. One type: derive
// must give it (and, for documents and phones, the library's form); none:
// derive must refuse; a CPF that is also a Brazilian mobile: derive must
// refuse as ambiguous.
func pixTypes(rep *reporter, rule, in string, us ours, js map[string]any) {
	p := pending[in]
	if p == nil {
		p = map[string]any{}
		pending[in] = p
	}
	for k, v := range js {
		p[strings.Fields(rule)[len(strings.Fields(rule))-1]+"."+k] = v
	}
	if len(p) < 3 || p["email.validator"] == nil || p["per-type.ccv"] == nil || (p["phone.valid"] == nil && p["phone.error"] == nil) {
		return
	}
	delete(pending, in)
	var types []string
	var want string
	if b, _ := p["per-type.ccv"].(bool); b {
		v, _ := p["per-type.ccvValue"].(string)
		if len(v) == 11 {
			types = append(types, "cpf")
		} else {
			types = append(types, "cnpj")
		}
		want = v
	}
	phone := map[string]any{"valid": p["phone.valid"], "region": p["phone.region"], "type": p["phone.type"]}
	if brMobile(phone) {
		types = append(types, "phone")
		if want == "" {
			want, _ = p["phone.value"].(string)
		}
	}
	if b, _ := p["email.validator"].(bool); b {
		types = append(types, "email")
	}
	if b, _ := p["email.uuid"].(bool); b {
		types = append(types, "evp")
		want = strings.ToLower(strings.TrimSpace(in))
	}
	agree := false
	switch len(types) {
	case 0:
		agree = !us.ok
	case 1:
		agree = us.ok && us.typ == types[0] && (types[0] == "email" || us.value == want)
	default:
		agree = errors.Is(us.err, derive.ErrAmbiguous)
	}
	p["types"] = types
	rep.add(&check{rule: "pix_key", impl: "per-type libraries", in: in, us: us, them: map[string]any{"types": types, "type": firstOr(types), "value": want}, agree: agree})
}

func firstOr(s []string) string {
	if len(s) == 0 {
		return ""
	}
	return s[0]
}
