package psp_test

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/retrysafe/retrysafe/internal/pgtest"
	"github.com/retrysafe/retrysafe/internal/testutil"
	"github.com/retrysafe/retrysafe/sandbox/psp"
)

func TestMain(m *testing.M) { pgtest.Main(m) }

const chargeBody = `{"amount_cents":1000,"pix_key":"+5511987654321","pix_key_type":"phone","description":"Fatura 42"}`

// newPSP gives a test its own schema, migrated for the PSP, and a server.
func newPSP(tb testing.TB, maxConns int32, cfg psp.Config) (*psp.Server, *pgxpool.Pool, string) {
	tb.Helper()
	pool, schema := pgtest.Schema(tb, &pgtest.Opts{MaxConns: maxConns})
	if err := psp.Migrate(context.Background(), pool, schema); err != nil {
		tb.Fatal(err)
	}
	srv, err := psp.New(pool, cfg)
	if err != nil {
		tb.Fatal(err)
	}
	return srv, pool, schema
}

type result struct {
	status   int
	body     string
	header   http.Header
	replayed bool
}

func (r result) charge(tb testing.TB) psp.Charge {
	tb.Helper()
	var c psp.Charge
	if err := json.Unmarshal([]byte(r.body), &c); err != nil || c.ID == "" {
		tb.Fatalf("not a charge (%d): %s", r.status, r.body)
	}
	return c
}

func request(h http.Handler, method, target, token, key, body string, header ...string) result {
	var rd io.Reader
	if body != "" {
		rd = strings.NewReader(body)
	}
	req := httptest.NewRequest(method, target, rd)
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	if key != "" {
		req.Header.Set("Idempotency-Key", key)
	}
	for i := 0; i+1 < len(header); i += 2 {
		req.Header.Set(header[i], header[i+1])
	}
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, req)
	return result{rec.Code, rec.Body.String(), rec.Header(), rec.Header().Get("Idempotent-Replayed") == "true"}
}

func postCharge(h http.Handler, token, key, body string, header ...string) result {
	return request(h, http.MethodPost, "/v1/pix/charges", token, key, body, header...)
}

// charges lists the merchant's charges through the API, the way tests
// count executions.
func charges(tb testing.TB, h http.Handler, token string) []psp.Charge {
	tb.Helper()
	r := request(h, http.MethodGet, "/v1/pix/charges", token, "", "")
	if r.status != http.StatusOK {
		tb.Fatalf("list: %d %s", r.status, r.body)
	}
	var list struct {
		Data []psp.Charge `json:"data"`
	}
	if err := json.Unmarshal([]byte(r.body), &list); err != nil {
		tb.Fatal(err)
	}
	return list.Data
}

// fire sends n charge requests with one key at once, released together.
func fire(h http.Handler, n int, token, key, body string) []result {
	out := make([]result, n)
	testutil.Together(n, func(i int) { out[i] = postCharge(h, token, key, body) })
	return out
}
