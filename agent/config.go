package agent

import (
	"cmp"
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"log/slog"
	"os"
	"regexp"
	"slices"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/riverqueue/river"
	"github.com/riverqueue/river/rivertype"
	openai "github.com/sashabaranov/go-openai"

	"github.com/retrysafe/retrysafe/executor"
	"github.com/retrysafe/retrysafe/intent"
	"github.com/retrysafe/retrysafe/internal/confcheck"
	"github.com/retrysafe/retrysafe/internal/failpoint"
	"github.com/retrysafe/retrysafe/tools"
)

// DBTX is what the data functions need: *pgxpool.Pool, *pgx.Conn and pgx.Tx
// all satisfy it. One definition (intent's) serves every package, so a
// caller's transaction fits them all.
type DBTX = intent.DBTX

// Beginner is a DBTX that opens transactions (a pool).
type Beginner = intent.Beginner

// Inserter inserts River jobs inside a caller's transaction;
// *river.Client[pgx.Tx] satisfies it (NewInserter builds an insert-only one).
type Inserter interface {
	InsertTx(ctx context.Context, tx pgx.Tx, args river.JobArgs, opts *river.InsertOpts) (*rivertype.JobInsertResult, error)
}

// ChatModel is the model API; *openai.Client satisfies it.
type ChatModel interface {
	CreateChatCompletion(ctx context.Context, req openai.ChatCompletionRequest) (openai.ChatCompletionResponse, error)
}

// JournalMode turns the model journal on or off.
type JournalMode string

// Journal modes.
const (
	JournalOn  JournalMode = "on"
	JournalOff JournalMode = "off"
)

// Conversation is the system context of a turn. It comes from the
// conversations table, never from the model.
type Conversation struct {
	Tenant         string
	ID             string // the customer's WhatsApp id (wa_id)
	CustomerID     string
	InvoiceRef     string // the open invoice; "" when nothing is due
	AmountDueCents int64
}

// Texts are the fixed replies the agent sends when the model's answer cannot
// be used. They must not quote anything the customer sent, nor claim that
// nothing was charged: an earlier step of the same turn may have charged.
type Texts struct {
	// NoInvoice: the conversation has no open invoice (the model is not
	// called).
	NoInvoice string
	// ToolError: the model asked for a tool call that cannot be executed
	// (nothing was charged).
	ToolError string
	// ModelError: the model API refused the request as it stands.
	ModelError string
	// Empty: the model answered with no text.
	Empty string
	// StepLimit: the model kept calling tools past MaxSteps.
	StepLimit string
	// Refusal: the model refused (message.refusal) and Config.Refusal is
	// RefusalFixed or RefusalReview.
	Refusal string
	// Cut: the model's answer was cut off (finish_reason "length") or
	// withheld by its content filter (finish_reason "content_filter").
	Cut string
	// Group: a group message under GroupsRefuse.
	Group string
}

// RefusalPolicy says how a refusal (message.refusal) is answered. The
// refusal itself is always in the model journal and the turn.
type RefusalPolicy string

// Refusal policies.
const (
	// RefusalFixed answers with Texts.Refusal (the default).
	RefusalFixed RefusalPolicy = "fixed"
	// RefusalRelay sends the model's refusal text to the customer.
	RefusalRelay RefusalPolicy = "relay"
	// RefusalReview sends nothing: the reply (Texts.Refusal) is frozen and
	// held for review, for an operator to follow up.
	RefusalReview RefusalPolicy = "review"
)

// GroupPolicy says what becomes of a message written in a WhatsApp group.
type GroupPolicy string

// Group policies.
const (
	// GroupsConversation answers a group in its own conversation
	// ("group:<group id>", never the participant's one-to-one thread). The
	// default.
	GroupsConversation GroupPolicy = "conversation"
	// GroupsRefuse answers every group message with Texts.Group, in the
	// group, without calling the model.
	GroupsRefuse GroupPolicy = "refuse"
)

// ReplyTemplate is an approved template the reply goes out as when the
// customer-service window is closed.
type ReplyTemplate struct {
	Name     string // e.g. "retomar_conversa"
	Language string // default "pt_BR"
	// BodyParam passes the reply's text as the template's one body
	// parameter ({{1}}); false sends the template as approved.
	BodyParam bool
}

// DefaultTexts are the Portuguese fixed replies.
func DefaultTexts() Texts {
	return Texts{
		NoInvoice:  "Olá! Não encontrei nenhuma fatura em aberto para este número. Se achar que é um engano, responda esta mensagem que um atendente vai verificar.",
		ToolError:  "Desculpe, não consegui gerar a cobrança com esses dados. Pode me enviar de novo a sua chave Pix (CPF, e-mail ou telefone)?",
		ModelError: "Desculpe, não consegui processar sua mensagem agora. Um atendente vai falar com você em breve.",
		Empty:      "Desculpe, não entendi. Pode repetir, por favor?",
		StepLimit:  "Desculpe, não consegui concluir seu pedido agora. Um atendente vai verificar e falar com você.",
		Refusal:    "Desculpe, não posso ajudar com esse pedido por aqui. Um atendente vai falar com você.",
		Cut:        "Desculpe, não consegui responder agora. Um atendente vai verificar e falar com você.",
		Group:      "Olá! Por segurança, não tratamos de pagamentos em grupos. Fale com a gente numa conversa individual.",
	}
}

