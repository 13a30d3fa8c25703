// Package dbconf builds pgx pool configurations that point at retrysafe's
// schema. It is internal machinery shared by the commands and the tests.
package dbconf

import (
	"context"
	"fmt"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/retrysafe/retrysafe/migrations"
)

// PoolConfig parses url and sets search_path so that retrysafe's unqualified
// table names resolve to schema (public stays reachable after it).
func PoolConfig(url, schema string) (*pgxpool.Config, error) {
	if err := migrations.ValidateSchema(schema); err != nil {
		return nil, err
	}
	cfg, err := pgxpool.ParseConfig(url)
	if err != nil {
		return nil, fmt.Errorf("database url: %w", err)
	}
	cfg.ConnConfig.RuntimeParams["search_path"] = schema + ",public"
	if cfg.ConnConfig.RuntimeParams["application_name"] == "" {
		cfg.ConnConfig.RuntimeParams["application_name"] = "retrysafe"
	}
	return cfg, nil
}

// Open connects a pool with PoolConfig and checks that the server answers.
// maxConns <= 0 keeps pgx's default.
func Open(ctx context.Context, url, schema string, maxConns int32) (*pgxpool.Pool, error) {
	cfg, err := PoolConfig(url, schema)
	if err != nil {
		return nil, err
	}
	if maxConns > 0 {
		cfg.MaxConns = maxConns
	}
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		return nil, fmt.Errorf("connect: %w", err)
	}
	if err := pool.Ping(ctx); err != nil {
		pool.Close()
		return nil, fmt.Errorf("connect to %s: %w", Redact(url), err)
	}
	return pool, nil
}

// Redact removes the password from a connection URL for messages.
func Redact(url string) string {
	cfg, err := pgxpool.ParseConfig(url)
	if err != nil {
		return "(unparseable url)"
	}
	c := cfg.ConnConfig
	return fmt.Sprintf("postgres://%s@%s:%d/%s", c.User, c.Host, c.Port, c.Database)
}
