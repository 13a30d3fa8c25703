package model_test

import (
	"testing"

	"github.com/retrysafe/retrysafe/derive"
	"github.com/retrysafe/retrysafe/sandbox/model"
)

// FuzzExtract checks the message parser on any text: it never panics, what
// it extracts is in range, and every spelling the stand-in would emit for
// the extracted values means the same thing to derive (all refused, or all
// normalized to one payload). Seeds: testdata/fuzz/FuzzExtract and below.
func FuzzExtract(f *testing.F) {
	for _, s := range []string{
		"pagar a fatura NF-123, R$ 180,00, chave Pix 529.982.247-25",
		"quero pagar R$ 1.800 da fatura 2024-05 pelo pix +55 (11) 98765-4321.",
		"celular 11987654321, pague 35 reais",
		"chave aleatória 123E4567-E89B-12D3-A456-426614174000 valor 0,01",
		"NF 1 R$ 99999999999999,99 cnpj 11.222.333/0001-81",
		"+55 11 98765-4321 180 reais fatura #A1",
		"", "R$", "R$ ,", "chave", "@.", "+", "(11)", "1.2.3.4.5.6.7.8.9", "customer_id: x",
	} {
		f.Add(s)
	}
	d := pixDeriver(f)
	f.Fuzz(func(t *testing.T, text string) {
		facts := model.Extract(text)
		if facts.HasAmount {
			if facts.AmountCents < 0 || facts.AmountCents >= 1e15 {
				t.Fatalf("amount %d out of range", facts.AmountCents)
			}
			for _, a := range model.AmountSpellings(facts.AmountCents) {
				p, err := derivePix(d, a, "52998224725", "cpf")
				if err != nil {
					t.Fatalf("amount %d spelled %s: %v", facts.AmountCents, a, err)
				}
				if got, _ := p.Get("amount"); got != itoa(facts.AmountCents) {
					t.Fatalf("amount %d spelled %s normalized to %s", facts.AmountCents, a, got)
				}
			}
			if again := model.Extract("pagar " + model.FormatBRL(facts.AmountCents)); again.AmountCents != facts.AmountCents {
				t.Fatalf("%s read back as %d", model.FormatBRL(facts.AmountCents), again.AmountCents)
			}
		} else if facts.AmountCents != 0 {
			t.Fatalf("amount %d without HasAmount", facts.AmountCents)
		}
		if facts.PixKey == "" {
			if facts.PixKeyType != "" {
				t.Fatalf("type %q without a key", facts.PixKeyType)
			}
			return
		}
		switch facts.PixKeyType {
		case model.KeyCPF, model.KeyCNPJ, model.KeyEmail, model.KeyPhone, model.KeyEVP:
		default:
			t.Fatalf("key type %q", facts.PixKeyType)
		}
		var want derive.Payload
		var wantErr error
		first := true
		for _, sp := range model.KeySpellings(facts.PixKeyType, facts.PixKey) {
			for _, typ := range sp.Types {
				p, err := derivePix(d, `"1,00"`, sp.Key, typ)
				if first {
					want, wantErr, first = p, err, false
					continue
				}
				if (err == nil) != (wantErr == nil) {
					t.Fatalf("key %s (%s) spelled %q type %q: %v, first spelling: %v", facts.PixKey, facts.PixKeyType, sp.Key, typ, err, wantErr)
				}
				if err == nil && len(want.Diff(p)) > 0 {
					t.Fatalf("key %s spelled %q type %q: %v vs %v", facts.PixKey, sp.Key, typ, p, want)
				}
			}
		}
	})
}
