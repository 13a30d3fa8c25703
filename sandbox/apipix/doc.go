// Package apipix is the sandbox PSP speaking the Central Bank's API Pix
// (release 2.9.0): a local stand-in for a Brazilian PSP's Pix Cobrança API
// that behaves like a real one where retries are concerned, so that
// tools/apipix, the Pix webhook and the demo can be tested against it.
//
//	POST   /oauth/token                       client credentials (HTTP Basic client id/secret) → bearer token
//	PUT    /api/cob/{txid}                    create an immediate charge; an upsert while ATIVA
//	GET    /api/cob/{txid}                    the charge, with pix[] once paid
//	GET    /api/pix/{e2eid}                   one Pix received
//	PUT    /api/pix/{e2eid}/devolucao/{id}    request a refund (devolução)
//	GET    /api/pix/{e2eid}/devolucao/{id}    read it
//	PUT    /api/webhook/{chave}               register the webhook URL {"webhookUrl"}
//	GET    /api/webhook/{chave}, DELETE       read / remove it
//	POST   /sandbox/cob/{txid}/pagar          the customer pays (not API Pix: the payer's side)
//	POST   /sandbox/pix/{e2eid}/reenviar      notify the Pix again (a redelivery)
//	GET    /sandbox/cobs                      every charge with its Pix ({"data":[...]})
//	GET    /_sandbox/requests                 the charge and refund requests received (PUT/GET /api/cob/{txid},
//	                                          /api/pix/{e2eid}/devolucao/{id}), with status
//	GET    /sandbox/stats                     counters a test or the demo checks
//	GET    /healthz
//
// # What it does as a PSP would
//
// PUT /cob/{txid} is an upsert, exactly as the specification allows: on a
// charge that is still ATIVA another body overwrites it (revisao + 1, and
// Stats counts the overwrite, which retrysafe must never cause); the same
// body again answers 201 with the charge unchanged; a different body on a
// charge that is no longer ATIVA is the violation CobOperacaoInvalida (400).
// A refund id reused with another amount, or refunds over the Pix's value,
// are PixDevolucaoInvalida (400). Refunds are answered EM_PROCESSAMENTO and
// settle (DEVOLVIDO) in the background loop.
//
// A charge's pixCopiaECola is a dynamic BR Code as a PSP's is (the EMV
// fields the Manual de Padrões para Iniciação do Pix lays out, the
// charge's location in field 26, the CRC-16 in field 63), so an
// application that renders or checks the code a customer is sent sees a
// real one. Its tests check the CRC against the codes the specification
// publishes in its examples, and have pix-utils, an independent reader
// (Node.js; scripts/pix-utils.sh), read the codes back. Nothing pays by
// scanning it: the customer's side is POST /sandbox/cob/{txid}/pagar.
//
// Every answer uses a status the specification defines for the operation:
// errors are problem+json with type https://pix.bcb.gov.br/api/v2/error/…;
// a missing, unknown or expired token is 403 AcessoNegado (the operations
// define no 401); the token endpoint, outside API Pix, answers 401
// invalid_client as OAuth2 (RFC 6749) says.
//
// # Webhook callback
//
// Paid charges and settled refunds are notified with POST {webhookUrl}/pix
// (the URL registered for the charge's chave, else Config.WebhookURL; the
// path is appended to the URL text as PSPs do, so a URL ending in a query
// such as "?hmac=...&ignorar=" keeps working), body {"pix":[...]}. Pending
// notifications are grouped, up to Config.GroupMax per call, and redelivered
// with exponential backoff until a 2xx answer; /sandbox/pix/{e2eid}/reenviar
// queues one again on purpose.
//
// # Faults
//
// Faults (sandbox/fault syntax) apply per request with the X-Sandbox-Fault
// header, or to every PUT with Config.Fault (at Config.FaultRate). Failing
// answers are 503 ServicoIndisponivel, a status every operation defines:
// fail-before (not executed), fail-after (executed, then 503), drop-after
// (executed, connection dropped), delay=D, slow=D.
//
// # State
//
// State is in memory, for one receiver (one client id): the sandbox
// process outlives the workers a restart test kills, and starts empty.
//
// It imports sandbox/fault, sandbox/internal/standin (the request log's
// status recorder), internal/problem (the problem+json writer),
// internal/backoff (the pause before a callback is sent again) and the
// standard library only.
package apipix
