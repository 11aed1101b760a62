import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { eventually, uniqueKey, type Tenant, type TestStack } from '../helpers/stack';
import { chargesAtProvider, expectLedgerConsistent } from '../helpers/effects';
import { startFaultStack, type FaultStack } from '../helpers/faults/stack';
import type { Api } from '../helpers/faults/payments';
import { spawnWorker, type WorkerEnvironment, type WorkerProcess } from '../../testkit/processes';

/**
 * A recovering payment (docs/recovery.md) whose worker process is SIGKILLed between two retries,
 * on the real stack: the next retry's timer is Temporal's, so it fires for the next worker (none
 * lost), and each retry's reservation and charge are keyed by its attempt (none added). An hour
 * is 0.36 s: the first retry comes 4.3 s after the first decline, the second 8.6 s after it.
 */

const SCALE = 0.0001;
let faults: FaultStack;
let stack: TestStack;
let tenant: Tenant;
let api: Api;
let environment: WorkerEnvironment;
let current: WorkerProcess | null = null;

beforeAll(async () => {
  faults = await startFaultStack('recovery-crash', { worker: false, networkTimeScale: SCALE, api: { IDEMPOTENCY_WAIT_MS: 3000, RECOVERY_TIME_SCALE: SCALE } });
  ({ stack, tenant, api } = faults);
  faults.alsoStop(async () => current?.kill());
  environment = { databaseUrl: stack.databaseUrl, temporalAddress: stack.temporalAddress, taskQueue: stack.taskQueue, providerUrl: stack.sandboxUrl };
  current = await spawnWorker(`recovery-crash-${stack.taskQueue}-0`, environment);
});
afterAll(async () => faults?.stop());

const payment = (extra: Record<string, unknown>) => ({ order_id: uniqueKey('ord'), amount_minor: 2500, currency: 'EUR', ...extra });

/** A customer with `card` saved on-session (where every recovery card is approved); answers its method's id. */
async function savedCard(card: string): Promise<{ customer: string; method: string }> {
  const created = await api.post('/v1/customers', { email: 'jane@example.com' }, uniqueKey('cus'));
  expect(created.status).toBe(201);
  const customer = created.json.id as string;
  const saved = await api.post('/v1/payments', payment({ payment_method: card, customer, setup_future_usage: 'off_session' }), uniqueKey('pay'));
  expect(saved.status, saved.text).toBe(201);
  const method = await eventually(async () => ((await api.get(`/v1/customers/${customer}/payment_methods`)).json.data[0]?.id as string | undefined) ?? null);
  return { customer, method };
}

/**
 * With no worker up: the PSP holds `chargesBefore` charges of the payment (nothing more was sent
 * meanwhile); then a new worker (the `n`th), and the payment once it has left `recovering`.
 */
async function restartedUntilEnded(id: string, chargesBefore: number, n: number) {
  expect(await chargesAtProvider(stack.sandboxUrl, id)).toHaveLength(chargesBefore);
  current = await spawnWorker(`recovery-crash-${stack.taskQueue}-${n}`, environment);
  return eventually(async () => {
    const { json } = await api.get(`/v1/payments/${id}`);
    return json.status === 'recovering' ? null : json;
  }, 60_000, 200, `payment ${id} left recovering`);
}

