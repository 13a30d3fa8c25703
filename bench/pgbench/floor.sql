\set r random(1, 2000000000)
INSERT INTO floor (k) VALUES (:client_id || '-' || :r) ON CONFLICT DO NOTHING;
