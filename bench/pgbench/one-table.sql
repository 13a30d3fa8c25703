-- fresh.sql's work with the intent and its action in one row (the
-- what_if_intent_actions table run creates): one insert that freezes and
-- claims, then the completion, fenced as the executor fences it. The
-- completion says "still started" as lease_until IS NOT NULL, as
-- actionComplete does, never as status = 'started': that matches the
-- partial index's predicate, and the generic plan pgbench's prepared mode
-- switches to read the whole index (under 1,000 executions/s at 8
-- clients, two runs of 2026-12-02, against 6,902 in a third).
\set r random(1, 2000000000)
\startpipeline
INSERT INTO what_if_intent_actions (tenant_id, intent_ref, action, rules_version, payload, idem_key, source_ref, status, lease_owner, lease_until) VALUES ('t1', 'inv-' || :client_id || '-' || :r, 'noop.run', 2, '{"amount":"18000","customer_id":"c1","intent_ref":"inv-x"}'::jsonb, md5(:client_id || 'a' || :r) || md5(:client_id || 'b' || :r), 'wamid.x', 'started', 'bench', clock_timestamp() + interval '30 seconds') ON CONFLICT DO NOTHING RETURNING idem_key, attempt;
SELECT status, attempt, payload FROM what_if_intent_actions WHERE tenant_id = 't1' AND intent_ref = 'inv-' || :client_id || '-' || :r AND action = 'noop.run';
\endpipeline
UPDATE what_if_intent_actions SET status = 'completed', response = '{"id":"ch_1","ok": true}'::jsonb, lease_owner = NULL, lease_until = NULL, finished_at = now(), updated_at = now() WHERE tenant_id = 't1' AND intent_ref = 'inv-' || :client_id || '-' || :r AND action = 'noop.run' AND lease_owner = 'bench' AND attempt = 1 AND lease_until IS NOT NULL RETURNING set_config('synchronous_commit', 'off', true);
