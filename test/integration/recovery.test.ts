import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import type { RoutePlanner } from '../../activities';
import { apiClient, eventually, startStack, uniqueKey, type TestStack, type Tenant } from '../helpers/stack';
import { expectLedgerConsistent } from '../helpers/effects';

/**
 * Revenue recovery end to end (docs/recovery.md) on the real stack: Temporal, PostgreSQL, the
 * worker and two sandbox PSPs on one card network. Every duration of the policy is scaled:
 * an hour is 0.36 s, the schedule's first retry 12 hours (4.3 s) after the decline.
 */

const SCALE = 0.0001;
let stack: TestStack;
let tenant: Tenant;
let api: ReturnType<typeof apiClient>;
const route: RoutePlanner = async () => ({ providers: ['sandbox', 'sandbox-b'], reason: 'test route: sandbox then sandbox-b' });

beforeAll(async () => {
  stack = await startStack({ secondSandbox: {}, route, networkTimeScale: SCALE, api: { IDEMPOTENCY_WAIT_MS: 3000, RECOVERY_TIME_SCALE: SCALE } });
  tenant = await stack.createTenant('recovery');
  api = apiClient(stack.apiUrl, tenant.apiKey);
});
afterEach(async () => expectLedgerConsistent(stack.sql, tenant.id));
afterAll(async () => stack?.stop());

async function outage(mode: 'none' | 'unavailable' | 'timeout') {
  const response = await fetch(`${stack.sandboxUrl}/_sandbox/outage`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ mode }) });
  expect(response.status).toBe(200);
}

const payment = (extra: Record<string, unknown>) => ({ order_id: uniqueKey('ord'), amount_minor: 2500, currency: 'EUR', ...extra });

/**
 * A customer with a card of its own saved (on-session, where every recovery card is approved);
 * answers the method's id. The card is a variant of the test card (docs/sandbox.md): the same
 * behaviour, another card, so no other test's attempts count in its budget or at the network.
 */
async function customerWithCard(card: string, client = api, variant?: string): Promise<{ customer: string; method: string }> {
  const api = client;
  const created = await api.post('/v1/customers', { email: 'jane@example.com' }, uniqueKey('cus'));
  expect(created.status).toBe(201);
  const customer = created.json.id as string;
  const own = `${card}__${variant ?? customer.replace(/[^A-Za-z0-9]/g, '').slice(-20)}`;
  const paid = await api.post('/v1/payments', payment({ payment_method: own, customer, setup_future_usage: 'off_session' }), uniqueKey('pay'));
  expect(paid.status, paid.text).toBe(201);
  const method = await eventually(async () => {
    const listed = await api.get(`/v1/customers/${customer}/payment_methods`);
    return (listed.json.data[0]?.id as string | undefined) ?? null;
  });
  return { customer, method };
}

/** The payment once it has left `recovering` (and any other waiting status). */
const ended = (id: string) =>
  eventually(async () => {
    const { json } = await api.get(`/v1/payments/${id}`);
    return ['recovering', 'processing', 'requires_action'].includes(json.status) ? null : json;
  }, 60_000, 200, `payment ${id} ended`);

async function eventsOf(paymentId: string, type: string): Promise<number> {
  const [row] = await stack.sql<{ count: number }[]>`
    SELECT count(*)::int AS count FROM outbox_events WHERE type = ${type} AND payload -> 'data' -> 'object' ->> 'id' = ${paymentId}`;
  return row!.count;
}

async function excessiveRetryFees(): Promise<number> {
  const [a] = await stack.sql<{ count: number }[]>`SELECT count(*)::int AS count FROM sandbox.balance_transactions WHERE type = 'excessive_retry'`;
  return a!.count;
}