describe('a worker SIGKILLed between two retries of a recovering payment', () => {
  it('loses no retry and adds none: exactly three attempts at the PSP, one success, no excessive_retry fee', async () => {
    const { customer, method } = await savedCard('pm_card_recoverAfter2');
    const answer = await api.post('/v1/payments', payment({ payment_method: method, customer, off_session: true, recovery: { window_days: 14 } }), uniqueKey('pay'));
    expect(answer.status, answer.text).toBe(202);
    const id = answer.json.id as string;

    // After the first retry's decline, before the second retry: the kill.
    const between = await eventually(async () => {
      const { json } = await api.get(`/v1/payments/${id}`);
      return json.status === 'recovering' && json.recovery.attempts === 2 ? json : null;
    }, 30_000, 50, 'the first retry declined');
    await current!.kill();
    current = null;
    // The second retry's time passes with no worker: its timer fires into a task that waits.
    const nextAt = Date.parse(between.recovery.next_attempt_at);
    await eventually(async () => Date.now() > nextAt, 30_000, 100, 'the second retry due with no worker');
    const paid = await restartedUntilEnded(id, 2, 1);
    expect(paid).toMatchObject({ status: 'succeeded', recovery: { attempts: 3, next_attempt_at: null, stopped_because: null } });
    expect(paid.attempts.map((a: { attempt: number; outcome: string }) => `${a.attempt} ${a.outcome}`)).toEqual(['1 declined', '2 declined', '3 succeeded']);
    const charges = await chargesAtProvider(stack.sandboxUrl, id);
    expect(charges).toHaveLength(3);
    expect(charges.filter((c) => c.status === 'succeeded')).toHaveLength(1);
    const [reserved] = await stack.sql<{ count: number }[]>`SELECT count(*)::int AS count FROM card_attempts WHERE payment_id = ${id}`;
    expect(reserved!.count).toBe(3);
    const [fees] = await stack.sql<{ count: number }[]>`SELECT count(*)::int AS count FROM sandbox.balance_transactions WHERE type = 'excessive_retry'`;
    expect(fees!.count).toBe(0);
    const [succeeded] = await stack.sql<{ count: number }[]>`
      SELECT count(*)::int AS count FROM outbox_events WHERE type = 'payment.succeeded' AND payload -> 'data' -> 'object' ->> 'id' = ${id}`;
    expect(succeeded!.count).toBe(1);
    await expectLedgerConsistent(stack.sql, tenant.id);
  }, 240_000);

  it('a retry timer that fires while no worker is up, before the window’s end, is acted on after it: no attempt at or after the end, declined window_elapsed', async () => {
    // A worker that has run a payment already (the card's saving): its first workflow task of the
    // next one is quick, so the kill below comes well before the retry's time.
    current ??= await spawnWorker(`recovery-crash-${stack.taskQueue}-2`, environment);
    // A card account of its own: the network counts attempts per card, and the test above used the listed one.
    const { customer, method } = await savedCard('pm_card_recoverAfter2__window');
    // A 1-day window (8.6 s): the first retry at 12 hours (4.3 s) fits in it, the next would not.
    const answer = await api.post('/v1/payments', payment({ payment_method: method, customer, off_session: true, recovery: { window_days: 1 } }), uniqueKey('pay'));
    expect(answer.status, answer.text).toBe(202);
    const id = answer.json.id as string;
    const windowEndsAt = Date.parse(answer.json.recovery.window_ends_at);
    expect(Date.parse(answer.json.recovery.next_attempt_at)).toBeLessThan(windowEndsAt);
    // The kill, while the run waits for its first retry: once the workflow task that answered 202
    // is in the run's history (its timer started), not only in the database.
    const history = () => stack.temporal.workflow.getHandle(answer.json.workflow_id as string).fetchHistory();
    await eventually(async () => ((await history()).events ?? []).some((event) => event.timerStartedEventAttributes) || null, 30_000, 50, 'the retry’s timer started');
    await current!.kill();
    current = null;
    // The retry's time and then the window's end pass with no worker: the timer fires into a task that waits.
    await eventually(async () => Date.now() > windowEndsAt + 500, 30_000, 100, 'the window ended with no worker');
    const ended = await restartedUntilEnded(id, 1, 3);
    expect(ended).toMatchObject({ status: 'declined', recovery: { attempts: 1, next_attempt_at: null, stopped_because: 'window_elapsed' } });
    expect(ended.attempts.map((a: { attempt: number; outcome: string }) => `${a.attempt} ${a.outcome}`)).toEqual(['1 declined']);
    // No attempt after the window: one charge at the PSP, one reservation in the card's budget.
    expect(await chargesAtProvider(stack.sandboxUrl, id)).toHaveLength(1);
    const [reserved] = await stack.sql<{ count: number }[]>`SELECT count(*)::int AS count FROM card_attempts WHERE payment_id = ${id}`;
    expect(reserved!.count).toBe(1);
    await expectLedgerConsistent(stack.sql, tenant.id);
  }, 240_000);
});
