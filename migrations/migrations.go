package migrations

import (
	"context"
	"embed"
	"errors"
	"fmt"
	"io/fs"
	"regexp"
	"sort"
	"strconv"
	"strings"

	"github.com/jackc/pgx/v5"
)

//go:embed *.sql
var files embed.FS

// DefaultSchema is the schema retrysafe's tables live in unless configured
// otherwise.
const DefaultSchema = "retrysafe"

// Migration is one numbered SQL file.
type Migration struct {
	Version int
	Name    string
	SQL     string
}

// Beginner is satisfied by *pgxpool.Pool, *pgx.Conn and pgx.Tx (a nested
// Begin is a savepoint), so callers can migrate inside their own transaction.
type Beginner interface {
	Begin(ctx context.Context) (pgx.Tx, error)
}

var schemaRe = regexp.MustCompile(`^[a-z_][a-z0-9_]{0,62}$`)

// ErrBadSchema reports a schema name that is not a plain lower-case SQL
// identifier. Only such names are accepted so that the name never needs
// quoting in operators' own SQL.
var ErrBadSchema = errors.New("schema name must match ^[a-z_][a-z0-9_]{0,62}$")

// ValidateSchema checks a schema name.
func ValidateSchema(schema string) error {
	if !schemaRe.MatchString(schema) {
		return fmt.Errorf("%w: %q", ErrBadSchema, schema)
	}
	return nil
}

// All returns every embedded migration in version order.
func All() ([]Migration, error) {
	entries, err := fs.ReadDir(files, ".")
	if err != nil {
		return nil, err
	}
	var out []Migration
	seen := map[int]string{}
	for _, e := range entries {
		name := e.Name()
		if !strings.HasSuffix(name, ".sql") {
			continue
		}
		num, rest, ok := strings.Cut(strings.TrimSuffix(name, ".sql"), "_")
		if !ok {
			return nil, fmt.Errorf("migration %s: name must be NNN_description.sql", name)
		}
		v, err := strconv.Atoi(num)
		if err != nil || v <= 0 {
			return nil, fmt.Errorf("migration %s: bad version number", name)
		}
		if prev, dup := seen[v]; dup {
			return nil, fmt.Errorf("migrations %s and %s share version %d", prev, name, v)
		}
		seen[v] = name
		body, err := fs.ReadFile(files, name)
		if err != nil {
			return nil, err
		}
		out = append(out, Migration{Version: v, Name: rest, SQL: string(body)})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Version < out[j].Version })
	return out, nil
}

// Latest is the highest embedded version.
func Latest() int {
	all, err := All()
	if err != nil || len(all) == 0 {
		return 0
	}
	return all[len(all)-1].Version
}

// Result says what Migrate did.
type Result struct {
	Applied []Migration // applied by this call, in order
	Current int         // version after the call
}

// Migrate brings schema up to the latest embedded version. It is safe to run
// concurrently from several processes and to run again: everything happens
// in one transaction under an advisory lock keyed on the schema name.
func Migrate(ctx context.Context, db Beginner, schema string) (Result, error) {
	if err := ValidateSchema(schema); err != nil {
		return Result{}, err
	}
	all, err := All()
	if err != nil {
		return Result{}, err
	}
	tx, err := db.Begin(ctx)
	if err != nil {
		return Result{}, fmt.Errorf("migrate: begin: %w", err)
	}
	defer tx.Rollback(ctx) //nolint:errcheck // no-op after commit

	// The lock comes before CREATE SCHEMA: two concurrent "IF NOT EXISTS"
	// creations can still collide on the catalog's unique index.
	if _, err := tx.Exec(ctx, `SELECT pg_advisory_xact_lock(hashtextextended('retrysafe.migrate.' || $1, 0))`, schema); err != nil {
		return Result{}, fmt.Errorf("migrate: advisory lock: %w", err)
	}
	ident := pgx.Identifier{schema}.Sanitize()
	if _, err := tx.Exec(ctx, `CREATE SCHEMA IF NOT EXISTS `+ident); err != nil {
		return Result{}, fmt.Errorf("migrate: create schema %s: %w", schema, err)
	}
	if _, err := tx.Exec(ctx, `SET LOCAL search_path TO `+ident); err != nil {
		return Result{}, fmt.Errorf("migrate: search_path: %w", err)
	}
	if _, err := tx.Exec(ctx, `CREATE TABLE IF NOT EXISTS schema_migrations (
		version    integer PRIMARY KEY,
		name       text NOT NULL,
		applied_at timestamptz NOT NULL DEFAULT now())`); err != nil {
		return Result{}, fmt.Errorf("migrate: version table: %w", err)
	}
	current, err := currentVersion(ctx, tx)
	if err != nil {
		return Result{}, err
	}
	res := Result{Current: current}
	for _, m := range all {
		if m.Version <= current {
			continue
		}
		if _, err := tx.Exec(ctx, m.SQL); err != nil {
			return Result{}, fmt.Errorf("migrate: %03d_%s: %w", m.Version, m.Name, err)
		}
		if _, err := tx.Exec(ctx, `INSERT INTO schema_migrations (version, name) VALUES ($1, $2)`, m.Version, m.Name); err != nil {
			return Result{}, fmt.Errorf("migrate: record %03d: %w", m.Version, err)
		}
		res.Applied = append(res.Applied, m)
		res.Current = m.Version
	}
	if err := tx.Commit(ctx); err != nil {
		return Result{}, fmt.Errorf("migrate: commit: %w", err)
	}
	return res, nil
}

// Querier is the read side shared by pools, connections and transactions.
type Querier interface {
	QueryRow(ctx context.Context, sql string, args ...any) pgx.Row
}

// Version reports the schema's applied version (0 when never migrated).
func Version(ctx context.Context, db Querier, schema string) (int, error) {
	if err := ValidateSchema(schema); err != nil {
		return 0, err
	}
	var exists bool
	if err := db.QueryRow(ctx, `SELECT to_regclass($1) IS NOT NULL`, schema+".schema_migrations").Scan(&exists); err != nil {
		return 0, fmt.Errorf("migration version: %w", err)
	}
	if !exists {
		return 0, nil
	}
	var v int
	err := db.QueryRow(ctx, `SELECT coalesce(max(version), 0) FROM `+pgx.Identifier{schema, "schema_migrations"}.Sanitize()).Scan(&v)
	if err != nil {
		return 0, fmt.Errorf("migration version: %w", err)
	}
	return v, nil
}

func currentVersion(ctx context.Context, tx pgx.Tx) (int, error) {
	var v int
	if err := tx.QueryRow(ctx, `SELECT coalesce(max(version), 0) FROM schema_migrations`).Scan(&v); err != nil {
		return 0, fmt.Errorf("migrate: read version: %w", err)
	}
	return v, nil
}
