package cloudapi_test

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/retrysafe/retrysafe/derive"
	"github.com/retrysafe/retrysafe/sandbox/cloudapi"
	"github.com/retrysafe/retrysafe/sandbox/fault"
	"github.com/retrysafe/retrysafe/tools"
)

func start(t *testing.T, cfg cloudapi.Config) (*cloudapi.Server, string) {
	t.Helper()
	s, err := cloudapi.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	hs := httptest.NewServer(s)
	t.Cleanup(hs.Close)
	return s, hs.URL
}

func tool(t *testing.T, base, token string) *tools.WhatsAppTemplate {
	t.Helper()
	wa, err := tools.NewWhatsAppTemplate(tools.HTTPConfig{BaseURL: base, Token: token})
	if err != nil {
		t.Fatal(err)
	}
	return wa
}

func payload(to, template string) derive.Payload {
	return derive.PayloadFromMap(map[string]string{"to": to, "template": template, "language": "pt_BR", tools.RefField: "NF-1"})
}

type listed struct {
	Data []cloudapi.Message `json:"data"`
}

func list(t *testing.T, base, query string) []cloudapi.Message {
	t.Helper()
	resp, err := http.Get(base + "/_sandbox/messages" + query)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var l listed
	if err := json.NewDecoder(resp.Body).Decode(&l); err != nil {
		t.Fatal(err)
	}
	return l.Data
}

type answer struct {
	status int
	header http.Header
	body   string
}

