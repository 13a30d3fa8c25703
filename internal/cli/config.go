package cli

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net/url"
	"strconv"
	"time"

	"github.com/retrysafe/retrysafe/derive"
	"github.com/retrysafe/retrysafe/executor"
	"github.com/retrysafe/retrysafe/intent"
	"github.com/retrysafe/retrysafe/internal/pairs"
	"github.com/retrysafe/retrysafe/server/metrics"
	"github.com/retrysafe/retrysafe/server/sidecar"
	"github.com/retrysafe/retrysafe/tools"
)

// parseAPITokens reads RETRYSAFE_API_TOKENS: "tenant-a=token1,tenant-b=token2".
// White space around entries is ignored. Errors (UsageErrors) name the
// entry by position and tenant, never the token.
func parseAPITokens(s string) ([]sidecar.Credential, error) {
	ps, err := pairs.Split(s, "tenant=token")
	switch {
	case errors.Is(err, pairs.ErrEmpty):
		return nil, usageErr(errors.New("RETRYSAFE_API_TOKENS is empty: set it to tenant=token pairs, e.g. tenant-a=secret1,tenant-b=secret2"))
	case err != nil:
		return nil, usageErr(fmt.Errorf("RETRYSAFE_API_TOKENS %w", err))
	}
	out := make([]sidecar.Credential, len(ps))
	for i, p := range ps {
		out[i] = sidecar.Credential{Tenant: p.Key, Token: p.Value}
	}
	if err := sidecar.ValidateCredentials(out); err != nil {
		return nil, usageErr(fmt.Errorf("RETRYSAFE_API_TOKENS: %w", err))
	}
	return out, nil
}

// runtimeFlags configure what executes tools: the HMAC secret, the providers
// and the executor's timings. serve and reconcile share them. Flags override
// the environment; secrets are best left in the environment (flags show in
// the process list).
type runtimeFlags struct {
	hmacKey                   string
	pspURL, pspToken          string
	whatsappURL, whatsappTok  string
	emailURL, emailToken      string
	owner                     string
	lease, timeout, heartbeat time.Duration
	maxAttempts               int
	retryHorizon, backoffMax  time.Duration
	reconcileInterval         time.Duration
	lostWriteRetry            time.Duration
	reconcileBatch            int
	syncCompletion            bool
	groupCommit               int
	groupCommitConns          int
	syncCompletionEnv         string // checked by registry: a typo must not pass for false
	apipix                    apipixFlags
	stripe                    stripeFlags
}

