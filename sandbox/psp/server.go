package psp

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"strings"
	"sync"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/retrysafe/retrysafe/idempotency"
	"github.com/retrysafe/retrysafe/sandbox/fault"
)

// ChargeOperation is the idempotency scope's operation for charge creation.
const ChargeOperation = "POST /v1/pix/charges"

// Server is the sandbox PSP.
type Server struct {
	pool    *pgxpool.Pool
	cfg     Config
	mw      *idempotency.Middleware
	handler http.Handler
	kick    chan struct{} // wakes the webhook loop after a charge
	reqlog  requestLog
}

// New returns a Server on pool, whose schema Migrate has prepared.
func New(pool *pgxpool.Pool, cfg Config) (*Server, error) {
	cfg = cfg.WithDefaults()
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	mw, err := idempotency.New(pool, cfg.Idempotency)
	if err != nil {
		return nil, err
	}
	s := &Server{pool: pool, cfg: cfg, mw: mw, kick: make(chan struct{}, 1)}

	mux := http.NewServeMux()
	create := mw.Transactional(idempotency.Route{Operation: ChargeOperation, Wait: cfg.IdempotencyWait}, s.createCharge)
	mux.HandleFunc("POST /v1/pix/charges", func(w http.ResponseWriter, r *http.Request) {
		create.ServeHTTP(w, r)
		// The charge's event is visible only now that the middleware has
		// committed: nudge the webhook loop instead of waiting for its poll.
		s.wake()
	})
	mux.HandleFunc("GET /v1/pix/charges", s.listCharges)
	mux.HandleFunc("GET /v1/pix/charges/{id}", s.getCharge)
	mux.HandleFunc("GET /_sandbox/requests", s.reqlog.serve)
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		io.WriteString(w, `{"status":"ok"}`+"\n") //nolint:errcheck
	})
	inj := fault.Injector{
		Default: cfg.Fault,
		Rate:    cfg.FaultRate,
		Applies: func(r *http.Request) bool { return r.Method == http.MethodPost },
	}
	s.handler = s.reqlog.wrap(inj.Wrap(mux))
	return s, nil
}

// Handler serves the API.
func (s *Server) Handler() http.Handler { return s.handler }

// Middleware is the idempotency middleware in front of charge creation.
func (s *Server) Middleware() *idempotency.Middleware { return s.mw }

// Run delivers webhooks and purges expired idempotency keys until ctx ends.
func (s *Server) Run(ctx context.Context) {
	var wg sync.WaitGroup
	wg.Add(2)
	go func() { defer wg.Done(); s.mw.RunPurger(ctx) }()
	go func() { defer wg.Done(); s.runWebhooks(ctx) }()
	wg.Wait()
}

// merchantOf is the tenant hook: the bearer token names the merchant.
func merchantOf(r *http.Request) (string, error) {
	tok, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
	tok = strings.TrimSpace(tok)
	if !ok || tok == "" || len(tok) > 255 {
		return "", errors.New("missing bearer token")
	}
	for i := 0; i < len(tok); i++ {
		if tok[i] <= 0x20 || tok[i] > 0x7e {
			return "", errors.New("bad bearer token")
		}
	}
	return tok, nil
}

func (s *Server) createCharge(w http.ResponseWriter, r *http.Request, tx pgx.Tx) {
	ctx := r.Context()
	info, _ := idempotency.FromContext(ctx) // always there: the route requires a key
	body, err := io.ReadAll(r.Body)
	if err != nil {
		badRequest("body_invalid", "", "The request body could not be read.").write(w)
		return
	}
	in, apiErr := ParseChargeRequest(body)
	if apiErr != nil {
		apiErr.write(w) // stored with the key, like a PSP stores its first answer
		return
	}
	c, err := ChargeInsert(ctx, tx, info.Tenant, newID("pix_"), info.Key, in)
	if err != nil {
		apiFailure(w, err)
		return
	}
	if s.cfg.WebhookURL != "" {
		eventID := newID("evt_")
		payload, _ := json.Marshal(Event{
			ID: eventID, Object: "event", Type: EventChargeSucceeded, Created: c.Created,
			Data: EventData{Object: c},
		})
		if err := DeliveryInsert(ctx, tx, info.Tenant, eventID, EventChargeSucceeded, s.cfg.WebhookURL, payload); err != nil {
			apiFailure(w, err)
			return
		}
	}
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Location", "/v1/pix/charges/"+c.ID)
	w.WriteHeader(http.StatusCreated)
	json.NewEncoder(w).Encode(c) //nolint:errcheck
}

func (s *Server) listCharges(w http.ResponseWriter, r *http.Request) {
	merchant, err := merchantOf(r)
	if err != nil {
		unauthenticated(w)
		return
	}
	ctx := r.Context()
	if r.URL.Query().Has("idempotency_key") {
		c, err := ChargeGetByKey(ctx, s.pool, merchant, r.URL.Query().Get("idempotency_key"))
		if errors.Is(err, ErrNotFound) {
			(&APIError{Status: http.StatusNotFound, Type: "invalid_request_error", Code: "resource_missing",
				Param: "idempotency_key", Message: "No charge was created with this idempotency key."}).write(w)
			return
		}
		if err != nil {
			apiFailure(w, err)
			return
		}
		writeJSON(w, http.StatusOK, c)
		return
	}
	list, err := ChargeList(ctx, s.pool, merchant)
	if err != nil {
		apiFailure(w, err)
		return
	}
	writeJSON(w, http.StatusOK, map[string]any{"object": "list", "data": list})
}

func (s *Server) getCharge(w http.ResponseWriter, r *http.Request) {
	merchant, err := merchantOf(r)
	if err != nil {
		unauthenticated(w)
		return
	}
	c, err := ChargeGet(r.Context(), s.pool, merchant, r.PathValue("id"))
	if errors.Is(err, ErrNotFound) {
		(&APIError{Status: http.StatusNotFound, Type: "invalid_request_error", Code: "resource_missing",
			Param: "id", Message: "No such charge."}).write(w)
		return
	}
	if err != nil {
		apiFailure(w, err)
		return
	}
	writeJSON(w, http.StatusOK, c)
}

func unauthenticated(w http.ResponseWriter) {
	(&APIError{Status: http.StatusUnauthorized, Type: "authentication_error", Code: "unauthenticated",
		Message: "Authorization: Bearer <token> is required; any token names a sandbox merchant."}).write(w)
}

func apiFailure(w http.ResponseWriter, err error) {
	(&APIError{Status: http.StatusInternalServerError, Type: "api_error", Code: "internal",
		Message: "The sandbox could not complete the request: " + err.Error()}).write(w)
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	json.NewEncoder(w).Encode(v) //nolint:errcheck
}

// newID draws a random identifier. Charge and event ids are the PSP's own,
// not derived from the request: two charges are two objects.
func newID(prefix string) string {
	b := make([]byte, 12)
	rand.Read(b) //nolint:errcheck // never fails (crypto/rand)
	return prefix + hex.EncodeToString(b)
}
