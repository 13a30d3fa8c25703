package derive

import (
	"fmt"
	"sort"
	"unicode/utf8"
)

// Field is one named input of an action and the rule that normalizes it.
type Field struct {
	Name string
	Rule Rule
	// Optional fields may be absent, null or empty; they are then left out
	// of the payload (and the key). Required fields may not.
	Optional bool
	// AllowNegative lets a RuleMoney field take negative amounts (refunds,
	// adjustments). Off by default: a negative charge is a mistake.
	AllowNegative bool
	// AllowZero lets a RuleMoney field be zero from version 3 on (which
	// refuses a zero amount otherwise).
	AllowZero bool
	// AllowAddressLiteral lets a version-3 RuleEmail field (or e-mail Pix
	// key) take an IP address literal as its domain (user@[192.0.2.1]).
	AllowAddressLiteral bool
	// MaxLen is the longest normalized value accepted, in characters
	// (Unicode code points, as JSON schema's maxLength counts them): a
	// provider's limit (a 140-character description) belongs here, so that
	// an over-long value is refused before anything is frozen. 0 means
	// DefaultMaxLen from version 3 on, and no limit before.
	MaxLen int
	// TypeField, on a RulePixKey field, names the sibling RulePixKeyType
	// field that states the key's type. In version 2 that field is always
	// written to the payload: stated, or inferred when the caller left it
	// out, so "with type" and "without type" give one key.
	TypeField string
	// Description is shown to the model in the tool's JSON schema.
	Description string
}

// Schema is the explicit list of fields of one action at one rule version.
type Schema struct {
	Action  string
	Version int
	Fields  []Field
}

// Validate checks the schema on its own: at least one field, unique
// non-empty names, known rules, a version this package implements, and
// consistent TypeField links.
func (s *Schema) Validate() error {
	if s.Action == "" || !utf8.ValidString(s.Action) {
		return fmt.Errorf("%w: empty action name", ErrSchema)
	}
	if s.Version < MinVersion || s.Version > MaxVersion {
		return fmt.Errorf("%w: %s: version %d not implemented (have %d..%d)", ErrSchema, s.Action, s.Version, MinVersion, MaxVersion)
	}
	if len(s.Fields) == 0 {
		return fmt.Errorf("%w: %s v%d: no fields", ErrSchema, s.Action, s.Version)
	}
	byName := map[string]*Field{}
	for i := range s.Fields {
		f := &s.Fields[i]
		if f.Name == "" || !utf8.ValidString(f.Name) {
			return fmt.Errorf("%w: %s v%d: field %d has no name", ErrSchema, s.Action, s.Version, i)
		}
		if byName[f.Name] != nil {
			return fmt.Errorf("%w: %s v%d: field %q listed twice", ErrSchema, s.Action, s.Version, f.Name)
		}
		if f.Rule == "" {
			return fmt.Errorf("%w: %s v%d: field %q has no rule", ErrSchema, s.Action, s.Version, f.Name)
		}
		if !knownRules[f.Rule] {
			return fmt.Errorf("%w: %s v%d: field %q: unknown rule %q", ErrSchema, s.Action, s.Version, f.Name, f.Rule)
		}
		if (f.AllowNegative || f.AllowZero) && f.Rule != RuleMoney {
			return fmt.Errorf("%w: %s v%d: field %q: AllowNegative and AllowZero only apply to money", ErrSchema, s.Action, s.Version, f.Name)
		}
		if f.AllowAddressLiteral && f.Rule != RuleEmail && f.Rule != RulePixKey {
			return fmt.Errorf("%w: %s v%d: field %q: AllowAddressLiteral only applies to e-mail and Pix keys", ErrSchema, s.Action, s.Version, f.Name)
		}
		if f.MaxLen < 0 {
			return fmt.Errorf("%w: %s v%d: field %q: negative MaxLen", ErrSchema, s.Action, s.Version, f.Name)
		}
		byName[f.Name] = f
	}
	for i := range s.Fields {
		f := &s.Fields[i]
		if f.TypeField == "" {
			continue
		}
		t := byName[f.TypeField]
		if f.Rule != RulePixKey || t == nil || t.Rule != RulePixKeyType || !t.Optional {
			return fmt.Errorf("%w: %s v%d: field %q: TypeField must name an optional %s field of a %s field",
				ErrSchema, s.Action, s.Version, f.Name, RulePixKeyType, RulePixKey)
		}
	}
	return nil
}

// compiled is a validated schema ready for derivation: fields sorted by
// name (the canonical order), links resolved.
type compiled struct {
	Schema
	sorted   []Field
	typeOf   map[string]string // pix key field -> its type field
	typeFor  map[string]string // type field -> its pix key field
	fieldSet map[string]bool
	// isTypeField[i] says sorted[i] is some pix key's TypeField: resolved
	// once here so the hot path does no map lookup per field.
	isTypeField []bool
}

func compile(s Schema) (*compiled, error) {
	if err := s.Validate(); err != nil {
		return nil, err
	}
	c := &compiled{Schema: s, typeOf: map[string]string{}, typeFor: map[string]string{}, fieldSet: map[string]bool{}}
	c.Fields = append([]Field(nil), s.Fields...)
	c.sorted = append([]Field(nil), s.Fields...)
	// Byte order of UTF-8 is code point order, which is the canonical order.
	sort.Slice(c.sorted, func(i, j int) bool { return c.sorted[i].Name < c.sorted[j].Name })
	for _, f := range s.Fields {
		c.fieldSet[f.Name] = true
		if f.TypeField != "" {
			c.typeOf[f.Name] = f.TypeField
			c.typeFor[f.TypeField] = f.Name
		}
	}
	c.isTypeField = make([]bool, len(c.sorted))
	for i, f := range c.sorted {
		c.isTypeField[i] = c.typeFor[f.Name] != ""
	}
	return c, nil
}

// MaxLenFor is the length limit applied to f at version (0: none).
func (f *Field) MaxLenFor(version int) int {
	if f.MaxLen == 0 && version >= 3 {
		return DefaultMaxLen
	}
	return f.MaxLen
}

// BuiltinSchemas are the actions of the reference derivation, at versions 1
// to 3: pix.cobranca (cliente_id, valor, chave_pix_destino,
// referencia_intencao) and email.cobranca (cliente_id, referencia_intencao,
// template). Their default version is 1, so keys match the reference.
func BuiltinSchemas() []Schema {
	var out []Schema
	for v := MinVersion; v <= MaxVersion; v++ {
		out = append(out,
			Schema{Action: "pix.cobranca", Version: v, Fields: []Field{
				{Name: "cliente_id", Rule: RuleText, Description: "customer id"},
				{Name: "valor", Rule: RuleMoney, Description: "amount in reais, e.g. \"180,00\""},
				{Name: "chave_pix_destino", Rule: RulePixKey, Description: "destination Pix key"},
				{Name: "referencia_intencao", Rule: RuleRef, Description: "intent reference"},
			}},
			Schema{Action: "email.cobranca", Version: v, Fields: []Field{
				{Name: "cliente_id", Rule: RuleText, Description: "customer id"},
				{Name: "referencia_intencao", Rule: RuleRef, Description: "intent reference"},
				{Name: "template", Rule: RuleTemplate, Description: "template name"},
			}},
		)
	}
	return out
}
