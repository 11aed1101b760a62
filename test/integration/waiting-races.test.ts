import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { completeChallenge, sandboxControls } from '../../testkit/sandbox';
import { lateChargeWorkflowId } from '../../domain/ids';
import { startLateChargeWorkflow } from '../../lib/late-charge';
import { signSandboxWebhook } from '../../provider/sandbox/webhook';
import { apiClient, eventually, decidedPayment, startStack, uniqueKey, type TestStack, type Tenant } from '../helpers/stack';
import { chargesAtProvider, expectLedgerConsistent } from '../helpers/effects';

/**
 * Payments that wait, at their edges: the merchant's cancel against the customer
 * finishing the 3-D Secure challenge at the same moment; the PSP's success arriving after the
 * payment expired (given back by lateChargeWorkflow, once, however often the webhook comes). Real stack: Temporal,
 * PostgreSQL, the worker and the sandbox PSP with its challenge pages and signed webhooks.
 * docs/CONTRACT.md: "Payments that wait".
 */

let stack: TestStack;
let tenant: Tenant;
let api: ReturnType<typeof apiClient>;

beforeAll(async () => {
  stack = await startStack({
    // The bank settles after 6 s: a 1 s window ends, and the run's last look is done, well before
    // it even on a loaded machine (with 3 s, a CI-like load once let the last look see the success).
    sandbox: { asyncSettleMs: 6000 },
    api: { PROVIDER_POLL_FIRST_MS: 1000, PROVIDER_POLL_MAX_MS: 2000 },
  });
  tenant = await stack.createTenant('waiting-races');
  api = apiClient(stack.apiUrl, tenant.apiKey);
});
afterEach(async () => expectLedgerConsistent(stack.sql));
afterAll(async () => stack?.stop());

const returnUrl = 'http://127.0.0.1:9/return';
const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

/** The payment's merchant events by type: exactly one per fact. */
async function eventsOf(id: string): Promise<Record<string, number>> {
  const rows = await stack.sql<{ type: string; n: number }[]>`
    SELECT type, count(*)::int AS n FROM outbox_events WHERE tenant_id = ${tenant.id} AND event_key LIKE ${`payment:${id}:%`} GROUP BY type`;
  return Object.fromEntries(rows.map((r) => [r.type, r.n]));
}

async function ledgerCapturesOf(id: string): Promise<number> {
  const [row] = await stack.sql<{ n: number }[]>`SELECT count(*)::int AS n FROM ledger_transactions WHERE payment_id = ${id} AND refund_id IS NULL`;
  return row!.n;
}

