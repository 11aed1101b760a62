import { randomBytes } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createSql, type Sql } from '../../db/connect';
import { reserveCardAttempt, reserveCardAttemptIn, type CardBudgetLimits } from '../../db/recovery';
import { recoveryPolicy } from '../../domain/recovery';
import { fileDatabaseUrl, insertTenant } from '../helpers/database';

/**
 * A card's budget of attempts (db/recovery.ts) on real PostgreSQL: one place that concurrent
 * payments of one card reserve from, so they cannot overrun it together (docs/recovery.md).
 */

let sql: Sql;
let tenantId: string;

beforeAll(async () => {
  sql = createSql(await fileDatabaseUrl(), { max: 30 });
  tenantId = await insertTenant(sql, 'card-budget');
});
afterAll(async () => sql?.end());

const id = (prefix: string) => `${prefix}_${randomBytes(8).toString('hex')}`;

async function payment(tenant = tenantId): Promise<string> {
  const paymentId = id('pay');
  await sql`
    INSERT INTO payments (id, tenant_id, order_id, amount_minor, currency, status, capture_method, payment_method, workflow_id)
    VALUES (${paymentId}, ${tenant}, ${`ord_${paymentId}`}, 1000, 'EUR', 'processing', 'automatic', 'pm_card_visa', ${`wf-${paymentId}`})`;
  return paymentId;
}

/** The card as its PSP told of it: a fingerprint (a card of its own unless given), or none (brand, last4 and expiry alone). */
interface Card {
  fingerprint: string | null;
  brand: string;
  last4: string;
  expMonth: number;
  expYear: number;
}
const newCard = (): Card => ({ fingerprint: id('fp'), brand: 'visa', last4: '4242', expMonth: 12, expYear: 2034 });

/** A saved copy of the card (a new card unless given) for a new customer of the tenant (this file's unless given). */
async function savedCard(card: Card = newCard(), tenant = tenantId): Promise<string> {
  const customerId = id('cus');
  const methodId = id('pm');
  await sql`INSERT INTO customers (id, tenant_id) VALUES (${customerId}, ${tenant})`;
  await sql`
    INSERT INTO payment_methods (id, tenant_id, customer_id, card_brand, card_last4, card_exp_month, card_exp_year, card_fingerprint, network_transaction_id, provider_tokens, source_payment_id)
    VALUES (${methodId}, ${tenant}, ${customerId}, ${card.brand}, ${card.last4}, ${card.expMonth}, ${card.expYear}, ${card.fingerprint}, 'ntx_test', ${sql.json({})}, ${await payment(tenant)})`;
  return methodId;
}

/** The attempts reserved of a card (through this saved copy of it). */
async function reservedOf(card: string): Promise<number> {
  const [row] = await sql<{ count: number }[]>`SELECT count(*)::int AS count FROM card_attempts WHERE payment_method_id = ${card}`;
  return row!.count;
}

/** One first attempt of a new payment of the saved copy: whether the card's budget took it. */
async function reserveOne(method: string, perDay: number, tenant = tenantId): Promise<boolean> {
  return (await reserveCardAttempt(sql, { paymentMethodId: method, paymentId: await payment(tenant), attempt: 1, limits: limits({ perDay }) })).reserved;
}

/** The real figures: a day and thirty days long, so nothing leaves the window during the test. */
const limits = (tenant: Parameters<typeof recoveryPolicy>[1] = {}): CardBudgetLimits => recoveryPolicy(1, tenant);

