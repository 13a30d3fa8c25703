package derive_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/retrysafe/retrysafe/derive"
)

var chargeV3 = derive.Schema{Action: "charge.v3", Version: 3, Fields: []derive.Field{
	{Name: "customer_id", Rule: derive.RuleRef, MaxLen: 256},
	{Name: "amount", Rule: derive.RuleMoney},
	{Name: "pix_key", Rule: derive.RulePixKey, TypeField: "pix_key_type"},
	{Name: "pix_key_type", Rule: derive.RulePixKeyType, Optional: true},
	{Name: "taxid", Rule: derive.RuleTaxID, Optional: true},
	{Name: "intent_ref", Rule: derive.RuleRef, MaxLen: 130},
}}

func charge(key any) map[string]any {
	return map[string]any{"customer_id": "C-1", "amount": "180,00", "pix_key": key, "intent_ref": "NF-1"}
}

// The three spellings of one alphanumeric CNPJ give one key, as a Pix key
// and as a taxid; a changed check digit is refused.
func TestAlphanumericCNPJOneKey(t *testing.T) {
	t.Parallel()
	d := newDeriver(t, chargeV3)
	var keys []string
	for _, s := range []string{"12.ABC.345/01DE-35", "12ABC34501DE35", "12abc34501de35"} {
		f := charge(s)
		f["taxid"] = s
		r, err := d.Derive("t", "charge.v3", f, nil)
		if err != nil {
			t.Fatalf("%s: %v", s, err)
		}
		if k, _ := r.Payload.Get("pix_key"); k != "12ABC34501DE35" {
			t.Fatalf("%s: pix_key %s", s, k)
		}
		if typ, _ := r.Payload.Get("pix_key_type"); typ != "cnpj" {
			t.Fatalf("%s: type %s", s, typ)
		}
		keys = append(keys, r.Key)
	}
	if keys[0] != keys[1] || keys[1] != keys[2] {
		t.Fatalf("keys differ: %v", keys)
	}
	t.Logf("one key for the three spellings: %s", keys[0])
	_, err := d.Derive("t", "charge.v3", charge("12ABC34501DE36"), nil)
	var fe *derive.FieldError
	if !errors.As(err, &fe) || fe.Field != "pix_key" || !strings.Contains(fe.Reason, "check digits") {
		t.Fatalf("12ABC34501DE36: %v", err)
	}
}

func TestPixKeyV3(t *testing.T) {
	t.Parallel()
	cases := []struct {
		in   any
		want string // "" refused; "!amb" ambiguous
		typ  string
	}{
		{"829.631.334-09", "", ""}, // CPF punctuation, wrong check digits: never a phone
		{"829.631.334.09", "", ""},
		{"+55 (63) 3475-8930", "", ""}, // landline
		{"(63) 3475-8930", "", ""},
		{"6334758930", "", ""},
		{"+1 415 674 7752", "", ""},        // not Brazilian
		{"0055 35 98262-7235", "!amb", ""}, // never re-homed to Bulgaria
		{"+55 (11) 99999-9999", "+5511999999999", "phone"},
		{"5511999999999", "+5511999999999", "phone"},
		{cpfValid, cpfDigits, "cpf"},
		{cnpjValid, cnpjDigits, "cnpj"},
		{"12.ABC.345/01DE-35", "12ABC34501DE35", "cnpj"},
		{evpUpper, evpCanonical, "evp"},
		{" Maria.Silva@Exemplo.COM.br ", "maria.silva@exemplo.com.br", "email"},
		{"a\u200b@x.com", "", ""},
		{"<a@x.com>", "", ""},
		{"mailto:a@x.com", "", ""},
		{52998224725, "", ""}, // a JSON number: leading zeros lost
	}
	d := newDeriver(t, chargeV3)
	for _, c := range cases {
		r, err := d.Derive("t", "charge.v3", charge(c.in), nil)
		switch c.want {
		case "!amb":
			if !errors.Is(err, derive.ErrAmbiguous) {
				t.Errorf("%v: want ambiguous, got %v", c.in, err)
			}
		case "":
			if err == nil {
				k, _ := r.Payload.Get("pix_key")
				t.Errorf("%v: accepted as %s", c.in, k)
			}
		default:
			if err != nil {
				t.Errorf("%v: %v", c.in, err)
				continue
			}
			k, _ := r.Payload.Get("pix_key")
			typ, _ := r.Payload.Get("pix_key_type")
			if k != c.want || typ != c.typ {
				t.Errorf("%v = %s (%s), want %s (%s)", c.in, k, typ, c.want, c.typ)
			}
		}
		if err != nil && strings.Contains(err.Error(), "829.631") {
			t.Errorf("error echoes the value: %v", err)
		}
	}
	// Stated as a phone, CPF punctuation is still refused.
	f := charge("829.631.334-09")
	f["pix_key_type"] = "phone"
	if _, err := d.Derive("t", "charge.v3", f, nil); err == nil {
		t.Error("CPF punctuation accepted as a stated phone")
	}
}

