package main

import (
	"context"
	"fmt"
	"log/slog"
	"time"

	"github.com/retrysafe/retrysafe/migrations"
	"github.com/retrysafe/retrysafe/server/metrics"
	"github.com/retrysafe/retrysafe/server/sidecar"
)

func init() {
	register(&command{name: "serve", summary: "run the HTTP sidecar: agents in any language execute tools through it", run: runServe})
}

func runServe(ctx context.Context, e *env, args []string) error {
	fs := newFlagSet(e, "serve", "serve [--addr HOST:PORT] [--migrate] [flags]",
		`Runs the sidecar HTTP API:

  POST /v1/tools/{action}/execute     {"intent_ref","fields","source_ref"}
        200 completed|failed, 202 review, 409 in_flight (Retry-After),
        400 bad fields (nothing frozen or called), 401, 404 unknown action
  GET  /v1/intents/{intent_ref}/{action}   frozen intent, key, action state, revisions
  GET  /v1/tools                      tools and their model-facing parameters
  GET  /healthz, /readyz, /metrics
  GET  /console/                     the operator console (--console=false: off)

Every /v1 request needs "Authorization: Bearer <token>"; the token names the
tenant. Tokens come from RETRYSAFE_API_TOKENS="tenant-a=token1,tenant-b=token2".
Tools: pix.charge when RETRYSAFE_PSP_URL and RETRYSAFE_PSP_TOKEN are set
(whatsapp.send_template and email.send with their own URLs). Keys are derived
with RETRYSAFE_HMAC_KEY (at least 32 bytes); the sidecar refuses to start
without it.

Also runs the reconciler in the background (--reconcile=false to leave it to
another process: 'retrysafe reconcile --loop'). Prints one line,
"retrysafe: listening on http://HOST:PORT", on stdout when ready (--addr
with port 0 picks a free port). SIGTERM or SIGINT: stop accepting, finish
the requests in progress (up to --shutdown-timeout), exit 0.`)
	var (
		db  dbFlags
		rt  runtimeFlags
		lg  logFlags
		cfg sidecar.Config
	)
	db.register(fs, e)
	rt.register(fs, e)
	lg.register(fs, e)
	var lf listenFlags
	lf.register(fs, e, "RETRYSAFE_ADDR", "127.0.0.1:8080", 30*time.Second)
	apiTokens := fs.String("api-tokens", e.getenv("RETRYSAFE_API_TOKENS"), "tenant=token pairs, comma separated (env RETRYSAFE_API_TOKENS; prefer the env)")
	migrate := fs.Bool("migrate", false, "apply the embedded migrations before serving")
	reconcile := fs.Bool("reconcile", true, "run the reconciler loop in this process")
	fs.DurationVar(&cfg.ExecuteTimeout, "execute-timeout", 30*time.Second, "bound on one execution (freeze, provider call, record), independent of the client")
	fs.Int64Var(&cfg.MaxBodyBytes, "max-body", 1<<20, "largest accepted execute body, in bytes")
	var (
		wa  whatsappFlags
		pay paymentFlags
		con consoleFlags
	)
	wa.register(fs, e)
	pay.register(fs, e)
	con.register(fs, e)
	if err := parseNoArgs(e, fs, args); err != nil {
		return err
	}

	// Everything that needs no database is checked first, so a typo fails
	// in milliseconds with the setting's name.
	log, err := lg.logger(e.stderr)
	if err != nil {
		return err
	}
	creds, err := parseAPITokens(*apiTokens)
	if err != nil {
		return err
	}
	reg, err := rt.registry()
	if err != nil {
		return err
	}
	if err := lf.check(); err != nil {
		return err
	}

	d, err := db.open(ctx, e, *migrate)
	if err != nil {
		return err
	}
	defer d.Close()
	if err := checkMigrations(ctx, d, log); err != nil {
		return err
	}
	m := metrics.New()
	rtm, err := rt.build(d.Pool, reg, m, log)
	if err != nil {
		return err
	}
	cfg.DB, cfg.Schema, cfg.Executor, cfg.Tools = d.Pool, d.Schema, rtm.Executor, reg
	cfg.Credentials, cfg.Metrics, cfg.Logger = creds, m, log
	srv, err := sidecar.New(cfg)
	if err != nil {
		return err
	}
	handler, err := mountWebhooks(srv, &wa, &pay, d, rtm.Intents, log)
	if err != nil {
		return err
	}
	if handler, err = mountConsole(handler, &con, d, reg, log); err != nil {
		return err
	}

	s := httpService{
		name:          "serve",
		banner:        "retrysafe",
		handler:       handler,
		log:           log,
		readTimeout:   30 * time.Second,
		readyAttrs:    []any{"schema", d.Schema, "tools", reg.Names(), "tenants", len(creds), "reconciler", *reconcile},
		shutdownAttrs: []any{"timeout", lf.shutdown},
		errKey:        "error",
	}
	if *reconcile {
		r := &sidecar.Reconciler{Executor: rtm.Executor, Metrics: m, Logger: log, Interval: rt.reconcileInterval, Batch: rt.reconcileBatch}
		s.background = func(ctx context.Context) { r.Run(ctx) } //nolint:errcheck // Run returns nil when stopped
	}
	return lf.serveHTTP(ctx, e, s)
}

// checkMigrations refuses to serve on a schema older than the binary (its
// queries would fail on missing tables) and warns about a newer one (a later
// binary migrated: rolling deploys pass through this).
func checkMigrations(ctx context.Context, d *database, log *slog.Logger) error {
	v, err := migrations.Version(ctx, d.Pool, d.Schema)
	if err != nil {
		return err
	}
	switch latest := migrations.Latest(); {
	case v < latest:
		return fmt.Errorf("schema %s is at migration %d and this binary needs %d: run 'retrysafe migrate' or pass --migrate", d.Schema, v, latest)
	case v > latest:
		log.Warn("serve: schema is newer than this binary; /readyz reports not ready", "schema", d.Schema, "version", v, "binary", latest)
	}
	return nil
}
