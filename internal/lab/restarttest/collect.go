package restarttest

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/retrysafe/retrysafe/agent"
	"github.com/retrysafe/retrysafe/executor/executortest"
	"github.com/retrysafe/retrysafe/internal/lab/harness"
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
	l, err := t.readLedger(ctx)
	if err != nil {
		return nil, err
	}
	st, err := t.readStandIns(ctx)
	if err != nil {
		return nil, err
	}
	reqKeys, unattributed, pspRequests := t.attribute(l, st)

	t.mu.Lock()
	defer t.mu.Unlock()
	results := make([]RunResult, len(t.runs))
	for i, r := range t.runs {
		results[i] = t.runResult(r, l, st, reqKeys[r.Invoice])
	}
	rep := t.report(results, unattributed, pspRequests, l.totalStarted)
	return rep, nil
}

// runLedger is what the database holds about the runs.
type runLedger struct {
	turns        map[string]agent.Turn      // message id → its turn
	stored       map[string]bool            // inbound message ids stored
	jobs         map[string]*jobStats       // message id → its River jobs
	intents      map[string]frozenIntent    // intent ref → the frozen charge
	actionStatus map[string]string          // charge key → status
	startedByRef map[string]int             // intent ref → actions left started (any action)
	totalStarted int                        // actions left started
	modelCalls   map[string]agent.CallCount // message id → its model calls
}

// jobStats are a message's River jobs: runs beyond the first, those the
// rescuer brought back, snoozes.
type jobStats struct{ redeliveries, rescues, snoozes int }

// frozenIntent is a run's frozen charge: its key and payload.
type frozenIntent struct {
	key     string
	payload map[string]string
}

// readLedger reads the runs' turns, messages, jobs, intents, actions and
// model calls through their owners (River's jobs as River stores them).
func (t *tester) readLedger(ctx context.Context) (*runLedger, error) {
	pool, tenant := t.stack.Pool, t.stack.Cfg.Tenant
	l := &runLedger{turns: map[string]agent.Turn{}, stored: map[string]bool{}, intents: map[string]frozenIntent{},
		actionStatus: map[string]string{}, startedByRef: map[string]int{}}
	all, err := agent.ListTurns(ctx, pool, tenant)
	if err != nil {
		return nil, fmt.Errorf("read turns: %w", err)
	}
	for _, tu := range all {
		l.turns[tu.MessageID] = *tu
	}
	ids, err := agent.InboundIDs(ctx, pool, tenant)
	if err != nil {
		return nil, err
	}
	for _, id := range ids {
		l.stored[id] = true
	}
	if l.jobs, err = t.readJobs(ctx); err != nil {
		return nil, err
	}
	ins, err := executortest.Intents(ctx, pool, tenant, t.chargeAction())
	if err != nil {
		return nil, err
	}
	for _, in := range ins {
		l.intents[in.Ref] = frozenIntent{key: in.Key, payload: in.Payload}
	}
	actions, err := executortest.Actions(ctx, pool, executortest.Filter{Tenant: tenant})
	if err != nil {
		return nil, err
	}
	for _, a := range actions {
		if a.Action == t.chargeAction() {
			l.actionStatus[a.Key] = a.Status
		}
		if a.Status == "started" {
			l.startedByRef[a.Ref]++
			l.totalStarted++
		}
	}
	if l.modelCalls, err = agent.CountModelCallsBySource(ctx, pool, tenant); err != nil {
		return nil, err
	}
	return l, nil
}

// readJobs reads the River jobs of the runs' messages, by message id.
func (t *tester) readJobs(ctx context.Context) (map[string]*jobStats, error) {
	jobs := map[string]*jobStats{}
	rows, err := t.stack.Pool.Query(ctx, `SELECT args->>'message_id', greatest(attempt - 1, 0),
			(SELECT count(*) FROM unnest(errors) e WHERE e->>'error' LIKE 'Stuck job rescued%'),
			coalesce((metadata->>'snoozes')::int, 0)
		FROM river_job WHERE kind = ANY($1)`, jobKinds)
	if err != nil {
		return nil, fmt.Errorf("read jobs: %w", err)
	}
	defer rows.Close()
	for rows.Next() {
		var id string
		var re, sn int
		var rs int64
		if err := rows.Scan(&id, &re, &rs, &sn); err != nil {
			return nil, err
		}
		j := jobs[id]
		if j == nil {
			j = &jobStats{}
			jobs[id] = j
		}
		j.redeliveries += re
		j.rescues += int(rs)
		j.snoozes += sn
	}
	return jobs, nil
}

// standIns is what the PSP and the WhatsApp stand-in say about the runs.
type standIns struct {
	chargesByRef map[string][]int64 // intent ref → amounts
	chargeKeyRef map[string]string  // idempotency key → intent ref
	reqs         []harness.PSPRequest
	repliesTo    map[string]int // wa_id → replies sent
}

