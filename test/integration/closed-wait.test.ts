import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { apiClient, startStack, uniqueKey, type TestStack, type Tenant } from '../helpers/stack';
import { waitingStatuses } from '../../domain/payments';

/**
 * A payment that waits (here: a manual-capture authorization) whose workflow is terminated
 * outside the product, from the Web UI or the CLI: the sweep flags it for an
 * operator with what the PSP holds, voids the authorization (no run is left to capture it), and
 * capture and cancel then answer a refusal that does not contradict the payment's status.
 */

let stack: TestStack;
let tenant: Tenant;
let api: ReturnType<typeof apiClient>;

beforeAll(async () => {
  stack = await startStack();
  tenant = await stack.createTenant('closed-wait');
  api = apiClient(stack.apiUrl, tenant.apiKey);
});
afterAll(async () => stack?.stop());

async function authorizeThenTerminate() {
  const created = await api.post('/v1/payments', { order_id: uniqueKey('ord'), amount_minor: 2500, currency: 'EUR', payment_method: 'pm_card_visa', capture_method: 'manual' }, uniqueKey());
  expect(created.status, created.text).toBe(201);
  expect(created.json.status).toBe('requires_capture');
  const payment = created.json as { id: string; workflow_id: string; order_id: string };
  const handle = stack.temporal.workflow.getHandle(payment.workflow_id);
  // What an operator's "Terminate" in the Web UI (or `temporal workflow terminate`) does.
  await handle.terminate('operator terminated it from the Web UI');
  expect((await handle.describe()).status.name).toBe('TERMINATED');
  return payment;
}

describe('a payment whose run is closed while it waits', () => {
  it('sweeps every waiting status of the lifecycle table, requires_capture among them', () => {
    expect(waitingStatuses).toContain('requires_capture');
  });

  it('is flagged needs_operator with what the PSP holds, its authorization voided; capture and cancel refuse without contradiction', async () => {
    const payment = await authorizeThenTerminate();
    const [charge] = await stack.provider.listChargesByReference(payment.id);
    expect(charge!.status).toBe('requires_capture');

    // Before the sweep: the refusal already says the run ended, not "is requires_capture".
    const early = await api.post(`/v1/payments/${payment.id}/capture`, {}, uniqueKey());
    expect(early.status, early.text).toBe(409);
    expect(early.json.error.type).toBe('payment_not_capturable');
    expect(early.json.error.message).toMatch(/can no longer be captured through the API: its run ended while it was requires_capture/);

    expect(await stack.abandonedRuns.runOnce(500, 0)).toBeGreaterThanOrEqual(1);

    // The PSP: the authorization is voided, nothing captured.
    const atPsp = await stack.provider.retrieveCharge(charge!.id);
    expect(atPsp.status).toBe('canceled');
    expect(atPsp.amountCapturedMinor).toBe(0);

    // The payment: canceled (the order is free), flagged for an operator with the PSP's word.
    const now = (await api.get(`/v1/payments/${payment.id}`)).json;
    expect(now.status).toBe('canceled');
    expect(now.failure.code).toBe('needs_operator');
    expect(now.failure.message).toContain('TERMINATED');
    expect(now.failure.message).toContain(`charge ${charge!.id} as canceled`);
    const events = await stack.sql<{ type: string }[]>`SELECT type FROM outbox_events WHERE tenant_id = ${tenant.id} AND payload->'data'->'object'->>'id' = ${payment.id} ORDER BY seq`;
    expect(events.map((e) => e.type)).toEqual(['payment.requires_capture', 'payment.canceled']);

    // Capture and cancel: refused, and the message agrees with the status.
    for (const [command, type] of [['capture', 'payment_not_capturable'], ['cancel', 'payment_not_cancelable']] as const) {
      const answer = await api.post(`/v1/payments/${payment.id}/${command}`, {}, uniqueKey());
      expect(answer.status, answer.text).toBe(409);
      expect(answer.json.error.type).toBe(type);
      expect(answer.json.error.message).toMatch(new RegExp(`^payment ${payment.id} is canceled\\. The payment's run ended \\(TERMINATED\\) while it was requires_capture`));
      expect(answer.json.error.message).not.toMatch(/is requires_capture/);
    }

    // A second sweep finds nothing more to do for it.
    await stack.abandonedRuns.runOnce(500, 0);
    const again = (await api.get(`/v1/payments/${payment.id}`)).json;
    expect(again.updated_at).toBe(now.updated_at);
  });

  it('leaves a waiting payment whose run is still open alone', async () => {
    const created = await api.post('/v1/payments', { order_id: uniqueKey('ord'), amount_minor: 700, currency: 'EUR', payment_method: 'pm_card_visa', capture_method: 'manual' }, uniqueKey());
    expect(created.status).toBe(201);
    await stack.abandonedRuns.runOnce(500, 0);
    const now = (await api.get(`/v1/payments/${created.json.id}`)).json;
    expect(now.status).toBe('requires_capture');
    expect(now.failure).toBeNull();
    const [charge] = await stack.provider.listChargesByReference(created.json.id);
    expect(charge!.status).toBe('requires_capture');
    const captured = await api.post(`/v1/payments/${created.json.id}/capture`, {}, uniqueKey());
    expect(captured.status, captured.text).toBe(200);
  });
});
