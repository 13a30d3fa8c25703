package agent

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/retrysafe/retrysafe/internal/tokens"
)

// The model ledger and journal (migration 003): model_calls has one row
// per call made or replayed and is never updated; model_journal maps
// (tenant, message, step) to the first recorded answer. Every statement is
// scoped by tenant, or by the tenants it is given.

// modelCallInsert writes one ledger row.
const modelCallInsert = `INSERT INTO model_calls
	(tenant_id, source_ref, step, model, prompt_tokens, completion_tokens, replayed, answer)
VALUES ($1, $2, $3, $4, $5, $6, $7, $8::jsonb)
RETURNING id`

// modelCallInsertAt writes one ledger row without an answer, dated $8
// (now when NULL).
const modelCallInsertAt = `INSERT INTO model_calls
	(tenant_id, source_ref, step, model, prompt_tokens, completion_tokens, replayed, created_at)
VALUES ($1, $2, $3, $4, $5, $6, $7, coalesce($8::timestamptz, now()))`

// modelJournalInsert journals a call as the answer of (tenant, source, step)
// unless another call was journaled first.
const modelJournalInsert = `INSERT INTO model_journal (tenant_id, source_ref, step, call_id)
VALUES ($1, $2, $3, $4)
ON CONFLICT DO NOTHING`

// modelJournalGet reads the journaled answer of (tenant, source, step) and
// what it cost. The call is read in a lateral subquery (OFFSET 0 keeps it
// from being flattened into a join): one primary-key lookup after the
// journal's, where a join's plan made on new tables read the tenant's
// calls.
const modelJournalGet = `SELECT c.id, c.model, c.prompt_tokens, c.completion_tokens, c.answer
FROM model_journal j
CROSS JOIN LATERAL (
	SELECT id, model, prompt_tokens, completion_tokens, answer FROM model_calls
	WHERE tenant_id = j.tenant_id AND id = j.call_id OFFSET 0) c
WHERE j.tenant_id = $1 AND j.source_ref = $2 AND j.step = $3`

// modelCallListBySource: the ledger rows of one message. model_calls has
// no index on source_ref; the measure index on created_at bounds the read
// to a window around $3 (when the message's intent was frozen).
const modelCallListBySource = `SELECT id, step, model, prompt_tokens, completion_tokens, replayed, created_at
FROM model_calls
WHERE created_at >= $3::timestamptz - interval '1 hour' AND created_at < $3::timestamptz + interval '7 days'
	AND tenant_id = $1 AND source_ref = $2
ORDER BY created_at, id`

// modelCallCount counts one message's calls made and replayed. It reads
// the tenant's calls (no index on source_ref): for tests and the lab.
const modelCallCount = `SELECT count(*) FILTER (WHERE NOT replayed), count(*) FILTER (WHERE replayed)
FROM model_calls WHERE tenant_id = $1 AND source_ref = $2`

// modelCallCountBySource counts every message's calls made and replayed:
// the restart test's census.
const modelCallCountBySource = `SELECT source_ref, count(*) FILTER (WHERE NOT replayed), count(*) FILTER (WHERE replayed)
FROM model_calls WHERE tenant_id = $1 GROUP BY source_ref`

// modelCallListModels names the models in the ledger of the tenants $3 in
// [$1, $2).
const modelCallListModels = `SELECT DISTINCT model FROM model_calls WHERE created_at >= $1 AND created_at < $2 AND tenant_id = ANY($3)`

// modelCallUsage ranks the real calls of each (tenant, message, step) in
// time order: every one after the first is a duplicate. Journal hits
// (replayed) are counted apart. One pass over the covering index
// model_calls_measure_idx, one sort.
const modelCallUsage = `
SELECT tenant_id, model, date_trunc('day', created_at AT TIME ZONE 'UTC') AS day,
       count(*) FILTER (WHERE NOT replayed),
       coalesce(sum(prompt_tokens) FILTER (WHERE NOT replayed), 0),
       coalesce(sum(completion_tokens) FILTER (WHERE NOT replayed), 0),
       count(*) FILTER (WHERE NOT replayed AND rank > 1),
       coalesce(sum(prompt_tokens) FILTER (WHERE NOT replayed AND rank > 1), 0),
       coalesce(sum(completion_tokens) FILTER (WHERE NOT replayed AND rank > 1), 0),
       count(*) FILTER (WHERE replayed),
       coalesce(sum(prompt_tokens) FILTER (WHERE replayed), 0),
       coalesce(sum(completion_tokens) FILTER (WHERE replayed), 0)
FROM (
    SELECT tenant_id, model, created_at, prompt_tokens, completion_tokens, replayed,
           row_number() OVER (PARTITION BY tenant_id, source_ref, step, replayed ORDER BY created_at, id) AS rank
    FROM model_calls
    WHERE created_at >= $1 AND created_at < $2 AND ($3 = '' OR tenant_id = $3)
) ranked
GROUP BY 1, 2, 3
ORDER BY 1, 2, 3`

// ledgerCall is one ledger row to write.
type ledgerCall struct {
	tenant, source     string
	step               int
	model              string
	prompt, completion int
	replayed           bool
	answer             []byte // JSON; nil for a replay (the original's row has it)
}

func insertModelCall(ctx context.Context, db DBTX, c ledgerCall) (int64, error) {
	var id int64
	var answer any
	if c.answer != nil {
		answer = c.answer
	}
	err := db.QueryRow(ctx, modelCallInsert, c.tenant, c.source, c.step, c.model, c.prompt, c.completion, c.replayed, answer).Scan(&id)
	return id, err
}

