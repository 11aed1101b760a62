import { Client, Connection, WorkflowNotFoundError } from '@temporalio/client';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { freePort } from '../../devstack/ports';
import { chargeEventWorkflowId, disputeEventWorkflowId, refundEventWorkflowId } from '../../domain/ids';
import { signSandboxWebhook } from '../../provider/sandbox/webhook';
import { testDataConverter } from '../../testkit/payload-keys';
import { postSandboxEvent } from '../helpers/provider-webhooks';
import { apiClient, eventually, isolatedApi, startStack, uniqueKey, type TestStack } from '../helpers/stack';

/**
 * CONTRACT.md §3.6, 3 and 6: the PSP webhook route only verifies, stores and hands over. Every
 * kind of event it acts on (a charge's, a refund's settlement, a dispute's) goes through the one
 * mechanism: a workflow of its area, one run per event under an id derived from the provider and
 * the event, whose decision is the route's answer. A hand-over Temporal cannot take is 503 with
 * Retry-After, the event stored; the PSP's retry hands it over.
 */

let stack: TestStack;
beforeAll(async () => {
  stack = await startStack();
});
afterAll(async () => stack?.stop());

const created = () => Math.floor(Date.now() / 1000);

/** A payment of ours, paid, with the sandbox's charge. */
async function paidPayment(paymentMethod = 'pm_card_visa'): Promise<{ id: string; chargeId: string }> {
  const tenant = await stack.createTenant('hand-over');
  const paid = await apiClient(stack.apiUrl, tenant.apiKey).post('/v1/payments', { order_id: uniqueKey('ord'), amount_minor: 2_500, currency: 'EUR', payment_method: paymentMethod }, uniqueKey());
  expect(paid.status, paid.text).toBe(201);
  const [row] = await stack.sql<{ provider_charge_id: string }[]>`SELECT provider_charge_id FROM payments WHERE id = ${paid.json.id}`;
  return { id: paid.json.id, chargeId: row!.provider_charge_id };
}

/** The sandbox's charge event for a charge the payment records as it is. */
const chargeEvent = (payment: { id: string; chargeId: string }) => ({
  id: uniqueKey('evt'),
  type: 'charge.succeeded',
  created: created(),
  data: {
    object: {
      id: payment.chargeId, object: 'charge', status: 'succeeded', amount_minor: 2_500, amount_captured_minor: 2_500, amount_refunded_minor: 0, currency: 'EUR',
      reference: payment.id, failure_code: null, failure_message: null, next_action: null, created_at: new Date().toISOString(),
    },
  },
});

/** A refund's settlement that names no refund of ours: no run waits for it. */
const refundEvent = (chargeId: string) => ({
  id: uniqueKey('evt'),
  type: 'refund.succeeded',
  created: created(),
  data: { object: { id: uniqueKey('re'), object: 'refund', charge: chargeId, amount_minor: 100, status: 'succeeded', reference: uniqueKey('ref'), failure_code: null, failure_message: null } },
});

/** A dispute event about a dispute the sandbox does not hold. */
const disputeEvent = () => ({
  id: uniqueKey('evt'),
  type: 'charge.dispute.created',
  created: created(),
  data: {
    object: {
      id: uniqueKey('dp'), object: 'dispute', charge: uniqueKey('ch'), reference: uniqueKey('pay'), amount_minor: 10_000, currency: 'eur', reason: 'fraudulent',
      stage: 'chargeback', status: 'needs_response', evidence: {}, evidence_due_by: new Date(Date.now() + 86_400_000).toISOString(), evidence_submitted_at: null,
      created_at: new Date().toISOString(), updated_at: new Date().toISOString(), fee_minor: 1_500,
    },
  },
});

type Area = 'charge' | 'refund' | 'dispute';
const workflowOf: Record<Area, { type: string; id: (provider: string, eventId: string) => string }> = {
  charge: { type: 'chargeEventWorkflow', id: chargeEventWorkflowId },
  refund: { type: 'refundEventWorkflow', id: refundEventWorkflowId },
  dispute: { type: 'disputeEventWorkflow', id: disputeEventWorkflowId },
};

/** The event's run: of its area's type, completed, its decision the given disposition. */
async function expectDecidedBy(area: Area, eventId: string, disposition: string): Promise<void> {
  const handle = stack.temporal.workflow.getHandle(workflowOf[area].id('sandbox', eventId));
  expect(await handle.result()).toMatchObject({ disposition });
  const described = await handle.describe();
  expect({ type: described.type, status: described.status.name }).toEqual({ type: workflowOf[area].type, status: 'COMPLETED' });
}

const stored = async (eventId: string) => (await stack.sql`SELECT 1 FROM provider_events WHERE provider = 'sandbox' AND event_id = ${eventId}`).length;

