package sidecar

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/retrysafe/retrysafe/executor"
	"github.com/retrysafe/retrysafe/migrations"
	"github.com/retrysafe/retrysafe/server/metrics"
	"github.com/retrysafe/retrysafe/tools"
)

// DB is what the sidecar needs of the database: the executor's DBTX for the
// reads it does itself, plus Ping for /readyz. *pgxpool.Pool satisfies it.
type DB interface {
	Exec(ctx context.Context, sql string, args ...any) (pgconn.CommandTag, error)
	Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error)
	QueryRow(ctx context.Context, sql string, args ...any) pgx.Row
	SendBatch(ctx context.Context, b *pgx.Batch) pgx.BatchResults
	Ping(ctx context.Context) error
}

// Credential maps one API token to its tenant. A tenant may have several
// tokens (rotation); a token belongs to one tenant.
type Credential struct {
	Tenant string
	Token  string
}

// The defaults of Config's zero fields. serve's flags take their defaults
// from here, so that a default is written once.
const (
	DefaultMaxBodyBytes   = 1 << 20
	DefaultExecuteTimeout = 30 * time.Second
	DefaultReadyTimeout   = 2 * time.Second
	DefaultMinRetryAfter  = time.Second
)

// Config configures a Server. Zero fields take the documented defaults;
// New validates the result.
type Config struct {
	// DB is the pool. Required.
	DB DB
	// Schema holds retrysafe's tables; /readyz compares its migration
	// version with the binary's. Default migrations.DefaultSchema.
	Schema string
	// Executor runs the tools. Required.
	Executor *executor.Executor
	// Tools is the registry behind Executor: unknown actions are refused
	// with 404 before anything else, and GET /v1/tools lists it. Required.
	Tools *tools.Registry
	// Credentials are the API tokens. At least one is required.
	Credentials []Credential
	// Metrics receives the counters. Default: a fresh metrics.New(). Give
	// the one whose InstrumentTools wrapped the executor's tools, so that
	// provider timings and takeovers land on the same registry.
	Metrics *metrics.Metrics
	// Logger defaults to slog.Default().
	Logger *slog.Logger
	// MaxBodyBytes bounds an execute request's body. Default 1 MiB.
	MaxBodyBytes int64
	// ExecuteTimeout bounds one execution, independent of the client's
	// connection. It should exceed the executor's Timeout plus the time to
	// freeze and record. Default 30s.
	ExecuteTimeout time.Duration
	// ReadyTimeout bounds the /readyz database checks. Default 2s.
	ReadyTimeout time.Duration
	// MinRetryAfter is the least Retry-After given with a 409, in whole
	// seconds as HTTP requires. Default 1s.
	MinRetryAfter time.Duration
	// AllowUnsafeDatabase keeps /readyz ready on a database with fsync
	// off: a throwaway one (tests, the demo's private cluster).
	AllowUnsafeDatabase bool
	// MetricsToken, when set, is required as "Authorization: Bearer
	// <token>" on GET /metrics (the metrics name tenants).
	MetricsToken string
	// NoMetrics leaves /metrics off this handler: the caller serves
	// MetricsHandler on a listener of its own.
	NoMetrics bool
}

// ErrConfig marks an invalid Config.
var ErrConfig = errors.New("sidecar: invalid config")

// Limits on identifiers, well inside what the tables and providers accept.
const (
	maxRefLen    = 200
	maxSourceLen = 255
	maxTenantLen = 100
)

// Validate fills defaults into a copy of c and checks it.
func (c Config) Validate() (Config, error) {
	if c.DB == nil {
		return c, fmt.Errorf("%w: DB is required", ErrConfig)
	}
	if c.Executor == nil {
		return c, fmt.Errorf("%w: Executor is required", ErrConfig)
	}
	if c.Tools == nil {
		return c, fmt.Errorf("%w: Tools is required", ErrConfig)
	}
	if c.Schema == "" {
		c.Schema = migrations.DefaultSchema
	}
	if err := migrations.ValidateSchema(c.Schema); err != nil {
		return c, fmt.Errorf("%w: %w", ErrConfig, err)
	}
	if err := ValidateCredentials(c.Credentials); err != nil {
		return c, err
	}
	if c.Metrics == nil {
		c.Metrics = metrics.New()
	}
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
	if c.MaxBodyBytes == 0 {
		c.MaxBodyBytes = DefaultMaxBodyBytes
	}
	if c.ExecuteTimeout == 0 {
		c.ExecuteTimeout = DefaultExecuteTimeout
	}
	if c.ReadyTimeout == 0 {
		c.ReadyTimeout = DefaultReadyTimeout
	}
	if c.MinRetryAfter == 0 {
		c.MinRetryAfter = DefaultMinRetryAfter
	}
	switch {
	case strings.ContainsFunc(c.MetricsToken, isControlOrSpace):
		return c, fmt.Errorf("%w: the metrics token contains white space or control characters", ErrConfig)
	case c.MaxBodyBytes < 1024:
		return c, fmt.Errorf("%w: MaxBodyBytes %d is below 1 KiB", ErrConfig, c.MaxBodyBytes)
	case c.ExecuteTimeout < 0 || c.ReadyTimeout < 0 || c.MinRetryAfter < 0:
		return c, fmt.Errorf("%w: negative timeout", ErrConfig)
	}
	return c, nil
}

// ValidateCredentials checks a token list: at least one, no empty tenant or
// token, no token given to two tenants (it would authenticate as whichever
// came first), tenants of printable UTF-8 (they become metric labels and
// log fields).
func ValidateCredentials(creds []Credential) error {
	if len(creds) == 0 {
		return fmt.Errorf("%w: no API tokens configured", ErrConfig)
	}
	seen := map[string]string{}
	for i, c := range creds {
		switch {
		case c.Tenant == "":
			return fmt.Errorf("%w: API token %d has an empty tenant", ErrConfig, i+1)
		case c.Token == "":
			return fmt.Errorf("%w: tenant %q has an empty API token", ErrConfig, c.Tenant)
		case len(c.Tenant) > maxTenantLen || !utf8.ValidString(c.Tenant) || strings.ContainsFunc(c.Tenant, isControlOrSpace):
			return fmt.Errorf("%w: tenant %q: at most %d bytes of UTF-8, no white space or control characters", ErrConfig, c.Tenant, maxTenantLen)
		case strings.ContainsFunc(c.Token, isControlOrSpace):
			return fmt.Errorf("%w: the API token of tenant %q contains white space or control characters", ErrConfig, c.Tenant)
		}
		if other, dup := seen[c.Token]; dup {
			return fmt.Errorf("%w: one API token is configured for tenants %q and %q", ErrConfig, other, c.Tenant)
		}
		seen[c.Token] = c.Tenant
	}
	return nil
}

func isControlOrSpace(r rune) bool {
	return r <= ' ' || r == 0x7f || r == utf8.RuneError
}
