import { createRoute, OpenAPIHono } from '@hono/zod-openapi';
import { balances } from '../../db/ledger';
import { listEvents } from '../../db/outbox';
import type { ApiDeps, AppEnv } from '../context';
import { Balance, Event, ListEventsQuery, listOf } from '../schemas';
import { errorResponses, jsonContent } from './openapi';

const listEventsRoute = createRoute({
  method: 'get',
  path: '/v1/events',
  tags: ['Events'],
  summary: "The tenant's notification events (the outbox), newest first",
  description:
    'The same events the webhooks deliver, for polling and reconciliation. The event id is the dedupe key. ' +
    '`delivery_status=failed` lists the events whose webhook gave up: resend them one by one, or recover them all.',
  request: { query: ListEventsQuery },
  responses: { 200: { description: 'A page of events.', content: jsonContent(listOf(Event, 'EventList')) }, ...errorResponses(['invalid_request', 'unauthorized']) },
});

const balanceRoute = createRoute({
  method: 'get',
  path: '/v1/balance',
  tags: ['Ledger'],
  summary: "The tenant's ledger balances per account and currency",
  description: '`merchant_balance` is what is owed to the merchant: captured minus refunded.',
  responses: { 200: { description: 'Balances.', content: jsonContent(Balance) }, ...errorResponses(['unauthorized']) },
});

export function accountRoutes(deps: ApiDeps) {
  const app = new OpenAPIHono<AppEnv>();

  app.openapi(listEventsRoute, async (c) => {
    const query = c.req.valid('query');
    const page = await listEvents(deps.sql, c.var.tenant.id, {
      limit: query.limit,
      type: query.type,
      deliveryState: query.delivery_status,
      startingAfter: query.starting_after,
      endingBefore: query.ending_before,
    });
    return c.json({ object: 'list' as const, data: page.rows.map((r) => r.payload), has_more: page.hasMore }, 200);
  });

  app.openapi(balanceRoute, async (c) => {
    return c.json({ object: 'balance' as const, accounts: await balances(deps.sql, c.var.tenant.id) }, 200);
  });

  return app;
}
