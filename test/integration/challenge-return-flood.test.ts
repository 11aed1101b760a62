import { randomBytes } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { AdyenDouble } from '../../doubles/adyen/server';
import { CHALLENGE_RETURN_DETAILS_CALLS } from '../../api/routes/payments-return';
import { eventually, uniqueKey, type apiClient, type TestStack } from '../helpers/stack';
import { startAdyenTenant } from '../helpers/adyen';

/**
 * The return route is unauthenticated and a payment's id is public (it is in the returnUrl the
 * customer's browser is sent to). On the real stack with the Adyen double as `adyen-test`: a
 * flood of returns with distinct well-formed junk, sent one after the other, reaches the
 * payment's run and Adyen's /payments/details at most CHALLENGE_RETURN_DETAILS_CALLS times
 * between them (counted in PostgreSQL first); past that each is sent on without effect. The
 * runs continue as new well before Temporal's limits (forced here after 2 updates), so the
 * customer's AUTHORISATION still decides the payment and the merchant's capture and cancel work.
 * Never a 5xx.
 */
const merchantReturn = 'https://shop.example/back?order=9';
let double: AdyenDouble;
let stack: TestStack;
let api: ReturnType<typeof apiClient>;
let stop: () => Promise<void>;

beforeAll(async () => {
  ({ double, stack, stop, api } = await startAdyenTenant('return-flood', { IDEMPOTENCY_WAIT_MS: 3000, AUTHENTICATION_WINDOW_SECONDS: 600, PAYMENT_CONTINUE_AFTER_UPDATES: 2 }));
}, 300_000);
afterAll(async () => stop?.());

/** A manual-capture 3-D Secure payment at adyen-test, waiting for its shopper. */
async function challenged(): Promise<{ id: string; url: string; workflowId: string }> {
  const created = await api.post('/v1/payments', { order_id: uniqueKey('ord'), amount_minor: 4200, currency: 'EUR', payment_method: 'pm_card_threeDSecureRequired', capture_method: 'manual', return_url: merchantReturn }, uniqueKey('pay'));
  expect(created.status, created.text).toBe(202);
  expect(created.json).toMatchObject({ status: 'requires_action', provider: 'adyen-test' });
  return { id: created.json.id, url: created.json.next_action.redirect_to_url.url, workflowId: created.json.workflow_id };
}

/** Junk returns, one after the other, no API key: what each answered. */
async function flood(paymentId: string, count: number): Promise<number[]> {
  const statuses: number[] = [];
  for (let i = 0; i < count; i++) {
    const junk = randomBytes(48).toString('base64url');
    const response = await fetch(`${stack.apiUrl}/return/${paymentId}?redirectResult=${junk}`, { redirect: 'manual' });
    await response.arrayBuffer();
    statuses.push(response.status);
  }
  return statuses;
}

/** Every run of the workflow id: how it closed, its history's length, and the challenge returns it took. */
async function runsOf(workflowId: string): Promise<{ status: string; events: number; returnsTaken: number }[]> {
  const runs = [];
  for await (const execution of stack.temporal.workflow.list({ query: `WorkflowId = '${workflowId}'` })) {
    const history = await stack.temporal.workflow.getHandle(workflowId, execution.runId).fetchHistory();
    const events = history.events ?? [];
    const returnsTaken = events.filter((e) => e.workflowExecutionUpdateAcceptedEventAttributes?.acceptedRequest?.input?.name === 'challengeReturn').length;
    runs.push({ status: execution.status.name, events: events.length, returnsTaken });
  }
  return runs;
}

/** The shopper approves at the double's challenge page and comes back through our return route. */
async function genuineReturn(url: string): Promise<{ status: number; location: string | null }> {
  const decided = await fetch(url, { method: 'POST', body: new URLSearchParams({ result: 'approve' }), redirect: 'manual' });
  expect(decided.status).toBe(303);
  const back = await fetch(decided.headers.get('location')!, { redirect: 'manual' });
  await back.arrayBuffer();
  return { status: back.status, location: back.headers.get('location') };
}

const statusOf = async (id: string) => (await api.get(`/v1/payments/${id}`)).json.status as string;

