package harness

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/retrysafe/retrysafe/agent"
	"github.com/retrysafe/retrysafe/agent/agenttest"
	"github.com/retrysafe/retrysafe/dbpool"
	"github.com/retrysafe/retrysafe/executor/executortest"
	"github.com/retrysafe/retrysafe/intent"
	"github.com/retrysafe/retrysafe/internal/freeport"
	"github.com/retrysafe/retrysafe/internal/pgembed"
	"github.com/retrysafe/retrysafe/internal/riverschema"
	"github.com/retrysafe/retrysafe/migrations"
	"github.com/retrysafe/retrysafe/webhook"
)

// StackConfig describes a whole retrysafe deployment on one machine: the
// database, the three sandbox stand-ins, the server and workers, each a
// real process of the retrysafe binary.
type StackConfig struct {
	// DatabaseURL; empty starts a private cluster (stopped by Close).
	DatabaseURL string
	// Database configures the private cluster (durable by default); unused
	// with DatabaseURL.
	Database DatabaseConfig
	// Schema for retrysafe's and River's tables; default a fresh random
	// one (dropped by Close unless Keep). The PSP uses Schema+"_psp".
	Schema string
	Keep   bool
	// Bin is the retrysafe binary; default this executable.
	Bin string
	// Log receives every process's output, line-prefixed; nil discards it.
	Log io.Writer

	HMACKey   string // default a fixed demo key
	AppSecret string // WhatsApp app secret; default a fixed demo secret
	// PhoneNumberID is the business number the webhook names; it maps to
	// Tenant.
	PhoneNumberID string
	Tenant        string

	ModelSeed            int64
	ModelWrongAmountRate float64

	// PSPArgs and ModelArgs are added to those sandboxes' flags (faults,
	// latency).
	PSPArgs   []string
	ModelArgs []string

	// PSPFlavour is the sandbox PSP's API: PSPV1 (default: POST
	// /v1/pix/charges, signed payment webhooks, pix.charge) or PSPAPIPix
	// (the Central Bank's API Pix: pix.cob, pix.refund, the Pix callback).
	PSPFlavour string

	// WorkerArgs are added to every worker's flags (journal, timings).
	WorkerArgs []string
	// ServeArgs are added to the server's flags (executor timings).
	ServeArgs []string
	// Env is added to every process's environment.
	Env []string
	// ServeAPIPixURL, when set, gives the API Pix base URL the server
	// alone uses, from the sandbox's: a test puts a proxy of its own
	// between the sidecar and the PSP (the restart test fails the
	// sidecar's first refund request there, so that workers settle it).
	ServeAPIPixURL func(pspReady string) string
}

func (c *StackConfig) defaults() {
	if c.Schema == "" {
		c.Schema = "rs_" + randHex(4)
	}
	if c.HMACKey == "" {
		c.HMACKey = "demo-hmac-key-0123456789abcdef0123456789"
	}
	if c.AppSecret == "" {
		c.AppSecret = "demo-whatsapp-app-secret"
	}
	if c.PhoneNumberID == "" {
		c.PhoneNumberID = "5511400000000"
	}
	if c.Tenant == "" {
		c.Tenant = "loja-demo"
	}
	if c.Log == nil {
		c.Log = io.Discard
	}
}

// Stack is a running deployment.
type Stack struct {
	Cfg     StackConfig
	URL     string // database URL
	Pool    *pgxpool.Pool
	Cluster *pgembed.Cluster // the primary of a private cluster
	// Standby is the private cluster's streaming standby
	// (Database.Standby); Failover swaps the two.
	Standby *pgembed.Cluster
	// PSPCluster is the PSP's own private cluster (Database.SeparatePSP).
	PSPCluster *pgembed.Cluster
	PSP        *Proc
	Model      *Proc
	WhatsApp   *Proc
	Server     *Proc
	APIToken   string

	serveAddr string

	mu      sync.Mutex
	workers []*Proc
	client  *http.Client
}

