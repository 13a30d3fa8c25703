package idempotency_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/retrysafe/retrysafe/idempotency"
	"github.com/retrysafe/retrysafe/internal/pgtest"
	"github.com/retrysafe/retrysafe/internal/testutil"
)

func TestMain(m *testing.M) {
	if mode := os.Getenv(childEnv); mode != "" {
		os.Exit(childMain(mode)) // a process the crash tests kill; see crash_test.go
	}
	pgtest.Main(m)
}

func tenantFromHeader(r *http.Request) (string, error) {
	t := r.Header.Get("X-Tenant")
	if t == "" {
		return "", fmt.Errorf("no X-Tenant")
	}
	return t, nil
}

// env is one test's schema, pool and middleware.
type env struct {
	pool   *pgxpool.Pool
	schema string
	mw     *idempotency.Middleware
}

const effectsDDL = `CREATE TABLE effects (
	id     bigserial PRIMARY KEY,
	tenant text NOT NULL,
	key    text NOT NULL,
	amount int  NOT NULL)`

func newEnv(tb testing.TB, maxConns int32, cfg idempotency.Config) *env {
	tb.Helper()
	pool, schema := pgtest.Schema(tb, &pgtest.Opts{MaxConns: maxConns})
	if _, err := pool.Exec(context.Background(), effectsDDL); err != nil {
		tb.Fatal(err)
	}
	if cfg.Tenant == nil {
		cfg.Tenant = tenantFromHeader
	}
	mw, err := idempotency.New(pool, cfg)
	if err != nil {
		tb.Fatal(err)
	}
	return &env{pool: pool, schema: schema, mw: mw}
}

// bothModes is one route per mode, with the effect handlers; the two
// operations keep their keys apart.
func (e *env) bothModes() []http.Handler {
	return []http.Handler{
		e.mw.Transactional(idempotency.Route{Operation: "tx"}, effectTx),
		e.mw.Reservation(idempotency.Route{Operation: "res"}, effectPlain(e.pool)),
	}
}

type effectReq struct {
	Amount int `json:"amount"`
}

// effectTx is a transactional handler with a real effect: a row in
// effects. amount < 0 answers 422 and 0 answers 500, both after writing.
func effectTx(w http.ResponseWriter, r *http.Request, tx pgx.Tx) {
	in, id, ok := insertEffect(w, r, tx)
	if !ok {
		return
	}
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Location", fmt.Sprintf("/effects/%d", id))
	w.Header().Set("X-Not-Stored", "1")
	switch {
	case in.Amount < 0:
		w.WriteHeader(http.StatusUnprocessableEntity)
	case in.Amount == 0:
		w.WriteHeader(http.StatusInternalServerError)
	default:
		w.WriteHeader(http.StatusCreated)
	}
	writeEffect(w, r, id, in)
}

// effectPlain is the reservation-mode twin of effectTx: its effect is
// committed on its own (as a provider call would be).
func effectPlain(pool *pgxpool.Pool) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		in, id, ok := insertEffect(w, r, pool)
		if !ok {
			return
		}
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusCreated)
		writeEffect(w, r, id, in)
	})
}

// insertEffect writes the request's effect through q, or answers 400 (bad
// JSON) or 500 (the insert failed) and returns ok false.
func insertEffect(w http.ResponseWriter, r *http.Request, q interface {
	QueryRow(context.Context, string, ...any) pgx.Row
}) (in effectReq, id int64, ok bool) {
	if err := json.NewDecoder(r.Body).Decode(&in); err != nil {
		http.Error(w, "bad json", http.StatusBadRequest)
		return in, 0, false
	}
	info, _ := idempotency.FromContext(r.Context())
	err := q.QueryRow(r.Context(), `INSERT INTO effects (tenant, key, amount) VALUES ($1, $2, $3) RETURNING id`,
		info.Tenant, info.Key, in.Amount).Scan(&id)
	if err != nil {
		http.Error(w, err.Error(), http.StatusInternalServerError)
		return in, 0, false
	}
	return in, id, true
}

func writeEffect(w http.ResponseWriter, r *http.Request, id int64, in effectReq) {
	info, _ := idempotency.FromContext(r.Context())
	fmt.Fprintf(w, `{"id":%d,"amount":%d,"attempt":%d}`, id, in.Amount, info.Attempt)
}

type result struct {
	status   int
	body     string
	header   http.Header
	replayed bool
}

func do(h http.Handler, tenant, key, body string) result {
	return doCtx(context.Background(), h, tenant, key, body)
}

// doCtx is do with the request's context.
func doCtx(ctx context.Context, h http.Handler, tenant, key, body string) result {
	req := httptest.NewRequestWithContext(ctx, http.MethodPost, "/effects", strings.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	if tenant != "" {
		req.Header.Set("X-Tenant", tenant)
	}
	if key != "" {
		req.Header.Set("Idempotency-Key", key)
	}
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, req)
	return result{
		status:   rec.Code,
		body:     rec.Body.String(),
		header:   rec.Header(),
		replayed: rec.Header().Get("Idempotent-Replayed") == "true",
	}
}

// fire sends n requests at once (released together by a barrier) and
// returns every answer.
func fire(h http.Handler, n int, tenant, key, body string) []result {
	out := make([]result, n)
	testutil.Together(n, func(i int) { out[i] = do(h, tenant, key, body) })
	return out
}

func (e *env) count(tb testing.TB, query string, args ...any) int {
	tb.Helper()
	var n int
	if err := e.pool.QueryRow(context.Background(), query, args...).Scan(&n); err != nil {
		tb.Fatal(err)
	}
	return n
}

// mustRows fails tb unless the effects table holds effects rows and
// idempotency_requests keys rows (a negative count is not checked); why
// says what the counts are about.
func (e *env) mustRows(tb testing.TB, effects, keys int, why string) {
	tb.Helper()
	if n := e.effects(tb); effects >= 0 && n != effects {
		tb.Fatalf("%s: %d effects, want %d", why, n, effects)
	}
	if n := e.keys(tb); keys >= 0 && n != keys {
		tb.Fatalf("%s: %d keys, want %d", why, n, keys)
	}
}

func (e *env) effects(tb testing.TB) int {
	tb.Helper()
	return e.count(tb, `SELECT count(*) FROM effects`)
}

func (e *env) keys(tb testing.TB) int {
	tb.Helper()
	return e.count(tb, `SELECT count(*) FROM idempotency_requests`)
}

func mustProblem(tb testing.TB, r result, status int) {
	tb.Helper()
	if r.status != status {
		tb.Fatalf("status %d, want %d (body %s)", r.status, status, r.body)
	}
	if ct := r.header.Get("Content-Type"); ct != "application/problem+json" {
		tb.Fatalf("Content-Type %q, want application/problem+json", ct)
	}
	var p idempotency.Problem
	if err := json.Unmarshal([]byte(r.body), &p); err != nil || p.Status != status || p.Type == "" || p.Title == "" {
		tb.Fatalf("not a problem document for %d: %s (%v)", status, r.body, err)
	}
}
