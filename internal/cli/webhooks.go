package cli

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"net/http"

	"github.com/retrysafe/retrysafe/agent"
	"github.com/retrysafe/retrysafe/intent"
	"github.com/retrysafe/retrysafe/webhook"
	"github.com/retrysafe/retrysafe/whatsapp"
)

// webhookFlags configure the inbound webhooks of `serve`: WhatsApp
// messages (POST whatsapp.Path), payment events, each provider signing
// with its own secret (POST webhook.Pattern), and the API Pix callback.
// Each webhook checks its own signature, so they are mounted outside the
// API's bearer-token authentication.
type webhookFlags struct {
	appSecret, verifyToken, waTenants             string // WhatsApp
	secrets, tenants, presets, headers, orderKeys string // payments: provider=value lists
	pix                                           pixWebhookFlags
}

func (w *webhookFlags) register(fs *flag.FlagSet, e *Env) {
	fs.StringVar(&w.appSecret, "whatsapp-app-secret", e.Getenv("RETRYSAFE_WHATSAPP_APP_SECRET"),
		"app secret that signs WhatsApp webhooks (env RETRYSAFE_WHATSAPP_APP_SECRET); empty: POST "+whatsapp.Path+" is not served")
	fs.StringVar(&w.verifyToken, "whatsapp-verify-token", e.Getenv("RETRYSAFE_WHATSAPP_VERIFY_TOKEN"),
		"token of the GET verification challenge (env RETRYSAFE_WHATSAPP_VERIFY_TOKEN)")
	fs.StringVar(&w.waTenants, "whatsapp-tenants", e.Getenv("RETRYSAFE_WHATSAPP_TENANTS"),
		"phone_number_id=tenant pairs, comma separated (env RETRYSAFE_WHATSAPP_TENANTS)")
	fs.StringVar(&w.secrets, "payment-webhook-secrets", e.Getenv("RETRYSAFE_PAYMENT_WEBHOOK_SECRETS"),
		"provider=secret pairs that sign payment webhooks (env RETRYSAFE_PAYMENT_WEBHOOK_SECRETS, e.g. stripe=whsec_...); empty: "+webhook.Pattern+" is not served")
	fs.StringVar(&w.tenants, "payment-webhook-tenants", e.Getenv("RETRYSAFE_PAYMENT_WEBHOOK_TENANTS"),
		"provider=tenant pairs: whose payments each provider reports (env RETRYSAFE_PAYMENT_WEBHOOK_TENANTS)")
	fs.StringVar(&w.presets, "payment-webhook-presets", e.Getenv("RETRYSAFE_PAYMENT_WEBHOOK_PRESETS"),
		"provider=preset pairs, preset "+webhook.PresetStripe+" (Stripe-Signature, Stripe's events, metadata order_ref or order_id) or "+
			webhook.PresetGeneric+" (Retrysafe-Signature, metadata order_ref); unlisted: "+webhook.PresetStripe+
			" for a provider named stripe, else "+webhook.PresetGeneric+" (env RETRYSAFE_PAYMENT_WEBHOOK_PRESETS)")
	fs.StringVar(&w.headers, "payment-webhook-headers", e.Getenv("RETRYSAFE_PAYMENT_WEBHOOK_HEADERS"),
		"provider=header pairs: the signature header, when not the preset's (env RETRYSAFE_PAYMENT_WEBHOOK_HEADERS)")
	fs.StringVar(&w.orderKeys, "payment-webhook-order-keys", e.Getenv("RETRYSAFE_PAYMENT_WEBHOOK_ORDER_KEYS"),
		"provider=key|key... pairs: the metadata keys that name the order, in order, when not the preset's (env RETRYSAFE_PAYMENT_WEBHOOK_ORDER_KEYS)")
	w.pix.register(fs, e)
}

// providers builds the payment providers from the flags.
func (w *webhookFlags) providers() (map[string]webhook.Provider, error) {
	return webhook.ParseProviderLists(webhook.ProviderLists{
		Secrets: w.secrets, Tenants: w.tenants, Presets: w.presets, Headers: w.headers, OrderKeys: w.orderKeys,
	})
}

// mount returns api, with the configured webhooks in front of it.
func (w *webhookFlags) mount(ctx context.Context, api http.Handler, d *database, intents *intent.Store, log *slog.Logger) (http.Handler, error) {
	if w.appSecret == "" && w.waTenants != "" {
		return nil, usageErr(errors.New("RETRYSAFE_WHATSAPP_TENANTS is set but RETRYSAFE_WHATSAPP_APP_SECRET is not: the webhook cannot verify signatures without it"))
	}
	if w.secrets == "" && w.tenants != "" {
		return nil, usageErr(errors.New("RETRYSAFE_PAYMENT_WEBHOOK_TENANTS is set but RETRYSAFE_PAYMENT_WEBHOOK_SECRETS is not: the webhook cannot verify signatures without it"))
	}
	if w.appSecret == "" && w.secrets == "" && !w.pix.enabled() {
		return api, nil
	}
	if err := checkRiver(ctx, d, "the webhooks queue into"); err != nil {
		return nil, err
	}
	q, err := agent.NewInserter(d.Pool, d.Schema)
	if err != nil {
		return nil, err
	}
	mux := http.NewServeMux()
	mux.Handle("/", api)
	if w.appSecret != "" {
		tenants, err := whatsapp.ParseTenants(w.waTenants)
		if err != nil {
			return nil, usageErr(fmt.Errorf("RETRYSAFE_WHATSAPP_TENANTS: %w", err))
		}
		h, err := whatsapp.New(whatsapp.Config{DB: d.Pool, Queue: q, AppSecret: w.appSecret, VerifyToken: w.verifyToken, Tenants: tenants, Logger: log})
		if err != nil {
			return nil, fmt.Errorf("whatsapp webhook: %w", err)
		}
		mux.Handle(whatsapp.Path, h)
		log.Info("serve: whatsapp webhook mounted", "path", whatsapp.Path, "numbers", len(tenants))
	}
	if w.secrets != "" {
		providers, err := w.providers()
		if err != nil {
			return nil, fmt.Errorf("RETRYSAFE_PAYMENT_WEBHOOK_*: %w", err)
		}
		h, err := webhook.New(webhook.Config{DB: d.Pool, Queue: q, Intents: intents, Providers: providers, Logger: log})
		if err != nil {
			return nil, fmt.Errorf("payment webhook: %w", err)
		}
		mux.Handle("POST "+webhook.Pattern, h)
		for name, pr := range providers {
			log.Info("serve: payment webhook mounted", "path", webhook.PathPrefix+name, "preset", pr.Preset, "signature_header", pr.SignatureHeader)
		}
	}
	if err := w.pix.mount(mux, webhook.Config{DB: d.Pool, Queue: q, Intents: intents, Logger: log}, log); err != nil {
		return nil, err
	}
	return mux, nil
}
