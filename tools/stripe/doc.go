// Package stripe is the stripe.payment tool: a charge of a customer's
// saved payment method through Stripe's PaymentIntents API, with the
// official client, github.com/stripe/stripe-go/v82.
//
//	POST /v1/payment_intents   Idempotency-Key: <the frozen key>
//	     amount, currency, customer, payment_method, confirm=true, off_session=true,
//	     automatic_payment_methods[enabled]=true, [allow_redirects]=never,
//	     metadata[order_ref]=<intent_ref>, metadata[retrysafe_key]=<key>
//	→ {"id","object":"payment_intent","payment_intent","latest_charge","status",
//	   "amount","currency","livemode","idempotency_key"}   (what the executor stores)
//
// # The key
//
// The frozen key is the Idempotency-Key, unchanged, on every attempt: Stripe
// answers a repeated request with the response it saved for the first one,
// so one key is at most one PaymentIntent. stripe-go's own retries are off
// (Config.MaxNetworkRetries 0): retrying is the executor's, under its lease
// and backoff, with the same key.
//
// The intent's reference (the order) is written to
// metadata[Config.OrderRefKey] (default order_ref), which is where the
// webhook's stripe preset reads it back, and the key to
// metadata[retrysafe_key], which Lookup searches. The stored response names
// the PaymentIntent and its latest_charge: the webhook finds the order of a
// refund or dispute that carries no metadata through them.
//
// # Errors
//
// From Stripe's error types (https://docs.stripe.com/api/errors):
//
//   - card_error (402: declined, authentication required off session):
//     definitive. The PaymentIntent exists and did not charge.
//   - invalid_request_error (400, 404), authentication_error (401),
//     permission_error (403): definitive, Stripe did nothing.
//   - 429 (rate_limit, lock_timeout): transient. Stripe refuses these
//     before it acts and saves nothing under the key.
//   - idempotency_error: uncertain. 409: another request with the key is in
//     flight; 400: the key was used with other parameters. Either way a
//     PaymentIntent may exist under the key; Lookup settles it.
//   - api_error (500 and other 5xx): uncertain. Stripe saves a 500 under the
//     key once it started executing, so only Lookup can tell.
//   - no response: a refused connection is transient, anything else
//     (timeout, reset, a body cut short) uncertain.
//
// # Lookup
//
// Lookup(key) retrieves the PaymentIntent by the id this process saw for
// the key (Config.IDs), else searches metadata['retrysafe_key']. Stripe's
// search is eventually consistent (a new PaymentIntent may take a minute
// to appear): not found means the executor calls again with the same key,
// which Stripe answers from what it saved, so a late index costs a request,
// never a second charge. A PaymentIntent found that failed
// (requires_payment_method, canceled) is reported not found for the same
// reason: the repeated call gets Stripe's saved error, definitive.
//
// # Imports
//
// stripe imports derive, tools and stripe-go.
package stripe
