package labcli

import (
	"context"

	"github.com/retrysafe/retrysafe/internal/cli"
	"github.com/retrysafe/retrysafe/sandbox/cloudapi"
)

// sandboxWhatsAppHelp is `retrysafe sandbox whatsapp --help`'s text.
const sandboxWhatsAppHelp = `Runs a WhatsApp Cloud API stand-in that accepts what the
whatsapp.send_template tool sends and deduplicates it by Idempotency-Key:

  POST /v1/messages                      {"to","template","language"}, Idempotency-Key required
  POST /v{N}/{phone_number_id}/messages  the Cloud API's {"messaging_product":"whatsapp",
                                         "to","type":"template"|"text",...}; key optional
     → 200 {"messaging_product":"whatsapp","contacts":[...],"messages":[{"id":"wamid...."}]}
  GET  /v1/messages?idempotency_key=K    the stored answer for K, or 404 (the tool's lookup)
  GET  /_sandbox/messages                {"data":[...]} every message (?to=, ?template=)
  DELETE /_sandbox/messages              forget everything

Every POST needs "Authorization: Bearer <token>" (any token unless --token
is set); the token scopes the keys. The same key with the same request
returns the first answer byte for byte (Idempotent-Replayed: true); the same
key with a different body is 422 and sends nothing. Messages are kept in
memory only: a restart forgets them.

Faults: header X-Sandbox-Fault on a request, or --fault for every POST
without one (with --fault-rate): fail-before (500, nothing sent),
drop-after (sent, connection dropped), fail-after (sent, 500), delay=D
(before sending), slow=D (sent, answer after D); combine with commas.

Prints one line, "retrysafe sandbox whatsapp: listening on
http://HOST:PORT", on stdout when ready (--addr with port 0 picks a free
port). SIGTERM or SIGINT: finish requests in progress, exit 0.`

// runSandboxWhatsApp is `retrysafe sandbox whatsapp`.
func runSandboxWhatsApp(ctx context.Context, e *cli.Env, args []string) error {
	fs := cli.NewFlagSet(e, "sandbox whatsapp", "sandbox whatsapp [--addr HOST:PORT] [--fault SPEC] [flags]", sandboxWhatsAppHelp)
	var (
		sf  standinFlags
		cfg cloudapi.Config
	)
	sf.register(fs, e, "RETRYSAFE_WHATSAPP_ADDR", "127.0.0.1:8093", "POST", &cfg.FaultRate)
	fs.StringVar(&cfg.Token, "token", "", "accept only this bearer token (default: any)")
	if err := sf.parse(e, fs, args); err != nil {
		return err
	}
	cfg.Fault, cfg.Logger = sf.fault, sf.log
	srv, err := cloudapi.New(cfg)
	if err != nil {
		return err
	}
	if err := sf.lf.Check(); err != nil {
		return err
	}
	return sf.lf.Serve(ctx, e, cli.SandboxHTTP("whatsapp", sf.log, srv,
		"fault", cfg.Fault.String(), "fault_rate", cfg.FaultRate, "token_required", cfg.Token != ""))
}
