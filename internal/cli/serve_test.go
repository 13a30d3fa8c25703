package cli

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/retrysafe/retrysafe/dbpool"
	"github.com/retrysafe/retrysafe/internal/pgtest"
	"github.com/retrysafe/retrysafe/internal/testutil"
	"github.com/retrysafe/retrysafe/server/sidecar"
)

// The sidecar end to end, as an operator runs it: both binaries built,
// `retrysafe sandbox psp` and `retrysafe serve --max-conns 4` started as
// processes on the package database (distinct schemas), driven over HTTP.
func TestServeBlackBox(t *testing.T) {
	t.Parallel()
	bin := buildBinary(t)
	dbURL := pgtest.URL(t)
	const pspToken = "merchant-token-bb"
	psp, side, sideSchema := startSidecar(t, bin, dbURL, dbURL, "bb", "tenant-a=bb-token-a,tenant-b=bb-token-b", pspToken)

	client := &http.Client{Timeout: time.Minute, Transport: &http.Transport{MaxIdleConnsPerHost: 256}}
	call := func(method, url, token, body string) answer {
		t.Helper()
		return callHTTP(t, client, method, url, token, body)
	}
	execute := func(token, ref, fields string) answer {
		return call(http.MethodPost, side.URL+"/v1/tools/pix.charge/execute", token,
			`{"intent_ref":"`+ref+`","fields":`+fields+`,"source_ref":"wamid.`+randSuffix()+`"}`)
	}
	charges := func() []map[string]any {
		t.Helper()
		r := call(http.MethodGet, psp.URL+"/v1/pix/charges", pspToken, "")
		var out struct{ Data []map[string]any }
		if r.status != http.StatusOK || json.Unmarshal(r.body, &out) != nil {
			t.Fatalf("PSP list: HTTP %d %s", r.status, r.body)
		}
		return out.Data
	}
	pool, err := dbpool.Open(context.Background(), dbURL, sideSchema, 2)
	if err != nil {
		t.Fatal(err)
	}
	defer pool.Close()
	rows := func(table string) int {
		var n int
		if err := pool.QueryRow(context.Background(), "SELECT count(*) FROM "+table).Scan(&n); err != nil {
			t.Fatal(err)
		}
		return n
	}

	// Health and metrics answer.
	if r := call(http.MethodGet, side.URL+"/readyz", "", ""); r.status != http.StatusOK || !strings.Contains(string(r.body), `"status":"ok"`) {
		t.Fatalf("/readyz: HTTP %d %s", r.status, r.body)
	}
	if r := call(http.MethodGet, side.URL+"/healthz", "", ""); r.status != http.StatusOK {
		t.Fatalf("/healthz: HTTP %d", r.status)
	}
	if r := call(http.MethodGet, side.URL+"/metrics", "", ""); r.status != http.StatusOK || !strings.Contains(string(r.body), "go_goroutines") {
		t.Fatalf("/metrics: HTTP %d", r.status)
	}

	// 401 for a missing or unknown token; 400 for bad fields. Nothing is
	// written and nothing reaches the PSP.
	good := bbFields(`"180,00"`, "529.982.247-25")
	for _, tok := range []string{"", "bb-token-c", "bb-token-a2", "bb-token-"} {
		if r := execute(tok, "inv-bb-1", good); r.status != http.StatusUnauthorized {
			t.Fatalf("token %q: HTTP %d", tok, r.status)
		}
	}
	for _, fields := range []string{
		bbFields(`"cento e oitenta"`, "529.982.247-25"), // not an amount
		bbFields(`180.005`, "529.982.247-25"),           // sub-cent
		bbFields(`"1.800"`, "529.982.247-25"),           // ambiguous
		bbFields(`180`, "529.982.247-26"),               // CPF check digit
		`{"amount":"180,00"}`,                           // missing fields
	} {
		r := execute("bb-token-a", "inv-bb-1", fields)
		if r.status != http.StatusBadRequest || r.contentType != "application/problem+json" {
			t.Fatalf("fields %s: HTTP %d %s", fields, r.status, r.body)
		}
	}
	if r := call(http.MethodPost, side.URL+"/v1/tools/pix.refund/execute", "bb-token-a", `{"intent_ref":"x","fields":{}}`); r.status != http.StatusNotFound {
		t.Fatalf("unknown action: HTTP %d", r.status)
	}
	if n, a, c := rows("intents"), rows("actions"), len(charges()); n != 0 || a != 0 || c != 0 {
		t.Fatalf("after refused requests: %d intents, %d actions, %d charges; want none", n, a, c)
	}

	// 200 concurrent executions of one (tenant, ref, pix.charge), spelled
	// every way a model spells it: one charge, one key.
	spellings := []string{
		bbFields(`"180,00"`, "529.982.247-25"), bbFields(`"180.00"`, "52998224725"),
		bbFields(`180`, "529.982.247-25"), bbFields(`"R$ 180,00"`, "52998224725"),
		bbFields(`180.0`, "52998224725"), bbFields(`" 180,00 "`, " 529.982.247-25"),
	}
	replies := fanOut(200, func(i int) answer { return execute("bb-token-a", "inv-bb-1", spellings[i%len(spellings)]) })
	completed, inFlight, key1 := tally(t, replies, nil)
	cs := charges()
	if len(cs) != 1 || cs[0]["idempotency_key"] != key1 || cs[0]["amount_cents"] != float64(18000) {
		t.Fatalf("PSP charges after 200 callers: %v; want one of 18000 under %s", cs, key1)
	}
	t.Logf("200 equivalent callers: 1 charge, 1 key, %d completed, %d in_flight (409)", completed, inFlight)
	// Every caller that got an answer got that charge; every caller told
	// "in flight" gets it by retrying after Retry-After, and the retries
	// create nothing.
	chargeID := cs[0]["id"].(string)
	var retryConflicts atomic.Int64 // a retry may meet the lease again
	retried := fanOut(len(replies), func(i int) answer {
		r := replies[i]
		for deadline := time.Now().Add(30 * time.Second); r.status == http.StatusConflict && time.Now().Before(deadline); {
			secs, _ := strconv.Atoi(r.retryAfter)
			time.Sleep(min(time.Duration(secs)*time.Second, 2*time.Second))
			r = execute("bb-token-a", "inv-bb-1", spellings[i%len(spellings)])
			if r.status == http.StatusConflict {
				retryConflicts.Add(1)
			}
		}
		return r
	})
	for i, r := range retried {
		o := r.out
		if r.status != http.StatusOK || o.Status != "completed" || o.IdempotencyKey != key1 || !strings.Contains(string(o.Response), chargeID) {
			t.Fatalf("caller %d after retrying: HTTP %d %s", i, r.status, r.body)
		}
	}
	if n := len(charges()); n != 1 {
		t.Fatalf("%d charges after the retries", n)
	}
	t.Logf("after retrying on 409: all 200 callers completed with charge %s", chargeID)

	// The same with a quarter of the callers extracting another amount: one
	// charge, for the amount frozen first; the others report the field.
	amounts := []string{`"180,00"`, `"180.00"`, `180`, `"190,00"`}
	replies = fanOut(200, func(i int) answer {
		return execute("bb-token-a", "inv-bb-2", bbFields(amounts[i%4], "529.982.247-25"))
	})
	var view sidecar.IntentView
	if r := call(http.MethodGet, side.URL+"/v1/intents/inv-bb-2/pix.charge", "bb-token-a", ""); r.status != http.StatusOK || json.Unmarshal(r.body, &view) != nil {
		t.Fatalf("GET intent: HTTP %d %s", r.status, r.body)
	}
	frozen := view.Intent.Payload["amount"]
	divergentWant := func(i int) bool { return (frozen == "19000") != (i%4 == 3) }
	completed2, inFlight2, key2 := tally(t, replies, divergentWant)
	var divergent int
	for i := range replies {
		if divergentWant(i) {
			divergent++
		}
	}
	var mine []map[string]any
	for _, c := range charges() {
		if c["idempotency_key"] == key2 {
			mine = append(mine, c)
		}
	}
	if len(mine) != 1 || fmt.Sprint(mine[0]["amount_cents"]) != frozen || view.Intent.IdempotencyKey != key2 || view.Status != "completed" {
		t.Fatalf("charges under %s: %v; frozen amount %s, intent %+v", key2, mine, frozen, view)
	}
	t.Logf("200 callers, 50 with another amount: 1 charge of %s cents (frozen first), %d completed, %d in_flight, %d reported divergent_fields [amount]",
		frozen, completed2, inFlight2, divergent)

	// Tenant isolation: B can neither read A's intent nor act on it.
	if r := call(http.MethodGet, side.URL+"/v1/intents/inv-bb-1/pix.charge", "bb-token-b", ""); r.status != http.StatusNotFound || bytes.Contains(r.body, []byte(key1)) {
		t.Fatalf("B reads A's intent: HTTP %d %s", r.status, r.body)
	}
	ob := execute("bb-token-b", "inv-bb-1", bbFields(`"999,00"`, "52998224725")).out
	if !ob.Created || ob.Replayed || ob.IdempotencyKey == key1 || len(ob.DivergentFields) != 0 {
		t.Fatalf("B's execute of A's ref: %+v", ob)
	}
	if r := call(http.MethodGet, side.URL+"/v1/intents/inv-bb-1/pix.charge", "bb-token-a", ""); r.status != http.StatusOK ||
		json.Unmarshal(r.body, &view) != nil || view.Intent.IdempotencyKey != key1 || view.Intent.Payload["amount"] != "18000" {
		t.Fatalf("A's intent after B: %s", r.body)
	}
	if n := len(charges()); n != 3 {
		t.Fatalf("%d charges, want 3 (A's two, B's one)", n)
	}

	// The counters saw it, labelled by tenant, action and outcome only.
	metrics := string(call(http.MethodGet, side.URL+"/metrics", "", "").body)
	for series, want := range map[string]int{
		`retrysafe_in_flight_conflicts_total{action="pix.charge",tenant="tenant-a"}`:            inFlight + inFlight2 + int(retryConflicts.Load()),
		`retrysafe_divergences_total{action="pix.charge",tenant="tenant-a"}`:                    divergent,
		`retrysafe_executions_total{action="pix.charge",outcome="invalid",tenant="tenant-a"}`:   5,
		`retrysafe_executions_total{action="pix.charge",outcome="completed",tenant="tenant-b"}`: 1,
		`retrysafe_provider_call_duration_seconds_count{action="pix.charge",outcome="ok"}`:      3,
		`retrysafe_replays_total{action="pix.charge",outcome="completed",tenant="tenant-a"}`:    completed + inFlight + completed2 - 2,
	} {
		if got := seriesValue(metrics, series); got != fmt.Sprint(want) {
			t.Errorf("%s = %q, want %d", series, got, want)
		}
	}

	// The operator's view of the same intent, through the binary.
	out, err := exec.Command(bin, "inspect", "--database-url", dbURL, "--schema", sideSchema,
		"--tenant", "tenant-a", "--ref", "inv-bb-1", "--action", "pix.charge").CombinedOutput()
	if err != nil || !strings.Contains(string(out), key1) || !strings.Contains(string(out), "completed") {
		t.Fatalf("inspect: %v\n%s", err, out)
	}

	// SIGTERM: a clean exit, and no personal data in the sidecar's logs.
	if code := side.Stop(t); code != 0 {
		t.Fatalf("serve exited %d after SIGTERM:\n%s", code, side.Stderr.String())
	}
	logs := side.Stderr.String()
	if !strings.Contains(logs, "serve: stopped") {
		t.Errorf("no clean-stop line in the logs:\n%s", tail(logs))
	}
	for _, secret := range []string{"52998224725", "529.982.247-25", "cust-bb", "190,00", "999,00"} {
		if strings.Contains(logs, secret) {
			t.Errorf("the sidecar's logs contain %q", secret)
		}
	}
}

