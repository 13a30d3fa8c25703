package agent

import (
	"context"
	"encoding/json"
	"fmt"
)

// turnInsertPlanted records a finished turn as a test plants it, reply key
// and status included.
const turnInsertPlanted = `INSERT INTO agent_turns
	(tenant_id, message_id, conversation_id, status, steps, error_code, tools, reply_ref, reply_key, reply_status, reply_kind)
VALUES ($1, $2, $3, $4, $5, nullif($6, ''), $7::jsonb, $8, nullif($9, ''), $10, $11)`

// RecordMessage stores an inbound message directly, without the webhook
// batch's queue job, so that tests of the console can plant a conversation's
// history. Storing a message twice stores nothing the second time.
func RecordMessage(ctx context.Context, db DBTX, m Inbound) error {
	if _, err := insertMessage(ctx, db, m); err != nil {
		return fmt.Errorf("agent: record message: %w", err)
	}
	return nil
}

// RecordTurn writes a turn as it stands after its reply, for tests that need
// a turn without running the agent (the console's pages read them). Only
// the fields a turn is recorded with are written: tenant, message,
// conversation, status, steps, error code, tools, reply ref, key, status
// ("pending" when empty) and kind ("text" when empty).
func RecordTurn(ctx context.Context, db DBTX, t Turn) error {
	tools, err := json.Marshal(t.Tools)
	if err != nil {
		return fmt.Errorf("agent: record turn: %w", err)
	}
	if t.Tools == nil {
		tools = []byte("[]")
	}
	status, kind := t.ReplyStatus, t.ReplyKind
	if status == "" {
		status = "pending"
	}
	if kind == "" {
		kind = ReplyKindText
	}
	if _, err := db.Exec(ctx, turnInsertPlanted, t.Tenant, t.MessageID, t.ConversationID, t.Status, t.Steps, t.ErrorCode,
		string(tools), t.ReplyRef, t.ReplyKey, status, kind); err != nil {
		return fmt.Errorf("agent: record turn: %w", err)
	}
	return nil
}