describe('a soft decline of an off-session payment is recovered within the rules', () => {
  it('pm_card_recoverAfter2: 202 recovering (replayed as such), two declines, paid by the third attempt; one recovery_attempt_failed, one payment.succeeded', async () => {
    const { customer, method } = await customerWithCard('pm_card_recoverAfter2');
    const key = uniqueKey('pay');
    const request = payment({ payment_method: method, customer, off_session: true, recovery: { window_days: 14 } });
    const created = await api.post('/v1/payments', request, key);
    expect(created.status, created.text).toBe(202);
    expect(created.json).toMatchObject({
      status: 'recovering',
      recovery: { attempts: 1, stopped_because: null, last_decline: { code: 'insufficient_funds', network_decline_code: '51', decline_category: 2, network_advice_code: null } },
    });
    expect(Date.parse(created.json.recovery.next_attempt_at)).toBeLessThan(Date.parse(created.json.recovery.window_ends_at));
    expect((await api.post('/v1/payments', request, key)).text).toBe(created.text);
    const paid = await ended(created.json.id);
    expect(paid).toMatchObject({ status: 'succeeded', amount_captured_minor: 2500, recovery: { attempts: 3, next_attempt_at: null, stopped_because: null } });
    expect(paid.attempts.map((a: { outcome: string }) => a.outcome)).toEqual(['declined', 'declined', 'succeeded']);
    expect(await eventsOf(created.json.id, 'payment.recovery_attempt_failed')).toBe(1);
    expect(await eventsOf(created.json.id, 'payment.succeeded')).toBe(1);
    expect(await eventsOf(created.json.id, 'payment.declined')).toBe(0);
    // The replay still answers the first answer, the 202.
    expect((await api.post('/v1/payments', request, key)).text).toBe(created.text);
    expect(await excessiveRetryFees()).toBe(0);
  });

  it('while the PSP that declined is down, a retry goes on along the route to the next PSP by the network transaction id, and the network counts it', async () => {
    const { customer, method } = await customerWithCard('pm_card_recoverAfter2');
    const created = await api.post('/v1/payments', payment({ payment_method: method, customer, off_session: true, recovery: { window_days: 14 } }), uniqueKey('pay'));
    expect(created.status, created.text).toBe(202);
    expect(created.json.provider).toBe('sandbox');
    await outage('unavailable');
    try {
      const paid = await ended(created.json.id);
      expect(paid).toMatchObject({ status: 'succeeded', provider: 'sandbox-b', recovery: { attempts: 3 } });
      // Nothing was charged at the PSP that was down: its step's lookups found no charge before the retry moved on.
      expect(paid.attempts.map((a: { provider: string; outcome: string }) => `${a.provider} ${a.outcome}`)).toEqual(['sandbox declined', 'sandbox not_charged', 'sandbox-b declined', 'sandbox-b succeeded']);
      const [atA] = await stack.sql<{ count: number }[]>`SELECT count(*)::int AS count FROM sandbox.charges WHERE reference = ${created.json.id}`;
      expect(atA!.count).toBe(1);
    } finally {
      await outage('none');
    }
  });

  it('pm_card_mastercard_adviceRetryLater: advice 24 (retry after an hour) shown, waited for, and paid by the next attempt without a fee', async () => {
    const { customer, method } = await customerWithCard('pm_card_mastercard_adviceRetryLater');
    const created = await api.post('/v1/payments', payment({ payment_method: method, customer, off_session: true, recovery: { window_days: 14 } }), uniqueKey('pay'));
    expect(created.status, created.text).toBe(202);
    expect(created.json.recovery.last_decline).toEqual({ code: 'try_again_later', network_decline_code: '05', decline_category: null, network_advice_code: '24' });
    const paid = await ended(created.json.id);
    expect(paid).toMatchObject({ status: 'succeeded', recovery: { attempts: 2 } });
    expect(await excessiveRetryFees()).toBe(0);
  });

  it('a hard decline on the first attempt answers 402 at once: pm_card_stolen (Visa category 1), pm_card_mastercard_adviceNeverRetry (advice 03)', async () => {
    for (const card of ['pm_card_stolen', 'pm_card_mastercard_adviceNeverRetry']) {
      const { customer, method } = await customerWithCard(card);
      const created = await api.post('/v1/payments', payment({ payment_method: method, customer, off_session: true, recovery: { window_days: 14 } }), uniqueKey('pay'));
      expect(created.status, created.text).toBe(402);
      expect(created.json.error.payment).toMatchObject({ status: 'declined' });
      expect(created.json.error.payment.recovery).toBeUndefined();
    }
  });

  it('pm_card_alwaysInsufficientFunds with a 1-day window: retried until the window ends, then declined with stopped_because window_elapsed', async () => {
    const { customer, method } = await customerWithCard('pm_card_alwaysInsufficientFunds');
    const created = await api.post('/v1/payments', payment({ payment_method: method, customer, off_session: true, recovery: { window_days: 1 } }), uniqueKey('pay'));
    expect(created.status, created.text).toBe(202);
    const declined = await ended(created.json.id);
    expect(declined).toMatchObject({ status: 'declined', failure: { code: 'insufficient_funds' }, recovery: { stopped_because: 'window_elapsed', next_attempt_at: null } });
    // The schedule's 12-hour retry fits a 1-day window; its 24-hour one does not.
    expect(declined.recovery.attempts).toBe(2);
    expect(declined.attempts).toHaveLength(2);
    expect(await eventsOf(created.json.id, 'payment.declined')).toBe(1);
    expect(await excessiveRetryFees()).toBe(0);
  });

  it('POST /v1/payments/{id}/cancel stops a recovering payment: canceled, and no attempt after it', async () => {
    const { customer, method } = await customerWithCard('pm_card_alwaysInsufficientFunds');
    const created = await api.post('/v1/payments', payment({ payment_method: method, customer, off_session: true, recovery: { window_days: 30 } }), uniqueKey('pay'));
    expect(created.status, created.text).toBe(202);
    // Sent at once: the run may still be in the workflow task that recorded the 202 (the update then meets a task the server fails; the API sends it again).
    const canceled = await api.post(`/v1/payments/${created.json.id}/cancel`, {}, uniqueKey('cancel'));
    expect(canceled.status, canceled.text).toBe(200);
    expect(canceled.json).toMatchObject({ status: 'canceled' });
    const [charges] = await stack.sql<{ count: number }[]>`SELECT count(*)::int AS count FROM sandbox.charges WHERE reference = ${created.json.id}`;
    expect(charges!.count).toBe(1);
    const { json } = await api.get(`/v1/payments/${created.json.id}`);
    expect(json.attempts).toHaveLength(1);
  });

  it('a recovering payment names its latest charge: after a declined retry it is that retry’s, and a cancel then keeps it', async () => {
    const { customer, method } = await customerWithCard('pm_card_alwaysInsufficientFunds');
    const created = await api.post('/v1/payments', payment({ payment_method: method, customer, off_session: true, recovery: { window_days: 30 } }), uniqueKey('pay'));
    expect(created.status, created.text).toBe(202);
    const first = created.json.provider_charge_id as string;
    expect(first).toEqual(expect.any(String));
    const retried = await eventually(async () => {
      const { json } = await api.get(`/v1/payments/${created.json.id}`);
      return json.attempts.filter((a: { outcome: string }) => a.outcome === 'declined').length >= 2 ? json : null;
    }, 60_000, 100, 'a declined retry');
    const latest = retried.attempts.filter((a: { provider_charge_id: string | null }) => a.provider_charge_id !== null).at(-1);
    expect(latest.provider_charge_id).not.toBe(first);
    expect(retried).toMatchObject({ status: 'recovering', provider: latest.provider, provider_charge_id: latest.provider_charge_id });
    const canceled = await api.post(`/v1/payments/${created.json.id}/cancel`, {}, uniqueKey('cancel'));
    expect(canceled.status, canceled.text).toBe(200);
    const { json } = await api.get(`/v1/payments/${created.json.id}`);
    const last = json.attempts.filter((a: { provider_charge_id: string | null }) => a.provider_charge_id !== null).at(-1);
    expect(json).toMatchObject({ status: 'canceled', provider: last.provider, provider_charge_id: last.provider_charge_id });
  });

  it('bad input is refused with 400 and charges nothing: recovery on-session, with manual capture, a window outside 1–60 days, an unknown field', async () => {
    const { customer, method } = await customerWithCard('pm_card_visa');
    for (const [body, reason] of [
      [payment({ payment_method: 'pm_card_visa', recovery: { window_days: 14 } }), /needs off_session: true/],
      [payment({ payment_method: method, customer, recovery: { window_days: 14 } }), /needs off_session: true/],
      [payment({ payment_method: method, customer, off_session: false, recovery: { window_days: 14 } }), /needs off_session: true/],
      [payment({ payment_method: method, customer, off_session: true, capture_method: 'manual', recovery: { window_days: 14 } }), /needs capture_method automatic/],
    ] as const) {
      const refused = await api.post('/v1/payments', body, uniqueKey('pay'));
      expect(refused.status, refused.text).toBe(400);
      expect(refused.text).toMatch(reason);
      const [row] = await stack.sql<{ count: number }[]>`SELECT count(*)::int AS count FROM payments WHERE tenant_id = ${tenant.id} AND order_id = ${body.order_id}`;
      expect(row!.count).toBe(0);
    }
    for (const body of [
      payment({ payment_method: method, customer, off_session: true, recovery: { window_days: 61 } }),
      payment({ payment_method: method, customer, off_session: true, recovery: { window_days: 0 } }),
      payment({ payment_method: method, customer, off_session: true, recovery: { window_days: 14, retries: 3 } }),
    ]) {
      const refused = await api.post('/v1/payments', body, uniqueKey('pay'));
      expect(refused.status, refused.text).toBe(400);
      expect(refused.text).toMatch(/recovery/);
    }
  });
});

