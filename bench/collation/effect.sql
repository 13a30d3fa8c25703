-- The claim of a payment webhook's effect, as webhook's effectInsert sends
-- it (a new effect each time).
\set r random(1, 2000000000)
INSERT INTO processed_effects (tenant_id, effect_key, provider, transition, order_ref, payment_ref, event_id, event_type, event_at, sequence, charge_ref, outcome) VALUES ('t1', encode(sha256(('n' || :client_id || '-' || :r)::bytea), 'hex'), 'stripe', 'order.paid', 'NF-' || :r, 'pi_' || md5('p' || :r), 'evt_' || md5('v' || :r), 'payment_intent.succeeded', now(), NULL, 'ch_' || md5('c' || :r), 'applied') ON CONFLICT DO NOTHING RETURNING true;
