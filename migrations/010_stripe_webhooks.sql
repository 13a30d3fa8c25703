-- Payment webhooks from real providers (package webhook, the stripe preset).
--
-- A partial refund is its own status: refunding 5,000 of 18,000 must not
-- mark the order refunded.
ALTER TABLE orders DROP CONSTRAINT orders_status_check;
ALTER TABLE orders ADD CONSTRAINT orders_status_check
    CHECK (status IN ('paid', 'partially_refunded', 'refunded', 'disputed'));

-- The charge an effect's payment was made with, when the event named one
-- (a PaymentIntent's latest_charge, a charge's own id). A later event that
-- names only the charge (a dispute whose payment_intent is null, a refund
-- of a bare charge) finds its order through it.
ALTER TABLE processed_effects ADD COLUMN charge_ref text;

-- An event that carries no order of its own (a dispute: metadata {}) finds
-- it through an earlier effect of the same payment (webhook.OrderByPayment:
-- tenant and payment or charge). Like the indexes of 007, they leave
-- tenant_id out: the statement still says tenant_id = $1.
CREATE INDEX processed_effects_payment_idx ON processed_effects (payment_ref);
CREATE INDEX processed_effects_charge_idx ON processed_effects (charge_ref) WHERE charge_ref IS NOT NULL;

-- Or through the charge retrysafe made itself: the stripe.payment tool's
-- stored response names its PaymentIntent and charge
-- (webhook.OrderByActionPayment).
CREATE INDEX actions_payment_intent_idx ON actions ((response->>'payment_intent'))
    WHERE response ? 'payment_intent';
CREATE INDEX actions_latest_charge_idx ON actions ((response->>'latest_charge'))
    WHERE response ? 'latest_charge';
