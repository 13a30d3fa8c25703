package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/retrysafe/retrysafe/server/mcpserver"
	"github.com/retrysafe/retrysafe/server/metrics"
	"github.com/retrysafe/retrysafe/server/sidecar"
)

func init() {
	Register(&Command{Name: "mcp", Summary: "serve the tools to any MCP host (stdio or streamable HTTP), once per intent", Run: runMCP})
}

func runMCP(ctx context.Context, e *Env, args []string) error {
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
	var (
		db  DBFlags
		rt  runtimeFlags
		lg  LogFlags
		lf  ListenFlags
		cfg mcpserver.Config
	)
	db.Register(fs, e)
	rt.register(fs, e)
	lg.Register(fs, e)
	lf.Register(fs, e, "RETRYSAFE_MCP_ADDR", "127.0.0.1:8090", 30*time.Second)
	transport := fs.String("transport", "stdio", "stdio or http")
	tenant := fs.String("tenant", e.Getenv("RETRYSAFE_TENANT"), "tenant of every call over stdio (env RETRYSAFE_TENANT)")
	apiTokens := fs.String("api-tokens", e.Getenv("RETRYSAFE_API_TOKENS"), "over http: tenant=token pairs, comma separated (env RETRYSAFE_API_TOKENS; prefer the env)")
	allowModelRef := fs.String("allow-model-ref", "", "tools (comma separated, e.g. pix.charge) that accept the model's intent_ref when the host sends none; their results say the guarantee is weaker")
	migrate := fs.Bool("migrate", false, "apply the embedded migrations before serving")
	reconcile := fs.Bool("reconcile", true, "run the reconciler loop in this process")
	fs.DurationVar(&cfg.ExecuteTimeout, "execute-timeout", 30*time.Second, "bound on one execution (freeze, provider call, record), independent of the client")
	fs.DurationVar(&cfg.ProgressInterval, "progress-interval", time.Second, "how often a call that asked for progress is told it is still waiting")
	if err := ParseNoArgs(e, fs, args); err != nil {
		return err
	}

	// Everything that needs no database first: a typo fails at once with
	// the setting's name.
	log, err := lg.Logger(e.Stderr)
	if err != nil {
		return err
	}
	var creds []sidecar.Credential
	switch *transport {
	case "stdio":
		if *tenant == "" {
			return errors.New("--tenant (or RETRYSAFE_TENANT) is not set: over stdio it names the tenant every call runs for")
		}
		if err := mcpserver.ValidateTenant(*tenant); err != nil {
			return fmt.Errorf("--tenant: %w", err)
		}
	case "http":
		if creds, err = parseAPITokens(*apiTokens); err != nil {
			return err
		}
		if err := lf.Check(); err != nil {
			return err
		}
	default:
		return fmt.Errorf("--transport %q: want stdio or http", *transport)
	}
	reg, err := rt.registry()
	if err != nil {
		return err
	}
	for _, n := range strings.Split(*allowModelRef, ",") {
		if n = strings.TrimSpace(n); n != "" {
			if _, ok := reg.Tool(n); !ok {
				return fmt.Errorf("--allow-model-ref: %q is not a configured tool (have %s)", n, strings.Join(reg.Names(), ", "))
			}
			cfg.ModelRefTools = append(cfg.ModelRefTools, n)
		}
	}
	if db.URL == "" {
		return errors.New("mcp needs a database that outlives the process: set DATABASE_URL or --database-url")
	}

	d, err := db.Open(ctx, e, *migrate)
	if err != nil {
		return err
	}
	defer d.Close()
	if err := checkMigrations(ctx, d, log); err != nil {
		return err
	}
	m := metrics.New()
	rtm, err := rt.build(d.Pool, reg, m, log, nil)
	if err != nil {
		return err
	}
	cfg.Executor, cfg.Tools, cfg.Metrics, cfg.Logger = rtm.Executor, reg, m, log
	srv, err := mcpserver.New(cfg)
	if err != nil {
		return err
	}
	var rec *sidecar.Reconciler
	if *reconcile {
		rec = &sidecar.Reconciler{Executor: rtm.Executor, Metrics: m, Logger: log, Interval: rt.reconcileInterval, Batch: rt.reconcileBatch}
	}

	if *transport == "http" {
		mc := make([]mcpserver.Credential, len(creds))
		for i, c := range creds {
			mc[i] = mcpserver.Credential{Tenant: c.Tenant, Token: c.Token}
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
			log:           log,
			readTimeout:   30 * time.Second,
			readyAttrs:    []any{"transport", "http", "schema", d.Schema, "tools", reg.Names(), "tenants", len(creds), "reconciler", *reconcile},
			shutdownAttrs: []any{"timeout", lf.shutdown},
			errKey:        "error",
		}
		if rec != nil {
			s.Background = func(ctx context.Context) { rec.Run(ctx) } //nolint:errcheck // Run returns nil when stopped
		}
		return lf.Serve(ctx, e, s)
	}

	// stdio: stdout carries the protocol and nothing else.
	bgCtx, stopBg := context.WithCancel(context.WithoutCancel(ctx))
	defer stopBg()
	bgDone := make(chan struct{})
	go func() {
		defer close(bgDone)
		if rec != nil {
			rec.Run(bgCtx) //nolint:errcheck // Run returns nil when stopped
		}
	}()
	log.Info("mcp: ready", "transport", "stdio", "schema", d.Schema, "tools", reg.Names(), "tenant", *tenant, "reconciler", *reconcile)
	err = srv.Serve(ctx, *tenant, &mcp.IOTransport{Reader: io.NopCloser(e.Stdin), Writer: nopWriteCloser{e.Stdout}})
	stopBg()
	<-bgDone
	if err != nil && !errors.Is(err, context.Canceled) && !errors.Is(err, io.EOF) {
		return fmt.Errorf("mcp: %w", err)
	}
	log.Info("mcp: stopped")
	return nil
}

type nopWriteCloser struct{ io.Writer }

func (nopWriteCloser) Close() error { return nil }
