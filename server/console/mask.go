package console

import (
	"bytes"
	"encoding/json"
	"slices"
	"strings"
	"unicode/utf8"

	"github.com/retrysafe/retrysafe/derive"
)

// Fields whose rule carries no personal data: amounts, references chosen by
// the system, template names, the type of a Pix key. Every other rule (text,
// e-mail, tax id, phone, Pix key), and every field of an action whose
// schema is unknown, is masked until an operator reveals it.
var publicRules = []derive.Rule{derive.RuleMoney, derive.RuleRef, derive.RuleTemplate, derive.RulePixKeyType}

// personalFields names the fields of action's schema that are masked. ok is
// false when the tool is not registered (then every field is).
func (h *Handler) personalFields(action string) (names []string, ok bool) {
	t, found := h.cfg.Tools.Tool(action)
	if !found {
		return nil, false
	}
	for _, f := range t.Schema().Fields {
		if !slices.Contains(publicRules, f.Rule) {
			names = append(names, f.Name)
		}
	}
	return names, true
}

type fieldView struct {
	Name   string
	Value  string
	Masked bool
}

// maskPayload renders a payload, personal values masked unless revealed.
func (h *Handler) maskPayload(action string, p derive.Payload, revealed bool) []fieldView {
	personal, known := h.personalFields(action)
	out := make([]fieldView, 0, len(p))
	for _, v := range p {
		secret := !known || slices.Contains(personal, v.Name)
		fv := fieldView{Name: v.Name, Value: v.Value}
		if secret && !revealed {
			fv.Value, fv.Masked = mask(v.Value), true
		}
		out = append(out, fv)
	}
	return out
}

// mask keeps the last two characters of a value long enough to keep them
// (enough for an operator to tell two keys apart on the phone with a
// customer, not enough to recover a CPF).
func mask(s string) string {
	n := utf8.RuneCountInString(s)
	if n <= 6 {
		return strings.Repeat("•", max(n, 3))
	}
	r := []rune(s)
	return strings.Repeat("•", min(n-2, 10)) + string(r[n-2:])
}

// maskJSON pretty-prints a stored response or lookup answer, masking every
// string equal to a personal payload value and every member named like a
// personal field.
func (h *Handler) maskJSON(action string, p derive.Payload, raw json.RawMessage, revealed bool) string {
	if len(raw) == 0 || string(raw) == "null" {
		return ""
	}
	var v any
	if err := json.Unmarshal(raw, &v); err != nil {
		return "(not JSON)"
	}
	if !revealed {
		personal, known := h.personalFields(action)
		var values []string
		for _, pv := range p {
			if !known || slices.Contains(personal, pv.Name) {
				values = append(values, pv.Value)
			}
		}
		v = maskValue(v, "", personal, values)
	}
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	enc.SetIndent("", "  ")
	_ = enc.Encode(v)
	return strings.TrimSpace(b.String())
}

func maskValue(v any, name string, personal, values []string) any {
	switch x := v.(type) {
	case map[string]any:
		for k, e := range x {
			x[k] = maskValue(e, k, personal, values)
		}
		return x
	case []any:
		for i, e := range x {
			x[i] = maskValue(e, name, personal, values)
		}
		return x
	case string:
		if slices.Contains(personal, name) || slices.Contains(values, x) {
			return mask(x)
		}
		return x
	}
	return v
}

// reference is the provider's reference in a stored response: its id, or
// a Pix txid / end-to-end id.
func reference(raw json.RawMessage) string {
	var m map[string]any
	if json.Unmarshal(raw, &m) != nil {
		return ""
	}
	for _, k := range []string{"txid", "end_to_end_id", "id"} {
		if s, ok := m[k].(string); ok && s != "" {
			return s
		}
	}
	return ""
}
