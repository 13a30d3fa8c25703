package tools

import (
	"encoding/json"

	"github.com/retrysafe/retrysafe/derive"
)

// ParametersFromSchema builds the JSON schema the model sees from a derive
// schema, leaving out hidden fields (the system fields). Every rule is
// presented as a string except money, which accepts a string or a number
// (models emit both; derive parses either without floats). Each string
// carries the field's maxLength (derive.Field.MaxLen, as derive enforces
// it at the schema's rule version).
func ParametersFromSchema(s derive.Schema, hidden ...string) json.RawMessage {
	skip := map[string]bool{}
	for _, h := range hidden {
		skip[h] = true
	}
	type prop struct {
		Type        any      `json:"type"`
		Description string   `json:"description,omitempty"`
		Enum        []string `json:"enum,omitempty"`
		Format      string   `json:"format,omitempty"`
		MaxLength   int      `json:"maxLength,omitempty"`
	}
	props := map[string]prop{}
	required := []string{}
	for _, f := range s.Fields {
		if skip[f.Name] {
			continue
		}
		p := prop{Type: "string", Description: f.Description, MaxLength: f.MaxLenFor(s.Version)}
		switch f.Rule {
		case derive.RuleMoney:
			// maxLength applies to strings only; a number passes it.
			p.Type = []string{"string", "number"}
		case derive.RulePixKeyType:
			p.Enum = []string{"cpf", "cnpj", "email", "phone", "evp"}
		case derive.RuleEmail:
			p.Format = "email"
		}
		props[f.Name] = p
		if !f.Optional {
			required = append(required, f.Name)
		}
	}
	b, err := json.Marshal(struct {
		Type                 string          `json:"type"`
		Properties           map[string]prop `json:"properties"`
		Required             []string        `json:"required"`
		AdditionalProperties bool            `json:"additionalProperties"`
	}{"object", props, required, false})
	if err != nil {
		panic(err) // only strings and maps: cannot fail
	}
	return b
}
