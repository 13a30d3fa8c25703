package derive_test

import (
	"fmt"

	"github.com/retrysafe/retrysafe/derive"
)

// Two extractions of one payment, spelled differently by the model, give one
// key: the amount becomes cents and the CPF loses its punctuation.
func Example() {
	d, err := derive.New(derive.Config{Secret: []byte("segredo-de-teste-nao-usar-em-producao")})
	if err != nil {
		panic(err)
	}
	first, _ := d.Derive("tenant-a", "pix.cobranca", map[string]any{
		"cliente_id": "01HXYZABCD", "valor": "180.00",
		"chave_pix_destino": "111.222.333-44", "referencia_intencao": "NF-2026-000123",
	}, nil)
	retry, _ := d.Derive("tenant-a", "pix.cobranca", map[string]any{
		"cliente_id": "01HXYZABCD", "valor": 180,
		"chave_pix_destino": " 11122233344", "referencia_intencao": "NF-2026-000123 ",
		"confidence": 0.93, // not in the schema: reported, not keyed
	}, nil)
	fmt.Println(string(first.Canonical))
	fmt.Println(first.Key)
	fmt.Println(retry.Key == first.Key, retry.Ignored)
	// Output:
	// {"a":"pix.cobranca","p":{"chave_pix_destino":"11122233344","cliente_id":"01HXYZABCD","referencia_intencao":"NF-2026-000123","valor":"18000"},"t":"tenant-a","v":1}
	// bf63399df8324ce0d7f93f99aae8339e1467fd879b776d57f758536734211fda
	// true [confidence]
}

// A schema for your own action: an explicit list of fields, each with a
// rule, at a rule version.
func ExampleSchema() {
	d, err := derive.New(derive.Config{
		Secret: []byte("a-secret-of-at-least-32-bytes-long!!"),
		Schemas: []derive.Schema{{Action: "pix.charge", Version: 2, Fields: []derive.Field{
			{Name: "customer_id", Rule: derive.RuleText},
			{Name: "amount", Rule: derive.RuleMoney},
			{Name: "pix_key", Rule: derive.RulePixKey, TypeField: "pix_key_type"},
			{Name: "pix_key_type", Rule: derive.RulePixKeyType, Optional: true},
		}}},
	})
	if err != nil {
		panic(err)
	}
	r, err := d.Derive("shop-1", "pix.charge", map[string]any{
		"customer_id": "C-9", "amount": "R$ 1.800,00", "pix_key": "(11) 99999-9999",
	}, nil)
	if err != nil {
		panic(err)
	}
	fmt.Println(string(r.Canonical))
	_, err = d.Derive("shop-1", "pix.charge", map[string]any{
		"customer_id": "C-9", "amount": "1.800", "pix_key": "(11) 99999-9999",
	}, nil)
	fmt.Println(err)
	// Output:
	// {"a":"pix.charge","p":{"amount":"180000","customer_id":"C-9","pix_key":"+5511999999999","pix_key_type":"phone"},"t":"shop-1","v":2}
	// field "amount": ambiguous amount: '.' followed by three digits may be a thousands or a decimal separator; write it with cents (e.g. 1.800,00)
}

// An extraction with several broken fields is refused with all of them
// named, by rule and never by value, so the model can fix them in one turn.
func ExampleFieldErrorsOf() {
	d, err := derive.New(derive.Config{Secret: []byte("segredo-de-teste-nao-usar-em-producao")})
	if err != nil {
		panic(err)
	}
	_, err = d.Derive("tenant-a", "pix.cobranca", map[string]any{
		"valor": "cento e oitenta", "chave_pix_destino": "111.222.333-44", "referencia_intencao": "NF-2026-000123",
	}, &derive.Opts{Version: 2})
	for _, fe := range derive.FieldErrorsOf(err) {
		fmt.Printf("%s: %s\n", fe.Field, fe.Reason)
	}
	// Output:
	// chave_pix_destino: not a Pix key: 11 digits that are neither a valid CPF nor a Brazilian phone
	// cliente_id: empty
	// valor: not a number
}
