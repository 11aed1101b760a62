import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { apiClient, captureLogs, eventually, startStack, uniqueKey, type TestStack } from '../helpers/stack';
import { startWebhookReceiver } from '../../testkit/webhook-receiver';

/** Operators see what happens: Prometheus counters that move, and logs that follow one request. */

let stack: TestStack;
beforeAll(async () => {
  stack = await startStack();
});
afterAll(async () => stack?.stop());

/** The value of one sample in a Prometheus text exposition (0 when absent). */
function sample(text: string, name: string, labels: Record<string, string> = {}): number {
  const wanted = Object.entries(labels).map(([k, v]) => `${k}="${v}"`);
  for (const line of text.split('\n')) {
    if (!line.startsWith(`${name}{`) && !line.startsWith(`${name} `)) continue;
    const labelPart = line.slice(name.length).match(/^\{([^}]*)\}/)?.[1] ?? '';
    if (wanted.every((w) => labelPart.split(',').includes(w))) return Number(line.split(' ').at(-1));
  }
  return 0;
}

describe('metrics', () => {
  it('counts idempotency outcomes, latencies, payment outcomes, effects per payment and webhook attempts', async () => {
    const receiver = await startWebhookReceiver();
    const tenant = await stack.createTenant('metrics');
    await fetch(`${stack.apiUrl}/admin/tenants/${tenant.id}`, {
      method: 'PATCH',
      headers: { authorization: `Bearer ${stack.adminToken}`, 'content-type': 'application/json' },
      body: JSON.stringify({ webhook_url: receiver.url }),
    });
    const api = apiClient(stack.apiUrl, tenant.apiKey);
    const scrape = async () => (await fetch(`${stack.apiUrl}/metrics`, { headers: { authorization: `Bearer ${stack.adminToken}` } })).text();
    const op = { operation: 'POST /v1/payments' };
    const before = await scrape();
    const workerBefore = await stack.workerMetrics.registry.metrics();
    const windowFrom = new Date(Date.now() - 1000);

    const key = uniqueKey();
    const body = { order_id: uniqueKey('ord'), amount_minor: 500, currency: 'EUR', payment_method: 'pm_card_visa' };
    expect((await api.post('/v1/payments', body, key)).status).toBe(201);
    expect((await api.post('/v1/payments', body, key)).status).toBe(201);
    expect((await api.post('/v1/payments', body, key)).status).toBe(201);
    expect((await api.post('/v1/payments', { ...body, amount_minor: 1 }, key)).status).toBe(422);

    const after = await scrape();
    expect(sample(after, 'idempotency_requests_total', { ...op, outcome: 'new' }) - sample(before, 'idempotency_requests_total', { ...op, outcome: 'new' })).toBe(1);
    expect(sample(after, 'idempotency_requests_total', { ...op, outcome: 'replayed' }) - sample(before, 'idempotency_requests_total', { ...op, outcome: 'replayed' })).toBe(2);
    expect(sample(after, 'idempotency_requests_total', { ...op, outcome: 'mismatch' }) - sample(before, 'idempotency_requests_total', { ...op, outcome: 'mismatch' })).toBe(1);
    const latency = { method: 'POST', route: '/v1/payments', status: '201' };
    expect(sample(after, 'http_request_duration_seconds_count', latency) - sample(before, 'http_request_duration_seconds_count', latency)).toBe(3);
    expect(sample(after, 'http_request_duration_seconds_count', { ...latency, status: '422' })).toBeGreaterThanOrEqual(1);

    await eventually(async () => receiver.deliveries.length >= 1);
    await eventually(async () => (await stack.sql`SELECT 1 FROM outbox_events WHERE tenant_id = ${tenant.id} AND delivery_state = 'delivered'`).length > 0);
    // Reconciliation of the test's window counts each payment's effects (activities/reconciliation.ts).
    const window = { from: windowFrom.toISOString(), to: new Date(Date.now() + 1000).toISOString() };
    const run = await stack.reconciliation.run({ runKey: uniqueKey('observability'), workflowId: 'observability-test', provider: 'sandbox', window });
    expect(run.status).toBe('clean');
    await stack.relay.measureBacklog();
    const worker = await stack.workerMetrics.registry.metrics();
    expect(sample(worker, 'payment_outcomes_total', { status: 'succeeded' }) - sample(workerBefore, 'payment_outcomes_total', { status: 'succeeded' })).toBeGreaterThanOrEqual(1);
    expect(sample(worker, 'webhook_delivery_attempts_total', { result: 'delivered' }) - sample(workerBefore, 'webhook_delivery_attempts_total', { result: 'delivered' })).toBeGreaterThanOrEqual(1);
    // Every reconciled payment had exactly one charge at the provider: all samples in the "≤ 1" bucket.
    const charges = { effect: 'provider_charge' };
    expect(sample(worker, 'effects_per_payment_count', charges)).toBeGreaterThan(0);
    expect(sample(worker, 'effects_per_payment_bucket', { ...charges, le: '1' })).toBe(sample(worker, 'effects_per_payment_count', charges));
    expect(sample(worker, 'effects_per_payment_bucket', { ...charges, le: '0' })).toBe(0);
    expect(sample(worker, 'duplicate_effects_total', charges)).toBe(0);
    expect(sample(worker, 'reconciliation_runs_total', { provider: 'sandbox', status: 'clean' })).toBeGreaterThanOrEqual(1);
    expect(worker).toMatch(/^outbox_lag_seconds \d/m);
    await receiver.close();
  });
});

