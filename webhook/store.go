package webhook

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strconv"
	"strings"

	"github.com/jackc/pgx/v5"

	"github.com/retrysafe/retrysafe/derive"
	"github.com/retrysafe/retrysafe/executor"
	"github.com/retrysafe/retrysafe/intent"
)

// allowedFrom lists, per target status, the statuses an existing order may
// leave for it. Anything else is refused (stale, not_allowed):
//
//	paid                ← refunded            (a new payment after a refund: another charge, another effect)
//	partially_refunded  ← paid, partially_refunded, disputed
//	refunded            ← paid, partially_refunded, disputed
//	disputed            ← paid, partially_refunded, refunded
//
// A status never moves to itself, but for partially_refunded: each
// partial refund of a payment leaves another amount refunded, and is
// another effect. A second payment of a paid order is recorded for review,
// not applied twice.
var allowedFrom = map[Status][]string{
	StatusPaid:              {string(StatusRefunded)},
	StatusPartiallyRefunded: {string(StatusPaid), string(StatusPartiallyRefunded), string(StatusDisputed)},
	StatusRefunded:          {string(StatusPaid), string(StatusPartiallyRefunded), string(StatusDisputed)},
	StatusDisputed:          {string(StatusPaid), string(StatusPartiallyRefunded), string(StatusRefunded)},
}

// stage orders statuses created in the same second: a refund or dispute
// can only follow the payment it reverses, so at equal creation times the
// later stage wins and an earlier stage is stale.
var stage = map[Status]int{StatusPaid: 1, StatusPartiallyRefunded: 2, StatusRefunded: 3, StatusDisputed: 4}

// tieFrom lists, per target status, the allowed statuses it may leave when
// the event was created in the same second as the order's last one.
var tieFrom = func() map[Status][]string {
	out := map[Status][]string{}
	for to, from := range allowedFrom {
		out[to] = []string{}
		for _, f := range from {
			if stage[Status(f)] < stage[to] {
				out[to] = append(out[to], f)
			}
		}
	}
	return out
}()

// NotifyRefSuffix makes a notification's intent_ref from its effect key:
// the key is then fixed by (tenant, effect, "notify") and the first frozen
// fields.
const NotifyRefSuffix = ":notify"

// apply decides and stores one mapped event in one transaction: effect,
// order, notification intent, outbox row and job, delivery log row.
func (h *Handler) apply(ctx context.Context, p Provider, res *Result, ev *Event) (*Result, error) {
	tx, err := h.cfg.DB.Begin(ctx)
	if err != nil {
		return nil, h.failed(res, "begin", err)
	}
	defer tx.Rollback(ctx) //nolint:errcheck // no-op after commit

	orderRef, via, err := h.resolveOrder(ctx, tx, p, res, ev)
	if err != nil {
		return nil, h.failed(res, "order_ref", err)
	}
	paymentRef := ev.Object.PaymentRef()
	if res.Transition == OrderPaid && !ev.Object.NamesPayment() && validRef(orderRef) {
		// An invoice of the current API versions names no payment: when
		// its order is paid already, it announces that payment (an
		// invoice is paid once), so it is the same effect.
		paidWith, err := paidPayment(ctx, tx, res.Tenant, orderRef)
		if err != nil {
			return nil, h.failed(res, "paid_payment", err)
		}
		if paidWith != "" {
			paymentRef = paidWith
		}
	}
	if res.Transition == OrderPartiallyRefunded {
		// Each partial refund leaves another total refunded: another
		// effect; a redelivery of one is the same.
		paymentRef += "/refunded:" + strconv.FormatInt(*ev.Object.AmountRefunded, 10)
	}
	var bad error
	switch {
	case !validRef(orderRef):
		bad = malformed("no_order_ref", "the event names no order (metadata %q, invoice, request idempotency key, or a payment already recorded)",
			p.OrderRefKeys)
	case !validRef(paymentRef):
		bad = malformed("no_payment_ref", "the event names no payment")
	}
	if bad != nil {
		// Release the connection before logging on the pool: holding one
		// while taking another deadlocks a small, busy pool.
		_ = tx.Rollback(ctx)
		return h.reject(ctx, p, res, ev, bad)
	}
	res.OrderVia = via
	res.OrderRef = orderRef
	res.EffectKey = EffectKey(res.Provider, res.Transition, orderRef, paymentRef)

	claimed, err := claimEffect(ctx, tx, res, ev, paymentRef)
	if err != nil {
		return nil, h.failed(res, "effect", err)
	}
	if !claimed {
		res.Verdict = VerdictDuplicate
		return h.commit(ctx, tx, res)
	}
	applied, created, err := transitionOrder(ctx, tx, res, ev)
	if err != nil {
		return nil, h.failed(res, "order", err)
	}
	if !applied {
		return h.stale(ctx, tx, res, ev)
	}
	res.OrderCreated = created
	res.Verdict, res.Status = VerdictProcessed, res.Transition.Target()
	if err := h.enqueue(ctx, tx, res, ev, paymentRef); err != nil {
		return nil, h.failed(res, "notification", err)
	}
	return h.commit(ctx, tx, res)
}

