package webhook

import (
	"context"
	"strings"

	"github.com/jackc/pgx/v5"
)

// Reads of the ledger's tables (intents, actions: migrations 001 and 010),
// which the ledger owns: they find the order of a charge retrysafe made.
// They stay here, unexported, until the ledger exposes these lookups.

// intentRefByKey finds the order of a charge retrysafe made: the intent
// frozen under the charge's idempotency key. Scoped by tenant: another
// tenant's key finds nothing.
const intentRefByKey = `SELECT intent_ref FROM intents WHERE tenant_id = $1 AND idem_key = $2`

// actionOrderByPayment finds the order of a charge retrysafe made: the
// intent_ref of the action whose stored response names the PaymentIntent
// ($2) or the charge ($3) (the stripe.payment tool's response). The
// response ? '...' terms match the partial indexes of migration 010.
const actionOrderByPayment = `(SELECT intent_ref FROM actions
	WHERE tenant_id = $1 AND response ? 'payment_intent' AND response->>'payment_intent' = $2 LIMIT 1)
UNION ALL
(SELECT intent_ref FROM actions
	WHERE tenant_id = $1 AND response ? 'latest_charge' AND response->>'latest_charge' = $3 LIMIT 1)
LIMIT 1`

// intentRefByTxID finds the intent a txid belongs to: the tenant's intent
// of the cob action whose key starts with the txid. The range on idem_key
// (the txid padded with the lowest and the highest hex digit) lets the
// (tenant_id, idem_key) unique index serve it; left() makes it exact.
const intentRefByTxID = `SELECT intent_ref FROM intents
WHERE tenant_id = $1 AND idem_key >= $2 AND idem_key <= $3 AND left(idem_key, $4) = $5 AND action = $6
LIMIT 2`

// orderOfKey is the intent_ref of the tenant's intent frozen under key;
// "" when none is.
func orderOfKey(ctx context.Context, tx DBTX, tenant, key string) (string, error) {
	return lookupRef(ctx, tx, intentRefByKey, tenant, key)
}

// orderOfAction is the intent_ref of the tenant's action whose stored
// response names the PaymentIntent pay or the charge; "" when none does.
func orderOfAction(ctx context.Context, tx DBTX, tenant, pay, charge string) (string, error) {
	return lookupRef(ctx, tx, actionOrderByPayment, tenant, pay, charge)
}

// intentRefsOfTxID lists (at most two of) the intent_refs of the tenant's
// action intents whose key starts with txid. Nothing for a txid longer
// than a key.
func intentRefsOfTxID(ctx context.Context, db DBTX, tenant, action, txid string) ([]string, error) {
	pad := 64 - len(txid)
	if pad < 0 {
		return nil, nil
	}
	rows, err := db.Query(ctx, intentRefByTxID, tenant,
		txid+strings.Repeat("0", pad), txid+strings.Repeat("f", pad), len(txid), txid, action)
	if err != nil {
		return nil, err
	}
	return pgx.CollectRows(rows, pgx.RowTo[string])
}
