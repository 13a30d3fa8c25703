package derive

import (
	"encoding/json"
	"errors"
	"maps"
	"slices"
	"strconv"
	"strings"
	"testing"
	"unicode/utf8"
)

// The fuzz targets check three properties of every rule: no panic,
// normalization is a fixed point (normalizing the output again changes
// nothing), and equivalent spellings give equal results. Seeds live in
// testdata/fuzz/<FuzzName>/ as well as in the f.Add calls.

func checkIdempotent(t *testing.T, name string, norm func(any) (string, error), in string) {
	out, err := norm(in)
	if err != nil {
		return
	}
	if !utf8.ValidString(out) {
		t.Fatalf("%s(%q) produced invalid UTF-8 %q", name, in, out)
	}
	again, err := norm(out)
	if err != nil {
		t.Fatalf("%s(%q) = %q, which it then rejects: %v", name, in, out, err)
	}
	if again != out {
		t.Fatalf("%s not idempotent: %q -> %q -> %q", name, in, out, again)
	}
}

func FuzzTextRules(f *testing.F) {
	for _, s := range []string{"", " NF-1 ", "Zé", "Ze\u0301", "\u0301abc", " \u00a0x\u2028", "İstanbul", "ǅ", "ﬃ", "\xff", "A\u030a"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		for v := MinVersion; v <= MaxVersion; v++ {
			v := v
			if v > 1 {
				// Version 1 is Python's one pass (NFC, strip, lower), which
				// is not a fixed point for every input; later versions are.
				checkIdempotent(t, "text", func(x any) (string, error) { return normalizeText(x, v) }, s)
				checkIdempotent(t, "template", func(x any) (string, error) { return normalizeLower(x, v) }, s)
				checkIdempotent(t, "email", func(x any) (string, error) { return normalizeEmail(x, v, nil) }, s)
			}
			checkIdempotent(t, "ref", func(x any) (string, error) { return normalizeRef(x, v) }, s)
			checkIdempotent(t, "taxid", func(x any) (string, error) { k, _, err := normalizeTaxID(x, v); return k, err }, s)
			// Surrounding white space never matters.
			a, errA := normalizeText(s, v)
			b, errB := normalizeText(" \t"+s+"\n ", v)
			if (errA == nil) != (errB == nil) || a != b {
				t.Fatalf("v%d padding changed text(%q): %q/%v vs %q/%v", v, s, a, errA, b, errB)
			}
		}
	})
}

func FuzzPixKey(f *testing.F) {
	for _, s := range []string{"111.222.333-44", "529.982.247-25", "11.222.333/0001-81", "+55 (11) 99999-9999",
		"5511999999999", "(11) 99999-9999", "Maria@Exemplo.COM", "123E4567-E89B-12D3-A456-426614174000", "", "@", "+", "()"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		checkIdempotent(t, "phone", func(x any) (string, error) { return normalizePhone(x.(string)) }, s)
		for v := 2; v <= MaxVersion; v++ {
			key, typ, err := normalizePixKey(s, "", v, nil)
			if err != nil {
				continue
			}
			// The normalized key, with the type it was given, reads back as itself.
			again, typ2, err := normalizePixKey(key, typ, v, nil)
			if err != nil || again != key || typ2 != typ {
				t.Fatalf("pixkey v%d %q -> %q (%s) -> %q (%s), %v", v, s, key, typ, again, typ2, err)
			}
			// And, with no type stated, is inferred as the same type.
			inferred, typ3, err := normalizePixKey(key, "", v, nil)
			if err == nil && (inferred != key || typ3 != typ) {
				t.Fatalf("pixkey v%d %q -> %q (%s), re-inferred as %q (%s)", v, s, key, typ, inferred, typ3)
			}
		}
		// Version 3 never reads a value with CPF/CNPJ punctuation as a phone.
		if key, typ, err := normalizePixKey(s, "", 3, nil); err == nil && typ == PixPhone && strings.ContainsAny(s, "./") {
			t.Fatalf("pixkey v3 %q has CPF/CNPJ punctuation and was typed as the phone %q", s, key)
		}
	})
}

// reais formats cents back into a plain decimal amount.
func reais(cents string) string {
	neg := strings.HasPrefix(cents, "-")
	cents = strings.TrimPrefix(cents, "-")
	for len(cents) < 3 {
		cents = "0" + cents
	}
	s := cents[:len(cents)-2] + "." + cents[len(cents)-2:]
	if neg {
		s = "-" + s
	}
	return s
}

