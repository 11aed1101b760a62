-- Events a merchant can recover: a resend (POST /v1/events/{id}/resend, or the bulk
-- POST /v1/webhook_endpoint/recover) gives the event a new round of delivery attempts.
--   resend_round_first_attempt: attempts made before the current round; the relay's retry
--     budget and backoff count from here, so an event that exhausted its retries gets a
--     whole new schedule instead of failing again at once.
--   resend_requests: bumped by every resend; a relay that claimed the event before a resend
--     sees the change when it records its attempt and leaves the event due again, so a
--     resend during an in-flight delivery is not swallowed by that delivery's outcome.
ALTER TABLE outbox_events
  ADD COLUMN resend_round_first_attempt integer NOT NULL DEFAULT 0,
  ADD COLUMN resend_requests integer NOT NULL DEFAULT 0;

-- GET /v1/events?delivery_status=failed and the recovery scan read one tenant's events by state.
CREATE INDEX outbox_events_by_tenant_state ON outbox_events (tenant_id, delivery_state, seq DESC);
