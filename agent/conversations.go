package agent

import (
	"context"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5"
)

// conversations (migration 004): the system context of a turn, written by
// the billing system, read by the agent and by the webhook's default
// notifier. Every statement is scoped by tenant.

// conversationGet reads a conversation's system context.
const conversationGet = `SELECT customer_id, coalesce(invoice_ref, ''), coalesce(amount_due_cents, 0)
FROM conversations WHERE tenant_id = $1 AND conversation_id = $2`

// conversationUpsert writes a conversation's system context.
const conversationUpsert = `INSERT INTO conversations
	(tenant_id, conversation_id, customer_id, invoice_ref, amount_due_cents)
VALUES ($1, $2, $3, nullif($4, ''), nullif($5::bigint, 0))
ON CONFLICT (tenant_id, conversation_id) DO UPDATE
SET customer_id = excluded.customer_id, invoice_ref = excluded.invoice_ref,
	amount_due_cents = excluded.amount_due_cents, updated_at = now()`

// conversationByInvoice finds the conversation whose open invoice is $2,
// most recently updated first.
const conversationByInvoice = `SELECT conversation_id FROM conversations
WHERE tenant_id = $1 AND invoice_ref = $2
ORDER BY updated_at DESC LIMIT 1`

// UpsertConversation writes a conversation's system context, as the billing
// system knows it (an empty InvoiceRef means nothing is due).
func UpsertConversation(ctx context.Context, db DBTX, c Conversation) error {
	if c.Tenant == "" || c.ID == "" || c.CustomerID == "" {
		return fmt.Errorf("%w: conversation needs tenant, id and customer id", ErrInvalid)
	}
	if (c.InvoiceRef == "") != (c.AmountDueCents == 0) || c.AmountDueCents < 0 {
		return fmt.Errorf("%w: conversation needs both an invoice ref and a positive amount due, or neither", ErrInvalid)
	}
	if _, err := db.Exec(ctx, conversationUpsert, c.Tenant, c.ID, c.CustomerID, c.InvoiceRef, c.AmountDueCents); err != nil {
		return fmt.Errorf("agent: upsert conversation: %w", err)
	}
	return nil
}

// GetConversation reads a conversation's system context.
func GetConversation(ctx context.Context, db DBTX, tenant, id string) (*Conversation, error) {
	c := &Conversation{Tenant: tenant, ID: id}
	err := db.QueryRow(ctx, conversationGet, tenant, id).Scan(&c.CustomerID, &c.InvoiceRef, &c.AmountDueCents)
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, fmt.Errorf("%w: conversation", ErrNotFound)
	}
	if err != nil {
		return nil, fmt.Errorf("agent: get conversation: %w", err)
	}
	return c, nil
}

// ConversationByInvoice returns the id of the tenant's conversation whose
// open invoice is invoiceRef (the customer's WhatsApp id, or "" when none
// is), the most recently updated when several are. The payment webhook's
// default notifier sends the receipt there, inside its transaction.
func ConversationByInvoice(ctx context.Context, db DBTX, tenant, invoiceRef string) (string, error) {
	var id string
	err := db.QueryRow(ctx, conversationByInvoice, tenant, invoiceRef).Scan(&id)
	if errors.Is(err, pgx.ErrNoRows) {
		return "", nil
	}
	if err != nil {
		return "", fmt.Errorf("agent: conversation by invoice: %w", err)
	}
	return id, nil
}
