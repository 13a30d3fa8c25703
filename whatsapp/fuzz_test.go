package whatsapp

import (
	"encoding/json"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"testing"
)

// FuzzParse: whatever the body, parse does not panic, and every message of
// a body it accepts is accounted for: answered or recorded as ignored,
// never both, never silently dropped.
func FuzzParse(f *testing.F) {
	for _, name := range []string{"batch_bsuid_text_button.json", "shapes.json", "group.json", "statuses.json"} {
		b, err := os.ReadFile(filepath.Join("testdata", name))
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
	f.Add([]byte(`{"object":"whatsapp_business_account","entry":[{"changes":[{"field":"messages","value":{"metadata":{"phone_number_id":"100000000001"},"messages":[{"id":"x"},7,null,"s"],"statuses":[{"id":"w","status":"failed","errors":[{"code":131056}]}]}}]}]}`))
	f.Add([]byte(`{}`))
	h := &Handler{cfg: Config{Tenants: map[string]string{"100000000001": "t"}}, log: slog.New(slog.NewTextHandler(io.Discard, nil))}
	f.Fuzz(func(t *testing.T, body []byte) {
		b, _, err := h.parse(body)
		if err != nil {
			return
		}
		var p payload
		if json.Unmarshal(body, &p) != nil {
			t.Fatalf("parse accepted a body that does not decode")
		}
		want := 0
		for _, e := range p.Entry {
			for _, c := range e.Changes {
				if c.Field == "messages" && c.Value.Metadata.PhoneNumberID == "100000000001" {
					want += len(c.Value.Messages)
				}
			}
		}
		if got := len(b.Messages) + len(b.Ignored); got != want {
			t.Fatalf("%d messages, %d answered + %d ignored", want, len(b.Messages), len(b.Ignored))
		}
		for _, m := range b.Messages {
			if m.MessageID == "" || m.ConversationID == "" || m.Body == "" || m.Tenant != "t" {
				t.Fatalf("answered message without id, conversation or text: %+v", m)
			}
		}
	})
}
