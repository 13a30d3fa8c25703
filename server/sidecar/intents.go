package sidecar

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"time"

	"github.com/retrysafe/retrysafe/derive"
	"github.com/retrysafe/retrysafe/executor"
	"github.com/retrysafe/retrysafe/intent"
)

// IntentView is the answer of GET /v1/intents/{intent_ref}/{action}.
type IntentView struct {
	Intent IntentJSON `json:"intent"`
	// Status summarizes the action under the current key: completed,
	// failed, review, in_flight (started, lease live), stalled (started,
	// lease expired: the next call or the reconciler takes it over), or
	// not_started (frozen, never claimed).
	Status string `json:"status"`
	// Action is the action row under the current key; null when not
	// started.
	Action *ActionJSON `json:"action"`
	// Revisions are the intent's amendments, oldest first.
	Revisions []RevisionJSON `json:"revisions"`
	// EarlierActions are the actions under the keys amendments replaced
	// (a charge completed before an operator's override, a definitive
	// failure before a fix), oldest first; amendments' tombstones are left
	// out.
	EarlierActions []*ActionJSON `json:"earlier_actions,omitempty"`
}

// IntentJSON is a frozen intent.
type IntentJSON struct {
	IntentRef      string            `json:"intent_ref"`
	Action         string            `json:"action"`
	RulesVersion   int               `json:"rules_version"`
	Payload        map[string]string `json:"payload"`
	IdempotencyKey string            `json:"idempotency_key"`
	SourceRef      string            `json:"source_ref,omitempty"`
	Revision       int               `json:"revision"`
	CreatedAt      time.Time         `json:"created_at"`
	UpdatedAt      time.Time         `json:"updated_at"`
}

// ActionJSON is an action row.
type ActionJSON struct {
	IdempotencyKey string                `json:"idempotency_key"`
	Status         string                `json:"status"`
	Attempt        int                   `json:"attempt"`
	LeaseOwner     string                `json:"lease_owner,omitempty"`
	LeaseUntil     *time.Time            `json:"lease_until,omitempty"`
	LeaseExpired   bool                  `json:"lease_expired,omitempty"`
	Response       json.RawMessage       `json:"response,omitempty"`
	Error          *executor.ToolFailure `json:"error,omitempty"`
	CreatedAt      time.Time             `json:"created_at"`
	UpdatedAt      time.Time             `json:"updated_at"`
	FinishedAt     *time.Time            `json:"finished_at,omitempty"`
}

// RevisionJSON is one amendment.
type RevisionJSON struct {
	Revision        int               `json:"revision"`
	OldRulesVersion int               `json:"old_rules_version"`
	OldPayload      map[string]string `json:"old_payload"`
	OldKey          string            `json:"old_key"`
	NewKey          string            `json:"new_key"`
	Reason          string            `json:"reason"`
	AmendedBy       string            `json:"amended_by,omitempty"`
	// Overrode is the status of the old key's action that an operator's
	// override went past ("completed"), empty when none.
	Overrode  string    `json:"overrode,omitempty"`
	CreatedAt time.Time `json:"created_at"`
}

func (s *Server) getIntent(w http.ResponseWriter, r *http.Request, tenant string) {
	note := noteFrom(r.Context())
	ref, action := r.PathValue("intent_ref"), r.PathValue("action")
	if _, ok := s.cfg.Tools.Tool(action); ok {
		note.action = action // only registered actions reach the log
	}
	ctx, cancel := context.WithTimeout(r.Context(), s.cfg.ExecuteTimeout)
	defer cancel()
	v, err := LoadIntent(ctx, s.cfg.DB, tenant, ref, action)
	switch {
	case errors.Is(err, intent.ErrNotFound), errors.Is(err, intent.ErrInvalid):
		// Another tenant's intent is indistinguishable from none.
		writeProblem(w, Problem{Type: ProblemNotFound, Title: "Intent not found", Status: http.StatusNotFound,
			Detail: "No intent is frozen under this intent_ref and action for your tenant."})
	case err != nil:
		note.err = err
		w.Header().Set("Retry-After", "1")
		writeProblem(w, Problem{Type: ProblemUnavailable, Title: "Database unavailable", Status: http.StatusServiceUnavailable})
	default:
		note.key, note.outcome = v.Intent.IdempotencyKey, v.Status
		writeJSON(w, http.StatusOK, v)
	}
}

