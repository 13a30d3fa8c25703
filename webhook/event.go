package webhook

import (
	"bytes"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"errors"
	"strings"
	"time"
	"unicode/utf8"
)

// maxRef bounds identifiers taken from an event (ids, types, references).
const maxRef = 255

// Event is what this package reads of a provider's event: Stripe's shape,
// which the sandbox PSP follows. Unknown fields are ignored.
//
//	{"id":"evt_...","type":"payment_intent.succeeded","created":1700000000,
//	 "sequence":42,               optional: a provider's per-object counter
//	 "account":"acct_...",        optional: a connected account
//	 "request":{"id":"req_...","idempotency_key":"..."},  optional: the API request that caused it
//	 "data":{"object":{"id":"pi_...","object":"payment_intent",
//	   "payment_intent":"pi_...","charge":"ch_...","invoice":"in_...","latest_charge":"ch_...",
//	   "payments":{"data":[{"payment":{"payment_intent":"pi_...","charge":"ch_..."}}]},
//	   "amount":18000,"amount_refunded":5000,
//	   "idempotency_key":"...","metadata":{"order_ref":"..."}}}}
type Event struct {
	ID       string
	Type     string
	Created  time.Time // the provider's creation time, whole seconds, UTC
	Sequence *int64
	Account  string
	// RequestKey is request.idempotency_key: the Idempotency-Key of the API
	// request that caused the event (Stripe). A charge retrysafe made
	// carries its frozen key here.
	RequestKey string
	Object     Object
}

// Object is what this package reads of data.object. Reference fields may
// be an id or an expanded object with an "id".
type Object struct {
	ID             string
	Kind           string // its "object": payment_intent, charge, invoice, dispute, pix_charge...
	PaymentIntent  string
	Charge         string
	Invoice        string
	IdempotencyKey string
	// LatestCharge is a PaymentIntent's latest_charge.
	LatestCharge string
	// Payments are the payments an invoice lists (Stripe's API versions
	// from 2025-03-31.basil on replace an invoice's payment_intent and
	// charge by payments.data[].payment, when the list is included).
	Payments []PaymentRefs
	// Amount and AmountRefunded are the object's amount and
	// amount_refunded in the smallest currency unit, when it has them (a
	// charge).
	Amount, AmountRefunded *int64
	// Metadata holds the object's string metadata. It may carry personal
	// data (a phone, an e-mail): never log it.
	Metadata map[string]string
}

// PaymentRefs is one payment of an invoice.
type PaymentRefs struct {
	PaymentIntent, Charge string
}

type wireEvent struct {
	ID       *string `json:"id"`
	Type     *string `json:"type"`
	Created  *int64  `json:"created"`
	Sequence *int64  `json:"sequence"`
	Account  *string `json:"account"`
	Request  request `json:"request"`
	Data     *struct {
		Object json.RawMessage `json:"object"`
	} `json:"data"`
}

type wireObject struct {
	ID             string `json:"id"`
	Object         string `json:"object"`
	PaymentIntent  idRef  `json:"payment_intent"`
	Charge         idRef  `json:"charge"`
	Invoice        idRef  `json:"invoice"`
	IdempotencyKey string `json:"idempotency_key"`
	LatestCharge   idRef  `json:"latest_charge"`
	Amount         *int64 `json:"amount"`
	AmountRefunded *int64 `json:"amount_refunded"`
	Payments       *struct {
		Data []struct {
			Payment *struct {
				PaymentIntent idRef `json:"payment_intent"`
				Charge        idRef `json:"charge"`
			} `json:"payment"`
		} `json:"data"`
	} `json:"payments"`
	// An invoice_payment's own payment.
	Payment *struct {
		PaymentIntent idRef `json:"payment_intent"`
		Charge        idRef `json:"charge"`
	} `json:"payment"`
	Metadata map[string]json.RawMessage `json:"metadata"`
}

// request is an event's request: {"id","idempotency_key"} since Stripe's
// 2017-05-25 API version, a bare request id before, or null.
type request struct {
	IdempotencyKey string
}

