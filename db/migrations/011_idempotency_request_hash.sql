-- The SHA-256 of the exact request (its path and body bytes) that claimed the key, beside the
-- canonical fingerprint. A byte-identical retry of a finished operation is matched by it and
-- answered from the stored response before its body is parsed, validated or canonicalized
-- (api/idempotency.ts replayFirst). NULL for keys claimed before this migration and by routes
-- without the early check: those, and any retry whose bytes differ (a reordered but equivalent
-- body, or another request), are decided by the fingerprint as before.
ALTER TABLE idempotency_records ADD COLUMN request_hash text;
