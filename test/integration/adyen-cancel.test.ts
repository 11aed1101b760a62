import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import type { RoutePlanner } from '../../activities';
import { lateChargeWorkflowId } from '../../domain/ids';
import type { AdyenDouble } from '../../doubles/adyen/server';
import { startAdyenStack } from '../helpers/adyen';
import { apiClient, eventually, uniqueKey, type TestStack } from '../helpers/stack';

/**
 * Voids and late money at a kind whose modifications are notified (Adyen), on the real stack:
 * the API, the payment workflow on a real worker (real Temporal and PostgreSQL) whose registry has
 * `adyen-test` (the official library's client against the Adyen double on loopback), the double's
 * signed notification batches delivered to /provider_webhooks/adyen-test. A cancel is done only
 * when its CANCELLATION says so; an authorisation that comes after its payment ended is given
 * back, acting on the signed notification (Adyen has no retrieval).
 */
/** Short, so that a void waits for its confirmation at most a few seconds past it. */
const WINDOW_SECONDS = 15;
const GRACE_SECONDS = 4;
let double: AdyenDouble;
let stack: TestStack;
let stop: (() => Promise<void>) | undefined;
let api: ReturnType<typeof apiClient>;
let tenantKey: string;
const route: RoutePlanner = async () => ({ providers: ['adyen-test'], reason: 'test route: adyen-test' });

beforeAll(async () => {
  ({ double, stack, stop } = await startAdyenStack({
    route,
    api: { IDEMPOTENCY_WAIT_MS: 3000, AUTHORIZATION_WINDOW_SECONDS: WINDOW_SECONDS, PROVIDER_DECISION_GRACE_SECONDS: GRACE_SECONDS, ASYNC_SETTLEMENT_WINDOW_SECONDS: 120 },
  }));
  const tenant = await stack.createTenant('adyen-cancel');
  tenantKey = tenant.apiKey;
  api = apiClient(stack.apiUrl, tenant.apiKey);
}, 300_000);
afterAll(async () => stop?.());
afterEach(async () => {
  expect((await control('/webhook_faults', {})).status).toBe(200);
});

const control = (path: string, body?: unknown) =>
  fetch(`${double.url}/_sandbox${path}`, body === undefined ? {} : { method: 'POST', body: JSON.stringify(body) }).then(async (r) => ({ status: r.status, json: (await r.json()) as any }));
type Kept = { id: string; type: string; state: string; object: { success: string } };
const keptOf = async (charge: string): Promise<Kept[]> => (await control(`/events?charge=${charge}`)).json.data;
const notified = (charge: string, type: string) => eventually(async () => (await keptOf(charge)).find((k) => k.type === type), 20_000, 100, `${type} of ${charge}`);
const body = (payment_method: string, extra: Record<string, unknown> = {}) => ({ order_id: uniqueKey('ord'), amount_minor: 2500, currency: 'EUR', payment_method, ...extra });
const manualPayment = async (paymentMethod = 'pm_card_visa') => {
  const created = await api.post('/v1/payments', body(paymentMethod, { capture_method: 'manual' }), uniqueKey('pay'));
  expect(created.status, created.text).toBe(201);
  expect(created.json).toMatchObject({ status: 'requires_capture', provider: 'adyen-test' });
  return created.json as { id: string; provider_charge_id: string };
};
const cancel = (id: string, key = uniqueKey('cancel')) => api.post(`/v1/payments/${id}/cancel`, {}, key);
/** The payment once it has left `status` (polled). */
const leftStatus = (id: string, status: string, timeoutMs = (WINDOW_SECONDS + GRACE_SECONDS + 20) * 1000, client = api) =>
  eventually(async () => {
    const { json } = await client.get(`/v1/payments/${id}`);
    return json.status === status ? undefined : json;
  }, timeoutMs);

