import { constantLiterals, type Db, type Sql } from './connect';
import { newId } from '../domain/ids';
import { activeTraceparent } from '../lib/tracing';
import type { DisputeResource, PaymentMethodResource, PaymentResource, RefundResource } from '../domain/resources';
import type { DeliveryStatus, EventType } from '../shared/events';
import { keysetPage, toPage, type Page, type PageQuery } from './paging';

export interface EventPayload {
  id: string;
  object: 'event';
  type: EventType;
  created_at: string;
  /** The payment, refund, dispute or payment method as the API shows it at the time of the event. */
  data: { object: PaymentResource | RefundResource | DisputeResource | PaymentMethodResource };
}

export interface OutboxEventRow {
  seq: number;
  id: string;
  tenant_id: string;
  type: EventType;
  event_key: string;
  payload: EventPayload;
  created_at: Date;
  delivery_state: DeliveryStatus;
  attempts: number;
  next_attempt_at: Date;
  delivered_at: Date | null;
  resend_round_first_attempt: number;
  resend_requests: number;
}

/**
 * Writes a notification in the caller's transaction (into a json column, serialized once by
 * postgres.js: the field order written here is the order every reader and webhook receiver
 * sees; db.json() would send jsonb, which reorders), the one that records the fact itself.
 * Once per business event: a replayed activity finds (tenant, event_key) taken and adds nothing.
 * A tenant without a webhook endpoint gets the event `skipped` at once (listed, never claimed by
 * the relay); one with an endpoint gets it `pending`. With tracing on, the event keeps the
 * writing span's traceparent (db/migrations/021): its delivery continues that trace.
 */
export async function insertEvent(db: Db, event: { tenantId: string; type: EventType; eventKey: string; object: EventPayload['data']['object'] }): Promise<void> {
  const id = newId('evt');
  const payload: EventPayload = { id, object: 'event', type: event.type, created_at: new Date().toISOString(), data: { object: event.object } };
  await db`
    INSERT INTO outbox_events (id, tenant_id, type, event_key, payload, delivery_state, traceparent)
    SELECT ${id}, t.id, ${event.type}, ${event.eventKey}, ${payload as never}, CASE WHEN t.webhook_url IS NULL THEN 'skipped' ELSE 'pending' END, ${activeTraceparent()}
    FROM tenants t WHERE t.id = ${event.tenantId}
    ON CONFLICT (tenant_id, event_key) DO NOTHING`;
}

/** An event claimed for delivery, with where and how to deliver it. */
export interface ClaimedEvent {
  id: string;
  tenant_id: string;
  payload: EventPayload;
  attempts: number;
  /** The first attempt of the current round (a resend starts a new round). */
  resend_round_first_attempt: number;
  /** Resends asked for so far; a change while an attempt is in flight means a resend won. */
  resend_requests: number;
  webhook_url: string | null;
  webhook_secret: string;
  /** The secret before the last rotation, while its overlap lasts (db/credentials.ts). */
  previous_webhook_secret: string | null;
  /** The span that wrote the event (insertEvent), whose trace its delivery continues; null: none. */
  traceparent: string | null;
}

/** How many events wait for delivery, and how long the oldest has waited (seconds). */
export async function deliveryBacklog(db: Db): Promise<{ pending: number; lag: number }> {
  const [backlog] = await db<{ pending: number; lag: number }[]>`
    SELECT count(*)::int AS pending, coalesce(extract(epoch FROM now() - min(created_at)), 0)::float8 AS lag
    FROM outbox_events WHERE delivery_state = 'pending'`;
  return backlog!;
}

/**
 * Claims up to `batchSize` due events under a lease of `leaseMs`. SKIP LOCKED keeps
 * concurrent relays apart; an expired lease makes the event claimable again.
 */
