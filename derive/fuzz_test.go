package derive

import (
	"encoding/json"
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
			checkIdempotent(t, "text", normalizeText, s)
			checkIdempotent(t, "ref", func(x any) (string, error) { return normalizeRef(x, v) }, s)
			checkIdempotent(t, "template", normalizeLower, s)
			checkIdempotent(t, "email", func(x any) (string, error) { return normalizeEmail(x, v) }, s)
			checkIdempotent(t, "taxid", func(x any) (string, error) { return normalizeTaxID(x, v) }, s)
		}
		// Surrounding white space never matters.
		a, errA := normalizeText(s)
		b, errB := normalizeText(" \t" + s + "\n ")
		if (errA == nil) != (errB == nil) || a != b {
			t.Fatalf("padding changed text(%q): %q/%v vs %q/%v", s, a, errA, b, errB)
		}
	})
}

func FuzzPixKey(f *testing.F) {
	for _, s := range []string{"111.222.333-44", "529.982.247-25", "11.222.333/0001-81", "+55 (11) 99999-9999",
		"5511999999999", "(11) 99999-9999", "Maria@Exemplo.COM", "123E4567-E89B-12D3-A456-426614174000", "", "@", "+", "()"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		checkIdempotent(t, "pixkey v1", func(x any) (string, error) { k, _, err := normalizePixKey(x, "", 1); return k, err }, s)
		checkIdempotent(t, "phone", func(x any) (string, error) { return normalizePhone(x.(string)) }, s)
		key, typ, err := normalizePixKey(s, "", 2)
		if err != nil {
			return
		}
		// The normalized key, with the type it was given, reads back as itself.
		again, typ2, err := normalizePixKey(key, typ, 2)
		if err != nil || again != key || typ2 != typ {
			t.Fatalf("pixkey v2 %q -> %q (%s) -> %q (%s), %v", s, key, typ, again, typ2, err)
		}
		// And, with no type stated, is inferred as the same type.
		inferred, typ3, err := normalizePixKey(key, "", 2)
		if err == nil && (inferred != key || typ3 != typ) {
			t.Fatalf("pixkey v2 %q -> %q (%s), re-inferred as %q (%s)", s, key, typ, inferred, typ3)
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
			out, err := normalizeMoney(s, v, true)
			if err != nil {
				continue
			}
			again, err := normalizeMoney(reais(out), v, true)
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
				got, err := normalizeMoney(sp, v, false)
				if err != nil || got != want {
					t.Fatalf("v%d money(%#v) = %q, %v; want %s", v, sp, got, err, want)
				}
			}
		}
	})
}

// FuzzDerive drives the whole derivation: whatever it accepts, feeding the
// normalized payload back in gives the same key.
func FuzzDerive(f *testing.F) {
	f.Add("tenant-a", "01HXYZABCD", "180.00", "111.222.333-44", "NF-2026-000123", uint8(1))
	f.Add("tenant-ç", "Zé", "R$ 1.800,00", "529.982.247-25", " Fatura Ação/1 ", uint8(2))
	f.Add("t", "C-9", "25", "+55 (11) 99999-9999", "NF-8", uint8(2))
	d, err := New(Config{Secret: []byte("segredo-de-teste-nao-usar-em-producao")})
	if err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, tenant, cliente, valor, chave, ref string, v uint8) {
		version := int(v%2) + 1
		fields := map[string]any{"cliente_id": cliente, "valor": valor, "chave_pix_destino": chave, "referencia_intencao": ref}
		r, err := d.Derive(tenant, "pix.cobranca", fields, &Opts{Version: version})
		if err != nil {
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