describe('a cancel at a kind whose modifications are notified waits for the PSP’s CANCELLATION', () => {
  it('while its CANCELLATION is not delivered the cancel is answered 202 and the payment stays requires_capture; delivered, it is canceled and the cancel replays 200', async () => {
    const payment = await manualPayment();
    await control('/webhook_faults', { loss: 1 });
    const key = uniqueKey('cancel');
    const waiting = await cancel(payment.id, key);
    expect(waiting.status, waiting.text).toBe(202);
    expect(waiting.json).toMatchObject({ id: payment.id, status: 'requires_capture' });
    const cancellation = await notified(payment.provider_charge_id, 'CANCELLATION');
    expect(cancellation.state).toBe('lost');
    expect((await api.get(`/v1/payments/${payment.id}`)).json.status).toBe('requires_capture');
    // A second cancel is refused: one is in progress.
    expect((await cancel(payment.id)).status).toBe(409);
    await control('/webhook_faults', {});
    expect((await control(`/events/${encodeURIComponent(cancellation.id)}/redeliver`, {})).status).toBe(200);
    expect(await leftStatus(payment.id, 'requires_capture')).toMatchObject({ status: 'canceled', amount_captured_minor: 0, failure: null });
    const replay = await cancel(payment.id, key);
    expect(replay.status, replay.text).toBe(200);
    expect(replay.json).toMatchObject({ status: 'canceled' });
  }, 60_000);

  it('a CANCELLATION that is not a success: the payment fails cancel_failed, for an operator, and the cancel answers 402 payment_failed', async () => {
    const payment = await manualPayment('pm_card_cancelFailed');
    const key = uniqueKey('cancel');
    const answer = await cancel(payment.id, key);
    expect([202, 402], answer.text).toContain(answer.status);
    const failed = await leftStatus(payment.id, 'requires_capture');
    expect(failed).toMatchObject({ status: 'failed', amount_captured_minor: 0, failure: { code: 'cancel_failed' } });
    expect(failed.failure.message).toMatch(/operator/);
    expect((await notified(payment.provider_charge_id, 'CANCELLATION')).object.success).toBe('false');
    const replay = await cancel(payment.id, key);
    expect(replay.status, replay.text).toBe(402);
    expect(replay.json.error).toMatchObject({ type: 'payment_failed', payment: { status: 'failed', failure: { code: 'cancel_failed' } } });
  }, 60_000);

  it('no CANCELLATION within the rest of the authorization window: the payment fails cancel_unconfirmed, never canceled', async () => {
    const payment = await manualPayment();
    await control('/webhook_faults', { loss: 1 });
    const answer = await cancel(payment.id);
    expect(answer.status, answer.text).toBe(202);
    const failed = await leftStatus(payment.id, 'requires_capture');
    expect(failed).toMatchObject({ status: 'failed', failure: { code: 'cancel_unconfirmed' } });
    // Only one void was asked for: the per-payment key is sent once.
    expect((await keptOf(payment.provider_charge_id)).filter((k) => k.type === 'CANCELLATION')).toHaveLength(1);
  }, (WINDOW_SECONDS + GRACE_SECONDS + 40) * 1000);

  it('the authorization window’s end: voided and canceled once its CANCELLATION comes; refused, the payment fails cancel_failed', async () => {
    const [plain, refused] = [await manualPayment(), await manualPayment('pm_card_cancelFailed')];
    expect(await leftStatus(plain.id, 'requires_capture')).toMatchObject({ status: 'canceled', failure: { code: 'authorization_expired' } });
    expect(await leftStatus(refused.id, 'requires_capture')).toMatchObject({ status: 'failed', failure: { code: 'cancel_failed' } });
  }, (WINDOW_SECONDS + GRACE_SECONDS + 40) * 1000);

  it.each([
    { what: 'refused (CANCEL_FAILED)', method: 'pm_card_cancelFailed', loseCancellation: false },
    { what: 'unconfirmed (its CANCELLATION lost)', method: 'pm_card_visa', loseCancellation: true },
  ])('a compensation’s void $what counts as a failed compensation: compensation_failed, never "Compensated"', async ({ method, loseCancellation }) => {
    const payment = await manualPayment(method);
    // The capture's CAPTURE is lost: unconfirmed by the window's end, the authorization is voided.
    await control('/webhook_faults', { loss: 1 });
    const answer = await api.post(`/v1/payments/${payment.id}/capture`, {}, uniqueKey('capture'));
    expect(answer.status, answer.text).toBe(202);
    expect((await notified(payment.provider_charge_id, 'CAPTURE')).state).toBe('lost');
    if (!loseCancellation) await control('/webhook_faults', {});
    const failed = await leftStatus(payment.id, 'requires_capture');
    expect(failed).toMatchObject({ status: 'failed', amount_captured_minor: 0, failure: { code: 'compensation_failed' } });
    expect(failed.failure.message).toMatch(/Compensation FAILED, needs an operator: voided authorization/);
    expect(failed.failure.message).not.toMatch(/Compensated:/);
  }, (WINDOW_SECONDS + GRACE_SECONDS + 40) * 1000);
});

