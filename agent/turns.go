package agent

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
)

// agent_turns (migration 004, the reply columns of 011): what the agent
// did with each inbound message and what became of its reply. Every
// statement is scoped by tenant.

// turnInsert records a turn; it returns a row only for the first writer.
const turnInsert = `INSERT INTO agent_turns
	(tenant_id, message_id, conversation_id, status, steps, error_code, tools, reply_ref, reply_kind)
VALUES ($1, $2, $3, $4, $5, nullif($6, ''), $7::jsonb, $8, $9)
ON CONFLICT DO NOTHING
RETURNING created_at`

// turnSetReplyKey stores the frozen reply key, in the turn's transaction.
const turnSetReplyKey = `UPDATE agent_turns SET reply_key = $3, updated_at = now()
WHERE tenant_id = $1 AND message_id = $2`

// turnSetReplyStatus records what became of the reply. "sent" does not
// overwrite what a failed status webhook decided, which may have arrived
// before the send's own answer was recorded.
const turnSetReplyStatus = `UPDATE agent_turns SET reply_status = $3, updated_at = now()
WHERE tenant_id = $1 AND message_id = $2 AND reply_status <> $3
	AND NOT ($3 = 'sent' AND reply_delivery IN ('failed', 'resending'))`

// turnColumns is what every turn read returns, in scanTurn's order.
const turnColumns = `message_id, conversation_id, status, steps, coalesce(error_code, ''), tools,
	coalesce(reply_ref, ''), coalesce(reply_key, ''), reply_status, created_at,
	reply_kind, coalesce(reply_wamid, ''), reply_delivery, reply_delivered_at, reply_read_at,
	coalesce(reply_error_code, 0), reply_resends`

// turnGet reads a turn.
const turnGet = `SELECT ` + turnColumns + ` FROM agent_turns WHERE tenant_id = $1 AND message_id = $2`

// turnList reads a tenant's turns (the restart test's census).
const turnList = `SELECT ` + turnColumns + ` FROM agent_turns WHERE tenant_id = $1`

// turnListAnswered: which of the inbound messages $2 have their turn
// recorded and their reply no longer pending (sent, failed or review).
const turnListAnswered = `SELECT message_id FROM agent_turns
WHERE tenant_id = $1 AND message_id = ANY($2) AND reply_status <> 'pending'`

// turnSetReplySent records the provider's id of the reply that went out;
// a resend's id replaces the failed one.
const turnSetReplySent = `UPDATE agent_turns SET reply_wamid = $3,
	reply_delivery = CASE WHEN reply_delivery = 'resending' THEN '' ELSE reply_delivery END, updated_at = now()
WHERE tenant_id = $1 AND message_id = $2 AND (reply_wamid IS NULL OR reply_delivery = 'resending')`

// turnForStatusByKey finds the reply a status webhook is about by the key
// it carried in biz_opaque_callback_data, and locks it: statuses of one
// reply are merged one at a time.
const turnForStatusByKey = `SELECT message_id, coalesce(reply_wamid, ''), reply_delivery, reply_resends, reply_status
FROM agent_turns WHERE tenant_id = $1 AND reply_key = $2
FOR UPDATE`

// turnForStatusByWamid finds it by the provider's message id.
const turnForStatusByWamid = `SELECT message_id, coalesce(reply_wamid, ''), reply_delivery, reply_resends, reply_status
FROM agent_turns WHERE tenant_id = $1 AND reply_wamid = $2
FOR UPDATE`

// turnMergeStatus writes a merged delivery state: $3 the provider's
// message id, $4 the merged state, $5 the status time, $6 the error code
// (0: none), $7 the reply status, $8 how many resends.
const turnMergeStatus = `UPDATE agent_turns SET reply_wamid = $3, reply_delivery = $4,
	reply_delivered_at = CASE WHEN $4 IN ('delivered', 'read') THEN coalesce(reply_delivered_at, $5) ELSE reply_delivered_at END,
	reply_read_at = CASE WHEN $4 = 'read' THEN coalesce(reply_read_at, $5) ELSE reply_read_at END,
	reply_error_code = coalesce(nullif($6::int, 0), reply_error_code),
	reply_status = $7, reply_resends = $8, updated_at = now()
WHERE tenant_id = $1 AND message_id = $2`