// The defaults of Config's and RiverConfig's zero fields. The worker's
// flags take their defaults from here, so that a default is written once.
const (
	DefaultMaxSteps      = 4
	DefaultHistoryLimit  = 20
	DefaultModelTimeout  = 60 * time.Second
	DefaultClaimTTL      = 3 * time.Minute
	DefaultServiceWindow = 24 * time.Hour

	DefaultConcurrency          = 4
	DefaultJobTimeout           = 2 * time.Minute
	DefaultRescueStuckJobsAfter = 5 * time.Minute
	DefaultRetryBase            = time.Second
	DefaultRetryMax             = 5 * time.Minute
	DefaultMaxAttempts          = 25
)

// Config configures an Agent. Zero fields take the documented defaults;
// New validates the result.
type Config struct {
	// DB is the pool. Required.
	DB Beginner `required:"true"`
	// Tools holds every tool the executor may run for the agent,
	// including the reply tool. Required.
	Tools *tools.Registry `required:"true"`
	// Intents is the intent store (its deriver must know every tool).
	// Required.
	Intents *intent.Store `required:"true"`
	// Executor runs tools; its ToolSource must find the same tools
	// (typically Tools itself). Required.
	Executor *executor.Executor `required:"true"`
	// Queue inserts the reply (outbox) jobs. Required.
	Queue Inserter `required:"true"`
	// Model is the chat API. Required.
	Model ChatModel `required:"true"`
	// ModelName is sent with every request and recorded in the ledger
	// (prices are configured per name). Required.
	ModelName string `required:"true"`
	// Journal: JournalOn (default) or JournalOff.
	Journal JournalMode
	// ModelTools names the tools the model may call. Nil: every
	// registered tool except ReplyAction. The reply tool is never offered.
	ModelTools []string
	// ReplyAction is the tool that sends the reply. Default ReplyToolName.
	ReplyAction string
	// MaxSteps bounds model calls per message. Default 4.
	MaxSteps int
	// HistoryLimit is how many messages of the conversation the model
	// sees, the inbound one included. Default 20.
	HistoryLimit int
	// ModelTimeout bounds one model call. Default 60s.
	ModelTimeout time.Duration
	// ClaimTTL is how long a worker's claim on a message keeps redelivered
	// jobs waiting. It must exceed ModelTimeout. Default 3m.
	ClaimTTL time.Duration
	// Prompt builds the system prompt. Default DefaultPrompt.
	Prompt func(Conversation) string
	// Texts are the fixed replies. Empty fields take DefaultTexts.
	Texts Texts
	// Owner names this worker in message claims. Default host:pid:random.
	Owner string
	// ServiceWindow is WhatsApp's customer-service window: inside it, from
	// the customer's last message, the reply is free text; outside it, the
	// tenant's template. Default 24h.
	ServiceWindow time.Duration
	// Templates maps a tenant to the approved template its replies go out
	// as outside the window; the key "*" serves every tenant without one
	// of its own. A tenant with none has such replies put to review.
	Templates map[string]ReplyTemplate
	// Delivery decides what a failed reply leads to (and how long the
	// reply job backs off after error 131056). Zero: DefaultDelivery().
	Delivery DeliveryPolicy
	// Refusal answers model refusals. Default RefusalFixed.
	Refusal RefusalPolicy
	// Groups decides what a group message gets. Default GroupsConversation.
	Groups GroupPolicy
	// Clock is the worker's clock (durations in logs, retry jitter, the
	// customer-service window). Claims use the database clock. Default
	// time.Now.
	Clock func() time.Time
	// Logger defaults to slog.Default().
	Logger *slog.Logger
	// Failpoint is called at each named point (see the package
	// documentation). Default failpoint.Hit.
	Failpoint func(name string)
}

// Validate fills defaults into a copy of c and checks it.
func (c Config) Validate() (Config, error) {
	if err := confcheck.Required(ErrConfig, c); err != nil {
		return c, err
	}
	for _, step := range []func(*Config) error{(*Config).validateTools, (*Config).validateLimits, (*Config).validateReplies} {
		if err := step(&c); err != nil {
			return c, err
		}
	}
	if c.Prompt == nil {
		c.Prompt = DefaultPrompt
	}
	if c.Owner == "" {
		c.Owner = defaultOwner()
	}
	c.Logger = cmp.Or(c.Logger, slog.Default())
	if c.Clock == nil {
		c.Clock = time.Now
	}
	if c.Failpoint == nil {
		c.Failpoint = failpoint.Hit
	}
	return c, nil
}

