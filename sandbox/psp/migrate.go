package psp

import (
	"context"
	"embed"
	"fmt"
	"io/fs"
	"sort"
	"strconv"
	"strings"

	"github.com/jackc/pgx/v5"

	"github.com/retrysafe/retrysafe/migrations"
)

//go:embed sql/*.sql
var sqlFiles embed.FS

// Migrate brings schema up to date for the PSP: retrysafe's own migrations
// first (they create idempotency_requests), then the PSP's embedded files,
// recorded in psp_schema_migrations. Both run under advisory locks keyed on
// the schema, so concurrent starts of the sandbox are safe.
func Migrate(ctx context.Context, db migrations.Beginner, schema string) error {
	if _, err := migrations.Migrate(ctx, db, schema); err != nil {
		return err
	}
	files, err := pspMigrations()
	if err != nil {
		return err
	}
	tx, err := db.Begin(ctx)
	if err != nil {
		return fmt.Errorf("psp migrate: begin: %w", err)
	}
	defer tx.Rollback(ctx) //nolint:errcheck // no-op after commit
	if _, err := tx.Exec(ctx, `SELECT pg_advisory_xact_lock(hashtextextended('retrysafe.psp.migrate.' || $1, 0))`, schema); err != nil {
		return fmt.Errorf("psp migrate: advisory lock: %w", err)
	}
	if _, err := tx.Exec(ctx, `SET LOCAL search_path TO `+pgx.Identifier{schema}.Sanitize()); err != nil {
		return fmt.Errorf("psp migrate: search_path: %w", err)
	}
	if _, err := tx.Exec(ctx, `CREATE TABLE IF NOT EXISTS psp_schema_migrations (
		version    integer PRIMARY KEY,
		name       text NOT NULL,
		applied_at timestamptz NOT NULL DEFAULT now())`); err != nil {
		return fmt.Errorf("psp migrate: version table: %w", err)
	}
	var current int
	if err := tx.QueryRow(ctx, `SELECT coalesce(max(version), 0) FROM psp_schema_migrations`).Scan(&current); err != nil {
		return fmt.Errorf("psp migrate: read version: %w", err)
	}
	for _, m := range files {
		if m.Version <= current {
			continue
		}
		if _, err := tx.Exec(ctx, m.SQL); err != nil {
			return fmt.Errorf("psp migrate: %03d_%s: %w", m.Version, m.Name, err)
		}
		if _, err := tx.Exec(ctx, `INSERT INTO psp_schema_migrations (version, name) VALUES ($1, $2)`, m.Version, m.Name); err != nil {
			return fmt.Errorf("psp migrate: record %03d: %w", m.Version, err)
		}
	}
	if err := tx.Commit(ctx); err != nil {
		return fmt.Errorf("psp migrate: commit: %w", err)
	}
	return nil
}

func pspMigrations() ([]migrations.Migration, error) {
	entries, err := fs.ReadDir(sqlFiles, "sql")
	if err != nil {
		return nil, err
	}
	var out []migrations.Migration
	seen := map[int]string{}
	for _, e := range entries {
		num, rest, ok := strings.Cut(strings.TrimSuffix(e.Name(), ".sql"), "_")
		v, err := strconv.Atoi(num)
		if !ok || err != nil || v <= 0 {
			return nil, fmt.Errorf("psp migration %s: name must be NNN_description.sql", e.Name())
		}
		if prev, dup := seen[v]; dup {
			return nil, fmt.Errorf("psp migrations %s and %s share version %d", prev, e.Name(), v)
		}
		seen[v] = e.Name()
		body, err := fs.ReadFile(sqlFiles, "sql/"+e.Name())
		if err != nil {
			return nil, err
		}
		out = append(out, migrations.Migration{Version: v, Name: rest, SQL: string(body)})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Version < out[j].Version })
	return out, nil
}