func do(t *testing.T, method, url, token, key, body string, hdr ...string) (answer, error) {
	t.Helper()
	req, err := http.NewRequest(method, url, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	if key != "" {
		req.Header.Set("Idempotency-Key", key)
	}
	for i := 0; i+1 < len(hdr); i += 2 {
		req.Header.Set(hdr[i], hdr[i+1])
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return answer{}, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	return answer{resp.StatusCode, resp.Header, string(b)}, err
}

func TestToolMessagesAreDeduplicated(t *testing.T) {
	t.Parallel()
	_, base := start(t, cloudapi.Config{Token: "tok"})
	wa := tool(t, base, "tok")
	ctx := context.Background()
	key := strings.Repeat("ab", 32)

	first, err := wa.Execute(ctx, key, payload("+5511987654321", "pagamento_confirmado"))
	if err != nil {
		t.Fatal(err)
	}
	var resp struct {
		MessagingProduct string `json:"messaging_product"`
		Contacts         []struct {
			WaID string `json:"wa_id"`
		} `json:"contacts"`
		Messages []struct {
			ID string `json:"id"`
		} `json:"messages"`
	}
	if err := json.Unmarshal(first, &resp); err != nil || resp.MessagingProduct != "whatsapp" || len(resp.Messages) != 1 ||
		!strings.HasPrefix(resp.Messages[0].ID, "wamid.") || resp.Contacts[0].WaID != "5511987654321" {
		t.Fatalf("answer %s: %v", first, err)
	}
	again, err := wa.Execute(ctx, key, payload("+5511987654321", "pagamento_confirmado"))
	if err != nil || string(again) != string(first) {
		t.Fatalf("replay %s (%v), first %s", again, err, first)
	}
	msgs := list(t, base, "")
	if len(msgs) != 1 || msgs[0].Template != "pagamento_confirmado" || msgs[0].Language != "pt_BR" ||
		msgs[0].IdempotencyKey != key || msgs[0].ID != resp.Messages[0].ID || msgs[0].Type != "template" {
		t.Fatalf("stored %+v", msgs)
	}

	// The reconciler's question, "did key K happen?", gets the same bytes.
	looked, err := wa.Lookup(ctx, key)
	if err != nil || string(looked) != string(first) {
		t.Fatalf("lookup %s %v", looked, err)
	}
	if _, err := wa.Lookup(ctx, strings.Repeat("cd", 32)); !errors.Is(err, tools.ErrNotFound) {
		t.Fatalf("lookup of an unknown key: %v", err)
	}

	// Same key, different message: refused, nothing sent.
	_, err = wa.Execute(ctx, key, payload("+5511987654321", "lembrete_fatura"))
	var te *tools.Error
	if !errors.As(err, &te) || te.Status != http.StatusUnprocessableEntity || te.Class != tools.ClassDefinitive {
		t.Fatalf("reused key: %v", err)
	}
	if n := len(list(t, base, "")); n != 1 {
		t.Fatalf("%d messages after a refused reuse", n)
	}

	// Another key is another message, to the same number.
	if _, err := wa.Execute(ctx, "other", payload("+5511987654321", "pagamento_confirmado")); err != nil {
		t.Fatal(err)
	}
	if n := len(list(t, base, "?to=%2B55%2011%2098765-4321")); n != 2 {
		t.Fatalf("filter by to: %d", n)
	}
}

func TestReplayHeaderAndScopes(t *testing.T) {
	t.Parallel()
	_, base := start(t, cloudapi.Config{})
	body := `{"to":"+5511987654321","template":"pagamento_confirmado","language":"pt_BR"}`
	a, err := do(t, "POST", base+"/v1/messages", "acct-a", "k1", body)
	if err != nil || a.status != 200 || a.header.Get("Idempotent-Replayed") != "" {
		t.Fatalf("%+v %v", a, err)
	}
	// White space and key order do not make another request.
	b, err := do(t, "POST", base+"/v1/messages", "acct-a", "k1", `{ "language":"pt_BR", "template":"pagamento_confirmado", "to":"+5511987654321" }`)
	if err != nil || b.status != 200 || b.body != a.body || b.header.Get("Idempotent-Replayed") != "true" {
		t.Fatalf("replay %+v %v", b, err)
	}
	c, err := do(t, "POST", base+"/v1/messages", "acct-b", "k1", body)
	if err != nil || c.status != 200 || c.body == a.body {
		t.Fatalf("other account, same key: %+v %v", c, err)
	}
	mine, err := do(t, "GET", base+"/v1/messages", "acct-b", "", "")
	var l listed
	if err != nil || json.Unmarshal([]byte(mine.body), &l) != nil || len(l.Data) != 1 {
		t.Fatalf("GET /v1/messages: %+v %v", mine, err)
	}
	for _, tc := range []struct {
		name, token, key, body string
		status                 int
	}{
		{"no token", "", "k2", body, 401},
		{"no key", "acct-a", "", body, 400},
		{"bad phone", "acct-a", "k3", `{"to":"call me","template":"x","language":"pt_BR"}`, 400},
		{"bad template", "acct-a", "k4", `{"to":"+5511987654321","template":"Pagamento Confirmado","language":"pt_BR"}`, 400},
		{"not json", "acct-a", "k5", `{"to":`, 400},
		{"no type", "acct-a", "k6", `{"to":"+5511987654321"}`, 400},
	} {
		got, err := do(t, "POST", base+"/v1/messages", tc.token, tc.key, tc.body)
		if err != nil || got.status != tc.status {
			t.Errorf("%s: %+v %v", tc.name, got, err)
		}
	}
	if n := len(list(t, base, "")); n != 2 {
		t.Fatalf("%d messages", n)
	}
}

func TestCloudAPIShape(t *testing.T) {
	t.Parallel()
	s, base := start(t, cloudapi.Config{Token: "EAAG"})
	url := base + "/v21.0/106540352242922/messages"
	tmpl := `{"messaging_product":"whatsapp","recipient_type":"individual","to":"5511987654321","type":"template",
		"template":{"name":"pagamento_confirmado","language":{"code":"pt_BR"},
		"components":[{"type":"body","parameters":[{"type":"text","text":"R$ 180,00"}]}]}}`
	text := `{"messaging_product":"whatsapp","to":"5511987654321","type":"text","text":{"body":"Pagamento confirmado."}}`

	// Without a key, as with the real API, every POST sends.
	for range 2 {
		if a, err := do(t, "POST", url, "EAAG", "", text); err != nil || a.status != 200 {
			t.Fatalf("%+v %v", a, err)
		}
	}
	// With one, it is deduplicated like the tools' endpoint.
	a, err := do(t, "POST", url, "EAAG", "k", tmpl)
	b, err2 := do(t, "POST", url, "EAAG", "k", tmpl)
	if err != nil || err2 != nil || a.status != 200 || a.body != b.body || !strings.Contains(a.body, `"message_status":"accepted"`) {
		t.Fatalf("%+v %+v %v %v", a, b, err, err2)
	}
	// The same key on the other path is another request.
	if c, err := do(t, "POST", base+"/v1/messages", "EAAG", "k", `{"to":"+5511987654321","template":"pagamento_confirmado","language":"pt_BR"}`); err != nil || c.status != 422 {
		t.Fatalf("cross-path reuse: %+v %v", c, err)
	}
	msgs := s.Messages()
	if len(msgs) != 3 || msgs[0].Type != "text" || msgs[0].Text != "Pagamento confirmado." || msgs[2].PhoneNumberID != "106540352242922" ||
		!strings.Contains(string(msgs[2].Components), "R$ 180,00") {
		t.Fatalf("%+v", msgs)
	}
	for name, tc := range map[string]struct {
		url, token, body string
		status           int
	}{
		"wrong token":     {url, "other", text, 401},
		"no product":      {url, "EAAG", `{"to":"5511987654321","type":"text","text":{"body":"x"}}`, 400},
		"no language":     {url, "EAAG", `{"messaging_product":"whatsapp","to":"5511987654321","type":"template","template":{"name":"x"}}`, 400},
		"image":           {url, "EAAG", `{"messaging_product":"whatsapp","to":"5511987654321","type":"image","image":{"id":"1"}}`, 400},
		"bad version":     {base + "/latest/1/messages", "EAAG", text, 400},
		"empty text body": {url, "EAAG", `{"messaging_product":"whatsapp","to":"5511987654321","type":"text","text":{"body":" "}}`, 400},
	} {
		got, err := do(t, "POST", tc.url, tc.token, "", tc.body)
		if err != nil || got.status != tc.status || !strings.Contains(got.body, `"error"`) {
			t.Errorf("%s: %+v %v", name, got, err)
		}
	}
}

func TestConcurrentDuplicatesSendOnce(t *testing.T) {
	t.Parallel()
	s, base := start(t, cloudapi.Config{})
	wa := tool(t, base, "tok")
	var wg sync.WaitGroup
	bodies := make([]string, 32)
	for i := range bodies {
		wg.Go(func() {
			b, err := wa.Execute(context.Background(), "same-key", payload("+5511987654321", "pagamento_confirmado"))
			if err != nil {
				t.Error(err)
			}
			bodies[i] = string(b)
		})
	}
	wg.Wait()
	for _, b := range bodies[1:] {
		if b != bodies[0] {
			t.Fatalf("different answers for one key: %s vs %s", b, bodies[0])
		}
	}
	if n := len(s.Messages()); n != 1 {
		t.Fatalf("%d messages for one key", n)
	}
}

func TestFaults(t *testing.T) {
	t.Parallel()
	s, base := start(t, cloudapi.Config{})
	body := `{"to":"+5511987654321","template":"pagamento_confirmado","language":"pt_BR"}`
	post := func(key string, hdr ...string) (answer, error) {
		return do(t, "POST", base+"/v1/messages", "tok", key, body, hdr...)
	}

	// fail-before: nothing sent, a retry sends.
	if a, err := post("k-before", fault.Header, "fail-before"); err != nil || a.status != 500 || len(s.Messages()) != 0 {
		t.Fatalf("fail-before: %+v %v", a, err)
	}
	if a, err := post("k-before"); err != nil || a.status != 200 || a.header.Get("Idempotent-Replayed") != "" {
		t.Fatalf("retry after fail-before: %+v %v", a, err)
	}

	// fail-after: sent although the answer says 500; the retry gets the
	// stored answer instead of a second message.
	if a, err := post("k-after", fault.Header, "fail-after"); err != nil || a.status != 500 || len(s.Messages()) != 2 {
		t.Fatalf("fail-after: %+v %v", a, err)
	}
	if a, err := post("k-after"); err != nil || a.status != 200 || a.header.Get("Idempotent-Replayed") != "true" {
		t.Fatalf("retry after fail-after: %+v %v", a, err)
	}

	// drop-after: no answer at all, but the message exists.
	if a, err := post("k-drop", fault.Header, "drop-after"); err == nil {
		t.Fatalf("drop-after answered %+v", a)
	}
	if a, err := post("k-drop"); err != nil || a.status != 200 || a.header.Get("Idempotent-Replayed") != "true" || len(s.Messages()) != 3 {
		t.Fatalf("retry after drop-after: %+v %v", a, err)
	}

	// delay: slow to start.
	t0 := time.Now()
	if a, err := post("k-delay", fault.Header, "delay=80ms"); err != nil || a.status != 200 || time.Since(t0) < 80*time.Millisecond {
		t.Fatalf("delay: %+v %v after %v", a, err, time.Since(t0))
	}
	if a, err := post("k-bad", fault.Header, "explode"); err != nil || a.status != 400 {
		t.Fatalf("bad fault spec: %+v %v", a, err)
	}
	if n := len(list(t, base, "")); n != 4 {
		t.Fatalf("%d messages", n)
	}
}

func TestProcessFault(t *testing.T) {
	t.Parallel()
	s, base := start(t, cloudapi.Config{Fault: fault.Spec{FailAfter: true}})
	wa := tool(t, base, "tok")
	_, err := wa.Execute(context.Background(), "k", payload("+5511987654321", "pagamento_confirmado"))
	var te *tools.Error
	if !errors.As(err, &te) || te.Class != tools.ClassUncertain {
		t.Fatalf("fail-after should look uncertain to the tool: %v", err)
	}
	// The reconciler asks, and learns the message went out.
	if b, err := wa.Lookup(context.Background(), "k"); err != nil || !strings.Contains(string(b), "wamid.") {
		t.Fatalf("lookup %s %v", b, err)
	}
	// GETs are not faulted; DELETE resets.
	if len(list(t, base, "")) != 1 {
		t.Fatal("message missing")
	}
	if a, err := do(t, "DELETE", base+"/_sandbox/messages", "", "", ""); err != nil || a.status != 204 || len(s.Messages()) != 0 {
		t.Fatalf("reset %+v %v", a, err)
	}
	if _, err := cloudapi.New(cloudapi.Config{FaultRate: 1.5}); err == nil {
		t.Fatal("FaultRate 1.5 accepted")
	}
}

func sendCloud(t *testing.T, base, key, body string) (int, []byte) {
	t.Helper()
	req, _ := http.NewRequest(http.MethodPost, base+"/v23.0/106540352242922/messages", strings.NewReader(body))
	req.Header.Set("Authorization", "Bearer tok")
	req.Header.Set("Content-Type", "application/json")
	if key != "" {
		req.Header.Set("Idempotency-Key", key)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, b
}

// TestStatusWebhooksAndRecipients: BSUID and group recipients are
// accepted; Status gives the status webhook in Meta's shape (the callback
// data carried back, errors[] on failed); a failed message frees its key,
// so the same key sends again, and only then.
func TestStatusWebhooksAndRecipients(t *testing.T) {
	t.Parallel()
	s, base := start(t, cloudapi.Config{})
	const text = `{"messaging_product":"whatsapp","recipient_type":"individual","recipient":"US.13491208655302741918","type":"text","text":{"body":"oi"},"biz_opaque_callback_data":"K1"}`
	code, body := sendCloud(t, base, "K1", text)
	if code != 200 {
		t.Fatalf("BSUID send: %d %s", code, body)
	}
	if code, _ := sendCloud(t, base, "K1", text); code != 200 || len(s.Messages()) != 1 {
		t.Fatalf("same key again: %d, %d messages", code, len(s.Messages()))
	}
	if code, body := sendCloud(t, base, "", `{"messaging_product":"whatsapp","recipient_type":"group","to":"G1","type":"text","text":{"body":"oi"}}`); code != 200 {
		t.Fatalf("group send: %d %s", code, body)
	}
	m := s.Messages()[0]
	if m.UserID != "US.13491208655302741918" || m.CallbackData != "K1" || s.Messages()[1].GroupID != "G1" {
		t.Fatalf("stored %+v", s.Messages())
	}
	wh, err := s.Status(m.ID, cloudapi.StatusFailed, 131000, "")
	if err != nil {
		t.Fatal(err)
	}
	var p struct {
		Entry []struct {
			Changes []struct {
				Field string
				Value struct {
					Statuses []struct {
						ID, Status string
						Callback   string `json:"biz_opaque_callback_data"`
						Errors     []struct{ Code int }
					}
				}
			}
		}
	}
	if err := json.Unmarshal(wh, &p); err != nil {
		t.Fatal(err)
	}
	st := p.Entry[0].Changes[0].Value.Statuses[0]
	if p.Entry[0].Changes[0].Field != "messages" || st.ID != m.ID || st.Status != "failed" || st.Callback != "K1" || len(st.Errors) != 1 || st.Errors[0].Code != 131000 {
		t.Fatalf("status webhook %s", wh)
	}
	if !strings.Contains(string(wh), `"recipient_user_id":"US.13491208655302741918"`) {
		t.Errorf("no recipient_user_id: %s", wh)
	}
	if code, _ := sendCloud(t, base, "K1", text); code != 200 || len(s.Messages()) != 3 {
		t.Fatalf("after failed, the same key: %d, %d messages; want a new message", code, len(s.Messages()))
	}
	if _, err := s.Status(m.ID, "played", 0, ""); err == nil {
		t.Error("unknown status accepted")
	}
}
