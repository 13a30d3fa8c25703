package agent

import (
	"context"
	"fmt"
	"slices"
	"time"
)

// Inbound is one inbound message the agent answers, as the webhook
// received it: its text is what the customer wrote, tapped or captioned.
type Inbound struct {
	Tenant    string
	MessageID string // the provider's id ("wamid...")
	// ConversationID is the thread: the sender's phone number (wa_id) when
	// the webhook gives one, else the sender's business-scoped user id
	// (BSUID), and "group:<group id>" for a group message.
	ConversationID string
	PhoneNumberID  string // the business number it reached
	Body           string
	SentAt         time.Time // the provider's timestamp; zero when unknown
	// Kind is the message's type ("text", "button",
	// "interactive.button_reply", "image", ...). Default "text".
	Kind string
	// SenderWaID and SenderUserID are the sender's phone number and BSUID,
	// each "" when the webhook left it out. GroupID is the group a group
	// message was written in.
	SenderWaID, SenderUserID, GroupID string
}

// Ignored is an inbound message recorded and not answered.
type Ignored struct {
	Tenant        string
	MessageID     string // the provider's id, or "sha256:<hex>" of the raw message
	Type          string // as sent; "?" when unreadable
	Reason        string // no personal data
	PhoneNumberID string
}

// Status is one status webhook about a message the business sent.
type Status struct {
	Tenant    string
	MessageID string // the provider's id of the sent message ("wamid...")
	Status    string // sent, delivered, read, failed (others are ignored)
	At        time.Time
	// CallbackData is biz_opaque_callback_data: the reply's key, which the
	// reply tool sends with every reply.
	CallbackData string
	ErrorCode    int // errors[0].code of a failed status
}

// Batch is what one webhook delivery carries.
type Batch struct {
	Messages []Inbound
	Ignored  []Ignored
	Statuses []Status
}

// BatchResult counts what ReceiveBatch stored.
type BatchResult struct {
	New, Duplicates int // messages
	Ignored         int // ignored messages newly recorded
	Statuses        int // statuses that moved a reply's delivery state
	StaleStatuses   int // statuses of no known reply, or already merged
	Resends         int // failed replies queued for their one resend
	Review          int // failed replies put to review
}

func (m Inbound) validate() error {
	switch {
	case m.Tenant == "":
		return fmt.Errorf("%w: inbound message without tenant", ErrInvalid)
	case m.MessageID == "" || len(m.MessageID) > 255:
		return fmt.Errorf("%w: inbound message id must be 1..255 bytes", ErrInvalid)
	case m.ConversationID == "":
		return fmt.Errorf("%w: inbound message %s without sender", ErrInvalid, m.MessageID)
	}
	return nil
}

// Receive stores msgs and, for each message that was not stored before,
// inserts its inbox job, all in one transaction: a message is stored and
// queued together or not at all, and a redelivered message is neither
// stored nor queued again. It returns how many messages were new. It is
// ReceiveBatch with messages only: one that fails validation is recorded
// as ignored, unless it has no tenant or id to record it under (an error,
// nothing stored).
func Receive(ctx context.Context, db Beginner, q Inserter, msgs []Inbound) (int, error) {
	for _, m := range msgs {
		if err := m.validate(); err != nil {
			return 0, err
		}
	}
	if len(msgs) == 0 {
		return 0, nil
	}
	res, err := ReceiveBatch(ctx, db, q, Batch{Messages: msgs}, nil)
	return res.New, err
}

// ReceiveOpts tunes ReceiveBatch. A nil *ReceiveOpts means the defaults.
type ReceiveOpts struct {
	// Delivery decides what a failed reply status leads to. Zero:
	// DefaultDelivery().
	Delivery DeliveryPolicy
}

