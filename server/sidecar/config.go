package sidecar

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/retrysafe/retrysafe/executor"
	"github.com/retrysafe/retrysafe/migrations"
	"github.com/retrysafe/retrysafe/server/internal/edge"
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
	// Metrics is what /metrics serves, and where the requests answered
	// without an outcome (invalid, error) are counted; the executor's
	// Observer counts the rest. Default: the executor's Observer when it is
	// a *metrics.Metrics (metrics.Of), else a fresh metrics.New(). Give the
	// executor's, so that every count lands on the registry served.
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
		c.Metrics = metrics.Of(c.Executor)
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
	case strings.ContainsFunc(c.MetricsToken, edge.IsControlOrSpace):
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
		case !edge.ValidTenant(c.Tenant):
			return fmt.Errorf("%w: tenant %q: at most %d bytes of UTF-8, no white space or control characters", ErrConfig, c.Tenant, edge.MaxTenantLen)
		case strings.ContainsFunc(c.Token, edge.IsControlOrSpace):
			return fmt.Errorf("%w: the API token of tenant %q contains white space or control characters", ErrConfig, c.Tenant)
		}
		if other, dup := seen[c.Token]; dup {
			return fmt.Errorf("%w: one API token is configured for tenants %q and %q", ErrConfig, other, c.Tenant)
		}
		seen[c.Token] = c.Tenant
	}
	return nil
}