// brl spells cents the Brazilian way, with thousands dots: R$ 1.234,56.
func brl(n uint64) string {
	whole := strconv.FormatUint(n/100, 10)
	var groups []string
	for len(whole) > 3 {
		groups = append([]string{whole[len(whole)-3:]}, groups...)
		whole = whole[:len(whole)-3]
	}
	groups = append([]string{whole}, groups...)
	return "R$ " + strings.Join(groups, ".") + "," + strconv.FormatUint(n%100/10, 10) + strconv.FormatUint(n%10, 10)
}

func FuzzMoney(f *testing.F) {
	for _, s := range []string{"180.00", "180,00", "R$ 1.800,00", "1,800.00", "1.800", "0.001", "1e3", "-5", ".5", "NaN", "", "1.800.000,5"} {
		f.Add(s, uint64(18000))
	}
	f.Fuzz(func(t *testing.T, s string, n uint64) {
		for v := MinVersion; v <= MaxVersion; v++ {
			out, err := normalizeMoney(s, v, true, true)
			if err != nil {
				continue
			}
			again, err := normalizeMoney(reais(out), v, true, true)
			if err != nil || again != out {
				t.Fatalf("v%d money(%q) = %s, but money(%q) = %s, %v", v, s, out, reais(out), again, err)
			}
			if _, err := strconv.ParseInt(out, 10, 64); err != nil {
				t.Fatalf("money(%q) = %q is not an integer", s, out)
			}
		}
		// Every spelling of one amount gives the same cents.
		n %= 1e15
		want := strconv.FormatUint(n, 10)
		spellings := []any{
			brl(n),
			strings.ReplaceAll(strings.ReplaceAll(strings.TrimPrefix(brl(n), "R$ "), ".", ""), ",", "."),
			json.Number(reais(want)),
		}
		if n%100 == 0 {
			spellings = append(spellings, int64(n/100), json.Number(strconv.FormatUint(n/100, 10)))
		}
		for _, sp := range spellings {
			for v := MinVersion; v <= MaxVersion; v++ {
				got, err := normalizeMoney(sp, v, false, true)
				if err != nil || got != want {
					t.Fatalf("v%d money(%#v) = %q, %v; want %s", v, sp, got, err, want)
				}
			}
		}
	})
}

// FuzzDerive drives the whole derivation: whatever it accepts, feeding the
// normalized payload back in gives the same key; whatever it refuses, the
// error names exactly the fields that are refused alone (each put among
// good values), in canonical order.
func FuzzDerive(f *testing.F) {
	f.Add("tenant-a", "01HXYZABCD", "180.00", "111.222.333-44", "NF-2026-000123", uint8(1))
	f.Add("tenant-ç", "Zé", "R$ 1.800,00", "529.982.247-25", " Fatura Ação/1 ", uint8(2))
	f.Add("t", "C-9", "25", "+55 (11) 99999-9999", "NF-8", uint8(2))
	d, err := New(Config{Secret: []byte("segredo-de-teste-nao-usar-em-producao")})
	if err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, tenant, cliente, valor, chave, ref string, v uint8) {
		version := int(v%MaxVersion) + 1
		fields := map[string]any{"cliente_id": cliente, "valor": valor, "chave_pix_destino": chave, "referencia_intencao": ref}
		r, err := d.Derive(tenant, "pix.cobranca", fields, &Opts{Version: version})
		if err != nil {
			checkFieldErrors(t, d, tenant, fields, version, err)
			return
		}
		if len(r.Key) != 64 {
			t.Fatalf("key %q", r.Key)
		}
		var back map[string]string
		if err := json.Unmarshal(r.Canonical, &struct {
			P *map[string]string `json:"p"`
		}{&back}); err != nil {
			t.Fatalf("canonical %q is not JSON: %v", r.Canonical, err)
		}
		again := map[string]any{}
		for k, val := range back {
			again[k] = val
		}
		again["valor"] = reais(back["valor"])
		r2, err := d.Derive(tenant, "pix.cobranca", again, &Opts{Version: version})
		if err != nil {
			t.Fatalf("normalized payload %s rejected: %v", r.Canonical, err)
		}
		if r2.Key != r.Key {
			t.Fatalf("re-deriving the normalized payload changed the key:\n%s\n%s", r.Canonical, r2.Canonical)
		}
	})
}