// turnListByKey: the turns whose tool calls carried the key $2, or that
// answered the message $3, each with that tool call. It reads the tenant's
// turns (the key is inside their tools): an operator's page, not a hot
// path.
const turnListByKey = `SELECT t.message_id, t.status, t.steps, coalesce(t.reply_ref, ''), coalesce(t.reply_key, ''), t.reply_status,
	t.created_at, coalesce(tc->>'status', ''), coalesce((tc->>'replayed')::boolean, false), coalesce(jsonb_array_length(tc->'divergent'), 0)
FROM agent_turns t, jsonb_array_elements(t.tools) tc
WHERE t.tenant_id = $1 AND (tc->>'key' = $2 OR t.message_id = $3)
ORDER BY t.created_at`

// turnCountTools counts the tool calls of the tenant's turns of the last
// day that replayed a stored outcome or diverged from the frozen intent.
const turnCountTools = `SELECT
	count(*) FILTER (WHERE (tc->>'replayed')::boolean AND t.created_at >= now() - interval '1 hour'),
	count(*) FILTER (WHERE (tc->>'replayed')::boolean),
	count(*) FILTER (WHERE jsonb_array_length(coalesce(tc->'divergent', '[]')) > 0 AND t.created_at >= now() - interval '1 hour'),
	count(*) FILTER (WHERE jsonb_array_length(coalesce(tc->'divergent', '[]')) > 0)
FROM agent_turns t, jsonb_array_elements(t.tools) tc
WHERE t.tenant_id = $1 AND t.created_at >= now() - interval '1 day'`

// turnRecord is a turn as the agent records it.
type turnRecord struct {
	cl    *claim
	r     *turnResult
	tools []byte // the outcomes, JSON
	ref   string // the reply's intent_ref
	kind  string // ReplyKindText or ReplyKindTemplate
}

// insertTurn records a turn; false when another worker recorded it first.
func insertTurn(ctx context.Context, db DBTX, t turnRecord) (bool, error) {
	var created time.Time
	err := db.QueryRow(ctx, turnInsert, t.cl.tenant, t.cl.messageID, t.cl.conversationID, t.r.status, t.r.steps, t.r.code,
		string(t.tools), t.ref, t.kind).Scan(&created)
	if errors.Is(err, pgx.ErrNoRows) {
		return false, nil
	}
	return err == nil, err
}

func setReplyKey(ctx context.Context, db DBTX, tenant, messageID, key string) error {
	_, err := db.Exec(ctx, turnSetReplyKey, tenant, messageID, key)
	return err
}

func setReplyStatus(ctx context.Context, db DBTX, tenant, messageID, status string) error {
	_, err := db.Exec(ctx, turnSetReplyStatus, tenant, messageID, status)
	return err
}

func setReplySent(ctx context.Context, db DBTX, tenant, messageID, wamid string) error {
	_, err := db.Exec(ctx, turnSetReplySent, tenant, messageID, wamid)
	return err
}

func scanTurn(row pgx.Row, tenant string) (*Turn, error) {
	t := &Turn{Tenant: tenant}
	var toolsJSON []byte
	if err := row.Scan(&t.MessageID, &t.ConversationID, &t.Status, &t.Steps,
		&t.ErrorCode, &toolsJSON, &t.ReplyRef, &t.ReplyKey, &t.ReplyStatus, &t.CreatedAt,
		&t.ReplyKind, &t.ReplyWamid, &t.ReplyDelivery, &t.DeliveredAt, &t.ReadAt, &t.ReplyError, &t.ReplyResends); err != nil {
		return nil, err
	}
	if err := json.Unmarshal(toolsJSON, &t.Tools); err != nil {
		return nil, fmt.Errorf("tools: %w", err)
	}
	return t, nil
}

// GetTurn reads the turn of an inbound message.
func GetTurn(ctx context.Context, db DBTX, tenant, messageID string) (*Turn, error) {
	t, err := scanTurn(db.QueryRow(ctx, turnGet, tenant, messageID), tenant)
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, fmt.Errorf("%w: turn", ErrNotFound)
	}
	if err != nil {
		return nil, fmt.Errorf("agent: get turn: %w", err)
	}
	return t, nil
}

