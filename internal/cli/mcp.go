package cli

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"strings"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/retrysafe/retrysafe/server/mcpserver"
	"github.com/retrysafe/retrysafe/server/metrics"
	"github.com/retrysafe/retrysafe/server/sidecar"
	"github.com/retrysafe/retrysafe/tools"
)

func init() {
	Register(&Command{Name: "mcp", Summary: "serve the tools to any MCP host (stdio or streamable HTTP), once per intent", Run: runMCP})
}

// mcpCmd is mcp's settings and, once checked, what they build.
type mcpCmd struct {
	engineFlags
	lf  ListenFlags
	cfg mcpserver.Config

	transport, tenant, apiTokens, allowModelRef string
	migrate, reconcile                          bool

	log   *slog.Logger
	reg   *tools.Registry
	creds []sidecar.Credential
}

func runMCP(ctx context.Context, e *Env, args []string) error {
	var c mcpCmd
	if err := ParseNoArgs(e, c.flags(e), args); err != nil {
		return err
	}
	// Everything that needs no database first: a typo fails at once with
	// the setting's name.
	if err := c.check(e); err != nil {
		return usageErr(err)
	}
	d, err := c.db.Open(ctx, e, c.migrate)
	if err != nil {
		return err
	}
	defer d.Close()
	if err := checkMigrations(ctx, d, c.log); err != nil {
		return err
	}
	m := metrics.New()
	rtm, err := c.rt.build(d.Pool, c.reg, m, c.log, nil)
	if err != nil {
		return err
	}
	c.cfg.Executor, c.cfg.Tools, c.cfg.Metrics, c.cfg.Logger = rtm.Executor, c.reg, m, c.log
	srv, err := mcpserver.New(c.cfg)
	if err != nil {
		return err
	}
	var rec *sidecar.Reconciler
	if c.reconcile {
		rec = &sidecar.Reconciler{Executor: rtm.Executor, Metrics: m, Logger: c.log, Interval: c.rt.reconcileInterval, Batch: c.rt.reconcileBatch}
	}
	if c.transport == "http" {
		return c.serveHTTP(ctx, e, d, srv, m, rec)
	}
	return c.serveStdio(ctx, e, d, srv, rec)
}

func (c *mcpCmd) flags(e *Env) *flag.FlagSet {
	fs := NewFlagSet(e, "mcp", "mcp [--transport stdio|http] [--tenant NAME] [--addr HOST:PORT] [--migrate] [flags]",
		`Serves the configured tools (pix.charge, whatsapp.send_template, email.send:
the same settings as 'serve') over the Model Context Protocol. Every
tools/call goes through the same freeze, key, claim and execute path as the
sidecar's execute: the same intent acts at most once, whatever the number of
calls, processes or restarts.

The intent reference comes from the host application, never from the model:
  _meta {"`+mcpserver.MetaIntentRef+`": "inv-123"} on the tools/call request
  (optionally "`+mcpserver.MetaSourceRef+`": the message id), or, over HTTP,
  the header "`+mcpserver.HeaderIntentRef+`: inv-123" on the connection.
A call without one is refused (nothing frozen, nothing called), except for the
tools named in --allow-model-ref, which then take an intent_ref argument from
the model and say in every result that the guarantee is weaker.

--transport stdio (default): JSON-RPC on stdin/stdout, logs on stderr; the
  tenant is --tenant (env RETRYSAFE_TENANT). For mcpServers entries.
--transport http: streamable HTTP (stateless) at POST /mcp, plus /healthz and
  /metrics; every request needs "Authorization: Bearer <token>" from
  RETRYSAFE_API_TOKENS="tenant-a=token1,tenant-b=token2", and the token names
  the tenant. Prints "retrysafe mcp: listening on http://HOST:PORT" on stdout.

Needs DATABASE_URL (a throwaway database would forget, on restart, what was
done). Keys are derived with RETRYSAFE_HMAC_KEY, shared with 'serve'. Results:
completed (replayed says whether this call acted), failed, in_flight (a tool
error with retry_after_ms), review (a tool error: do not retry), invalid or
refused (tool errors: nothing done). Runs the reconciler in the background
unless --reconcile=false.`)
	c.engineFlags.register(fs, e)
	c.lf.Register(fs, e, "RETRYSAFE_MCP_ADDR", "127.0.0.1:8090", 30*time.Second)
	fs.StringVar(&c.transport, "transport", "stdio", "stdio or http")
	fs.StringVar(&c.tenant, "tenant", e.Getenv("RETRYSAFE_TENANT"), "tenant of every call over stdio (env RETRYSAFE_TENANT)")
	fs.StringVar(&c.apiTokens, "api-tokens", e.Getenv("RETRYSAFE_API_TOKENS"), "over http: tenant=token pairs, comma separated (env RETRYSAFE_API_TOKENS; prefer the env)")
	fs.StringVar(&c.allowModelRef, "allow-model-ref", "", "tools (comma separated, e.g. pix.charge) that accept the model's intent_ref when the host sends none; their results say the guarantee is weaker")
	fs.BoolVar(&c.migrate, "migrate", false, "apply the embedded migrations before serving")
	fs.BoolVar(&c.reconcile, "reconcile", true, "run the reconciler loop in this process")
	registerMCPFlags(fs, &c.cfg)
	return fs
}

