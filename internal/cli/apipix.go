package cli

import (
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"net/http"
	"strings"

	"github.com/retrysafe/retrysafe/tools"
	"github.com/retrysafe/retrysafe/tools/apipix"
	"github.com/retrysafe/retrysafe/webhook"
)

// apipixFlags configure the pix.cob and pix.refund tools (API Pix).
type apipixFlags struct {
	url, tokenURL, clientID, clientSecret string
	cert, key, ca                         string
	chave, scopes                         string
	expiracao                             int
}

func (f *apipixFlags) register(fs *flag.FlagSet, e *Env) {
	fs.StringVar(&f.url, "apipix-url", e.Getenv("RETRYSAFE_APIPIX_URL"),
		"base URL of the PSP's API Pix for pix.cob and pix.refund, e.g. https://pix.example.com/api (env RETRYSAFE_APIPIX_URL; empty: tools off)")
	fs.StringVar(&f.tokenURL, "apipix-token-url", e.Getenv("RETRYSAFE_APIPIX_TOKEN_URL"),
		"OAuth2 token endpoint (env RETRYSAFE_APIPIX_TOKEN_URL; default: the API's host + /oauth/token)")
	fs.StringVar(&f.clientID, "apipix-client-id", e.Getenv("RETRYSAFE_APIPIX_CLIENT_ID"), "OAuth2 client id the PSP issued (env RETRYSAFE_APIPIX_CLIENT_ID)")
	fs.StringVar(&f.clientSecret, "apipix-client-secret", "", "OAuth2 client secret (env RETRYSAFE_APIPIX_CLIENT_SECRET; prefer the env)")
	fs.StringVar(&f.cert, "apipix-cert", e.Getenv("RETRYSAFE_APIPIX_CERT"), "PEM client certificate for mutual TLS (env RETRYSAFE_APIPIX_CERT)")
	fs.StringVar(&f.key, "apipix-key", e.Getenv("RETRYSAFE_APIPIX_KEY"), "PEM private key of the certificate (env RETRYSAFE_APIPIX_KEY)")
	fs.StringVar(&f.ca, "apipix-ca", e.Getenv("RETRYSAFE_APIPIX_CA"), "PEM CA bundle to verify the PSP with (env RETRYSAFE_APIPIX_CA; default: system roots)")
	fs.StringVar(&f.chave, "apipix-chave", e.Getenv("RETRYSAFE_APIPIX_CHAVE"), "the receiver's Pix key the charges are paid to (env RETRYSAFE_APIPIX_CHAVE)")
	fs.StringVar(&f.scopes, "apipix-scopes", e.Getenv("RETRYSAFE_APIPIX_SCOPES"), "OAuth2 scopes, space separated, for PSPs that want them (env RETRYSAFE_APIPIX_SCOPES)")
	fs.IntVar(&f.expiracao, "apipix-expiracao", apipix.DefaultExpiracao, "calendario.expiracao of each charge, in seconds")
	f.clientSecret = e.Getenv("RETRYSAFE_APIPIX_CLIENT_SECRET")
}

// add registers pix.cob and pix.refund when the API Pix URL is set.
func (f *apipixFlags) add(reg *tools.Registry) error {
	if f.url == "" {
		return nil
	}
	if err := checkURL(f.url); err != nil {
		return fmt.Errorf("RETRYSAFE_APIPIX_URL: %w", err)
	}
	switch {
	case f.clientID == "" || f.clientSecret == "":
		return errors.New("RETRYSAFE_APIPIX_CLIENT_ID and RETRYSAFE_APIPIX_CLIENT_SECRET are required with RETRYSAFE_APIPIX_URL")
	case f.chave == "":
		return errors.New("RETRYSAFE_APIPIX_CHAVE (the receiver's Pix key) is required with RETRYSAFE_APIPIX_URL")
	}
	cfg := apipix.Config{BaseURL: f.url, TokenURL: f.tokenURL, ClientID: f.clientID, ClientSecret: f.clientSecret,
		Scopes: strings.Fields(f.scopes), CertFile: f.cert, KeyFile: f.key, CAFile: f.ca, Chave: f.chave, Expiracao: f.expiracao}
	cob, err := apipix.NewCob(cfg)
	if err != nil {
		return err
	}
	refund, err := apipix.NewRefund(cfg)
	if err != nil {
		return err
	}
	if err := reg.Register(cob); err != nil {
		return err
	}
	return reg.Register(refund)
}

// pixWebhookFlags configure the API Pix callback of `serve`
// (POST /webhooks/pix/{provider}).
type pixWebhookFlags struct {
	secrets, tenants string
}

func (p *pixWebhookFlags) register(fs *flag.FlagSet, e *Env) {
	fs.StringVar(&p.tenants, "pix-webhook-tenants", e.Getenv("RETRYSAFE_PIX_WEBHOOK_TENANTS"),
		"provider=tenant pairs for the API Pix callback "+webhook.PixPattern+" (env RETRYSAFE_PIX_WEBHOOK_TENANTS); with RETRYSAFE_PIX_WEBHOOK_SECRETS (provider=secret, env only)")
	p.secrets = e.Getenv("RETRYSAFE_PIX_WEBHOOK_SECRETS")
}

func (p *pixWebhookFlags) enabled() bool { return p.secrets != "" || p.tenants != "" }

// mount adds the Pix callback to mux.
func (p *pixWebhookFlags) mount(mux *http.ServeMux, cfg webhook.Config, log *slog.Logger) error {
	if !p.enabled() {
		return nil
	}
	providers, err := webhook.ParsePixProviders(p.secrets, p.tenants)
	if err != nil {
		return fmt.Errorf("RETRYSAFE_PIX_WEBHOOK_SECRETS/TENANTS: %w", err)
	}
	h, err := webhook.NewPix(cfg, providers)
	if err != nil {
		return fmt.Errorf("pix webhook: %w", err)
	}
	mux.Handle("POST "+webhook.PixPattern, h)
	mux.Handle("POST "+webhook.PixCallbackPattern, h)
	log.Info("serve: pix webhook mounted", "path", webhook.PixPattern, "providers", len(providers))
	return nil
}