describe('a cancel that meets a recovery retry in flight is taken, and decided by that retry’s outcome', () => {
  /**
   * A recovering payment whose first retry is held in flight (the sandbox's `timeout` outage:
   * the charge is made at the PSP, its answer never comes, lookups hang) when the cancel comes.
   * Answers the cancel's key and its answers: while the retry is in flight, and after the end.
   */
  async function cancelWhileRetryInFlight(card: string) {
    const { customer, method } = await customerWithCard(card);
    const created = await api.post('/v1/payments', payment({ payment_method: method, customer, off_session: true, recovery: { window_days: 30 } }), uniqueKey('pay'));
    expect(created.status, created.text).toBe(202);
    const id = created.json.id as string;
    const cancelKey = uniqueKey('cancel');
    await outage('timeout');
    try {
      // The first retry (12 hours: 4.3 s after the decline) is under way: its charge is at the PSP, unanswered.
      await eventually(async () => ((await chargesOf(id)) === 2 ? true : null), 30_000, 50, 'the retry’s charge made at the PSP');
      const taken = await api.post(`/v1/payments/${id}/cancel`, {}, cancelKey);
      expect(taken.status, taken.text).toBe(202);
      expect(taken.json).toMatchObject({ id, status: 'recovering' });
      // Nothing stored under the key before the outcome is known: the same request is 202 again.
      expect(await storedUnder(cancelKey)).toBeNull();
      const again = await api.post(`/v1/payments/${id}/cancel`, {}, cancelKey);
      expect(again.status, again.text).toBe(202);
      expect(await storedUnder(cancelKey)).toBeNull();
    } finally {
      await outage('none');
    }
    // Decided by the retry's outcome, whether or not the client asks again.
    const final = await eventually(async () => {
      const { json } = await api.get(`/v1/payments/${id}`);
      return json.status !== 'recovering' && (await storedUnder(cancelKey)) !== null ? json : null;
    }, 90_000, 200, `payment ${id} decided`);
    const replayed = await api.post(`/v1/payments/${id}/cancel`, {}, cancelKey);
    expect(replayed.headers.get('idempotent-replayed')).toBe('true');
    expect(await chargesOf(id)).toBe(2);
    return { id, final, replayed };
  }

  async function chargesOf(id: string): Promise<number> {
    const [row] = await stack.sql<{ count: number }[]>`SELECT count(*)::int AS count FROM sandbox.charges WHERE reference = ${id}`;
    return row!.count;
  }

  async function storedUnder(key: string): Promise<number | null> {
    const [row] = await stack.sql<{ response_status: number | null }[]>`
      SELECT response_status FROM idempotency_records WHERE tenant_id = ${tenant.id} AND idempotency_key = ${key}`;
    return row?.response_status ?? null;
  }

  it('the retry is declined (pm_card_alwaysInsufficientFunds): the payment is canceled, the cancel’s answer 200 canceled, no attempt after it', async () => {
    const { id, final, replayed } = await cancelWhileRetryInFlight('pm_card_alwaysInsufficientFunds');
    expect(final).toMatchObject({ status: 'canceled' });
    expect(final.attempts.map((a: { outcome: string }) => a.outcome)).toEqual(['declined', 'declined']);
    expect(replayed.status, replayed.text).toBe(200);
    expect(replayed.json).toMatchObject({ id, status: 'canceled' });
    expect(await eventsOf(id, 'payment.canceled')).toBe(1);
    expect(await eventsOf(id, 'payment.succeeded')).toBe(0);
    // Every reservation made was an attempt made.
    const [reserved] = await stack.sql<{ count: number }[]>`SELECT count(*)::int AS count FROM card_attempts WHERE payment_id = ${id}`;
    expect(reserved!.count).toBe(2);
  });

  it('the retry is paid (pm_card_mastercard_adviceRetryLater): the payment succeeds, and only then is the cancel refused, 409 saying so', async () => {
    const { id, final, replayed } = await cancelWhileRetryInFlight('pm_card_mastercard_adviceRetryLater');
    expect(final).toMatchObject({ status: 'succeeded', amount_captured_minor: 2500 });
    expect(replayed.status, replayed.text).toBe(409);
    expect(replayed.json.error).toMatchObject({
      type: 'payment_not_cancelable',
      message: `payment ${id} is succeeded: the recovery attempt under way when the cancel came was paid, so there is nothing to cancel (a refund gives the money back)`,
    });
    expect(await eventsOf(id, 'payment.succeeded')).toBe(1);
    expect(await eventsOf(id, 'payment.canceled')).toBe(0);
  });
});

