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
