import type { Db } from './records';
import { newId } from '../domain/ids';
import { keysetPage, toPage, type Page, type PageQuery } from './paging';

export type EventType =
  | 'payment.succeeded'
  | 'payment.requires_capture'
  | 'payment.declined'
  | 'payment.failed'
  | 'payment.canceled'
  | 'refund.succeeded'
  | 'refund.failed';

export interface EventPayload {
  id: string;
  object: 'event';
  type: EventType;
  created_at: string;
  data: { object: unknown };
}

export interface OutboxEventRow {
  seq: number;
  id: string;
  tenant_id: string;
  type: EventType;
  event_key: string;
  payload: EventPayload;
  created_at: Date;
  delivery_state: 'pending' | 'delivered' | 'failed' | 'skipped';
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
 */
export async function insertEvent(db: Db, event: { tenantId: string; type: EventType; eventKey: string; object: unknown }): Promise<void> {
  const id = newId('evt');
  const payload: EventPayload = { id, object: 'event', type: event.type, created_at: new Date().toISOString(), data: { object: event.object } };
  await db`
    INSERT INTO outbox_events (id, tenant_id, type, event_key, payload)
    VALUES (${id}, ${event.tenantId}, ${event.type}, ${event.eventKey}, ${payload as never})
    ON CONFLICT (tenant_id, event_key) DO NOTHING`;
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
      ${query.deliveryState !== undefined ? db`AND delivery_state = ${query.deliveryState}` : db``}
      ${keysetPage(db, 'seq', query, (cursor) => db`(SELECT seq FROM outbox_events WHERE id = ${cursor} AND tenant_id = ${tenantId})`)}`;
  return toPage(rows, query);
}
