package cli

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"strconv"
	"sync"
	"time"

	"github.com/retrysafe/retrysafe/migrations"
	"github.com/retrysafe/retrysafe/server/metrics"
	"github.com/retrysafe/retrysafe/server/sidecar"
)

func init() {
	Register(&Command{Name: "serve", Summary: "run the HTTP sidecar: agents in any language execute tools through it", Run: runServe})
}

func runServe(ctx context.Context, e *Env, args []string) error {
	fs := NewFlagSet(e, "serve", "serve [--addr HOST:PORT] [--migrate] [flags]",
		`Runs the sidecar HTTP API:

  POST /v1/tools/{action}/execute     {"intent_ref","fields","source_ref"}
        200 completed|failed, 202 review, 409 in_flight (Retry-After),
        400 bad fields (nothing frozen or called), 401, 404 unknown action
  GET  /v1/intents/{intent_ref}/{action}   frozen intent, key, action state, revisions
  GET  /v1/tools                      tools and their model-facing parameters
  GET  /healthz, /readyz (database, migrations, durability settings), /metrics
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
the requests in progress (up to --shutdown-timeout), exit 0.

Refuses to start on a database running with fsync=off unless
--allow-unsafe-database says it is a throwaway; logs fsync,
synchronous_commit, full_page_writes and synchronous_standby_names at
start-up. /metrics names tenants: --metrics-token puts it behind a bearer
token, --metrics-addr moves it to a listener of its own.`)
	var (
		db  DBFlags
		rt  runtimeFlags
		lg  LogFlags
		cfg sidecar.Config
	)
	db.Register(fs, e)
	rt.register(fs, e)
	lg.Register(fs, e)
	var lf ListenFlags
	lf.Register(fs, e, "RETRYSAFE_ADDR", "127.0.0.1:8080", 30*time.Second)
	apiTokens := fs.String("api-tokens", e.Getenv("RETRYSAFE_API_TOKENS"), "tenant=token pairs, comma separated (env RETRYSAFE_API_TOKENS; prefer the env)")
	migrate := fs.Bool("migrate", false, "apply the embedded migrations before serving")
	reconcile := fs.Bool("reconcile", true, "run the reconciler loop in this process")
	fs.DurationVar(&cfg.ExecuteTimeout, "execute-timeout", 30*time.Second, "bound on one execution (freeze, provider call, record), independent of the client")
	fs.Int64Var(&cfg.MaxBodyBytes, "max-body", 1<<20, "largest accepted execute body, in bytes")
	allowUnsafeEnv := e.Getenv("RETRYSAFE_ALLOW_UNSAFE_DATABASE")
	allowUnsafeDefault, _ := strconv.ParseBool(allowUnsafeEnv)
	fs.BoolVar(&cfg.AllowUnsafeDatabase, "allow-unsafe-database", allowUnsafeDefault,
		"serve on a database running with fsync=off, which a crash can make lose committed claims: only for a throwaway database (env RETRYSAFE_ALLOW_UNSAFE_DATABASE=true)")
	fs.StringVar(&cfg.MetricsToken, "metrics-token", e.Getenv("RETRYSAFE_METRICS_TOKEN"),
		"require Authorization: Bearer <token> on /metrics, which names tenants (env RETRYSAFE_METRICS_TOKEN; prefer the env)")
	metricsAddr := fs.String("metrics-addr", e.Getenv("RETRYSAFE_METRICS_ADDR"),
		"serve /metrics on this address of its own instead of --addr (env RETRYSAFE_METRICS_ADDR)")
	var (
		wa  whatsappFlags
		pay paymentFlags
		con consoleFlags
	)
	wa.register(fs, e)
	pay.register(fs, e)
	con.register(fs, e)
	if err := ParseNoArgs(e, fs, args); err != nil {
		return err
	}

	// Everything that needs no database is checked first, so a typo fails
	// in milliseconds with the setting's name.
	log, err := lg.Logger(e.Stderr)
	if err != nil {
		return err
	}
	// Every wrong setting is named at once, not one per failed start.
	creds, credErr := parseAPITokens(*apiTokens)
	reg, regErr := rt.registry()
	if err := errors.Join(credErr, regErr, lf.Check()); err != nil {
		return err
	}
	if v := allowUnsafeEnv; v != "" {
		if _, err := strconv.ParseBool(v); err != nil {
			return fmt.Errorf("RETRYSAFE_ALLOW_UNSAFE_DATABASE=%q: want true or false", v)
		}
	}
	if *metricsAddr != "" {
		if _, err := net.ResolveTCPAddr("tcp", *metricsAddr); err != nil {
			return fmt.Errorf("--metrics-addr %q: %w", *metricsAddr, err)
		}
		cfg.NoMetrics = true
	}

	d, err := db.Open(ctx, e, *migrate)
	if err != nil {
		return err
	}
	defer d.Close()
	if err := checkMigrations(ctx, d, log); err != nil {
		return err
	}
	if err := checkDurability(ctx, d.Pool, cfg.AllowUnsafeDatabase, log); err != nil {
		return err
	}
	m := metrics.New()
	rtm, err := rt.build(d.Pool, reg, m, log, nil)
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
	var bg []func(context.Context)
	if *reconcile {
		r := &sidecar.Reconciler{Executor: rtm.Executor, Metrics: m, Logger: log, Interval: rt.reconcileInterval, Batch: rt.reconcileBatch}
		bg = append(bg, func(ctx context.Context) { r.Run(ctx) }) //nolint:errcheck // Run returns nil when stopped
	}
	if *metricsAddr != "" {
		ln, err := net.Listen("tcp", *metricsAddr)
		if err != nil {
			return fmt.Errorf("--metrics-addr: %w", err)
		}
		mux := http.NewServeMux()
		mux.Handle("GET /metrics", srv.MetricsHandler())
		ms := &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
		log.Info("serve: metrics", "addr", "http://"+ln.Addr().String()+"/metrics", "token", cfg.MetricsToken != "")
		bg = append(bg, func(ctx context.Context) {
			go func() {
				<-ctx.Done()
				ms.Close() //nolint:errcheck
			}()
			ms.Serve(ln) //nolint:errcheck // ErrServerClosed once stopped
		})
	}
	if len(bg) > 0 {
		s.Background = func(ctx context.Context) {
			var wg sync.WaitGroup
			for _, f := range bg {
				wg.Go(func() { f(ctx) })
			}
			wg.Wait()
		}
	}
	return lf.Serve(ctx, e, s)
}

// checkDurability reports the database's durability settings and refuses
// fsync=off unless allowed: a crash of the machine can then lose a claim
// whose key the provider has already seen, and a redelivery could act
// again under a new key.
func checkDurability(ctx context.Context, db sidecar.DB, allow bool, log *slog.Logger) error {
	st, err := sidecar.ReadDatabaseSettings(ctx, db)
	if err != nil {
		return err
	}
	log.Info("serve: database durability", "fsync", st.Fsync, "synchronous_commit", st.SynchronousCommit,
		"full_page_writes", st.FullPageWrites, "synchronous_standby_names", st.SynchronousStandbyNames, "standbys", st.Standbys)
	for _, w := range st.Warnings() {
		log.Warn("serve: database: " + w)
	}
	if err := st.Check(); err != nil {
		if !allow {
			return fmt.Errorf("%w; pass --allow-unsafe-database (env RETRYSAFE_ALLOW_UNSAFE_DATABASE=true) only for a throwaway database", err)
		}
		log.Warn("serve: serving on a database with fsync=off (--allow-unsafe-database): a crash can lose committed claims")
	}
	return nil
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
