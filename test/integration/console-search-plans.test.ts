import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createSql, type Sql } from '../../db/connect';
import { paymentIdFloor, searchPayments, searchPaymentsPlan, type PaymentSearch } from '../../db/console';
import { newId } from '../../domain/ids';
import { fileDatabaseUrl, insertTenant } from '../helpers/database';

/**
 * The console's payment search (db/console.ts searchPayments) is served by an index for every
 * filter (migration 027): each query's plan, as PostgreSQL chooses it over 40,000 payments of
 * several tenants, PSPs and statuses, reads payments through an index and never scans the table.
 */

let sql: Sql;
let tenants: string[];
const ROWS = 40_000;

beforeAll(async () => {
  sql = createSql(await fileDatabaseUrl(), { max: 2 });
  tenants = await Promise.all([0, 1, 2, 3, 4].map((i) => insertTenant(sql, `plans-${i}`)));
  // Ids made over the last 100 days (their time first, as domain/ids.ts makes them), spread over
  // tenants, PSPs, statuses and customers, each with one rare value (a small tenant, a new PSP, a
  // status few payments wait in): for a common value PostgreSQL rightly walks the primary key
  // newest first until it has a page; for a rare one it must take the filter's own index.
  const now = Date.now();
  const ids = Array.from({ length: ROWS }, (_, i) => newId('pay', now - Math.floor((i / ROWS) * 100 * 86_400_000)));
  await sql`INSERT INTO customers (id, tenant_id, email) SELECT 'cus_' || lpad(g::text, 26, '0'), ${tenants[0]!}, 'buyer' || g || '@example.com' FROM generate_series(1, 2000) g`;
  await sql`
    INSERT INTO payments (id, tenant_id, order_id, amount_minor, currency, status, capture_method, payment_method, workflow_id, provider, customer_id, amount_captured_minor, amount_refunded_minor)
    SELECT id, CASE WHEN n % 1000 = 3 THEN ${tenants[4]!} ELSE (${tenants.slice(0, 4)}::text[])[1 + n % 4] END,
           'order-' || n, 1000, 'EUR', status, 'automatic', 'pm_card_visa', 'wf-' || n,
           CASE WHEN n % 1000 = 5 THEN 'psp-rare' ELSE 'psp-' || (n % 5) END,
           CASE WHEN n % 4 = 0 THEN 'cus_' || lpad((1 + n % 2000)::text, 26, '0') END,
           CASE WHEN status IN ('succeeded', 'refunded') THEN 1000 ELSE 0 END, CASE WHEN status = 'refunded' THEN 1000 ELSE 0 END
    FROM unnest(${ids}::text[]) WITH ORDINALITY AS t(id, n),
         LATERAL (SELECT CASE WHEN n % 1000 = 7 THEN 'refunded' ELSE (ARRAY['succeeded', 'succeeded', 'declined', 'failed', 'canceled'])[1 + n % 5] END AS status) s`;
  // One attempt per payment of this file's tenants (the database may hold other files' payments), at the PSP it records.
  await sql`
    INSERT INTO payment_attempts (payment_id, attempt, provider, outcome, started_at, finished_at)
    SELECT id, 1, provider, 'succeeded', now(), now() FROM payments WHERE tenant_id = ANY(${tenants}::text[])`;
  await sql`ANALYZE payments`;
  await sql`ANALYZE payment_attempts`;
  await sql`ANALYZE customers`;
});
afterAll(async () => {
  await sql?.end();
});

/** Every node of the plan that reads payments, and whether any reads it whole. */
async function planOf(search: PaymentSearch): Promise<string> {
  // The search answers, and the statement it runs is the one explained.
  await searchPayments(sql, search);
  return searchPaymentsPlan(sql, search);
}

const day = (daysAgo: number) => new Date(Date.now() - daysAgo * 86_400_000);
const page = { limit: 50 };

describe('every filter of the console payment search is served by an index', () => {
  /** Each search, and the index it must be served by. */
  const cases: [string, () => PaymentSearch, RegExp][] = [
    ['no filter', () => ({ ...page }), /payments_pkey/],
    ['payment id', () => ({ ...page, paymentId: newId('pay') }), /payments_pkey/],
    ['order id', () => ({ ...page, orderId: 'order-1234' }), /payments_console_by_order/],
    ['customer id', () => ({ ...page, customerId: `cus_${'7'.padStart(26, '0')}` }), /payments_console_by_customer/],
    ['customer email', () => ({ ...page, customerEmail: 'Buyer7@example.com' }), /customers_by_email[\s\S]*payments_console_by_customer|payments_console_by_customer[\s\S]*customers_by_email/],
    ['PSP', () => ({ ...page, provider: 'psp-rare' }), /payment_attempts_by_provider/],
    ['a common PSP', () => ({ ...page, provider: 'psp-1' }), /payment_attempts_by_provider/],
    ['status', () => ({ ...page, status: 'refunded' }), /payments_console_by_status/],
    // Both indexes begin with the tenant.
    ['tenant', () => ({ ...page, tenantId: tenants[4]! }), /payments_by_tenant|payments_by_order/],
    ['date range', () => ({ ...page, from: day(30), to: day(29) }), /payments_pkey/],
    ['tenant and order id (a tenant operator)', () => ({ ...page, tenantId: tenants[1]!, orderId: 'order-1' }), /payments_by_order|payments_console_by_order/],
    ['a common status, date range, next page', () => ({ ...page, status: 'declined', from: day(60), to: day(10), startingAfter: paymentIdFloor(day(20)) }), /payments_pkey|payments_console_by_status/],
  ];
  for (const [name, search, index] of cases) {
    it(`${name}: read through its index, never a sequential scan`, async () => {
      const plan = await planOf(search());
      expect(plan, plan).not.toMatch(/Seq Scan/);
      expect(plan, plan).toMatch(index);
    });
  }

  it('the PSP filter finds the payments attempted at that PSP, and only those', async () => {
    const found = await searchPayments(sql, { limit: 100, provider: 'psp-rare' });
    expect(found.rows).toHaveLength(ROWS / 1000);
    expect(new Set(found.rows.map((row) => row.provider))).toEqual(new Set(['psp-rare']));
  });

  it('the date range is a range of ids: a payment made in the range is found, one made before it is not', async () => {
    const inRange = await searchPayments(sql, { ...page, from: day(30), to: day(29) });
    expect(inRange.rows.length).toBeGreaterThan(0);
    for (const row of inRange.rows) expect(row.id >= paymentIdFloor(day(30)) && row.id < paymentIdFloor(day(29))).toBe(true);
  });
});
