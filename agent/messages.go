package agent

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/jackc/pgx/v5"
)

// The inbox: messages (migration 004, the sender columns of 011) and
// inbound_ignored (011). Every statement is scoped by tenant. Durations
// travel as microseconds so that lease arithmetic happens on the database
// clock.

// messageInsert stores an inbound message; it returns a row only when the
// message was new (a redelivered webhook inserts nothing).
const messageInsert = `INSERT INTO messages
	(tenant_id, message_id, conversation_id, direction, body, phone_number_id, sent_at,
	 kind, sender_wa_id, sender_user_id, group_id)
VALUES ($1, $2, $3, 'in', $4, $5, $6, $7, nullif($8, ''), nullif($9, ''), nullif($10, ''))
ON CONFLICT DO NOTHING
RETURNING seq`

// messageInsertReply stores the agent's reply in the conversation history.
const messageInsertReply = `INSERT INTO messages
	(tenant_id, message_id, conversation_id, direction, body, phone_number_id)
VALUES ($1, $2, $3, 'out', $4, $5)
ON CONFLICT DO NOTHING`

// messageLastInbound is when the customer last wrote in a conversation (the
// provider's timestamp where there is one): the 24-hour customer-service
// window runs from it.
const messageLastInbound = `SELECT max(coalesce(sent_at, created_at)) FROM messages
WHERE tenant_id = $1 AND conversation_id = $2 AND direction = 'in'`

// messageClaim takes the processing claim of an unprocessed inbound message
// whose claim is free or expired. It returns no row when the message is
// processed, claimed by a live worker, or absent.
const messageClaim = `UPDATE messages
SET claim_owner = $3, claim_until = now() + $4::bigint * interval '1 microsecond', claims = claims + 1
WHERE tenant_id = $1 AND message_id = $2 AND direction = 'in' AND processed_at IS NULL
	AND (claim_until IS NULL OR claim_until <= now())
RETURNING conversation_id, body, phone_number_id, seq, claims, coalesce(group_id, '')`

// messageClaimState explains why messageClaim returned nothing.
const messageClaimState = `SELECT processed_at IS NOT NULL,
	coalesce(extract(epoch FROM claim_until - now()), 0)::float8
FROM messages WHERE tenant_id = $1 AND message_id = $2 AND direction = 'in'`

// messageRelease gives a claim back early (the job will run again), fenced
// by owner and claim count so that a taken-over claim is left alone.
const messageRelease = `UPDATE messages SET claim_owner = NULL, claim_until = NULL
WHERE tenant_id = $1 AND message_id = $2 AND claim_owner = $3 AND claims = $4 AND processed_at IS NULL`

// messageMarkProcessed closes an inbound message, in the turn's transaction.
const messageMarkProcessed = `UPDATE messages SET processed_at = now(), claim_owner = NULL, claim_until = NULL
WHERE tenant_id = $1 AND message_id = $2 AND direction = 'in'`

// messageListConversation returns the latest $4 messages of a conversation
// up to and including seq $3, newest first.
const messageListConversation = `SELECT direction, body FROM messages
WHERE tenant_id = $1 AND conversation_id = $2 AND seq <= $3
ORDER BY seq DESC LIMIT $4`

// messageListInbound lists a tenant's inbound message ids.
const messageListInbound = `SELECT message_id FROM messages WHERE tenant_id = $1 AND direction = 'in'`

// messageListStored lists a tenant's inbound messages as they were
// received, in arrival order.
const messageListStored = `SELECT message_id, conversation_id, phone_number_id, body, sent_at, kind,
	coalesce(sender_wa_id, ''), coalesce(sender_user_id, ''), coalesce(group_id, '') FROM messages
WHERE tenant_id = $1 AND direction = 'in' ORDER BY seq`

// ignoredList lists a tenant's ignored inbound messages by id.
const ignoredList = `SELECT message_id, type, reason, phone_number_id FROM inbound_ignored
WHERE tenant_id = $1 ORDER BY message_id`

// ignoredInsert records an inbound message that is not answered, once.
const ignoredInsert = `INSERT INTO inbound_ignored (tenant_id, message_id, type, reason, phone_number_id)
VALUES ($1, $2, $3, $4, $5)
ON CONFLICT DO NOTHING`

// insertMessage stores an inbound message; false when it was stored
// before.
func insertMessage(ctx context.Context, db DBTX, m Inbound) (bool, error) {
	var sentAt *time.Time
	if !m.SentAt.IsZero() {
		sentAt = &m.SentAt
	}
	kind := m.Kind
	if kind == "" {
		kind = "text"
	}
	var seq int64
	err := db.QueryRow(ctx, messageInsert, m.Tenant, m.MessageID, m.ConversationID, m.Body, m.PhoneNumberID, sentAt,
		kind, m.SenderWaID, m.SenderUserID, m.GroupID).Scan(&seq)
	if errors.Is(err, pgx.ErrNoRows) {
		return false, nil
	}
	return err == nil, err
}

// insertReplyMessage stores the reply ref in the conversation history.
func insertReplyMessage(ctx context.Context, db DBTX, cl *claim, ref, body string) error {
	_, err := db.Exec(ctx, messageInsertReply, cl.tenant, ref, cl.conversationID, body, cl.phoneNumberID)
	return err
}