// StartStack brings everything up but the workers.
func StartStack(ctx context.Context, cfg StackConfig) (_ *Stack, err error) {
	cfg.defaults()
	s := &Stack{Cfg: cfg, URL: cfg.DatabaseURL, APIToken: "demo-token-" + randHex(8), client: &http.Client{Timeout: 30 * time.Second}}
	defer func() {
		if err != nil {
			s.Close()
		}
	}()
	if s.URL == "" {
		if err = s.startClusters(ctx); err != nil {
			return nil, err
		}
	}
	if s.Pool, err = dbpool.Open(ctx, s.URL, cfg.Schema, 4); err != nil {
		return nil, err
	}
	if _, err = migrations.Migrate(ctx, s.Pool, cfg.Schema); err != nil {
		return nil, err
	}
	if _, err = riverschema.Migrate(ctx, s.Pool, cfg.Schema); err != nil {
		return nil, err
	}
	start := func(name, ready string, args ...string) (*Proc, error) {
		return Start(ctx, Spec{Name: name, Bin: cfg.Bin, Args: args, Env: s.env(), Ready: ready, Log: cfg.Log})
	}
	// The server's port is chosen first: the PSP sends its signed payment
	// webhooks there, and the server calls the PSP.
	servePort, err := freeport.Pick()
	if err != nil {
		return nil, err
	}
	s.serveAddr = fmt.Sprintf("127.0.0.1:%d", servePort)
	pspArgs := []string{"sandbox", "psp", "--flavour", "v1", "--addr", "127.0.0.1:0", "--schema", cfg.Schema + "_psp",
		"--webhook-url", "http://" + s.serveAddr + "/webhooks/payments/sandbox", "--webhook-backoff", "200ms"}
	switch {
	case cfg.PSPFlavour == PSPAPIPix:
		pspArgs = s.apipixPSPArgs() // its ledger is in memory: no database to crash
	case s.PSPCluster != nil:
		pspArgs = append(pspArgs, "--database-url", s.PSPCluster.URL)
	}
	pspArgs = append(pspArgs, cfg.PSPArgs...)
	if s.PSP, err = start("psp", "retrysafe sandbox psp: listening on ", pspArgs...); err != nil {
		return nil, err
	}
	modelArgs := []string{"sandbox", "model", "--addr", "127.0.0.1:0", "--seed", fmt.Sprint(cfg.ModelSeed), "--wrong-amount-rate", fmt.Sprint(cfg.ModelWrongAmountRate)}
	modelArgs = append(modelArgs, cfg.ModelArgs...)
	if s.Model, err = start("model", "retrysafe sandbox model: listening on ", modelArgs...); err != nil {
		return nil, err
	}
	if s.WhatsApp, err = start("whatsapp", "retrysafe sandbox whatsapp: listening on ", "sandbox", "whatsapp", "--addr", "127.0.0.1:0"); err != nil {
		return nil, err
	}
	serveArgs := append([]string{"serve", "--addr", s.serveAddr, "--schema", cfg.Schema}, cfg.ServeArgs...)
	serveEnv := s.env()
	if cfg.ServeAPIPixURL != nil && cfg.PSPFlavour == PSPAPIPix {
		// Later entries win in os/exec's environment.
		serveEnv = append(serveEnv, "RETRYSAFE_APIPIX_URL="+cfg.ServeAPIPixURL(s.PSP.Ready))
	}
	if s.Server, err = Start(ctx, Spec{Name: "serve", Bin: cfg.Bin, Args: serveArgs, Env: serveEnv, Ready: "retrysafe: listening on ", Log: cfg.Log}); err != nil {
		return nil, err
	}
	return s, nil
}

