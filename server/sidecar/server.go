package sidecar

import (
	"context"
	"crypto/subtle"
	"errors"
	"log/slog"
	"net/http"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// Server is the sidecar's HTTP handler. Safe for concurrent use.
type Server struct {
	cfg  Config
	auth *authenticator
	log  *slog.Logger
	mux  *http.ServeMux
}

// New validates cfg and builds the routes.
func New(cfg Config) (*Server, error) {
	cfg, err := cfg.Validate()
	if err != nil {
		return nil, err
	}
	s := &Server{cfg: cfg, auth: newAuthenticator(cfg.Credentials), log: cfg.Logger, mux: http.NewServeMux()}
	// A second Server on the same Metrics (tests) keeps the first gauge.
	if err := cfg.Metrics.Registry.Register(newReviewCollector(cfg.DB, cfg.ReadyTimeout)); err != nil {
		var are prometheus.AlreadyRegisteredError
		if !errors.As(err, &are) {
			return nil, err
		}
	}
	s.mux.HandleFunc("POST /v1/tools/{action}/execute", s.authed(s.execute))
	s.mux.HandleFunc("GET /v1/intents/{intent_ref}/{action}", s.authed(s.getIntent))
	s.mux.HandleFunc("GET /v1/tools", s.authed(s.listTools))
	s.mux.HandleFunc("GET /healthz", s.healthz)
	s.mux.HandleFunc("GET /readyz", s.readyz)
	if !cfg.NoMetrics {
		s.mux.Handle("GET /metrics", s.MetricsHandler())
	}
	return s, nil
}

// MetricsHandler serves the metrics, behind Config.MetricsToken when set.
// Mounted on the API's handler unless Config.NoMetrics; serve it on a
// listener of its own then.
func (s *Server) MetricsHandler() http.Handler {
	h := s.cfg.Metrics.Handler()
	if s.cfg.MetricsToken == "" {
		return h
	}
	want := []byte("Bearer " + s.cfg.MetricsToken)
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if subtle.ConstantTimeCompare([]byte(r.Header.Get("Authorization")), want) != 1 {
			w.Header().Set("WWW-Authenticate", `Bearer realm="retrysafe-metrics"`)
			writeProblem(w, Problem{Type: ProblemUnauthenticated, Title: "Unauthenticated", Status: http.StatusUnauthorized,
				Detail: "The metrics need Authorization: Bearer <metrics token>."})
			return
		}
		h.ServeHTTP(w, r)
	})
}

// Config returns the validated configuration (defaults filled in).
func (s *Server) Config() Config { return s.cfg }

// ServeHTTP implements http.Handler: routes, with one log line per API
// request.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	// Probes and scrapes are frequent and say nothing: not logged.
	switch r.URL.Path {
	case "/healthz", "/readyz", "/metrics":
		s.mux.ServeHTTP(w, r)
		return
	}
	start := time.Now()
	rec := &statusRecorder{ResponseWriter: w, status: http.StatusOK}
	note := &requestNote{}
	r = r.WithContext(context.WithValue(r.Context(), noteKey{}, note))
	s.mux.ServeHTTP(rec, r)
	attrs := []slog.Attr{
		slog.String("method", r.Method),
		// The route pattern, not the path: the path holds the intent_ref.
		slog.String("route", routeOf(r)),
		slog.Int("status", rec.status),
		slog.Duration("duration", time.Since(start)),
	}
	if note.tenant != "" {
		attrs = append(attrs, slog.String("tenant", note.tenant))
	}
	if note.action != "" {
		attrs = append(attrs, slog.String("action", note.action))
	}
	if note.outcome != "" {
		attrs = append(attrs, slog.String("outcome", note.outcome))
	}
	if note.key != "" {
		attrs = append(attrs, slog.String("idempotency_key", note.key))
	}
	if note.err != nil {
		attrs = append(attrs, slog.String("error", note.err.Error()))
	}
	level := slog.LevelInfo
	if rec.status >= 500 {
		level = slog.LevelError
	}
	s.log.LogAttrs(r.Context(), level, "sidecar: request", attrs...)
}

func routeOf(r *http.Request) string {
	if r.Pattern != "" {
		return r.Pattern
	}
	return "(no route)"
}

// requestNote collects what the request log line reports; handlers fill it
// in as they learn it.
type requestNote struct {
	tenant, action, outcome, key string
	err                          error
}

type noteKey struct{}

func noteFrom(ctx context.Context) *requestNote {
	if n, ok := ctx.Value(noteKey{}).(*requestNote); ok {
		return n
	}
	return &requestNote{} // a handler called without ServeHTTP (tests)
}

type statusRecorder struct {
	http.ResponseWriter
	status int
	wrote  bool
}

func (r *statusRecorder) WriteHeader(code int) {
	if !r.wrote {
		r.status, r.wrote = code, true
	}
	r.ResponseWriter.WriteHeader(code)
}

func (r *statusRecorder) Write(b []byte) (int, error) {
	r.wrote = true
	return r.ResponseWriter.Write(b)
}

func (r *statusRecorder) Unwrap() http.ResponseWriter { return r.ResponseWriter }

// authed runs h with the tenant of the request's token, or answers 401.
func (s *Server) authed(h func(w http.ResponseWriter, r *http.Request, tenant string)) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		tenant := s.auth.tenant(r)
		if tenant == "" {
			w.Header().Set("WWW-Authenticate", `Bearer realm="retrysafe"`)
			writeProblem(w, Problem{Type: ProblemUnauthenticated, Title: "Unauthenticated", Status: http.StatusUnauthorized,
				Detail: "Send Authorization: Bearer <token> with a token configured for your tenant."})
			return
		}
		noteFrom(r.Context()).tenant = tenant
		h(w, r, tenant)
	}
}
