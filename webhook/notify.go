package webhook

import (
	"context"
	"fmt"
	"maps"

	"github.com/retrysafe/retrysafe/agent"
	"github.com/retrysafe/retrysafe/tools"
)

// Change is an applied transition: what a Notifier decides on.
type Change struct {
	Tenant       string
	Provider     string
	EffectKey    string
	OrderRef     string
	PaymentRef   string
	Transition   Transition
	Status       Status // the order's status now
	OrderCreated bool   // this event created the order row
	// Event is the event that applied it. Its Object.Metadata may carry
	// personal data: never log it.
	Event *Event
}

// Message is a customer message to send through a tool.
type Message struct {
	// Action is the tool, e.g. tools.WhatsAppName. The intents' deriver
	// must know it.
	Action string
	// Fields are the tool's fields. The handler sets the intent_ref
	// ("<effect key>:notify"), so the key is fixed by (tenant, effect,
	// "notify") and these fields as first frozen.
	Fields map[string]any
}

// Notifier decides the notification an applied change owes, or nil for
// none. It runs inside the effect's transaction, and db is that
// transaction: it may read the tenant's tables but must not call out. An
// error rolls the delivery back (500, the provider redelivers), so return
// one only for failures that may pass.
type Notifier func(ctx context.Context, db DBTX, c *Change) (*Message, error)

// NotifyNone is a Notifier that never notifies.
func NotifyNone(context.Context, DBTX, *Change) (*Message, error) { return nil, nil }

// DefaultTemplates names the WhatsApp template (or e-mail template) sent
// for each transition. Disputes notify nobody: the customer opened them.
func DefaultTemplates() map[Transition]string {
	return map[Transition]string{
		OrderPaid:              "pagamento_confirmado",
		OrderPartiallyRefunded: "reembolso_parcial_confirmado",
		OrderRefunded:          "reembolso_confirmado",
	}
}

// NotifyConfig configures DefaultNotifier. Zero fields take the defaults.
type NotifyConfig struct {
	// Templates per transition; a transition without one sends nothing.
	// Nil: DefaultTemplates().
	Templates map[Transition]string
	// Language of WhatsApp templates. Default "pt_BR".
	Language string
	// WhatsAppAction and EmailAction are the tools used. Defaults
	// tools.WhatsAppName and tools.EmailSendName.
	WhatsAppAction string
	EmailAction    string
	// PhoneKey and EmailKey are the metadata keys read for the recipient.
	// Defaults "customer_phone" and "customer_email".
	PhoneKey string
	EmailKey string
	// SkipConversations turns off the last resort: the WhatsApp
	// conversation whose open invoice is the order (conversations table,
	// kept by the agent).
	SkipConversations bool
}

// DefaultNotifier sends the transition's template to the first recipient
// found: the event metadata's phone (WhatsApp), its e-mail (e-mail), then
// the WhatsApp conversation whose invoice_ref is the order. No template or
// no recipient: no notification.
func DefaultNotifier(nc NotifyConfig) Notifier {
	if nc.Templates == nil {
		nc.Templates = DefaultTemplates()
	}
	nc.Templates = maps.Clone(nc.Templates)
	if nc.Language == "" {
		nc.Language = "pt_BR"
	}
	if nc.WhatsAppAction == "" {
		nc.WhatsAppAction = tools.WhatsAppName
	}
	if nc.EmailAction == "" {
		nc.EmailAction = tools.EmailSendName
	}
	if nc.PhoneKey == "" {
		nc.PhoneKey = "customer_phone"
	}
	if nc.EmailKey == "" {
		nc.EmailKey = "customer_email"
	}
	whatsapp := func(to, tpl string) *Message {
		return &Message{Action: nc.WhatsAppAction, Fields: map[string]any{"to": to, "template": tpl, "language": nc.Language}}
	}
	return func(ctx context.Context, db DBTX, c *Change) (*Message, error) {
		tpl := nc.Templates[c.Transition]
		if tpl == "" {
			return nil, nil
		}
		var md map[string]string
		if c.Event != nil {
			md = c.Event.Object.Metadata
		}
		if to := md[nc.PhoneKey]; to != "" {
			return whatsapp(to, tpl), nil
		}
		if to := md[nc.EmailKey]; to != "" {
			return &Message{Action: nc.EmailAction, Fields: map[string]any{"to": to, "template": tpl}}, nil
		}
		if nc.SkipConversations {
			return nil, nil
		}
		waID, err := agent.ConversationByInvoice(ctx, db, c.Tenant, c.OrderRef)
		if err != nil {
			return nil, fmt.Errorf("webhook: notification recipient: %w", err)
		}
		if waID == "" {
			return nil, nil
		}
		return whatsapp("+"+waID, tpl), nil
	}
}
