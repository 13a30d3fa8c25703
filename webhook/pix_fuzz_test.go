package webhook_test

import (
	"regexp"
	"testing"

	"github.com/retrysafe/retrysafe/webhook"
)

var e2ePattern = regexp.MustCompile(`^[a-zA-Z0-9]{32}$`)

// FuzzParsePixCallback: any body is either refused as a whole or read
// item by item; a readable item has a 32-character endToEndId, a
// non-negative amount and a time, and its refunds come in settlement order.
func FuzzParsePixCallback(f *testing.F) {
	for _, seed := range []string{
		`{"pix":[]}`,
		`{"pix":[{"endToEndId":"E9999999920261201081300000000003","txid":"a1b2c3d4e5f60718293a4b5c6d7e8f901","valor":"180.00","horario":"2026-12-01T08:13:29.082Z","infoPagador":"pago"}]}`,
		`{"pix":[{"endToEndId":"E9999999920261201081300000000003","txid":"a1b2c3d4e5f60718293a4b5c6d7e8f901","valor":"180.00","horario":"2026-12-01T08:13:29.082Z",` +
			`"devolucoes":[{"id":"d2","rtrId":"D9999999920261201081300000000006","valor":"1.00","horario":{"solicitacao":"2026-12-01T08:14:00Z","liquidacao":"2026-12-01T08:15:00Z"},"status":"DEVOLVIDO"},` +
			`{"id":"d1","rtrId":"D9999999920261201081300000000005","valor":"30.00","horario":{"solicitacao":"2026-12-01T08:13:29.083Z"},"status":"EM_PROCESSAMENTO"}]}]}`,
		`{"pix":[{"endToEndId":"short","valor":"1","horario":"ontem"}]}`,
		`{"pix":{}}`, `[]`, `{"pix":[null,1,"x"]}`,
	} {
		f.Add([]byte(seed))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		items, err := webhook.ParsePixCallback(body)
		if err != nil {
			if items != nil {
				t.Fatal("items with an error")
			}
			return
		}
		for _, it := range items {
			if it.Problem != "" {
				continue
			}
			if !e2ePattern.MatchString(it.EndToEndID) || it.Cents < 0 || it.Horario.IsZero() {
				t.Fatalf("readable item %+v", it)
			}
			for i := 1; i < len(it.Refunds); i++ {
				if it.Refunds[i].At.Before(it.Refunds[i-1].At) {
					t.Fatalf("refunds out of order: %+v", it.Refunds)
				}
			}
		}
	})
}