describe('a card’s budget is one place concurrent payments cannot overrun', () => {
  it('30 payments of one card racing for an attempt (15 first attempts, in the transaction that persists the intent, and 15 retries): exactly 10 reserved in 24 hours, the rest told when a slot frees', async () => {
    const card = await savedCard();
    const payments = await Promise.all(Array.from({ length: 30 }, () => payment()));
    const answers = await Promise.all(
      payments.map((paymentId, i) =>
        i % 2 === 0
          ? sql.begin((tx) => reserveCardAttemptIn(tx, { paymentMethodId: card, paymentId, attempt: 1, limits: limits() }))
          : reserveCardAttempt(sql, { paymentMethodId: card, paymentId, attempt: 2, limits: limits() }),
      ),
    );
    const reserved = answers.filter((a) => a.reserved);
    expect(reserved).toHaveLength(10);
    expect(await reservedOf(card)).toBe(10);
    // Each refusal names when the oldest reservation leaves the 24-hour window.
    const oldest = Math.min(...reserved.map((a) => (a.reserved ? a.at.getTime() : Infinity)));
    for (const refused of answers.filter((a) => !a.reserved)) expect(refused.reserved ? 0 : refused.freeAt.getTime()).toBe(oldest + 24 * 3_600_000);
  });

  it('a tenant’s lower limit holds: 3 a day', async () => {
    const card = await savedCard();
    const payments = await Promise.all(Array.from({ length: 8 }, () => payment()));
    const answers = await Promise.all(payments.map((paymentId) => reserveCardAttempt(sql, { paymentMethodId: card, paymentId, attempt: 1, limits: limits({ perDay: 3 }) })));
    expect(answers.filter((a) => a.reserved)).toHaveLength(3);
  });

  it('a repeated reservation of the same attempt (a retried activity) answers the same and reserves nothing more', async () => {
    const card = await savedCard();
    const paymentId = await payment();
    const request = { paymentMethodId: card, paymentId, attempt: 3, limits: limits() };
    const first = await reserveCardAttempt(sql, request);
    const again = await Promise.all(Array.from({ length: 5 }, () => reserveCardAttempt(sql, request)));
    expect(again).toEqual(Array.from({ length: 5 }, () => first));
    expect(await reservedOf(card)).toBe(1);
  });

  it('two cards have two budgets', async () => {
    const [one, two] = [await savedCard(), await savedCard()];
    const payments = await Promise.all(Array.from({ length: 20 }, () => payment()));
    const answers = await Promise.all(payments.map((paymentId, i) => reserveCardAttempt(sql, { paymentMethodId: i % 2 ? one : two, paymentId, attempt: 1, limits: limits() })));
    expect(answers.filter((a) => a.reserved)).toHaveLength(20);
  });

  it('the same card saved twice by one tenant (the same fingerprint) has one budget: under per_day 2 the third attempt in the day is refused, whichever copy makes it', async () => {
    const card = newCard();
    const [one, two] = [await savedCard(card), await savedCard(card)];
    expect(await reserveOne(one, 2)).toBe(true);
    expect(await reserveOne(two, 2)).toBe(true);
    expect(await reserveOne(one, 2)).toBe(false);
    expect(await reserveOne(two, 2)).toBe(false);
    expect((await reservedOf(one)) + (await reservedOf(two))).toBe(2);
  });

  it('without a fingerprint, brand, last four digits and expiry together name the card: two such copies share a budget, another expiry is another card', async () => {
    const bare = { fingerprint: null, brand: 'visa', last4: '0341', expMonth: 7, expYear: 2031 };
    const [one, two] = [await savedCard(bare), await savedCard({ ...bare, brand: 'VISA' })];
    const other = await savedCard({ ...bare, expYear: 2032 });
    expect(await reserveOne(one, 1)).toBe(true);
    expect(await reserveOne(two, 1)).toBe(false);
    expect(await reserveOne(other, 1)).toBe(true);
  });

  it('the budget is the tenant’s: another tenant’s copy of the same card counts apart', async () => {
    const card = newCard();
    const other = await insertTenant(sql, 'card-budget-other');
    expect(await reserveOne(await savedCard(card), 1)).toBe(true);
    expect(await reserveOne(await savedCard(card, other), 1, other)).toBe(true);
  });
});
