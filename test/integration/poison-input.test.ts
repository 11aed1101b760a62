import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { WorkflowFailedError } from '@temporalio/client';
import { ActivityFailure, ApplicationFailure } from '@temporalio/common';
import { claimRecord, findRecord } from '../../db/idempotency-records';
import { requestFingerprint } from '../../domain/fingerprint';
import { newId, paymentWorkflowId, refundWorkflowId } from '../../domain/ids';
import { reserveRefund } from '../../db/refunds';
import { CreatePaymentBody } from '../../api/schemas';
import { paymentWorkflowInput } from '../../api/routes/payments';
import { SandboxProvider } from '../../provider/sandbox/client';
import { sandboxControls } from '../../testkit/sandbox';
import { FailureType, TenantIdKey, type ScopedKey } from '../../shared/definitions';
import type { RefundWorkflowInput } from '../../shared/refunds';
import { PaymentStatusKey } from '../../shared/payments';
import { ADMIN_TOKEN, apiClient, eventually, startStack, uniqueKey, type TestStack, type Tenant } from '../helpers/stack';

/**
 * Input PostgreSQL cannot store (U+0000, lone surrogates) is refused at validation wherever it
 * enters; and if such input ever reaches a workflow anyway, the run ends, its key answers one
 * stable recorded error, and nothing is left running.
 */

let stack: TestStack;
let tenant: Tenant;
let api: ReturnType<typeof apiClient>;

beforeAll(async () => {
  stack = await startStack();
  tenant = await stack.createTenant('poison');
  api = apiClient(stack.apiUrl, tenant.apiKey);
});
afterAll(async () => stack?.stop());

const valid = () => ({ order_id: uniqueKey('ord'), amount_minor: 1000, currency: 'EUR', payment_method: 'pm_card_visa' });

function expectRefused(response: { status: number; json: any; text: string }, path?: string) {
  expect(response.status, response.text).toBe(400);
  expect(response.json.error.type).toBe('invalid_request');
  if (path !== undefined) expect(response.json.error.issues.map((i: { path: string }) => i.path), response.text).toContain(path);
}

async function rowCounts() {
  const [counts] = await stack.sql<{ payments: number; records: number }[]>`
    SELECT (SELECT count(*)::int FROM payments WHERE tenant_id = ${tenant.id}) AS payments,
           (SELECT count(*)::int FROM idempotency_records WHERE tenant_id = ${tenant.id}) AS records`;
  return counts!;
}