describe('every kind of PSP event is handed to the workflow of its area, which decides', () => {
  it('a charge event of a payment of ours: chargeEventWorkflow decides (the payment records that charge: forward)', async () => {
    const event = chargeEvent(await paidPayment());
    const answer = await postSandboxEvent(stack, event);
    expect(answer.status, await answer.clone().text()).toBe(200);
    expect(await answer.json()).toEqual({ received: true, event_id: event.id, duplicate: false, disposition: 'forward' });
    await expectDecidedBy('charge', event.id, 'forward');
  });

  it('a refund settlement: refundEventWorkflow decides (no refund of ours waits for it: ignored), and a redelivery gets the same run and decision', async () => {
    const event = refundEvent((await paidPayment()).chargeId);
    const answer = await postSandboxEvent(stack, event);
    expect(await answer.json()).toEqual({ received: true, event_id: event.id, duplicate: false, disposition: 'ignored' });
    await expectDecidedBy('refund', event.id, 'ignored');
    const { runId } = await stack.temporal.workflow.getHandle(refundEventWorkflowId('sandbox', event.id)).describe();
    const again = await postSandboxEvent(stack, event);
    expect(await again.json()).toEqual({ received: true, event_id: event.id, duplicate: true, disposition: 'ignored' });
    expect((await stack.temporal.workflow.getHandle(refundEventWorkflowId('sandbox', event.id)).describe()).runId).toBe(runId);
  });

  it('a dispute event: disputeEventWorkflow asks the PSP (it holds no such dispute: ignored), and no dispute run is started', async () => {
    const event = disputeEvent();
    const answer = await postSandboxEvent(stack, event);
    expect(await answer.json()).toEqual({ received: true, event_id: event.id, duplicate: false, disposition: 'ignored' });
    await expectDecidedBy('dispute', event.id, 'ignored');
    expect(await stack.sql`SELECT 1 FROM disputes WHERE provider_dispute_id = ${event.data.object.id}`).toHaveLength(0);
  });

  it('the PSP’s own dispute events reach the dispute’s run through the disputes area’s workflow, each answered `dispute`', async () => {
    const payment = await paidPayment('pm_card_createDispute');
    const dispute = await eventually(async () => (await stack.sql<{ id: string; provider_dispute_id: string }[]>`SELECT id, provider_dispute_id FROM disputes WHERE payment_id = ${payment.id}`)[0], 20_000, 50, 'the dispute recorded');
    const events = await stack.sql<{ event_id: string }[]>`
      SELECT event_id FROM provider_events WHERE provider = 'sandbox' AND type LIKE 'charge.dispute.%' AND payload -> 'data' -> 'object' ->> 'id' = ${dispute.provider_dispute_id}`;
    expect(events.length).toBeGreaterThan(0);
    for (const { event_id } of events) await expectDecidedBy('dispute', event_id, 'dispute');
  });

  it('an event about a charge no payment here has is stored for an operator and handed to no workflow', async () => {
    const event = chargeEvent({ id: uniqueKey('pay'), chargeId: uniqueKey('ch') });
    const answer = await postSandboxEvent(stack, event);
    expect(await answer.json()).toEqual({ received: true, event_id: event.id, duplicate: false, disposition: 'unknown_charge' });
    expect(await stored(event.id)).toBe(1);
    await expect(stack.temporal.workflow.getHandle(chargeEventWorkflowId('sandbox', event.id)).describe()).rejects.toBeInstanceOf(WorkflowNotFoundError);
  });
});

describe('a hand-over Temporal cannot take is 503 with Retry-After, whatever the area; the PSP’s retry hands the stored event over', () => {
  let unreachable: Client;
  let deadApi: Awaited<ReturnType<typeof isolatedApi>>;
  beforeAll(async () => {
    unreachable = new Client({ connection: Connection.lazy({ address: `127.0.0.1:${await freePort()}` }), dataConverter: testDataConverter });
    deadApi = await isolatedApi(stack, unreachable, { TEMPORAL_RPC_TIMEOUT_MS: 1500 });
  });
  afterAll(async () => {
    await deadApi?.close();
  });

  const cases: [Area, () => Promise<Record<string, unknown> & { id: string }>, string][] = [
    ['charge', async () => chargeEvent(await paidPayment()), 'forward'],
    ['refund', async () => refundEvent((await paidPayment()).chargeId), 'ignored'],
    ['dispute', async () => disputeEvent(), 'ignored'],
  ];
  for (const [area, eventOf, disposition] of cases) {
    it(`a ${area} event: 503 temporal_unavailable, stored, no run; the retry: 200 duplicate, decided by ${workflowOf[area].type}`, async () => {
      const event = await eventOf();
      const raw = JSON.stringify(event);
      const refused = await fetch(`${deadApi.url}/provider_webhooks/sandbox`, {
        method: 'POST',
        headers: { 'content-type': 'application/json', 'sandbox-signature': signSandboxWebhook(raw, stack.sandboxWebhookSecret) },
        body: raw,
      });
      const body = (await refused.json()) as { error: { type: string } };
      expect(refused.status, JSON.stringify(body)).toBe(503);
      expect(body.error.type).toBe('temporal_unavailable');
      expect(Number(refused.headers.get('retry-after'))).toBeGreaterThan(0);
      expect(await stored(event.id)).toBe(1);
      await expect(stack.temporal.workflow.getHandle(workflowOf[area].id('sandbox', event.id)).describe()).rejects.toBeInstanceOf(WorkflowNotFoundError);

      const retried = await postSandboxEvent(stack, event);
      expect(await retried.json()).toEqual({ received: true, event_id: event.id, duplicate: true, disposition });
      await expectDecidedBy(area, event.id, disposition);
    });
  }
});
