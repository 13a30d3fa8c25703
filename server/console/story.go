package console

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"time"

	"github.com/retrysafe/retrysafe/derive"
	"github.com/retrysafe/retrysafe/executor"
	"github.com/retrysafe/retrysafe/intent"
)

// timeline orders what the rows record about the action. The actions row
// keeps its first claim, its attempt count, its last failure and how it
// ended; the times of each attempt and takeover are not stored (the page
// says so), only counted.
func (h *Handler) timeline(v *storyView, audit []auditRow) []event {
	var ev []event
	if v.In != nil {
		what := "intent frozen"
		if v.In.SourceRef != "" {
			what += " (from message " + v.In.SourceRef + ")"
		}
		ev = append(ev, event{At: v.In.CreatedAt, What: what})
	}
	for _, rv := range v.Revisions {
		ev = append(ev, event{At: rv.CreatedAt, What: fmt.Sprintf("amended (revision %d): key %s → %s: %s", rv.Revision.Revision, short(rv.OldKey), short(rv.NewKey), rv.Reason), Who: rv.AmendedBy})
	}
	if a := v.Action; a != nil {
		ev = append(ev, event{At: a.CreatedAt, What: "claimed: attempt 1"})
		if a.Attempt > 1 {
			ev = append(ev, event{At: a.UpdatedAt, What: fmt.Sprintf("claimed %d times in all: %d retries or takeovers (their times are not recorded)", a.Attempt, a.Attempt-1)})
		}
		if f := a.Failure; f != nil && f.Resolution == nil && a.Status != executor.RowCompleted {
			ev = append(ev, event{At: a.UpdatedAt, What: fmt.Sprintf("last failure at attempt %d: %s %s %s", f.Attempt, f.Class, f.Code, statusText(f.Status))})
		}
		switch {
		case a.Failure != nil && a.Failure.Resolution != nil:
			res := a.Failure.Resolution
			ev = append(ev, event{At: res.At, What: "settled by an operator as " + res.Status + ": " + res.Reason, Who: res.By})
		case a.Status == executor.RowReview:
			ev = append(ev, event{At: a.UpdatedAt, What: "put in review: nobody can tell whether the provider acted"})
		case a.Status == executor.RowCompleted && a.FinishedAt != nil:
			ev = append(ev, event{At: *a.FinishedAt, What: "completed"})
		case a.Status == executor.RowFailed && a.FinishedAt != nil:
			ev = append(ev, event{At: *a.FinishedAt, What: "failed"})
		}
	}
	for _, ar := range audit {
		var d map[string]any
		_ = json.Unmarshal(ar.Detail, &d)
		what := ar.Kind
		switch ar.Kind {
		case "lookup":
			what = fmt.Sprintf("provider lookup: %v", d["outcome"])
			if ref, _ := d["reference"].(string); ref != "" {
				what += " (" + ref + ")"
			}
			if st, _ := d["provider_status"].(string); st != "" {
				what += ", provider status " + st
			}
			if m, _ := d["message"].(string); m != "" {
				what += ": " + m
			}
			if v.Lookup == nil || ar.At.After(v.Lookup.At) || ar.At.Equal(v.Lookup.At) {
				var lv lookupView
				_ = json.Unmarshal(ar.Detail, &lv)
				lv.Operator, lv.At = ar.Operator, ar.At
				v.Lookup = &lv
			}
		case "reveal":
			what = "personal data revealed in the console"
		case "settle":
			what = fmt.Sprintf("settled in the console as %v", d["status"])
			if ref, _ := d["reference"].(string); ref != "" {
				what += " (reference " + ref + ")"
			}
		}
		ev = append(ev, event{At: ar.At, What: what, Who: ar.Operator})
	}
	slices.SortStableFunc(ev, func(a, b event) int { return a.At.Compare(b.At) })
	return ev
}

func statusText(code int) string {
	if code == 0 {
		return ""
	}
	return fmt.Sprintf("HTTP %d", code)
}

func short(k string) string {
	if len(k) > 12 {
		return k[:12] + "…"
	}
	return k
}

func (h *Handler) story(w http.ResponseWriter, r *http.Request, s *session) {
	q := r.URL.Query()
	h.showStory(w, r, s, q.Get("tenant"), q.Get("key"), false, q.Get("settled") != "")
}

func (h *Handler) showStory(w http.ResponseWriter, r *http.Request, s *session, tenant, key string, revealed, settled bool) {
	v := h.storyOf(w, r, s, tenant, key, revealed)
	if v == nil {
		return
	}
	v.Settled = settled
	v.Back = intentURL(tenant, key)
	h.render(w, r, s, "intent", v)
}

