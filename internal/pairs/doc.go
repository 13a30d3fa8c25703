// Package pairs reads the comma-separated key=value lists that settings
// carry: RETRYSAFE_API_TOKENS (tenant=token), RETRYSAFE_WHATSAPP_TENANTS
// (phone_number_id=tenant), the payment and Pix webhook lists
// (provider=value). Three packages read such lists; the reading is the same
// and lives here once.
//
// White space around entries, keys and values is ignored, and so are empty
// entries (a trailing comma). Errors name an entry by its position and say
// the shape it should have, never its text: values are often secrets.
//
// # Imports
//
// The standard library only.
package pairs