describe('cancel while the customer completes the challenge: exactly one outcome wins', () => {
  it('for each of 5 payments: canceled (challenge voided, no money) or succeeded (cancel refused 409, charge stands), the same in PostgreSQL, the API and at the PSP', async () => {
    const outcomes: string[] = [];
    for (let i = 0; i < 5; i++) {
      const created = await api.post('/v1/payments', { order_id: uniqueKey('ord'), amount_minor: 2500, currency: 'EUR', payment_method: 'pm_card_threeDSecureRequired', return_url: returnUrl }, uniqueKey());
      expect(created.status, created.text).toBe(202);
      expect(created.json.status).toBe('requires_action');
      const id = created.json.id as string;
      const challengeUrl = created.json.next_action.redirect_to_url.url as string;

      // The same moment: the customer's Approve and the merchant's cancel. The cancel travels
      // further (API, Temporal update, the workflow's void at the PSP) than the customer's one
      // form post, so the customer is held back by 0 to 200 ms: either may reach the PSP first.
      const customerLagMs = [0, 200, 20, 100, 50][i]!;
      const cancelKey = uniqueKey();
      const [customer, cancel] = await Promise.all([
        sleep(customerLagMs).then(() => completeChallenge(challengeUrl, 'approve')),
        api.post(`/v1/payments/${id}/cancel`, {}, cancelKey),
      ]);
      const payment = await decidedPayment(api, id);
      const charges = await chargesAtProvider(stack.sandboxUrl, id);
      // One charge at the PSP, never a second one.
      expect(charges).toHaveLength(1);
      const charge = charges[0]!;
      const label = `payment ${i} ${id}: cancel ${cancel.status} ${cancel.text}; challenge ${customer.status}; psp ${charge.status}`;

      if (cancel.status === 200) {
        // The cancel won: voided at the PSP (the challenge shows expired), no money anywhere.
        outcomes.push('canceled');
        expect(cancel.json, label).toMatchObject({ id, status: 'canceled', amount_captured_minor: 0 });
        expect(payment, label).toMatchObject({ status: 'canceled', amount_captured_minor: 0 });
        expect(charge, label).toMatchObject({ status: 'canceled', amount_captured_minor: 0 });
        expect(customer.status, label).toBe(410);
        expect(await ledgerCapturesOf(id), label).toBe(0);
        expect(await eventsOf(id), label).toEqual({ 'payment.requires_action': 1, 'payment.canceled': 1 });
      } else {
        // The customer won: the cancel is refused and the charge stands, booked once.
        outcomes.push('succeeded');
        expect(cancel.status, label).toBe(409);
        expect(cancel.json.error.type, label).toBe('payment_not_cancelable');
        expect(customer.status, label).toBe(303);
        expect(payment, label).toMatchObject({ status: 'succeeded', amount_captured_minor: 2500 });
        expect(charge, label).toMatchObject({ status: 'succeeded', amount_captured_minor: 2500, amount_refunded_minor: 0 });
        expect(await ledgerCapturesOf(id), label).toBe(1);
        expect(await eventsOf(id), label).toEqual({ 'payment.requires_action': 1, 'payment.succeeded': 1 });
      }
      // Never money kept for a canceled payment: the PSP and PostgreSQL agree.
      const [row] = await stack.sql<{ status: string; amount_captured_minor: number }[]>`SELECT status, amount_captured_minor FROM payments WHERE id = ${id}`;
      expect(row!.status, label).toBe(charge.status === 'canceled' ? 'canceled' : 'succeeded');
      expect(row!.amount_captured_minor, label).toBe(charge.amount_captured_minor - charge.amount_refunded_minor);
      // The cancel's answer is the key's answer: a retry of the same request replays it.
      const replay = await api.post(`/v1/payments/${id}/cancel`, {}, cancelKey);
      expect(replay.status, label).toBe(cancel.status);
      expect(replay.text, label).toBe(cancel.text);
    }
    console.log(`cancel vs. challenge race outcomes: ${outcomes.join(', ')}`);
  });
});

