package derive_test

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/retrysafe/retrysafe/derive"
	"github.com/retrysafe/retrysafe/internal/testutil"
)

const secret = "segredo-de-teste-nao-usar-em-producao"

func newDeriver(t testing.TB, schemas ...derive.Schema) *derive.Deriver {
	t.Helper()
	cfg := derive.Config{Secret: []byte(secret)}
	if len(schemas) > 0 {
		cfg.Schemas = append(derive.BuiltinSchemas(), schemas...)
	}
	d, err := derive.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return d
}

func pix(valor any, chave any) map[string]any {
	return map[string]any{"cliente_id": "C-1", "valor": valor, "chave_pix_destino": chave, "referencia_intencao": "NF-1"}
}

func TestMoney(t *testing.T) {
	t.Parallel()
	d := newDeriver(t)
	cases := []struct {
		in     any
		v1, v2 string // "" means error; "!amb" an ambiguity error
	}{
		{"180.00", "18000", "18000"},
		{"180,00", "18000", "18000"},
		{"R$ 1.800,00", "180000", "180000"},
		{"R$1.800,00", "180000", "180000"},
		{"1,800.00", "180000", "180000"},
		{"1.800", "180", "!amb"},
		{"1,800", "180", "!amb"},
		{"1.800.000", "180000000", "180000000"},
		{"1.800.000,5", "180000050", "180000050"},
		{"10", "1000", "1000"},
		{"10.5", "1050", "1050"},
		{"10.50", "1050", "1050"},
		{"10.500", "1050", "!amb"},
		{"10.5000", "1050", "1050"},
		{"0.01", "1", "1"},
		{".5", "50", "50"},
		{"5.", "500", "500"},
		{"0", "0", "0"},
		{" 42 ", "4200", "4200"},
		{"\u00a0R$\u00a042,10", "4210", "4210"},
		{"1e2", "10000", "10000"},
		{"1.5E1", "1500", "1500"},
		{json.Number("180"), "18000", "18000"},
		{json.Number("180.0"), "18000", "18000"},
		{json.Number("1.8e2"), "18000", "18000"},
		{json.Number("0.30000000000000004"), "", ""},
		{180.0, "18000", "18000"},
		{floatSum(0.1, 0.2), "", ""}, // float drift never reaches the key
		{0.3, "30", "30"},
		{10587, "1058700", "1058700"},
		{int64(5), "500", "500"},
		{"0.001", "", ""},
		{"0,500", "50", "50"},
		{"1234.567", "", ""},
		{"10.555", "", "!amb"},
		{"10.5551", "", ""},
		{"-10", "", ""},
		{"R$ -10,00", "", ""},
		{"NaN", "", ""},
		{"Infinity", "", ""},
		{"", "", ""},
		{"   ", "", ""},
		{nil, "", ""},
		{true, "", ""},
		{"12a", "", ""},
		{"1,80,0", "", ""},
		{"18.00,00", "", ""},
		{"1.800.00", "", ""},
		{"1,800,000.00", "180000000", "180000000"},
		{"1.800,00.00", "", ""},
		{"--5", "", ""},
		{"99999999999999999999", "", ""},
		{"1e400", "", ""},
		{"1e-400", "", ""},
		{json.Number("1e-3"), "", ""},
	}
	for _, c := range cases {
		for v, want := range map[int]string{1: c.v1, 2: c.v2} {
			r, err := d.Derive("t", "pix.cobranca", pix(c.in, "a@b.com"), &derive.Opts{Version: v})
			switch {
			case want == "!amb":
				if !errors.Is(err, derive.ErrAmbiguous) {
					t.Errorf("v%d %#v: want ambiguity error, got %v", v, c.in, err)
				}
			case want == "":
				if err == nil {
					got, _ := r.Payload.Get("valor")
					t.Errorf("v%d %#v: want error, got %s", v, c.in, got)
				} else if !errors.Is(err, derive.ErrInvalidField) && !errors.Is(err, derive.ErrMissingField) {
					t.Errorf("v%d %#v: error %v is neither invalid nor missing", v, c.in, err)
				}
			default:
				if err != nil {
					t.Errorf("v%d %#v: %v", v, c.in, err)
					continue
				}
				if got, _ := r.Payload.Get("valor"); got != want {
					t.Errorf("v%d %#v = %s, want %s", v, c.in, got, want)
				}
			}
		}
	}
}

