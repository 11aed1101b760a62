import type { Db } from './records';
import { newId } from '../domain/ids';

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

export async function listEvents(
  db: Db,
  tenantId: string,
  query: { limit: number; type?: string; startingAfter?: string },
): Promise<OutboxEventRow[]> {
  return db<OutboxEventRow[]>`
    SELECT * FROM outbox_events
    WHERE tenant_id = ${tenantId}
      ${query.type !== undefined ? db`AND type = ${query.type}` : db``}
      ${query.startingAfter !== undefined
        ? db`AND seq < (SELECT seq FROM outbox_events WHERE id = ${query.startingAfter} AND tenant_id = ${tenantId})`
        : db``}
    ORDER BY seq DESC
    LIMIT ${query.limit + 1}`;
}
