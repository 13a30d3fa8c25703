package agent

// SQL of the agent's tables (migrations/004_agent.sql) and of the model
// ledger and journal (migrations/003_model_calls.sql). Every statement is
// scoped by tenant. Durations travel as microseconds so that lease
// arithmetic happens on the database clock.

// MessageInsert stores an inbound message; it returns a row only when the
// message was new (a redelivered webhook inserts nothing).
const MessageInsert = `INSERT INTO messages
	(tenant_id, message_id, conversation_id, direction, body, phone_number_id, sent_at,
	 kind, sender_wa_id, sender_user_id, group_id)
VALUES ($1, $2, $3, 'in', $4, $5, $6, $7, nullif($8, ''), nullif($9, ''), nullif($10, ''))
ON CONFLICT DO NOTHING
RETURNING seq`

// IgnoredInsert records an inbound message that is not answered, once.
const IgnoredInsert = `INSERT INTO inbound_ignored (tenant_id, message_id, type, reason, phone_number_id)
VALUES ($1, $2, $3, $4, $5)
ON CONFLICT DO NOTHING`

// MessageLastInbound is when the customer last wrote in a conversation (the
// provider's timestamp where there is one): the 24-hour customer-service
// window runs from it.
const MessageLastInbound = `SELECT max(coalesce(sent_at, created_at)) FROM messages
WHERE tenant_id = $1 AND conversation_id = $2 AND direction = 'in'`

// MessageInsertReply stores the agent's reply in the conversation history.
const MessageInsertReply = `INSERT INTO messages
	(tenant_id, message_id, conversation_id, direction, body, phone_number_id)
VALUES ($1, $2, $3, 'out', $4, $5)
ON CONFLICT DO NOTHING`

// MessageClaim takes the processing claim of an unprocessed inbound message
// whose claim is free or expired. It returns no row when the message is
// processed, claimed by a live worker, or absent.
const MessageClaim = `UPDATE messages
SET claim_owner = $3, claim_until = now() + $4::bigint * interval '1 microsecond', claims = claims + 1
WHERE tenant_id = $1 AND message_id = $2 AND direction = 'in' AND processed_at IS NULL
	AND (claim_until IS NULL OR claim_until <= now())
RETURNING conversation_id, body, phone_number_id, seq, claims, coalesce(group_id, '')`

// MessageClaimState explains why MessageClaim returned nothing.
const MessageClaimState = `SELECT processed_at IS NOT NULL,
	coalesce(extract(epoch FROM claim_until - now()), 0)::float8
FROM messages WHERE tenant_id = $1 AND message_id = $2 AND direction = 'in'`

// MessageRelease gives a claim back early (the job will run again), fenced
// by owner and claim count so that a taken-over claim is left alone.
const MessageRelease = `UPDATE messages SET claim_owner = NULL, claim_until = NULL
WHERE tenant_id = $1 AND message_id = $2 AND claim_owner = $3 AND claims = $4 AND processed_at IS NULL`

// MessageMarkProcessed closes an inbound message, in the turn's transaction.
const MessageMarkProcessed = `UPDATE messages SET processed_at = now(), claim_owner = NULL, claim_until = NULL
WHERE tenant_id = $1 AND message_id = $2 AND direction = 'in'`

// MessageListConversation returns the latest $4 messages of a conversation
// up to and including seq $3, newest first.
const MessageListConversation = `SELECT direction, body FROM messages
WHERE tenant_id = $1 AND conversation_id = $2 AND seq <= $3
ORDER BY seq DESC LIMIT $4`

// ConversationGet reads a conversation's system context.
const ConversationGet = `SELECT customer_id, coalesce(invoice_ref, ''), coalesce(amount_due_cents, 0)
FROM conversations WHERE tenant_id = $1 AND conversation_id = $2`

// ConversationUpsert writes a conversation's system context (from the
// billing system).
const ConversationUpsert = `INSERT INTO conversations
	(tenant_id, conversation_id, customer_id, invoice_ref, amount_due_cents)
VALUES ($1, $2, $3, nullif($4, ''), nullif($5::bigint, 0))
ON CONFLICT (tenant_id, conversation_id) DO UPDATE
SET customer_id = excluded.customer_id, invoice_ref = excluded.invoice_ref,
	amount_due_cents = excluded.amount_due_cents, updated_at = now()`

// TurnInsert records a turn; it returns a row only for the first writer.
const TurnInsert = `INSERT INTO agent_turns
	(tenant_id, message_id, conversation_id, status, steps, error_code, tools, reply_ref, reply_kind)
VALUES ($1, $2, $3, $4, $5, nullif($6, ''), $7::jsonb, $8, $9)
ON CONFLICT DO NOTHING
RETURNING created_at`