// floatSum adds at run time (constant arithmetic would be exact).
func floatSum(a, b float64) float64 { return a + b }

func TestNegativeAllowedBySchema(t *testing.T) {
	t.Parallel()
	d := newDeriver(t, derive.Schema{Action: "refund", Version: 1, Fields: []derive.Field{
		{Name: "amount", Rule: derive.RuleMoney, AllowNegative: true},
	}})
	r, err := d.Derive("t", "refund", map[string]any{"amount": "-R$ 10,50"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if got, _ := r.Payload.Get("amount"); got != "-1050" {
		t.Fatalf("got %s", got)
	}
	r, err = d.Derive("t", "refund", map[string]any{"amount": "-0,00"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if got, _ := r.Payload.Get("amount"); got != "0" {
		t.Fatalf("-0 gave %s", got)
	}
}

// validCPF and friends are real check-digit-valid numbers, generated for tests.
const (
	cpfValid     = "529.982.247-25"
	cpfDigits    = "52998224725"
	cnpjValid    = "11.222.333/0001-81"
	cnpjDigits   = "11222333000181"
	evpUpper     = "123E4567-E89B-12D3-A456-426614174000"
	evpCanonical = "123e4567-e89b-12d3-a456-426614174000"
)

func TestPixKeyV2(t *testing.T) {
	t.Parallel()
	d := newDeriver(t)
	cases := []struct {
		in   string
		want string // "" error, "!amb" ambiguity
	}{
		{cpfValid, cpfDigits},
		{cpfDigits, cpfDigits},
		{cnpjValid, cnpjDigits},
		{cnpjDigits, cnpjDigits},
		{"+55 (11) 99999-9999", "+5511999999999"},
		{"5511999999999", "+5511999999999"},
		{"(11) 99999-9999", "+5511999999999"},
		{"+55 11 99999 9999", "+5511999999999"},
		{" Maria.Silva@Exemplo.COM.br ", "maria.silva@exemplo.com.br"},
		{"joa\u0303o@exemplo.com.br", "jo\u00e3o@exemplo.com.br"}, // NFD in, NFC out
		{evpUpper, evpCanonical},
		{"123e4567e89b12d3a456426614174000", evpCanonical},
		{"111.222.333-44", ""}, // bad CPF check digits
		{"11.222.333/0001-00", ""},
		{"not a key", ""},
		{"maria@", ""},
		{"11999999999", ""}, // neither a valid CPF nor... see TestPixKeyAmbiguous
	}
	for _, c := range cases {
		r, err := d.Derive("t", "pix.cobranca", pix("1", c.in), &derive.Opts{Version: 2})
		if c.want == "" {
			if err == nil {
				got, _ := r.Payload.Get("chave_pix_destino")
				// 11999999999 is a valid mobile; only fail if it is not a phone.
				if c.in == "11999999999" && got == "+5511999999999" {
					continue
				}
				t.Errorf("%q: want error, got %s", c.in, got)
			}
			continue
		}
		if err != nil {
			t.Errorf("%q: %v", c.in, err)
			continue
		}
		if got, _ := r.Payload.Get("chave_pix_destino"); got != c.want {
			t.Errorf("%q = %q, want %q", c.in, got, c.want)
		}
	}
}

// An 11-digit key that is both a valid CPF and a valid Brazilian mobile
// number is refused without a stated type, and accepted with one.
func TestPixKeyAmbiguous(t *testing.T) {
	t.Parallel()
	d := newDeriver(t, derive.Schema{Action: "pix.typed", Version: 2, Fields: []derive.Field{
		{Name: "pix_key", Rule: derive.RulePixKey, TypeField: "pix_key_type"},
		{Name: "pix_key_type", Rule: derive.RulePixKeyType, Optional: true},
	}})
	amb := findAmbiguousCPF(t)
	_, err := d.Derive("t", "pix.typed", map[string]any{"pix_key": amb}, nil)
	if !errors.Is(err, derive.ErrAmbiguous) {
		t.Fatalf("%s without type: want ErrAmbiguous, got %v", amb, err)
	}
	if !strings.Contains(err.Error(), "pix_key_type") {
		t.Errorf("error should ask for the type: %v", err)
	}
	if strings.Contains(err.Error(), amb) {
		t.Errorf("error leaks the key: %v", err)
	}
	asCPF, err := d.Derive("t", "pix.typed", map[string]any{"pix_key": amb, "pix_key_type": "CPF"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	asPhone, err := d.Derive("t", "pix.typed", map[string]any{"pix_key": amb, "pix_key_type": "telefone"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if asCPF.Key == asPhone.Key {
		t.Fatal("a CPF key and a phone key must not share a key")
	}
	if got, _ := asPhone.Payload.Get("pix_key"); got != "+55"+amb {
		t.Errorf("phone = %s", got)
	}
}

// findAmbiguousCPF builds a check-digit-valid CPF that reads as a São Paulo
// mobile number (11 9xxxx-xxxx).
func findAmbiguousCPF(t *testing.T) string {
	t.Helper()
	for n := 119876540; n < 119876540+1000; n++ {
		cpf := testutil.CPF(n)
		d := newDeriver(t)
		_, errPhone := d.Derive("t", "pix.cobranca", pix("1", "+55"+cpf), &derive.Opts{Version: 2})
		if errPhone == nil {
			return cpf
		}
	}
	t.Fatal("no ambiguous CPF found")
	return ""
}

// A stated type and an inferred one give the same key; the type is always
// in the payload.
func TestPixKeyTypeStatedOrInferred(t *testing.T) {
	t.Parallel()
	d := newDeriver(t, derive.Schema{Action: "pix.typed", Version: 2, Fields: []derive.Field{
		{Name: "pix_key", Rule: derive.RulePixKey, TypeField: "pix_key_type"},
		{Name: "pix_key_type", Rule: derive.RulePixKeyType, Optional: true},
		{Name: "amount", Rule: derive.RuleMoney},
	}})
	a, err := d.Derive("t", "pix.typed", map[string]any{"pix_key": cpfValid, "amount": "180,00"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	b, err := d.Derive("t", "pix.typed", map[string]any{"pix_key": cpfDigits, "pix_key_type": " cpf ", "amount": 180}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if a.Key != b.Key {
		t.Fatalf("keys differ:\n%s\n%s", a.Canonical, b.Canonical)
	}
	if typ, _ := a.Payload.Get("pix_key_type"); typ != "cpf" {
		t.Fatalf("inferred type = %q", typ)
	}
	if _, err := d.Derive("t", "pix.typed", map[string]any{"pix_key": cpfValid, "pix_key_type": "cnpj", "amount": 1}, nil); err == nil {
		t.Fatal("a CPF stated as CNPJ was accepted")
	}
	if _, err := d.Derive("t", "pix.typed", map[string]any{"pix_key": cpfValid, "pix_key_type": "bitcoin", "amount": 1}, nil); err == nil {
		t.Fatal("unknown key type accepted")
	}
}

func TestPhoneSpellingsOneKeyV2(t *testing.T) {
	t.Parallel()
	d := newDeriver(t)
	var keys []string
	for _, phone := range []string{"+55 (11) 99999-9999", "5511999999999", "(11) 99999-9999"} {
		r, err := d.Derive("t", "pix.cobranca", pix("25", phone), &derive.Opts{Version: 2})
		if err != nil {
			t.Fatalf("%s: %v", phone, err)
		}
		keys = append(keys, r.Key)
	}
	if keys[0] != keys[1] || keys[1] != keys[2] {
		t.Fatalf("three spellings of one phone gave keys %v", keys)
	}
}

func TestErrors(t *testing.T) {
	t.Parallel()
	if _, err := derive.New(derive.Config{Secret: []byte("short")}); !errors.Is(err, derive.ErrSecretTooShort) {
		t.Errorf("short secret: %v", err)
	}
	d := newDeriver(t)
	if _, err := d.Derive("t", "pix.nope", pix("1", "a@b.c"), nil); !errors.Is(err, derive.ErrUnknownAction) {
		t.Errorf("unknown action: %v", err)
	}
	if _, err := d.Derive("t", "pix.cobranca", pix("1", "a@b.c"), &derive.Opts{Version: 9}); !errors.Is(err, derive.ErrUnknownVersion) {
		t.Errorf("unknown version: %v", err)
	}
	if _, err := d.Derive("", "pix.cobranca", pix("1", "a@b.c"), nil); !errors.Is(err, derive.ErrBadTenant) {
		t.Errorf("empty tenant: %v", err)
	}
	f := pix("1", "a@b.c")
	delete(f, "valor")
	_, err := d.Derive("t", "pix.cobranca", f, nil)
	var fe *derive.FieldError
	if !errors.Is(err, derive.ErrMissingField) || !errors.As(err, &fe) || fe.Field != "valor" {
		t.Errorf("missing field: %v", err)
	}
	_, err = d.Derive("t", "pix.cobranca", pix("0.001", "a@b.c"), nil)
	if !errors.As(err, &fe) || fe.Field != "valor" || !strings.Contains(err.Error(), "sub-cent") {
		t.Errorf("sub-cent: %v", err)
	}
	_, err = d.Derive("t", "pix.cobranca", pix("1", "\xff"), nil)
	if !errors.Is(err, derive.ErrInvalidField) {
		t.Errorf("invalid UTF-8: %v", err)
	}
}

func TestIgnoredFieldsStayOutOfTheKey(t *testing.T) {
	t.Parallel()
	d := newDeriver(t)
	a, err := d.Derive("t", "pix.cobranca", pix("1", "a@b.c"), nil)
	if err != nil {
		t.Fatal(err)
	}
	f := pix("1", "a@b.c")
	f["model_note"] = "the customer sounded upset"
	f["attempt"] = 3
	b, err := d.Derive("t", "pix.cobranca", f, nil)
	if err != nil {
		t.Fatal(err)
	}
	if a.Key != b.Key {
		t.Fatal("an unnamed field changed the key")
	}
	if strings.Join(b.Ignored, ",") != "attempt,model_note" {
		t.Fatalf("Ignored = %v", b.Ignored)
	}
}

func TestSchemaValidation(t *testing.T) {
	t.Parallel()
	bad := []derive.Schema{
		{Action: "", Version: 1, Fields: []derive.Field{{Name: "a", Rule: derive.RuleText}}},
		{Action: "x", Version: 4, Fields: []derive.Field{{Name: "a", Rule: derive.RuleText}}},
		{Action: "x", Version: 3, Fields: []derive.Field{{Name: "a", Rule: derive.RuleText, MaxLen: -1}}},
		{Action: "x", Version: 3, Fields: []derive.Field{{Name: "a", Rule: derive.RuleText, AllowZero: true}}},
		{Action: "x", Version: 1},
		{Action: "x", Version: 1, Fields: []derive.Field{{Name: "a"}}},
		{Action: "x", Version: 1, Fields: []derive.Field{{Name: "a", Rule: "rot13"}}},
		{Action: "x", Version: 1, Fields: []derive.Field{{Name: "a", Rule: derive.RuleText}, {Name: "a", Rule: derive.RuleText}}},
		{Action: "x", Version: 1, Fields: []derive.Field{{Name: "a", Rule: derive.RuleText, AllowNegative: true}}},
		{Action: "x", Version: 2, Fields: []derive.Field{{Name: "k", Rule: derive.RulePixKey, TypeField: "missing"}}},
	}
	for i, s := range bad {
		if _, err := derive.New(derive.Config{Secret: []byte(secret), Schemas: []derive.Schema{s}}); !errors.Is(err, derive.ErrSchema) {
			t.Errorf("schema %d accepted: %v", i, err)
		}
	}
	dup := append(derive.BuiltinSchemas(), derive.BuiltinSchemas()[0])
	if _, err := derive.New(derive.Config{Secret: []byte(secret), Schemas: dup}); !errors.Is(err, derive.ErrSchema) {
		t.Errorf("duplicate schema accepted: %v", err)
	}
}

func TestCanonicalEscaping(t *testing.T) {
	t.Parallel()
	d := newDeriver(t)
	f := map[string]any{"cliente_id": "a\"b\\c\u2028<&>\u0001", "referencia_intencao": "NF\t1", "template": "x"}
	r, err := d.Derive("t\u00e7", "email.cobranca", f, nil)
	if err != nil {
		t.Fatal(err)
	}
	want := `{"a":"email.cobranca","p":{"cliente_id":"a\"b\\c` + "\u2028" + `<&>\u0001","referencia_intencao":"NF\t1","template":"x"},"t":"t` + "\u00e7" + `","v":1}`
	if string(r.Canonical) != want {
		t.Fatalf("canonical\n got %s\nwant %s", r.Canonical, want)
	}
	var back map[string]any
	if err := json.Unmarshal(r.Canonical, &back); err != nil {
		t.Fatalf("canonical is not JSON: %v", err)
	}
}

func TestPayloadDiffAndKeyFor(t *testing.T) {
	t.Parallel()
	d := newDeriver(t)
	a, _ := d.Derive("t", "pix.cobranca", pix("180,00", "a@b.c"), nil)
	b, _ := d.Derive("t", "pix.cobranca", pix("181,00", "A@B.C"), nil)
	if diff := a.Payload.Diff(b.Payload); strings.Join(diff, ",") != "valor" {
		t.Fatalf("diff = %v", diff)
	}
	js, _ := json.Marshal(a.Payload)
	var p derive.Payload
	if err := json.Unmarshal(js, &p); err != nil {
		t.Fatal(err)
	}
	canon, key := d.KeyFor("t", "pix.cobranca", 1, p)
	if key != a.Key || string(canon) != string(a.Canonical) {
		t.Fatal("KeyFor of the round-tripped payload differs")
	}
}

// A call with several broken fields is told of all of them, in canonical
// order, each by name and rule and never by value, so that a model fixes
// them in one turn; the error still reads as the first one (errors.As) and
// matches each one's sentinel (errors.Is).
func TestEveryBrokenFieldNamed(t *testing.T) {
	t.Parallel()
	d := newDeriver(t)
	f := pix("0.001", "\xff")
	delete(f, "cliente_id")
	_, err := d.Derive("t", "pix.cobranca", f, nil)
	var many derive.FieldErrors
	if !errors.As(err, &many) {
		t.Fatalf("three broken fields: %T %v, want FieldErrors", err, err)
	}
	fes := derive.FieldErrorsOf(err)
	var names []string
	for _, fe := range fes {
		names = append(names, fe.Field)
	}
	if got := strings.Join(names, ","); got != "chave_pix_destino,cliente_id,valor" {
		t.Fatalf("fields %s (%v), want chave_pix_destino,cliente_id,valor", got, err)
	}
	var first *derive.FieldError
	if !errors.As(err, &first) || first != fes[0] {
		t.Errorf("errors.As found %v, want the first field's error", first)
	}
	if !errors.Is(err, derive.ErrMissingField) || !errors.Is(err, derive.ErrInvalidField) || errors.Is(err, derive.ErrAmbiguous) {
		t.Errorf("sentinels of %v: missing and invalid, not ambiguous", err)
	}
	for _, v := range []string{"0.001", "\xff"} {
		if strings.Contains(err.Error(), v) {
			t.Errorf("the error %q carries the value %q", err, v)
		}
	}

	// One broken field is a *FieldError, as it always was.
	_, err = d.Derive("t", "pix.cobranca", pix("0.001", "a@b.c"), nil)
	if errors.As(err, &many) || len(derive.FieldErrorsOf(err)) != 1 || derive.FieldErrorsOf(err)[0].Field != "valor" {
		t.Errorf("one broken field: %T %v", err, err)
	}
	if derive.FieldErrorsOf(derive.ErrUnknownAction) != nil || derive.FieldErrorsOf(nil) != nil {
		t.Error("FieldErrorsOf found field errors where there are none")
	}
}