func (r *request) UnmarshalJSON(b []byte) error {
	b = bytes.TrimSpace(b)
	if len(b) == 0 || b[0] != '{' {
		return nil // null, or an old version's request id: no key
	}
	var o struct {
		IdempotencyKey *string `json:"idempotency_key"`
	}
	if err := json.Unmarshal(b, &o); err != nil {
		return err
	}
	if o.IdempotencyKey != nil {
		r.IdempotencyKey = *o.IdempotencyKey
	}
	return nil
}

// idRef is a reference that a provider may send as an id, null, or an
// expanded object carrying the id.
type idRef string

func (r *idRef) UnmarshalJSON(b []byte) error {
	b = bytes.TrimSpace(b)
	switch {
	case bytes.Equal(b, []byte("null")):
		*r = ""
		return nil
	case len(b) > 0 && b[0] == '{':
		var o struct {
			ID string `json:"id"`
		}
		if err := json.Unmarshal(b, &o); err != nil {
			return err
		}
		*r = idRef(o.ID)
		return nil
	}
	var s string
	if err := json.Unmarshal(b, &s); err != nil {
		return err
	}
	*r = idRef(s)
	return nil
}

// latestCreated refuses creation times no provider sends (year 5138 and
// on): a wrong unit (milliseconds) must not pin an order's guard forever.
const latestCreated = 1e11

// ParseEvent reads the envelope: id, type, created, and data.object as a
// JSON object. The object's fields are read by ParseObject, only for event
// types that map to a transition, so that an ignored event of another
// shape is never refused. Errors are *MalformedError.
func ParseEvent(body []byte) (*Event, json.RawMessage, error) {
	var w wireEvent
	if err := json.Unmarshal(body, &w); err != nil {
		return nil, nil, malformed("json", "%v", jsonReason(err))
	}
	ev := &Event{}
	switch {
	case w.ID == nil || !validRef(*w.ID):
		return nil, nil, malformed("id", "id missing, empty or longer than %d bytes", maxRef)
	case w.Type == nil || !validRef(*w.Type):
		return nil, nil, malformed("type", "type missing or empty")
	case w.Created == nil || *w.Created <= 0 || *w.Created >= latestCreated:
		return nil, nil, malformed("created", "created missing or not unix seconds")
	case w.Sequence != nil && *w.Sequence < 0:
		return nil, nil, malformed("sequence", "sequence negative")
	case w.Data == nil || len(w.Data.Object) == 0 || w.Data.Object[0] != '{':
		return nil, nil, malformed("data", "data.object missing or not an object")
	}
	ev.ID, ev.Type = *w.ID, *w.Type
	ev.Created = time.Unix(*w.Created, 0).UTC()
	ev.Sequence = w.Sequence
	if w.Account != nil {
		ev.Account = *w.Account
	}
	ev.RequestKey = w.Request.IdempotencyKey
	return ev, w.Data.Object, nil
}

// ParseObject reads data.object into ev.Object.
func ParseObject(ev *Event, raw json.RawMessage) error {
	var o wireObject
	if err := json.Unmarshal(raw, &o); err != nil {
		return malformed("object", "%v", jsonReason(err))
	}
	ev.Object = Object{
		ID: o.ID, Kind: o.Object, PaymentIntent: string(o.PaymentIntent), Charge: string(o.Charge),
		Invoice: string(o.Invoice), IdempotencyKey: o.IdempotencyKey, LatestCharge: string(o.LatestCharge),
		Amount: o.Amount, AmountRefunded: o.AmountRefunded,
	}
	if o.Payments != nil {
		for _, d := range o.Payments.Data {
			if d.Payment != nil {
				ev.Object.Payments = append(ev.Object.Payments, PaymentRefs{string(d.Payment.PaymentIntent), string(d.Payment.Charge)})
			}
		}
	}
	if o.Payment != nil && o.Object == "invoice_payment" {
		ev.Object.Payments = []PaymentRefs{{string(o.Payment.PaymentIntent), string(o.Payment.Charge)}}
	}
	for k, v := range o.Metadata {
		var s string
		if json.Unmarshal(v, &s) == nil { // providers send strings; anything else is not ours
			if ev.Object.Metadata == nil {
				ev.Object.Metadata = map[string]string{}
			}
			ev.Object.Metadata[k] = s
		}
	}
	return nil
}

