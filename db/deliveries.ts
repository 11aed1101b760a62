import type { Db } from './connect';
import type { OutboxEventRow } from './outbox';
import { keysetPage, toPage, type Page, type PageQuery } from './paging';

/** One delivery attempt of an event to the tenant's webhook endpoint, as the relay recorded it. */
export interface DeliveryAttemptRow {
  id: string;
  event_id: string;
  attempt: number;
  url: string;
  response_status: number | null;
  error: string | null;
  duration_ms: number;
  created_at: Date;
}

export async function getEvent(db: Db, tenantId: string, eventId: string): Promise<OutboxEventRow | null> {
  const [event] = await db<OutboxEventRow[]>`SELECT * FROM outbox_events WHERE id = ${eventId} AND tenant_id = ${tenantId}`;
  return event ?? null;
}

/**
 * An event's attempts, newest first. The cursor is an attempt id (`wha_<n>`, from the
 * table's sequence); the caller has checked that the event is the tenant's.
 */
export async function listDeliveryAttempts(db: Db, eventId: string, query: PageQuery): Promise<Page<DeliveryAttemptRow>> {
  const rows = await db<DeliveryAttemptRow[]>`
    SELECT 'wha_' || id AS id, event_id, attempt, url, response_status, error, duration_ms, created_at
    FROM webhook_deliveries
    WHERE event_id = ${eventId}
      ${keysetPage(db, 'id', query, (cursor) => String(attemptSequence(cursor)))}`;
  return toPage(rows, query);
}

/** `wha_42` → 42; anything else → 0, which pages past everything (as an unknown id does). */
function attemptSequence(cursor: string): number {
  const match = /^wha_(\d{1,15})$/.exec(cursor);
  return match ? Number(match[1]) : 0;
}

/**
 * Gives an event a new round of delivery: due now, with a whole retry budget counted from
 * the attempts made so far, whatever state it was in (delivered, failed, skipped, pending).
 * Bumping resend_requests tells a relay holding a lease on it that its outcome is stale.
 */
export async function resendEvent(db: Db, tenantId: string, eventId: string): Promise<OutboxEventRow | null> {
  const [event] = await db<OutboxEventRow[]>`
    UPDATE outbox_events SET
      delivery_state = 'pending',
      next_attempt_at = now(),
      resend_round_first_attempt = attempts,
      resend_requests = resend_requests + 1,
      delivered_at = NULL
    WHERE id = ${eventId} AND tenant_id = ${tenantId}
    RETURNING *`;
  if (event) await wakeRelay(db);
  return event ?? null;
}

/** Resends every event of the tenant created at or after `since` that no endpoint acknowledged. */
export async function resendUnacknowledgedSince(db: Db, tenantId: string, since: Date): Promise<number> {
  const resent = await db`
    UPDATE outbox_events SET
      delivery_state = 'pending',
      next_attempt_at = now(),
      resend_round_first_attempt = attempts,
      resend_requests = resend_requests + 1
    WHERE tenant_id = ${tenantId} AND created_at >= ${since} AND delivery_state <> 'delivered'`;
  if (resent.count > 0) await wakeRelay(db);
  return resent.count;
}

/** The relay LISTENs on this channel (it is sent at commit); without it the resend waits for the next poll. */
async function wakeRelay(db: Db): Promise<void> {
  await db`SELECT pg_notify('outbox_event', '')`;
}
