package idempotency_test

import (
	"context"
	"encoding/json"
	"errors"
	"log"
	"net/http"
	"os"
	"strings"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/retrysafe/retrysafe/idempotency"
)

// A user's own POST route made safe to retry. The tenant comes from
// authentication (here a bearer token standing for it), and the handler
// writes its order through the transaction the middleware gives it, so the
// order and the stored answer commit together.
func Example() {
	ctx := context.Background()
	pool, err := pgxpool.New(ctx, os.Getenv("DATABASE_URL")) // schema migrated with migrations.Migrate
	if err != nil {
		log.Fatal(err)
	}
	defer pool.Close()

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

	createOrder := func(w http.ResponseWriter, r *http.Request, tx pgx.Tx) {
		var in struct {
			SKU string `json:"sku"`
		}
		if err := json.NewDecoder(r.Body).Decode(&in); err != nil || in.SKU == "" {
			http.Error(w, "sku required", http.StatusBadRequest) // stored and replayed too
			return
		}
		info, _ := idempotency.FromContext(r.Context())
		var id int64
		if err := tx.QueryRow(r.Context(),
			`INSERT INTO orders (tenant, sku) VALUES ($1, $2) RETURNING id`, info.Tenant, in.SKU).Scan(&id); err != nil {
			http.Error(w, "could not create order", http.StatusInternalServerError)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusCreated)
		json.NewEncoder(w).Encode(map[string]any{"id": id, "sku": in.SKU})
	}

	mux := http.NewServeMux()
	mux.Handle("POST /orders", mw.Transactional(idempotency.Route{Operation: "POST /orders"}, createOrder))

	go mw.RunPurger(ctx) // deletes keys past Config.Retention
	log.Fatal(http.ListenAndServe("127.0.0.1:8080", mux))
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
	http.Handle("POST /sms", mw.Reservation(idempotency.Route{Operation: "POST /sms", Wait: 0}, sendSMS))
}