// jsonReason keeps the decoder's reason without quoting the body.
func jsonReason(err error) string {
	var se *json.SyntaxError
	var te *json.UnmarshalTypeError
	switch {
	case errors.As(err, &se):
		return "invalid JSON"
	case errors.As(err, &te):
		return "field " + te.Field + " has the wrong type"
	}
	return "not the event's JSON shape"
}

func validRef(s string) bool {
	s = strings.TrimSpace(s)
	if s == "" || len(s) > maxRef || !utf8.ValidString(s) {
		return false
	}
	for _, r := range s {
		if r < 0x20 || r == 0x7f {
			return false
		}
	}
	return true
}

// PaymentRef is the provider's reference of the payment an object is
// about, chosen so that every event about one payment names the same one:
// the payment intent when there is one (a payment_intent's own id; the
// payment_intent field of a charge, invoice or dispute; the first of an
// invoice's payments), else the charge (a charge's own id, or the charge
// field), else the object's id.
func (o Object) PaymentRef() string {
	switch {
	case o.Kind == "payment_intent" && o.ID != "":
		return o.ID
	case o.PaymentIntent != "":
		return o.PaymentIntent
	case len(o.Payments) > 0 && o.Payments[0].PaymentIntent != "":
		return o.Payments[0].PaymentIntent
	case strings.HasSuffix(o.Kind, "charge") && o.ID != "":
		return o.ID
	case o.Charge != "":
		return o.Charge
	case len(o.Payments) > 0 && o.Payments[0].Charge != "":
		return o.Payments[0].Charge
	}
	return o.ID
}

// NamesPayment reports whether the object names the payment it is about.
// An invoice under Stripe's current API versions does not (no
// payment_intent, no charge, payments not included): its PaymentRef is
// then its own id, which no other event of the payment shares.
func (o Object) NamesPayment() bool {
	if o.Kind != "invoice" && o.Kind != "invoice_payment" {
		return true
	}
	return o.PaymentRef() != o.ID
}

// ChargeRef is the charge an object names ("" when none): a charge's own
// id, a PaymentIntent's latest_charge, the charge field, or an invoice's
// first payment's charge.
func (o Object) ChargeRef() string {
	switch {
	case o.Kind == "charge" && o.ID != "":
		return o.ID
	case o.LatestCharge != "":
		return o.LatestCharge
	case o.Charge != "":
		return o.Charge
	case len(o.Payments) > 0:
		return o.Payments[0].Charge
	}
	return ""
}

// PartialRefund reports whether a refund leaves part of the amount
// charged: amount_refunded above zero and below amount.
func (o Object) PartialRefund() bool {
	return o.Amount != nil && o.AmountRefunded != nil && *o.AmountRefunded > 0 && *o.AmountRefunded < *o.Amount
}

// OrderRef is the order an object is about, from the event alone: the
// first of metadataKeys the metadata sets, else the invoice it belongs to
// (an invoice's own id). "" when the event does not say; the handler then
// asks the tenant's records (see the package documentation).
func (o Object) OrderRef(metadataKeys ...string) string {
	for _, k := range metadataKeys {
		if v := strings.TrimSpace(o.Metadata[k]); v != "" {
			return v
		}
	}
	if o.Invoice != "" {
		return strings.TrimSpace(o.Invoice)
	}
	if o.Kind == "invoice" {
		return strings.TrimSpace(o.ID)
	}
	return ""
}

// EffectKey identifies an effect: lowercase hex SHA-256 over the
// length-prefixed (provider, transition, order, payment reference). The
// event id is deliberately absent: two events announcing one payment are
// one effect. The tenant is not hashed; it leads every key it is stored
// under.
func EffectKey(provider string, t Transition, orderRef, paymentRef string) string {
	h := sha256.New()
	var n [binary.MaxVarintLen64]byte
	for _, s := range []string{"retrysafe.effect.v1", provider, string(t), orderRef, paymentRef} {
		h.Write(n[:binary.PutUvarint(n[:], uint64(len(s)))])
		h.Write([]byte(s))
	}
	return hex.EncodeToString(h.Sum(nil))
}
