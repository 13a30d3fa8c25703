package agent

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/riverqueue/river"

	"github.com/retrysafe/retrysafe/executor"
	"github.com/retrysafe/retrysafe/intent"
	"github.com/retrysafe/retrysafe/tools"
)

// Cloud API error codes the agent acts on. See Meta's error code reference
// (developers.facebook.com/documentation/business-messaging/whatsapp/support/error-codes).
const (
	// CodePairRateLimit: too many messages to one recipient in a short
	// time, "(Business Account, Consumer Account) pair rate limit hit".
	// Sending again too soon fails again: back off.
	CodePairRateLimit = 131056
	// CodeReengagement: more than 24 hours since the customer last wrote;
	// only a template may be sent.
	CodeReengagement = 131047
)

// DeliveryPolicy decides what a failed reply leads to.
type DeliveryPolicy struct {
	// RetryCodes are the error codes after which a failed reply is sent
	// again, once, with the same key. Any other code puts it to review.
	RetryCodes map[int]bool
	// PairRateBackoff is how long a reply waits after error 131056 before
	// it is sent (again). Default 30s.
	PairRateBackoff time.Duration
}

// DefaultDelivery retries what Meta documents as temporary: 131000
// (something went wrong), 131016 (service unavailable), 131049 (not
// delivered to maintain ecosystem engagement), 130429 (throughput) and
// 131056 (pair rate limit, after PairRateBackoff). Undeliverable numbers,
// closed windows (131047), template and policy errors go to review.
func DefaultDelivery() DeliveryPolicy {
	return DeliveryPolicy{
		RetryCodes:      map[int]bool{131000: true, 131016: true, 131049: true, 130429: true, CodePairRateLimit: true},
		PairRateBackoff: 30 * time.Second,
	}
}

func (p DeliveryPolicy) backoff() time.Duration {
	if p.PairRateBackoff <= 0 {
		return 30 * time.Second
	}
	return p.PairRateBackoff
}

var deliveryRank = map[string]int{"": 0, DeliverySent: 1, DeliveryDelivered: 2, DeliveryRead: 3}

// mergeStatus moves the delivery state of the reply st is about, in the
// webhook's transaction. The reply is found by the key it carried
// (biz_opaque_callback_data), else by the provider's message id, and is
// locked while merged: statuses arrive out of order and concurrently.
func mergeStatus(ctx context.Context, tx pgx.Tx, q Inserter, st Status, pol DeliveryPolicy, res *BatchResult) error {
	if st.Tenant == "" || (st.MessageID == "" && st.CallbackData == "") {
		res.StaleStatuses++
		return nil
	}
	switch st.Status {
	case DeliverySent, DeliveryDelivered, DeliveryRead, DeliveryFailed:
	default:
		res.StaleStatuses++ // "played" (voice), "deleted", ...: not a delivery step
		return nil
	}
	var (
		msgID, wamid, delivery, replyStatus string
		resends                             int
	)
	err := pgx.ErrNoRows
	if st.CallbackData != "" {
		err = tx.QueryRow(ctx, TurnForStatusByKey, st.Tenant, st.CallbackData).Scan(&msgID, &wamid, &delivery, &resends, &replyStatus)
	}
	if errors.Is(err, pgx.ErrNoRows) && st.MessageID != "" {
		err = tx.QueryRow(ctx, TurnForStatusByWamid, st.Tenant, st.MessageID).Scan(&msgID, &wamid, &delivery, &resends, &replyStatus)
	}
	if errors.Is(err, pgx.ErrNoRows) {
		res.StaleStatuses++ // not a reply of ours (a receipt, another system's message)
		return nil
	}
	if err != nil {
		return fmt.Errorf("agent: receive: status: %w", err)
	}
	switch {
	case delivery == DeliveryResending && (wamid == "" || st.MessageID == wamid):
		res.StaleStatuses++ // about the attempt that failed
		return nil
	case delivery == DeliveryResending:
		// The resend's own status, ahead of the resend's answer.
		wamid, delivery = st.MessageID, ""
	case wamid != "" && st.MessageID != "" && st.MessageID != wamid:
		res.StaleStatuses++ // an earlier attempt's
		return nil
	}
	if wamid == "" {
		wamid = st.MessageID
	}
	var (
		next   string
		status = replyStatus
		code   int
		resend *ResendArgs
	)
	if st.Status == DeliveryFailed {
		code = st.ErrorCode
		if delivery == DeliveryDelivered || delivery == DeliveryRead || delivery == DeliveryFailed {
			res.StaleStatuses++ // a delivery stands (another device); a failure is decided once
			return nil
		}
		next = DeliveryFailed
		if pol.RetryCodes[code] && resends < 1 {
			next, status = DeliveryResending, ReplyPending
			resends++
			resend = &ResendArgs{Tenant: st.Tenant, MessageID: msgID}
			res.Resends++
		} else {
			status = ReplyReview
			res.Review++
		}
	} else {
		if deliveryRank[st.Status] <= deliveryRank[delivery] && delivery != DeliveryFailed {
			res.StaleStatuses++ // read before delivered: delivered adds nothing
			return nil
		}
		next, status = st.Status, ReplySent
	}
	at := st.At
	if at.IsZero() {
		at = time.Now()
	}
	if _, err := tx.Exec(ctx, TurnMergeStatus, st.Tenant, msgID, wamid, next, at, code, status, resends); err != nil {
		return fmt.Errorf("agent: receive: merge status: %w", err)
	}
	if resend != nil {
		var opts *river.InsertOpts
		if code == CodePairRateLimit {
			o := resend.InsertOpts()
			o.ScheduledAt = time.Now().Add(pol.backoff())
			opts = &o
		}
		if _, err := q.InsertTx(ctx, tx, *resend, opts); err != nil {
			return fmt.Errorf("agent: receive: enqueue resend: %w", err)
		}
	}
	res.Statuses++
	return nil
}