func (f *runtimeFlags) register(fs *flag.FlagSet, e *Env) {
	fs.StringVar(&f.hmacKey, "hmac-key", e.Getenv("RETRYSAFE_HMAC_KEY"),
		"HMAC secret the keys are derived with, at least 32 bytes (env RETRYSAFE_HMAC_KEY; prefer the env)")
	fs.StringVar(&f.pspURL, "psp-url", e.Getenv("RETRYSAFE_PSP_URL"), "base URL of the Pix PSP for pix.charge (env RETRYSAFE_PSP_URL)")
	fs.StringVar(&f.pspToken, "psp-token", e.Getenv("RETRYSAFE_PSP_TOKEN"), "bearer token pix.charge presents to the PSP (env RETRYSAFE_PSP_TOKEN; prefer the env)")
	fs.StringVar(&f.whatsappURL, "whatsapp-url", e.Getenv("RETRYSAFE_WHATSAPP_URL"), "base URL of the WhatsApp API for whatsapp.send_template (env RETRYSAFE_WHATSAPP_URL; empty: tool off)")
	fs.StringVar(&f.whatsappTok, "whatsapp-token", e.Getenv("RETRYSAFE_WHATSAPP_TOKEN"), "bearer token for the WhatsApp API (env RETRYSAFE_WHATSAPP_TOKEN)")
	fs.StringVar(&f.emailURL, "email-url", e.Getenv("RETRYSAFE_EMAIL_URL"), "base URL of the e-mail API for email.send (env RETRYSAFE_EMAIL_URL; empty: tool off)")
	fs.StringVar(&f.emailToken, "email-token", e.Getenv("RETRYSAFE_EMAIL_TOKEN"), "bearer token for the e-mail API (env RETRYSAFE_EMAIL_TOKEN)")
	f.apipix.register(fs, e)
	f.stripe.register(fs, e)
	fs.StringVar(&f.owner, "owner", "", "lease owner name of this process; each call's lease owner is it, a slash and random characters (default host:pid:random)")
	fs.DurationVar(&f.lease, "lease", executor.DefaultLease,
		fmt.Sprintf("how long a claim on an action is exclusive; must exceed --timeout plus a %s margin", executor.DefaultLeaseMargin))
	fs.DurationVar(&f.timeout, "timeout", executor.DefaultTimeout, "bound on one provider call")
	fs.DurationVar(&f.heartbeat, "heartbeat", 0, "extend the lease this often during a call (0: off)")
	fs.IntVar(&f.maxAttempts, "max-attempts", 0, "also bound the attempts of one action (0: only --retry-horizon ends the retries)")
	fs.DurationVar(&f.retryHorizon, "retry-horizon", executor.DefaultRetryHorizon,
		"how long after its first claim an action's transient or uncertain failures are retried with the same key; then it fails if the provider provably never acted, else goes to review")
	fs.DurationVar(&f.backoffMax, "backoff-max", executor.DefaultBackoffMax,
		fmt.Sprintf("longest pause between two tries of one action (exponential from %s, with jitter)", executor.DefaultBackoffBase))
	fs.DurationVar(&f.reconcileInterval, "reconcile-interval", executor.DefaultReconcileInterval, "pause between reconciler passes that found little to do")
	fs.IntVar(&f.reconcileBatch, "reconcile-batch", executor.DefaultReconcileBatch, "expired leases one reconciler pass takes")
	fs.DurationVar(&f.lostWriteRetry, "lost-write-retry", executor.DefaultLostWriteRetry,
		"how long a write lost with its database connection is sent again while the database cannot be reached; set it to your database's failover time (then the intent is settled later by the reconciler, by the same key)")
	fs.IntVar(&f.groupCommit, "group-commit", executor.DefaultGroupCommit, "most concurrent calls that share one claim (or completion) round trip and commit; 1 turns grouping off")
	fs.IntVar(&f.groupCommitConns, "group-commit-conns", executor.DefaultGroupCommitConns, "grouped round trips of each kind at the database at once, each on its own pool connection")
	f.syncCompletionEnv = e.Getenv("RETRYSAFE_SYNC_COMPLETION")
	syncDefault, _ := strconv.ParseBool(f.syncCompletionEnv)
	fs.BoolVar(&f.syncCompletion, "sync-completion", syncDefault,
		"make every completion wait for its WAL flush (env RETRYSAFE_SYNC_COMPLETION=true); by default a success the provider can tell again by the key does not")
}

// engineFlags are the settings of every command that keys or executes
// tools: the database, the tool runtime and the logs.
type engineFlags struct {
	db DBFlags
	rt runtimeFlags
	lg LogFlags
}

func (f *engineFlags) register(fs *flag.FlagSet, e *Env) {
	f.db.Register(fs, e)
	f.rt.register(fs, e)
	f.lg.Register(fs, e)
}

// settings checks what needs no database, the logs and the tools, and
// names every setting at fault at once (a UsageError).
func (f *engineFlags) settings(e *Env) (*slog.Logger, *tools.Registry, error) {
	log, logErr := f.lg.Logger(e.Stderr)
	reg, regErr := f.rt.registry()
	return log, reg, usageErr(errors.Join(logErr, regErr))
}