describe('logs', () => {
  it('follow one payment by its request id through API, workflow and activity lines, and never print a secret', async () => {
    const tenant = await stack.createTenant('logs');
    const api = apiClient(stack.apiUrl, tenant.apiKey);
    const requestId = `req-${uniqueKey('trace')}`;
    const logs = captureLogs();
    const response = await api.post('/v1/payments', { order_id: uniqueKey('ord'), amount_minor: 700, currency: 'EUR', payment_method: 'pm_card_visa' }, uniqueKey(), {
      'x-request-id': requestId,
    });
    expect(response.status).toBe(201);
    expect(response.headers.get('x-request-id')).toBe(requestId);
    await eventually(async () => logs.lines().some((l) => l.request_id === requestId && l.workflowType === 'paymentWorkflow' && /completed/i.test(String(l.msg))), 10_000);
    logs.stop();

    const mine = logs.lines().filter((l) => l.request_id === requestId);
    const api_ = mine.find((l) => l.msg === 'request');
    expect(api_).toMatchObject({ route: '/v1/payments', status: 201, tenant_id: tenant.id, resource_id: response.json.id, idempotency: 'new' });
    expect(mine.some((l) => l.workflowType === 'paymentWorkflow' && l.workflowId === response.json.workflow_id && l.activityType === undefined)).toBe(true);
    expect(mine.some((l) => l.activityType === 'chargeAttempt' && l.msg === 'charging')).toBe(true);
    expect(mine.some((l) => l.activityType === 'recordChargeOutcome' && l.payment_id === response.json.id)).toBe(true);

    const everything = logs.text();
    expect(everything).not.toContain(tenant.apiKey);
    expect(everything).not.toContain(tenant.webhookSecret);
    expect(everything).not.toContain('pm_card_visa');
  });

  it("a capture's activities log the capture request's id, which the workflow hands them (not the creating request's)", async () => {
    const tenant = await stack.createTenant('logs-capture');
    const api = apiClient(stack.apiUrl, tenant.apiKey);
    const created = await api.post('/v1/payments', { order_id: uniqueKey('ord'), amount_minor: 900, currency: 'EUR', payment_method: 'pm_card_visa', capture_method: 'manual' }, uniqueKey(), {
      'x-request-id': `req-${uniqueKey('create')}`,
    });
    expect(created.status).toBe(201);
    const captureId = `req-${uniqueKey('capture')}`;
    const logs = captureLogs();
    const captured = await api.post(`/v1/payments/${created.json.id}/capture`, {}, uniqueKey(), { 'x-request-id': captureId });
    expect(captured.status, captured.text).toBe(200);
    await eventually(async () => logs.lines().some((l) => l.activityType === 'recordCapture'), 10_000);
    logs.stop();
    // Every line from the activity's own code on ('Activity started' is written before any interceptor runs).
    const activities = logs.lines().filter((l) => (l.activityType === 'captureCharge' || l.activityType === 'recordCapture') && l.msg !== 'Activity started');
    expect(activities.length).toBeGreaterThan(0);
    for (const line of activities) expect(line.request_id, JSON.stringify(line)).toBe(captureId);
  });
});
