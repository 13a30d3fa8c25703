package cli

import (
	"cmp"
	"context"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/riverqueue/river"
	openai "github.com/sashabaranov/go-openai"

	"github.com/retrysafe/retrysafe/agent"
	"github.com/retrysafe/retrysafe/executor"
	"github.com/retrysafe/retrysafe/internal/failpoint"
	"github.com/retrysafe/retrysafe/internal/riverschema"
	"github.com/retrysafe/retrysafe/server/metrics"
	"github.com/retrysafe/retrysafe/tools"
	"github.com/retrysafe/retrysafe/webhook"
)

func init() {
	Register(&Command{Name: "worker", Summary: "run the WhatsApp agent: answer inbound messages, charge once, reply once", Run: runWorker})
}

// workerCmd is the worker's settings and, once checked, what they build.
type workerCmd struct {
	engineFlags
	acf agent.Config
	rcf agent.RiverConfig

	journal, baseURL, modelTools, replyTemplate, refusal, groups string
	migrate, reconcile                                           bool
	shutdown                                                     time.Duration

	log    *slog.Logger
	reg    *tools.Registry
	apiKey string
}

func runWorker(ctx context.Context, e *Env, args []string) error {
	var w workerCmd
	if err := ParseNoArgs(e, w.flags(e), args); err != nil {
		return err
	}
	// Everything that needs no database is checked first.
	if err := w.check(e); err != nil {
		return usageErr(err)
	}
	d, err := w.open(ctx, e)
	if err != nil {
		return err
	}
	defer d.Close()

	rtm, err := w.rt.workerRuntime(d.Pool, w.reg, w.log)
	if err != nil {
		return err
	}
	client, err := w.client(d, rtm)
	if err != nil {
		return err
	}
	return w.work(ctx, e, d, client, rtm.Executor)
}

func (w *workerCmd) flags(e *Env) *flag.FlagSet {
	fs := NewFlagSet(e, "worker", "worker [--migrate] [--journal on|off] [--concurrency N] [flags]",
		`Works the agent's River queues in the database:

  agent_inbox  one job per inbound WhatsApp message (queued by the webhook):
               model call (journaled per message and step) → tool calls frozen
               and executed once (pix.charge with the conversation's open
               invoice as intent_ref) → the reply recorded with its outbox job
  agent_reply  sends the recorded reply through whatsapp.send_text, once
  payment_notify  sends the receipt of a payment webhook (see serve) through
               whatsapp.send_template or email.send, once

The model: OPENAI_API_KEY, and OPENAI_BASE_URL to talk to any
OpenAI-compatible endpoint (the sandbox model is just another base URL; the
key may then be empty). Tools: RETRYSAFE_PSP_URL + RETRYSAFE_PSP_TOKEN
(pix.charge) and RETRYSAFE_WHATSAPP_URL (+ RETRYSAFE_WHATSAPP_TOKEN), which
replies need. Keys are derived with RETRYSAFE_HMAC_KEY (at least 32 bytes).

With --journal on (the default) a redelivered message replays the model's
recorded answers instead of paying for them again; --journal off calls the
model every time (and still charges and replies once). Every call is in the
model_calls ledger: 'retrysafe tokens measure' reads it.

--migrate applies retrysafe's and River's migrations first. Prints one line,
"retrysafe: worker running", on stdout when ready. SIGTERM or SIGINT: stop
fetching jobs, let running ones finish (up to --shutdown-timeout, then cancel
them: River retries them later), exit 0. Crash tests set
RETRYSAFE_FAILPOINTS (see package agent).`)
	w.engineFlags.register(fs, e)
	model := cmp.Or(e.Getenv("OPENAI_MODEL"), "gpt-4o-mini")
	fs.StringVar(&w.acf.ModelName, "model", model, "model name sent to the API and recorded in the ledger (env OPENAI_MODEL)")
	fs.StringVar(&w.baseURL, "openai-base-url", e.Getenv("OPENAI_BASE_URL"), "OpenAI-compatible API base URL, e.g. http://127.0.0.1:8090/v1 (env OPENAI_BASE_URL; empty: api.openai.com)")
	fs.StringVar(&w.journal, "journal", cmp.Or(e.Getenv("RETRYSAFE_JOURNAL"), string(agent.JournalOn)), "model journal: on (replay recorded answers on redelivery) or off (env RETRYSAFE_JOURNAL)")
	fs.StringVar(&w.modelTools, "model-tools", tools.PixChargeName, "comma-separated tools offered to the model (the reply tool never is)")
	registerAgentFlags(fs, &w.acf, &w.rcf)
	fs.StringVar(&w.replyTemplate, "reply-template", e.Getenv("RETRYSAFE_REPLY_TEMPLATE"), "approved template replies go out as when the 24-hour customer-service window is closed: name[:language] for every tenant, and/or tenant=name[:language],... per tenant; the reply's text is its one body parameter {{1}} (env RETRYSAFE_REPLY_TEMPLATE; empty: such replies are held for review)")
	fs.StringVar(&w.refusal, "refusal", string(agent.RefusalFixed), "how a model refusal is answered: fixed (a fixed text), relay (the refusal's text) or review (nothing sent)")
	fs.StringVar(&w.groups, "groups", string(agent.GroupsConversation), "WhatsApp group messages: conversation (answered in the group) or refuse (a fixed reply, no model call)")
	fs.BoolVar(&w.migrate, "migrate", false, "apply retrysafe's and River's migrations before working")
	fs.BoolVar(&w.reconcile, "reconcile", true, "run the executor's reconciler in this process")
	fs.DurationVar(&w.shutdown, "shutdown-timeout", 30*time.Second, "how long SIGTERM waits for running jobs before cancelling them")
	return fs
}