// openRuntime is how the operator commands that key or execute tools
// (reconcile, amend) start: the settings checked, the existing database
// opened, the tool runtime built on it. The caller closes the database.
func (f *engineFlags) openRuntime(ctx context.Context, e *Env, command string) (*database, *toolRuntime, *slog.Logger, error) {
	log, reg, err := f.settings(e)
	if err != nil {
		return nil, nil, nil, err
	}
	d, err := f.db.openExisting(ctx, e, command)
	if err != nil {
		return nil, nil, nil, err
	}
	rtm, err := f.rt.build(d.Pool, reg, metrics.New(), log, nil)
	if err != nil {
		d.Close()
		return nil, nil, nil, err
	}
	return d, rtm, log, nil
}

// registry builds the tool registry from the provider settings. It checks
// everything that can be checked without a database, so that a bad
// configuration fails at start-up with a message (a UsageError) naming
// every setting at fault.
func (f *runtimeFlags) registry() (*tools.Registry, error) {
	// Every setting that is wrong is named at once: a first start should
	// not take one failed start per missing variable.
	var errs []error
	if v := f.syncCompletionEnv; v != "" {
		if _, err := strconv.ParseBool(v); err != nil {
			errs = append(errs, fmt.Errorf("RETRYSAFE_SYNC_COMPLETION=%q: want true or false", v))
		}
	}
	switch {
	case f.hmacKey == "":
		errs = append(errs, errors.New("RETRYSAFE_HMAC_KEY (or --hmac-key) is not set: set it to a secret of at least 32 bytes, shared by every service that must derive the same keys"))
	case len(f.hmacKey) < derive.MinSecretLen:
		errs = append(errs, fmt.Errorf("RETRYSAFE_HMAC_KEY is %d bytes; at least %d are required", len(f.hmacKey), derive.MinSecretLen))
	}
	// One client for every provider tool: no timeout of its own (the
	// executor bounds each call with its context, shorter than the lease).
	client := tools.NewClient()
	reg, _ := tools.NewRegistry()
	add := func(name, setting, base, token string, mk func(tools.HTTPConfig) (tools.Tool, error)) error {
		if base == "" {
			return nil
		}
		if err := checkURL(base); err != nil {
			return fmt.Errorf("%s: %w", setting, err)
		}
		t, err := mk(tools.HTTPConfig{BaseURL: base, Token: token, Client: client})
		if err != nil {
			return fmt.Errorf("%s: %w", setting, err)
		}
		return reg.Register(t)
	}
	errs = append(errs,
		add(tools.PixChargeName, "RETRYSAFE_PSP_URL", f.pspURL, f.pspToken, func(c tools.HTTPConfig) (tools.Tool, error) { return tools.NewPixCharge(c) }),
		add(tools.WhatsAppName, "RETRYSAFE_WHATSAPP_URL", f.whatsappURL, f.whatsappTok, func(c tools.HTTPConfig) (tools.Tool, error) { return tools.NewWhatsAppTemplate(c) }),
		add(tools.EmailSendName, "RETRYSAFE_EMAIL_URL", f.emailURL, f.emailToken, func(c tools.HTTPConfig) (tools.Tool, error) { return tools.NewEmailSend(c) }),
		f.apipix.add(reg),
		f.stripe.add(reg))
	if f.pspURL != "" && f.pspToken == "" {
		errs = append(errs, errors.New("RETRYSAFE_PSP_TOKEN (or --psp-token) is not set: pix.charge needs the bearer token the PSP issued"))
	}
	if err := errors.Join(errs...); err != nil {
		return nil, usageErr(err)
	}
	if len(reg.Names()) == 0 {
		return nil, usageErr(errors.New("no tools configured: set RETRYSAFE_APIPIX_URL (pix.cob, pix.refund; with its client id, secret and chave), RETRYSAFE_PSP_URL (pix.charge), RETRYSAFE_STRIPE_API_KEY (stripe.payment), RETRYSAFE_WHATSAPP_URL or RETRYSAFE_EMAIL_URL"))
	}
	return reg, nil
}