// readStandIns reads the PSP's charges and request log and the replies
// WhatsApp was sent.
func (t *tester) readStandIns(ctx context.Context) (*standIns, error) {
	st := &standIns{chargesByRef: map[string][]int64{}, chargeKeyRef: map[string]string{}, repliesTo: map[string]int{}}
	charges, err := t.charges(ctx)
	if err != nil {
		return nil, fmt.Errorf("list the PSP's charges: %w", err)
	}
	for _, c := range charges {
		ref := strings.TrimPrefix(c.Description, "retrysafe ")
		st.chargesByRef[ref] = append(st.chargesByRef[ref], c.AmountCents)
		st.chargeKeyRef[c.IdempotencyKey] = ref
	}
	if st.reqs, err = t.stack.PSPRequests(ctx); err != nil {
		return nil, fmt.Errorf("read the PSP's request log: %w", err)
	}
	replies, err := t.stack.Replies(ctx)
	if err != nil {
		return nil, fmt.Errorf("list the WhatsApp messages: %w", err)
	}
	for _, r := range replies {
		st.repliesTo[strings.TrimPrefix(r.To, "+")]++
	}
	return st, nil
}

// attribute says which intent each PSP request was about: its key is the
// intent's frozen key, or the key of a charge made for the intent (the
// naive control's random keys only show up that way). A request that is
// neither carried a key no intent can explain. It returns the keys of
// each intent's requests, in order, the unattributed requests, and the
// charge requests (refunds' are collectRefunds').
func (t *tester) attribute(l *runLedger, st *standIns) (reqKeys map[string][]string, unattributed, pspRequests int) {
	refByKey := map[string]string{}
	for ref, f := range l.intents {
		refByKey[f.key] = ref
	}
	reqKeys = map[string][]string{}
	pspRequests = len(st.reqs)
	for _, rq := range st.reqs {
		if rq.Method == "GET" && rq.IdempotencyKey == "" {
			continue // a listing (this test's own), not an attempt
		}
		if strings.Contains(rq.Path, "/devolucao/") {
			pspRequests--
			continue // a refund's: collectRefunds reads those
		}
		ref, ok := refByKey[t.requestKey(rq.IdempotencyKey, refByKey)]
		if !ok {
			ref, ok = st.chargeKeyRef[rq.IdempotencyKey]
		}
		if !ok {
			unattributed++
			continue
		}
		reqKeys[ref] = append(reqKeys[ref], t.requestKey(rq.IdempotencyKey, refByKey))
	}
	return reqKeys, unattributed, pspRequests
}

// runResult judges run r by what the ledger and the stand-ins hold, and
// reqKeys, the keys of its intent's requests at the PSP. Called with t.mu
// held.
func (t *tester) runResult(r *RunPlan, l *runLedger, st *standIns, reqKeys []string) RunResult {
	res := RunResult{Index: r.Index, Scenario: r.Scenario, Invoice: r.Invoice, KeyKind: r.KeyKind, Messages: len(r.Messages),
		Deliveries: t.deliveries[r.Index], Hits: t.hits[r.Index]}
	keys := map[string]bool{}
	var why []string
	f, isFrozen := l.intents[r.Invoice]
	if isFrozen {
		res.FrozenKey = f.key
		keys[f.key] = true
		res.ActionStatus = l.actionStatus[f.key]
		if f.payload["amount"] != strconv.FormatInt(r.AmountCents, 10) {
			res.WrongAmount = true
		}
	} else {
		why = append(why, "no frozen intent")
	}
	for _, m := range r.Messages {
		if !l.stored[m.ID] {
			why = append(why, "message "+m.ID+" never stored")
			continue
		}
		why = append(why, t.addMessage(&res, keys, l, m.ID)...)
	}
	for _, k := range reqKeys {
		keys[k] = true
		res.PSPRequests++
	}
	res.Stuck += l.startedByRef[r.Invoice]
	for k := range keys {
		res.Keys = append(res.Keys, k)
	}
	res.KeysEqual = isFrozen && len(keys) == 1
	res.Charges = len(st.chargesByRef[r.Invoice])
	if res.Charges == 0 {
		why = append(why, "no charge")
	}
	res.Replies = st.repliesTo[r.WaID]
	res.Lost = len(why) > 0
	res.LostWhy = strings.Join(why, "; ")
	return res
}

// addMessage adds a stored message's turn, jobs and model calls to res,
// and the keys its tool calls carried to keys; it returns why the message
// was not answered, if it was not.
func (t *tester) addMessage(res *RunResult, keys map[string]bool, l *runLedger, id string) []string {
	var why []string
	tu, ok := l.turns[id]
	switch {
	case !ok:
		why = append(why, "message "+id+" has no turn")
	case tu.Status != agent.TurnAnswered:
		why = append(why, "message "+id+" turn "+tu.Status)
	case tu.ReplyStatus != agent.ReplySent:
		why = append(why, "message "+id+" reply "+tu.ReplyStatus)
	}
	for _, oc := range tu.Tools {
		if oc.Action == t.chargeAction() {
			keys[oc.Key] = true
			res.Divergent = append(res.Divergent, oc.Divergent...)
		}
	}
	if j := l.jobs[id]; j != nil {
		res.Redeliveries += j.redeliveries
		res.Rescues += j.rescues
		res.Snoozes += j.snoozes
	}
	c := l.modelCalls[id]
	res.ModelCalls += c.Made
	res.ModelReplayed += c.Replayed
	res.MaxModelCalls = max(res.MaxModelCalls, c.Made)
	res.Stuck += l.startedByRef[id+":reply"]
	return why
}

// elapsed rounds a duration for people.
func elapsed(d time.Duration) string { return d.Round(100 * time.Millisecond).String() }
