package labcli

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"strings"

	"github.com/retrysafe/retrysafe/internal/cli"
	sandboxpix "github.com/retrysafe/retrysafe/sandbox/apipix"
)

// PSP flavours of `retrysafe sandbox psp`.
const (
	flavourV1     = "v1"     // the invented POST /v1/pix/charges API (Idempotency-Key)
	flavourAPIPix = "apipix" // the Central Bank's API Pix
	// defaultFlavour is what real PSPs speak; v1 stays for the v1 flavour
	// of the demo and the restart test (--psp v1), which ask for it.
	defaultFlavour = flavourAPIPix
)

// splitFlavour takes --flavour out of a `sandbox psp` command line.
func splitFlavour(args []string) (flavour string, rest []string, err error) {
	flavour = defaultFlavour
	for i := 0; i < len(args); i++ {
		a := args[i]
		name, val, hasVal := strings.Cut(strings.TrimLeft(a, "-"), "=")
		if !strings.HasPrefix(a, "-") || name != "flavour" {
			rest = append(rest, a)
			continue
		}
		if !hasVal {
			if i+1 >= len(args) {
				return "", nil, errors.New("--flavour needs a value: v1 or apipix")
			}
			i++
			val = args[i]
		}
		flavour = val
	}
	switch flavour {
	case flavourV1, flavourAPIPix:
		return flavour, rest, nil
	}
	return "", nil, fmt.Errorf("--flavour %q: want %s or %s", flavour, flavourV1, flavourAPIPix)
}

// flavourFlag documents --flavour in a flag set that does not read it
// (splitFlavour does, before parsing).
func flavourFlag(fs *flag.FlagSet) {
	fs.String("flavour", defaultFlavour, "PSP API: "+flavourV1+" (POST /v1/pix/charges with Idempotency-Key) or "+flavourAPIPix+" (the Central Bank's API Pix: PUT /api/cob/{txid}, OAuth2)")
}

// sandboxAPIPixHelp is `retrysafe sandbox psp --flavour apipix --help`'s
// text.
const sandboxAPIPixHelp = `Runs the sandbox PSP speaking the Central Bank's API Pix (release 2.9.0),
as the specification's example servers do, with the API under /api:

  POST   /oauth/token                     client credentials by HTTP Basic
                                          (grant_type=client_credentials) → {"access_token","expires_in"}
  PUT    /api/cob/{txid}                  create an immediate charge: 201; the same body again: 201
                                          unchanged; another body while ATIVA: overwritten (the spec's
                                          upsert); another body once CONCLUIDA: 400 CobOperacaoInvalida
  GET    /api/cob/{txid}                  the charge, with pix[] once paid; 404
  GET    /api/pix/{e2eid}                 one Pix received
  PUT    /api/pix/{e2eid}/devolucao/{id}  a refund: 201 EM_PROCESSAMENTO, settled DEVOLVIDO shortly;
                                          an id reused with another amount, or refunds over the Pix: 400
  GET    /api/pix/{e2eid}/devolucao/{id}
  PUT    /api/webhook/{chave}             {"webhookUrl"}: where the Pix callback goes; GET, DELETE
  POST   /sandbox/cob/{txid}/pagar        the customer pays ({"valor","infoPagador"} optional)
  POST   /sandbox/pix/{e2eid}/reenviar    notify a Pix again (a redelivery)
  GET    /sandbox/stats, /healthz

Every answer uses a status the specification defines for its operation;
errors are problem+json (type https://pix.bcb.gov.br/api/v2/error/...). A
missing or expired token is 403 AcessoNegado.

Callback: POST {webhookUrl}/pix with {"pix":[...]} for each payment and each
settled refund, grouped (up to --group-max Pix per call), redelivered with
exponential backoff until a 2xx answer. "/pix" is appended to the URL's
text, so a URL ending in "?hmac=...&ignorar=" keeps its query.

Faults, per request with the header X-Sandbox-Fault, or for every PUT with
--fault (at --fault-rate), answered 503 ServicoIndisponivel: fail-before
(not executed), drop-after (executed, connection dropped), fail-after
(executed, then 503), delay=D, slow=D; combine with commas.

State is in memory (one receiver). Prints one line, "retrysafe sandbox psp:
listening on http://HOST:PORT", on stdout when ready (--addr with port 0
picks a free port). SIGTERM or SIGINT: finish requests in progress, exit 0.`

func runSandboxPSPAPIPix(ctx context.Context, e *cli.Env, args []string) error {
	def := sandboxpix.Config{}.WithDefaults()
	fs := cli.NewFlagSet(e, "sandbox psp --flavour apipix", "sandbox psp --flavour apipix [--addr HOST:PORT] [--client-id ID] [--client-secret SECRET] [flags]",
		sandboxAPIPixHelp)
	var (
		sf  standinFlags
		cfg sandboxpix.Config
	)
	sf.register(fs, e, "RETRYSAFE_PSP_ADDR", "127.0.0.1:8091", "PUT", &cfg.FaultRate)
	flavourFlag(fs)
	fs.StringVar(&cfg.ClientID, "client-id", def.ClientID, "the OAuth2 client id the PSP accepts (env RETRYSAFE_PSP_CLIENT_ID)")
	fs.StringVar(&cfg.ClientSecret, "client-secret", def.ClientSecret, "the OAuth2 client secret the PSP accepts (env RETRYSAFE_PSP_CLIENT_SECRET; prefer the env)")
	fs.DurationVar(&cfg.TokenTTL, "token-ttl", def.TokenTTL, "lifetime of an access token")
	fs.StringVar(&cfg.WebhookURL, "webhook-url", e.Getenv("RETRYSAFE_PSP_WEBHOOK_URL"), "webhook URL for chaves with none registered by PUT /api/webhook/{chave} (env RETRYSAFE_PSP_WEBHOOK_URL); \"/pix\" is appended")
	fs.IntVar(&cfg.GroupMax, "group-max", def.GroupMax, "most Pix in one callback")
	fs.DurationVar(&cfg.WebhookBackoff, "webhook-backoff", def.WebhookBackoff, "pause after a failed callback, doubled per attempt")
	fs.DurationVar(&cfg.MaxBackoff, "webhook-max-backoff", def.MaxBackoff, "longest pause between callbacks")
	fs.IntVar(&cfg.MaxAttempts, "webhook-max-attempts", def.MaxAttempts, "callback attempts before a notification is dropped")
	if err := sf.parse(e, fs, args); err != nil {
		return err
	}
	// Read after parsing, so that --help never shows them.
	if v := e.Getenv("RETRYSAFE_PSP_CLIENT_ID"); v != "" && cfg.ClientID == def.ClientID {
		cfg.ClientID = v
	}
	if v := e.Getenv("RETRYSAFE_PSP_CLIENT_SECRET"); v != "" && cfg.ClientSecret == def.ClientSecret {
		cfg.ClientSecret = v
	}
	cfg.Fault, cfg.Logger = sf.fault, sf.log
	srv, err := sandboxpix.New(cfg)
	if err != nil {
		return err
	}
	if err := sf.lf.Check(); err != nil {
		return err
	}
	s := cli.SandboxHTTP("psp", sf.log, srv.Handler(), "flavour", flavourAPIPix, "fault", cfg.Fault.String(), "webhook", cfg.WebhookURL != "")
	s.Background = srv.Run
	return sf.lf.Serve(ctx, e, s)
}