// registerAgentFlags adds the flags that set acf's and rcf's fields,
// defaulting to the agent's own defaults (River's for --poll).
func registerAgentFlags(fs *flag.FlagSet, acf *agent.Config, rcf *agent.RiverConfig) {
	fs.IntVar(&rcf.Concurrency, "concurrency", agent.DefaultConcurrency, "jobs worked at once per queue (inbox and reply)")
	fs.IntVar(&acf.MaxSteps, "max-steps", agent.DefaultMaxSteps, "model calls per message at most")
	fs.DurationVar(&acf.ModelTimeout, "model-timeout", agent.DefaultModelTimeout, "bound on one model call")
	fs.DurationVar(&acf.ClaimTTL, "claim-ttl", agent.DefaultClaimTTL, "how long a worker's claim on a message holds redeliveries back; must exceed --model-timeout")
	fs.DurationVar(&rcf.JobTimeout, "job-timeout", agent.DefaultJobTimeout, "River cancels a job running longer than this")
	fs.DurationVar(&rcf.RescueStuckJobsAfter, "rescue-after", agent.DefaultRescueStuckJobsAfter, "a job running this long is presumed orphaned and retried; must exceed --job-timeout")
	fs.DurationVar(&rcf.RetryBase, "retry-base", agent.DefaultRetryBase, "first retry delay of a failed job (doubles each attempt, with jitter)")
	fs.DurationVar(&rcf.RetryMax, "retry-max", agent.DefaultRetryMax, "longest retry delay")
	fs.IntVar(&rcf.MaxAttempts, "job-attempts", agent.DefaultMaxAttempts, "attempts before River discards a job")
	fs.DurationVar(&rcf.FetchPollInterval, "poll", river.FetchPollIntervalDefault, "fallback poll for new jobs when LISTEN/NOTIFY is quiet (at least 100ms)")
}

// check reads the agent's policies, the model endpoint, the tools (the
// reply tool among them) and the River settings, and names every one at
// fault at once.
func (w *workerCmd) check(e *Env) error {
	var errs []error
	bad := func(err error) { errs = append(errs, err) }
	var err error
	if w.log, err = w.lg.Logger(e.Stderr); err != nil {
		bad(err)
	}
	acf := &w.acf
	acf.Refusal, acf.Groups = agent.RefusalPolicy(w.refusal), agent.GroupPolicy(w.groups)
	switch acf.Refusal {
	case agent.RefusalFixed, agent.RefusalRelay, agent.RefusalReview:
	default:
		bad(fmt.Errorf("--refusal %q: want fixed, relay or review", w.refusal))
	}
	if acf.Groups != agent.GroupsConversation && acf.Groups != agent.GroupsRefuse {
		bad(fmt.Errorf("--groups %q: want conversation or refuse", w.groups))
	}
	if acf.Templates, err = parseReplyTemplates(w.replyTemplate); err != nil {
		bad(err)
	}
	acf.Journal = agent.JournalMode(w.journal)
	if acf.Journal != agent.JournalOn && acf.Journal != agent.JournalOff {
		bad(fmt.Errorf("--journal %q: want on or off", w.journal))
	}
	w.apiKey = e.Getenv("OPENAI_API_KEY")
	switch {
	case w.apiKey == "" && w.baseURL == "":
		bad(errors.New("OPENAI_API_KEY is not set: set it, or OPENAI_BASE_URL to an OpenAI-compatible endpoint that needs none"))
	case w.baseURL != "":
		if err := checkURL(w.baseURL); err != nil {
			bad(fmt.Errorf("OPENAI_BASE_URL: %w", err))
		}
	}
	if err := w.checkTools(); err != nil {
		bad(err)
	}
	if w.rcf, err = w.rcf.Validate(); err != nil {
		bad(fmt.Errorf("the River settings (--job-timeout, --rescue-after, --retry-*, --concurrency): %w", err))
	}
	return errors.Join(errs...)
}

