import { createRoute, OpenAPIHono } from '@hono/zod-openapi';
import type { Context } from 'hono';
import { getEvent, listDeliveryAttempts, resendEvent, resendUnacknowledgedSince, type DeliveryAttemptRow } from '../../db/deliveries';
import type { OutboxEventRow } from '../../db/outbox';
import { ApiError } from '../../domain/errors';
import { looksLikeId } from '../../domain/ids';
import type { ApiDeps, AppEnv } from '../context';
import { runTransactional } from '../idempotency';
import { finalResponse, recordedReply } from '../typed-route';
import { DeliveryAttempt, Event, EventDelivery, EventRecovery, IdParam, ListDeliveryAttemptsQuery, listOf, RecoverEventsBody, ResendEventBody } from '../schemas';
import { errorResponses, idempotencyKeyParameter, idempotentResponses, jsonContent, optionalBody } from './openapi';

const eventIdExample = 'evt_01jd6w8b3m4x0c2q7yk5h9t1ve';

const getEventRoute = createRoute({
  method: 'get',
  path: '/v1/events/{id}',
  tags: ['Events'],
  summary: 'Retrieve an event',
  description: 'The event exactly as its webhook delivers it (same id, same body).',
  request: { params: IdParam('event', eventIdExample) },
  responses: { 200: { description: 'The event.', content: jsonContent(Event) }, ...errorResponses(['unauthorized', 'not_found']) },
});

const listAttemptsRoute = createRoute({
  method: 'get',
  path: '/v1/events/{id}/deliveries',
  tags: ['Events'],
  summary: "An event's delivery attempts, newest first",
  description: 'Every attempt the relay made to deliver the event: when, to which URL, the status code (or the error), how long it took.',
  request: { params: IdParam('event', eventIdExample), query: ListDeliveryAttemptsQuery },
  responses: { 200: { description: 'A page of attempts.', content: jsonContent(listOf(DeliveryAttempt, 'DeliveryAttemptList')) }, ...errorResponses(['invalid_request', 'unauthorized', 'not_found']) },
});

export const resendRoute = createRoute({
  method: 'post',
  path: '/v1/events/{id}/resend',
  tags: ['Events'],
  summary: 'Deliver an event again (idempotent)',
  description:
    'One new round of delivery of the same event (same id, same body: your dedupe by event id still holds) per Idempotency-Key, ' +
    'with the full retry schedule, whatever the event went through before: delivered, failed after its retries, or skipped.',
  parameters: [idempotencyKeyParameter],
  request: { params: IdParam('event', eventIdExample), body: { content: jsonContent(ResendEventBody), required: false } },
  responses: {
    200: { description: 'The event is due for delivery now.', content: jsonContent(EventDelivery), headers: idempotentResponses.headers },
    ...errorResponses(['invalid_request', 'idempotency_key_missing', 'idempotency_key_invalid', 'unauthorized', 'not_found', 'idempotency_key_reused', 'service_unavailable']),
  },
});

export const recoverRoute = createRoute({
  method: 'post',
  path: '/v1/webhook_endpoint/recover',
  tags: ['Events'],
  summary: 'Resend every event not acknowledged since a time (idempotent)',
  description:
    'After an outage of your endpoint: every event created at or after `since` that was not acknowledged (failed, skipped, or still ' +
    'retrying) gets a new round of delivery, due now. Acknowledged events are not sent again.',
  parameters: [idempotencyKeyParameter],
  request: { body: { content: jsonContent(RecoverEventsBody), required: true } },
  responses: {
    200: { description: 'How many events were resent.', content: jsonContent(EventRecovery), headers: idempotentResponses.headers },
    ...errorResponses(['invalid_request', 'idempotency_key_missing', 'idempotency_key_invalid', 'unauthorized', 'idempotency_key_reused', 'unsupported_media_type', 'service_unavailable']),
  },
});

function deliveryResource(event: OutboxEventRow) {
  return {
    object: 'event_delivery' as const,
    event_id: event.id,
    delivery_status: event.delivery_state,
    attempts: event.attempts,
    next_attempt_at: event.delivery_state === 'pending' ? event.next_attempt_at.toISOString() : null,
    delivered_at: event.delivered_at?.toISOString() ?? null,
  };
}

function attemptResource(row: DeliveryAttemptRow) {
  return {
    id: row.id,
    object: 'delivery_attempt' as const,
    event_id: row.event_id,
    attempt: row.attempt,
    url: row.url,
    response_status: row.response_status,
    error: row.error,
    duration_ms: row.duration_ms,
    created_at: row.created_at.toISOString(),
  };
}

/**
 * POST /v1/events/{id}/resend as one transactional idempotent operation: a new round of
 * delivery of the tenant's event. The console's resend (api/console/actions.ts) runs it too.
 */
export async function runResendEvent(deps: ApiDeps, c: Context<AppEnv>, id: string, body: Record<string, never>) {
  const tenantId = c.var.tenant.id;
  const known = looksLikeId('evt', id) ? await getEvent(deps.sql, tenantId, id) : null;
  if (!known) throw new ApiError('not_found', `No such event: ${id}`);
  return runTransactional(c, deps, resendRoute, {
    params: { id },
    body,
    resourceId: id,
    execute: async (tx) => {
      const event = await resendEvent(tx, tenantId, id);
      if (!event) throw new ApiError('not_found', `No such event: ${id}`);
      return finalResponse(resendRoute, 200, deliveryResource(event));
    },
  });
}

/** Events one by one, their delivery attempts, and resending them: how a merchant recovers missed webhooks. */
export function eventRoutes(deps: ApiDeps) {
  const app = new OpenAPIHono<AppEnv>();

  async function tenantEvent(tenantId: string, id: string): Promise<OutboxEventRow> {
    const event = looksLikeId('evt', id) ? await getEvent(deps.sql, tenantId, id) : null;
    if (!event) throw new ApiError('not_found', `No such event: ${id}`);
    return event;
  }

  app.openapi(getEventRoute, async (c) => {
    const event = await tenantEvent(c.var.tenant.id, c.req.valid('param').id);
    return c.json(event.payload, 200);
  });

  app.openapi(listAttemptsRoute, async (c) => {
    const event = await tenantEvent(c.var.tenant.id, c.req.valid('param').id);
    const query = c.req.valid('query');
    const page = await listDeliveryAttempts(deps.sql, event.id, { limit: query.limit, startingAfter: query.starting_after, endingBefore: query.ending_before });
    return c.json({ object: 'list' as const, data: page.rows.map(attemptResource), has_more: page.hasMore }, 200);
  });

  app.openapi(resendRoute, async (c) => recordedReply(c, resendRoute, await runResendEvent(deps, c, c.req.valid('param').id, optionalBody(ResendEventBody, c.req.valid('json')))));

  app.openapi(recoverRoute, async (c) => {
    const body = c.req.valid('json');
    const tenantId = c.var.tenant.id;
    return recordedReply(c, recoverRoute, await runTransactional(c, deps, recoverRoute, {
      params: {},
      body,
      resourceId: tenantId,
      execute: async (tx) => {
        const resent = await resendUnacknowledgedSince(tx, tenantId, new Date(body.since));
        return finalResponse(recoverRoute, 200, { object: 'event_recovery', since: new Date(body.since).toISOString(), resent });
      },
    }));
  });

  return app;
}
