-- ROWS (:rows) existing rows in each table a measured statement writes,
-- with keys shaped as in production: a first execution's intents and
-- their completed actions (keys of 64 hex characters), payment webhooks'
-- effects (sha256 hex) and Idempotency-Key requests (UUIDs).
INSERT INTO intents (tenant_id, intent_ref, action, rules_version, payload, idem_key, source_ref)
SELECT 't1', 'NF-' || g, 'noop.run', 2, '{"amount":"18000","customer_id":"c1","intent_ref":"inv-x"}'::jsonb,
       md5('p' || g) || md5('q' || g), 'wamid.x'
FROM generate_series(1, :rows) g;
INSERT INTO actions (tenant_id, idem_key, intent_ref, action, status, attempt, response, finished_at)
SELECT tenant_id, idem_key, intent_ref, action, 'completed', 1, '{"id":"ch_1","ok": true}'::jsonb, now() FROM intents;
INSERT INTO processed_effects (tenant_id, effect_key, provider, transition, order_ref, payment_ref, event_id, event_type, event_at, charge_ref, outcome)
SELECT 't1', encode(sha256(('e' || g)::bytea), 'hex'), 'stripe', 'order.paid', 'NF-' || (g::bigint * 7919 % 1000003),
       'pi_' || md5('p' || g), 'evt_' || md5('v' || g), 'payment_intent.succeeded', now(), 'ch_' || md5('c' || g), 'applied'
FROM generate_series(1, :rows) g;
INSERT INTO idempotency_requests (tenant_id, operation, idem_key, fingerprint, status, response_status, expires_at, finished_at)
SELECT 't1', 'POST /v1/cobrancas', md5('k' || g)::uuid::text, sha256(g::text::bytea), 'done', 201, now() + interval '1 day', now()
FROM generate_series(1, :rows) g;
VACUUM ANALYZE intents, actions, processed_effects, idempotency_requests;
CHECKPOINT;
