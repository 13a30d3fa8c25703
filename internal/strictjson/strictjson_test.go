package strictjson_test

import (
	"bytes"
	"encoding/json"
	"errors"
	"testing"

	"github.com/retrysafe/retrysafe/internal/strictjson"
)

func TestCheck(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name, doc     string
		reason, field string // reason "" means accepted
	}{
		{"plain", `{"intent_ref":"inv-1","fields":{"amount":"180,00"}}`, "", ""},
		{"nested arrays", `{"a":[{"b":1},{"b":2}],"c":null}`, "", ""},
		{"same name in two objects", `{"a":{"x":1},"b":{"x":2}}`, "", ""},
		{"escaped non-NUL control", `{"a":"\u0001"}`, "", ""},
		{"surrogate pair", `{"a":"\ud83d\ude00"}`, "", ""},
		{"scalar document", `"x"`, "", ""},
		{"duplicate top-level member", `{"intent_ref":"a","intent_ref":"b"}`, strictjson.ReasonDuplicate, "intent_ref"},
		{"duplicate amount", `{"intent_ref":"inv-1","fields":{"amount":"1,00","amount":"9999,00"}}`, strictjson.ReasonDuplicate, "fields.amount"},
		{"duplicate by escape", `{"fields":{"amount":"1","\u0061mount":"2"}}`, strictjson.ReasonDuplicate, "fields.amount"},
		{"escaped NUL in a value", `{"fields":{"customer_id":"c\u0000x"}}`, strictjson.ReasonNUL, "fields.customer_id"},
		{"escaped NUL in a name", `{"fields":{"a\u0000":"x"}}`, strictjson.ReasonNUL, "fields.a\x00"},
		{"escaped NUL in an array", `{"a":["ok","\u0000"]}`, strictjson.ReasonNUL, "a.1"},
		{"raw NUL", "{\"a\":\"x\x00\"}", strictjson.ReasonSyntax, "a"},
		{"invalid UTF-8", "{\"fields\":{\"pix_key\":\"ana\xff@example.com\"}}", strictjson.ReasonInvalidUTF8, "fields.pix_key"},
		{"lone high surrogate", `{"fields":{"name":"\ud800"}}`, strictjson.ReasonInvalidUTF8, "fields.name"},
		{"lone low surrogate", `{"fields":{"name":"a\udc00b"}}`, strictjson.ReasonInvalidUTF8, "fields.name"},
		{"trailing value", `{"a":1} {"a":2}`, strictjson.ReasonTrailing, ""},
		{"truncated", `{"a":`, strictjson.ReasonSyntax, ""},
		{"empty", ``, strictjson.ReasonEmpty, ""},
	} {
		err := strictjson.Check([]byte(tc.doc))
		if tc.reason == "" {
			if err != nil {
				t.Errorf("%s: %v", tc.name, err)
			}
			continue
		}
		var se *strictjson.Error
		if !errors.As(err, &se) || !errors.Is(err, strictjson.ErrStrict) {
			t.Errorf("%s: got %v, want a *strictjson.Error", tc.name, err)
			continue
		}
		if se.Reason != tc.reason {
			t.Errorf("%s: reason %q, want %q (%v)", tc.name, se.Reason, tc.reason, err)
		}
		if tc.field != "" && se.Field() != tc.field {
			t.Errorf("%s: field %q, want %q (%v)", tc.name, se.Field(), tc.field, err)
		}
	}
}

// Whatever Check accepts, encoding/json reads too, and reads back no NUL
// and no replacement character that the document did not spell.
func FuzzCheck(f *testing.F) {
	for _, s := range []string{
		`{"intent_ref":"inv-1","fields":{"amount":"180,00"}}`,
		`{"a":"1","a":"2"}`, `{"a":"\u0000"}`, "{\"a\":\"\xff\"}", `{"a":"\ud800"}`,
		`[1,2,{"b":[true,null]}]`, `"x"`, `{"a":1} 2`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		if strictjson.Check(data) != nil {
			return
		}
		var v any
		dec := json.NewDecoder(bytes.NewReader(data))
		dec.UseNumber() // as the edges decode: a number beyond float64 is still JSON
		if err := dec.Decode(&v); err != nil {
			t.Fatalf("Check accepted %q, encoding/json refused it: %v", data, err)
		}
	})
}