// env is what every process gets: one configuration, as a deployment
// would have it.
func (s *Stack) env() []string {
	env := []string{
		"DATABASE_URL=" + s.URL,
		"RETRYSAFE_HMAC_KEY=" + s.Cfg.HMACKey,
		"RETRYSAFE_API_TOKENS=" + s.Cfg.Tenant + "=" + s.APIToken,
		"RETRYSAFE_PSP_TOKEN=" + s.Cfg.Tenant,
		"RETRYSAFE_WHATSAPP_TOKEN=" + s.Cfg.Tenant,
		"RETRYSAFE_WHATSAPP_APP_SECRET=" + s.Cfg.AppSecret,
		"RETRYSAFE_WHATSAPP_VERIFY_TOKEN=demo-verify-token",
		"RETRYSAFE_PSP_WEBHOOK_SECRET=" + s.paymentSecret(),
		"RETRYSAFE_PAYMENT_WEBHOOK_SECRETS=sandbox=" + s.paymentSecret(),
		"RETRYSAFE_PAYMENT_WEBHOOK_TENANTS=sandbox=" + s.Cfg.Tenant,
		"RETRYSAFE_WHATSAPP_TENANTS=" + s.Cfg.PhoneNumberID + "=" + s.Cfg.Tenant,
		"OPENAI_API_KEY=",
	}
	env = append(env, s.Cfg.Env...)
	switch {
	case s.PSP != nil && s.Cfg.PSPFlavour == PSPAPIPix:
		env = append(env, s.apipixEnv()...)
	case s.PSP != nil:
		env = append(env, "RETRYSAFE_PSP_URL="+s.PSP.Ready)
	}
	if s.WhatsApp != nil {
		env = append(env, "RETRYSAFE_WHATSAPP_URL="+s.WhatsApp.Ready)
	}
	if s.Model != nil {
		env = append(env, "OPENAI_BASE_URL="+s.Model.Ready+"/v1")
	}
	return env
}

// Env is the environment every process of the stack gets (database,
// HMAC secret, provider URLs and tokens), for running other retrysafe
// commands against it (`retrysafe reconcile`, `retrysafe inspect`).
func (s *Stack) Env() []string { return s.env() }

// StartWorker starts one `retrysafe worker`; extraEnv arms failpoints.
func (s *Stack) StartWorker(ctx context.Context, name string, extraEnv ...string) (*Proc, error) {
	return s.StartWorkerWith(ctx, name, nil, extraEnv...)
}

// StartWorkerWith is StartWorker with flags of its own after
// Cfg.WorkerArgs (a later flag wins: --owner, --concurrency). extraEnv
// entries override the stack's (a later entry wins), e.g. a
// RETRYSAFE_PSP_URL that points one worker at a fault-injecting proxy.
func (s *Stack) StartWorkerWith(ctx context.Context, name string, args []string, extraEnv ...string) (*Proc, error) {
	args = append(append([]string{"worker", "--schema", s.Cfg.Schema}, s.Cfg.WorkerArgs...), args...)
	p, err := Start(ctx, Spec{Name: name, Bin: s.Cfg.Bin, Args: args, Env: append(s.env(), extraEnv...), Ready: "retrysafe: worker running", Log: s.Cfg.Log})
	if err != nil {
		return p, err // p, when not nil, has exited (ErrExited)
	}
	s.mu.Lock()
	s.workers = append(s.workers, p)
	s.mu.Unlock()
	return p, nil
}

// SeedConversation records the customer and the open invoice the system
// knows about: the intent_ref comes from here, never from the model.
func (s *Stack) SeedConversation(ctx context.Context, waID, customerID, invoiceRef string, amountDueCents int64) error {
	return agent.UpsertConversation(ctx, s.Pool, agent.Conversation{Tenant: s.Cfg.Tenant, ID: waID, CustomerID: customerID, InvoiceRef: invoiceRef, AmountDueCents: amountDueCents})
}

