import { randomBytes } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createSql, type Sql } from '../../db/connect';
import { transitionPayment } from '../../db/payments';
import { captureMethods, mayMove, orderHoldingStatuses, paymentStatuses, refundStatuses, waitingStatuses, type PaymentStatus } from '../../domain/payments';
import { fileDatabaseUrl, insertTenant } from '../helpers/database';
import { attemptOutcomes } from '../../domain/payments-attempts';
import { beginAttempt, beginFirstAttempt, finishAttempt } from '../../db/payments-attempts';

/**
 * docs/CONTRACT.md (payment lifecycle): PostgreSQL's own guards say what the lifecycle table
 * (domain/payments.ts) says. Read back from the catalog, so a migration that forgets a
 * status, or a table row added without its migration, fails here instead of in production.
 */

let sql: Sql;
let tenantId: string;
beforeAll(async () => {
  sql = createSql(await fileDatabaseUrl(), { max: 2 });
  tenantId = await insertTenant(sql, 'lifecycle');
});
afterAll(async () => {
  await sql?.end();
});

/** The quoted literals of a constraint's or index's definition, e.g. ('a'::text, 'b'::text) → [a, b]. */
const literals = (definition: string) => [...definition.matchAll(/'([a-z_]+)'/g)].map((m) => m[1]).sort();

describe('the SQL guards match the lifecycle table', () => {
  it('payment_attempts_outcome_check admits exactly domain/payments-attempts.ts attemptOutcomes', async () => {
    const [row] = await sql<{ def: string }[]>`
      SELECT pg_get_constraintdef(oid) AS def FROM pg_constraint
      WHERE conrelid = 'payment_attempts'::regclass AND conname = 'payment_attempts_outcome_check'`;
    expect(row, 'payment_attempts_outcome_check exists').toBeDefined();
    expect(literals(row!.def)).toEqual([...attemptOutcomes].sort());
  });


  it('payments_status_check admits exactly the table’s statuses (rules out a status the database refuses, or one it admits that no code knows)', async () => {
    const [row] = await sql<{ def: string }[]>`
      SELECT pg_get_constraintdef(oid) AS def FROM pg_constraint
      WHERE conrelid = 'payments'::regclass AND conname = 'payments_status_check'`;
    expect(row, 'payments_status_check exists').toBeDefined();
    expect(literals(row!.def)).toEqual([...paymentStatuses].sort());
  });

  it('payments_capture_method_check and refunds_status_check admit exactly the table file’s capture methods and refund statuses', async () => {
    for (const [table, constraint, values] of [
      ['payments', 'payments_capture_method_check', captureMethods],
      ['refunds', 'refunds_status_check', refundStatuses],
    ] as const) {
      const [row] = await sql<{ def: string }[]>`
        SELECT pg_get_constraintdef(oid) AS def FROM pg_constraint WHERE conrelid = ${table}::regclass AND conname = ${constraint}`;
      expect(row, `${constraint} exists`).toBeDefined();
      expect(literals(row!.def), constraint).toEqual([...values].sort());
    }
  });

  it('payments_one_live_per_order covers exactly the statuses that hold an order (rules out a second charge for an order whose payment waits for its customer)', async () => {
    const [row] = await sql<{ def: string }[]>`SELECT indexdef AS def FROM pg_indexes WHERE tablename = 'payments' AND indexname = 'payments_one_live_per_order'`;
    expect(row, 'payments_one_live_per_order exists').toBeDefined();
    expect(row!.def).toMatch(/UNIQUE INDEX/);
    expect(literals(row!.def.slice(row!.def.indexOf('WHERE')))).toEqual([...orderHoldingStatuses].sort());
  });

  it('payments_waiting_by_updated_at holds exactly the waiting statuses (the closed-wait sweep reads through it)', async () => {
    const [row] = await sql<{ def: string }[]>`SELECT indexdef AS def FROM pg_indexes WHERE tablename = 'payments' AND indexname = 'payments_waiting_by_updated_at'`;
    expect(row, 'payments_waiting_by_updated_at exists').toBeDefined();
    expect(literals(row!.def.slice(row!.def.indexOf('WHERE')))).toEqual([...waitingStatuses].sort());
  });

  it('transitionPayment moves a payment exactly along the table’s edges, and never out of a final status', async () => {
    const moves: string[] = [];
    const expected: string[] = [];
    for (const from of paymentStatuses) {
      for (const to of paymentStatuses) {
        const id = `pay_lc_${randomBytes(6).toString('hex')}`;
        await sql`
          INSERT INTO payments (id, tenant_id, order_id, amount_minor, currency, status, capture_method, payment_method, workflow_id)
          VALUES (${id}, ${tenantId}, ${`ord_${id}`}, 1000, 'EUR', ${from}, 'manual', 'pm_card_visa', ${`wf-${id}`})`;
        const moved = await transitionPayment(sql, id, { status: to as PaymentStatus });
        if (moved) moves.push(`${from}->${to}`);
        if (mayMove(from, to)) expected.push(`${from}->${to}`);
      }
    }
    expect(moves).toEqual(expected);
  });
});