// ListTurns reads every turn of the tenant, in no order.
func ListTurns(ctx context.Context, db DBTX, tenant string) ([]*Turn, error) {
	rows, err := db.Query(ctx, turnList, tenant)
	if err != nil {
		return nil, fmt.Errorf("agent: list turns: %w", err)
	}
	out, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (*Turn, error) { return scanTurn(r, tenant) })
	if err != nil {
		return nil, fmt.Errorf("agent: list turns: %w", err)
	}
	return out, nil
}

// Answered returns which of the tenant's inbound messages ids have their
// turn recorded and their reply settled (sent, failed or put to review).
func Answered(ctx context.Context, db DBTX, tenant string, ids []string) (map[string]bool, error) {
	rows, err := db.Query(ctx, turnListAnswered, tenant, ids)
	if err != nil {
		return nil, fmt.Errorf("agent: answered: %w", err)
	}
	got, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		return nil, fmt.Errorf("agent: answered: %w", err)
	}
	out := make(map[string]bool, len(got))
	for _, id := range got {
		out[id] = true
	}
	return out, nil
}

// replyState is a reply's delivery state, locked for a status merge.
type replyState struct {
	messageID, wamid, delivery, status string
	resends                            int
}

// lockReply finds the reply a status is about, by the key it carried,
// else by the provider's message id, and locks it. nil when neither
// finds one of ours.
func lockReply(ctx context.Context, tx DBTX, st Status) (*replyState, error) {
	var r replyState
	scan := func(q, arg string) error {
		return tx.QueryRow(ctx, q, st.Tenant, arg).Scan(&r.messageID, &r.wamid, &r.delivery, &r.resends, &r.status)
	}
	err := pgx.ErrNoRows
	if st.CallbackData != "" {
		err = scan(turnForStatusByKey, st.CallbackData)
	}
	if errors.Is(err, pgx.ErrNoRows) && st.MessageID != "" {
		err = scan(turnForStatusByWamid, st.MessageID)
	}
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	return &r, nil
}

// mergedReply is the delivery state a status leads to.
type mergedReply struct {
	wamid, delivery, status string
	at                      time.Time
	code, resends           int
}

func writeMerged(ctx context.Context, tx DBTX, tenant, messageID string, m mergedReply) error {
	_, err := tx.Exec(ctx, turnMergeStatus, tenant, messageID, m.wamid, m.delivery, m.at, m.code, m.status, m.resends)
	return err
}

// KeyTurn is a turn that ran a tool call under a key, or that answered
// the message the key's intent was frozen from, with that call.
type KeyTurn struct {
	MessageID, Status, ReplyRef, ReplyKey, ReplyStatus string
	ToolStatus                                         string // the call's outcome status
	Steps, Divergent                                   int    // Divergent: how many fields diverged
	Replayed                                           bool
	At                                                 time.Time
}

// TurnsOfKey lists the tenant's turns whose tool calls carried key, or
// that answered messageID (when not ""), oldest first: one row per tool
// call. It reads the tenant's turns: for an operator's page.
func TurnsOfKey(ctx context.Context, db DBTX, tenant, key, messageID string) ([]KeyTurn, error) {
	rows, err := db.Query(ctx, turnListByKey, tenant, key, messageID)
	if err != nil {
		return nil, fmt.Errorf("agent: turns of key: %w", err)
	}
	out, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (KeyTurn, error) {
		var t KeyTurn
		err := row.Scan(&t.MessageID, &t.Status, &t.Steps, &t.ReplyRef, &t.ReplyKey, &t.ReplyStatus, &t.At, &t.ToolStatus, &t.Replayed, &t.Divergent)
		return t, err
	})
	if err != nil {
		return nil, fmt.Errorf("agent: turns of key: %w", err)
	}
	return out, nil
}

// ToolCounts counts the tool calls of a tenant's turns that replayed a
// stored outcome or diverged from the frozen intent, over the last hour
// and the last day.
type ToolCounts struct {
	ReplayedHour, ReplayedDay   int64
	DivergentHour, DivergentDay int64
}

// CountTools reads the tenant's ToolCounts (the turns of the last day).
func CountTools(ctx context.Context, db DBTX, tenant string) (ToolCounts, error) {
	var c ToolCounts
	if err := db.QueryRow(ctx, turnCountTools, tenant).Scan(&c.ReplayedHour, &c.ReplayedDay, &c.DivergentHour, &c.DivergentDay); err != nil {
		return c, fmt.Errorf("agent: count tool calls: %w", err)
	}
	return c, nil
}