describe("a tenant's recovery settings (PATCH /admin/tenants/{id} recovery)", () => {
  let settled: Tenant;
  let client: ReturnType<typeof apiClient>;
  beforeAll(async () => {
    settled = await stack.createTenant('recovery-settings');
    client = apiClient(stack.apiUrl, settled.apiKey);
  });
  afterEach(async () => expectLedgerConsistent(stack.sql, settled.id));

  async function admin(method: 'GET' | 'PATCH', body?: unknown) {
    const response = await fetch(`${stack.apiUrl}/admin/tenants/${settled.id}`, {
      method,
      headers: { authorization: `Bearer ${stack.adminToken}`, ...(body === undefined ? {} : { 'content-type': 'application/json' }) },
      body: body === undefined ? undefined : JSON.stringify(body),
    });
    const text = await response.text();
    return { status: response.status, text, json: JSON.parse(text) as any };
  }
  const endedAt = (id: string) =>
    eventually(async () => {
      const { json } = await client.get(`/v1/payments/${id}`);
      return ['recovering', 'processing', 'requires_action'].includes(json.status) ? null : json;
    }, 60_000, 200, `payment ${id} ended`);

  it("a limit above the networks' is 400 and changes nothing", async () => {
    const before = await admin('GET');
    expect(before.json.recovery).toEqual({ window_days: null, per_day: 10, per_30_days: 15, max_retries: 8 });
    for (const recovery of [{ per_day: 11 }, { per_30_days: 16, window_days: 3 }, { max_retries: 9 }, { per_day: 0 }, { window_days: 61 }, { per_day: 2.5 }]) {
      const refused = await admin('PATCH', { recovery });
      expect(refused.status, refused.text).toBe(400);
      expect(refused.text).toMatch(/per_day|per_30_days|max_retries|window_days/);
    }
    expect((await admin('GET')).json).toEqual(before.json);
    const [row] = await stack.sql`SELECT recovery_window_days, recovery_per_day, recovery_per_30_days, recovery_max_retries FROM tenants WHERE id = ${settled.id}`;
    expect(row).toEqual({ recovery_window_days: null, recovery_per_day: null, recovery_per_30_days: null, recovery_max_retries: null });
  });

  it('the default window applies to an off-session payment that omits recovery (not to an on-session one)', async () => {
    const set = await admin('PATCH', { recovery: { window_days: 2 } });
    expect(set.status, set.text).toBe(200);
    expect(set.json.recovery).toEqual({ window_days: 2, per_day: 10, per_30_days: 15, max_retries: 8 });
    const { customer, method } = await customerWithCard('pm_card_recoverAfter2', client);
    const created = await client.post('/v1/payments', payment({ payment_method: method, customer, off_session: true }), uniqueKey('pay'));
    expect(created.status, created.text).toBe(202);
    expect(created.json).toMatchObject({ status: 'recovering', recovery: { attempts: 1 } });
    const paid = await endedAt(created.json.id);
    expect(paid).toMatchObject({ status: 'succeeded', recovery: { attempts: 3, stopped_because: null } });
    // On-session, the card is approved at once: no recovery object.
    const onSession = await client.post('/v1/payments', payment({ payment_method: 'pm_card_visa' }), uniqueKey('pay'));
    expect(onSession.status, onSession.text).toBe(201);
    expect(onSession.json.recovery).toBeUndefined();
  });

  it("a lower per-card limit stops the retries at that count: retry_limit, and no more attempts of the card", async () => {
    const set = await admin('PATCH', { recovery: { window_days: 60, per_30_days: 3 } });
    expect(set.status, set.text).toBe(200);
    expect(set.json.recovery).toMatchObject({ window_days: 60, per_day: 10, per_30_days: 3 });
    const { customer, method } = await customerWithCard('pm_card_alwaysInsufficientFunds', client);
    const created = await client.post('/v1/payments', payment({ payment_method: method, customer, off_session: true }), uniqueKey('pay'));
    expect(created.status, created.text).toBe(202);
    const declined = await endedAt(created.json.id);
    // The budget frees its next slot 30 days after its oldest attempt: within the 60-day window, past the schedule's 14 days.
    expect(declined.recovery, JSON.stringify(declined.recovery)).toMatchObject({ stopped_because: 'retry_limit', next_attempt_at: null });
    expect(declined.status).toBe('declined');
    const [reserved] = await stack.sql<{ count: number }[]>`SELECT count(*)::int AS count FROM card_attempts WHERE payment_method_id = ${method}`;
    expect(reserved!.count).toBe(3);
    // The first attempt (reserved too) and the two retries the budget held.
    expect(declined.recovery.attempts).toBe(3);
    expect(await excessiveRetryFees()).toBe(0);
  });

  it('concurrent payments of one card cannot overrun its budget: the first attempts reserve too, the ones past it fail with nothing charged', async () => {
    const set = await admin('PATCH', { recovery: { window_days: 60, per_day: 3, per_30_days: null } });
    expect(set.status, set.text).toBe(200);
    const { customer, method } = await customerWithCard('pm_card_alwaysInsufficientFunds', client);
    const answers = await Promise.all(Array.from({ length: 6 }, () => client.post('/v1/payments', payment({ payment_method: method, customer, off_session: true }), uniqueKey('pay'))));
    const recovering = answers.filter((a) => a.status === 202);
    const refused = answers.filter((a) => a.status !== 202);
    expect(recovering.map((a) => a.json.status)).toEqual(['recovering', 'recovering', 'recovering']);
    expect(refused).toHaveLength(3);
    for (const answer of refused) {
      expect(answer.status, answer.text).toBe(402);
      expect(answer.json.error.payment).toMatchObject({ status: 'failed', failure: { code: 'card_attempt_limit' } });
    }
    for (const answer of recovering) expect((await client.post(`/v1/payments/${answer.json.id}/cancel`, {}, uniqueKey('cancel'))).status).toBe(200);
    const ids = answers.map((a) => (a.json.id ?? a.json.error.payment.id) as string);
    const [charged] = await stack.sql<{ count: number }[]>`SELECT count(*)::int AS count FROM sandbox.charges WHERE reference IN ${stack.sql(ids)}`;
    expect(charged!.count).toBe(3);
    const [reserved] = await stack.sql<{ count: number }[]>`SELECT count(*)::int AS count FROM card_attempts WHERE payment_method_id = ${method}`;
    expect(reserved!.count).toBe(3);
    expect(await excessiveRetryFees()).toBe(0);
  });

  it('the same card saved twice (for two customers) has one budget: under per_day 2 the third payment in the day fails card_attempt_limit, nothing charged, whichever copy it charges', async () => {
    const set = await admin('PATCH', { recovery: { window_days: 60, per_day: 2, per_30_days: null } });
    expect(set.status, set.text).toBe(200);
    const variant = `twice${Date.now().toString(36)}`;
    const one = await customerWithCard('pm_card_alwaysInsufficientFunds', client, variant);
    const two = await customerWithCard('pm_card_alwaysInsufficientFunds', client, variant);
    expect(two.method).not.toBe(one.method);
    const pay = (copy: { customer: string; method: string }) => client.post('/v1/payments', payment({ payment_method: copy.method, customer: copy.customer, off_session: true }), uniqueKey('pay'));
    const first = await pay(one);
    const second = await pay(two);
    expect([first.status, second.status], `${first.text} ${second.text}`).toEqual([202, 202]);
    const third = await pay(one);
    expect(third.status, third.text).toBe(402);
    expect(third.json.error.payment).toMatchObject({ status: 'failed', failure: { code: 'card_attempt_limit' } });
    for (const recovering of [first, second]) expect((await client.post(`/v1/payments/${recovering.json.id}/cancel`, {}, uniqueKey('cancel'))).status).toBe(200);
    const ids = [first.json.id as string, second.json.id as string, third.json.error.payment.id as string];
    const [charged] = await stack.sql<{ count: number }[]>`SELECT count(*)::int AS count FROM sandbox.charges WHERE reference IN ${stack.sql(ids)}`;
    expect(charged!.count).toBe(2);
    expect(await excessiveRetryFees()).toBe(0);
  });
});