// --help on the operator commands, through the binary.
func TestServeBinaryHelp(t *testing.T) {
	t.Parallel()
	bin := buildBinary(t)
	for _, cmd := range []string{"serve", "inspect", "reconcile", "resolve"} {
		out, err := exec.Command(bin, cmd, "--help").Output()
		if err != nil || !strings.HasPrefix(string(out), "Usage: retrysafe "+cmd) || !strings.Contains(string(out), "Flags:") {
			t.Errorf("%s --help: %v\n%s", cmd, err, out)
		}
	}
}

func bbFields(amount, cpf string) string {
	return `{"customer_id":"cust-bb","amount":` + amount + `,"pix_key":"` + cpf + `","pix_key_type":"cpf","description":"fatura 7"}`
}

// answer is one HTTP answer, read whole; out is its body read as an
// execute answer (zero when it is not one, which the status checks catch).
type answer struct {
	status                  int
	retryAfter, contentType string
	body                    []byte
	out                     sidecar.ExecuteResponse
}

// startSidecar starts `sandbox psp` (the v1 flavour) on pspDB and `serve
// --migrate --max-conns 4` on serveDB, sending to it, each in a schema of
// its own named after prefix; tokens is serve's RETRYSAFE_API_TOKENS.
func startSidecar(t *testing.T, bin, pspDB, serveDB, prefix, tokens, pspToken string) (psp, side *testutil.Proc, sideSchema string) {
	t.Helper()
	pspSchema, sideSchema := scratchSchema(t, prefix+"_psp_"), scratchSchema(t, prefix+"_side_")
	psp = testutil.StartProc(t, bin, []string{"DATABASE_URL=" + pspDB},
		"sandbox", "psp", "--flavour", "v1", "--addr", "127.0.0.1:0", "--schema", pspSchema, "--max-conns", "4", "--log-level", "warn")
	side = testutil.StartProc(t, bin, []string{
		"DATABASE_URL=" + serveDB,
		"RETRYSAFE_API_TOKENS=" + tokens,
		"RETRYSAFE_PSP_URL=" + psp.URL,
		"RETRYSAFE_PSP_TOKEN=" + pspToken,
		"RETRYSAFE_HMAC_KEY=" + testSecret,
	}, "serve", "--addr", "127.0.0.1:0", "--schema", sideSchema, "--migrate", "--max-conns", "4")
	return psp, side, sideSchema
}

