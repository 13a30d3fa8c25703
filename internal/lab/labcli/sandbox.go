package labcli

import (
	"context"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"strings"
	"time"

	"github.com/retrysafe/retrysafe/idempotency"
	"github.com/retrysafe/retrysafe/internal/cli"
	"github.com/retrysafe/retrysafe/sandbox/fault"
	"github.com/retrysafe/retrysafe/sandbox/psp"
)

func init() {
	cli.Register(&cli.Command{Name: "sandbox", Summary: "run local stand-ins: a Pix PSP, an OpenAI-compatible model, WhatsApp; with fault injection", Run: runSandbox})
}

// sandboxService is one `retrysafe sandbox <service>`. Services are listed
// here so that `sandbox --help` shows them all.
type sandboxService struct {
	name, summary string
	run           func(ctx context.Context, e *cli.Env, args []string) error
}

var sandboxServices = []sandboxService{
	{"psp", "a Pix payment provider that honours Idempotency-Key and sends signed webhooks", runSandboxPSP},
	{"model", "an OpenAI-compatible chat model playing a billing assistant, non-deterministic on purpose (seedable)", runSandboxModel},
	{"whatsapp", "a WhatsApp Cloud API that deduplicates messages by Idempotency-Key", runSandboxWhatsApp},
}

func sandboxUsage(w io.Writer) {
	fmt.Fprintln(w, "Usage: retrysafe sandbox <service> [flags]   (retrysafe sandbox <service> --help for its flags)")
	fmt.Fprintln(w)
	fmt.Fprintln(w, "Local stand-ins for the services retrysafe calls, built to behave like the real")
	fmt.Fprintln(w, "ones under retries: they honour Idempotency-Key, store their first answer, send")
	fmt.Fprintln(w, "signed webhooks with redelivery, and fail on request (X-Sandbox-Fault header or")
	fmt.Fprintln(w, "--fault flag) so that every failure a retry must survive can be produced.")
	fmt.Fprintln(w)
	fmt.Fprintln(w, "Services:")
	for _, s := range sandboxServices {
		fmt.Fprintf(w, "  %-10s %s\n", s.name, s.summary)
	}
}

func runSandbox(ctx context.Context, e *cli.Env, args []string) error {
	if len(args) == 0 {
		sandboxUsage(e.Stderr)
		return cli.ErrUsage
	}
	switch args[0] {
	case "-h", "--help", "-help", "help":
		if len(args) > 1 { // sandbox help psp
			return runSandbox(ctx, e, []string{args[1], "--help"})
		}
		sandboxUsage(e.Stdout)
		return flag.ErrHelp
	}
	for _, s := range sandboxServices {
		if s.name == args[0] {
			return s.run(ctx, e, args[1:])
		}
	}
	fmt.Fprintf(e.Stderr, "retrysafe sandbox: unknown service %q\n\n", args[0])
	sandboxUsage(e.Stderr)
	return cli.ErrUsage
}

// sandboxPSPHelp is `retrysafe sandbox psp --flavour v1 --help`'s text,
// with the idempotency policy the PSP runs.
func sandboxPSPHelp() string {
	return `Runs the sandbox Pix payment provider:

  POST /v1/pix/charges          Authorization: Bearer <token>, Idempotency-Key: <key>
       {"amount_cents":int,"pix_key":string,"pix_key_type":string,"description":string}
       201 charge {"id","amount_cents","pix_key","status":"paid","idempotency_key","created",...}
       400 malformed / missing key (problem+json), 422 invalid amount or key, or the key
       reused with another body; 409 + Retry-After while the first request with the key runs.
       A repeated request gets the stored answer, byte for byte, with Idempotent-Replayed: true.
  GET  /v1/pix/charges?idempotency_key=K   the charge created with K, or 404
  GET  /v1/pix/charges                     {"data":[...]} every charge, newest first
  GET  /v1/pix/charges/{id}, /healthz

The bearer token names the merchant; any token is accepted and scopes the
merchant's charges and keys. Key, charge, webhook event and stored answer
commit in one transaction (transactional mode): a killed process leaves
nothing behind, and the retry creates the charge.

Idempotency policy (defaults; --key-retention and --purge-every change them):
` + sandboxWrap(idempotency.Config{}.Policy(), 78) + `

Faults, per request with the header X-Sandbox-Fault, or for every POST with
--fault (at --fault-rate): fail-before (500, nothing executed), drop-after
(executed, connection dropped), fail-after (executed, then 500), delay=D
(before executing), slow=D (executed, answer after D); combine with commas.

Webhooks: with --webhook-url, every charge sends a payment_intent.succeeded
event signed with "Retrysafe-Signature: t=<unix>,v1=<hex HMAC-SHA256(secret,
"<t>.<body>")>", redelivered with exponential backoff until a 2xx answer.

The PSP keeps its tables in its own schema (default retrysafe_psp, env
RETRYSAFE_PSP_SCHEMA), migrated at start. Without DATABASE_URL a private
throwaway PostgreSQL is started. Prints one line, "retrysafe sandbox psp:
listening on http://HOST:PORT", on stdout when ready (--addr with port 0
picks a free port). SIGTERM or SIGINT: finish requests in progress, exit 0.`
}