// Deliver posts one inbound WhatsApp text message to the server's webhook,
// signed as Meta signs it, and returns the HTTP status.
func (s *Stack) Deliver(ctx context.Context, msgID, from, body string) (int, error) {
	payload := agenttest.WebhookPayload(s.Cfg.PhoneNumberID, agenttest.TextMessage{ID: msgID, From: from, Body: body})
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, s.Server.Ready+"/webhooks/whatsapp", strings.NewReader(string(payload)))
	if err != nil {
		return 0, err
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("X-Hub-Signature-256", agenttest.Sign(s.Cfg.AppSecret, payload))
	resp, err := s.client.Do(req)
	if err != nil {
		return 0, err
	}
	io.Copy(io.Discard, resp.Body) //nolint:errcheck
	resp.Body.Close()
	return resp.StatusCode, nil
}

// Charge is what the sandbox PSP lists.
type Charge struct {
	ID             string `json:"id"`
	AmountCents    int64  `json:"amount_cents"`
	IdempotencyKey string `json:"idempotency_key"`
	Status         string `json:"status"`
	// Description is what pix.charge sent: "retrysafe <intent_ref>".
	Description string `json:"description"`
}

// Charges lists every charge the PSP executed for the tenant.
func (s *Stack) Charges(ctx context.Context) ([]Charge, error) {
	var out struct{ Data []Charge }
	err := s.getJSON(ctx, s.PSP.Ready+"/v1/pix/charges", s.Cfg.Tenant, &out)
	return out.Data, err
}

// PSPRequest is one request the PSP received about charges, with the
// Idempotency-Key it carried: the provider's witness of the key each
// attempt sent.
type PSPRequest struct {
	At             time.Time `json:"at"`
	Method         string    `json:"method"`
	Path           string    `json:"path"`
	IdempotencyKey string    `json:"idempotency_key"`
	Status         int       `json:"status"` // 0: the connection was dropped without an answer
}

// PSPRequests lists the PSP's request log (the last 10,000 requests, oldest
// first; it lives in the PSP process's memory).
func (s *Stack) PSPRequests(ctx context.Context) ([]PSPRequest, error) {
	var out struct{ Data []PSPRequest }
	err := s.getJSON(ctx, s.PSP.Ready+"/_sandbox/requests", "", &out)
	return out.Data, err
}

// Message is one message the WhatsApp stand-in sent: the agent's replies
// are type "text", payment receipts type "template".
type Message struct {
	ID             string `json:"id"`
	To             string `json:"to"`
	Type           string `json:"type"`
	Template       string `json:"template"`
	Text           string `json:"text"`
	IdempotencyKey string `json:"idempotency_key"`
}

// Messages lists every message the WhatsApp stand-in sent.
func (s *Stack) Messages(ctx context.Context) ([]Message, error) {
	var out struct{ Data []Message }
	err := s.getJSON(ctx, s.WhatsApp.Ready+"/_sandbox/messages", "", &out)
	return out.Data, err
}

// Reply is an agent reply: a text message.
type Reply = Message

// Replies lists the agent's replies (text messages) the stand-in sent;
// payment receipts (templates) are left out.
func (s *Stack) Replies(ctx context.Context) ([]Reply, error) {
	all, err := s.Messages(ctx)
	var out []Reply
	for _, m := range all {
		if m.Type == "text" {
			out = append(out, m)
		}
	}
	return out, err
}

// PaymentWebhookVerdicts counts the server's payment webhook deliveries by
// verdict (processed, duplicate, stale, ignored, rejected).
func (s *Stack) PaymentWebhookVerdicts(ctx context.Context) (map[string]int, error) {
	byVerdict, err := webhook.CountVerdicts(ctx, s.Pool, s.Cfg.Tenant)
	if err != nil {
		return nil, err
	}
	out := make(map[string]int, len(byVerdict))
	for v, n := range byVerdict {
		out[string(v)] = n
	}
	return out, nil
}

