package labcli

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"strings"
	"time"

	"github.com/retrysafe/retrysafe/internal/cli"
	"github.com/retrysafe/retrysafe/internal/lab/harness"
)

func init() {
	cli.Register(&cli.Command{Name: "demo", Summary: "watch one Pix charge survive redelivery and a worker crash, end to end", Run: runDemo})
}

// The demo's conversation: what the system knows before the customer writes.
const (
	demoWaID     = "5511987654321"
	demoCustomer = "C-42"
	demoInvoice  = "NF-2026-000123"
	demoDueCents = 18000
	demoMessage  = "Olá! Quero pagar a fatura NF-2026-000123 de R$ 180,00 com a chave Pix 529.982.247-25"
	demoMsgID    = "wamid.HBgNNTUxMTk4NzY1NDMyMRUCABIYFjNFQjBDRkU5"
	// The worker kills itself (SIGKILL) right after the PSP answered and
	// before the outcome is recorded: the worst moment, a charge exists
	// that the database does not know about.
	demoCrashPoint = "agent.provider-answered.pix.charge"
)

// demoReport is the story, for --json.
type demoReport struct {
	OK            bool              `json:"ok"`
	Database      string            `json:"database"`
	Schema        string            `json:"schema"`
	Deliveries    []int             `json:"webhook_statuses"`
	CrashPoint    string            `json:"crash_point"`
	Intent        map[string]string `json:"frozen_payload"`
	Key           string            `json:"idempotency_key"`
	RulesVersion  int               `json:"rules_version"`
	PSPRequests   []pspRequest      `json:"psp_requests"`
	KeysEqual     bool              `json:"keys_equal"`
	Charges       []harness.Charge  `json:"charges"`
	Replies       []harness.Reply   `json:"replies"`
	Receipts      []harness.Message `json:"receipts"`
	OrderStatus   string            `json:"order_status"`
	Webhooks      map[string]int    `json:"payment_webhook_verdicts"`
	ModelMade     int               `json:"model_calls_made"`
	ModelReplayed int               `json:"model_calls_replayed"`
	ActionStatus  string            `json:"action_status"`
	Attempts      int               `json:"action_attempts"`
	Sidecar       *sidecarCheck     `json:"sidecar_reexecution,omitempty"`
	RecoverySecs  float64           `json:"recovery_seconds"`
	Settings      []string          `json:"worker_settings"`
	Tenant        string            `json:"tenant"`
	MessageID     string            `json:"message_id"`
}

type pspRequest struct {
	Method string `json:"method"`
	Path   string `json:"path"`
	Key    string `json:"idempotency_key"`
	Status int    `json:"status"`
}

type sidecarCheck struct {
	Status    string   `json:"status"`
	Key       string   `json:"idempotency_key"`
	Replayed  bool     `json:"replayed"`
	Divergent []string `json:"divergent_fields"`
}

// demoHelp is `retrysafe demo --help`'s text.
const demoHelp = `Plays one billing conversation through a whole retrysafe deployment on this
machine and tells what happened. Every part is a real process of this binary:
PostgreSQL (a private throwaway cluster when no DATABASE_URL is given), the
sandbox Pix PSP, an OpenAI-compatible model that varies its answers, a
WhatsApp stand-in, the server (webhook + sidecar API) and the worker.

The customer's message is delivered three times, the worker is killed with
SIGKILL right after the PSP charged and before the outcome was recorded, a new
worker takes over when the queue redelivers the job, and an agent in another
language then asks the sidecar for the same charge with a different amount.
Expected: one charge, one reply, one key on every attempt. Exit 0 only then.
Takes about a minute (the queue's rescuer is the slow part).`

// demoOptions are the demo's flags.
type demoOptions struct {
	db      cli.DBFlags
	asJSON  bool
	verbose bool
	keep    bool
	timeout time.Duration
	psp     string
	journal string
}

func parseDemoFlags(e *cli.Env, args []string) (*demoOptions, error) {
	fs := cli.NewFlagSet(e, "demo", "demo [--json] [--verbose] [--database-url URL]", demoHelp)
	o := &demoOptions{}
	o.db.Register(fs, e)
	fs.BoolVar(&o.asJSON, "json", false, "print the report as JSON instead of the story")
	fs.BoolVar(&o.verbose, "verbose", false, "show every process's log on stderr")
	fs.BoolVar(&o.keep, "keep", false, "keep the demo's schemas in DATABASE_URL afterwards (for `retrysafe inspect`)")
	fs.DurationVar(&o.timeout, "timeout", 4*time.Minute, "give up after this long")
	fs.StringVar(&o.psp, "psp", harness.PSPAPIPix, "the PSP's API: "+harness.PSPV1+" (pix.charge with Idempotency-Key) or "+harness.PSPAPIPix+" (the Central Bank's API Pix: pix.cob by txid, the Pix callback, a refund)")
	fs.StringVar(&o.journal, "journal", "on", "the workers' model journal: on (a redelivery replays the model's answers) or off (it pays for them again; still one charge)")
	if err := cli.ParseFlags(e, fs, args); err != nil {
		return nil, err
	}
	if o.psp != harness.PSPV1 && o.psp != harness.PSPAPIPix {
		return nil, fmt.Errorf("--psp %q: want %s or %s", o.psp, harness.PSPV1, harness.PSPAPIPix)
	}
	if o.journal != "on" && o.journal != "off" {
		return nil, fmt.Errorf("--journal %q: want on or off", o.journal)
	}
	return o, nil
}