// storyOf loads the story of tenant's intent key; nil means it answered
// already: 404 for an intent not among s's tenants (another tenant's
// intent and a missing one look the same).
func (h *Handler) storyOf(w http.ResponseWriter, r *http.Request, s *session, tenant, key string, revealed bool) *storyView {
	if !s.can(tenant) || key == "" {
		h.fail(w, r, s, http.StatusNotFound, "No such intent among your tenants.")
		return nil
	}
	v, err := h.loadStory(r.Context(), tenant, key, revealed)
	if errors.Is(err, errNotFound) {
		h.fail(w, r, s, http.StatusNotFound, "No such intent among your tenants.")
		return nil
	}
	if err != nil {
		h.dbFail(w, r, s, "intent", err)
		return nil
	}
	return v
}

func intentURL(tenant, key string) string {
	return Prefix + "/intent?" + url.Values{"tenant": {tenant}, "key": {key}}.Encode()
}

func (h *Handler) reveal(w http.ResponseWriter, r *http.Request, s *session) {
	tenant, key := r.PostFormValue("tenant"), r.PostFormValue("key")
	v := h.storyOf(w, r, s, tenant, key, true)
	if v == nil {
		return
	}
	var names []string
	for _, f := range h.maskPayload(fieldAction(v), payloadOf(v), false) {
		if f.Masked {
			names = append(names, f.Name)
		}
	}
	detail, _ := json.Marshal(map[string]any{"fields": names})
	if _, err := h.cfg.DB.Exec(r.Context(), auditInsertSQL, tenant, key, s.Name, "reveal", detail); err != nil {
		// No record, no reveal.
		h.dbFail(w, r, s, "recording the reveal", err)
		return
	}
	h.cfg.Logger.Info("console: personal data revealed", "operator", s.Name, "tenant", tenant, "key", key, "fields", len(names))
	v.Back = intentURL(tenant, key)
	v.Timeline = append(v.Timeline, event{At: time.Now(), What: "personal data revealed in the console (this page)", Who: s.Name})
	h.render(w, r, s, "intent", v)
}

func fieldAction(v *storyView) string {
	if v.In != nil {
		return v.In.Action
	}
	return v.Action.Action
}

func payloadOf(v *storyView) derive.Payload {
	if v.In != nil {
		return v.In.Payload
	}
	return nil
}

// storyIntent reads the action and the intent behind key into v, their
// fields masked unless revealed, and the intent's amendments; it returns
// the action's name and intent ref. errNotFound: neither exists.
func (h *Handler) storyIntent(ctx context.Context, v *storyView, tenant, key string, revealed bool) (action, ref string, err error) {
	db := h.cfg.DB
	a, err := executor.Get(ctx, db, tenant, key)
	switch {
	case errors.Is(err, executor.ErrNotFound):
		v.ActionMissing = true
	case err != nil:
		return "", "", err
	default:
		v.Action = a
	}
	in, err := intent.GetByKey(ctx, db, tenant, key)
	if errors.Is(err, intent.ErrNotFound) && a != nil {
		// An amendment moved the intent to a new key; this is the old one.
		in, err = intent.Get(ctx, db, tenant, a.Ref, a.Action)
	}
	switch {
	case errors.Is(err, intent.ErrNotFound) || errors.Is(err, intent.ErrInvalid):
		if a == nil {
			return "", "", errNotFound
		}
	case err != nil:
		return "", "", err
	default:
		v.In = in
	}
	action, ref = h.storyFields(v, a, revealed)
	// Amendments.
	revs, err := intent.Revisions(ctx, db, tenant, ref, action)
	if err != nil && !errors.Is(err, intent.ErrNotFound) {
		return "", "", err
	}
	for _, rv := range revs {
		v.Revisions = append(v.Revisions, revisionView{Revision: rv, Fields: h.maskPayload(action, rv.OldPayload, revealed)})
	}
	return action, ref, nil
}

// storyRequests reads the provider's own log of the requests that
// carried the key, when the process has one.
func (h *Handler) storyRequests(ctx context.Context, v *storyView, action, key string) {
	if h.cfg.Requests == nil {
		return
	}
	v.RequestsOn = true
	rctx, cancel := context.WithTimeout(ctx, h.cfg.LookupTimeout)
	reqs, err := h.cfg.Requests.Requests(rctx, action, key)
	cancel()
	switch {
	case errors.Is(err, ErrNotRecorded):
		v.RequestsOn = false
	case err != nil:
		h.cfg.Logger.Warn("console: provider request log", "action", action, "err", err)
		v.RequestsErr = "the provider's request log did not answer"
	}
	v.Requests = reqs
}