// lastInbound is when the customer last wrote in the conversation; nil
// when never.
func lastInbound(ctx context.Context, db DBTX, tenant, conversationID string) (*time.Time, error) {
	var last *time.Time
	err := db.QueryRow(ctx, messageLastInbound, tenant, conversationID).Scan(&last)
	return last, err
}

// claimMessage takes the processing claim of an inbound message for owner,
// for ttl. nil, nil: the message is processed, claimed by a live worker, or
// absent (messageState says which).
func claimMessage(ctx context.Context, db DBTX, tenant, messageID, owner string, ttl time.Duration) (*claim, error) {
	cl := &claim{tenant: tenant, messageID: messageID}
	err := db.QueryRow(ctx, messageClaim, tenant, messageID, owner, ttl.Microseconds()).
		Scan(&cl.conversationID, &cl.body, &cl.phoneNumberID, &cl.seq, &cl.n, &cl.groupID)
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	return cl, nil
}

// messageState says why a message could not be claimed: processed, or how
// long the live claim has left. ErrNotFound when it is not stored.
func messageState(ctx context.Context, db DBTX, tenant, messageID string) (processed bool, left time.Duration, err error) {
	var secs float64
	err = db.QueryRow(ctx, messageClaimState, tenant, messageID).Scan(&processed, &secs)
	if errors.Is(err, pgx.ErrNoRows) {
		return false, 0, fmt.Errorf("%w: message %s of tenant %s", ErrNotFound, messageID, tenant)
	}
	return processed, max(time.Duration(secs*float64(time.Second)), 0), err
}

// releaseMessage gives owner's claim back, unless it was taken over.
func releaseMessage(ctx context.Context, db DBTX, cl *claim, owner string) error {
	_, err := db.Exec(ctx, messageRelease, cl.tenant, cl.messageID, owner, cl.n)
	return err
}

// markProcessed closes an inbound message.
func markProcessed(ctx context.Context, db DBTX, tenant, messageID string) error {
	_, err := db.Exec(ctx, messageMarkProcessed, tenant, messageID)
	return err
}

// historyEntry is one message of a conversation as the model sees it.
type historyEntry struct {
	out  bool // the agent's reply
	body string
}

// conversationHistory returns the latest limit messages of the
// conversation up to and including seq, oldest first.
func conversationHistory(ctx context.Context, db DBTX, tenant, conversationID string, seq int64, limit int) ([]historyEntry, error) {
	rows, err := db.Query(ctx, messageListConversation, tenant, conversationID, seq, limit)
	if err != nil {
		return nil, err
	}
	hist, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (historyEntry, error) {
		var dir string
		var e historyEntry
		err := r.Scan(&dir, &e.body)
		e.out = dir == "out"
		return e, err
	})
	if err != nil {
		return nil, err
	}
	slices.Reverse(hist)
	return hist, nil
}

// InboundIDs lists the ids of the tenant's stored inbound messages.
func InboundIDs(ctx context.Context, db DBTX, tenant string) ([]string, error) {
	rows, err := db.Query(ctx, messageListInbound, tenant)
	if err != nil {
		return nil, fmt.Errorf("agent: inbound messages: %w", err)
	}
	ids, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		return nil, fmt.Errorf("agent: inbound messages: %w", err)
	}
	return ids, nil
}

// insertIgnored records an ignored inbound message; false when it was
// recorded before.
func insertIgnored(ctx context.Context, db DBTX, ig Ignored) (bool, error) {
	typ := ig.Type
	if typ == "" {
		typ = "?"
	}
	tag, err := db.Exec(ctx, ignoredInsert, ig.Tenant, ig.MessageID, typ, ig.Reason, ig.PhoneNumberID)
	return tag.RowsAffected() > 0, err
}

// ListInbound lists the tenant's stored inbound messages in arrival
// order, as Receive stored them: for tests and tools that check what an
// inbound webhook kept.
func ListInbound(ctx context.Context, db DBTX, tenant string) ([]Inbound, error) {
	rows, err := db.Query(ctx, messageListStored, tenant)
	if err != nil {
		return nil, fmt.Errorf("agent: inbound messages: %w", err)
	}
	ms, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (Inbound, error) {
		m := Inbound{Tenant: tenant}
		var sent *time.Time
		err := row.Scan(&m.MessageID, &m.ConversationID, &m.PhoneNumberID, &m.Body, &sent, &m.Kind,
			&m.SenderWaID, &m.SenderUserID, &m.GroupID)
		if sent != nil {
			m.SentAt = *sent
		}
		return m, err
	})
	if err != nil {
		return nil, fmt.Errorf("agent: inbound messages: %w", err)
	}
	return ms, nil
}

// ListIgnored lists the tenant's inbound messages recorded and not
// answered, by id: for tests and tools.
func ListIgnored(ctx context.Context, db DBTX, tenant string) ([]Ignored, error) {
	rows, err := db.Query(ctx, ignoredList, tenant)
	if err != nil {
		return nil, fmt.Errorf("agent: ignored messages: %w", err)
	}
	igs, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (Ignored, error) {
		ig := Ignored{Tenant: tenant}
		err := row.Scan(&ig.MessageID, &ig.Type, &ig.Reason, &ig.PhoneNumberID)
		return ig, err
	})
	if err != nil {
		return nil, fmt.Errorf("agent: ignored messages: %w", err)
	}
	return igs, nil
}
