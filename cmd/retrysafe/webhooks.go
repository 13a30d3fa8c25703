package main

import (
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"net/http"

	"github.com/retrysafe/retrysafe/agent"
	"github.com/retrysafe/retrysafe/server/whatsapp"
)

// whatsappFlags configure the inbound WhatsApp webhook of `serve`. The
// webhook checks its own signature (X-Hub-Signature-256), so it is mounted
// outside the API's bearer-token authentication.
type whatsappFlags struct {
	appSecret   string
	verifyToken string
	tenants     string
}

func (w *whatsappFlags) register(fs *flag.FlagSet, e *env) {
	fs.StringVar(&w.appSecret, "whatsapp-app-secret", e.getenv("RETRYSAFE_WHATSAPP_APP_SECRET"),
		"app secret that signs WhatsApp webhooks (env RETRYSAFE_WHATSAPP_APP_SECRET); empty: POST "+whatsapp.Path+" is not served")
	fs.StringVar(&w.verifyToken, "whatsapp-verify-token", e.getenv("RETRYSAFE_WHATSAPP_VERIFY_TOKEN"),
		"token of the GET verification challenge (env RETRYSAFE_WHATSAPP_VERIFY_TOKEN)")
	fs.StringVar(&w.tenants, "whatsapp-tenants", e.getenv("RETRYSAFE_WHATSAPP_TENANTS"),
		"phone_number_id=tenant pairs, comma separated (env RETRYSAFE_WHATSAPP_TENANTS)")
}

// mount returns api, plus the WhatsApp webhook in front of it when
// configured.
func (w *whatsappFlags) mount(api http.Handler, d *database, log *slog.Logger) (http.Handler, error) {
	if w.appSecret == "" {
		if w.tenants != "" {
			return nil, errors.New("RETRYSAFE_WHATSAPP_TENANTS is set but RETRYSAFE_WHATSAPP_APP_SECRET is not: the webhook cannot verify signatures without it")
		}
		return api, nil
	}
	tenants, err := whatsapp.ParseTenants(w.tenants)
	if err != nil {
		return nil, fmt.Errorf("RETRYSAFE_WHATSAPP_TENANTS: %w", err)
	}
	q, err := agent.NewInserter(d.Pool, d.Schema)
	if err != nil {
		return nil, err
	}
	h, err := whatsapp.New(whatsapp.Config{DB: d.Pool, Queue: q, AppSecret: w.appSecret, VerifyToken: w.verifyToken, Tenants: tenants, Logger: log})
	if err != nil {
		return nil, fmt.Errorf("whatsapp webhook: %w", err)
	}
	mux := http.NewServeMux()
	mux.Handle(whatsapp.Path, h)
	mux.Handle("/", api)
	log.Info("serve: whatsapp webhook mounted", "path", whatsapp.Path, "numbers", len(tenants))
	return mux, nil
}
