-- The Idempotency-Key middleware's reservation of a new key, as
-- idempotency's requestReserveSQL sends it.
\set r random(1, 2000000000)
INSERT INTO idempotency_requests (tenant_id, operation, idem_key, fingerprint, status, attempt, lease_until, expires_at) VALUES ('t1', 'POST /v1/cobrancas', md5('n' || :client_id || '-' || :r)::uuid::text, '\x00', 'running', 1, now() + '30 seconds'::interval, now() + '1 day'::interval) ON CONFLICT (tenant_id, operation, idem_key) DO NOTHING RETURNING attempt, lease_until - now();