/** The late-charge run of the charge once it has ended (it must have started): its status and result. */
const lateChargeEnded = (charge: string) =>
  eventually(async () => {
    const run = stack.temporal.workflow.getHandle(lateChargeWorkflowId('adyen-test', charge));
    const description = await run.describe().catch(() => null);
    return description && description.status.name !== 'RUNNING' ? { status: description.status.name, result: await run.result() } : undefined;
  }, 20_000, 200, `the late-charge run of ${charge} to end`);

describe('a notification delivered after a later one of its charge is not late money', () => {
  it('an AUTHORISATION delivered after its payment’s own cancel was confirmed: nothing is voided again, and the payment stays canceled with no failure', async () => {
    // The AUTHORISATION is lost; the payment is authorised all the same (Adyen answered Authorised).
    await control('/webhook_faults', { loss: 1 });
    const payment = await manualPayment();
    const charge = payment.provider_charge_id;
    expect((await notified(charge, 'AUTHORISATION')).state).toBe('lost');
    await control('/webhook_faults', {});
    expect([200, 202]).toContain((await cancel(payment.id)).status);
    expect(await leftStatus(payment.id, 'requires_capture')).toMatchObject({ status: 'canceled', failure: null });
    // Adyen sends the AUTHORISATION again, now after the CANCELLATION (notifications are not ordered).
    expect((await control(`/events/${encodeURIComponent(charge)}/redeliver`, {})).status).toBe(200);
    await eventually(async () => (await keptOf(charge)).find((k) => k.type === 'AUTHORISATION' && k.state === 'delivered'), 20_000);
    // Whatever ran for it ended, and gave nothing back: the PSP had the charge canceled already.
    expect(await lateChargeEnded(charge)).toMatchObject({ status: 'COMPLETED', result: { action: 'nothing' } });
    const [census] = (await control(`/payments?reference=${payment.id}`)).json.data as { modifications: { type: string }[] }[];
    expect(census!.modifications.filter((m) => m.type === 'cancel')).toHaveLength(1);
    expect((await api.get(`/v1/payments/${payment.id}`)).json).toMatchObject({ status: 'canceled', amount_captured_minor: 0, failure: null });
  }, 90_000);

  it('an AUTHORISATION delivered after its payment’s cancel was refused: no void is asked again (it would be that cancel once more), and the payment keeps cancel_failed, for an operator', async () => {
    await control('/webhook_faults', { loss: 1 });
    const payment = await manualPayment('pm_card_cancelFailed');
    const charge = payment.provider_charge_id;
    await control('/webhook_faults', {});
    await cancel(payment.id);
    expect(await leftStatus(payment.id, 'requires_capture')).toMatchObject({ status: 'failed', failure: { code: 'cancel_failed' } });
    expect((await control(`/events/${encodeURIComponent(charge)}/redeliver`, {})).status).toBe(200);
    expect(await lateChargeEnded(charge)).toMatchObject({ status: 'COMPLETED', result: { action: 'nothing', reason: "the payment's run gave its charge back (cancel_failed)" } });
    const [census] = (await control(`/payments?reference=${payment.id}`)).json.data as { modifications: { type: string }[] }[];
    expect(census!.modifications.filter((m) => m.type === 'cancel')).toHaveLength(1);
    expect((await api.get(`/v1/payments/${payment.id}`)).json).toMatchObject({ status: 'failed', failure: { code: 'cancel_failed' } });
  }, 90_000);
});

/** A tenant whose ledger refuses CHF for good (its merchant balance frozen): a CHF payment's money is given back by its run. */
async function frozenInChf(name: string) {
  const frozen = await stack.createTenant(name);
  await stack.sql`
    INSERT INTO ledger_accounts (tenant_id, code, currency, frozen) VALUES (${frozen.id}, 'merchant_balance', 'CHF', true)
    ON CONFLICT (tenant_id, code, currency) DO UPDATE SET frozen = true`;
  return apiClient(stack.apiUrl, frozen.apiKey);
}