// stackConfig is the demo's deployment, with short timings so that the
// queue brings the killed job back in seconds.
func (o *demoOptions) stackConfig(logw io.Writer) harness.StackConfig {
	settings := []string{"--lease", "5s", "--timeout", "2s", "--model-timeout", "5s", "--claim-ttl", "8s",
		"--job-timeout", "10s", "--rescue-after", "12s", "--retry-base", "200ms", "--retry-max", "2s", "--poll", "200ms", "--reconcile-interval", "1s",
		"--journal", o.journal}
	cfg := harness.StackConfig{
		DatabaseURL: o.db.URL, Keep: o.keep, Log: logw,
		ModelSeed: 7, ModelWrongAmountRate: 0,
		WorkerArgs: settings,
		ServeArgs:  []string{"--lease", "5s", "--timeout", "2s", "--reconcile-interval", "1s"},
	}
	if o.db.Schema != "retrysafe" {
		cfg.Schema = o.db.Schema
	}
	return cfg
}

func runDemo(ctx context.Context, e *cli.Env, args []string) error {
	o, err := parseDemoFlags(e, args)
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(ctx, o.timeout)
	defer cancel()

	out := e.Stdout
	if o.asJSON {
		out = io.Discard
	}
	say := func(format string, a ...any) { fmt.Fprintf(out, format+"\n", a...) }
	var logw io.Writer = io.Discard
	if o.verbose {
		logw = e.Stderr
	}
	cfg := o.stackConfig(logw)
	if o.psp == harness.PSPAPIPix {
		return runDemoAPIPix(ctx, e, cfg, o.asJSON, say)
	}
	return runDemoV1(ctx, e, cfg, o, say)
}

// runDemoV1 is `demo --psp v1`: the billing story on the invented
// POST /v1/pix/charges API with Idempotency-Key.
func runDemoV1(ctx context.Context, e *cli.Env, cfg harness.StackConfig, o *demoOptions, say func(string, ...any)) error {
	rep := &demoReport{CrashPoint: demoCrashPoint, Settings: cfg.WorkerArgs}

	say("retrysafe demo: one Pix charge, a redelivered message and a worker killed mid-charge\n")
	if o.db.URL == "" {
		say("  starting a private PostgreSQL cluster (no DATABASE_URL given)...")
	}
	st, err := harness.StartStack(ctx, cfg)
	if err != nil {
		return fmt.Errorf("demo: start: %w", err)
	}
	defer st.Close()
	rep.Schema, rep.Tenant, rep.MessageID = st.Cfg.Schema, st.Cfg.Tenant, demoMsgID
	if st.Cluster != nil {
		rep.Database = fmt.Sprintf("private cluster on 127.0.0.1:%d (removed on exit)", st.Cluster.Port)
	} else {
		rep.Database = "DATABASE_URL"
	}
	say("1. Started, each as its own process: PostgreSQL (%s, schema %s),", rep.Database, rep.Schema)
	say("   the sandbox PSP %s, model %s, WhatsApp %s, and the server %s.", st.PSP.Ready, st.Model.Ready, st.WhatsApp.Ready, st.Server.Ready)

	fi, err := demoV1Crash(ctx, st, rep, say)
	if err != nil {
		return err
	}
	if err := demoV1Recover(ctx, st, rep, say); err != nil {
		return err
	}
	if err := demoV1Read(ctx, st, rep, fi); err != nil {
		return err
	}
	demoV1Tell(rep, o.journal, say)

	sc, err := sidecarExecute(ctx, st, "pix.charge", demoInvoice,
		fmt.Sprintf(`{"customer_id":%q,"amount":"R$ 190,00","pix_key":"52998224725","pix_key_type":"cpf"}`, demoCustomer))
	if err != nil {
		return err
	}
	rep.Sidecar = sc
	say("9. An agent in another language asks the sidecar for the same invoice, extracting")
	say("   \"R$ 190,00\" and the CPF without punctuation: status %s, replayed %v, divergent %v,", sc.Status, sc.Replayed, sc.Divergent)
	say("   key %s: the frozen intent wins; nothing new is charged.", shortKey(sc.Key))

	if rep.Charges, err = st.Charges(ctx); err != nil {
		return err
	}
	return demoV1Result(e, rep, fi, o, say)
}