// validateTools checks the journal mode and the tools: the reply tool is
// registered and never offered to the model.
func (c *Config) validateTools() error {
	c.Journal = cmp.Or(c.Journal, JournalOn)
	if c.Journal != JournalOn && c.Journal != JournalOff {
		return invalid("Journal %q: want on or off", c.Journal)
	}
	c.ReplyAction = cmp.Or(c.ReplyAction, ReplyToolName)
	if _, ok := c.Tools.Tool(c.ReplyAction); !ok {
		return invalid("reply tool %q is not registered", c.ReplyAction)
	}
	if c.ModelTools == nil {
		for _, n := range c.Tools.Names() {
			if n != c.ReplyAction {
				c.ModelTools = append(c.ModelTools, n)
			}
		}
	}
	c.ModelTools = slices.Clone(c.ModelTools)
	for _, n := range c.ModelTools {
		if n == c.ReplyAction {
			return invalid("the reply tool %q cannot be offered to the model", n)
		}
		if _, ok := c.Tools.Tool(n); !ok {
			return invalid("model tool %q is not registered", n)
		}
	}
	return nil
}

// validateLimits checks the bounds of a turn: steps, history, timeouts.
func (c *Config) validateLimits() error {
	c.MaxSteps = cmp.Or(c.MaxSteps, DefaultMaxSteps)
	c.HistoryLimit = cmp.Or(c.HistoryLimit, DefaultHistoryLimit)
	c.ModelTimeout = cmp.Or(c.ModelTimeout, DefaultModelTimeout)
	c.ClaimTTL = cmp.Or(c.ClaimTTL, DefaultClaimTTL)
	switch {
	case c.MaxSteps < 1 || c.MaxSteps > 32:
		return invalid("MaxSteps %d: want 1..32", c.MaxSteps)
	case c.HistoryLimit < 1:
		return invalid("HistoryLimit %d: want at least 1", c.HistoryLimit)
	case c.ModelTimeout < 0 || c.ClaimTTL <= c.ModelTimeout:
		return invalid("ClaimTTL (%s) must exceed ModelTimeout (%s), both positive", c.ClaimTTL, c.ModelTimeout)
	}
	return nil
}

// validateReplies checks what the customer gets: the fixed texts, the
// customer-service window and its templates, the delivery, refusal and
// group policies.
func (c *Config) validateReplies() error {
	def := DefaultTexts()
	for _, f := range []struct {
		v *string
		d string
	}{
		{&c.Texts.NoInvoice, def.NoInvoice}, {&c.Texts.ToolError, def.ToolError},
		{&c.Texts.ModelError, def.ModelError}, {&c.Texts.Empty, def.Empty}, {&c.Texts.StepLimit, def.StepLimit},
		{&c.Texts.Refusal, def.Refusal}, {&c.Texts.Cut, def.Cut}, {&c.Texts.Group, def.Group},
	} {
		*f.v = cmp.Or(*f.v, f.d)
	}
	c.ServiceWindow = cmp.Or(c.ServiceWindow, DefaultServiceWindow)
	if c.ServiceWindow < 0 {
		return invalid("ServiceWindow must be positive")
	}
	tpl := make(map[string]ReplyTemplate, len(c.Templates))
	for tenant, t := range c.Templates {
		if tenant == "" || !reTemplateName.MatchString(t.Name) {
			return invalid("Templates[%q]: want a tenant and a template name of lower-case letters, digits and underscores", tenant)
		}
		t.Language = cmp.Or(t.Language, "pt_BR")
		tpl[tenant] = t
	}
	c.Templates = tpl
	if c.Delivery.RetryCodes == nil {
		c.Delivery = DefaultDelivery()
	}
	c.Refusal = cmp.Or(c.Refusal, RefusalFixed)
	c.Groups = cmp.Or(c.Groups, GroupsConversation)
	switch {
	case c.Delivery.PairRateBackoff < 0:
		return invalid("Delivery.PairRateBackoff must not be negative")
	case c.Refusal != RefusalFixed && c.Refusal != RefusalRelay && c.Refusal != RefusalReview:
		return invalid("Refusal %q: want fixed, relay or review", c.Refusal)
	case c.Groups != GroupsConversation && c.Groups != GroupsRefuse:
		return invalid("Groups %q: want conversation or refuse", c.Groups)
	}
	return nil
}

// invalid is a configuration error: ErrConfig and what is wrong.
func invalid(format string, args ...any) error {
	return fmt.Errorf("%w: "+format, append([]any{ErrConfig}, args...)...)
}

var reTemplateName = regexp.MustCompile(`^[a-z0-9_]{1,512}$`)

// template returns the tenant's template for replies outside the window.
func (c Config) template(tenant string) (ReplyTemplate, bool) {
	if t, ok := c.Templates[tenant]; ok {
		return t, true
	}
	t, ok := c.Templates["*"]
	return t, ok
}

func defaultOwner() string {
	host, _ := os.Hostname()
	b := make([]byte, 4)
	_, _ = rand.Read(b)
	return fmt.Sprintf("%s:%d:%s", host, os.Getpid(), hex.EncodeToString(b))
}