describe('a payment whose own run gave its charge back (compensation) is not late money', () => {
  it('the ledger refuses an automatic capture: the run refunds it; its AUTHORISATION, delivered while the run decided, changes nothing after (one refund, failure ledger_rejected, no late_success_refunded)', async () => {
    const client = await frozenInChf('adyen-frozen');
    const created = await client.post('/v1/payments', { ...body('pm_card_visa'), currency: 'CHF' }, uniqueKey('pay'));
    expect(created.status, created.text).toBe(402);
    const payment = created.json.error.payment as { id: string };
    expect(created.json.error.payment).toMatchObject({ status: 'failed', failure: { code: 'ledger_rejected' } });
    const charge = ((await control(`/payments?reference=${payment.id}`)).json.data as { pspReference: string }[])[0]!.pspReference;
    expect((await notified(charge, 'REFUND')).object.success).toBe('true');
    // The AUTHORISATION (sent again, as Adyen does until it is accepted) after the payment failed.
    expect((await control(`/events/${encodeURIComponent(charge)}/redeliver`, {})).status).toBe(200);
    await eventually(async () => (await keptOf(charge)).every((k) => k.state === 'delivered') || undefined, 20_000);
    expect(await lateChargeEnded(charge)).toMatchObject({ status: 'COMPLETED', result: { action: 'nothing', reason: "the payment's run gave its charge back (ledger_rejected)" } });
    const [census] = (await control(`/payments?reference=${payment.id}`)).json.data as { modifications: { type: string }[] }[];
    expect(census!.modifications.filter((m) => m.type === 'refund')).toHaveLength(1);
    expect((await client.get(`/v1/payments/${payment.id}`)).json).toMatchObject({ status: 'failed', failure: { code: 'ledger_rejected' } });
    const [events] = await stack.sql<{ count: number }[]>`
      SELECT count(*)::int AS count FROM outbox_events WHERE type = 'payment.late_success_refunded' AND payload -> 'data' -> 'object' ->> 'id' = ${payment.id}`;
    expect(events!.count).toBe(0);
  }, 90_000);
});

describe('the refund of a payment\'s own compensation, refused by Adyen after the payment failed', () => {
  it('REFUND_FAILED turns the payment\'s ledger_rejected into compensation_failed and tells the merchant once; delivered again, it changes nothing', async () => {
    const client = await frozenInChf('adyen-frozen-refund-refused');
    // Adyen refuses a refund hours later: its notifications are held back until the payment has failed.
    await control('/webhook_faults', { loss: 1 });
    const created = await client.post('/v1/payments', { ...body('pm_card_refundFailed'), currency: 'CHF' }, uniqueKey('pay'));
    expect(created.status, created.text).toBe(402);
    const payment = created.json.error.payment as { id: string };
    expect(created.json.error.payment).toMatchObject({ status: 'failed', failure: { code: 'ledger_rejected' } });
    expect(created.json.error.payment.failure.message).toMatch(/Compensated: refunded 2500 CHF of charge/);
    const charge = ((await control(`/payments?reference=${payment.id}`)).json.data as { pspReference: string }[])[0]!.pspReference;
    const refused = await notified(charge, 'REFUND_FAILED');
    const refundId = (refused.object as unknown as { pspReference: string }).pspReference;
    await control('/webhook_faults', {});
    expect((await control(`/events/${encodeURIComponent(refundId)}/redeliver`, {})).status).toBe(200);
    const flagged = await eventually(async () => {
      const { json } = await client.get(`/v1/payments/${payment.id}`);
      return json.failure?.code === 'compensation_failed' && json;
    }, 20_000, 100, 'the payment flagged compensation_failed');
    expect(flagged).toMatchObject({ status: 'failed', failure: { code: 'compensation_failed' } });
    expect(flagged.failure.message).toMatch(new RegExp(`^The ledger refused the payment: .* Compensation FAILED, needs an operator: adyen-test refused the refund ${refundId} of charge ${charge}`));
    // Adyen sends it again until it is accepted: the payment is flagged once, and told once.
    expect((await control(`/events/${encodeURIComponent(refundId)}/redeliver`, {})).status).toBe(200);
    await eventually(async () => (await keptOf(charge)).filter((k) => k.type === 'REFUND_FAILED').every((k) => k.state === 'delivered') || undefined, 20_000);
    const failed = await stack.sql<{ event_key: string }[]>`
      SELECT event_key FROM outbox_events WHERE type = 'payment.failed' AND payload -> 'data' -> 'object' ->> 'id' = ${payment.id} ORDER BY seq`;
    expect(failed.map((e) => e.event_key)).toEqual([`payment:${payment.id}:payment.failed`, `payment:${payment.id}:payment.failed:compensation_failed`]);
    expect((await client.get(`/v1/payments/${payment.id}`)).json.failure.message).toBe(flagged.failure.message);
  }, 90_000);
});

