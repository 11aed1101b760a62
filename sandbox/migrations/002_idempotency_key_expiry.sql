-- Keys may now expire (SANDBOX_IDEMPOTENCY_KEY_TTL_SECONDS), as they do at Stripe after 24
-- hours: a request under an expired key is a new request and commits a second charge or
-- refund under the same key. Orchestrator code that retries without looking first would
-- then show as a double charge, which a UNIQUE key would have hidden. The claim in
-- sandbox.idempotency_keys still makes one key produce one effect while it lives.
ALTER TABLE sandbox.charges DROP CONSTRAINT charges_idempotency_key_key;
CREATE INDEX charges_idempotency_key_idx ON sandbox.charges (idempotency_key, created_at);
ALTER TABLE sandbox.refunds DROP CONSTRAINT refunds_idempotency_key_key;
CREATE INDEX refunds_idempotency_key_idx ON sandbox.refunds (idempotency_key, created_at);
