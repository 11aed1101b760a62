-- The routing decision that sent a payment where it went (docs/routing-and-waits.md): written
-- once, by its first charge step, as the step's answer records it in the run's history; shown by
-- GET /v1/payments/{id} as `routing`. Null: a payment decided by the static route without a
-- recorded decision (every payment made before this column).
ALTER TABLE payments ADD COLUMN routing jsonb;
