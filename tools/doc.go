// Package tools defines what retrysafe executes: the Tool interface, a
// Registry of tools, the go-openai function definitions the model sees, and
// built-in provider clients (Pix charge, WhatsApp template message, e-mail).
//
// # Design
//
// A Tool names its action, declares the explicit field schema that derive
// normalizes and keys (never "the whole payload"), describes its parameters
// to the model as a JSON schema, and executes one frozen payload under one
// idempotency key. The key is always the frozen key handed in by the
// executor: a tool never draws its own (a uuid or the clock would change on
// every attempt and protect nothing).
//
// Fields the system fills in, never the model, are listed in SystemFields
// (intent_ref: the unit of intent comes from the invoice or conversation, not
// from model output). They are part of the key but absent from the JSON
// schema shown to the model.
//
// Errors carry a failure Class, which is all the executor needs to decide
// what happens next:
//
//   - ClassDefinitive: the provider refused and did nothing (400, 401, 403,
//     404, 422). The action is stored as failed; a new try needs a new
//     intent_ref.
//   - ClassTransient: nothing happened and trying again is safe even without a
//     key (the connection was never made, or its TLS handshake failed: the
//     server's certificate did not verify, or the server refused ours).
//   - ClassUncertain: the provider may or may not have acted (timeout,
//     connection reset, 5xx, 429, 409 "in flight"). Retried only with the
//     same key, or settled by Lookup; a tool that cannot take a key and
//     cannot be asked goes to review instead.
//
// An error without a class is treated as uncertain: guessing "it failed"
// about a payment that went through is the one mistake this project exists
// to prevent.
//
// Tools may implement Looker to let the reconciler ask the provider "did key
// K happen?" before calling again.
//
// A built-in tool given no HTTP client uses NewClient, as do the agent's
// reply tool and tools/stripe, and on NewTransport tools/apipix (with its
// mTLS settings) and agent.RetryAfterTransport (the model API's):
// keep-alive with room for MaxIdleConnsPerHost idle connections to one
// provider, where net/http's default transport keeps two, so that
// concurrent calls do not each open (and handshake) a new connection; no
// timeout of its own, since the executor's context bounds every call.
//
// Package tools/stripe holds the stripe.payment tool (Stripe's
// PaymentIntents, on stripe-go), kept apart so that only its users import
// stripe-go.
//
// Package toolstest holds an in-process provider stand-in (a Pix PSP and
// messaging endpoints honouring Idempotency-Key, with fault injection) for
// tests of code that executes these tools.
//
// # Imports
//
// tools imports derive and github.com/sashabaranov/go-openai only. It knows
// nothing of databases or of the executor.
package tools