describe('attempt 1 decided in the charge step (db/payments-attempts.ts beginFirstAttempt)', () => {
  it('keeps the PSP its first call recorded, points payments.provider there, says whether an earlier try recorded it, and answers null without a payment row (rules out a retried attempt charging at another PSP)', async () => {
    const id = `pay_fa_${randomBytes(6).toString('hex')}`;
    await sql`
      INSERT INTO payments (id, tenant_id, order_id, amount_minor, currency, status, capture_method, payment_method, workflow_id)
      VALUES (${id}, ${tenantId}, ${`ord_${id}`}, 1000, 'EUR', 'processing', 'automatic', 'pm_card_visa', ${`wf-${id}`})`;
    expect(await beginFirstAttempt(sql, id, 'sandbox-b')).toEqual({ provider: 'sandbox-b', earlier: false });
    // A retry whose breaker now prefers another PSP still charges where the first try may have,
    // and is told that a try came before it (so it asks the PSP before it charges).
    expect(await beginFirstAttempt(sql, id, 'sandbox-a')).toEqual({ provider: 'sandbox-b', earlier: true });
    const [payment] = await sql<{ provider: string }[]>`SELECT provider FROM payments WHERE id = ${id}`;
    expect(payment!.provider).toBe('sandbox-b');
    const attempts = await sql<{ attempt: number; provider: string; outcome: string }[]>`SELECT attempt, provider, outcome FROM payment_attempts WHERE payment_id = ${id}`;
    expect(attempts).toEqual([{ attempt: 1, provider: 'sandbox-b', outcome: 'pending' }]);
    expect(await beginFirstAttempt(sql, `pay_fa_missing_${randomBytes(4).toString('hex')}`, 'sandbox-a')).toBeNull();
  });

  it('never points payments.provider back: a late try of attempt 1 or of attempt 2 leaves it at the PSP of the latest attempt begun (else reconciliation gives back the charge the payment holds)', async () => {
    const id = `pay_fa_${randomBytes(6).toString('hex')}`;
    await sql`
      INSERT INTO payments (id, tenant_id, order_id, amount_minor, currency, status, capture_method, payment_method, workflow_id)
      VALUES (${id}, ${tenantId}, ${`ord_${id}`}, 1000, 'EUR', 'processing', 'automatic', 'pm_card_visa', ${`wf-${id}`})`;
    const pointer = async () => (await sql<{ provider: string }[]>`SELECT provider FROM payments WHERE id = ${id}`)[0]!.provider;
    expect(await beginFirstAttempt(sql, id, 'sandbox-b')).toEqual({ provider: 'sandbox-b', earlier: false });
    await finishAttempt(sql, id, 1, 'sandbox-b', { outcome: 'not_charged', providerChargeId: null, errorCode: 'outcome_unknown_none_found' });
    await beginAttempt(sql, id, 2, 'sandbox-a');
    expect(await pointer()).toBe('sandbox-a');
    // A try of attempt 1 that was still running (its worker stalled) records nothing new and
    // does not move the pointer back to sandbox-b.
    expect(await beginFirstAttempt(sql, id, 'sandbox-b')).toEqual({ provider: 'sandbox-b', earlier: true });
    expect(await pointer()).toBe('sandbox-a');
    // The same for a begun attempt: attempt 3 began at sandbox-c, then a late try of attempt 2's begin.
    await beginAttempt(sql, id, 3, 'sandbox-c');
    await beginAttempt(sql, id, 2, 'sandbox-a');
    expect(await pointer()).toBe('sandbox-c');
  });

  it("keeps the payment's routing segment with attempt 1, and every later attempt copies it (the console's PSPs page per segment)", async () => {
    const id = `pay_fa_${randomBytes(6).toString('hex')}`;
    await sql`
      INSERT INTO payments (id, tenant_id, order_id, amount_minor, currency, status, capture_method, payment_method, workflow_id)
      VALUES (${id}, ${tenantId}, ${`ord_${id}`}, 1000, 'EUR', 'processing', 'automatic', 'pm_card_mastercard', ${`wf-${id}`})`;
    expect(await beginFirstAttempt(sql, id, 'sandbox-b', 'mastercard:EUR:card')).toEqual({ provider: 'sandbox-b', earlier: false });
    await finishAttempt(sql, id, 1, 'sandbox-b', { outcome: 'not_sent', providerChargeId: null, errorCode: 'connection_refused' });
    await beginAttempt(sql, id, 2, 'sandbox-a');
    const rows = await sql<{ attempt: number; segment: string | null }[]>`SELECT attempt, segment FROM payment_attempts WHERE payment_id = ${id} ORDER BY attempt`;
    expect(rows).toEqual([
      { attempt: 1, segment: 'mastercard:EUR:card' },
      { attempt: 2, segment: 'mastercard:EUR:card' },
    ]);
  });
});