describe('what PostgreSQL cannot store is refused at validation, with the field path', () => {
  const bodies: [string, Record<string, unknown>, string][] = [
    ['NUL in a metadata value', { metadata: { note: 'a\u0000b' } }, 'metadata.note'],
    ['NUL in a metadata key', { metadata: { 'no\u0000te': 'x' } }, 'metadata.no\u0000te'],
    ['lone high surrogate in a metadata value', { metadata: { note: 'a\ud800b' } }, 'metadata.note'],
    ['lone low surrogate in the description', { description: 'x\udc00' }, 'description'],
    ['NUL in the order id', { order_id: 'o\u0000' }, 'order_id'],
    ['NUL in the description', { description: 'd\u0000' }, 'description'],
    ['a metadata key that would vanish in a JavaScript object', { metadata: JSON.parse('{"__proto__":"x"}') }, 'metadata.__proto__'],
  ];
  for (const [name, change, path] of bodies) {
    it(`POST /v1/payments: ${name}`, async () => {
      const before = await rowCounts();
      // JSON.stringify writes lone surrogates as \ud800 escapes: the server parses them back.
      expectRefused(await api.post('/v1/payments', { ...valid(), ...change }, uniqueKey()), path);
      expect(await rowCounts()).toEqual(before);
    });
  }

  it('a paired surrogate (an emoji) is stored and read back unchanged', async () => {
    const created = await api.post('/v1/payments', { ...valid(), metadata: { note: 'ok 😀' }, description: 'ünïcödé 😀' }, uniqueKey());
    expect(created.status, created.text).toBe(201);
    const read = await api.get(`/v1/payments/${created.json.id}`);
    expect(read.json.metadata).toEqual({ note: 'ok 😀' });
    expect(read.json.description).toBe('ünïcödé 😀');
  });

  it('query parameters and path parameters', async () => {
    expectRefused(await api.get('/v1/payments?order_id=x%00y'), 'order_id');
    expectRefused(await api.get('/v1/payments?starting_after=x%00y'), 'starting_after');
    expectRefused(await api.get('/v1/events?starting_after=x%00y'), 'starting_after');
    expectRefused(await api.get('/v1/payments/pay_x%00y'), 'id');
    expectRefused(await api.get('/v1/refunds/re_x%00y'), 'id');
    expectRefused(await api.get('/v1/payments/pay_x%00y/refunds'), 'id');
    const refund = await api.post('/v1/payments/pay_x%00y/refunds', { amount_minor: 1 }, uniqueKey());
    expectRefused(refund, 'id');
  });

  it('admin bodies', async () => {
    const admin = apiClient(stack.apiUrl, ADMIN_TOKEN);
    expectRefused(await admin.post('/admin/tenants', { name: 'a\u0000b' }, 'unused-key'), 'name');
    expectRefused(await admin.request('PATCH', `/admin/tenants/${tenant.id}`, { body: { name: 'n\u0000' } }), 'name');
    const url = await admin.request('PATCH', `/admin/tenants/${tenant.id}`, { body: { webhook_url: 'https://example.com/\u0000' } });
    expectRefused(url, 'webhook_url');
  });

  it('a refund reason', async () => {
    const paid = await api.post('/v1/payments', valid(), uniqueKey());
    expect(paid.status).toBe(201);
    expectRefused(await api.post(`/v1/payments/${paid.json.id}/refunds`, { amount_minor: 100, reason: 'r\u0000' }, uniqueKey()), 'reason');
  });
});