// registerMCPFlags adds the flags that set cfg's fields, defaulting to the
// MCP server's own defaults.
func registerMCPFlags(fs *flag.FlagSet, cfg *mcpserver.Config) {
	fs.DurationVar(&cfg.ExecuteTimeout, "execute-timeout", mcpserver.DefaultExecuteTimeout, "bound on one execution (freeze, provider call, record), independent of the client")
	fs.DurationVar(&cfg.ProgressInterval, "progress-interval", mcpserver.DefaultProgressInterval, "how often a call that asked for progress is told it is still waiting")
}

// check reads the transport's settings (the tenant, or the API tokens),
// the logs, the tools and the database, and names every one at fault at
// once.
func (c *mcpCmd) check(e *Env) error {
	var errs []error
	switch c.transport {
	case "stdio":
		if c.tenant == "" {
			errs = append(errs, errors.New("--tenant (or RETRYSAFE_TENANT) is not set: over stdio it names the tenant every call runs for"))
		} else if err := mcpserver.ValidateTenant(c.tenant); err != nil {
			errs = append(errs, fmt.Errorf("--tenant: %w", err))
		}
	case "http":
		var err error
		c.creds, err = parseAPITokens(c.apiTokens)
		errs = append(errs, err, c.lf.Check())
	default:
		errs = append(errs, fmt.Errorf("--transport %q: want stdio or http", c.transport))
	}
	var err error
	if c.log, c.reg, err = c.settings(e); err != nil {
		errs = append(errs, err)
	} else {
		errs = append(errs, c.modelRefTools())
	}
	if c.db.URL == "" {
		errs = append(errs, errors.New("mcp needs a database that outlives the process: set DATABASE_URL or --database-url"))
	}
	return errors.Join(errs...)
}

// modelRefTools reads --allow-model-ref: configured tools only.
func (c *mcpCmd) modelRefTools() error {
	for _, n := range strings.Split(c.allowModelRef, ",") {
		if n = strings.TrimSpace(n); n != "" {
			if _, ok := c.reg.Tool(n); !ok {
				return fmt.Errorf("--allow-model-ref: %q is not a configured tool (have %s)", n, strings.Join(c.reg.Names(), ", "))
			}
			c.cfg.ModelRefTools = append(c.cfg.ModelRefTools, n)
		}
	}
	return nil
}

// serveHTTP serves streamable HTTP at /mcp, beside /healthz and /metrics,
// until ctx ends.
func (c *mcpCmd) serveHTTP(ctx context.Context, e *Env, d *database, srv *mcpserver.Server, m *metrics.Metrics, rec *sidecar.Reconciler) error {
	mc := make([]mcpserver.Credential, len(c.creds))
	for i, cr := range c.creds {
		mc[i] = mcpserver.Credential{Tenant: cr.Tenant, Token: cr.Token}
	}
	h, err := srv.HTTPHandler(mc)
	if err != nil {
		return err
	}
	mux := http.NewServeMux()
	mux.Handle("/mcp", h)
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		io.WriteString(w, `{"status":"ok"}`) //nolint:errcheck
	})
	mux.Handle("GET /metrics", m.Handler())
	s := httpService{
		name:          "mcp",
		banner:        "retrysafe mcp",
		handler:       mux,
		log:           c.log,
		readTimeout:   30 * time.Second,
		readyAttrs:    []any{"transport", "http", "schema", d.Schema, "tools", c.reg.Names(), "tenants", len(c.creds), "reconciler", c.reconcile},
		shutdownAttrs: []any{"timeout", c.lf.shutdown},
		errKey:        "error",
	}
	if rec != nil {
		s.Background = func(ctx context.Context) { rec.Run(ctx) } //nolint:errcheck // Run returns nil when stopped
	}
	return c.lf.Serve(ctx, e, s)
}

// serveStdio speaks JSON-RPC on stdin and stdout, which carries the
// protocol and nothing else, until the host closes stdin or ctx ends.
func (c *mcpCmd) serveStdio(ctx context.Context, e *Env, d *database, srv *mcpserver.Server, rec *sidecar.Reconciler) error {
	bgCtx, stopBg := context.WithCancel(context.WithoutCancel(ctx))
	defer stopBg()
	bgDone := make(chan struct{})
	go func() {
		defer close(bgDone)
		if rec != nil {
			rec.Run(bgCtx) //nolint:errcheck // Run returns nil when stopped
		}
	}()
	c.log.Info("mcp: ready", "transport", "stdio", "schema", d.Schema, "tools", c.reg.Names(), "tenant", c.tenant, "reconciler", c.reconcile)
	err := srv.Serve(ctx, c.tenant, &mcp.IOTransport{Reader: io.NopCloser(e.Stdin), Writer: nopWriteCloser{e.Stdout}})
	stopBg()
	<-bgDone
	if err != nil && !errors.Is(err, context.Canceled) && !errors.Is(err, io.EOF) {
		return fmt.Errorf("mcp: %w", err)
	}
	c.log.Info("mcp: stopped")
	return nil
}

type nopWriteCloser struct{ io.Writer }

func (nopWriteCloser) Close() error { return nil }