// KindResend is the job that sends a failed reply again.
const KindResend = "agent_resend"

// ResendArgs is one failed reply to send again. Unique by (tenant, message
// id): a reply is resent once.
type ResendArgs struct {
	Tenant    string `json:"tenant" river:"unique"`
	MessageID string `json:"message_id" river:"unique"`
}

// Kind implements river.JobArgs.
func (ResendArgs) Kind() string { return KindResend }

// InsertOpts implements river.JobArgsWithInsertOpts.
func (ResendArgs) InsertOpts() river.InsertOpts {
	return river.InsertOpts{Queue: QueueReply, UniqueOpts: river.UniqueOpts{ByArgs: true}}
}

// resendRef is the intent_ref of a reply's one resend.
func resendRef(messageID string) string { return replyRef(messageID) + ":resend" }

// HandleResend sends a failed reply again, once: the resend is an intent of
// its own (intent_ref "<message id>:reply:resend", so the executor sends it
// at most once whatever the crashes), whose reply_key field is the reply's
// key: the provider sees the same Idempotency-Key and the same
// biz_opaque_callback_data, so the resend's statuses find the reply.
func (a *Agent) HandleResend(ctx context.Context, args ResendArgs) error {
	if args.Tenant == "" || args.MessageID == "" {
		return fmt.Errorf("%w: resend job needs tenant and message id", ErrInvalid)
	}
	turn, err := GetTurn(ctx, a.cfg.DB, args.Tenant, args.MessageID)
	if err != nil {
		return err
	}
	if turn.ReplyDelivery != DeliveryResending || turn.ReplyKey == "" {
		return nil // delivered after all, or already resent
	}
	orig, err := intent.Get(ctx, a.cfg.DB, args.Tenant, turn.ReplyRef, a.cfg.ReplyAction)
	if err != nil {
		return fmt.Errorf("agent: resend: reply intent: %w", err)
	}
	fields := map[string]any{}
	for k, v := range orig.Payload.Map() {
		if k != tools.RefField {
			fields[k] = v
		}
	}
	fields["reply_key"] = turn.ReplyKey
	fr, err := a.cfg.Intents.Freeze(ctx, a.cfg.DB, intent.FreezeParams{
		Tenant: args.Tenant, Ref: resendRef(args.MessageID), Action: a.cfg.ReplyAction, SourceRef: args.MessageID, Fields: fields,
	})
	if err != nil {
		return fmt.Errorf("agent: resend: freeze: %w", err)
	}
	return a.sendKey(ctx, args.Tenant, args.MessageID, fr.Intent.Key, "resend")
}

// sendKey executes a frozen reply (or resend) intent and records the
// outcome on the turn.
func (a *Agent) sendKey(ctx context.Context, tenant, messageID, key, what string) error {
	out, err := a.cfg.Executor.ExecuteKey(ctx, tenant, key, &executor.Opts{NoWait: true})
	if errors.Is(err, executor.ErrNotFound) {
		return fmt.Errorf("%w: %s intent of message %s", ErrNotFound, what, messageID)
	}
	if err != nil {
		if executor.IsRetryable(err) {
			return &BusyError{What: a.cfg.ReplyAction, RetryAfter: time.Second}
		}
		return fmt.Errorf("agent: %s: %w", what, err)
	}
	var status string
	switch out.Status {
	case executor.StatusCompleted:
		status = ReplySent
		if id := sentMessageID(out.Response); id != "" {
			if _, err := a.cfg.DB.Exec(ctx, TurnSetReplySent, tenant, messageID, id); err != nil {
				return fmt.Errorf("agent: %s: record message id: %w", what, err)
			}
		}
	case executor.StatusFailed:
		status = ReplyFailed
	case executor.StatusReview:
		status = ReplyReview
	case executor.StatusInFlight:
		wait := max(out.RetryAfter, 100*time.Millisecond)
		if out.Failure != nil && out.Failure.Code == graphCode(CodePairRateLimit) {
			// The provider asked us to slow down for this recipient; the
			// executor's own backoff is for transport failures.
			wait = max(wait, a.cfg.Delivery.backoff())
		}
		return &BusyError{What: a.cfg.ReplyAction, RetryAfter: wait}
	default:
		return fmt.Errorf("agent: %s: unexpected status %q", what, out.Status)
	}
	if _, err := a.cfg.DB.Exec(ctx, TurnSetReplyStatus, tenant, messageID, status); err != nil {
		return fmt.Errorf("agent: reply status: %w", err)
	}
	a.log.Info(what+": done", "tenant", tenant, "message_id", messageID, "status", status, "replayed", out.Replayed)
	return nil
}

// sentMessageID reads the provider's message id from a send's answer
// ({"messages":[{"id":"wamid..."}]}).
func sentMessageID(resp json.RawMessage) string {
	var v struct {
		Messages []struct {
			ID string `json:"id"`
		} `json:"messages"`
	}
	if json.Unmarshal(resp, &v) != nil || len(v.Messages) == 0 {
		return ""
	}
	return v.Messages[0].ID
}

// graphCode is the tools.Error code the reply tool gives a Graph API error.
func graphCode(code int) string { return fmt.Sprintf("wa_%d", code) }

type resendWorker struct {
	river.WorkerDefaults[ResendArgs]
	a       *Agent
	timeout time.Duration
}

func (w *resendWorker) Work(ctx context.Context, job *river.Job[ResendArgs]) error {
	return jobResult(w.a.HandleResend(ctx, job.Args))
}

func (w *resendWorker) Timeout(*river.Job[ResendArgs]) time.Duration { return w.timeout }