// RecordModelCall writes c as a ledger row of the tenant's message
// source, without an answer, dated c.At (now when zero): for tests and
// tools that plant a ledger to measure or show. The agent records its own
// calls as it makes them, with their answers.
func RecordModelCall(ctx context.Context, db DBTX, tenant, source string, c ModelCall) error {
	var at *time.Time
	if !c.At.IsZero() {
		at = &c.At
	}
	if _, err := db.Exec(ctx, modelCallInsertAt, tenant, source, c.Step, c.Model, c.Prompt, c.Completion, c.Replayed, at); err != nil {
		return fmt.Errorf("agent: record model call: %w", err)
	}
	return nil
}

func insertJournal(ctx context.Context, db DBTX, tenant, source string, step int, callID int64) error {
	_, err := db.Exec(ctx, modelJournalInsert, tenant, source, step, callID)
	return err
}

// getJournal reads the journal entry of (tenant, source, step) without
// touching the ledger; nil when there is none.
func getJournal(ctx context.Context, db DBTX, tenant, source string, step int) (*journalEntry, error) {
	var (
		e   journalEntry
		raw []byte
	)
	err := db.QueryRow(ctx, modelJournalGet, tenant, source, step).Scan(&e.id, &e.model, &e.prompt, &e.completion, &raw)
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("agent: journal: %w", err)
	}
	if e.answer, err = decodeAnswer(raw); err != nil {
		return nil, err
	}
	return &e, nil
}

// ModelCall is one row of the model ledger.
type ModelCall struct {
	ID                 int64
	Step               int
	Model              string
	Prompt, Completion int64 // tokens; a replay's are what the call would have cost
	Replayed           bool  // answered by the journal: no request was made
	At                 time.Time
}

// ModelCallsOf lists the ledger rows of the tenant's message source,
// oldest first, among those written from an hour before frozenAt (when
// the message froze an intent) to a week after.
func ModelCallsOf(ctx context.Context, db DBTX, tenant, source string, frozenAt time.Time) ([]ModelCall, error) {
	rows, err := db.Query(ctx, modelCallListBySource, tenant, source, frozenAt)
	if err != nil {
		return nil, fmt.Errorf("agent: model calls: %w", err)
	}
	out, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (ModelCall, error) {
		var m ModelCall
		err := row.Scan(&m.ID, &m.Step, &m.Model, &m.Prompt, &m.Completion, &m.Replayed, &m.At)
		return m, err
	})
	if err != nil {
		return nil, fmt.Errorf("agent: model calls: %w", err)
	}
	return out, nil
}

// CallCount is how many model calls one message made and how many the
// journal answered instead.
type CallCount struct{ Made, Replayed int }

// CountModelCalls counts the ledger rows of the tenant's message source.
func CountModelCalls(ctx context.Context, db DBTX, tenant, source string) (CallCount, error) {
	var c CallCount
	if err := db.QueryRow(ctx, modelCallCount, tenant, source).Scan(&c.Made, &c.Replayed); err != nil {
		return c, fmt.Errorf("agent: count model calls: %w", err)
	}
	return c, nil
}

// CountModelCallsBySource counts the ledger rows of each of the tenant's
// messages.
func CountModelCallsBySource(ctx context.Context, db DBTX, tenant string) (map[string]CallCount, error) {
	rows, err := db.Query(ctx, modelCallCountBySource, tenant)
	if err != nil {
		return nil, fmt.Errorf("agent: count model calls: %w", err)
	}
	defer rows.Close()
	out := map[string]CallCount{}
	for rows.Next() {
		var src string
		var c CallCount
		if err := rows.Scan(&src, &c.Made, &c.Replayed); err != nil {
			return nil, fmt.Errorf("agent: count model calls: %w", err)
		}
		out[src] = c
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("agent: count model calls: %w", err)
	}
	return out, nil
}

// LedgerModels names the models in the ledger rows of tenants written in
// [since, until).
func LedgerModels(ctx context.Context, db DBTX, since, until time.Time, tenants []string) ([]string, error) {
	rows, err := db.Query(ctx, modelCallListModels, since, until, tenants)
	if err != nil {
		return nil, fmt.Errorf("agent: ledger models: %w", err)
	}
	models, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		return nil, fmt.Errorf("agent: ledger models: %w", err)
	}
	return models, nil
}

// Ledger is the model ledger as internal/tokens measures it.
func Ledger(db DBTX) tokens.Ledger { return ledger{db} }

type ledger struct{ db DBTX }

// Usage implements tokens.Ledger.
func (l ledger) Usage(ctx context.Context, since, until time.Time, tenant string) ([]tokens.Row, error) {
	rows, err := l.db.Query(ctx, modelCallUsage, since, until, tenant)
	if err != nil {
		return nil, err
	}
	return pgx.CollectRows(rows, func(row pgx.CollectableRow) (tokens.Row, error) {
		var r tokens.Row
		err := row.Scan(&r.Tenant, &r.Model, &r.Day,
			&r.Made.Calls, &r.Made.PromptTokens, &r.Made.CompletionTokens,
			&r.Duplicate.Calls, &r.Duplicate.PromptTokens, &r.Duplicate.CompletionTokens,
			&r.Avoided.Calls, &r.Avoided.PromptTokens, &r.Avoided.CompletionTokens)
		r.Day = r.Day.UTC()
		return r, err
	})
}
