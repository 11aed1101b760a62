-- Tracing (docs/tracing.md): the W3C traceparent of the sampled span that wrote the row, so a
-- later span finds the payment's trace: a PSP webhook's and a duplicate request's server span
-- link to it, an event's delivery continues it. Written only while tracing is on and the span is
-- sampled (null otherwise); the CHECK admits a traceparent and nothing else (no value of a
-- request can be stored here). NOT VALID: existing rows are all null, no scan is needed.

ALTER TABLE payments ADD COLUMN traceparent text;
ALTER TABLE payments ADD CONSTRAINT payments_traceparent_check
  CHECK (traceparent ~ '^00-[0-9a-f]{32}-[0-9a-f]{16}-[0-9a-f]{2}$') NOT VALID;

ALTER TABLE idempotency_records ADD COLUMN traceparent text;
ALTER TABLE idempotency_records ADD CONSTRAINT idempotency_records_traceparent_check
  CHECK (traceparent ~ '^00-[0-9a-f]{32}-[0-9a-f]{16}-[0-9a-f]{2}$') NOT VALID;

ALTER TABLE outbox_events ADD COLUMN traceparent text;
ALTER TABLE outbox_events ADD CONSTRAINT outbox_events_traceparent_check
  CHECK (traceparent ~ '^00-[0-9a-f]{32}-[0-9a-f]{16}-[0-9a-f]{2}$') NOT VALID;
