import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { Webhook } from 'standardwebhooks';
import { apiClient, eventually, startStack, uniqueKey, type TestStack, type Tenant } from '../helpers/stack';
import { startWebhookReceiver } from '../../testkit/webhook-receiver';
import { LOOPBACK_CIDRS, webhookTargetPolicy } from '../../lib/webhook-target';
import { OutboxRelay } from '../../worker/outbox-relay';

/** Notifications: written in the fact's transaction, delivered at least once, signed per Standard Webhooks. */

let stack: TestStack;
beforeAll(async () => {
  stack = await startStack();
});
afterAll(async () => stack?.stop());

async function tenantWithEndpoint(url: string): Promise<Tenant> {
  const tenant = await stack.createTenant('webhooks');
  const response = await fetch(`${stack.apiUrl}/admin/tenants/${tenant.id}`, {
    method: 'PATCH',
    headers: { authorization: `Bearer ${stack.adminToken}`, 'content-type': 'application/json' },
    body: JSON.stringify({ webhook_url: url }),
  });
  expect(response.status).toBe(200);
  expect(((await response.json()) as any).webhook_url).toBe(url);
  return tenant;
}

const payment = (method = 'pm_card_visa') => ({ order_id: uniqueKey('ord'), amount_minor: 1200, currency: 'GBP', payment_method: method });

describe('every event reaches the merchant, verifiably signed', () => {
  it('delivers payment.succeeded with headers that a Standard Webhooks verifier accepts', async () => {
    const receiver = await startWebhookReceiver();
    const tenant = await tenantWithEndpoint(receiver.url);
    const paid = await apiClient(stack.apiUrl, tenant.apiKey).post('/v1/payments', payment(), uniqueKey());
    expect(paid.status).toBe(201);
    const delivery = await eventually(async () => receiver.deliveries[0]);
    const verified = new Webhook(tenant.webhookSecret).verify(delivery.body, delivery.headers as Record<string, string>) as any;
    expect(verified).toMatchObject({ object: 'event', type: 'payment.succeeded', data: { object: { id: paid.json.id, status: 'succeeded' } } });
    expect(delivery.headers['webhook-id']).toBe(verified.id);
    expect(Object.keys(JSON.parse(delivery.body))).toEqual(['id', 'object', 'type', 'created_at', 'data']);
    // Tampering is detected, and so is another tenant's secret.
    expect(() => new Webhook(tenant.webhookSecret).verify(delivery.body.replace('1200', '1'), delivery.headers as Record<string, string>)).toThrow();
    const other = await stack.createTenant('other');
    expect(() => new Webhook(other.webhookSecret).verify(delivery.body, delivery.headers as Record<string, string>)).toThrow();
    // The same event is listed for polling, with the same id.
    const events = await apiClient(stack.apiUrl, tenant.apiKey).get('/v1/events');
    expect(events.json.data.map((e: { id: string }) => e.id)).toEqual([verified.id]);
    await receiver.close();
  });

  it('sends one event per business fact under a duplicate storm', async () => {
    const receiver = await startWebhookReceiver();
    const tenant = await tenantWithEndpoint(receiver.url);
    const api = apiClient(stack.apiUrl, tenant.apiKey);
    const key = uniqueKey();
    const body = payment('pm_card_declined');
    const responses = await Promise.all(Array.from({ length: 50 }, () => api.post('/v1/payments', body, key)));
    expect(new Set(responses.map((r) => r.status))).toEqual(new Set([402]));
    // The final answers came after the outcome's commit, which wrote its events: once every
    // event of the tenant is delivered, a duplicate would have reached the receiver too.
    await eventually(async () => {
      const [events] = await stack.sql<{ undelivered: number }[]>`
        SELECT count(*) FILTER (WHERE delivery_state <> 'delivered')::int AS undelivered FROM outbox_events WHERE tenant_id = ${tenant.id}`;
      return receiver.deliveries.length >= 1 && events!.undelivered === 0;
    });
    expect(receiver.deliveries).toHaveLength(1);
    expect(JSON.parse(receiver.deliveries[0]!.body).type).toBe('payment.declined');
    await receiver.close();
  });

  it('retries with growing backoff while the endpoint fails, then delivers the same event id', async () => {
    const receiver = await startWebhookReceiver((_, index) => (index < 3 ? 503 : 204));
    const tenant = await tenantWithEndpoint(receiver.url);
    const paid = await apiClient(stack.apiUrl, tenant.apiKey).post('/v1/payments', payment(), uniqueKey());
    expect(paid.status).toBe(201);
    await eventually(async () => receiver.deliveries.length >= 4, 20_000);
    const ids = new Set(receiver.deliveries.map((d) => d.headers['webhook-id']));
    expect(ids.size).toBe(1);
    const eventId = [...ids][0] as string;
    const attempts = await eventually(async () => {
      const rows: { attempt: number; response_status: number }[] = await stack.sql<{ attempt: number; response_status: number }[]>`
        SELECT attempt, response_status FROM webhook_deliveries WHERE event_id = ${eventId} ORDER BY attempt`;
      return rows.length === 4 ? rows : null;
    });
    expect(attempts.map((a) => a.response_status)).toEqual([503, 503, 503, 204]);
    const gaps = receiver.deliveries.slice(1).map((d, i) => d.receivedAt - receiver.deliveries[i]!.receivedAt);
    // base 100 ms doubling with ±20% jitter: ~100, ~200, ~400 ms
    expect(gaps[2]!).toBeGreaterThan(gaps[0]!);
    const [event] = await stack.sql<{ delivery_state: string; attempts: number }[]>`SELECT delivery_state, attempts FROM outbox_events WHERE id = ${eventId}`;
    expect(event).toEqual({ delivery_state: 'delivered', attempts: 4 });
    await receiver.close();
  });

  it('resumes from the outbox after the relay died holding an event', async () => {
    const receiver = await startWebhookReceiver();
    const tenant = await tenantWithEndpoint(receiver.url);
    await stack.relay.stop(); // no relay running while the fact is recorded
    const paid = await apiClient(stack.apiUrl, tenant.apiKey).post('/v1/payments', payment(), uniqueKey());
    expect(paid.status).toBe(201);
    // A relay that crashed mid-delivery leaves its lease behind.
    await stack.sql`UPDATE outbox_events SET locked_until = now() + interval '1 second' WHERE tenant_id = ${tenant.id}`;
    const targetPolicy = webhookTargetPolicy({ allowedCidrs: LOOPBACK_CIDRS, allowHttp: true });
    const restarted = new OutboxRelay(stack.sql, stack.logger, { retryBaseMs: 100, retryMaxMs: 1000, maxAttempts: 5, timeoutMs: 1000, batchSize: 10, pollMs: 200, targetPolicy });
    await restarted.start();
    try {
      const delivery = await eventually(async () => receiver.deliveries[0], 10_000);
      expect(JSON.parse(delivery.body).data.object.id).toBe(paid.json.id);
    } finally {
      await restarted.stop();
      await stack.relay.start();
      await receiver.close();
    }
  });
});
