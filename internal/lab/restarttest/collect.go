package restarttest

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/retrysafe/retrysafe/agent"
	"github.com/retrysafe/retrysafe/executor/executortest"
)

// RunResult is what became of one run.
type RunResult struct {
	Index    int    `json:"index"`
	Scenario string `json:"scenario"`
	Invoice  string `json:"invoice"`
	KeyKind  string `json:"key_kind"`
	Messages int    `json:"messages"`
	// Deliveries: webhook posts answered 200 (duplicates included).
	Deliveries int `json:"deliveries"`
	// Hits: kills that found one of the run's jobs in flight.
	Hits int `json:"hits"`
	// Redeliveries: job runs beyond the first, inbox and reply jobs
	// together (River's attempt - 1); Rescues of them came from River's
	// rescuer after a kill. Snoozes: runs that found the message or the
	// action held by another worker and waited.
	Redeliveries int `json:"redeliveries"`
	Rescues      int `json:"rescues"`
	Snoozes      int `json:"snoozes"`
	// FrozenKey is the intent's key; Keys every distinct key seen for the
	// intent: frozen, recorded by each turn, sent to the PSP.
	FrozenKey   string   `json:"frozen_key"`
	Keys        []string `json:"keys"`
	KeysEqual   bool     `json:"keys_equal"`
	PSPRequests int      `json:"psp_requests"`
	Charges     int      `json:"charges"`
	// WrongAmount: charged at an amount other than the amount due (the
	// model misread it in the extraction that was frozen).
	WrongAmount bool `json:"wrong_amount,omitempty"`
	// Divergent: fields a later extraction spelled differently from the
	// frozen one after normalization (field names only).
	Divergent    []string `json:"divergent,omitempty"`
	Replies      int      `json:"replies"`
	ActionStatus string   `json:"action_status"`
	Stuck        int      `json:"stuck"`
	Lost         bool     `json:"lost"`
	LostWhy      string   `json:"lost_why,omitempty"`
	// ModelCalls are real (billed) calls; ModelReplayed answers read back
	// from the journal.
	ModelCalls    int `json:"model_calls"`
	ModelReplayed int `json:"model_replayed"`
	MaxModelCalls int `json:"max_model_calls_per_message"`
}

