-- A lone first execution's statements as the executor sends them
-- (internal/ledger): the fresh claim (intentActionClaimNew: the intent's
-- insert and the action's claim in one statement), one commit that waits
-- for the flush; then the fenced completion (actionCompleteAsync), whose
-- commit does not wait. The executor sends each behind groupPlans in one
-- pipeline; that statement is left out here (pgbench's pipeline mode costs
-- more than it: 1,239 executions/s with it against 1,546 to 1,599 without
-- on one connection, where the Go driver measured it at about 6 µs per
-- batch), and the claim's select list asks for the flush instead, as
-- groupPlans does.
\set r random(1, 2000000000)
WITH ins AS (INSERT INTO intents (tenant_id, intent_ref, action, rules_version, payload, idem_key, source_ref) VALUES ('t1', 'inv-' || :client_id || '-' || :r, 'noop.run', 2, '{"amount":"18000","customer_id":"c1","intent_ref":"inv-x"}'::jsonb, md5(:client_id || 'a' || :r) || md5(:client_id || 'b' || :r), nullif('wamid.x', '')) ON CONFLICT DO NOTHING RETURNING tenant_id, intent_ref, action, idem_key, created_at), cl AS (INSERT INTO actions (tenant_id, idem_key, intent_ref, action, status, attempt, lease_owner, lease_until) SELECT tenant_id, idem_key, intent_ref, action, 'started', 1, 'bench', clock_timestamp() + 30000000::bigint * interval '1 microsecond' FROM ins ON CONFLICT DO NOTHING RETURNING tenant_id, idem_key, attempt) SELECT coalesce(cl.attempt, 0), ins.tenant_id, ins.intent_ref, ins.action, ins.idem_key, ins.created_at, set_config('synchronous_commit', CASE current_setting('synchronous_commit') WHEN 'remote_apply' THEN 'remote_apply' ELSE 'on' END, true) FROM ins LEFT JOIN cl ON cl.tenant_id = ins.tenant_id AND cl.idem_key = ins.idem_key;
UPDATE actions SET status = 'completed', response = '{"id":"ch_1","ok": true}'::jsonb, error = NULL, lease_owner = NULL, lease_until = NULL, finished_at = CASE WHEN 'completed' IN ('completed', 'failed') THEN now() END, updated_at = now() WHERE tenant_id = 't1' AND idem_key = md5(:client_id || 'a' || :r) || md5(:client_id || 'b' || :r) AND lease_owner = 'bench' AND attempt = 1 AND lease_until IS NOT NULL RETURNING set_config('synchronous_commit', 'off', true);