// chargeRef is the charge to record beside an effect, "" when the event
// names none fit to store (an index entry has a size limit; a delivery
// must not fail on it, or the provider redelivers it forever).
func chargeRef(o Object) string {
	if c := o.ChargeRef(); validRef(c) {
		return c
	}
	return ""
}

// resolveOrder finds the order an event is about: in the event (the first
// of the provider's metadata keys, the invoice), else through what the
// tenant's records say of the event: the intent frozen under the request's
// or the object's idempotency key (a charge retrysafe made), an earlier
// effect of the same payment or charge, the action whose stored response
// names the PaymentIntent or charge. "" when nothing names it.
func (h *Handler) resolveOrder(ctx context.Context, tx pgx.Tx, p Provider, res *Result, ev *Event) (string, string, error) {
	o := ev.Object
	if ref := o.OrderRef(p.OrderRefKeys...); ref != "" {
		if slices.ContainsFunc(p.OrderRefKeys, func(k string) bool { return strings.TrimSpace(o.Metadata[k]) != "" }) {
			return ref, "metadata", nil
		}
		return ref, "invoice", nil
	}
	for _, key := range []string{ev.RequestKey, o.IdempotencyKey} {
		if key == "" || !validRef(key) {
			continue
		}
		in, err := intent.GetByKey(ctx, tx, res.Tenant, key)
		if err == nil {
			return in.Ref, "idempotency_key", nil
		}
		if !errors.Is(err, intent.ErrNotFound) {
			return "", "idempotency_key", err
		}
	}
	if !o.NamesPayment() {
		return "", "", nil
	}
	pay, charge := o.PaymentRef(), o.ChargeRef()
	if ref, err := orderOfPayment(ctx, tx, res.Tenant, pay, charge); ref != "" || err != nil {
		return ref, "payment", err
	}
	ref, err := executor.RefByPayment(ctx, tx, res.Tenant, pay, charge)
	switch {
	case err == nil:
		return ref, "action", nil
	case !errors.Is(err, executor.ErrNotFound):
		return "", "action", err
	}
	return "", "", nil
}

// stale records an effect the order has moved past, with the order as it
// stood, and changes nothing else.
func (h *Handler) stale(ctx context.Context, tx pgx.Tx, res *Result, ev *Event) (*Result, error) {
	// ON CONFLICT DO UPDATE locked the row even though its WHERE failed,
	// so this read sees the very version the guard refused.
	o, err := scanOrder(tx.QueryRow(ctx, orderGet, res.Tenant, res.OrderRef))
	if err != nil {
		return nil, h.failed(res, "stale_read", err)
	}
	res.Verdict, res.Status, res.Reason = VerdictStale, o.Status, staleReason(o, res.Transition.Target())
	if err := recordStale(ctx, tx, res, ev, o); err != nil {
		return nil, h.failed(res, "stale", err)
	}
	return h.commit(ctx, tx, res)
}

// staleReason says why the guard refused: the order's status does not
// allow the transition (checked first), else the event is not newer than
// the order's last.
func staleReason(o *Order, to Status) string {
	if !slices.Contains(allowedFrom[to], string(o.Status)) {
		return ReasonNotAllowed
	}
	return ReasonOlder
}

