import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import type { RoutePlanner } from '../../activities';
import type { AdyenDouble } from '../../doubles/adyen/server';
import { startAdyenStack } from '../helpers/adyen';
import { apiClient, eventually, startStack, uniqueKey, type TestStack } from '../helpers/stack';

/**
 * A refund at a kind whose refunds are confirmed by notification (Adyen), retried by its client
 * under the same Idempotency-Key all the while it is pending (as the chaos client does), on the
 * real stack: the API and the refund workflow on a real worker (real Temporal and PostgreSQL),
 * the Adyen double's signed REFUND batch delivered to /provider_webhooks/adyen-test. The REFUND
 * settles the refund while the retries go on: a retry's own answer sees it `succeeded`, and the
 * double's notification is accepted, not sent again and again.
 */
/** How long the clients keep retrying at most. */
const RETRY_FOR_MS = 30_000;
let double: AdyenDouble;
let stack: TestStack;
let stop: () => Promise<void>;
let api: ReturnType<typeof apiClient>;
const route: RoutePlanner = async () => ({ providers: ['adyen-test'], reason: 'test route: adyen-test' });

beforeAll(async () => {
  ({ double, stack, stop } = await startAdyenStack({ route, api: { IDEMPOTENCY_WAIT_MS: 3000 } }));
  api = apiClient(stack.apiUrl, (await stack.createTenant('adyen-refund-retry')).apiKey);
}, 300_000);
afterAll(async () => {
  await stop?.();
});

type Kept = { id: string; type: string; state: string; attempts: number };
const control = (path: string, body?: unknown) =>
  fetch(`${double.url}/_sandbox${path}`, body === undefined ? {} : { method: 'POST', body: JSON.stringify(body) }).then(async (r) => ({ status: r.status, json: (await r.json()) as any }));
const keptOf = async (charge: string): Promise<Kept[]> => (await control(`/events?charge=${charge}`)).json.data;
const pause = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

/**
 * A captured payment at adyen-test and one refund of it, whose `clients` retry its key every
 * 150 ms until one of them is answered `succeeded` (or RETRY_FOR_MS passed); `meanwhile` runs
 * beside them, given the payment's charge and the answers so far.
 */
async function refundRetried(clients: number, meanwhile: (charge: string, answers: Answer[]) => Promise<void> = async () => {}) {
  const created = await api.post('/v1/payments', { order_id: uniqueKey('ord'), amount_minor: 2500, currency: 'EUR', payment_method: 'pm_card_visa' }, uniqueKey('pay'));
  expect(created.status, created.text).toBe(201);
  const payment = created.json as { id: string; provider_charge_id: string };
  const key = uniqueKey('refund');
  const answers: Answer[] = [];
  const begun = Date.now();
  let settledBy: { status: number; json: any } | null = null;
  const over = () => settledBy !== null || Date.now() - begun >= RETRY_FOR_MS;
  const retry = async () => {
    while (!over()) {
      const answer = await api.post(`/v1/payments/${payment.id}/refunds`, { amount_minor: 2500 }, key);
      answers.push({ at: Date.now() - begun, status: answer.status, refund: answer.json.status ?? answer.json.error?.type });
      if (answer.status === 201 && answer.json.status === 'succeeded') settledBy ??= answer;
      else await pause(150);
    }
  };
  await Promise.all([...Array.from({ length: clients }, retry), meanwhile(payment.provider_charge_id, answers)]);
  // The REFUND's delivery is answered once its event's workflow has decided it: the refund can
  // show succeeded a moment before the double hears back. Its last state once answered (or the
  // one it is left in, for the failure's message).
  const refundNotice = async () => (await keptOf(payment.provider_charge_id)).find((k) => k.type === 'REFUND');
  const notice = await eventually(async () => {
    const kept = await refundNotice();
    return kept && kept.state !== 'pending' ? kept : null;
  }, 15_000, 50, 'the REFUND delivery answered').catch(refundNotice);
  // What the double saw and what the clients were answered: a failure's message.
  const story = JSON.stringify({ notice, answered: answers.length, first: answers.slice(0, 3), last: answers.slice(-3) });
  return { payment, key, answers, settledBy: settledBy as { status: number; json: any } | null, notice, story, over };
}

