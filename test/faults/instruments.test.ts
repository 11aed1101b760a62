import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest';
import { randomBytes } from 'node:crypto';
import { createSql, type Sql } from '../../db/connect';
import { ensureDatabase, migrate } from '../../db/migrate';
import { apiClient, eventually, uniqueKey, type TestStack } from '../helpers/stack';
import { insertEvent } from '../../db/outbox';
import { judge, takeCensus, untilQuiet } from '../helpers/faults/census';
import { startMerchant, type Merchant } from '../../testkit/merchant';
import { tenantWithMerchant } from '../helpers/faults/merchant';
import { startFaultStack, type FaultStack } from '../helpers/faults/stack';
import { paymentIdIn, paymentRequest } from '../helpers/faults/payments';

/**
 * The fault scenarios report "zero duplicates, zero losses"; that figure is only worth
 * something if the counting would have seen them. These tests plant each kind of
 * duplicate and loss in a real payment's effects and check the census reports it.
 */

let faults: FaultStack;
let stack: TestStack;
let merchant: Merchant;

// The planted duplicates must not be seen by other tests that count over the whole run's
// database (e.g. reconciliation's effect counts in observability.test.ts): a database of its own.
const databaseName = `payorch_instruments_${randomBytes(4).toString('hex')}`;
let admin: Sql;

beforeAll(async () => {
  const shared = inject('databaseUrl');
  admin = createSql(shared.replace(/\/[^/]*$/, '/postgres'), { max: 1 });
  await ensureDatabase(admin, databaseName);
  const databaseUrl = shared.replace(/\/[^/]*$/, `/${databaseName}`);
  const sql = createSql(databaseUrl, { max: 1 });
  await migrate(sql);
  await sql.end();
  faults = await startFaultStack('instruments', { databaseUrl });
  ({ stack, merchant } = faults);
});
afterAll(async () => {
  await faults?.stop();
  await admin?.unsafe(`DROP DATABASE IF EXISTS ${databaseName} WITH (FORCE)`);
  await admin?.end();
});

async function paidPayment() {
  const tenant = await tenantWithMerchant(stack, merchant, 'instruments');
  const plan = paymentRequest('pm_card_visa');
  const response = await apiClient(stack.apiUrl, tenant.apiKey).post('/v1/payments', plan.body, plan.key);
  expect(response.status).toBe(201);
  const paymentId = paymentIdIn(response)!;
  expect(await untilQuiet(stack, [paymentId], { merchant, timeoutMs: 30_000 })).not.toBeNull();
  return { tenant, plan, paymentId };
}

describe('the effect census sees what it must report', () => {
  it('finds nothing wrong with a clean payment', async () => {
    const { paymentId } = await paidPayment();
    const judgement = judge(await takeCensus(stack, paymentId, { merchant, countRuns: true }), 'succeeded');
    expect(judgement).toMatchObject({ duplicates: [], losses: [], anomalies: [], redeliveries: 0 });
  });

  it('counts a second charge at the provider and a second event for one fact as duplicates', async () => {
    const { tenant, plan, paymentId } = await paidPayment();
    // Another charge for the same payment, under a key of its own: what a retry without the sub-key would do.
    const charge = await fetch(`${stack.sandboxUrl}/v1/charges`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', 'idempotency-key': uniqueKey('stray') },
      body: JSON.stringify({ amount_minor: plan.body.amount_minor, currency: 'EUR', payment_method: 'pm_card_visa', capture: true, reference: paymentId }),
    });
    expect(charge.status).toBe(200);
    const [row] = await stack.sql`SELECT payload FROM outbox_events WHERE payload -> 'data' -> 'object' ->> 'id' = ${paymentId}`;
    await insertEvent(stack.sql, { tenantId: tenant.id, type: 'payment.succeeded', eventKey: `planted:${uniqueKey()}`, object: (row!.payload as any).data.object });

    const judgement = judge(await takeCensus(stack, paymentId, { merchant }), 'succeeded');
    expect(judgement.duplicates).toEqual(
      expect.arrayContaining([
        { effect: 'provider charge', extra: 1 },
        { effect: 'payment.succeeded event', extra: 1 },
      ]),
    );
  });

  it('counts an undelivered event, a missing posting and an unreached final state as losses', async () => {
    const { paymentId } = await paidPayment();
    // Judged against a merchant that never acknowledged anything, and against another outcome.
    const deaf = await startMerchant('hang');
    try {
      const unheard = judge(await takeCensus(stack, paymentId, { merchant: deaf }), 'succeeded');
      expect(unheard.losses).toEqual([expect.stringMatching(/payment\.succeeded event evt_\w+ never delivered/)]);
      const wrongState = judge(await takeCensus(stack, paymentId), 'declined');
      expect(wrongState.losses).toEqual(['final state declined not reached (status succeeded)', 'payment.declined event missing from the outbox']);
      expect(wrongState.duplicates).toEqual([{ effect: 'ledger transaction', extra: 1 }]);
      const lost = judge(await takeCensus(stack, 'pay_00000000000000000000000000'), 'succeeded');
      expect(lost.losses).toEqual([
        'final state succeeded not reached (status no payment row)',
        'no charge at the provider',
        'ledger transaction missing',
        'payment.succeeded event missing from the outbox',
      ]);
    } finally {
      await deaf.close();
    }
  });

  it('counts a second delivery of the same event id as a redelivery, not a duplicate effect', async () => {
    const { paymentId } = await paidPayment();
    const census = await takeCensus(stack, paymentId, { merchant });
    const [eventId] = Object.keys(census.eventIds);
    await eventually(async () => (merchant.acks.get(eventId!) ?? 0) === 1);
    merchant.acks.set(eventId!, 2);
    const judgement = judge(await takeCensus(stack, paymentId, { merchant }), 'succeeded');
    expect(judgement).toMatchObject({ duplicates: [], losses: [], redeliveries: 1 });
  });
});