describe('3-D Secure decided at the window’s end by the PSP’s clock, not by when a webhook arrived', () => {
  const controls = () => sandboxControls(stack.sandboxUrl);
  /** An API whose challenges wait 3 s and whose first poll comes long after: only the window's end asks the PSP. */
  const noPollApi = () => stack.startApi({ AUTHENTICATION_WINDOW_SECONDS: 3, PROVIDER_POLL_FIRST_MS: 60_000, PROVIDER_POLL_MAX_MS: 60_000, PROVIDER_DECISION_GRACE_SECONDS: 120 });
  const challengePayment = (client: ReturnType<typeof apiClient>, amount: number) =>
    client.post('/v1/payments', { order_id: uniqueKey('ord'), amount_minor: amount, currency: 'EUR', payment_method: 'pm_card_threeDSecureRequired', return_url: returnUrl }, uniqueKey());
  /** The run's pending activity of that type (the step it is retrying), if any. */
  async function pending(workflowId: string, activity: string) {
    const description = await stack.temporal.workflow.getHandle(workflowId).describe();
    return (description.raw.pendingActivities ?? []).find((a) => a.activityType?.name === activity) ?? null;
  }
  async function refundsOf(chargeId: string) {
    const response = await fetch(`${stack.sandboxUrl}/v1/refunds?charge=${encodeURIComponent(chargeId)}`);
    return ((await response.json()) as { data: unknown[] }).data;
  }

  it('approved at once, every webhook lost, no poll inside the window: the payment succeeds at the window’s end, nothing refunded (rules out turning away a customer who approved in time)', async () => {
    const client = apiClient((await noPollApi()).url, tenant.apiKey);
    expect((await controls().webhookFaults({ loss: 1 })).status).toBe(200);
    try {
      const created = await challengePayment(client, 2100);
      expect(created.status, created.text).toBe(202);
      const id = created.json.id as string;
      expect((await completeChallenge(created.json.next_action.redirect_to_url.url as string, 'approve')).status).toBe(303);
      const payment = await decidedPayment(client, id);
      expect(payment).toMatchObject({ status: 'succeeded', amount_captured_minor: 2100, failure: null });
      expect(await refundsOf(payment.provider_charge_id as string)).toEqual([]);
      expect(await eventsOf(id)).toEqual({ 'payment.requires_action': 1, 'payment.succeeded': 1 });
      expect(await ledgerCapturesOf(id)).toBe(1);
    } finally {
      await controls().webhookFaults({ loss: 0 });
    }
  });

  it('approved inside the window, webhook lost, the PSP down at the window’s end: the payment succeeds once the PSP answers, within the grace (rules out expiring on an outage)', async () => {
    const client = apiClient((await noPollApi()).url, tenant.apiKey);
    expect((await controls().webhookFaults({ loss: 1 })).status).toBe(200);
    try {
      const created = await challengePayment(client, 2200);
      expect(created.status, created.text).toBe(202);
      const id = created.json.id as string;
      expect((await completeChallenge(created.json.next_action.redirect_to_url.url as string, 'approve')).status).toBe(303);
      expect((await controls().outage('down')).status).toBe(200);
      // The window ends while the PSP is down: the look at the charge is being retried.
      await eventually(async () => ((await pending(created.json.workflow_id as string, 'retrieveCharge'))?.attempt ?? 0) >= 2, 30_000, 200);
      expect((await api.get(`/v1/payments/${id}`)).json.status).toBe('requires_action');
      expect((await controls().outage('none')).status).toBe(200);
      const payment = await decidedPayment(client, id, 60_000);
      expect(payment).toMatchObject({ status: 'succeeded', amount_captured_minor: 2200, failure: null });
      expect(await refundsOf(payment.provider_charge_id as string)).toEqual([]);
      expect(await eventsOf(id)).toEqual({ 'payment.requires_action': 1, 'payment.succeeded': 1 });
    } finally {
      await controls().outage('none');
      await controls().webhookFaults({ loss: 0 });
    }
  }, 90_000);

  it('approved just after the window (the void held up by the PSP): a late success, given back as such', async () => {
    const client = apiClient((await noPollApi()).url, tenant.apiKey);
    expect((await controls().webhookFaults({ loss: 1 })).status).toBe(200);
    try {
      const created = await challengePayment(client, 2300);
      expect(created.status, created.text).toBe(202);
      const id = created.json.id as string;
      // The PSP refuses writes: at the window's end the look finds the challenge open, and its void is retried.
      expect((await controls().outage('unavailable')).status).toBe(200);
      await eventually(async () => (await pending(created.json.workflow_id as string, 'voidCharge')) !== null, 30_000, 200);
      expect((await completeChallenge(created.json.next_action.redirect_to_url.url as string, 'approve')).status).toBe(303);
      expect((await controls().outage('none')).status).toBe(200);
      const payment = await decidedPayment(client, id, 60_000);
      expect(payment).toMatchObject({ status: 'expired', amount_captured_minor: 0, failure: { code: 'late_success_refunded' } });
      const [charge] = await chargesAtProvider(stack.sandboxUrl, id);
      expect(charge).toMatchObject({ status: 'succeeded', amount_refunded_minor: 2300 });
      expect(await eventsOf(id)).toEqual({ 'payment.requires_action': 1, 'payment.expired': 1, 'payment.late_success_refunded': 1 });
      expect(await ledgerCapturesOf(id)).toBe(0);
    } finally {
      await controls().outage('none');
      await controls().webhookFaults({ loss: 0 });
    }
  }, 90_000);
});

