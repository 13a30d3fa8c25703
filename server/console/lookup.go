package console

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"

	"github.com/retrysafe/retrysafe/executor"
	"github.com/retrysafe/retrysafe/tools"
)

func (h *Handler) lookup(w http.ResponseWriter, r *http.Request, s *session) {
	tenant, key := r.PostFormValue("tenant"), r.PostFormValue("key")
	back := safeNext(r.PostFormValue("back"))
	a := h.actionOf(w, r, s, tenant, key, "lookup")
	if a == nil {
		return
	}
	lv := h.ask(r.Context(), a)
	detail, _ := json.Marshal(lv)
	if _, err := h.cfg.DB.Exec(r.Context(), auditInsertSQL, tenant, key, s.Name, "lookup", detail); err != nil {
		h.dbFail(w, r, s, "recording the lookup", err)
		return
	}
	h.cfg.Logger.Info("console: provider lookup", "operator", s.Name, "tenant", tenant, "action", a.Action, "key", key, "outcome", lv.Outcome)
	http.Redirect(w, r, back, http.StatusSeeOther)
}

// ask runs the tool's Looker for the action's key, as the reconciler does
// before it calls again.
func (h *Handler) ask(ctx context.Context, a *executor.Action) lookupView {
	t, ok := h.cfg.Tools.Tool(a.Action)
	if !ok {
		return lookupView{Outcome: "unsupported", Message: "no tool " + a.Action + " is configured in this process"}
	}
	l, ok := tools.CanLookup(t)
	if !ok {
		return lookupView{Outcome: "unsupported", Message: "this provider cannot be asked about a key: check its dashboard"}
	}
	ctx, cancel := context.WithTimeout(ctx, h.cfg.LookupTimeout)
	defer cancel()
	resp, err := l.Lookup(ctx, a.Key)
	switch {
	case err == nil:
		lv := lookupView{Outcome: "found", Reference: reference(resp), Response: resp}
		var m map[string]any
		if json.Unmarshal(resp, &m) == nil {
			if st, ok := m["status"].(string); ok {
				lv.ProviderStatus = st
			}
		}
		return lv
	case errors.Is(err, tools.ErrNotFound):
		return lookupView{Outcome: "not_found", Message: "the provider has no record of this key"}
	default:
		msg := "the provider could not be asked"
		var te *tools.Error
		if errors.As(err, &te) {
			msg += fmt.Sprintf(" (%s %s)", te.Class, te.Code)
		} else if errors.Is(err, context.DeadlineExceeded) {
			msg += " (timed out)"
		}
		return lookupView{Outcome: "error", Message: msg}
	}
}

// actionOf reads tenant's action key for s (what names the step in a
// database failure); nil means it answered already: 404 for an action not
// among s's tenants.
func (h *Handler) actionOf(w http.ResponseWriter, r *http.Request, s *session, tenant, key, what string) *executor.Action {
	if !s.can(tenant) || key == "" {
		h.fail(w, r, s, http.StatusNotFound, "No such action among your tenants.")
		return nil
	}
	a, err := executor.Get(r.Context(), h.cfg.DB, tenant, key)
	if errors.Is(err, executor.ErrNotFound) {
		h.fail(w, r, s, http.StatusNotFound, "No such action among your tenants.")
		return nil
	}
	if err != nil {
		h.dbFail(w, r, s, what, err)
		return nil
	}
	return a
}
