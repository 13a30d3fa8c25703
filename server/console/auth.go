package console

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base64"
	"errors"
	"fmt"
	"net/http"
	"regexp"
	"slices"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
)

// CookieName is the session cookie.
const CookieName = "retrysafe_console"

// TokenPrefix starts every operator token, so that one pasted in the wrong
// place (an API client, a log search) is recognisable as an operator's.
const TokenPrefix = "rsop_"

// Errors of the operator functions.
var (
	ErrOperatorExists  = errors.New("console: operator already exists")
	ErrNoOperator      = errors.New("console: no such operator")
	ErrBadOperatorName = errors.New("console: operator name must be 1-64 letters, digits, '.', '_', '@' or '-', starting with a letter or digit")
	ErrNoTenants       = errors.New("console: an operator needs at least one tenant")
)

var nameRe = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._@-]{0,63}$`)

// Operator is a person who may sign in to the console.
type Operator struct {
	Name       string
	Tenants    []string
	CreatedAt  time.Time
	DisabledAt *time.Time
}

// AddOperator creates an operator scoped to tenants and returns its token,
// which is shown once and stored only as a hash. With rotate, an existing
// operator gets a new token and the given tenants instead (and is enabled
// again); its sessions end.
func AddOperator(ctx context.Context, db DB, name string, tenants []string, rotate bool) (string, error) {
	if !nameRe.MatchString(name) {
		return "", ErrBadOperatorName
	}
	ts, err := cleanTenants(tenants)
	if err != nil {
		return "", err
	}
	token := TokenPrefix + randomText()
	hash := sha256.Sum256([]byte(token))
	if rotate {
		tx, err := db.Begin(ctx)
		if err != nil {
			return "", err
		}
		defer tx.Rollback(ctx) //nolint:errcheck // no-op after commit
		tag, err := tx.Exec(ctx, operatorRotateSQL, name, hash[:], ts)
		if err != nil {
			return "", fmt.Errorf("console: rotate operator: %w", err)
		}
		if tag.RowsAffected() == 0 {
			return "", ErrNoOperator
		}
		if _, err := tx.Exec(ctx, `DELETE FROM console_sessions WHERE operator = $1`, name); err != nil {
			return "", fmt.Errorf("console: rotate operator: %w", err)
		}
		return token, tx.Commit(ctx)
	}
	if _, err := db.Exec(ctx, operatorInsertSQL, name, hash[:], ts); err != nil {
		var pe *pgconn.PgError
		if errors.As(err, &pe) && pe.Code == "23505" {
			return "", ErrOperatorExists
		}
		return "", fmt.Errorf("console: add operator: %w", err)
	}
	return token, nil
}

// DisableOperator stops an operator from signing in and ends its sessions.
func DisableOperator(ctx context.Context, db DB, name string) error {
	var exists bool
	if err := db.QueryRow(ctx, operatorExistsSQL, name).Scan(&exists); err != nil {
		return fmt.Errorf("console: disable operator: %w", err)
	}
	if !exists {
		return ErrNoOperator
	}
	if _, err := db.Exec(ctx, operatorDisableSQL, name); err != nil {
		return fmt.Errorf("console: disable operator: %w", err)
	}
	return nil
}

// ListOperators lists every operator, disabled ones included.
func ListOperators(ctx context.Context, db DB) ([]Operator, error) {
	rows, err := db.Query(ctx, operatorListSQL)
	if err != nil {
		return nil, fmt.Errorf("console: list operators: %w", err)
	}
	return pgx.CollectRows(rows, func(r pgx.CollectableRow) (Operator, error) {
		var o Operator
		err := r.Scan(&o.Name, &o.Tenants, &o.CreatedAt, &o.DisabledAt)
		return o, err
	})
}

// OperatorOfToken names the enabled operator whose token this is, as
// sign-in checks it (by the token's hash); ErrNoOperator when none is.
func OperatorOfToken(ctx context.Context, db DB, token string) (Operator, error) {
	hash := sha256.Sum256([]byte(token))
	o := Operator{}
	err := db.QueryRow(ctx, operatorByTokenSQL, hash[:]).Scan(&o.Name, &o.Tenants)
	if errors.Is(err, pgx.ErrNoRows) || token == "" {
		return Operator{}, ErrNoOperator
	}
	if err != nil {
		return Operator{}, fmt.Errorf("console: operator of token: %w", err)
	}
	return o, nil
}

// CountAudit counts the audit records of kind ("settle", "lookup", ...)
// that operator left, in every tenant. It scans console_audit: for tests
// and one-off checks, not for a page.
func CountAudit(ctx context.Context, db DB, kind, operator string) (int64, error) {
	var n int64
	if err := db.QueryRow(ctx, auditCountSQL, kind, operator).Scan(&n); err != nil {
		return 0, fmt.Errorf("console: count audit: %w", err)
	}
	return n, nil
}

func cleanTenants(tenants []string) ([]string, error) {
	var out []string
	for _, t := range tenants {
		t = strings.TrimSpace(t)
		if t != "" && !slices.Contains(out, t) {
			out = append(out, t)
		}
	}
	if len(out) == 0 {
		return nil, ErrNoTenants
	}
	slices.Sort(out)
	return out, nil
}

func randomText() string {
	b := make([]byte, 32)
	_, _ = rand.Read(b) // crypto/rand.Read never fails
	return base64.RawURLEncoding.EncodeToString(b)
}

// session is a signed-in operator.
type session struct {
	Name    string
	Tenants []string
	CSRF    string
	Expires time.Time
}

func (s *session) can(tenant string) bool {
	return s != nil && slices.Contains(s.Tenants, tenant)
}

// session reads the request's session; nil when there is none (no cookie,
// unknown, expired, or its operator disabled).
func (h *Handler) session(r *http.Request) (*session, error) {
	c, err := r.Cookie(CookieName)
	if err != nil || c.Value == "" || len(c.Value) > 100 {
		return nil, nil
	}
	id := sha256.Sum256([]byte(c.Value))
	var s session
	err = h.cfg.DB.QueryRow(r.Context(), sessionGetSQL, id[:]).Scan(&s.Name, &s.Tenants, &s.CSRF, &s.Expires)
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	return &s, nil
}

type handlerFunc func(w http.ResponseWriter, r *http.Request, s *session)

// authed answers a request without a live session with the sign-in page
// and 401, and checks the session's CSRF token on every POST (after the
// cross-origin check ServeHTTP already made).
func (h *Handler) authed(next handlerFunc) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		s, err := h.session(r)
		if err != nil {
			h.cfg.Logger.Error("console: session", "err", err)
			h.fail(w, r, nil, http.StatusServiceUnavailable, "The database did not answer.")
			return
		}
		if s == nil {
			w.WriteHeader(http.StatusUnauthorized)
			h.render(w, r, nil, "signin", map[string]any{"Next": nextPath(r)})
			return
		}
		if r.Method == http.MethodPost {
			r.Body = http.MaxBytesReader(w, r.Body, 64<<10)
			got := r.PostFormValue("csrf")
			if subtle.ConstantTimeCompare([]byte(got), []byte(s.CSRF)) != 1 {
				h.cfg.Logger.Warn("console: request without its session's CSRF token refused", "operator", s.Name, "path", r.URL.Path)
				h.fail(w, r, s, http.StatusForbidden, "This form has expired or did not come from the console. Reload the page and try again.")
				return
			}
		}
		next(w, r, s)
	}
}

// nextPath is where to go after signing in: the page asked for, when it
// is a console page read with GET.
func nextPath(r *http.Request) string {
	if r.Method == http.MethodGet && strings.HasPrefix(r.URL.Path, Prefix+"/") {
		return r.URL.RequestURI()
	}
	return Prefix + "/"
}

// safeNext keeps redirects inside the console.
func safeNext(p string) string {
	if strings.HasPrefix(p, Prefix+"/") && !strings.HasPrefix(p, "//") && !strings.ContainsAny(p, "\\\r\n") {
		return p
	}
	return Prefix + "/"
}

func (h *Handler) signinPage(w http.ResponseWriter, r *http.Request) {
	if s, _ := h.session(r); s != nil {
		http.Redirect(w, r, Prefix+"/", http.StatusSeeOther)
		return
	}
	h.render(w, r, nil, "signin", map[string]any{"Next": safeNext(r.URL.Query().Get("next"))})
}

func (h *Handler) signin(w http.ResponseWriter, r *http.Request) {
	r.Body = http.MaxBytesReader(w, r.Body, 8<<10)
	token := strings.TrimSpace(r.PostFormValue("token"))
	next := safeNext(r.PostFormValue("next"))
	hash := sha256.Sum256([]byte(token))
	var (
		name    string
		tenants []string
	)
	err := h.cfg.DB.QueryRow(r.Context(), operatorByTokenSQL, hash[:]).Scan(&name, &tenants)
	if errors.Is(err, pgx.ErrNoRows) || token == "" {
		h.cfg.Logger.Warn("console: sign-in refused")
		w.WriteHeader(http.StatusUnauthorized)
		h.render(w, r, nil, "signin", map[string]any{"Next": next, "Error": "Unknown or disabled operator token."})
		return
	}
	if err != nil {
		h.cfg.Logger.Error("console: sign-in", "err", err)
		h.fail(w, r, nil, http.StatusServiceUnavailable, "The database did not answer.")
		return
	}
	id := randomText()
	idHash := sha256.Sum256([]byte(id))
	var expires time.Time
	err = pgx.BeginFunc(r.Context(), h.cfg.DB, func(tx pgx.Tx) error {
		if _, err := tx.Exec(r.Context(), plansOff); err != nil {
			return err
		}
		if _, err := tx.Exec(r.Context(), sessionPurgeSQL); err != nil {
			return err
		}
		return tx.QueryRow(r.Context(), sessionInsertSQL, idHash[:], name, randomText(), h.cfg.SessionTTL.Seconds()).Scan(&expires)
	})
	if err != nil {
		h.cfg.Logger.Error("console: sign-in", "err", err)
		h.fail(w, r, nil, http.StatusServiceUnavailable, "The database did not answer.")
		return
	}
	http.SetCookie(w, &http.Cookie{
		Name: CookieName, Value: id, Path: Prefix + "/",
		Expires: expires, MaxAge: int(h.cfg.SessionTTL.Seconds()),
		HttpOnly: true, SameSite: http.SameSiteStrictMode, Secure: isHTTPS(r),
	})
	h.cfg.Logger.Info("console: signed in", "operator", name, "tenants", len(tenants))
	http.Redirect(w, r, next, http.StatusSeeOther)
}

func (h *Handler) signout(w http.ResponseWriter, r *http.Request, s *session) {
	if c, err := r.Cookie(CookieName); err == nil {
		id := sha256.Sum256([]byte(c.Value))
		if _, err := h.cfg.DB.Exec(r.Context(), sessionDeleteSQL, id[:]); err != nil {
			h.cfg.Logger.Error("console: sign out", "err", err)
		}
	}
	http.SetCookie(w, &http.Cookie{Name: CookieName, Value: "", Path: Prefix + "/", MaxAge: -1, HttpOnly: true, SameSite: http.SameSiteStrictMode, Secure: isHTTPS(r)})
	h.cfg.Logger.Info("console: signed out", "operator", s.Name)
	http.Redirect(w, r, Prefix+"/signin", http.StatusSeeOther)
}

// isHTTPS: the cookie is Secure when the console is reached over TLS, here
// or at a proxy in front that says so.
func isHTTPS(r *http.Request) bool {
	return r.TLS != nil || strings.EqualFold(r.Header.Get("X-Forwarded-Proto"), "https")
}