describe('a flood of returns cannot take a payment out of its merchant’s hands', () => {
  it('junk returns reach the run and the PSP only a few times, the runs continue as new, and the AUTHORISATION then the capture decide the payment; the cancel after it is a 409, never a 500', async () => {
    const payment = await challenged();
    const calls = double.detailsCalls();
    const statuses = await flood(payment.id, 40);
    // None is a 5xx: the few that reached the PSP were refused by it (400), the rest sent on without effect (303).
    expect(statuses.every((s) => s === 400 || s === 303), statuses.join(',')).toBe(true);
    expect(statuses.filter((s) => s === 400).length).toBeLessThanOrEqual(CHALLENGE_RETURN_DETAILS_CALLS);
    expect(double.detailsCalls() - calls).toBeLessThanOrEqual(CHALLENGE_RETURN_DETAILS_CALLS);
    const runs = await runsOf(payment.workflowId);
    expect(runs.reduce((n, r) => n + r.returnsTaken, 0)).toBeLessThanOrEqual(CHALLENGE_RETURN_DETAILS_CALLS);
    expect(runs.some((r) => r.status === 'CONTINUED_AS_NEW')).toBe(true);
    // The history stays small: nowhere near the 10 → 22 000 events a flood used to write.
    expect(runs.every((r) => r.events < 200), JSON.stringify(runs)).toBe(true);
    expect(await statusOf(payment.id)).toBe('requires_action');

    // The customer's genuine return: its details calls are used up, so it is sent on without effect; the AUTHORISATION decides.
    expect(await genuineReturn(payment.url)).toEqual({ status: 303, location: `https://shop.example/back?order=9&payment_id=${payment.id}` });
    await eventually(async () => (await statusOf(payment.id)) === 'requires_capture', 30_000, 200, 'the AUTHORISATION to decide the payment');
    const captured = await api.post(`/v1/payments/${payment.id}/capture`, {}, uniqueKey('capture'));
    expect(captured.status, captured.text).toBe(200);
    expect(captured.json).toMatchObject({ status: 'succeeded', amount_captured_minor: 4200 });
    const canceled = await api.post(`/v1/payments/${payment.id}/cancel`, {}, uniqueKey('cancel'));
    expect(canceled.status, canceled.text).toBe(409);
  });

  it('flooded, then authorised: the cancel voids the authorization in the run the wait moved on to', async () => {
    const payment = await challenged();
    const statuses = await flood(payment.id, 20);
    expect(statuses.every((s) => s === 400 || s === 303), statuses.join(',')).toBe(true);
    expect(await genuineReturn(payment.url)).toMatchObject({ status: 303 });
    await eventually(async () => (await statusOf(payment.id)) === 'requires_capture', 30_000, 200, 'the AUTHORISATION to decide the payment');
    // A few more returns now that the challenge is over: sent on, nothing reaches the run.
    expect(await flood(payment.id, 5)).toEqual([303, 303, 303, 303, 303]);
    const canceled = await api.post(`/v1/payments/${payment.id}/cancel`, {}, uniqueKey('cancel'));
    expect(canceled.status, canceled.text).toBe(200);
    expect(canceled.json).toMatchObject({ status: 'canceled', amount_captured_minor: 0 });
    const counted = await stack.sql<{ calls: number }[]>`SELECT calls FROM challenge_return_calls WHERE payment_id = ${payment.id}`;
    expect(counted).toEqual([{ calls: CHALLENGE_RETURN_DETAILS_CALLS }]);
  });

  it("Adyen's redirectResult shapes are taken (parts joined by `!`, a `+` read as a space); others are refused before anything is asked", async () => {
    const payment = await challenged();
    const calls = double.detailsCalls();
    for (const junk of ['%3Cscript%3E', 'a%00b', 'a%2Cb', `${'A'.repeat(8193)}`]) {
      const response = await fetch(`${stack.apiUrl}/return/${payment.id}?redirectResult=${junk}`, { redirect: 'manual' });
      expect(response.status).toBe(400);
    }
    expect(double.detailsCalls()).toBe(calls);
    // Well formed in Adyen's documented shape: it reaches the PSP, which does not know it (400).
    const shaped = await fetch(`${stack.apiUrl}/return/${payment.id}?redirectResult=Ab02b4c0%21BQABAgCJN1wR+Zu/GJmq8d==`, { redirect: 'manual' });
    expect(shaped.status).toBe(400);
    expect(double.detailsCalls()).toBe(calls + 1);
    expect(await statusOf(payment.id)).toBe('requires_action');
  });
});
