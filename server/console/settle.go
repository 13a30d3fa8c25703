package console

import (
	"encoding/json"
	"errors"
	"net/http"
	"strings"

	"github.com/retrysafe/retrysafe/executor"
)

type settleForm struct {
	Tenant, Key, Status, Reference, Response, Reason string
	Action                                           *executor.Action
	Errors                                           []string
	Stored                                           string
}

func (h *Handler) settle(w http.ResponseWriter, r *http.Request, s *session) {
	f := settleForm{
		Tenant: r.PostFormValue("tenant"), Key: r.PostFormValue("key"), Status: r.PostFormValue("status"),
		Reference: strings.TrimSpace(r.PostFormValue("reference")), Response: strings.TrimSpace(r.PostFormValue("response")),
		Reason: strings.TrimSpace(r.PostFormValue("reason")),
	}
	a := h.actionOf(w, r, s, f.Tenant, f.Key, "settle")
	if a == nil {
		return
	}
	f.Action = a
	resp, errs := f.check()
	f.Errors = errs
	if len(resp) > 0 {
		f.Stored = string(resp)
	}
	if len(errs) > 0 || r.PostFormValue("confirm") != "yes" {
		if len(errs) > 0 {
			w.WriteHeader(http.StatusBadRequest)
		}
		h.render(w, r, s, "confirm", f)
		return
	}
	tx, err := h.cfg.DB.Begin(r.Context())
	if err != nil {
		h.dbFail(w, r, s, "settle", err)
		return
	}
	defer tx.Rollback(r.Context()) //nolint:errcheck // no-op after commit
	// The same call as `retrysafe resolve`: the resolution is recorded in
	// the action's row by the executor, with who and why.
	_, err = executor.Resolve(r.Context(), tx, executor.ResolveParams{
		Tenant: f.Tenant, Key: f.Key, Status: f.Status, Response: resp, Reason: f.Reason, By: s.Name,
	})
	if errors.Is(err, executor.ErrNotResolvable) {
		h.fail(w, r, s, http.StatusConflict, "This action is no longer in review: nothing changed. Reload its page to see how it ended.")
		return
	}
	if err != nil {
		h.dbFail(w, r, s, "settle", err)
		return
	}
	detail, _ := json.Marshal(map[string]string{"status": f.Status, "reference": f.Reference})
	if _, err := tx.Exec(r.Context(), auditInsertSQL, f.Tenant, f.Key, s.Name, "settle", detail); err != nil {
		h.dbFail(w, r, s, "settle", err)
		return
	}
	if err := tx.Commit(r.Context()); err != nil {
		h.dbFail(w, r, s, "settle", err)
		return
	}
	h.cfg.Logger.Info("console: action settled", "operator", s.Name, "tenant", f.Tenant, "action", a.Action, "key", f.Key, "status", f.Status)
	http.Redirect(w, r, intentURL(f.Tenant, f.Key)+"&settled=1", http.StatusSeeOther)
}

// check validates the form as `retrysafe resolve` validates its flags, and
// returns the response to store (completed).
func (f *settleForm) check() (json.RawMessage, []string) {
	var errs []string
	if f.Action.Status != executor.RowReview {
		errs = append(errs, "The action is "+f.Action.Status+", not in review: only an action in review can be settled here.")
	}
	if len(f.Reason) > 2000 {
		errs = append(errs, "The reason is longer than 2000 characters.")
	}
	if f.Reason == "" {
		errs = append(errs, "Say why: the reason is recorded with the action.")
	}
	var resp json.RawMessage
	switch f.Status {
	case executor.RowCompleted:
		switch {
		case f.Response != "":
			var obj map[string]any
			if json.Unmarshal([]byte(f.Response), &obj) != nil {
				errs = append(errs, "The provider's response must be a JSON object.")
			} else {
				resp = json.RawMessage(f.Response)
			}
		case f.Reference != "":
			resp, _ = json.Marshal(map[string]string{"id": f.Reference})
		default:
			errs = append(errs, "Completed needs the provider's reference (or its whole response): callers will be given it.")
		}
	case executor.RowFailed:
		if f.Response != "" {
			errs = append(errs, "A failed action stores no response.")
		}
	default:
		errs = append(errs, "Choose completed (it happened) or failed (it did not).")
	}
	return resp, errs
}
