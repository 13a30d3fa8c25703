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
	"github.com/retrysafe/retrysafe/internal/outbox"
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
	r, err := lockReply(ctx, tx, st)
	if err != nil {
		return fmt.Errorf("agent: receive: status: %w", err)
	}
	if r == nil {
		res.StaleStatuses++ // not a reply of ours (a receipt, another system's message)
		return nil
	}
	m, ok := merge(r, st, pol)
	if !ok {
		res.StaleStatuses++
		return nil
	}
	if err := writeMerged(ctx, tx, st.Tenant, r.messageID, m); err != nil {
		return fmt.Errorf("agent: receive: merge status: %w", err)
	}
	switch {
	case m.delivery == DeliveryResending:
		var opts *river.InsertOpts
		resend := ResendArgs{Tenant: st.Tenant, MessageID: r.messageID}
		if m.code == CodePairRateLimit {
			o := resend.InsertOpts()
			o.ScheduledAt = time.Now().Add(pol.backoff())
			opts = &o
		}
		if _, err := q.InsertTx(ctx, tx, resend, opts); err != nil {
			return fmt.Errorf("agent: receive: enqueue resend: %w", err)
		}
		res.Resends++
	case m.status == ReplyReview && st.Status == DeliveryFailed:
		res.Review++
	}
	res.Statuses++
	return nil
}

// merge decides the delivery state st moves r to: states only move forward
// (sent < delivered < read), a failure is decided once and never undoes a
// delivery, and a failure whose code pol retries queues the reply's one
// resend. false: st changes nothing.
func merge(r *replyState, st Status, pol DeliveryPolicy) (mergedReply, bool) {
	m := mergedReply{wamid: r.wamid, delivery: r.delivery, status: r.status, resends: r.resends, at: st.At}
	switch {
	case r.delivery == DeliveryResending && (r.wamid == "" || st.MessageID == r.wamid):
		return m, false // about the attempt that failed
	case r.delivery == DeliveryResending:
		// The resend's own status, ahead of the resend's answer.
		m.wamid, m.delivery = st.MessageID, ""
	case r.wamid != "" && st.MessageID != "" && st.MessageID != r.wamid:
		return m, false // an earlier attempt's
	}
	if m.wamid == "" {
		m.wamid = st.MessageID
	}
	if m.at.IsZero() {
		m.at = time.Now()
	}
	if st.Status != DeliveryFailed {
		if deliveryRank[st.Status] <= deliveryRank[m.delivery] && m.delivery != DeliveryFailed {
			return m, false // read before delivered: delivered adds nothing
		}
		m.delivery, m.status = st.Status, ReplySent
		return m, true
	}
	if m.delivery == DeliveryDelivered || m.delivery == DeliveryRead || m.delivery == DeliveryFailed {
		return m, false // a delivery stands (another device); a failure is decided once
	}
	m.code = st.ErrorCode
	if pol.RetryCodes[m.code] && m.resends < 1 {
		m.delivery, m.status = DeliveryResending, ReplyPending
		m.resends++
		return m, true
	}
	m.delivery, m.status = DeliveryFailed, ReplyReview
	return m, true
}

// KindResend is the job that sends a failed reply again.
const KindResend = "agent_resend"

// ResendArgs is one failed reply to send again: the inbound message it
// answers. Unique by (tenant, message id): a reply is resent once.
type ResendArgs InboxArgs

// Kind implements river.JobArgs.
func (ResendArgs) Kind() string { return KindResend }

// InsertOpts implements river.JobArgsWithInsertOpts.
func (ResendArgs) InsertOpts() river.InsertOpts { return outbox.UniqueIn(QueueReply) }

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
	out, status, err := outbox.Relay(ctx, a.cfg.Executor, tenant, key, a.cfg.ReplyAction)
	var busy *BusyError
	switch {
	case errors.Is(err, executor.ErrNotFound):
		return fmt.Errorf("%w: %s intent of message %s", ErrNotFound, what, messageID)
	case errors.As(err, &busy):
		if out != nil && out.Failure != nil && out.Failure.Code == graphCode(CodePairRateLimit) {
			// The provider asked us to slow down for this recipient; the
			// executor's own backoff is for transport failures.
			busy.RetryAfter = max(busy.RetryAfter, a.cfg.Delivery.backoff())
		}
		return busy
	case err != nil:
		return fmt.Errorf("agent: %s: %w", what, err)
	}
	if status == ReplySent {
		if id := sentMessageID(out.Response); id != "" {
			if err := setReplySent(ctx, a.cfg.DB, tenant, messageID, id); err != nil {
				return fmt.Errorf("agent: %s: record message id: %w", what, err)
			}
		}
	}
	if err := setReplyStatus(ctx, a.cfg.DB, tenant, messageID, status); err != nil {
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
