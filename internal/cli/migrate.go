package cli

import (
	"context"
	"fmt"

	"github.com/retrysafe/retrysafe/internal/riverschema"
	"github.com/retrysafe/retrysafe/migrations"
)

func init() {
	Register(&Command{Name: "migrate", Summary: "create or upgrade retrysafe's tables (safe to run concurrently)", Run: runMigrate})
}

func runMigrate(ctx context.Context, e *Env, args []string) error {
	fs := NewFlagSet(e, "migrate", "migrate [--database-url URL] [--schema NAME] [--status]",
		"Applies the embedded, numbered SQL migrations to the schema, in one transaction\n"+
			"under an advisory lock, then River's migrations (the agent's job queues) into the\n"+
			"same schema: running it twice, or from two processes at once, is safe.")
	var db DBFlags
	db.Register(fs, e)
	status := fs.Bool("status", false, "print the applied and latest versions and change nothing")
	if err := ParseNoArgs(e, fs, args); err != nil {
		return err
	}
	d, err := db.openExisting(ctx, e, "migrate")
	if err != nil {
		return err
	}
	defer d.Close()
	if *status {
		v, err := migrations.Version(ctx, d.Pool, db.Schema)
		if err != nil {
			return err
		}
		fmt.Fprintf(e.Stdout, "schema %s: version %d, latest %d (River's queue tables: latest %d)\n", db.Schema, v, migrations.Latest(), riverschema.Latest())
		return nil
	}
	err = migrateAll(ctx, d.Pool, db.Schema, func(name string) { fmt.Fprintf(e.Stdout, "applied %s\n", name) })
	if err != nil {
		return err
	}
	fmt.Fprintf(e.Stdout, "schema %s at version %d (River %d)\n", db.Schema, migrations.Latest(), riverschema.Latest())
	return nil
}