export async function claimDueEvents(db: Db, batchSize: number, leaseMs: number): Promise<ClaimedEvent[]> {
  return db<ClaimedEvent[]>`
    UPDATE outbox_events e SET locked_until = now() + make_interval(secs => ${leaseMs / 1000})
    FROM tenants t
    WHERE t.id = e.tenant_id AND e.id IN (
      SELECT id FROM outbox_events
      WHERE delivery_state = 'pending' AND next_attempt_at <= now()
        AND (locked_until IS NULL OR locked_until < now())
      ORDER BY next_attempt_at
      LIMIT ${batchSize}
      FOR UPDATE SKIP LOCKED
    )
    RETURNING e.id, e.tenant_id, e.payload, e.attempts, e.resend_round_first_attempt, e.resend_requests, e.traceparent, t.webhook_url, t.webhook_secret,
      CASE WHEN t.previous_webhook_secret_expires_at > now() THEN t.previous_webhook_secret END AS previous_webhook_secret`;
}

/** The tenant has no webhook endpoint: the event is only listed (GET /v1/events). */
export async function markEventSkipped(db: Db, eventId: string): Promise<void> {
  await db`UPDATE outbox_events SET delivery_state = 'skipped', locked_until = NULL WHERE id = ${eventId}`;
}

export interface DeliveryAttempt {
  eventId: string;
  attempt: number;
  url: string;
  responseStatus: number | null;
  error: string | null;
  durationMs: number;
  outcome: 'delivered' | 'failed' | 'pending';
  /** When `outcome` is pending: the delay before the next attempt. */
  retryDelayMs: number;
  /** `resend_requests` as claimed: if it changed meanwhile, a resend (POST /v1/events/{id}/resend) wins. */
  resendRequestsSeen: number;
}

/** Records one delivery attempt and the event's new delivery state, in one transaction. */
export async function recordDeliveryAttempt(db: Sql, attempt: DeliveryAttempt): Promise<void> {
  await db.begin(async (tx) => {
    await tx`
      INSERT INTO webhook_deliveries (event_id, attempt, url, response_status, error, duration_ms)
      VALUES (${attempt.eventId}, ${attempt.attempt}, ${attempt.url}, ${attempt.responseStatus}, ${attempt.error}, ${attempt.durationMs})
      ON CONFLICT (event_id, attempt) DO NOTHING`;
    // A resend asked for while this attempt was in flight wins: the event stays due now,
    // with its whole round still ahead of it.
    const resentMeanwhile = tx`resend_requests <> ${attempt.resendRequestsSeen}`;
    await tx`
      UPDATE outbox_events SET
        attempts = ${attempt.attempt},
        resend_round_first_attempt = CASE WHEN ${resentMeanwhile} THEN ${attempt.attempt} ELSE resend_round_first_attempt END,
        delivery_state = CASE WHEN ${resentMeanwhile} THEN 'pending' ELSE ${attempt.outcome} END,
        delivered_at = CASE WHEN ${resentMeanwhile} THEN NULL ELSE ${attempt.outcome === 'delivered' ? tx`now()` : null}::timestamptz END,
        next_attempt_at = CASE WHEN ${resentMeanwhile} THEN now()
          ELSE ${attempt.outcome === 'pending' ? tx`now() + make_interval(secs => ${attempt.retryDelayMs / 1000})` : tx`next_attempt_at`} END,
        locked_until = NULL
      WHERE id = ${attempt.eventId}`;
  });
}

export type DeliveryState = OutboxEventRow['delivery_state'];

/** The tenant's events, newest first, paged by their sequence (an event id cursor is looked up). */
export async function listEvents(
  db: Db,
  tenantId: string,
  query: PageQuery & { type?: string; deliveryState?: DeliveryState },
): Promise<Page<OutboxEventRow>> {
  const rows = await db<OutboxEventRow[]>`
    SELECT * FROM outbox_events
    WHERE tenant_id = ${tenantId}
      ${query.type !== undefined ? db`AND type = ${query.type}` : db``}
      ${query.deliveryState !== undefined ? db`AND delivery_state = ${constantLiterals(db, [query.deliveryState])}` : db``}
      ${keysetPage(db, 'seq', query, (cursor) => db`(SELECT seq FROM outbox_events WHERE id = ${cursor} AND tenant_id = ${tenantId})`)}`;
  return toPage(rows, query);
}