// checkTools builds the registry with the reply tool in it and the tools
// offered to the model.
func (w *workerCmd) checkTools() error {
	reg, err := w.rt.registry()
	if w.rt.whatsappURL == "" {
		err = errors.Join(errors.New("RETRYSAFE_WHATSAPP_URL is not set: the worker sends its replies through WhatsApp"), err)
	}
	if err != nil {
		return err
	}
	reply, err := agent.NewWhatsAppText(tools.HTTPConfig{BaseURL: w.rt.whatsappURL, Token: w.rt.whatsappTok})
	if err != nil {
		return fmt.Errorf("RETRYSAFE_WHATSAPP_URL: %w", err)
	}
	if err := reg.Register(reply); err != nil {
		return err
	}
	w.acf.ModelTools = nil
	for _, n := range strings.Split(w.modelTools, ",") {
		if n = strings.TrimSpace(n); n != "" {
			if _, ok := reg.Tool(n); !ok {
				return fmt.Errorf("--model-tools: %q is not configured (configured: %s)", n, strings.Join(reg.Names(), ", "))
			}
			w.acf.ModelTools = append(w.acf.ModelTools, n)
		}
	}
	if len(w.acf.ModelTools) == 0 {
		return errors.New("--model-tools is empty: the model needs at least one tool")
	}
	w.reg = reg
	return nil
}

// open opens the database with River's tables in it, migrating first when
// asked to.
func (w *workerCmd) open(ctx context.Context, e *Env) (*database, error) {
	d, err := w.db.Open(ctx, e, w.migrate)
	if err != nil {
		return nil, err
	}
	if err := w.prepare(ctx, d); err != nil {
		d.Close()
		return nil, err
	}
	if want := 2*w.rcf.Concurrency + 2; w.db.maxConns < want {
		w.log.Warn("worker: --max-conns is small for --concurrency; jobs will wait for connections", "max_conns", w.db.maxConns, "suggested", want)
	}
	return d, nil
}

func (w *workerCmd) prepare(ctx context.Context, d *database) error {
	if w.migrate || d.cluster != nil { // a private cluster starts empty
		if _, err := riverschema.Migrate(ctx, d.Pool, d.Schema); err != nil {
			return err
		}
	}
	if err := checkMigrations(ctx, d, w.log); err != nil {
		return err
	}
	return checkRiver(ctx, d, "the worker works")
}

// client builds the agent on rtm and the River client that works its
// queues and the payment receipts' outbox.
func (w *workerCmd) client(d *database, rtm *toolRuntime) (*river.Client[pgx.Tx], error) {
	store, ex := rtm.Intents, rtm.Executor
	queue, err := agent.NewInserter(d.Pool, d.Schema)
	if err != nil {
		return nil, err
	}
	oc := openai.DefaultConfig(w.apiKey)
	if w.baseURL != "" {
		oc.BaseURL = strings.TrimRight(w.baseURL, "/")
	}
	// go-openai does not surface a 429's Retry-After; this transport does
	// (on a base that keeps an idle connection per concurrent model call).
	oc.HTTPClient = &http.Client{Transport: &agent.RetryAfterTransport{}}
	acf := w.acf
	acf.DB, acf.Tools, acf.Intents, acf.Executor, acf.Queue = d.Pool, w.reg, store, ex, queue
	acf.Model, acf.Logger, acf.Owner = openai.NewClientWithConfig(oc), w.log, w.rt.owner
	a, err := agent.New(acf)
	if err != nil {
		return nil, err
	}
	// The payment webhook's outbox (receipts) is relayed by the same
	// client, through the same executor: a relay killed after sending does
	// not send twice.
	relay, err := webhook.NewRelay(webhook.RelayConfig{DB: d.Pool, Executor: ex, Logger: w.log, Failpoint: failpoint.Hit})
	if err != nil {
		return nil, err
	}
	rcf := w.rcf
	rcf.Schema, rcf.Logger = d.Schema, w.log
	rcf.Extra = func(ws *river.Workers) error { return webhook.AddWorker(ws, relay, rcf.JobTimeout) }
	rcf.ExtraQueues = []string{webhook.QueueNotify}
	return agent.NewClient(d.Pool, a, rcf)
}