describe('poison that reaches a workflow anyway (validation bypassed) ends the run and its key is answered', () => {
  /** What the API would have dispatched for this body and key, without its validation. */
  async function dispatchUnvalidated(key: string, metadata: Record<string, string>) {
    const body = { ...CreatePaymentBody.parse(valid()), metadata };
    const scope: ScopedKey = {
      tenantId: tenant.id,
      operation: 'POST /v1/payments',
      key,
      fingerprint: requestFingerprint({}, body),
      retentionSeconds: 3600,
    };
    const claimed = await claimRecord(stack.sql, scope, { workflowId: paymentWorkflowId(tenant.id, key), resourceId: newId('pay') });
    const input = paymentWorkflowInput(body, { paymentId: claimed!.resource_id, tenantId: tenant.id, scope, requestId: 'req_poison', windows: { AUTHORIZATION_WINDOW_SECONDS: 3600 } });
    const handle = await stack.temporal.workflow.start('paymentWorkflow', {
      workflowId: claimed!.workflow_id,
      taskQueue: stack.taskQueue,
      args: [input],
      typedSearchAttributes: [
        { key: TenantIdKey, value: tenant.id },
        { key: PaymentStatusKey, value: 'processing' },
      ] as never,
    });
    return { handle, scope, paymentId: claimed!.resource_id };
  }

  it('the NUL wedge: the first charge attempt\'s intent INSERT fails for good (DatabaseRefused), nothing is charged, the run fails, the key answers one stable 500', async () => {
    const key = uniqueKey('wedge');
    const { handle, scope, paymentId } = await dispatchUnvalidated(key, { note: 'a\u0000b' });

    // A refusal no retry cures fails the step for good, so the run fails promptly instead of retrying without end.
    const failure = await handle.result().then(
      () => null,
      (error: unknown) => error,
    );
    expect(failure).toBeInstanceOf(WorkflowFailedError);
    // A local activity's failure may reach the workflow's failure with or without its ActivityFailure wrapper.
    const outer = (failure as WorkflowFailedError).cause;
    const cause = (outer instanceof ActivityFailure ? outer.cause : outer) as ApplicationFailure;
    expect(cause).toBeInstanceOf(ApplicationFailure);
    expect(cause.type).toBe(FailureType.DatabaseRefused);
    expect(cause.nonRetryable).toBe(true);
    expect(cause.message).toMatch(/22P05|unsupported Unicode escape/);
    expect((await handle.describe()).status.name).toBe('FAILED');

    // The record is still `running` until someone answers it: the sweeper does, once.
    expect((await findRecord(stack.sql, tenant.id, scope.operation, key))!.state).toBe('running');
    expect(await stack.abandonedRuns.runOnce(500, 0)).toBeGreaterThanOrEqual(1);
    const answered = (await findRecord(stack.sql, tenant.id, scope.operation, key))!;
    expect(answered.state).toBe('completed');
    expect(answered.response_status).toBe(500);
    const answer = JSON.parse(answered.response_body!);
    expect(answer.error.type).toBe('operation_failed');
    expect(answer.error.resource_id).toBe(paymentId);

    // A second pass changes nothing: the stored bytes are the answer for good.
    await stack.abandonedRuns.runOnce(500, 0);
    const again = (await findRecord(stack.sql, tenant.id, scope.operation, key))!;
    expect(again.response_body).toBe(answered.response_body);
    expect(again.expires_at).toEqual(answered.expires_at);
    // No payment row could be written: the key's answer says what happened.
    expect(await stack.sql`SELECT 1 FROM payments WHERE id = ${paymentId}`).toHaveLength(0);
  });

  it('a run terminated mid-charge: every retry of the key replays one stored 500, and the payment is flagged', async () => {
    const slowApi = await stack.startApi({ IDEMPOTENCY_WAIT_MS: 0 });
    const client = apiClient(slowApi.url, tenant.apiKey);
    const key = uniqueKey('terminated');
    const request = { ...valid(), payment_method: 'pm_card_slow' };
    const accepted = await client.post('/v1/payments', request, key);
    expect(accepted.status, accepted.text).toBe(202);
    const paymentId = accepted.json.id as string;
    // The intent is persisted; pm_card_slow keeps the charge in flight: terminate the run now.
    await eventually(async () => (await api.get(`/v1/payments/${paymentId}`)).status === 200);
    await stack.temporal.workflow.getHandle(paymentWorkflowId(tenant.id, key)).terminate('test: run ends without an outcome');

    const first = await api.post('/v1/payments', request, key);
    expect(first.status, first.text).toBe(500);
    expect(first.json.error.type).toBe('operation_failed');
    const second = await api.post('/v1/payments', request, key);
    expect(second.status).toBe(500);
    expect(second.text).toBe(first.text);
    expect(second.headers.get('idempotent-replayed')).toBe('true');

    // The API cannot ask the provider whether money moved: the payment keeps its order and is flagged.
    const payment = (await api.get(`/v1/payments/${paymentId}`)).json;
    expect(payment.failure.code).toBe('needs_operator');
    expect(payment.status).toBe('processing');
    const [record] = await stack.sql`SELECT state FROM idempotency_records WHERE tenant_id = ${tenant.id} AND idempotency_key = ${key}`;
    expect(record!.state).toBe('completed');
    await slowApi.close();
  });

  it('the sweeper asks the provider: failed (order free) when it holds no charge, flagged for an operator when it does', async () => {
    // The PSP down: each first charge attempt persists the intent and records attempt 1, and its
    // calls keep failing, so each run is terminated while its charge is in doubt.
    const controls = sandboxControls(stack.sandboxUrl);
    expect((await controls.outage('down')).status).toBe(200);
    const ended: Awaited<ReturnType<typeof dispatchUnvalidated>>[] = [];
    try {
      for (const label of ['nocharge', 'held']) {
        const run = await dispatchUnvalidated(uniqueKey(label), { note: 'fine' });
        await eventually(async () => (await stack.sql`SELECT 1 FROM payment_attempts WHERE payment_id = ${run.paymentId}`).length > 0, 20_000, 5);
        await run.handle.terminate('test');
        ended.push(run);
      }
      // Every call the runs made met the outage; once the worker runs no activity, none is still on its way.
      await eventually(() => stack.worker!.getStatus().numInFlightActivities === 0, 20_000, 20, 'no charge call in flight');
    } finally {
      await controls.outage('none');
    }
    const [nothing, held] = ended as [(typeof ended)[0], (typeof ended)[0]];
    // The second payment's charge reached the PSP before its run ended: one under its reference.
    const psp = new SandboxProvider({ baseUrl: stack.sandboxUrl, timeoutMs: 5000 });
    await psp.createCharge({ idempotencyKey: uniqueKey('held-charge'), amountMinor: 1000, currency: 'EUR', paymentMethod: 'pm_card_visa', capture: true, reference: held.paymentId, description: null });

    expect(await stack.abandonedRuns.runOnce(500, 0)).toBeGreaterThanOrEqual(2);
    for (const [run, expected] of [[nothing, 'failed:run_ended'], [held, 'processing:needs_operator']] as const) {
      const [payment] = await stack.sql<{ status: string; failure_code: string }[]>`SELECT status, failure_code FROM payments WHERE id = ${run.paymentId}`;
      expect(`${payment!.status}:${payment!.failure_code}`).toBe(expected);
      const [record] = await stack.sql`SELECT state FROM idempotency_records WHERE tenant_id = ${tenant.id} AND idempotency_key = ${run.scope.key}`;
      expect(record!.state).toBe('completed');
    }
    expect(await psp.listChargesByReference(nothing.paymentId)).toEqual([]);
  });

  it('a refund whose run ended mid-way: its key answers one stored 500 and the pending refund is flagged, its amount still reserved', async () => {
    const paid = await api.post('/v1/payments', valid(), uniqueKey());
    expect(paid.status).toBe(201);
    const key = uniqueKey('refund-ended');
    const refundId = newId('re');
    const scope: ScopedKey = { tenantId: tenant.id, operation: 'POST /v1/payments/{id}/refunds', key, fingerprint: requestFingerprint({ id: paid.json.id }, { amount_minor: 300, reason: null }), retentionSeconds: 3600 };
    const workflowId = refundWorkflowId(tenant.id, key);
    await claimRecord(stack.sql, scope, { workflowId, resourceId: refundId });
    // As if beginRefund had reserved the amount and the run then died: a run on a queue no worker polls, terminated.
    const input: RefundWorkflowInput = { refundId, tenantId: tenant.id, paymentId: paid.json.id, amountMinor: 300, reason: null, idempotency: scope, requestId: 'req_refund_ended' };
    await reserveRefund(stack.sql, input, 'EUR', workflowId);
    const handle = await stack.temporal.workflow.start('refundWorkflow', { workflowId, taskQueue: `${stack.taskQueue}-nobody`, args: [input] });
    await handle.terminate('test: run ends without an outcome');

    expect(await stack.abandonedRuns.runOnce(500, 0)).toBeGreaterThanOrEqual(1);
    const retried = await api.post(`/v1/payments/${paid.json.id}/refunds`, { amount_minor: 300 }, key);
    expect(retried.status, retried.text).toBe(500);
    expect(retried.json.error.type).toBe('operation_failed');
    expect(retried.json.error.message).toMatch(/flagged for an operator/);
    expect(retried.headers.get('idempotent-replayed')).toBe('true');
    const refund = (await api.get(`/v1/refunds/${refundId}`)).json;
    expect(refund.status).toBe('pending');
    expect(refund.failure.code).toBe('needs_operator');
    expect((await api.get(`/v1/payments/${paid.json.id}`)).json.amount_refunded_minor).toBe(300);
  });
});