// demoV1Crash seeds the conversation, delivers the message twice with
// worker #1 armed, and waits for it to die after the PSP charged.
func demoV1Crash(ctx context.Context, st *harness.Stack, rep *demoReport, say func(string, ...any)) (*harness.FrozenIntent, error) {
	if err := st.SeedConversation(ctx, demoWaID, demoCustomer, demoInvoice, demoDueCents); err != nil {
		return nil, err
	}
	say("2. The system knows: customer %s (WhatsApp %s) owes invoice %s, R$ 180,00.", demoCustomer, demoWaID, demoInvoice)
	say("   The invoice, not the model, is the intent reference.")

	w1, err := st.StartWorker(ctx, "worker-1", "RETRYSAFE_FAILPOINTS="+demoCrashPoint)
	if err != nil {
		return nil, err
	}
	say("3. Worker #1 started, armed to kill itself at %q.", demoCrashPoint)

	say("4. The customer writes: %q", demoMessage)
	statuses, err := deliverTwice(ctx, st)
	if err != nil {
		return nil, err
	}
	rep.Deliveries = append(rep.Deliveries, statuses...)
	say("   WhatsApp delivers it twice at once: HTTP %d and %d; stored and queued once.", statuses[0], statuses[1])

	if err := awaitCrash(ctx, w1); err != nil {
		return nil, err
	}
	charges, err := st.Charges(ctx)
	if err != nil {
		return nil, err
	}
	fi, err := st.Intent(ctx, demoInvoice, "pix.charge")
	if err != nil || fi == nil {
		return nil, fmt.Errorf("demo: no frozen intent after the crash (%v)", err)
	}
	say("5. Worker #1 called the model, froze the intent, claimed the action and charged the PSP")
	say("   (charges at the PSP: %d), then was killed with SIGKILL before recording the outcome.", len(charges))
	say("   Frozen payload: %s", mustJSON(fi.Payload))
	say("   Idempotency-Key (HMAC of the frozen row, rules v%d): %s", fi.Version, fi.Key)
	return fi, nil
}

// demoV1Recover redelivers the message once more and lets worker #2
// finish the conversation once the queue rescues the job.
func demoV1Recover(ctx context.Context, st *harness.Stack, rep *demoReport, say func(string, ...any)) error {
	st2, began, err := redeliverOnce(ctx, st)
	if err != nil {
		return err
	}
	rep.Deliveries = append(rep.Deliveries, st2)
	say("6. WhatsApp redelivers the message once more: HTTP %d, nothing new stored or queued.", st2)
	say("7. Worker #2 started. Waiting for the queue to redeliver the orphaned job")
	say("   (rescued after %s; the queue's rescuer runs every 30s)...", "--rescue-after 12s")
	if err := awaitSettled(ctx, st, "pix.charge", 2); err != nil {
		return fmt.Errorf("demo: the conversation did not settle: %w\nworker-2 log:\n%s", err, lastWorkerTail(st))
	}
	rep.RecoverySecs = time.Since(began).Seconds()
	// Let a late duplicate (there should be none) show up before counting.
	time.Sleep(time.Second)
	return nil
}

// demoV1Read fills the report with what the conversation left.
func demoV1Read(ctx context.Context, st *harness.Stack, rep *demoReport, fi *harness.FrozenIntent) error {
	var err error
	if rep.Charges, err = st.Charges(ctx); err != nil {
		return err
	}
	oc, err := readOutcome(ctx, st, "pix.charge")
	if err != nil {
		return err
	}
	rep.Replies, rep.Receipts, rep.OrderStatus, rep.Webhooks = oc.replies, oc.receipts, oc.orderStatus, oc.verdicts
	rep.ActionStatus, rep.Attempts = oc.actionStatus, oc.attempts
	if rep.ModelMade, rep.ModelReplayed, err = st.ModelCalls(ctx, demoMsgID); err != nil {
		return err
	}
	rep.Intent, rep.Key, rep.RulesVersion = fi.Payload, fi.Key, fi.Version
	if rep.PSPRequests, err = pspRequests(ctx, st.PSP.Ready); err != nil {
		return err
	}
	rep.KeysEqual = len(rep.PSPRequests) > 0
	for _, r := range rep.PSPRequests {
		if r.Key != fi.Key {
			rep.KeysEqual = false
		}
	}
	return nil
}