// work runs client (and the reconciler) until ctx ends, then lets the
// running jobs finish for up to --shutdown-timeout before cancelling them.
func (w *workerCmd) work(ctx context.Context, e *Env, d *database, client *river.Client[pgx.Tx], ex *executor.Executor) error {
	// Jobs run on a context the signal does not cancel: a signal stops the
	// fetching, and running jobs get --shutdown-timeout to finish.
	jobCtx, cancelJobs := context.WithCancel(context.WithoutCancel(ctx))
	defer cancelJobs()
	if err := client.Start(jobCtx); err != nil {
		return fmt.Errorf("start River: %w", err)
	}
	var wg sync.WaitGroup
	if w.reconcile {
		wg.Go(func() { ex.RunReconciler(jobCtx) }) //nolint:errcheck // returns when stopped
	}
	log := w.log
	log.Info("worker: running", "schema", d.Schema, "journal", w.acf.Journal, "model", w.acf.ModelName,
		"model_tools", w.acf.ModelTools, "concurrency", w.rcf.Concurrency, "reconciler", w.reconcile)
	fmt.Fprintf(e.Stdout, "retrysafe: worker running (schema %s, journal %s, concurrency %d)\n", d.Schema, w.acf.Journal, w.rcf.Concurrency)

	<-ctx.Done()
	log.Info("worker: shutting down", "timeout", w.shutdown)
	sctx, cancel := context.WithTimeout(context.Background(), w.shutdown)
	defer cancel()
	if err := client.Stop(sctx); err != nil {
		log.Warn("worker: jobs still running at the shutdown timeout; cancelling them (River retries them)", "error", err)
		cctx, ccancel := context.WithTimeout(context.Background(), 10*time.Second)
		_ = client.StopAndCancel(cctx)
		ccancel()
	}
	cancelJobs()
	wg.Wait()
	log.Info("worker: stopped")
	return nil
}

// parseReplyTemplates reads --reply-template: entries "name[:language]"
// (every tenant) or "tenant=name[:language]", comma-separated.
func parseReplyTemplates(s string) (map[string]agent.ReplyTemplate, error) {
	out := map[string]agent.ReplyTemplate{}
	for _, entry := range strings.Split(s, ",") {
		entry = strings.TrimSpace(entry)
		if entry == "" {
			continue
		}
		tenant, spec, ok := strings.Cut(entry, "=")
		if !ok {
			tenant, spec = "*", entry
		}
		name, lang, _ := strings.Cut(strings.TrimSpace(spec), ":")
		tenant = strings.TrimSpace(tenant)
		if tenant == "" || name == "" || strings.Trim(name, "abcdefghijklmnopqrstuvwxyz0123456789_") != "" {
			return nil, fmt.Errorf("--reply-template %q: want name[:language] or tenant=name[:language], the name in lower-case letters, digits and underscores", entry)
		}
		if _, dup := out[tenant]; dup {
			return nil, fmt.Errorf("--reply-template: %s given twice", tenant)
		}
		out[tenant] = agent.ReplyTemplate{Name: name, Language: lang, BodyParam: true}
	}
	return out, nil
}

// workerRuntime is the worker's executor: the shared builder's, with the
// crash tests' failpoints (they do nothing unless RETRYSAFE_FAILPOINTS
// names them) and, only when the restart test arms it, the broken control's
// random keys (agent.NaiveKeys).
func (f *runtimeFlags) workerRuntime(db executor.DBTX, reg *tools.Registry, log *slog.Logger) (*toolRuntime, error) {
	return f.build(db, reg, metrics.New(), log, func(c *executor.Config) {
		c.Failpoints = executor.FailpointFunc(failpoint.Hit)
		if failpoint.Armed(agent.FailNaiveRandomKey) {
			c.Tools = agent.NaiveKeys(c.Tools)
		}
	})
}