func checkURL(raw string) error {
	u, err := url.Parse(raw)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		// The value itself is not echoed: a URL may carry credentials.
		return errors.New("not an http(s) URL (want https://host[:port][/path])")
	}
	if u.User != nil {
		return errors.New("the URL carries user:password; give credentials in their own settings")
	}
	return nil
}

// toolRuntime is what executes tools.
type toolRuntime struct {
	Tools    *tools.Registry
	Deriver  *derive.Deriver
	Intents  *intent.Store
	Executor *executor.Executor
	Metrics  *metrics.Metrics
}

// build assembles the executor on db, with m as its Observer, so that its
// provider calls and executions are measured. Every command that executes
// tools builds its executor here, so that every executor flag reaches every
// one of them; hook, when not nil, adjusts the configuration last (the
// worker's failpoints).
func (f *runtimeFlags) build(db executor.DBTX, reg *tools.Registry, m *metrics.Metrics, log *slog.Logger, hook func(*executor.Config)) (*toolRuntime, error) {
	d, err := reg.Deriver([]byte(f.hmacKey))
	if err != nil {
		return nil, fmt.Errorf("RETRYSAFE_HMAC_KEY / tool schemas: %w", err)
	}
	store, err := intent.New(intent.Config{Deriver: d, Logger: log})
	if err != nil {
		return nil, err
	}
	cfg := executor.Config{
		DB:                db,
		Intents:           store,
		Tools:             reg,
		Observer:          m,
		Owner:             f.owner,
		Lease:             f.lease,
		Timeout:           f.timeout,
		Heartbeat:         f.heartbeat,
		MaxAttempts:       f.maxAttempts,
		RetryHorizon:      f.retryHorizon,
		BackoffMax:        f.backoffMax,
		Logger:            log,
		ReconcileBatch:    f.reconcileBatch,
		ReconcileInterval: f.reconcileInterval,
		LostWriteRetry:    f.lostWriteRetry,
		SyncCompletion:    f.syncCompletion,
		GroupCommit:       f.groupCommit,
		GroupCommitConns:  f.groupCommitConns,
	}
	if hook != nil {
		hook(&cfg)
	}
	ex, err := executor.New(cfg)
	if err != nil {
		return nil, fmt.Errorf("executor settings (--lease, --timeout, --heartbeat, --max-attempts, --retry-horizon, --backoff-max, --group-commit, --group-commit-conns, --lost-write-retry): %w", err)
	}
	return &toolRuntime{Tools: reg, Deriver: d, Intents: store, Executor: ex, Metrics: m}, nil
}

// LogFlags choose the slog handler. Logs go to stderr; stdout is for the
// command's own output (serve's ready line, inspect's report).
type LogFlags struct {
	format, level string
}

func (l *LogFlags) Register(fs *flag.FlagSet, e *Env) {
	format := e.Getenv("RETRYSAFE_LOG_FORMAT")
	if format == "" {
		format = "text"
	}
	level := e.Getenv("RETRYSAFE_LOG_LEVEL")
	if level == "" {
		level = "info"
	}
	fs.StringVar(&l.format, "log-format", format, "log format: text or json (env RETRYSAFE_LOG_FORMAT)")
	fs.StringVar(&l.level, "log-level", level, "log level: debug, info, warn or error (env RETRYSAFE_LOG_LEVEL)")
}

// Logger is the logger the flags choose, writing to w; a wrong flag is a
// UsageError.
func (l *LogFlags) Logger(w io.Writer) (*slog.Logger, error) {
	var lv slog.Level
	if err := lv.UnmarshalText([]byte(l.level)); err != nil {
		return nil, usageErr(fmt.Errorf("--log-level %q: want debug, info, warn or error", l.level))
	}
	opts := &slog.HandlerOptions{Level: lv}
	switch l.format {
	case "text":
		return slog.New(slog.NewTextHandler(w, opts)), nil
	case "json":
		return slog.New(slog.NewJSONHandler(w, opts)), nil
	}
	return nil, usageErr(fmt.Errorf("--log-format %q: want text or json", l.format))
}
