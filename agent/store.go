package agent

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
)

// Inbound is one inbound text message as the webhook received it.
type Inbound struct {
	Tenant         string
	MessageID      string // the provider's id ("wamid...")
	ConversationID string // the sender's WhatsApp id (wa_id)
	PhoneNumberID  string // the business number it reached
	Body           string
	SentAt         time.Time // the provider's timestamp; zero when unknown
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
// stored nor queued again. It returns how many messages were new.
func Receive(ctx context.Context, db Beginner, q Inserter, msgs []Inbound) (int, error) {
	for _, m := range msgs {
		if err := m.validate(); err != nil {
			return 0, err
		}
	}
	if len(msgs) == 0 {
		return 0, nil
	}
	tx, err := db.Begin(ctx)
	if err != nil {
		return 0, fmt.Errorf("agent: receive: begin: %w", err)
	}
	defer tx.Rollback(ctx) //nolint:errcheck // no-op after commit
	fresh := 0
	for _, m := range msgs {
		var sentAt *time.Time
		if !m.SentAt.IsZero() {
			sentAt = &m.SentAt
		}
		var seq int64
		err := tx.QueryRow(ctx, MessageInsert, m.Tenant, m.MessageID, m.ConversationID, m.Body, m.PhoneNumberID, sentAt).Scan(&seq)
		if errors.Is(err, pgx.ErrNoRows) {
			continue // already stored: already queued
		}
		if err != nil {
			return 0, fmt.Errorf("agent: receive: store message: %w", err)
		}
		if _, err := q.InsertTx(ctx, tx, InboxArgs{Tenant: m.Tenant, MessageID: m.MessageID}, nil); err != nil {
			return 0, fmt.Errorf("agent: receive: enqueue: %w", err)
		}
		fresh++
	}
	if err := tx.Commit(ctx); err != nil {
		return 0, fmt.Errorf("agent: receive: commit: %w", err)
	}
	return fresh, nil
}

// UpsertConversation writes a conversation's system context, as the billing
// system knows it (an empty InvoiceRef means nothing is due).
func UpsertConversation(ctx context.Context, db DBTX, c Conversation) error {
	if c.Tenant == "" || c.ID == "" || c.CustomerID == "" {
		return fmt.Errorf("%w: conversation needs tenant, id and customer id", ErrInvalid)
	}
	if (c.InvoiceRef == "") != (c.AmountDueCents == 0) || c.AmountDueCents < 0 {
		return fmt.Errorf("%w: conversation needs both an invoice ref and a positive amount due, or neither", ErrInvalid)
	}
	if _, err := db.Exec(ctx, ConversationUpsert, c.Tenant, c.ID, c.CustomerID, c.InvoiceRef, c.AmountDueCents); err != nil {
		return fmt.Errorf("agent: upsert conversation: %w", err)
	}
	return nil
}

// GetConversation reads a conversation's system context.
func GetConversation(ctx context.Context, db DBTX, tenant, id string) (*Conversation, error) {
	c := &Conversation{Tenant: tenant, ID: id}
	err := db.QueryRow(ctx, ConversationGet, tenant, id).Scan(&c.CustomerID, &c.InvoiceRef, &c.AmountDueCents)
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, fmt.Errorf("%w: conversation", ErrNotFound)
	}
	if err != nil {
		return nil, fmt.Errorf("agent: get conversation: %w", err)
	}
	return c, nil
}

// Turn statuses.
const (
	TurnAnswered   = "answered"    // the model's reply is sent
	TurnToolError  = "tool_error"  // a malformed tool call: nothing frozen, a fixed reply
	TurnModelError = "model_error" // the model API refused, or kept calling tools: a fixed reply
	TurnNoInvoice  = "no_invoice"  // nothing due: a fixed reply, no model call
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
}

// GetTurn reads the turn of an inbound message.
func GetTurn(ctx context.Context, db DBTX, tenant, messageID string) (*Turn, error) {
	t := &Turn{Tenant: tenant, MessageID: messageID}
	var toolsJSON []byte
	err := db.QueryRow(ctx, TurnGet, tenant, messageID).Scan(&t.ConversationID, &t.Status, &t.Steps,
		&t.ErrorCode, &toolsJSON, &t.ReplyRef, &t.ReplyKey, &t.ReplyStatus, &t.CreatedAt)
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, fmt.Errorf("%w: turn", ErrNotFound)
	}
	if err != nil {
		return nil, fmt.Errorf("agent: get turn: %w", err)
	}
	if err := json.Unmarshal(toolsJSON, &t.Tools); err != nil {
		return nil, fmt.Errorf("agent: get turn: tools: %w", err)
	}
	return t, nil
}

// replyRef is the intent_ref of the reply to an inbound message: the
// reply's key is fixed by (tenant, message id, "reply").
func replyRef(messageID string) string { return messageID + ":reply" }