// OrderStatus is the order's status as payment webhooks left it ("" when
// no event named it).
func (s *Stack) OrderStatus(ctx context.Context, ref string) (string, error) {
	o, err := webhook.GetOrder(ctx, s.Pool, s.Cfg.Tenant, ref)
	switch {
	case errors.Is(err, webhook.ErrNotFound):
		return "", nil
	case err != nil:
		return "", err
	}
	return string(o.Status), nil
}

func (s *Stack) getJSON(ctx context.Context, url, bearer string, into any) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return err
	}
	if bearer != "" {
		req.Header.Set("Authorization", "Bearer "+bearer)
	}
	resp, err := s.client.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		b, _ := io.ReadAll(io.LimitReader(resp.Body, 512))
		return fmt.Errorf("GET %s: %s: %s", url, resp.Status, b)
	}
	return json.NewDecoder(resp.Body).Decode(into)
}

// ModelCalls counts the ledger rows of one message: calls made, and
// answers replayed from the journal.
func (s *Stack) ModelCalls(ctx context.Context, msgID string) (made, replayed int, err error) {
	c, err := agent.CountModelCalls(ctx, s.Pool, s.Cfg.Tenant, msgID)
	return c.Made, c.Replayed, err
}

// ActionState is one action row, as the operator sees it.
type ActionState struct {
	Key     string
	Status  string
	Attempt int
}

// FrozenIntent is the frozen row of one (ref, action).
type FrozenIntent struct {
	Payload map[string]string
	Key     string
	Version int
}

// Intent reads the frozen intent of ref and action (nil when none).
func (s *Stack) Intent(ctx context.Context, ref, action string) (*FrozenIntent, error) {
	in, err := intent.Get(ctx, s.Pool, s.Cfg.Tenant, ref, action)
	if errors.Is(err, intent.ErrNotFound) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	return &FrozenIntent{Payload: in.Payload.Map(), Key: in.Key, Version: in.Version}, nil
}

// Actions lists the action rows of an action name.
func (s *Stack) Actions(ctx context.Context, action string) ([]ActionState, error) {
	as, err := executortest.Actions(ctx, s.Pool, executortest.Filter{Tenant: s.Cfg.Tenant, Action: action})
	if err != nil {
		return nil, err
	}
	out := make([]ActionState, len(as))
	for i, a := range as {
		out[i] = ActionState{Key: a.Key, Status: a.Status, Attempt: a.Attempt}
	}
	return out, nil
}

// WaitFor polls cond until it holds or the deadline passes.
func WaitFor(ctx context.Context, timeout time.Duration, cond func() (bool, error)) error {
	deadline := time.Now().Add(timeout)
	for {
		ok, err := cond()
		if err != nil {
			return err
		}
		if ok {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("still waiting after %s", timeout)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// Close stops every process (SIGTERM, then SIGKILL), drops the schemas
// unless Keep, and stops a private cluster.
func (s *Stack) Close() {
	s.mu.Lock()
	procs := append([]*Proc(nil), s.workers...)
	s.mu.Unlock()
	procs = append(procs, s.Server, s.WhatsApp, s.Model, s.PSP)
	var wg sync.WaitGroup
	for _, p := range procs {
		if p != nil {
			wg.Go(func() { p.Stop(5 * time.Second) })
		}
	}
	wg.Wait()
	if s.Pool != nil {
		if !s.Cfg.Keep && s.Cluster == nil {
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			for _, sc := range []string{s.Cfg.Schema, s.Cfg.Schema + "_psp"} {
				s.Pool.Exec(ctx, "DROP SCHEMA IF EXISTS "+pgx.Identifier{sc}.Sanitize()+" CASCADE") //nolint:errcheck
			}
			cancel()
		}
		s.Pool.Close()
	}
	s.stopClusters()
}

// paymentSecret signs the PSP's webhooks to the server.
func (s *Stack) paymentSecret() string { return "whsec_" + s.Cfg.HMACKey }

func randHex(n int) string {
	b := make([]byte, n)
	rand.Read(b) //nolint:errcheck // crypto/rand does not fail on Linux
	return hex.EncodeToString(b)
}
