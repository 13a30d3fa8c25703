package cli

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/retrysafe/retrysafe/agent"
	"github.com/retrysafe/retrysafe/dbpool"
	"github.com/retrysafe/retrysafe/internal/pgtest"
	"github.com/retrysafe/retrysafe/internal/testutil"
	"github.com/retrysafe/retrysafe/tools/apipix"
	"github.com/retrysafe/retrysafe/webhook"
)

func TestAPIPixToolsFromSettings(t *testing.T) {
	t.Parallel()
	base := map[string]string{
		"RETRYSAFE_HMAC_KEY": strings.Repeat("k", 32), "RETRYSAFE_APIPIX_URL": "https://pix.example.com/api",
		"RETRYSAFE_APIPIX_CLIENT_ID": "id", "RETRYSAFE_APIPIX_CLIENT_SECRET": "secret", "RETRYSAFE_APIPIX_CHAVE": "k@example.com",
	}
	build := func(vars map[string]string) error {
		e, _, _ := testEnv(strings.NewReader(""), vars)
		fs := NewFlagSet(e, "t", "t", "t")
		var rt runtimeFlags
		rt.register(fs, e)
		if err := fs.Parse(nil); err != nil {
			return err
		}
		reg, err := rt.registry()
		if err != nil {
			return err
		}
		for _, n := range []string{apipix.CobName, apipix.RefundName} {
			if _, ok := reg.Tool(n); !ok {
				t.Errorf("%s not registered", n)
			}
		}
		return nil
	}
	if err := build(base); err != nil {
		t.Fatal(err)
	}
	for _, drop := range []string{"RETRYSAFE_APIPIX_CLIENT_SECRET", "RETRYSAFE_APIPIX_CHAVE"} {
		vars := map[string]string{}
		for k, v := range base {
			vars[k] = v
		}
		delete(vars, drop)
		err := build(vars)
		if err == nil || !strings.Contains(err.Error(), drop) {
			t.Errorf("without %s: %v", drop, err)
		}
	}
}

