package riverschema

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/riverqueue/river/riverdriver/riverpgxv5"
	"github.com/riverqueue/river/rivermigrate"

	"github.com/retrysafe/retrysafe/migrations"
)

// Beginner is satisfied by *pgxpool.Pool, *pgx.Conn and pgx.Tx (a nested
// Begin is a savepoint).
type Beginner interface {
	Begin(ctx context.Context) (pgx.Tx, error)
}

// lockSQL is the advisory lock package migrations takes: sharing it keeps
// two CREATE SCHEMA IF NOT EXISTS from colliding on the catalog.
const lockSQL = `SELECT pg_advisory_xact_lock(hashtextextended('retrysafe.migrate.' || $1, 0))`

// Migrate brings River's tables in schema up to the version this build of
// River expects and returns the versions it applied (none when already up to
// date). Safe to run concurrently and repeatedly.
func Migrate(ctx context.Context, db Beginner, schema string) ([]int, error) {
	if err := migrations.ValidateSchema(schema); err != nil {
		return nil, err
	}
	m, err := migrator(schema)
	if err != nil {
		return nil, err
	}
	// One transaction per River version, not one for all: a version that
	// adds an enum value (004 adds job state "pending") must commit before
	// a later one may use it. Each step takes the lock and reads the applied
	// versions afresh, so concurrent migrators interleave safely, and each
	// holds a single connection (a session lock on one connection while
	// migrating on another would deadlock a small pool).
	var applied []int
	for raced := 0; ; {
		v, err := step(ctx, db, m, schema)
		if err != nil && raced < 3 && lostRace(err) {
			// Another migrator applied this version while this one waited
			// for the lock: a session hears of catalog changes when a
			// transaction starts or it locks a relation, not when it
			// takes an advisory lock, so River's "does river_migration
			// exist" could read a stale cache. A new transaction sees it.
			raced++
			continue
		}
		if err != nil {
			return applied, err
		}
		if v == 0 {
			return applied, nil
		}
		applied = append(applied, v)
	}
}

// lostRace reports an error of a version applied concurrently: its table
// or type already exists, or its row in river_migration does.
func lostRace(err error) bool {
	var pgErr *pgconn.PgError
	if !errors.As(err, &pgErr) {
		return false
	}
	switch pgErr.Code {
	case "42P07", "42710", "23505": // duplicate_table, duplicate_object, unique_violation
		return true
	}
	return false
}

// migrator is River's migrator for schema, on no pool: every call passes
// its own transaction.
func migrator(schema string) (*rivermigrate.Migrator[pgx.Tx], error) {
	// River logs "no migrations to apply" at info on every start; only its
	// warnings are worth a line.
	quiet := slog.New(slog.NewTextHandler(io.Discard, nil))
	m, err := rivermigrate.New(riverpgxv5.New(nil), &rivermigrate.Config{Schema: schema, Logger: quiet})
	if err != nil {
		return nil, fmt.Errorf("river migrate: %w", err)
	}
	return m, nil
}

// Version is the newest River migration applied in schema, 0 when River's
// tables are not there: what the worker and the webhooks check before they
// queue into them. It asks River's migrator, which reads River's own record
// of its migrations, so that no package but River knows its tables.
func Version(ctx context.Context, db Beginner, schema string) (int, error) {
	if err := migrations.ValidateSchema(schema); err != nil {
		return 0, err
	}
	m, err := migrator(schema)
	if err != nil {
		return 0, err
	}
	tx, err := db.Begin(ctx)
	if err != nil {
		return 0, fmt.Errorf("river version: begin: %w", err)
	}
	defer tx.Rollback(ctx) //nolint:errcheck // read-only
	vs, err := m.ExistingVersionsTx(ctx, tx)
	if err != nil {
		return 0, fmt.Errorf("river version %s: %w", schema, err)
	}
	if len(vs) == 0 {
		return 0, nil
	}
	return vs[len(vs)-1].Version, nil
}

// step applies the next pending River version in its own transaction and
// returns it, or 0 when none is pending.
func step(ctx context.Context, db Beginner, m *rivermigrate.Migrator[pgx.Tx], schema string) (int, error) {
	tx, err := db.Begin(ctx)
	if err != nil {
		return 0, fmt.Errorf("river migrate: begin: %w", err)
	}
	defer tx.Rollback(ctx) //nolint:errcheck // no-op after commit
	if _, err := tx.Exec(ctx, lockSQL, schema); err != nil {
		return 0, fmt.Errorf("river migrate: advisory lock: %w", err)
	}
	if _, err := tx.Exec(ctx, `CREATE SCHEMA IF NOT EXISTS `+pgx.Identifier{schema}.Sanitize()); err != nil {
		return 0, fmt.Errorf("river migrate: create schema %s: %w", schema, err)
	}
	// MigrateTx is deprecated because several versions cannot share one
	// transaction; with MaxSteps 1 each version gets its own, under our lock.
	//lint:ignore SA1019 one version per transaction, see above
	res, err := m.MigrateTx(ctx, tx, rivermigrate.DirectionUp, &rivermigrate.MigrateOpts{MaxSteps: 1})
	if err != nil {
		return 0, fmt.Errorf("river migrate %s: %w", schema, err)
	}
	if err := tx.Commit(ctx); err != nil {
		return 0, fmt.Errorf("river migrate: commit: %w", err)
	}
	if len(res.Versions) == 0 {
		return 0, nil
	}
	return res.Versions[0].Version, nil
}

// Latest is the newest River migration version this build carries.
func Latest() int {
	m, err := migrator("")
	if err != nil {
		return 0
	}
	all := m.AllVersions()
	if len(all) == 0 {
		return 0
	}
	return all[len(all)-1].Version
}