// callHTTP makes one request, with a bearer token unless empty, and
// reads the answer whole.
func callHTTP(t *testing.T, client *http.Client, method, url, token, body string) answer {
	t.Helper()
	var rd io.Reader
	if body != "" {
		rd = strings.NewReader(body)
	}
	req, _ := http.NewRequest(method, url, rd)
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := client.Do(req)
	if err != nil {
		t.Error(err)
		return answer{}
	}
	defer resp.Body.Close()
	a := answer{status: resp.StatusCode, retryAfter: resp.Header.Get("Retry-After"), contentType: resp.Header.Get("Content-Type")}
	a.body, _ = io.ReadAll(resp.Body)
	_ = json.Unmarshal(a.body, &a.out) // zero for bodies that are not execute answers
	return a
}

// fanOut makes n calls at once.
func fanOut(n int, f func(i int) answer) []answer {
	out := make([]answer, n)
	testutil.Together(n, func(i int) { out[i] = f(i) })
	return out
}

// tally checks that every reply is completed (200) or in_flight (409 with
// Retry-After) under one key, and that divergent_fields is [amount] exactly
// for the callers divergent says (none when nil).
func tally(t *testing.T, replies []answer, divergent func(int) bool) (completed, inFlight int, key string) {
	t.Helper()
	keys := map[string]bool{}
	for i, r := range replies {
		keys[r.out.IdempotencyKey] = true
		switch {
		case r.status == http.StatusOK && r.out.Status == "completed":
			completed++
		case r.status == http.StatusConflict && r.out.Status == "in_flight" && r.retryAfter != "":
			inFlight++
		default:
			t.Fatalf("caller %d: HTTP %d %s", i, r.status, r.body)
		}
		want := []string{}
		if divergent != nil && divergent(i) {
			want = []string{"amount"}
		}
		if !slices.Equal(r.out.DivergentFields, want) {
			t.Fatalf("caller %d: divergent_fields %v, want %v", i, r.out.DivergentFields, want)
		}
		key = r.out.IdempotencyKey
	}
	if len(keys) != 1 {
		t.Fatalf("%d distinct keys among the callers", len(keys))
	}
	return completed, inFlight, key
}

func seriesValue(metrics, series string) string {
	for _, line := range strings.Split(metrics, "\n") {
		if v, ok := strings.CutPrefix(line, series+" "); ok {
			return v
		}
	}
	return ""
}

// buildBinary builds cmd/retrysafe-lab: the engine's commands, which these
// tests run as a user would, beside the sandbox stand-ins they run them
// against.
func buildBinary(t *testing.T) string { return testutil.BuildBinary(t, "../../cmd/retrysafe-lab") }

// testutil.Proc is a retrysafe subprocess that printed "listening on URL".
// lockedBuffer collects what a command writes while the test reads it.
type lockedBuffer = testutil.LockedBuffer

func tail(s string) string {
	if len(s) > 4000 {
		return "..." + s[len(s)-4000:]
	}
	return s
}

func randSuffix() string {
	b := make([]byte, 4)
	rand.Read(b) //nolint:errcheck // never fails
	return hex.EncodeToString(b)
}

// scratchSchema names a schema of its own for a command under test, which
// creates it, and drops it when the test ends.
func scratchSchema(t *testing.T, prefix string) string { return pgtest.SchemaName(t, prefix) }
