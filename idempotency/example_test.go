package idempotency_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log"
	"net/http"
	"net/http/httptest"
	"strings"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/retrysafe/retrysafe/idempotency"
	"github.com/retrysafe/retrysafe/internal/pgtest"
	"github.com/retrysafe/retrysafe/internal/testutil"
)

// A user's own POST /charges route made safe to retry. The tenant comes
// from authentication (here a bearer token standing for it), and the
// handler writes the charge through the transaction the middleware gives
// it, so the charge and the stored answer commit together: a client that
// sends the request again (its first answer was lost) gets the first
// answer back, and no second charge.
func Example() {
	ctx := context.Background()
	pool := examplePool() // in production: dbpool.Open(ctx, databaseURL, schema, 0), migrated with migrations.Migrate

	// --- the user code ---
	mw, err := idempotency.New(pool, idempotency.Config{
		Tenant: func(r *http.Request) (string, error) {
			tenant, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
			if !ok || tenant == "" {
				return "", errors.New("no bearer token")
			}
			return tenant, nil
		},
	})
	if err != nil {
		log.Fatal(err)
	}
	createCharge := func(w http.ResponseWriter, r *http.Request, tx pgx.Tx) {
		var in struct {
			AmountCents int64 `json:"amount_cents"`
		}
		if err := json.NewDecoder(r.Body).Decode(&in); err != nil || in.AmountCents <= 0 {
			http.Error(w, "amount_cents must be positive", http.StatusBadRequest) // stored and replayed too
			return
		}
		info, _ := idempotency.FromContext(r.Context())
		var id int64
		if err := tx.QueryRow(r.Context(), `INSERT INTO charges (tenant, amount_cents) VALUES ($1, $2) RETURNING id`,
			info.Tenant, in.AmountCents).Scan(&id); err != nil {
			http.Error(w, "could not create the charge", http.StatusInternalServerError)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusCreated)
		json.NewEncoder(w).Encode(map[string]any{"id": id, "amount_cents": in.AmountCents}) //nolint:errcheck
	}
	mux := http.NewServeMux()
	mux.Handle("POST /charges", mw.Transactional(idempotency.Route{Operation: "POST /charges"}, createCharge))
	go mw.RunPurger(ctx) // deletes keys past Config.Retention
	// --- end of user code ---

	srv := httptest.NewServer(mux) // in production: http.ListenAndServe
	defer srv.Close()
	post := func(key, body string) {
		req, _ := http.NewRequest(http.MethodPost, srv.URL+"/charges", strings.NewReader(body))
		req.Header.Set("Authorization", "Bearer acme")
		req.Header.Set("Idempotency-Key", key)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			log.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		fmt.Println(resp.StatusCode, resp.Header.Get("Content-Type"), resp.Header.Get("Idempotent-Replayed"), strings.TrimSpace(string(b)))
	}
	post("order-42", `{"amount_cents": 1800}`)
	post("order-42", `{"amount_cents":1800}`) // the retry: the same request, spaced differently
	post("order-42", `{"amount_cents":2500}`) // the key reused for another request

	var charges int
	_ = pool.QueryRow(ctx, `SELECT count(*) FROM charges`).Scan(&charges)
	fmt.Println("charges:", charges)
	// Output:
	// 201 application/json  {"amount_cents":1800,"id":1}
	// 201 application/json true {"amount_cents":1800,"id":1}
	// 422 application/problem+json  {"type":"https://github.com/retrysafe/retrysafe/blob/main/docs/problems.md#idempotency-key-reused","title":"Idempotency-Key reused with a different request","status":422,"detail":"This key was first used with a different method, path or body. Use a new key for a new request."}
	// charges: 1
}

// examplePool is a migrated schema of the test database with the user's
// own table.
func examplePool() *pgxpool.Pool {
	pool, _ := pgtest.Schema(testutil.ExampleTB{}, nil) // the package database is dropped at exit
	if _, err := pool.Exec(context.Background(),
		`CREATE TABLE charges (id bigserial PRIMARY KEY, tenant text NOT NULL, amount_cents bigint NOT NULL)`); err != nil {
		log.Fatal(err)
	}
	return pool
}

// A route whose effect leaves the database: the key is reserved (and
// committed) before the provider is called, and the provider receives the
// same key, so that a run repeated after a crash is deduplicated there.
func ExampleMiddleware_Reservation() {
	var mw *idempotency.Middleware // from idempotency.New
	sendSMS := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		info, _ := idempotency.FromContext(r.Context())
		req, _ := http.NewRequestWithContext(r.Context(), http.MethodPost, "https://sms.example/v1/messages", r.Body)
		req.Header.Set("Idempotency-Key", info.Tenant+":"+info.Key) // the provider deduplicates attempt 2
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			http.Error(w, "provider unreachable", http.StatusBadGateway)
			return
		}
		defer resp.Body.Close()
		w.WriteHeader(resp.StatusCode)
	})
	http.Handle("POST /sms", mw.Reservation(idempotency.Route{Operation: "POST /sms"}, sendSMS))
}