// ReceiveBatch stores one webhook delivery in one transaction: each new
// message with its inbox job, each ignored message's record, and each
// status merged into the delivery state of the reply it is about (a failed
// one queues the reply's one resend or puts it to review, by its error
// code). A message that fails validation is recorded as ignored rather than
// refusing the batch. Redelivered messages, ignored records and statuses
// change nothing.
func ReceiveBatch(ctx context.Context, db Beginner, q Inserter, b Batch, opts *ReceiveOpts) (BatchResult, error) {
	var res BatchResult
	pol := DefaultDelivery()
	if opts != nil && opts.Delivery.RetryCodes != nil {
		pol = opts.Delivery
	}
	msgs := make([]Inbound, 0, len(b.Messages))
	ignored := slices.Clone(b.Ignored)
	for _, m := range b.Messages {
		if err := m.validate(); err != nil {
			if m.Tenant == "" || m.MessageID == "" || len(m.MessageID) > 255 {
				return res, err // nothing to record it under
			}
			ignored = append(ignored, Ignored{Tenant: m.Tenant, MessageID: m.MessageID, Type: m.Kind, Reason: "invalid: " + err.Error(), PhoneNumberID: m.PhoneNumberID})
			continue
		}
		msgs = append(msgs, m)
	}
	if len(msgs) == 0 && len(ignored) == 0 && len(b.Statuses) == 0 {
		return res, nil
	}
	tx, err := db.Begin(ctx)
	if err != nil {
		return res, fmt.Errorf("agent: receive: begin: %w", err)
	}
	defer tx.Rollback(ctx) //nolint:errcheck // no-op after commit
	for _, m := range msgs {
		stored, err := insertMessage(ctx, tx, m)
		if err != nil {
			return res, fmt.Errorf("agent: receive: store message: %w", err)
		}
		if !stored {
			res.Duplicates++
			continue // already stored: already queued
		}
		if _, err := q.InsertTx(ctx, tx, InboxArgs{Tenant: m.Tenant, MessageID: m.MessageID}, nil); err != nil {
			return res, fmt.Errorf("agent: receive: enqueue: %w", err)
		}
		res.New++
	}
	for _, ig := range ignored {
		if ig.Tenant == "" || ig.MessageID == "" || len(ig.MessageID) > 255 {
			continue
		}
		recorded, err := insertIgnored(ctx, tx, ig)
		if err != nil {
			return res, fmt.Errorf("agent: receive: record ignored message: %w", err)
		}
		if recorded {
			res.Ignored++
		}
	}
	for _, st := range b.Statuses {
		if err := mergeStatus(ctx, tx, q, st, pol, &res); err != nil {
			return res, err
		}
	}
	if err := tx.Commit(ctx); err != nil {
		return res, fmt.Errorf("agent: receive: commit: %w", err)
	}
	return res, nil
}

// Turn statuses.
const (
	TurnAnswered   = "answered"      // the model's reply is sent
	TurnToolError  = "tool_error"    // a malformed tool call: nothing frozen, a fixed reply
	TurnModelError = "model_error"   // the model API refused, or kept calling tools: a fixed reply
	TurnNoInvoice  = "no_invoice"    // nothing due: a fixed reply, no model call
	TurnRefused    = "refused"       // the model refused (message.refusal): answered by Config.Refusal
	TurnGroup      = "group_refused" // a group message under GroupsRefuse: a fixed reply, no model call
)

// Reply kinds: free text inside the customer-service window, the tenant's
// approved template outside it.
const (
	ReplyKindText     = "text"
	ReplyKindTemplate = "template"
)

// Delivery states of a sent reply, merged from status webhooks.
const (
	DeliverySent      = "sent"
	DeliveryDelivered = "delivered"
	DeliveryRead      = "read"
	DeliveryFailed    = "failed"
	DeliveryResending = "resending" // failed; its one resend is queued
)

// Reply statuses.
const (
	ReplyPending = "pending"
	ReplySent    = "sent"
	ReplyFailed  = "failed"
	ReplyReview  = "review"
)

// ToolOutcome is one tool call of a turn, as recorded (never the payload).
type ToolOutcome struct {
	Action    string   `json:"action"`
	Status    string   `json:"status"` // the executor's outcome status
	Key       string   `json:"key"`
	Replayed  bool     `json:"replayed,omitempty"`
	Divergent []string `json:"divergent,omitempty"` // field names only
}

// Turn is what the agent did with one inbound message.
type Turn struct {
	Tenant         string
	MessageID      string
	ConversationID string
	Status         string
	Steps          int
	ErrorCode      string
	Tools          []ToolOutcome
	ReplyRef       string
	ReplyKey       string
	ReplyStatus    string
	CreatedAt      time.Time
	ReplyKind      string // ReplyKindText or ReplyKindTemplate
	ReplyWamid     string // the provider's id of the reply (of its resend, after one)
	ReplyDelivery  string // "" or a Delivery* state
	DeliveredAt    *time.Time
	ReadAt         *time.Time
	ReplyError     int // the error code of the last failed status
	ReplyResends   int
}

// replyRef is the intent_ref of the reply to an inbound message: the
// reply's key is fixed by (tenant, message id, "reply").
func replyRef(messageID string) string { return messageID + ":reply" }
