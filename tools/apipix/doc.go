// Package apipix holds the tools that charge and refund through the Central
// Bank of Brazil's API Pix (release 2.9.0), the standard every Brazilian
// PSP offering Pix Cobrança speaks: pix.cob (an immediate charge) and
// pix.refund (a devolução).
//
// # Design
//
// API Pix lets the receiver choose the charge's txid and the refund's id,
// so the frozen key needs no Idempotency-Key header: TxID is the key's
// first 35 hex digits ([a-zA-Z0-9]{26,35}), the same on every attempt,
// worker and crash, and DevolucaoID is derived from the refund intent's
// own key the same way. Every request body is a function of the frozen
// payload and of two settings (the receiver's chave, the expiry): NewCobBody
// and NewRefundBody.
//
//	pix.cob     PUT /cob/{txid}                      Lookup: GET /cob/{txid}
//	pix.refund  GET /pix/{e2eid}, then PUT /pix/{e2eid}/devolucao/{id}
//
// PUT /cob/{txid} is an upsert at the PSP (a charge still ATIVA takes
// another body), not an idempotent create. So after an outcome the tool
// could not see (timeout, reset, 5xx) it reads the charge before any PUT and
// never writes over an existing one: the same body is the answer, another
// body is sent to review (uncertain, cob_differs), CONCLUIDA is never
// touched. A refund reads its Pix first: a refund already made under its id
// is the answer, and one that with the Pix's other refunds would exceed the
// paid amount is refused (definitive, refund_exceeds_paid) before any PUT.
// pix.refund has no Lookup: the specification reads a refund only with the
// Pix's endToEndId, which is in the payload, not the key.
//
// Errors are classified from the problem+json answer: the code is the last
// segment of its type (CobOperacaoInvalida, PixDevolucaoInvalida,
// AcessoNegado, ...), the class follows the status as tools.StatusError
// says (400, 403, 404 definitive; 429 transient; 503 and other 5xx
// uncertain). Messages name violated properties, never their values.
//
// Access is OAuth2 client credentials (golang.org/x/oauth2/clientcredentials,
// HTTP Basic) over mutual TLS with PEM client certificates: the token is
// cached until shortly before it expires, and a 401 (what PSPs answer to an
// expired token) or a 403 AcessoNegado (the only authorization status the
// specification defines) refreshes it and sends once more. Token failures
// are transient: nothing reached the API. The certificate and key are read
// from their files again at every TLS handshake (Config.CertFile), so a
// renewal needs no restart; a handshake that fails, on files that do not
// pair or on a certificate the PSP refuses, is transient too
// (tools.Classify): the PSP read nothing.
//
// # Imports
//
// apipix imports tools, derive and golang.org/x/oauth2. It knows nothing of
// databases, the executor or the sandbox.
package apipix
