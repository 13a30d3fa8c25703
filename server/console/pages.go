package console

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"html/template"
	"net/http"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/govalues/decimal"
	"github.com/jackc/pgx/v5"

	"github.com/retrysafe/retrysafe/agent"
	"github.com/retrysafe/retrysafe/derive"
	"github.com/retrysafe/retrysafe/executor"
	"github.com/retrysafe/retrysafe/intent"
	"github.com/retrysafe/retrysafe/internal/tokens"
	"github.com/retrysafe/retrysafe/tools"
	"github.com/retrysafe/retrysafe/webhook"
)

var errNotFound = errors.New("console: not found")

// page is what every template gets.
type page struct {
	Op    *session
	Title string
	D     any
}

func (h *Handler) render(w http.ResponseWriter, r *http.Request, s *session, name string, d any) {
	var b bytes.Buffer
	title := map[string]string{"signin": "Sign in", "queue": "Review queue", "intent": "Intent", "confirm": "Confirm settlement",
		"search": "Search", "now": "Now", "error": "Error"}[name]
	if err := h.tmpl.ExecuteTemplate(&b, name, page{Op: s, Title: title, D: d}); err != nil {
		h.cfg.Logger.Error("console: render", "page", name, "err", err)
		http.Error(w, "console: page failed to render", http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	_, _ = w.Write(b.Bytes())
}

func (h *Handler) fail(w http.ResponseWriter, r *http.Request, s *session, status int, msg string) {
	w.WriteHeader(status)
	h.render(w, r, s, "error", map[string]any{"Status": status, "Message": msg})
}

func (h *Handler) dbFail(w http.ResponseWriter, r *http.Request, s *session, what string, err error) {
	h.cfg.Logger.Error("console: "+what, "operator", s.Name, "err", err)
	h.fail(w, r, s, http.StatusServiceUnavailable, "The database did not answer ("+what+"). Nothing was changed.")
}

// --- the review queue ---

type lookupView struct {
	Operator       string          `json:"-"`
	At             time.Time       `json:"-"`
	Outcome        string          `json:"outcome"` // found, not_found, unsupported, error
	Reference      string          `json:"reference,omitempty"`
	ProviderStatus string          `json:"provider_status,omitempty"`
	Message        string          `json:"message,omitempty"`
	Response       json.RawMessage `json:"response,omitempty"`
}

type queueItem struct {
	Tenant, Key, Ref, Action string
	Attempt                  int
	Failure                  *executor.ToolFailure
	CreatedAt, UpdatedAt     time.Time
	Age                      time.Duration
	Lookup                   *lookupView
	CanLookup                bool
}

type tenantQueue struct {
	Tenant string
	Items  []queueItem
}

// loadQueue reads the tenant's actions in review (the executor's), then
// the console's latest lookup of each key.
func (h *Handler) loadQueue(ctx context.Context, tenant string) ([]queueItem, error) {
	waiting, err := executor.ListReview(ctx, h.cfg.DB, tenant, h.cfg.QueueLimit)
	if err != nil {
		return nil, err
	}
	items := make([]queueItem, len(waiting))
	keys := make([]string, len(waiting))
	for i, wa := range waiting {
		a := wa.Row
		items[i] = queueItem{Tenant: a.Tenant, Key: a.Key, Ref: a.Ref, Action: a.Action, Attempt: a.Attempt,
			Failure: a.Failure, CreatedAt: a.CreatedAt, UpdatedAt: a.UpdatedAt, Age: wa.Age}
		keys[i] = a.Key
		if t, ok := h.cfg.Tools.Tool(a.Action); ok {
			_, items[i].CanLookup = tools.CanLookup(t)
		}
	}
	if len(keys) == 0 {
		return items, nil
	}
	rows, err := h.cfg.DB.Query(ctx, auditLatestLookupSQL, tenant, keys)
	if err != nil {
		return nil, err
	}
	var (
		pos    int64
		op     string
		detail []byte
		at     time.Time
	)
	_, err = pgx.ForEachRow(rows, []any{&pos, &op, &detail, &at}, func() error {
		if pos < 1 || pos > int64(len(items)) {
			return fmt.Errorf("console: lookup position %d out of range", pos)
		}
		var lv lookupView
		_ = json.Unmarshal(detail, &lv)
		lv.Operator, lv.At, lv.Response = op, at, nil
		items[pos-1].Lookup = &lv
		return nil
	})
	return items, err
}

func (h *Handler) queue(w http.ResponseWriter, r *http.Request, s *session) {
	tenants := s.Tenants
	if t := r.URL.Query().Get("tenant"); t != "" {
		if !s.can(t) {
			h.fail(w, r, s, http.StatusForbidden, "That tenant is not one of yours.")
			return
		}
		tenants = []string{t}
	}
	var qs []tenantQueue
	for _, t := range tenants {
		items, err := h.loadQueue(r.Context(), t)
		if err != nil {
			h.dbFail(w, r, s, "review queue", err)
			return
		}
		qs = append(qs, tenantQueue{Tenant: t, Items: items})
	}
	h.refreshLookups(r.Context(), s, qs)
	h.render(w, r, s, "queue", map[string]any{"Queues": qs, "Back": r.URL.RequestURI()})
}

// refreshLookups asks the provider about the queue's oldest actions whose
// latest lookup is stale (Config.FreshLookup), and records each answer as
// the button would, so that the queue shows what the provider says now.
func (h *Handler) refreshLookups(ctx context.Context, s *session, qs []tenantQueue) {
	if h.cfg.FreshLookup < 0 {
		return
	}
	const most, parallel = 8, 4
	var stale []*queueItem
	for i := range qs {
		for j := range qs[i].Items {
			it := &qs[i].Items[j]
			if it.CanLookup && (it.Lookup == nil || time.Since(it.Lookup.At) > h.cfg.FreshLookup) && len(stale) < most {
				stale = append(stale, it)
			}
		}
	}
	sem := make(chan struct{}, parallel)
	var wg sync.WaitGroup
	for _, it := range stale {
		wg.Go(func() {
			sem <- struct{}{}
			defer func() { <-sem }()
			lctx, cancel := context.WithTimeout(ctx, min(3*time.Second, h.cfg.LookupTimeout))
			defer cancel()
			lv := h.ask(lctx, &executor.Action{Tenant: it.Tenant, Key: it.Key, Action: it.Action})
			detail, _ := json.Marshal(lv)
			var at time.Time
			if err := h.cfg.DB.QueryRow(ctx, auditInsertSQL+` RETURNING created_at`, it.Tenant, it.Key, s.Name, "lookup", detail).Scan(&at); err != nil {
				h.cfg.Logger.Error("console: recording a lookup", "operator", s.Name, "tenant", it.Tenant, "key", it.Key, "err", err)
				return
			}
			h.cfg.Logger.Info("console: provider lookup", "operator", s.Name, "tenant", it.Tenant, "action", it.Action, "key", it.Key, "outcome", lv.Outcome, "fresh", true)
			lv.Operator, lv.At, lv.Response = s.Name, at, nil
			it.Lookup = &lv
		})
	}
	wg.Wait()
}

// --- an intent's story ---

type event struct {
	At   time.Time
	What string
	Who  string
}

type revisionView struct {
	intent.Revision
	Fields []fieldView
}

type auditRow struct {
	ID       int64
	Operator string
	Kind     string
	Detail   json.RawMessage
	At       time.Time
}

// The story's rows of the webhook's and the agent's tables, as their
// owners read them.
type (
	effectRow    = webhook.OrderEffect
	turnRow      = agent.KeyTurn
	modelCallRow = agent.ModelCall
)

type storyView struct {
	Tenant, Key   string
	In            *intent.Intent
	Fields        []fieldView
	Revealed      bool
	Action        *executor.Action
	Reference     string
	Response      string
	Revisions     []revisionView
	Timeline      []event
	Lookup        *lookupView
	CanLookup     bool
	Requests      []ProviderRequest
	RequestsOn    bool
	RequestsErr   string
	Effects       []effectRow
	Turns         []turnRow
	ModelCalls    []modelCallRow
	PromptTotal   int64
	CompleteTotal int64
	Settled       bool
	Back          string
	HasSourceRef  bool
	UnknownSchema bool
	ActionMissing bool
}

func (h *Handler) loadStory(ctx context.Context, tenant, key string, revealed bool) (*storyView, error) {
	db := h.cfg.DB
	v := &storyView{Tenant: tenant, Key: key, Revealed: revealed}
	action, ref, err := h.storyIntent(ctx, v, tenant, key, revealed)
	if err != nil {
		return nil, err
	}
	// What the console did with this key.
	rows, err := db.Query(ctx, auditByKeySQL, tenant, key)
	if err != nil {
		return nil, err
	}
	audit, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (auditRow, error) {
		var ar auditRow
		err := row.Scan(&ar.ID, &ar.Operator, &ar.Kind, &ar.Detail, &ar.At)
		return ar, err
	})
	if err != nil {
		return nil, err
	}
	// Webhook effects and their notifications (outbox).
	if v.Effects, err = webhook.EffectsOfOrder(ctx, db, tenant, ref, v.Reference); err != nil {
		return nil, err
	}
	// Agent turns whose tool calls carried the key, and their replies.
	src := ""
	if v.In != nil {
		src = v.In.SourceRef
	}
	if v.Turns, err = agent.TurnsOfKey(ctx, db, tenant, key, src); err != nil {
		return nil, err
	}
	// Model calls behind it: the ledger rows of the message that froze it.
	if src != "" {
		if v.ModelCalls, err = agent.ModelCallsOf(ctx, db, tenant, src, v.In.CreatedAt); err != nil {
			return nil, err
		}
		for _, m := range v.ModelCalls {
			v.PromptTotal += m.Prompt
			v.CompleteTotal += m.Completion
		}
	}
	h.storyRequests(ctx, v, action, key)
	v.Timeline = h.timeline(v, audit)
	return v, nil
}

// storyFields masks the intent's fields and the provider's response
// into v, and says whether its tool can be asked about the key.
func (h *Handler) storyFields(v *storyView, a *executor.Action, revealed bool) (action, ref string) {
	var pl derive.Payload
	if v.In != nil {
		pl = v.In.Payload
		action, ref = v.In.Action, v.In.Ref
		v.Fields = h.maskPayload(action, v.In.Payload, revealed)
		_, known := h.personalFields(action)
		v.UnknownSchema = !known
		v.HasSourceRef = v.In.SourceRef != ""
	} else {
		action, ref = a.Action, a.Ref
	}
	if t, ok := h.cfg.Tools.Tool(action); ok {
		_, v.CanLookup = tools.CanLookup(t)
	}
	if a != nil {
		v.Reference = reference(a.Response)
		v.Response = h.maskJSON(action, pl, a.Response, revealed)
	}
	return action, ref
}

// --- search ---

type hit struct {
	Ref, Action, Key, Status string
	At                       time.Time
	Why                      string
}

func (h *Handler) search(w http.ResponseWriter, r *http.Request, s *session) {
	q := strings.TrimSpace(r.URL.Query().Get("q"))
	tenant := r.URL.Query().Get("tenant")
	if tenant == "" {
		tenant = s.Tenants[0]
	}
	if !s.can(tenant) {
		h.fail(w, r, s, http.StatusForbidden, "That tenant is not one of yours.")
		return
	}
	d := map[string]any{"Tenant": tenant, "Q": q}
	if q == "" || len(q) > 255 {
		h.render(w, r, s, "search", d)
		return
	}
	var hits []hit
	for _, st := range []struct {
		find func(context.Context, executor.DBTX, string, string) ([]executor.Summary, error)
		why  string
	}{
		{executor.ListByKey, "key"}, {executor.ListByRef, "intent ref"}, {executor.ListByReference, "provider reference"},
	} {
		got, err := st.find(r.Context(), h.cfg.DB, tenant, q)
		if err != nil {
			h.dbFail(w, r, s, "search", err)
			return
		}
		for _, g := range got {
			if !slices.ContainsFunc(hits, func(o hit) bool { return o.Key == g.Key }) {
				hits = append(hits, hit{Ref: g.Ref, Action: g.Action, Key: g.Key, Status: g.Status, At: g.CreatedAt, Why: st.why})
			}
		}
	}
	if len(hits) == 1 {
		http.Redirect(w, r, intentURL(tenant, hits[0].Key), http.StatusSeeOther)
		return
	}
	d["Hits"] = hits
	d["Searched"] = true
	h.render(w, r, s, "search", d)
}

// --- now ---

type count struct {
	Name      string
	Hour, Day int64
	Recorded  bool
	Note      string
}

type tenantNow struct {
	Tenant string
	Counts []count
}

func (h *Handler) now(w http.ResponseWriter, r *http.Request, s *session) {
	ctx := r.Context()
	var out []tenantNow
	for _, t := range s.Tenants {
		c, err := executor.CountRecent(ctx, h.cfg.DB, t)
		if err != nil {
			h.dbFail(w, r, s, "counts", err)
			return
		}
		a := [13]int64{c.ClaimedHour, c.ClaimedDay, c.CompletedHour, c.CompletedDay, c.FailedHour, c.FailedDay,
			c.RetriedHour, c.RetriedDay, c.ReviewHour, c.ReviewDay, c.InReview, c.ResolvedHour, c.ResolvedDay}
		ag, err := agent.CountTools(ctx, h.cfg.DB, t)
		if err != nil {
			h.dbFail(w, r, s, "counts", err)
			return
		}
		var wh [2]int64
		if wh[0], wh[1], err = webhook.CountDuplicates(ctx, h.cfg.DB, t); err != nil {
			h.dbFail(w, r, s, "counts", err)
			return
		}
		out = append(out, tenantNow{Tenant: t, Counts: []count{
			{Name: "executions (actions first claimed)", Hour: a[0], Day: a[1], Recorded: true},
			{Name: "completed", Hour: a[2], Day: a[3], Recorded: true},
			{Name: "failed", Hour: a[4], Day: a[5], Recorded: true},
			{Name: "replays", Hour: ag.ReplayedHour, Day: ag.ReplayedDay, Recorded: true, Note: "agent turns only; the sidecar's and library calls' replays are counted in /metrics (retrysafe_replays_total), not stored"},
			{Name: "divergent re-extractions", Hour: ag.DivergentHour, Day: ag.DivergentDay, Recorded: true, Note: "agent turns only; all of them: /metrics retrysafe_divergences_total"},
			{Name: "in-flight conflicts", Note: "not recorded in the database: /metrics retrysafe_in_flight_conflicts_total"},
			{Name: "takeovers", Note: "not recorded in the database: /metrics retrysafe_takeovers_total"},
			{Name: "actions that needed more than one attempt", Hour: a[6], Day: a[7], Recorded: true, Note: "retries and takeovers together, by last update"},
			{Name: "put in review (still in review)", Hour: a[8], Day: a[9], Recorded: true, Note: fmt.Sprintf("%d in review now; once settled, when an action went to review is not kept", a[10])},
			{Name: "settled by an operator", Hour: a[11], Day: a[12], Recorded: true},
			{Name: "duplicate payment webhooks absorbed", Hour: wh[0], Day: wh[1], Recorded: true},
		}})
	}
	chart, err := h.spend(ctx, s.Tenants)
	if err != nil {
		h.dbFail(w, r, s, "token spend", err)
		return
	}
	h.render(w, r, s, "now", map[string]any{"Tenants": out, "Chart": chart})
}

type spendDay struct {
	Day                time.Time
	Duplicate, Avoided tokens.Usage
	DupCost, AvCost    decimal.Decimal
}

type spendView struct {
	Days              []spendDay
	DupSVG, AvSVG     template.HTML
	Defaulted         []string
	Currency          string
	DupTotal, AvTotal decimal.Decimal
	DefaultIn, DefOut decimal.Decimal
}

// spend measures the model ledger per day with internal/tokens (the figures
// of `retrysafe tokens measure`), one day and tenant at a time, and draws
// duplicate and avoided spend with its chart.
func (h *Handler) spend(ctx context.Context, tenants []string) (*spendView, error) {
	n := h.cfg.ChartDays
	today := time.Now().UTC().Truncate(24 * time.Hour)
	since := today.AddDate(0, 0, -(n - 1))
	until := today.AddDate(0, 0, 1)
	models, err := agent.LedgerModels(ctx, h.cfg.DB, since, until, tenants)
	if err != nil {
		return nil, err
	}
	prices := map[string]tokens.Price{}
	for m, p := range h.cfg.Prices {
		prices[m] = p
	}
	v := &spendView{Currency: h.cfg.Currency, DefaultIn: h.cfg.DefaultPrice.InputPer1K, DefOut: h.cfg.DefaultPrice.OutputPer1K}
	for _, m := range models {
		if _, ok := prices[m]; !ok {
			prices[m] = *h.cfg.DefaultPrice
			v.Defaulted = append(v.Defaulted, m)
		}
	}
	var dupSeries, avSeries tokens.Series
	for d := since; d.Before(until); d = d.AddDate(0, 0, 1) {
		day := spendDay{Day: d}
		for _, t := range tenants {
			rep, err := tokens.Measure(ctx, agent.Ledger(h.cfg.DB), tokens.MeasureParams{Since: d, Until: d.AddDate(0, 0, 1), Tenant: t, Prices: prices})
			if err != nil {
				return nil, err
			}
			day.Duplicate.Calls += rep.Total.Duplicate.Calls
			day.Duplicate.PromptTokens += rep.Total.Duplicate.PromptTokens
			day.Duplicate.CompletionTokens += rep.Total.Duplicate.CompletionTokens
			day.Avoided.Calls += rep.Total.Avoided.Calls
			day.Avoided.PromptTokens += rep.Total.Avoided.PromptTokens
			day.Avoided.CompletionTokens += rep.Total.Avoided.CompletionTokens
			day.DupCost, _ = day.DupCost.Add(rep.Total.DuplicateCost)
			day.AvCost, _ = day.AvCost.Add(rep.Total.AvoidedCost)
		}
		v.DupTotal, _ = v.DupTotal.Add(day.DupCost)
		v.AvTotal, _ = v.AvTotal.Add(day.AvCost)
		v.Days = append(v.Days, day)
		label := d.Format("01-02")
		dupSeries.Labels, dupSeries.Values = append(dupSeries.Labels, label), append(dupSeries.Values, day.DupCost)
		avSeries.Labels, avSeries.Values = append(avSeries.Labels, label), append(avSeries.Values, day.AvCost)
	}
	loc := tokens.Locales["en-US"]
	for _, c := range []struct {
		s     *tokens.Series
		title string
		out   *template.HTML
	}{
		{&dupSeries, "Duplicate model spend per day (paid twice)", &v.DupSVG},
		{&avSeries, "Model spend avoided per day (journal replays)", &v.AvSVG},
	} {
		c.s.Title, c.s.XLabel, c.s.YLabel, c.s.Bars = c.title, "day (UTC)", h.cfg.Currency, true
		var b bytes.Buffer
		if err := tokens.WriteSVG(&b, *c.s, loc); err != nil {
			return nil, err
		}
		// WriteSVG escapes every label it writes.
		*c.out = template.HTML(b.String()) //nolint:gosec // generated markup, escaped labels
	}
	return v, nil
}