func TestPhoneV3(t *testing.T) {
	t.Parallel()
	for in, want := range map[string]string{
		"0055 35 98262-7235":      "!amb",
		"+55 35 98262-7235":       "+5535982627235",
		"+1 415 674 7752":         "+14156747752",
		"(63) 3475-8930":          "+556334758930",
		"0 21 11 99999-9999":      "+5511999999999",
		"+55 11 9\u200b9999-9999": "",
	} {
		n, err := derive.NormalizeValue(derive.RulePhone, 3, in)
		switch want {
		case "!amb":
			if !errors.Is(err, derive.ErrAmbiguous) {
				t.Errorf("%q: want ambiguous, got %v %v", in, n, err)
			}
		case "":
			if err == nil {
				t.Errorf("%q accepted as %s", in, n.Value)
			}
		default:
			if err != nil || n.Value != want {
				t.Errorf("%q = %s, %v; want %s", in, n.Value, err, want)
			}
		}
	}
}

func TestEmailV3(t *testing.T) {
	t.Parallel()
	for _, bad := range []string{"a..b@x.com", ".a@x.com", "a.@x.com", "a@-x.com", "<a@x.com>", "Maria <a@x.com>", "mailto:a@x.com",
		"a(c)@x.com", "a@[192.0.2.1]", "a@x..com", "a@x", `"a b"@x.com`, "a@x.c"} {
		if n, err := derive.NormalizeValue(derive.RuleEmail, 3, bad); err == nil {
			t.Errorf("%q accepted as %s", bad, n.Value)
		}
	}
	d := newDeriver(t, derive.Schema{Action: "mail", Version: 3, Fields: []derive.Field{{Name: "to", Rule: derive.RuleEmail, AllowAddressLiteral: true}}})
	if _, err := d.Derive("t", "mail", map[string]any{"to": "a@[192.0.2.1]"}, nil); err != nil {
		t.Errorf("address literal refused where the schema allows it: %v", err)
	}
	if n, err := derive.NormalizeValue(derive.RuleEmail, 3, " JOA\u0303O@Exemplo.com.BR "); err != nil || n.Value != "jo\u00e3o@exemplo.com.br" {
		t.Errorf("NFC + lower: %q %v", n.Value, err)
	}
}

// Input hygiene: refused with the field named and the value never echoed.
func TestHygieneV3(t *testing.T) {
	t.Parallel()
	d := newDeriver(t, chargeV3)
	cases := map[string]map[string]any{
		"intent_ref":  {"intent_ref": "REF\u200b"},
		"customer_id": {"customer_id": "C\u202e1"},
		"amount":      {"amount": "0,00"},
	}
	cases["intent_ref "] = map[string]any{"intent_ref": strings.Repeat("R", 131)}
	cases["customer_id "] = map[string]any{"customer_id": strings.Repeat("x", 900<<10)}
	cases["customer_id  "] = map[string]any{"customer_id": "C\x00"}
	cases["customer_id   "] = map[string]any{"customer_id": "C\x01D"}
	cases["customer_id    "] = map[string]any{"customer_id": "C\ufffd"}
	cases["amount "] = map[string]any{"amount": "-0"}
	for name, over := range cases {
		f := charge(cpfValid)
		for k, v := range over {
			f[k] = v
		}
		_, err := d.Derive("t", "charge.v3", f, nil)
		var fe *derive.FieldError
		if !errors.As(err, &fe) || fe.Field != strings.TrimSpace(name) || !errors.Is(err, derive.ErrInvalidField) {
			t.Errorf("%s: %v", name, err)
			continue
		}
		if strings.Contains(err.Error(), "REF") || strings.Contains(err.Error(), "xxxx") {
			t.Errorf("%s: error echoes the value: %v", name, err)
		}
	}
	// NUL is refused in every version (the database cannot store it).
	for v := derive.MinVersion; v <= derive.MaxVersion; v++ {
		if _, err := d.Derive("t", "pix.cobranca", pix("1", "a@b.com\x00"), &derive.Opts{Version: v}); !errors.Is(err, derive.ErrInvalidField) {
			t.Errorf("v%d NUL: %v", v, err)
		}
	}
	zero := newDeriver(t, derive.Schema{Action: "z", Version: 3, Fields: []derive.Field{{Name: "amount", Rule: derive.RuleMoney, AllowZero: true}}})
	if _, err := zero.Derive("t", "z", map[string]any{"amount": "0,00"}, nil); err != nil {
		t.Errorf("zero refused where the schema allows it: %v", err)
	}
}

// Version 1 gives the reference's (Python's) values: str.lower with final
// sigma and İ, str.strip with the C0 separators, and the early-return fix
// of upper-case alphanumeric keys with nothing to strip.
func TestVersion1PythonSemantics(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		rule     derive.Rule
		in, want string
	}{
		{derive.RulePixKey, "123E4567E89B12D3A456426614174000", "123e4567e89b12d3a456426614174000"},
		{derive.RulePixKey, "ABC123", "abc123"},
		{derive.RulePixKey, "Ⅻ-2026", "ⅻ2026"},
		{derive.RuleTemplate, "ΟΔΟΣ", "οδος"},
		{derive.RuleTemplate, "ΟΔΟΣ ΑΒ", "οδος αβ"},
		{derive.RuleTemplate, "İ", "i\u0307"},
		{derive.RuleTemplate, "\x1flembrete\x1c", "lembrete"},
		{derive.RuleText, "\x1flembrete\x1c", "lembrete"},
		{derive.RuleRef, "\u0085NF-1\x1e", "NF-1"},
	} {
		n, err := derive.NormalizeValue(c.rule, 1, c.in)
		if err != nil || n.Value != c.want {
			t.Errorf("%s v1 %q = %q, %v; want %q", c.rule, c.in, n.Value, err, c.want)
		}
	}
}