describe('the refund of a payment\'s own compensation, refused by Adyen at once', () => {
  it('whichever comes first, the REFUND_FAILED or the run\'s record of the failure, the payment ends compensation_failed, and the merchant\'s last word says so', async () => {
    const client = await frozenInChf('adyen-frozen-refund-refused-at-once');
    const created = await client.post('/v1/payments', { ...body('pm_card_refundFailed'), currency: 'CHF' }, uniqueKey('pay'));
    expect(created.status, created.text).toBe(402);
    const payment = created.json.error.payment as { id: string; failure: { code: string } };
    // The run's answer says compensation_failed when the refusal was stored before it recorded the failure, else ledger_rejected.
    expect(['compensation_failed', 'ledger_rejected']).toContain(payment.failure.code);
    const charge = ((await control(`/payments?reference=${payment.id}`)).json.data as { pspReference: string }[])[0]!.pspReference;
    await eventually(async () => (await keptOf(charge)).find((k) => k.type === 'REFUND_FAILED' && k.state === 'delivered'), 20_000, 100, 'the REFUND_FAILED delivered');
    const flagged = await eventually(async () => {
      const { json } = await client.get(`/v1/payments/${payment.id}`);
      return json.failure?.code === 'compensation_failed' && json;
    }, 20_000, 100, 'the payment flagged compensation_failed');
    // Said by the run's record (the refusal stored first) or by the webhook (the failure recorded first).
    expect(flagged.failure.message).toMatch(/^The ledger refused the payment: .* Compensation FAILED, needs an operator: adyen-test (then )?refused (that|the) refund/);
    const failed = await stack.sql<{ code: string }[]>`
      SELECT payload -> 'data' -> 'object' -> 'failure' ->> 'code' AS code FROM outbox_events
      WHERE type = 'payment.failed' AND payload -> 'data' -> 'object' ->> 'id' = ${payment.id} ORDER BY seq`;
    expect(failed.at(-1)).toEqual({ code: 'compensation_failed' });
    expect(failed.length).toBeLessThanOrEqual(2);
  }, 90_000);
});

describe('an AUTHORISATION notification decides a payment Adyen answered Received, by its capture mode', () => {
  it.each([
    { capture_method: 'automatic', status: 'succeeded', captured: 2500 },
    { capture_method: 'manual', status: 'requires_capture', captured: 0 },
  ])('$capture_method capture: $status with $captured captured', async ({ capture_method, status, captured }) => {
    const created = await api.post('/v1/payments', body('pm_card_authorisationPending', { capture_method }), uniqueKey('pay'));
    expect(created.status, created.text).toBe(202);
    expect(created.json).toMatchObject({ status: 'processing', provider: 'adyen-test' });
    expect((await control(`/payments/${created.json.provider_charge_id}/authorise`, {})).status).toBe(200);
    expect(await leftStatus(created.json.id, 'processing', 20_000)).toMatchObject({ status, amount_captured_minor: captured });
    if (capture_method === 'manual') expect((await cancel(created.json.id)).status).toBe(200);
  }, 60_000);
});

describe('late money at a kind without retrieval is given back, acting on the signed notification', () => {
  it.each([
    { capture_method: 'manual', code: 'late_authorization_voided', confirmation: 'CANCELLATION' },
    { capture_method: 'automatic', code: 'late_success_refunded', confirmation: 'REFUND' },
  ])('an AUTHORISATION after the payment expired ($capture_method capture): given back, confirmed by its $confirmation; failure.code $code', async ({ capture_method, code, confirmation }) => {
    const short = await stack.startApi({ ASYNC_SETTLEMENT_WINDOW_SECONDS: 2, PROVIDER_POLL_FIRST_MS: 60_000 });
    const client = apiClient(short.url, tenantKey);
    const created = await client.post('/v1/payments', body('pm_card_authorisationPending', { capture_method }), uniqueKey('pay'));
    expect(created.status, created.text).toBe(202);
    const charge = created.json.provider_charge_id as string;
    expect(await leftStatus(created.json.id, 'processing', 30_000, client)).toMatchObject({ status: 'expired', failure: { code: 'settlement_expired' } });
    expect((await control(`/payments/${charge}/authorise`, {})).status).toBe(200);
    const given = await eventually(async () => {
      const { json } = await api.get(`/v1/payments/${created.json.id}`);
      return json.failure?.code === code ? json : undefined;
    }, 30_000);
    expect(given).toMatchObject({ status: 'expired', amount_captured_minor: 0 });
    const confirmed = await notified(charge, confirmation);
    expect(confirmed.object.success).toBe('true');
    expect(await stack.temporal.workflow.getHandle(lateChargeWorkflowId('adyen-test', charge)).result()).toMatchObject({ action: capture_method === 'manual' ? 'voided' : 'refunded' });
  }, 90_000);
});