// collect reads what every run left: the database, the PSP's charges and
// request log, the WhatsApp stand-in's messages.
func (t *tester) collect(ctx context.Context) (*Report, error) {
	pool, tenant := t.stack.Pool, t.stack.Cfg.Tenant

	turns := map[string]agent.Turn{}
	all, err := agent.ListTurns(ctx, pool, tenant)
	if err != nil {
		return nil, fmt.Errorf("read turns: %w", err)
	}
	for _, tu := range all {
		turns[tu.MessageID] = *tu
	}

	stored := map[string]bool{}
	ids, err := agent.InboundIDs(ctx, pool, tenant)
	if err != nil {
		return nil, err
	}
	for _, id := range ids {
		stored[id] = true
	}

	type jobs struct{ redeliveries, rescues, snoozes int }
	jobStats := map[string]*jobs{}
	rows, err := pool.Query(ctx, `SELECT args->>'message_id', greatest(attempt - 1, 0),
			(SELECT count(*) FROM unnest(errors) e WHERE e->>'error' LIKE 'Stuck job rescued%'),
			coalesce((metadata->>'snoozes')::int, 0)
		FROM river_job WHERE kind = ANY($1)`, jobKinds)
	if err != nil {
		return nil, fmt.Errorf("read jobs: %w", err)
	}
	for rows.Next() {
		var id string
		var re, sn int
		var rs int64
		if err := rows.Scan(&id, &re, &rs, &sn); err != nil {
			rows.Close()
			return nil, err
		}
		j := jobStats[id]
		if j == nil {
			j = &jobs{}
			jobStats[id] = j
		}
		j.redeliveries += re
		j.rescues += int(rs)
		j.snoozes += sn
	}
	rows.Close()

	type frozen struct {
		key     string
		payload map[string]string
	}
	intents := map[string]frozen{}
	ins, err := executortest.Intents(ctx, pool, tenant, t.chargeAction())
	if err != nil {
		return nil, err
	}
	for _, in := range ins {
		intents[in.Ref] = frozen{key: in.Key, payload: in.Payload}
	}

	actionStatus := map[string]string{} // pix.charge key → status
	startedByRef := map[string]int{}    // intent_ref → actions left started (any action)
	actions, err := executortest.Actions(ctx, pool, executortest.Filter{Tenant: tenant})
	if err != nil {
		return nil, err
	}
	totalStarted := 0
	for _, a := range actions {
		if a.Action == t.chargeAction() {
			actionStatus[a.Key] = a.Status
		}
		if a.Status == "started" {
			startedByRef[a.Ref]++
			totalStarted++
		}
	}

	modelCalls, err := agent.CountModelCallsBySource(ctx, pool, tenant)
	if err != nil {
		return nil, err
	}

	charges, err := t.charges(ctx)
	if err != nil {
		return nil, fmt.Errorf("list the PSP's charges: %w", err)
	}
	chargesByRef := map[string][]int64{} // intent_ref → amounts
	chargeKeyRef := map[string]string{}  // idempotency key → intent_ref
	for _, c := range charges {
		ref := strings.TrimPrefix(c.Description, "retrysafe ")
		chargesByRef[ref] = append(chargesByRef[ref], c.AmountCents)
		chargeKeyRef[c.IdempotencyKey] = ref
	}
	reqs, err := t.stack.PSPRequests(ctx)
	if err != nil {
		return nil, fmt.Errorf("read the PSP's request log: %w", err)
	}
	replies, err := t.stack.Replies(ctx)
	if err != nil {
		return nil, fmt.Errorf("list the WhatsApp messages: %w", err)
	}
	repliesTo := map[string]int{}
	for _, r := range replies {
		repliesTo[strings.TrimPrefix(r.To, "+")]++
	}

	// Which intent each PSP request was about: its key is the intent's
	// frozen key, or the key of a charge made for the intent (the naive
	// control's random keys only show up that way). A request that is
	// neither carried a key no intent can explain.
	refByKey := map[string]string{}
	for ref, f := range intents {
		refByKey[f.key] = ref
	}
	reqKeys := map[string][]string{} // intent_ref → keys of its requests, in order
	unattributed, pspRequests := 0, len(reqs)
	for _, rq := range reqs {
		if rq.Method == "GET" && rq.IdempotencyKey == "" {
			continue // a listing (this test's own), not an attempt
		}
		if strings.Contains(rq.Path, "/devolucao/") {
			pspRequests--
			continue // a refund's: collectRefunds reads those
		}
		ref, ok := refByKey[t.requestKey(rq.IdempotencyKey, refByKey)]
		if !ok {
			ref, ok = chargeKeyRef[rq.IdempotencyKey]
		}
		if !ok {
			unattributed++
			continue
		}
		reqKeys[ref] = append(reqKeys[ref], t.requestKey(rq.IdempotencyKey, refByKey))
	}

	t.mu.Lock()
	defer t.mu.Unlock()
	results := make([]RunResult, len(t.runs))
	for i, r := range t.runs {
		res := RunResult{Index: r.Index, Scenario: r.Scenario, Invoice: r.Invoice, KeyKind: r.KeyKind, Messages: len(r.Messages),
			Deliveries: t.deliveries[r.Index], Hits: t.hits[r.Index]}
		keys := map[string]bool{}
		var why []string
		f, isFrozen := intents[r.Invoice]
		if isFrozen {
			res.FrozenKey = f.key
			keys[f.key] = true
			res.ActionStatus = actionStatus[f.key]
			if f.payload["amount"] != strconv.FormatInt(r.AmountCents, 10) {
				res.WrongAmount = true
			}
		} else {
			why = append(why, "no frozen intent")
		}
		for _, m := range r.Messages {
			if !stored[m.ID] {
				why = append(why, "message "+m.ID+" never stored")
				continue
			}
			tu, ok := turns[m.ID]
			switch {
			case !ok:
				why = append(why, "message "+m.ID+" has no turn")
			case tu.Status != agent.TurnAnswered:
				why = append(why, "message "+m.ID+" turn "+tu.Status)
			case tu.ReplyStatus != agent.ReplySent:
				why = append(why, "message "+m.ID+" reply "+tu.ReplyStatus)
			}
			for _, oc := range tu.Tools {
				if oc.Action == t.chargeAction() {
					keys[oc.Key] = true
					res.Divergent = append(res.Divergent, oc.Divergent...)
				}
			}
			if j := jobStats[m.ID]; j != nil {
				res.Redeliveries += j.redeliveries
				res.Rescues += j.rescues
				res.Snoozes += j.snoozes
			}
			c := modelCalls[m.ID]
			res.ModelCalls += c.Made
			res.ModelReplayed += c.Replayed
			res.MaxModelCalls = max(res.MaxModelCalls, c.Made)
			res.Stuck += startedByRef[m.ID+":reply"]
		}
		for _, k := range reqKeys[r.Invoice] {
			keys[k] = true
			res.PSPRequests++
		}
		res.Stuck += startedByRef[r.Invoice]
		for k := range keys {
			res.Keys = append(res.Keys, k)
		}
		res.KeysEqual = isFrozen && len(keys) == 1
		res.Charges = len(chargesByRef[r.Invoice])
		if res.Charges == 0 {
			why = append(why, "no charge")
		}
		res.Replies = repliesTo[r.WaID]
		res.Lost = len(why) > 0
		res.LostWhy = strings.Join(why, "; ")
		results[i] = res
	}
	rep := t.report(results, unattributed, pspRequests, totalStarted)
	return rep, nil
}

// elapsed rounds a duration for people.
func elapsed(d time.Duration) string { return d.Round(100 * time.Millisecond).String() }