// TurnSetReplyKey stores the frozen reply key, in the turn's transaction.
const TurnSetReplyKey = `UPDATE agent_turns SET reply_key = $3, updated_at = now()
WHERE tenant_id = $1 AND message_id = $2`

// TurnSetReplyStatus records what became of the reply. "sent" does not
// overwrite what a failed status webhook decided, which may have arrived
// before the send's own answer was recorded.
const TurnSetReplyStatus = `UPDATE agent_turns SET reply_status = $3, updated_at = now()
WHERE tenant_id = $1 AND message_id = $2 AND reply_status <> $3
	AND NOT ($3 = 'sent' AND reply_delivery IN ('failed', 'resending'))`

// TurnGet reads a turn.
const TurnGet = `SELECT conversation_id, status, steps, coalesce(error_code, ''), tools,
	coalesce(reply_ref, ''), coalesce(reply_key, ''), reply_status, created_at,
	reply_kind, coalesce(reply_wamid, ''), reply_delivery, reply_delivered_at, reply_read_at,
	coalesce(reply_error_code, 0), reply_resends
FROM agent_turns WHERE tenant_id = $1 AND message_id = $2`

// TurnSetReplySent records the provider's id of the reply that went out;
// a resend's id replaces the failed one.
const TurnSetReplySent = `UPDATE agent_turns SET reply_wamid = $3,
	reply_delivery = CASE WHEN reply_delivery = 'resending' THEN '' ELSE reply_delivery END, updated_at = now()
WHERE tenant_id = $1 AND message_id = $2 AND (reply_wamid IS NULL OR reply_delivery = 'resending')`

// TurnForStatusByKey finds the reply a status webhook is about by the key
// it carried in biz_opaque_callback_data, and locks it: statuses of one
// reply are merged one at a time.
const TurnForStatusByKey = `SELECT message_id, coalesce(reply_wamid, ''), reply_delivery, reply_resends, reply_status
FROM agent_turns WHERE tenant_id = $1 AND reply_key = $2
FOR UPDATE`

// TurnForStatusByWamid finds it by the provider's message id.
const TurnForStatusByWamid = `SELECT message_id, coalesce(reply_wamid, ''), reply_delivery, reply_resends, reply_status
FROM agent_turns WHERE tenant_id = $1 AND reply_wamid = $2
FOR UPDATE`

// TurnMergeStatus writes a merged delivery state: $3 the provider's
// message id, $4 the merged state, $5 the status time, $6 the error code
// (0: none), $7 the reply status, $8 how many resends.
const TurnMergeStatus = `UPDATE agent_turns SET reply_wamid = $3, reply_delivery = $4,
	reply_delivered_at = CASE WHEN $4 IN ('delivered', 'read') THEN coalesce(reply_delivered_at, $5) ELSE reply_delivered_at END,
	reply_read_at = CASE WHEN $4 = 'read' THEN coalesce(reply_read_at, $5) ELSE reply_read_at END,
	reply_error_code = coalesce(nullif($6::int, 0), reply_error_code),
	reply_status = $7, reply_resends = $8, updated_at = now()
WHERE tenant_id = $1 AND message_id = $2`

// ModelCallInsert writes one ledger row.
const ModelCallInsert = `INSERT INTO model_calls
	(tenant_id, source_ref, step, model, prompt_tokens, completion_tokens, replayed, answer)
VALUES ($1, $2, $3, $4, $5, $6, $7, $8::jsonb)
RETURNING id`

// ModelJournalInsert journals a call as the answer of (tenant, source, step)
// unless another call was journaled first.
const ModelJournalInsert = `INSERT INTO model_journal (tenant_id, source_ref, step, call_id)
VALUES ($1, $2, $3, $4)
ON CONFLICT DO NOTHING`

// ModelJournalGet reads the journaled answer of (tenant, source, step) and
// what it cost. The call is read in a lateral subquery (OFFSET 0 keeps it
// from being flattened into a join): one primary-key lookup after the
// journal's, where a join's plan made on new tables read the tenant's
// calls.
const ModelJournalGet = `SELECT c.id, c.model, c.prompt_tokens, c.completion_tokens, c.answer
FROM model_journal j
CROSS JOIN LATERAL (
	SELECT id, model, prompt_tokens, completion_tokens, answer FROM model_calls
	WHERE tenant_id = j.tenant_id AND id = j.call_id OFFSET 0) c
WHERE j.tenant_id = $1 AND j.source_ref = $2 AND j.step = $3`