// enqueue freezes the change's notification intent and inserts its outbox
// row and River job, in the effect's transaction: the notification exists
// exactly when the effect does, and its key is fixed before anything is
// sent. A notification that cannot be frozen (unknown tool, a recipient
// that fails its rule) is stored as failed for review; the payment's
// effect still commits.
func (h *Handler) enqueue(ctx context.Context, tx pgx.Tx, res *Result, ev *Event, paymentRef string) error {
	n, err := h.cfg.Notify(ctx, tx, &Change{
		Tenant: res.Tenant, Provider: res.Provider, EffectKey: res.EffectKey, OrderRef: res.OrderRef, PaymentRef: paymentRef,
		Transition: res.Transition, Status: res.Status, OrderCreated: res.OrderCreated, Event: ev,
	})
	if err != nil {
		return err
	}
	if n == nil {
		h.log.Info("webhook: no notification for this change", "tenant", res.Tenant, "transition", string(res.Transition), "order_ref", res.OrderRef)
		return nil
	}
	ref := res.EffectKey + NotifyRefSuffix
	fr, err := h.cfg.Intents.Freeze(ctx, tx, intent.FreezeParams{
		Tenant: res.Tenant, Ref: ref, Action: n.Action, Fields: n.Fields, SourceRef: ev.ID,
	})
	if err != nil {
		code := freezeErrorCode(err)
		if code == "" {
			return fmt.Errorf("freeze: %w", err)
		}
		h.log.Warn("webhook: notification cannot be sent; stored as failed for review",
			"tenant", res.Tenant, "action", n.Action, "order_ref", res.OrderRef, "code", code)
		return insertNotification(ctx, tx, Notification{Tenant: res.Tenant, EffectKey: res.EffectKey, OrderRef: res.OrderRef,
			Action: n.Action, Status: NotifyFailed, ErrorCode: code})
	}
	key := fr.Intent.Key
	if err := insertNotification(ctx, tx, Notification{Tenant: res.Tenant, EffectKey: res.EffectKey, OrderRef: res.OrderRef,
		Action: n.Action, IntentRef: ref, Key: key, Status: NotifyPending}); err != nil {
		return err
	}
	if _, err := h.cfg.Queue.InsertTx(ctx, tx, NotifyArgs{Tenant: res.Tenant, EffectKey: res.EffectKey, Key: key}, nil); err != nil {
		return fmt.Errorf("enqueue: %w", err)
	}
	res.NotificationKey = key
	return nil
}

// freezeErrorCode names a freeze failure that retrying cannot fix, or ""
// for one that may pass (the database).
func freezeErrorCode(err error) string {
	var fe *derive.FieldError
	switch {
	case errors.As(err, &fe):
		return "invalid_field:" + fe.Field // the name only: the value may be personal data
	case errors.Is(err, derive.ErrUnknownAction), errors.Is(err, derive.ErrUnknownVersion):
		return "unknown_action"
	case errors.Is(err, intent.ErrKeyInUse):
		return "key_in_use"
	case errors.Is(err, intent.ErrInvalid), errors.Is(err, derive.ErrBadTenant):
		return "invalid"
	}
	return ""
}

// commit writes the delivery's log row and commits.
func (h *Handler) commit(ctx context.Context, tx pgx.Tx, res *Result) (*Result, error) {
	if err := logResult(ctx, tx, res); err != nil {
		return nil, h.failed(res, "log", err)
	}
	if err := tx.Commit(ctx); err != nil {
		return nil, h.failed(res, "commit", err)
	}
	attrs := []any{"provider", res.Provider, "tenant", res.Tenant, "event_id", res.EventID, "type", res.EventType,
		"transition", string(res.Transition), "order_ref", res.OrderRef}
	lvl := slog.LevelInfo
	switch res.Verdict {
	case VerdictProcessed:
		attrs = append(attrs, "status", string(res.Status), "order_created", res.OrderCreated, "notify", res.NotificationKey != "")
	case VerdictStale:
		// Worth a look: a provider's clock, a lost event, or a double payment.
		lvl = slog.LevelWarn
		attrs = append(attrs, "status", string(res.Status), "reason", res.Reason)
	}
	h.log.Log(ctx, lvl, "webhook: event "+string(res.Verdict), attrs...)
	return res, nil
}