type Answer = { at: number; status: number; refund: string | undefined };

describe('a pending refund whose client retries its key in a tight loop', () => {
  afterEach(async () => {
    expect((await control('/webhook_faults', {})).status).toBe(200);
  });

  it.each([
    { what: 'one client retrying every 150 ms, its REFUND kept back and then sent', clients: 1 },
    { what: 'three clients retrying at once, its REFUND kept back and then sent', clients: 3 },
  ])('is settled by its REFUND while the retries go on: $what', async ({ clients }) => {
    // The REFUND is kept back, so the refund is pending under the retries; sent once they have been answered pending a few times.
    expect((await control('/webhook_faults', { loss: 1 })).status).toBe(200);
    const run = await refundRetried(clients, async (charge, answers) => {
      const lost = await eventually(async () => (await keptOf(charge)).find((k) => k.type === 'REFUND' && k.state === 'lost'), 20_000, 100, 'the REFUND kept back');
      await eventually(() => answers.filter((a) => a.status === 202).length >= 5, 20_000, 50, 'five pending answers');
      expect((await control('/webhook_faults', {})).status).toBe(200);
      expect((await control(`/events/${encodeURIComponent(lost.id)}/redeliver`, {})).status).toBe(200);
    });
    expect(run.answers.every((a) => a.status === 202 || a.status === 201), run.story).toBe(true);
    expect(run.answers.filter((a) => a.status === 202).length, run.story).toBeGreaterThanOrEqual(5);
    expect(run.settledBy, run.story).not.toBeNull();
    expect(run.settledBy!.json, run.story).toMatchObject({ status: 'succeeded', amount_minor: 2500, payment_id: run.payment.id });
    // Sent once and accepted at once: the API answered the batch `[accepted]` under the retries.
    expect(run.notice, run.story).toMatchObject({ state: 'delivered', attempts: 1 });
    await settledAndReplayed(run);
  }, RETRY_FOR_MS + 60_000);

  it.each([
    { what: 'its REFUND sent at once (within the first wait)', faults: {}, sends: 1 },
    { what: 'its REFUND delayed past the first wait', faults: { delay_ms: 4000 }, sends: 1 },
    { what: 'its REFUND delayed past the first wait and sent twice at once', faults: { delay_ms: 4000, duplicate: 1 }, sends: 2 },
  ])('three clients retrying at once from the start, $what: settled while the retries go on', async ({ faults, sends }) => {
    expect((await control('/webhook_faults', faults)).status).toBe(200);
    const run = await refundRetried(3);
    expect(run.answers.every((a) => a.status === 202 || a.status === 201), run.story).toBe(true);
    expect(run.settledBy, run.story).not.toBeNull();
    expect(run.settledBy!.json, run.story).toMatchObject({ status: 'succeeded', amount_minor: 2500, payment_id: run.payment.id });
    // Each copy accepted the first time it was sent.
    expect(run.notice, run.story).toMatchObject({ state: 'delivered', attempts: sends });
    await settledAndReplayed(run);
  }, RETRY_FOR_MS + 60_000);
});

/** Once settled, the key replays the same answer, and the payment and refund read it. */
async function settledAndReplayed(run: Awaited<ReturnType<typeof refundRetried>>) {
  const replay = await api.post(`/v1/payments/${run.payment.id}/refunds`, { amount_minor: 2500 }, run.key);
  expect(replay.status, replay.text).toBe(201);
  expect(replay.headers.get('idempotent-replayed')).toBe('true');
  expect(replay.json).toMatchObject({ id: run.settledBy!.json.id, status: 'succeeded' });
  expect((await api.get(`/v1/payments/${run.payment.id}`)).json).toMatchObject({ amount_refunded_minor: 2500 });
  expect((await api.get(`/v1/refunds/${run.settledBy!.json.id}`)).json).toMatchObject({ status: 'succeeded' });
}
