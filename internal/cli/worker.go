package cli

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"strings"
	"sync"
	"time"

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

func runWorker(ctx context.Context, e *Env, args []string) error {
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
	var (
		db  DBFlags
		rt  runtimeFlags
		lg  LogFlags
		acf agent.Config
		rcf agent.RiverConfig
	)
	db.Register(fs, e)
	rt.register(fs, e)
	lg.Register(fs, e)
	model := e.Getenv("OPENAI_MODEL")
	if model == "" {
		model = "gpt-4o-mini"
	}
	journal := e.Getenv("RETRYSAFE_JOURNAL")
	if journal == "" {
		journal = string(agent.JournalOn)
	}
	fs.StringVar(&acf.ModelName, "model", model, "model name sent to the API and recorded in the ledger (env OPENAI_MODEL)")
	baseURL := fs.String("openai-base-url", e.Getenv("OPENAI_BASE_URL"), "OpenAI-compatible API base URL, e.g. http://127.0.0.1:8090/v1 (env OPENAI_BASE_URL; empty: api.openai.com)")
	fs.StringVar(&journal, "journal", journal, "model journal: on (replay recorded answers on redelivery) or off (env RETRYSAFE_JOURNAL)")
	modelTools := fs.String("model-tools", tools.PixChargeName, "comma-separated tools offered to the model (the reply tool never is)")
	fs.IntVar(&rcf.Concurrency, "concurrency", 4, "jobs worked at once per queue (inbox and reply)")
	fs.IntVar(&acf.MaxSteps, "max-steps", 4, "model calls per message at most")
	fs.DurationVar(&acf.ModelTimeout, "model-timeout", 60*time.Second, "bound on one model call")
	fs.DurationVar(&acf.ClaimTTL, "claim-ttl", 3*time.Minute, "how long a worker's claim on a message holds redeliveries back; must exceed --model-timeout")
	fs.DurationVar(&rcf.JobTimeout, "job-timeout", 2*time.Minute, "River cancels a job running longer than this")
	fs.DurationVar(&rcf.RescueStuckJobsAfter, "rescue-after", 5*time.Minute, "a job running this long is presumed orphaned and retried; must exceed --job-timeout")
	fs.DurationVar(&rcf.RetryBase, "retry-base", time.Second, "first retry delay of a failed job (doubles each attempt, with jitter)")
	fs.DurationVar(&rcf.RetryMax, "retry-max", 5*time.Minute, "longest retry delay")
	fs.IntVar(&rcf.MaxAttempts, "job-attempts", 25, "attempts before River discards a job")
	fs.DurationVar(&rcf.FetchPollInterval, "poll", time.Second, "fallback poll for new jobs when LISTEN/NOTIFY is quiet (at least 100ms)")
	replyTemplate := fs.String("reply-template", e.Getenv("RETRYSAFE_REPLY_TEMPLATE"), "approved template replies go out as when the 24-hour customer-service window is closed: name[:language] for every tenant, and/or tenant=name[:language],... per tenant; the reply's text is its one body parameter {{1}} (env RETRYSAFE_REPLY_TEMPLATE; empty: such replies are held for review)")
	refusal := fs.String("refusal", string(agent.RefusalFixed), "how a model refusal is answered: fixed (a fixed text), relay (the refusal's text) or review (nothing sent)")
	groups := fs.String("groups", string(agent.GroupsConversation), "WhatsApp group messages: conversation (answered in the group) or refuse (a fixed reply, no model call)")
	migrate := fs.Bool("migrate", false, "apply retrysafe's and River's migrations before working")
	reconcile := fs.Bool("reconcile", true, "run the executor's reconciler in this process")
	shutdown := fs.Duration("shutdown-timeout", 30*time.Second, "how long SIGTERM waits for running jobs before cancelling them")
	if err := ParseNoArgs(e, fs, args); err != nil {
		return err
	}

	// Everything that needs no database is checked first.
	log, err := lg.Logger(e.Stderr)
	if err != nil {
		return err
	}
	acf.Refusal, acf.Groups = agent.RefusalPolicy(*refusal), agent.GroupPolicy(*groups)
	switch acf.Refusal {
	case agent.RefusalFixed, agent.RefusalRelay, agent.RefusalReview:
	default:
		return fmt.Errorf("--refusal %q: want fixed, relay or review", *refusal)
	}
	if acf.Groups != agent.GroupsConversation && acf.Groups != agent.GroupsRefuse {
		return fmt.Errorf("--groups %q: want conversation or refuse", *groups)
	}
	if acf.Templates, err = parseReplyTemplates(*replyTemplate); err != nil {
		return err
	}
	acf.Journal = agent.JournalMode(journal)
	if acf.Journal != agent.JournalOn && acf.Journal != agent.JournalOff {
		return fmt.Errorf("--journal %q: want on or off", journal)
	}
	apiKey := e.Getenv("OPENAI_API_KEY")
	if apiKey == "" && *baseURL == "" {
		return errors.New("OPENAI_API_KEY is not set: set it, or OPENAI_BASE_URL to an OpenAI-compatible endpoint that needs none")
	}
	if *baseURL != "" {
		if err := checkURL(*baseURL); err != nil {
			return fmt.Errorf("OPENAI_BASE_URL: %w", err)
		}
	}
	if rt.whatsappURL == "" {
		return errors.New("RETRYSAFE_WHATSAPP_URL is not set: the worker sends its replies through WhatsApp")
	}
	reg, err := rt.registry()
	if err != nil {
		return err
	}
	reply, err := agent.NewWhatsAppText(tools.HTTPConfig{BaseURL: rt.whatsappURL, Token: rt.whatsappTok, Client: providerClient()})
	if err != nil {
		return fmt.Errorf("RETRYSAFE_WHATSAPP_URL: %w", err)
	}
	if err := reg.Register(reply); err != nil {
		return err
	}
	acf.ModelTools = nil
	for _, n := range strings.Split(*modelTools, ",") {
		if n = strings.TrimSpace(n); n != "" {
			if _, ok := reg.Tool(n); !ok {
				return fmt.Errorf("--model-tools: %q is not configured (configured: %s)", n, strings.Join(reg.Names(), ", "))
			}
			acf.ModelTools = append(acf.ModelTools, n)
		}
	}
	if len(acf.ModelTools) == 0 {
		return errors.New("--model-tools is empty: the model needs at least one tool")
	}
	if rcf, err = rcf.Validate(); err != nil {
		return fmt.Errorf("the River settings (--job-timeout, --rescue-after, --retry-*, --concurrency): %w", err)
	}

	d, err := db.Open(ctx, e, *migrate)
	if err != nil {
		return err
	}
	defer d.Close()
	if *migrate || d.cluster != nil { // a private cluster starts empty
		if _, err := riverschema.Migrate(ctx, d.Pool, d.Schema); err != nil {
			return err
		}
	}
	if err := checkMigrations(ctx, d, log); err != nil {
		return err
	}
	var hasRiver bool
	if err := d.Pool.QueryRow(ctx, `SELECT to_regclass($1) IS NOT NULL`, d.Schema+".river_job").Scan(&hasRiver); err != nil {
		return err
	}
	if !hasRiver {
		return fmt.Errorf("schema %s has no River tables: pass --migrate (it installs them beside retrysafe's)", d.Schema)
	}
	if want := 2*rcf.Concurrency + 2; db.maxConns < want {
		log.Warn("worker: --max-conns is small for --concurrency; jobs will wait for connections", "max_conns", db.maxConns, "suggested", want)
	}

	rtm, err := rt.workerRuntime(d.Pool, reg, log)
	if err != nil {
		return err
	}
	store, ex := rtm.Intents, rtm.Executor
	queue, err := agent.NewInserter(d.Pool, d.Schema)
	if err != nil {
		return err
	}
	oc := openai.DefaultConfig(apiKey)
	if *baseURL != "" {
		oc.BaseURL = strings.TrimRight(*baseURL, "/")
	}
	// go-openai does not surface a 429's Retry-After; this transport does.
	oc.HTTPClient = &http.Client{Transport: &agent.RetryAfterTransport{}}
	acf.DB, acf.Tools, acf.Intents, acf.Executor, acf.Queue = d.Pool, reg, store, ex, queue
	acf.Model, acf.Logger, acf.Owner = openai.NewClientWithConfig(oc), log, rt.owner
	a, err := agent.New(acf)
	if err != nil {
		return err
	}
	// The payment webhook's outbox (receipts) is relayed by the same
	// client, through the same executor: a relay killed after sending does
	// not send twice.
	relay, err := webhook.NewRelay(webhook.RelayConfig{DB: d.Pool, Executor: ex, Logger: log, Failpoint: failpoint.Hit})
	if err != nil {
		return err
	}
	rcf.Schema, rcf.Logger = d.Schema, log
	rcf.Extra = func(w *river.Workers) error { return webhook.AddWorker(w, relay, rcf.JobTimeout) }
	rcf.ExtraQueues = []string{webhook.QueueNotify}
	client, err := agent.NewClient(d.Pool, a, rcf)
	if err != nil {
		return err
	}

	// Jobs run on a context the signal does not cancel: a signal stops the
	// fetching, and running jobs get --shutdown-timeout to finish.
	jobCtx, cancelJobs := context.WithCancel(context.WithoutCancel(ctx))
	defer cancelJobs()
	if err := client.Start(jobCtx); err != nil {
		return fmt.Errorf("start River: %w", err)
	}

	var wg sync.WaitGroup
	if *reconcile {
		wg.Go(func() { ex.RunReconciler(jobCtx) }) //nolint:errcheck // returns when stopped
	}
	log.Info("worker: running", "schema", d.Schema, "journal", acf.Journal, "model", acf.ModelName,
		"model_tools", acf.ModelTools, "concurrency", rcf.Concurrency, "reconciler", *reconcile)
	fmt.Fprintf(e.Stdout, "retrysafe: worker running (schema %s, journal %s, concurrency %d)\n", d.Schema, acf.Journal, rcf.Concurrency)

	<-ctx.Done()
	log.Info("worker: shutting down", "timeout", *shutdown)
	sctx, cancel := context.WithTimeout(context.Background(), *shutdown)
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

// providerClient is the HTTP client of the reply tool: no timeout of its
// own, the executor's context bounds each call.
func providerClient() *http.Client {
	return &http.Client{Transport: &http.Transport{
		Proxy:               http.ProxyFromEnvironment,
		MaxIdleConnsPerHost: 32,
		IdleConnTimeout:     90 * time.Second,
		TLSHandshakeTimeout: 10 * time.Second,
	}}
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