// LoadIntent reads the tenant's intent (ref, action) with its action state
// and revisions. It returns intent.ErrNotFound when the tenant has no such
// intent. The CLI's inspect shares it.
func LoadIntent(ctx context.Context, db executor.DBTX, tenant, ref, action string) (*IntentView, error) {
	in, err := intent.Get(ctx, db, tenant, ref, action)
	if err != nil {
		return nil, err
	}
	return viewOf(ctx, db, in)
}

// LoadIntentByKey is LoadIntent for the tenant's intent frozen under key.
func LoadIntentByKey(ctx context.Context, db executor.DBTX, tenant, key string) (*IntentView, error) {
	in, err := intent.GetByKey(ctx, db, tenant, key)
	if err != nil {
		return nil, err
	}
	return viewOf(ctx, db, in)
}

func viewOf(ctx context.Context, db executor.DBTX, in *intent.Intent) (*IntentView, error) {
	v := &IntentView{
		Intent: IntentJSON{
			IntentRef: in.Ref, Action: in.Action, RulesVersion: in.Version, Payload: payloadMap(in.Payload),
			IdempotencyKey: in.Key, SourceRef: in.SourceRef, Revision: in.Revision,
			CreatedAt: in.CreatedAt, UpdatedAt: in.UpdatedAt,
		},
		Status:    "not_started",
		Revisions: []RevisionJSON{},
	}
	a, err := executor.Get(ctx, db, in.Tenant, in.Key)
	switch {
	case errors.Is(err, executor.ErrNotFound):
	case err != nil:
		return nil, err
	default:
		v.Action = ActionView(a)
		v.Status = a.Status
		if a.Status == executor.RowStarted {
			v.Status = string(executor.StatusInFlight)
			if a.Expired {
				v.Status = "stalled"
			}
		}
	}
	revs, err := intent.Revisions(ctx, db, in.Tenant, in.Ref, in.Action)
	if err != nil {
		return nil, err
	}
	for _, r := range revs {
		v.Revisions = append(v.Revisions, RevisionJSON{
			Revision: r.Revision, OldRulesVersion: r.OldVersion, OldPayload: payloadMap(r.OldPayload),
			OldKey: r.OldKey, NewKey: r.NewKey, Reason: r.Reason, AmendedBy: r.AmendedBy, Overrode: r.Overrode, CreatedAt: r.CreatedAt,
		})
		old, err := executor.Get(ctx, db, in.Tenant, r.OldKey)
		switch {
		case errors.Is(err, executor.ErrNotFound):
		case err != nil:
			return nil, err
		case old.Failure != nil && old.Failure.Class == intent.SupersededClass:
		default:
			v.EarlierActions = append(v.EarlierActions, ActionView(old))
		}
	}
	return v, nil
}

// ActionView converts an action row for JSON.
func ActionView(a *executor.Action) *ActionJSON {
	return &ActionJSON{
		IdempotencyKey: a.Key, Status: a.Status, Attempt: a.Attempt, LeaseOwner: a.LeaseOwner,
		LeaseUntil: a.LeaseUntil, LeaseExpired: a.Expired, Response: a.Response, Error: a.Failure,
		CreatedAt: a.CreatedAt, UpdatedAt: a.UpdatedAt, FinishedAt: a.FinishedAt,
	}
}

func payloadMap(p derive.Payload) map[string]string {
	m := p.Map()
	if m == nil {
		m = map[string]string{}
	}
	return m
}
