package executor

import (
	"encoding/json"
	"time"

	"github.com/retrysafe/retrysafe/intent"
	"github.com/retrysafe/retrysafe/internal/ledger"
)

// The ledger's rows as the executor's types, and what a stored row
// tells a caller.

// actionOf is the ledger's row as an Action, its failure decoded; nil for
// nil.
func actionOf(a *ledger.Action) *Action {
	if a == nil {
		return nil
	}
	return &Action{
		Tenant: a.Tenant, Key: a.Key, Ref: a.Ref, Action: a.Action, Status: a.Status, Attempt: a.Attempt,
		LeaseOwner: a.LeaseOwner, LeaseUntil: a.LeaseUntil, Expired: a.Expired, LeaseLeft: a.LeaseLeft,
		Response: a.Response, Failure: decodeFailure(a.Error),
		CreatedAt: a.CreatedAt, UpdatedAt: a.UpdatedAt, FinishedAt: a.FinishedAt,
	}
}

// intentOf is the ledger's row as an Intent: the two types have the same
// fields, so the conversion copies nothing.
func intentOf(in *ledger.Intent) *intent.Intent { return (*intent.Intent)(in) }

func decodeFailure(raw []byte) *ToolFailure {
	if len(raw) == 0 {
		return nil
	}
	var f ToolFailure
	if json.Unmarshal(raw, &f) != nil {
		return nil
	}
	return &f
}

func statusOf(row string) Status {
	switch row {
	case RowCompleted:
		return StatusCompleted
	case RowFailed:
		return StatusFailed
	case RowReview:
		return StatusReview
	}
	return StatusInFlight
}

// fromRow fills out from a stored row that this call did not settle.
func fromRow(out *Outcome, a *Action) *Outcome {
	out.Status = statusOf(a.Status)
	out.Key = a.Key
	out.Attempt = a.Attempt
	out.Replayed = a.Status != RowStarted
	out.Response = a.Response
	out.Failure = a.Failure
	out.RetryAfter = 0
	if a.Status == RowStarted {
		out.RetryAfter = a.LeaseLeft
		if out.RetryAfter <= 0 {
			out.RetryAfter = time.Millisecond
		}
	}
	return out
}