// checkFieldErrors checks that err, fields' refusal, names every field
// that good values around it do not save, and no other, in canonical order.
func checkFieldErrors(t *testing.T, d *Deriver, tenant string, fields map[string]any, version int, err error) {
	t.Helper()
	good := map[string]any{"cliente_id": "C-1", "valor": "1", "chave_pix_destino": "pagamentos@example.com", "referencia_intencao": "NF-1"}
	if _, gerr := d.Derive(tenant, "pix.cobranca", good, &Opts{Version: version}); gerr != nil {
		if !errors.Is(gerr, ErrBadTenant) || !errors.Is(err, ErrBadTenant) {
			t.Fatalf("good values refused (%v), the fields' error %v", gerr, err)
		}
		return
	}
	var want []string
	for _, name := range []string{"chave_pix_destino", "cliente_id", "referencia_intencao", "valor"} {
		one := maps.Clone(good)
		one[name] = fields[name]
		if _, oerr := d.Derive(tenant, "pix.cobranca", one, &Opts{Version: version}); oerr != nil {
			want = append(want, name)
		}
	}
	var got []string
	for _, fe := range FieldErrorsOf(err) {
		got = append(got, fe.Field)
	}
	if !slices.Equal(got, want) {
		t.Fatalf("version %d: the error %v names %v, alone these are refused: %v", version, err, got, want)
	}
}

// FuzzTaxIDV3 checks the version-3 CPF/CNPJ rule: no panic, a fixed point,
// case and punctuation never matter, and a changed check digit is refused.
func FuzzTaxIDV3(f *testing.F) {
	for _, s := range []string{"12.ABC.345/01DE-35", "12ABC34501DE35", "12abc34501de35", "12ABC34501DE36", "529.982.247-25",
		"11.222.333/0001-81", "00000000000000", "829.631.334-09", "", "12.ABC.345/01DE-3", "ÁBC", "12ABC34501DE3\u200b5"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		out, typ, err := normalizeTaxID(s, 3)
		if err != nil {
			return
		}
		if again, typ2, err := normalizeTaxID(out, 3); err != nil || again != out || typ2 != typ {
			t.Fatalf("taxid v3 %q -> %q (%s) -> %q (%s), %v", s, out, typ, again, typ2, err)
		}
		if lower, _, err := normalizeTaxID(strings.ToLower(out), 3); err != nil || lower != out {
			t.Fatalf("taxid v3: lower case of %q gives %q, %v", out, lower, err)
		}
		if (typ == PixCPF) != (len(out) == 11) || (typ == PixCNPJ) != (len(out) == 14) {
			t.Fatalf("taxid v3 %q: type %s for %q", s, typ, out)
		}
		last := out[len(out)-1]
		bumped := out[:len(out)-1] + string(rune('0'+(last-'0'+1)%10))
		if _, _, err := normalizeTaxID(bumped, 3); err == nil {
			t.Fatalf("taxid v3: %q (check digit changed from %q) accepted", bumped, out)
		}
	})
}

// FuzzPhoneV3: no panic, E.164 out, a fixed point, and a leading 00 never
// accepted.
func FuzzPhoneV3(f *testing.F) {
	for _, s := range []string{"+55 (11) 99999-9999", "0055 35 98262-7235", "5511999999999", "(63) 3475-8930", "+1 415 674 7752",
		"0 21 11 99999-9999", "011 99999-9999", "", "+", "00", "+55 11 9\u200b9999-9999"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		out, err := normalizePhoneV3(s)
		if err != nil {
			return
		}
		if !strings.HasPrefix(out, "+") || strings.Trim(out[1:], "0123456789") != "" {
			t.Fatalf("phone v3 %q -> %q is not E.164", s, out)
		}
		if again, err := normalizePhoneV3(out); err != nil || again != out {
			t.Fatalf("phone v3 %q -> %q -> %q, %v", s, out, again, err)
		}
		if d := strings.Map(func(r rune) rune {
			if r >= '0' && r <= '9' {
				return r
			}
			return -1
		}, s); strings.HasPrefix(d, "00") && !strings.HasPrefix(strings.TrimSpace(s), "+") {
			t.Fatalf("phone v3 %q with a leading 00 accepted as %q", s, out)
		}
	})
}

// FuzzEmailV3: no panic, a fixed point, and none of the refused shapes
// accepted.
func FuzzEmailV3(f *testing.F) {
	for _, s := range []string{"Maria.Silva@Exemplo.COM.br", "a..b@x.com", ".a@x.com", "a@-x.com", "<a@x.com>", "mailto:a@x.com",
		"a(c)@x.com", "a@[192.0.2.1]", "joa\u0303o@exemplo.com.br", "a@b.c", "a@x.com.", "a\u200b@x.com", ""} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		out, err := normalizeEmail(s, 3, nil)
		if err != nil {
			return
		}
		if again, err := normalizeEmail(out, 3, nil); err != nil || again != out {
			t.Fatalf("email v3 %q -> %q -> %q, %v", s, out, again, err)
		}
		if strings.Contains(out, "..") || strings.ContainsAny(out, "<>()[]\" ") || strings.HasPrefix(out, ".") ||
			strings.Contains(out, ".@") || strings.Contains(out, "@.") || strings.HasSuffix(out, ".") || strings.Count(out, "@") != 1 {
			t.Fatalf("email v3 %q accepted as %q", s, out)
		}
	})
}