describe('a success the PSP reports after the payment expired is given back', () => {
  async function refundsAtProvider(chargeId: string) {
    const response = await fetch(`${stack.sandboxUrl}/v1/refunds?charge=${encodeURIComponent(chargeId)}`);
    return ((await response.json()) as { data: { id: string; amount_minor: number; status: string; reference: string }[] }).data;
  }
  type SandboxEvent = { id: string; type: string; state: string; object: Record<string, unknown> };
  async function eventsAtProvider(chargeId: string): Promise<SandboxEvent[]> {
    return ((await (await sandboxControls(stack.sandboxUrl).events(chargeId)).json()) as { data: SandboxEvent[] }).data;
  }

  it('SEPA expires (settlement_expired), the debit succeeds afterwards: one refund at the PSP, recorded on the payment; duplicates of the webhook change nothing', async () => {
    // A settlement window (1 s) shorter than the bank's (the sandbox settles after 6 s).
    const short = await stack.startApi({ ASYNC_SETTLEMENT_WINDOW_SECONDS: 1, PROVIDER_POLL_FIRST_MS: 500 });
    const client = apiClient(short.url, tenant.apiKey);
    const created = await client.post('/v1/payments', { order_id: uniqueKey('ord'), amount_minor: 2500, currency: 'EUR', payment_method: 'pm_sepa_debit' }, uniqueKey());
    expect(created.status, created.text).toBe(202);
    const id = created.json.id as string;
    const expired = await decidedPayment(client, id);
    expect(expired).toMatchObject({ status: 'expired', amount_captured_minor: 0, failure: { code: 'settlement_expired' } });
    // The payment's run closes: the late success can reach only the webhook route. (The API
    // shows the expiry from its database commit, before the run records that step and ends.)
    const run = stack.temporal.workflow.getHandle(expired.workflow_id);
    await run.result();
    expect((await run.describe()).status.name).toBe('COMPLETED');

    const chargeId = expired.provider_charge_id as string;
    const refunds = await eventually(async () => {
      const found = await refundsAtProvider(chargeId);
      return found.length > 0 ? found : null;
    }, 30_000);
    expect(refunds).toEqual([expect.objectContaining({ amount_minor: 2500, status: 'succeeded', reference: id })]);
    const workflowId = lateChargeWorkflowId('sandbox', chargeId);
    const handle = stack.temporal.workflow.getHandle(workflowId);
    expect(await handle.result()).toMatchObject({ action: 'refunded', refundId: refunds[0]!.id });
    const { runId } = await handle.describe();

    const payment = (await api.get(`/v1/payments/${id}`)).json;
    expect(payment).toMatchObject({ status: 'expired', amount_captured_minor: 0, failure: { code: 'late_success_refunded' } });
    expect(payment.failure.message).toContain(refunds[0]!.id);
    expect(await eventsOf(id)).toEqual({ 'payment.processing': 1, 'payment.expired': 1, 'payment.late_success_refunded': 1 });
    expect(await ledgerCapturesOf(id)).toBe(0);

    // Duplicates: the PSP redelivers its success event three times, and a new event reports the
    // success again (as a reordered or stale one would, nothing refunded in it).
    const success = (await eventsAtProvider(chargeId)).find((e) => e.type === 'charge.succeeded');
    expect(success).toBeDefined();
    for (let i = 0; i < 3; i++) {
      const redelivered = await sandboxControls(stack.sandboxUrl).redeliver(success!.id);
      expect(redelivered.status).toBe(200);
    }
    const raw = JSON.stringify({ id: uniqueKey('evt'), type: 'charge.succeeded', created: Math.floor(Date.now() / 1000), data: { object: { ...success!.object, amount_refunded_minor: 0 } } });
    const stale = await fetch(`${stack.apiUrl}/provider_webhooks/sandbox`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', 'sandbox-signature': signSandboxWebhook(raw, stack.sandboxWebhookSecret) },
      body: raw,
    });
    expect(stale.status).toBe(200);
    // The route starts the late charge's run before it answers: a run the duplicates started
    // exists by now, and its end is awaited (the latest run of the workflow id).
    await handle.result();

    expect(await refundsAtProvider(chargeId)).toHaveLength(1);
    const [charge] = await chargesAtProvider(stack.sandboxUrl, id);
    expect(charge).toMatchObject({ status: 'succeeded', amount_captured_minor: 2500, amount_refunded_minor: 2500 });
    const after = await handle.describe();
    expect(after.runId).toBe(runId);
    expect(after.status.name).toBe('COMPLETED');
    expect(await eventsOf(id)).toEqual({ 'payment.processing': 1, 'payment.expired': 1, 'payment.late_success_refunded': 1 });
    expect((await api.get(`/v1/payments/${id}`)).json).toMatchObject({ status: 'expired', amount_captured_minor: 0 });
  });

  it('the debit succeeds inside the window, unseen (webhook lost, no poll yet): the look at the window’s end finds it by the PSP’s timestamp, and the payment succeeds', async () => {
    const controls = sandboxControls(stack.sandboxUrl);
    // The window (8 s) ends after the bank settles (6 s) and before the first poll (10 s); the webhook is lost.
    const short = await stack.startApi({ ASYNC_SETTLEMENT_WINDOW_SECONDS: 8, PROVIDER_POLL_FIRST_MS: 10_000 });
    const client = apiClient(short.url, tenant.apiKey);
    expect((await controls.webhookFaults({ loss: 1 })).status).toBe(200);
    try {
      const created = await client.post('/v1/payments', { order_id: uniqueKey('ord'), amount_minor: 2700, currency: 'EUR', payment_method: 'pm_sepa_debit' }, uniqueKey());
      expect(created.status, created.text).toBe(202);
      const id = created.json.id as string;
      const payment = await decidedPayment(client, id);
      expect(payment).toMatchObject({ status: 'succeeded', amount_captured_minor: 2700, failure: null });
      const [charge] = await chargesAtProvider(stack.sandboxUrl, id);
      expect(charge).toMatchObject({ status: 'succeeded', amount_refunded_minor: 0 });
      expect(Date.parse(charge!.succeeded_at as string)).toBeLessThanOrEqual(Date.parse(created.json.created_at as string) + 8000);
      expect(await refundsAtProvider(payment.provider_charge_id as string)).toEqual([]);
      expect(await eventsOf(id)).toEqual({ 'payment.processing': 1, 'payment.succeeded': 1 });
      expect(await ledgerCapturesOf(id)).toBe(1);
    } finally {
      await controls.webhookFaults({ loss: 0 });
    }
  });

  it('the late success’s webhook lost: money kept until reconciliation finds it, which starts the same workflow and it is given back once', async () => {
    const controls = sandboxControls(stack.sandboxUrl);
    const from = new Date();
    const short = await stack.startApi({ ASYNC_SETTLEMENT_WINDOW_SECONDS: 1, PROVIDER_POLL_FIRST_MS: 500 });
    const client = apiClient(short.url, tenant.apiKey);
    expect((await controls.webhookFaults({ loss: 1 })).status).toBe(200);
    let id: string;
    let chargeId: string;
    try {
      const created = await client.post('/v1/payments', { order_id: uniqueKey('ord'), amount_minor: 3100, currency: 'EUR', payment_method: 'pm_sepa_debit' }, uniqueKey());
      expect(created.status, created.text).toBe(202);
      id = created.json.id as string;
      const expired = await decidedPayment(client, id);
      expect(expired).toMatchObject({ status: 'expired', failure: { code: 'settlement_expired' } });
      chargeId = expired.provider_charge_id as string;
      // The bank settles after the window; its webhook is lost: nobody hears of it.
      await eventually(async () => (await chargesAtProvider(stack.sandboxUrl, id)).find((c) => c.status === 'succeeded'), 30_000);
      // The PSP has sent (and lost) every webhook of the charge: nothing else can tell the API.
      await eventually(async () => {
        const [events] = await stack.sql<{ unsent: number }[]>`
          SELECT count(*) FILTER (WHERE state = 'pending')::int AS unsent FROM sandbox.events WHERE charge_id = ${chargeId}`;
        return events!.unsent === 0;
      });
      expect(await refundsAtProvider(chargeId)).toEqual([]);
    } finally {
      await controls.webhookFaults({ loss: 0 });
    }

    const reconcile = () =>
      stack.temporal.workflow.execute('reconciliationWorkflow', {
        taskQueue: stack.taskQueue,
        workflowId: uniqueKey('reconciliation'),
        args: [{ providers: ['sandbox'], window: { kind: 'explicit', from: from.toISOString(), to: new Date(Date.now() + 1).toISOString() } }],
      });
    await reconcile();
    const handle = stack.temporal.workflow.getHandle(lateChargeWorkflowId('sandbox', chargeId));
    expect(await handle.result()).toMatchObject({ action: 'refunded' });
    expect(await refundsAtProvider(chargeId)).toEqual([expect.objectContaining({ amount_minor: 3100, status: 'succeeded', reference: id })]);
    expect((await api.get(`/v1/payments/${id}`)).json).toMatchObject({ status: 'expired', amount_captured_minor: 0, failure: { code: 'late_success_refunded' } });

    // The next run finds the payment consistent (its charge refunded in full) and gives nothing back again.
    const again = (await reconcile()) as { runs: { runId: string }[] };
    expect(await refundsAtProvider(chargeId)).toHaveLength(1);
    const open = await stack.sql<{ kind: string }[]>`
      SELECT d.kind FROM reconciliation_findings f JOIN reconciliation_discrepancies d ON d.id = f.discrepancy_id
      WHERE f.run_id = ${again.runs[0]!.runId} AND d.payment_id = ${id}`;
    expect(open).toEqual([]);
    expect(await eventsOf(id)).toEqual({ 'payment.processing': 1, 'payment.expired': 1, 'payment.late_success_refunded': 1 });
  });

  it('a SEPA success in time gives nothing back: a late-charge check started while the payment still waited finds it succeeded', async () => {
    const created = await api.post('/v1/payments', { order_id: uniqueKey('ord'), amount_minor: 1800, currency: 'EUR', payment_method: 'pm_sepa_debit' }, uniqueKey());
    expect(created.status, created.text).toBe(202);
    const id = created.json.id as string;
    // The check the webhook route starts for a payment still processing, started here while the
    // bank has not settled yet (it settles after 6 s): whether the route's own start comes
    // before the run records the success is a race, this start is not.
    const [charge] = await chargesAtProvider(stack.sandboxUrl, id);
    expect(charge).toMatchObject({ status: 'processing' });
    expect(await startLateChargeWorkflow(stack.temporal, stack.taskQueue, { provider: 'sandbox', chargeId: charge!.id, paymentId: id, eventId: 'evt_check_while_waiting' })).toBe(true);
    const payment = await decidedPayment(api, id);
    expect(payment).toMatchObject({ status: 'succeeded', amount_captured_minor: 1800, provider_charge_id: charge!.id });
    const handle = stack.temporal.workflow.getHandle(lateChargeWorkflowId('sandbox', charge!.id));
    expect(await handle.result()).toMatchObject({ action: 'nothing', reason: 'the payment is succeeded' });
    // Its first look found the payment waiting: it waited (a timer) before the look that found it succeeded.
    expect((await handle.fetchHistory()).events!.filter((e) => e.timerStartedEventAttributes).length).toBeGreaterThanOrEqual(1);
    expect(await refundsAtProvider(charge!.id)).toEqual([]);
    expect(await eventsOf(payment.id as string)).toEqual({ 'payment.processing': 1, 'payment.succeeded': 1 });
  });
});
