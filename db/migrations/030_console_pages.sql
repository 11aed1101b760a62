-- The console's PSP, dispute, recovery, endpoint and audit pages (docs/console.md): what each
-- reads is served by an index, and none of these adds an indexed column to a row's hot update.

-- The PSPs page: charge attempts in a time range (the last 6 hours, 2 days or 30 days).
-- started_at is written once, with the attempt; its finish does not touch it.
CREATE INDEX payment_attempts_by_start ON payment_attempts (started_at);

-- Disputes that still need us, by deadline. status is already in this table's writes.
CREATE INDEX disputes_open_by_deadline ON disputes (evidence_due_by) WHERE status IN ('needs_response', 'under_review');

-- Payments that went through revenue recovery, newest first (ids sort by creation time): the
-- revenue recovered per currency and period. A payment that never recovers keeps its recovery
-- null, so its updates stay HOT.
CREATE INDEX payments_with_recovery ON payments (id DESC) WHERE recovery IS NOT NULL;

-- Failing merchant endpoints: each tenant's events whose deliveries failed after their retries
-- (delivery_state is already in the predicate of outbox_events_due).
CREATE INDEX outbox_events_failed ON outbox_events (tenant_id, seq DESC) WHERE delivery_state = 'failed';

-- The audit page of a tenant's operator, newest first (ids sort by creation time).
CREATE INDEX operator_audit_by_tenant ON operator_audit (tenant_id, id DESC);
