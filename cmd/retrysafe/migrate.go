package main

import (
	"context"
	"fmt"

	"github.com/retrysafe/retrysafe/internal/riverschema"
	"github.com/retrysafe/retrysafe/migrations"
)

func init() {
	register(&command{name: "migrate", summary: "create or upgrade retrysafe's tables (safe to run concurrently)", run: runMigrate})
}

func runMigrate(ctx context.Context, e *env, args []string) error {
	fs := newFlagSet(e, "migrate", "migrate [--database-url URL] [--schema NAME] [--status]",
		"Applies the embedded, numbered SQL migrations to the schema, in one transaction\n"+
			"under an advisory lock, then River's migrations (the agent's job queues) into the\n"+
			"same schema: running it twice, or from two processes at once, is safe.")
	var db dbFlags
	db.register(fs, e)
	status := fs.Bool("status", false, "print the applied and latest versions and change nothing")
	if err := parseFlags(e, fs, args); err != nil {
		return err
	}
	d, err := db.openExisting(ctx, e, "migrate")
	if err != nil {
		return err
	}
	defer d.Close()
	if *status {
		v, err := migrations.Version(ctx, d.Pool, db.schema)
		if err != nil {
			return err
		}
		fmt.Fprintf(e.stdout, "schema %s: version %d, latest %d (River's queue tables: latest %d)\n", db.schema, v, migrations.Latest(), riverschema.Latest())
		return nil
	}
	err = migrateAll(ctx, d.Pool, db.schema, func(name string) { fmt.Fprintf(e.stdout, "applied %s\n", name) })
	if err != nil {
		return err
	}
	fmt.Fprintf(e.stdout, "schema %s at version %d (River %d)\n", db.schema, migrations.Latest(), riverschema.Latest())
	return nil
}
