package model_test

import (
	"encoding/json"
	"testing"

	"github.com/retrysafe/retrysafe/derive"
	"github.com/retrysafe/retrysafe/sandbox/model"
	"github.com/retrysafe/retrysafe/tools"
)

func TestExtract(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		text string
		want model.Facts
	}{
		{"pagar a fatura NF-123, R$ 180,00, chave Pix 529.982.247-25",
			model.Facts{WantsToPay: true, AmountCents: 18000, HasAmount: true, PixKey: "52998224725", PixKeyType: model.KeyCPF, Invoice: "NF-123"}},
		{"quero pagar R$ 1.800 da fatura 2024-05 pelo pix +55 (11) 98765-4321.",
			model.Facts{WantsToPay: true, AmountCents: 180000, HasAmount: true, PixKey: "+5511987654321", PixKeyType: model.KeyPhone, Invoice: "2024-05"}},
		{"meu CPF é 52998224725, vou pagar 180.50",
			model.Facts{WantsToPay: true, AmountCents: 18050, HasAmount: true, PixKey: "52998224725", PixKeyType: model.KeyCPF}},
		{"celular 11987654321, pague 35 reais",
			model.Facts{WantsToPay: true, AmountCents: 3500, HasAmount: true, PixKey: "+5511987654321", PixKeyType: model.KeyPhone}},
		// The CPF's digits never become an amount, nor the invoice's.
		{"NF-2000 chave 529.982.247-25", model.Facts{WantsToPay: false, PixKey: "52998224725", PixKeyType: model.KeyCPF, Invoice: "NF-2000"}},
		// The key after "chave" wins over a phone mentioned before it.
		{"ligue 11 3333-4444; pagar R$ 5,00 na chave fulano@exemplo.com",
			model.Facts{WantsToPay: true, AmountCents: 500, HasAmount: true, PixKey: "fulano@exemplo.com", PixKeyType: model.KeyEmail}},
		{"customer_id: C-42. Cliente desde 2019.", model.Facts{Customer: "C-42"}},
		{"oi", model.Facts{}},
	} {
		got := model.Extract(tc.text)
		if got != tc.want {
			t.Errorf("Extract(%q)\n got %+v\nwant %+v", tc.text, got, tc.want)
		}
	}
}

func TestParseBRL(t *testing.T) {
	t.Parallel()
	for in, want := range map[string]int64{
		"180": 18000, "180,00": 18000, "180.00": 18000, "1.800,00": 180000, "1.800": 180000,
		"180,5": 18050, "0,99": 99, "1.234.567,89": 123456789, "007": 700,
	} {
		if got, ok := model.ParseBRL(in); !ok || got != want {
			t.Errorf("ParseBRL(%q) = %d, %v; want %d", in, got, ok, want)
		}
	}
	for _, bad := range []string{"", "1,800.00", "1,2,3", "18.0.0", "1.80,0.0", "12345678901234", "R$ 1", "1,234"} {
		if got, ok := model.ParseBRL(bad); ok {
			t.Errorf("ParseBRL(%q) = %d, want refusal", bad, got)
		}
	}
}

func pixDeriver(t testing.TB) *derive.Deriver {
	t.Helper()
	d, err := derive.New(derive.Config{Secret: secret, Schemas: []derive.Schema{tools.PixChargeSchema()}})
	if err != nil {
		t.Fatal(err)
	}
	return d
}

// derivePix normalizes one spelling through the real pix.charge schema.
func derivePix(d *derive.Deriver, amountJSON, key, typ string) (derive.Payload, error) {
	fields := map[string]any{"customer_id": "C-1", tools.RefField: "NF-1", "pix_key": key}
	var amount json.Number
	if err := json.Unmarshal([]byte(amountJSON), &amount); err == nil {
		fields["amount"] = amount
	} else {
		var s string
		if err := json.Unmarshal([]byte(amountJSON), &s); err != nil {
			return nil, err
		}
		fields["amount"] = s
	}
	if typ != "" {
		fields["pix_key_type"] = typ
	}
	r, err := d.Derive("t", tools.PixChargeName, fields, nil)
	if err != nil {
		return nil, err
	}
	return r.Payload, nil
}

// Every spelling the stand-in may choose must mean the same to derive:
// otherwise "formatting varies" would silently become "the value varies".
func TestSpellingsAgreeUnderDerive(t *testing.T) {
	t.Parallel()
	d := pixDeriver(t)
	keys := []struct{ typ, key string }{
		{model.KeyCPF, "52998224725"},
		{model.KeyCNPJ, "11222333000181"},
		{model.KeyPhone, "+5511987654321"},
		{model.KeyPhone, "+5521998765432"},
		{model.KeyEmail, "maria@exemplo.com.br"},
		{model.KeyEVP, "123e4567-e89b-12d3-a456-426614174000"},
	}
	for _, cents := range []int64{1, 99, 100, 18000, 18050, 18055, 100000, 180000, 123456789, 100000000000} {
		want := ""
		for _, a := range model.AmountSpellings(cents) {
			p, err := derivePix(d, a, "52998224725", "cpf")
			if err != nil {
				t.Fatalf("amount %d spelled %s: %v", cents, a, err)
			}
			got, _ := p.Get("amount")
			if want == "" {
				want = got
			}
			if got != want || got != itoa(cents) {
				t.Fatalf("amount %d spelled %s normalized to %s", cents, a, got)
			}
		}
	}
	for _, k := range keys {
		var want derive.Payload
		for _, sp := range model.KeySpellings(k.typ, k.key) {
			for _, typ := range sp.Types {
				p, err := derivePix(d, `"180,00"`, sp.Key, typ)
				if err != nil {
					t.Fatalf("%s %s spelled %q type %q: %v", k.typ, k.key, sp.Key, typ, err)
				}
				if want == nil {
					want = p
				}
				if diff := want.Diff(p); len(diff) > 0 {
					t.Fatalf("%s spelled %q type %q differs in %v: %v vs %v", k.key, sp.Key, typ, diff, p, want)
				}
			}
		}
		if got, _ := want.Get("pix_key_type"); got != k.typ {
			t.Fatalf("%s: type %q", k.key, got)
		}
	}
}

func itoa(n int64) string {
	b, _ := json.Marshal(n)
	return string(b)
}