// TestServeAPIPixBlackBox runs the billing story on API Pix through real
// processes: `sandbox psp --flavour apipix` and `serve` with the pix.cob
// tool and the Pix callback. The callback URL is registered the way a
// deployment registers it (PUT /webhook/{chave}, query-string token); the
// customer pays; the callback, and a redelivery of it, make one effect and
// one receipt owed.
func TestServeAPIPixBlackBox(t *testing.T) {
	t.Parallel()
	bin := buildBinary(t)
	dbURL := pgtest.URL(t)
	schema := "bb_pix_" + randSuffix()
	const (
		clientID, clientSecret = "bb-client", "bb-client-secret-0123"
		chave                  = "7d9f0335-8dcc-4054-9bf9-0dbd61d36906"
		hookSecret             = "bb-pix-hook-secret-0123456789"
		apiToken               = "bb-pix-token"
	)
	psp := testutil.StartProc(t, bin, nil, "sandbox", "psp", "--flavour", "apipix", "--addr", "127.0.0.1:0",
		"--client-id", clientID, "--client-secret", clientSecret, "--log-level", "warn")
	side := testutil.StartProc(t, bin, []string{
		"DATABASE_URL=" + dbURL,
		"RETRYSAFE_API_TOKENS=tenant-a=" + apiToken,
		"RETRYSAFE_HMAC_KEY=" + testSecret,
		"RETRYSAFE_APIPIX_URL=" + psp.URL + "/api",
		"RETRYSAFE_APIPIX_CLIENT_ID=" + clientID,
		"RETRYSAFE_APIPIX_CLIENT_SECRET=" + clientSecret,
		"RETRYSAFE_APIPIX_CHAVE=" + chave,
		"RETRYSAFE_WHATSAPP_URL=http://127.0.0.1:1", // receipts are owed (outbox), not sent: no worker here
		"RETRYSAFE_PIX_WEBHOOK_SECRETS=sandbox=" + hookSecret,
		"RETRYSAFE_PIX_WEBHOOK_TENANTS=sandbox=tenant-a",
	}, "serve", "--addr", "127.0.0.1:0", "--schema", schema, "--migrate", "--max-conns", "4")
	if strings.Contains(side.Stderr.String(), clientSecret) || strings.Contains(side.Stderr.String(), hookSecret) {
		t.Fatal("serve logged a secret")
	}

	client := &http.Client{Timeout: time.Minute}
	call := func(method, url, auth, body string) (int, []byte) {
		t.Helper()
		req, _ := http.NewRequest(method, url, strings.NewReader(body))
		if auth != "" {
			req.Header.Set("Authorization", auth)
		}
		if body != "" {
			req.Header.Set("Content-Type", "application/json")
		}
		resp, err := client.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, b
	}
	pool, err := dbpool.Open(context.Background(), dbURL, schema, 2)
	if err != nil {
		t.Fatal(err)
	}
	defer pool.Close()
	stats := func() map[string]int {
		_, b := call(http.MethodGet, psp.URL+"/sandbox/stats", "", "")
		var st map[string]int
		json.Unmarshal(b, &st)
		return st
	}
	waitFor := func(what string, cond func() bool) {
		t.Helper()
		deadline := time.Now().Add(30 * time.Second)
		for !cond() {
			if time.Now().After(deadline) {
				t.Fatalf("%s: not after 30s; psp %v\nserve: %s", what, stats(), side.Stderr.String())
			}
			time.Sleep(50 * time.Millisecond)
		}
	}

	// Register the callback as a deployment does.
	tokReq, _ := http.NewRequest(http.MethodPost, psp.URL+"/oauth/token", strings.NewReader("grant_type=client_credentials"))
	tokReq.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	tokReq.SetBasicAuth(clientID, clientSecret)
	resp, err := client.Do(tokReq)
	if err != nil {
		t.Fatal(err)
	}
	var tok struct {
		AccessToken string `json:"access_token"`
	}
	json.NewDecoder(resp.Body).Decode(&tok)
	resp.Body.Close()
	hookURL := side.URL + webhook.PixPathPrefix + "sandbox?hmac=" + webhook.PixURLToken(hookSecret, "sandbox") + "&ignorar="
	if st, b := call(http.MethodPut, psp.URL+"/api/webhook/"+chave, "Bearer "+tok.AccessToken, `{"webhookUrl":"`+hookURL+`"}`); st != 200 {
		t.Fatalf("PUT /webhook: %d %s", st, b)
	}

	// The charge, twice: one cob.
	body := `{"intent_ref":"NF-2026-000123","fields":{"amount":"180,00","payer_tax_id":"529.982.247-25","payer_name":"Fulano de Tal"}}`
	var out struct {
		Status   string          `json:"status"`
		Key      string          `json:"idempotency_key"`
		Replayed bool            `json:"replayed"`
		Response json.RawMessage `json:"response"`
	}
	for i := range 2 {
		st, b := call(http.MethodPost, side.URL+"/v1/tools/pix.cob/execute", "Bearer "+apiToken, body)
		if st != 200 || json.Unmarshal(b, &out) != nil || out.Status != "completed" || out.Replayed != (i == 1) {
			t.Fatalf("execute %d: %d %s", i, st, b)
		}
	}
	txid, err := apipix.TxID(out.Key)
	if err != nil || !strings.Contains(string(out.Response), `"txid":"`+txid+`"`) {
		t.Fatalf("response %s does not carry txid %s (%v)", out.Response, txid, err)
	}
	if err := agent.UpsertConversation(context.Background(), pool, agent.Conversation{Tenant: "tenant-a", ID: "5511987654321",
		CustomerID: "C-42", InvoiceRef: "NF-2026-000123", AmountDueCents: 18000}); err != nil {
		t.Fatal(err)
	}

	// The customer pays; the PSP calls back, then again.
	st, b := call(http.MethodPost, psp.URL+"/sandbox/cob/"+txid+"/pagar", "", "")
	var pix struct {
		EndToEndID string `json:"endToEndId"`
	}
	if st != 201 || json.Unmarshal(b, &pix) != nil {
		t.Fatalf("pay: %d %s", st, b)
	}
	waitFor("the callback", func() bool { return stats()["callbacks"] >= 1 })
	if st, _ := call(http.MethodPost, psp.URL+"/sandbox/pix/"+pix.EndToEndID+"/reenviar", "", ""); st != 202 {
		t.Fatalf("redeliver: %d", st)
	}
	waitFor("the redelivered callback", func() bool { return stats()["callbacks"] >= 2 })
	final := stats()
	ctx := context.Background()
	paid, err := webhook.CountEffects(ctx, pool, "tenant-a", webhook.OrderPaid)
	if err != nil {
		t.Fatal(err)
	}
	notes, err := webhook.ListNotifications(ctx, pool, webhook.ListParams{Tenant: "tenant-a"})
	if err != nil {
		t.Fatal(err)
	}
	verdicts, err := webhook.CountVerdicts(ctx, pool, "tenant-a")
	if err != nil {
		t.Fatal(err)
	}
	effects, owed, dup := paid.Effects, len(notes), verdicts[webhook.VerdictDuplicate]
	t.Logf("psp: cob_created=%d cob_puts=%d cob_overwritten=%d callbacks=%d; serve: effects=%d receipts_owed=%d duplicates=%d",
		final["cob_created"], final["cob_puts"], final["cob_overwritten"], final["callbacks"], effects, owed, dup)
	if final["cob_created"] != 1 || final["cob_overwritten"] != 0 || final["callback_fails"] != 0 || effects != 1 || owed != 1 || dup != 1 {
		t.Fatalf("psp %v, effects %d, receipts owed %d, duplicates %d", final, effects, owed, dup)
	}
	if o, err := webhook.GetOrder(ctx, pool, "tenant-a", "NF-2026-000123"); err != nil || o.Status != "paid" {
		t.Fatalf("order: %+v %v", o, err)
	}
}
