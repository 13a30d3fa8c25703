package derive_test

import (
	"encoding/json"
	"testing"

	"github.com/retrysafe/retrysafe/derive"
)

// BenchmarkDerivePixCobranca measures one key for a typical pix.cobranca
// extraction (punctuated CPF, decimal-point amount), as the model hands it
// over after json.Unmarshal with UseNumber.
func BenchmarkDerivePixCobranca(b *testing.B) {
	d := newDeriver(b)
	fields := map[string]any{
		"cliente_id":          "01HXYZABCD",
		"valor":               "180.00",
		"chave_pix_destino":   "111.222.333-44",
		"referencia_intencao": "NF-2026-000123",
	}
	b.ReportAllocs()
	for b.Loop() {
		if _, err := d.Derive("tenant-a", "pix.cobranca", fields, nil); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkDerivePixCobrancaParallel(b *testing.B) {
	d := newDeriver(b)
	fields := map[string]any{
		"cliente_id":          "01HXYZABCD",
		"valor":               json.Number("180.00"),
		"chave_pix_destino":   "111.222.333-44",
		"referencia_intencao": "NF-2026-000123",
	}
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			if _, err := d.Derive("tenant-a", "pix.cobranca", fields, nil); err != nil {
				b.Fatal(err)
			}
		}
	})
}

// Version 2 with a phone key goes through libphonenumber: slower, shown for
// comparison.
func BenchmarkDerivePixPhoneV2(b *testing.B) {
	d := newDeriver(b)
	fields := map[string]any{
		"cliente_id":          "01HXYZABCD",
		"valor":               "R$ 1.800,00",
		"chave_pix_destino":   "+55 (11) 99999-9999",
		"referencia_intencao": "NF-2026-000123",
	}
	opts := &derive.Opts{Version: 2}
	b.ReportAllocs()
	for b.Loop() {
		if _, err := d.Derive("tenant-a", "pix.cobranca", fields, opts); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkDerivePixChargeV3 measures one key for a pix.charge payload at
// the built-in tools' rule version 3 (the tools package's schema, repeated
// here: derive cannot import tools).
func BenchmarkDerivePixChargeV3(b *testing.B) {
	d := newDeriver(b, derive.Schema{Action: "pix.charge", Version: 3, Fields: []derive.Field{
		{Name: "customer_id", Rule: derive.RuleRef, MaxLen: 256},
		{Name: "amount", Rule: derive.RuleMoney},
		{Name: "pix_key", Rule: derive.RulePixKey, TypeField: "pix_key_type", MaxLen: 77},
		{Name: "pix_key_type", Rule: derive.RulePixKeyType, Optional: true},
		{Name: "intent_ref", Rule: derive.RuleRef, MaxLen: 130},
	}})
	fields := map[string]any{
		"customer_id": "01HXYZABCD",
		"amount":      json.Number("180.00"),
		"pix_key":     "12.ABC.345/01DE-35",
		"intent_ref":  "NF-2026-000123",
	}
	b.ReportAllocs()
	for b.Loop() {
		if _, err := d.Derive("tenant-a", "pix.charge", fields, nil); err != nil {
			b.Fatal(err)
		}
	}
}
