import { randomBytes } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createSql, type Sql } from '../../db/connect';
import { paymentOfCharge } from '../../db/provider-events';
import { fileDatabaseUrl, insertTenant } from '../helpers/database';

/**
 * Which payment a PSP's charge belongs to (db/provider-events.ts paymentOfCharge, used by the PSP
 * webhook route and disputes): our reference when its recorded charge is this one or none yet,
 * an attempt that made the charge, or the payment that recorded the charge as its own; never a
 * payment at another PSP.
 */

let sql: Sql;
let tenantId: string;
beforeAll(async () => {
  sql = createSql(await fileDatabaseUrl(), { max: 2 });
  tenantId = await insertTenant(sql, 'charges');
});
afterAll(async () => {
  await sql?.end();
});

const unique = (prefix: string) => `${prefix}_${randomBytes(6).toString('hex')}`;

async function payment(options: { provider: string | null; chargeId: string | null }): Promise<string> {
  const id = unique('pay_poc');
  await sql`
    INSERT INTO payments (id, tenant_id, order_id, amount_minor, currency, status, capture_method, payment_method, provider, provider_charge_id, workflow_id)
    VALUES (${id}, ${tenantId}, ${`ord_${id}`}, 1000, 'EUR', 'processing', 'automatic', 'pm_card_visa', ${options.provider}, ${options.chargeId}, ${`wf-${id}`})`;
  return id;
}

describe('the payment of a PSP charge', () => {
  it('is our reference while the payment has recorded no charge, or this one; not when it recorded another', async () => {
    const fresh = await payment({ provider: 'sandbox-a', chargeId: null });
    expect(await paymentOfCharge(sql, 'sandbox-a', fresh, unique('ch'))).toEqual({ id: fresh });
    const charge = unique('ch');
    const charged = await payment({ provider: 'sandbox-a', chargeId: charge });
    expect(await paymentOfCharge(sql, 'sandbox-a', charged, charge)).toEqual({ id: charged });
    expect(await paymentOfCharge(sql, 'sandbox-a', charged, unique('ch'))).toBeNull();
  });

  it('is the payment one of whose attempts made the charge, without a reference (a charge the payment moved on from)', async () => {
    const id = await payment({ provider: 'sandbox-b', chargeId: null });
    const charge = unique('ch');
    await sql`
      INSERT INTO payment_attempts (payment_id, attempt, provider, provider_charge_id, outcome, started_at, finished_at)
      VALUES (${id}, 1, 'sandbox-a', ${charge}, 'declined', now(), now())`;
    expect(await paymentOfCharge(sql, 'sandbox-a', null, charge)).toEqual({ id });
    expect(await paymentOfCharge(sql, 'sandbox-b', null, charge)).toBeNull();
  });

  it('is the payment that recorded the charge as its own when the reference is missing or another’s, and no attempt names it', async () => {
    const charge = unique('ch');
    const id = await payment({ provider: 'sandbox-a', chargeId: charge });
    const other = await payment({ provider: 'sandbox-a', chargeId: unique('ch') });
    expect(await paymentOfCharge(sql, 'sandbox-a', null, charge)).toEqual({ id });
    expect(await paymentOfCharge(sql, 'sandbox-a', other, charge)).toEqual({ id });
    // A payment with no recorded provider is at the default one, whichever that is.
    const unrouted = unique('ch');
    const legacy = await payment({ provider: null, chargeId: unrouted });
    expect(await paymentOfCharge(sql, 'sandbox-b', null, unrouted)).toEqual({ id: legacy });
  });

  it('is never a payment at another PSP, by reference or by its recorded charge', async () => {
    const charge = unique('ch');
    const id = await payment({ provider: 'sandbox-a', chargeId: charge });
    expect(await paymentOfCharge(sql, 'sandbox-b', id, charge)).toBeNull();
    expect(await paymentOfCharge(sql, 'sandbox-b', null, charge)).toBeNull();
    expect(await paymentOfCharge(sql, 'sandbox-a', null, unique('ch'))).toBeNull();
  });
});