func runSandboxPSP(ctx context.Context, e *cli.Env, args []string) error {
	flavour, args, ferr := splitFlavour(args)
	if ferr != nil {
		return ferr
	}
	if flavour == flavourAPIPix {
		return runSandboxPSPAPIPix(ctx, e, args)
	}
	defaults := psp.Config{}.WithDefaults()
	fs := cli.NewFlagSet(e, "sandbox psp", "sandbox psp [--addr HOST:PORT] [--database-url URL] [--schema NAME] [flags]",
		sandboxPSPHelp())
	var db cli.DBFlags
	db.Register(fs, e)
	flavourFlag(fs)
	// The PSP is another party: its tables live apart from retrysafe's.
	db.Schema = e.Getenv("RETRYSAFE_PSP_SCHEMA")
	if db.Schema == "" {
		db.Schema = psp.DefaultSchema
	}
	if f := fs.Lookup("schema"); f != nil {
		f.DefValue = db.Schema
		f.Usage = "schema that holds the PSP's tables (env RETRYSAFE_PSP_SCHEMA)"
	}
	var lf cli.ListenFlags
	lf.Register(fs, e, "RETRYSAFE_PSP_ADDR", "127.0.0.1:8091", 10*time.Second)
	var cfg psp.Config
	faultSpec := fs.String("fault", "", "faults for every POST without an X-Sandbox-Fault header, e.g. fail-after or delay=200ms,drop-after")
	fs.Float64Var(&cfg.FaultRate, "fault-rate", 1, "probability (0..1) that --fault applies to a request")
	fs.StringVar(&cfg.WebhookURL, "webhook-url", e.Getenv("RETRYSAFE_PSP_WEBHOOK_URL"), "URL that receives a signed event after each charge (env RETRYSAFE_PSP_WEBHOOK_URL)")
	fs.StringVar(&cfg.WebhookSecret, "webhook-secret", "", "secret that signs webhook events (env RETRYSAFE_PSP_WEBHOOK_SECRET; prefer the env)")
	fs.DurationVar(&cfg.WebhookBackoff, "webhook-backoff", defaults.WebhookBackoff, "pause after a failed delivery, doubled per attempt")
	fs.DurationVar(&cfg.WebhookMaxBackoff, "webhook-max-backoff", defaults.WebhookMaxBackoff, "longest pause between deliveries")
	fs.IntVar(&cfg.WebhookMaxAttempts, "webhook-max-attempts", defaults.WebhookMaxAttempts, "delivery attempts before an event is abandoned")
	fs.DurationVar(&cfg.Idempotency.Retention, "key-retention", defaults.Idempotency.Retention, "how long an idempotency key and its stored answer are kept")
	fs.DurationVar(&cfg.Idempotency.PurgeEvery, "purge-every", defaults.Idempotency.PurgeEvery, "pause between purges of expired keys")
	fs.DurationVar(&cfg.IdempotencyWait, "key-wait", 0, "let a duplicate of a charge in progress wait this long for its answer instead of 409")
	logLevel := fs.String("log-level", "info", "log level: debug, info, warn or error")
	if err := cli.ParseNoArgs(e, fs, args); err != nil {
		return err
	}

	if cfg.WebhookSecret == "" { // read after parsing so that --help never prints it
		cfg.WebhookSecret = e.Getenv("RETRYSAFE_PSP_WEBHOOK_SECRET")
	}

	// Everything that needs no database is checked first, so that a typo
	// fails at once with the setting's name.
	var err error
	if cfg.Fault, err = fault.Parse(*faultSpec); err != nil {
		return fmt.Errorf("--fault: %w", err)
	}
	var level slog.Level
	if err := level.UnmarshalText([]byte(*logLevel)); err != nil {
		return fmt.Errorf("--log-level %q: want debug, info, warn or error", *logLevel)
	}
	log := slog.New(slog.NewTextHandler(e.Stderr, &slog.HandlerOptions{Level: level}))
	cfg.Logger = log
	if err := cfg.WithDefaults().Validate(); err != nil {
		return err
	}
	if err := lf.Check(); err != nil {
		return err
	}
	return servePSP(ctx, e, &db, &lf, cfg)
}

// servePSP opens the PSP's database, migrates its schema and serves it.
func servePSP(ctx context.Context, e *cli.Env, db *cli.DBFlags, lf *cli.ListenFlags, cfg psp.Config) error {
	d, err := db.Open(ctx, e, false)
	if err != nil {
		return err
	}
	defer d.Close()
	if err := psp.Migrate(ctx, d.Pool, d.Schema); err != nil {
		return err
	}
	srv, err := psp.New(d.Pool, cfg)
	if err != nil {
		return err
	}
	s := cli.SandboxHTTP("psp", cfg.Logger, srv.Handler(), "schema", d.Schema, "fault", cfg.Fault.String(),
		"webhook", cfg.WebhookURL != "", "key_retention", srv.Middleware().Config().Retention)
	// Webhook deliveries stop after the last charge is answered; pending
	// ones are sent by the next start.
	s.Background = srv.Run
	return lf.Serve(ctx, e, s)
}

// sandboxWrap folds text into lines of at most width columns for --help.
func sandboxWrap(text string, width int) string {
	var b strings.Builder
	col := 0
	for _, w := range strings.Fields(text) {
		if col > 0 && col+1+len(w) > width {
			b.WriteByte('\n')
			col = 0
		} else if col > 0 {
			b.WriteByte(' ')
			col++
		}
		b.WriteString(w)
		col += len(w)
	}
	return b.String()
}