// demoV1Tell is step 8: what worker #2 did.
func demoV1Tell(rep *demoReport, journal string, say func(string, ...any)) {
	say("8. Worker #2 finished the conversation %.0fs later:", rep.RecoverySecs)
	if journal == "on" {
		say("   - replayed the model's first answer from the journal instead of paying for it again;")
	} else {
		say("   - called the model again for the first step (journal off: those tokens are paid twice);")
	}
	say("   - froze the same intent (same key), took over the expired lease of action attempt 1,")
	say("     and asked the PSP by key before calling again. What the PSP saw:")
	for _, r := range rep.PSPRequests {
		what := "charge"
		if r.Method == http.MethodGet {
			what = "lookup by key"
		}
		say("       %-14s %s %s  Idempotency-Key %s  -> %s", what, r.Method, r.Path, shortKey(r.Key), pspStatusText(r.Status))
	}
	say("   - action %s at attempt %d; the reply went out through the outbox.", rep.ActionStatus, rep.Attempts)
	say("   Meanwhile the PSP's signed payment webhook reached the server (%s):", cli.CountsText(rep.Webhooks))
	say("   order %s is %q, and its receipt (template %q) was sent once through the payment outbox.", demoInvoice, rep.OrderStatus, templateName(rep.Receipts))
}

// demoV1Result judges the story, prints the result (and the report with
// --json) and says whether it held.
func demoV1Result(e *cli.Env, rep *demoReport, fi *harness.FrozenIntent, o *demoOptions, say func(string, ...any)) error {
	sc := rep.Sidecar
	rep.OK = len(rep.Charges) == 1 && len(rep.Replies) == 1 && len(rep.Receipts) == 1 && rep.OrderStatus == "paid" &&
		rep.KeysEqual && rep.ActionStatus == "completed" &&
		sc.Key == fi.Key && rep.Charges[0].IdempotencyKey == fi.Key
	say("")
	say("Result")
	say("  charges at the PSP   %d  (R$ %s, key %s)", len(rep.Charges), centsText(rep.Charges), shortKey(fi.Key))
	say("  replies sent         %d  %s", len(rep.Replies), replyText(rep.Replies))
	say("  receipts sent        %d  (order %s)", len(rep.Receipts), rep.OrderStatus)
	say("  model calls          %d made, %d replayed from the journal (journal %s)", rep.ModelMade, rep.ModelReplayed, o.journal)
	say("  keys on every try    %s", map[bool]string{true: "equal", false: "DIFFERENT"}[rep.KeysEqual && sc.Key == fi.Key])
	if o.asJSON {
		if err := writeJSON(e.Stdout, rep); err != nil {
			return err
		}
	}
	if !rep.OK {
		say("\nFAIL: expected exactly one charge, one reply, one receipt and one key.")
		return cli.ErrSilentFailure
	}
	say("\nOK: one intent, one key, one charge, one reply, one receipt, through a redelivery and a crash.")
	return nil
}

func pspRequests(ctx context.Context, base string) ([]pspRequest, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, base+"/_sandbox/requests", nil)
	if err != nil {
		return nil, err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	var out struct{ Data []pspRequest }
	if err := json.NewDecoder(resp.Body).Decode(&out); err != nil {
		return nil, err
	}
	// Listing charges (what this demo does to count them) carries no key;
	// only charge attempts and lookups by key are the workers'.
	var keyed []pspRequest
	for _, r := range out.Data {
		if r.Key != "" {
			keyed = append(keyed, r)
		}
	}
	return keyed, nil
}

func lastWorkerTail(st *harness.Stack) string {
	return st.Server.Tail()
}

func pspStatusText(code int) string {
	switch {
	case code == 0:
		return "connection dropped"
	case code == http.StatusCreated:
		return "201 charged"
	case code == http.StatusOK:
		return "200 found the existing charge"
	}
	return fmt.Sprint(code)
}

func shortKey(k string) string {
	if len(k) > 16 {
		return k[:16] + "…"
	}
	return k
}

func centsText(cs []harness.Charge) string {
	var parts []string
	for _, c := range cs {
		parts = append(parts, fmt.Sprintf("%d,%02d", c.AmountCents/100, c.AmountCents%100))
	}
	return strings.Join(parts, " + ")
}

func replyText(rs []harness.Reply) string {
	if len(rs) == 1 && rs[0].Text != "" {
		return fmt.Sprintf("%q", rs[0].Text)
	}
	return ""
}

func templateName(ms []harness.Message) string {
	if len(ms) == 0 {
		return ""
	}
	return ms[0].Template
}

func mustJSON(v any) string {
	b, err := json.Marshal(v)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
	}
	return string(b)
}
