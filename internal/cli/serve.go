package cli

import (
	"context"
	"errors"
	"flag"
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
	"github.com/retrysafe/retrysafe/tools"
)

func init() {
	Register(&Command{Name: "serve", Summary: "run the HTTP sidecar: agents in any language execute tools through it", Run: runServe})
}

// serveCmd is serve's settings and, once checked, what they build.
type serveCmd struct {
	engineFlags
	lf  ListenFlags
	cfg sidecar.Config
	wh  webhookFlags
	con consoleFlags

	apiTokens, metricsAddr, allowUnsafeEnv string
	migrate, reconcile                     bool

	log *slog.Logger
	reg *tools.Registry
}

func runServe(ctx context.Context, e *Env, args []string) error {
	var c serveCmd
	if err := ParseNoArgs(e, c.flags(e), args); err != nil {
		return err
	}
	// Everything that needs no database is checked first, so a typo fails
	// in milliseconds with the setting's name.
	if err := c.check(e); err != nil {
		return usageErr(err)
	}
	return c.serve(ctx, e)
}

func (c *serveCmd) flags(e *Env) *flag.FlagSet {
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
	c.engineFlags.register(fs, e)
	c.lf.Register(fs, e, "RETRYSAFE_ADDR", "127.0.0.1:8080", 30*time.Second)
	fs.StringVar(&c.apiTokens, "api-tokens", e.Getenv("RETRYSAFE_API_TOKENS"), "tenant=token pairs, comma separated (env RETRYSAFE_API_TOKENS; prefer the env)")
	fs.BoolVar(&c.migrate, "migrate", false, "apply the embedded migrations before serving")
	fs.BoolVar(&c.reconcile, "reconcile", true, "run the reconciler loop in this process")
	registerSidecarFlags(fs, &c.cfg)
	c.allowUnsafeEnv = e.Getenv("RETRYSAFE_ALLOW_UNSAFE_DATABASE")
	allowUnsafeDefault, _ := strconv.ParseBool(c.allowUnsafeEnv)
	fs.BoolVar(&c.cfg.AllowUnsafeDatabase, "allow-unsafe-database", allowUnsafeDefault,
		"serve on a database running with fsync=off, which a crash can make lose committed claims: only for a throwaway database (env RETRYSAFE_ALLOW_UNSAFE_DATABASE=true)")
	fs.StringVar(&c.cfg.MetricsToken, "metrics-token", e.Getenv("RETRYSAFE_METRICS_TOKEN"),
		"require Authorization: Bearer <token> on /metrics, which names tenants (env RETRYSAFE_METRICS_TOKEN; prefer the env)")
	fs.StringVar(&c.metricsAddr, "metrics-addr", e.Getenv("RETRYSAFE_METRICS_ADDR"),
		"serve /metrics on this address of its own instead of --addr (env RETRYSAFE_METRICS_ADDR)")
	c.wh.register(fs, e)
	c.con.register(fs, e)
	return fs
}

// registerSidecarFlags adds the flags that set cfg's fields, defaulting
// to the sidecar's own defaults.
func registerSidecarFlags(fs *flag.FlagSet, cfg *sidecar.Config) {
	fs.DurationVar(&cfg.ExecuteTimeout, "execute-timeout", sidecar.DefaultExecuteTimeout, "bound on one execution (freeze, provider call, record), independent of the client")
	fs.Int64Var(&cfg.MaxBodyBytes, "max-body", sidecar.DefaultMaxBodyBytes, "largest accepted execute body, in bytes")
}

// check names every wrong setting it can find without a database at once,
// not one per failed start.
func (c *serveCmd) check(e *Env) error {
	var settingsErr, credErr error
	c.cfg.Credentials, credErr = parseAPITokens(c.apiTokens)
	c.log, c.reg, settingsErr = c.settings(e)
	errs := []error{credErr, settingsErr, c.lf.Check()}
	if v := c.allowUnsafeEnv; v != "" {
		if _, err := strconv.ParseBool(v); err != nil {
			errs = append(errs, fmt.Errorf("RETRYSAFE_ALLOW_UNSAFE_DATABASE=%q: want true or false", v))
		}
	}
	if c.metricsAddr != "" {
		if _, err := net.ResolveTCPAddr("tcp", c.metricsAddr); err != nil {
			errs = append(errs, fmt.Errorf("--metrics-addr %q: %w", c.metricsAddr, err))
		}
		c.cfg.NoMetrics = true
	}
	return errors.Join(errs...)
}

// serve opens the database, builds the sidecar with its webhooks and
// console, and serves until ctx ends.
func (c *serveCmd) serve(ctx context.Context, e *Env) error {
	log, reg, cfg := c.log, c.reg, &c.cfg
	d, err := c.db.Open(ctx, e, c.migrate)
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
	rtm, err := c.rt.build(d.Pool, reg, m, log, nil)
	if err != nil {
		return err
	}
	cfg.DB, cfg.Schema, cfg.Executor, cfg.Tools = d.Pool, d.Schema, rtm.Executor, reg
	cfg.Metrics, cfg.Logger = m, log
	srv, err := sidecar.New(*cfg)
	if err != nil {
		return err
	}
	handler, err := c.wh.mount(ctx, srv, d, rtm.Intents, log)
	if err != nil {
		return err
	}
	if handler, err = mountConsole(handler, &c.con, d, reg, log); err != nil {
		return err
	}
	s := httpService{
		name:          "serve",
		banner:        "retrysafe",
		handler:       handler,
		log:           log,
		readTimeout:   30 * time.Second,
		readyAttrs:    []any{"schema", d.Schema, "tools", reg.Names(), "tenants", len(cfg.Credentials), "reconciler", c.reconcile},
		shutdownAttrs: []any{"timeout", c.lf.shutdown},
		errKey:        "error",
	}
	var bg []func(context.Context)
	if c.reconcile {
		r := &sidecar.Reconciler{Executor: rtm.Executor, Metrics: m, Logger: log, Interval: c.rt.reconcileInterval, Batch: c.rt.reconcileBatch}
		bg = append(bg, func(ctx context.Context) { r.Run(ctx) }) //nolint:errcheck // Run returns nil when stopped
	}
	if c.metricsAddr != "" {
		ms, err := metricsServer(c.metricsAddr, srv, cfg.MetricsToken != "", log)
		if err != nil {
			return err
		}
		bg = append(bg, ms)
	}
	s.Background = together(bg)
	return c.lf.Serve(ctx, e, s)
}

// metricsServer listens on addr and returns what serves /metrics there
// until its context ends.
func metricsServer(addr string, srv *sidecar.Server, token bool, log *slog.Logger) (func(context.Context), error) {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("--metrics-addr: %w", err)
	}
	mux := http.NewServeMux()
	mux.Handle("GET /metrics", srv.MetricsHandler())
	ms := &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
	log.Info("serve: metrics", "addr", "http://"+ln.Addr().String()+"/metrics", "token", token)
	return func(ctx context.Context) {
		go func() {
			<-ctx.Done()
			ms.Close() //nolint:errcheck
		}()
		ms.Serve(ln) //nolint:errcheck // ErrServerClosed once stopped
	}, nil
}

// together runs every f at once and returns when all have; nil when there
// is none.
func together(fs []func(context.Context)) func(context.Context) {
	if len(fs) == 0 {
		return nil
	}
	return func(ctx context.Context) {
		var wg sync.WaitGroup
		for _, f := range fs {
			wg.Go(func() { f(ctx) })
		}
		wg.Wait()
	}
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
