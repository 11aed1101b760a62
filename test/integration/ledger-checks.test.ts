import { randomBytes } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createSql, type Sql } from '../../db/connect';
import { captureLines, isLedgerRefusal, postTransaction } from '../../db/ledger';
import { fileDatabaseUrl, insertTenant } from '../helpers/database';

/**
 * The ledger's guards live in PostgreSQL (db/migrations/016, ledger_check_lines): a statement
 * that adds lines is refused whole unless its lines balance per transaction and currency, each
 * line's transaction exists, and each account is the transaction's tenant's, in the line's
 * currency, and not frozen. Tenants and accounts are never deleted.
 */

let sql: Sql;
const tenants: string[] = [];
beforeAll(async () => {
  sql = createSql(await fileDatabaseUrl(), { max: 2 });
  for (const label of ['ledger_a', 'ledger_b']) tenants.push(await insertTenant(sql, label));
});
afterAll(async () => {
  await sql?.end();
});

async function account(tenantId: string, code: 'provider_receivable' | 'merchant_balance', currency = 'EUR'): Promise<number> {
  const [row] = await sql<{ id: number }[]>`
    INSERT INTO ledger_accounts (tenant_id, code, currency) VALUES (${tenantId}, ${code}, ${currency})
    ON CONFLICT (tenant_id, code, currency) DO UPDATE SET code = EXCLUDED.code RETURNING id`;
  return Number(row!.id);
}

async function transaction(tenantId: string): Promise<string> {
  const id = `ltx_test_${randomBytes(6).toString('hex')}`;
  await sql`INSERT INTO ledger_transactions (id, tenant_id, event_key, description) VALUES (${id}, ${tenantId}, ${id}, 'test')`;
  return id;
}

type Line = [account: number, currency: string, amount: number];
const insertLines = (transactionId: string, lines: Line[]) =>
  sql`INSERT INTO ledger_entries ${sql(
    lines.map(([accountId, currency, amount], index) => ({ transaction_id: transactionId, line: index + 1, account_id: accountId, currency, amount_minor: amount })),
    'transaction_id', 'line', 'account_id', 'currency', 'amount_minor',
  )}`;
const linesOf = async (transactionId: string) =>
  Number((await sql<{ n: number }[]>`SELECT count(*)::int AS n FROM ledger_entries WHERE transaction_id = ${transactionId}`)[0]!.n);

describe('a statement that adds ledger lines', () => {
  it('is kept when its lines balance, on accounts of the transaction’s tenant', async () => {
    const [tenant] = tenants;
    const tx = await transaction(tenant!);
    await insertLines(tx, [[await account(tenant!, 'provider_receivable'), 'EUR', 500], [await account(tenant!, 'merchant_balance'), 'EUR', -500]]);
    expect(await linesOf(tx)).toBe(2);
  });

  it('is refused whole when it does not balance in a currency, even if a later statement would', async () => {
    const [tenant] = tenants;
    const tx = await transaction(tenant!);
    const receivable = await account(tenant!, 'provider_receivable');
    await expect(insertLines(tx, [[receivable, 'EUR', 500], [await account(tenant!, 'merchant_balance'), 'EUR', -499]])).rejects.toMatchObject({ code: '23514' });
    await expect(insertLines(tx, [[receivable, 'EUR', 500]])).rejects.toMatchObject({ code: '23514' });
    expect(await linesOf(tx)).toBe(0);
  });

  it('is refused when a line’s transaction does not exist', async () => {
    const [tenant] = tenants;
    await expect(insertLines('ltx_missing', [[await account(tenant!, 'provider_receivable'), 'EUR', 1], [await account(tenant!, 'merchant_balance'), 'EUR', -1]])).rejects.toMatchObject({ code: '23503' });
    expect(await linesOf('ltx_missing')).toBe(0);
  });

  it('is refused when an account is another tenant’s, of another currency, or does not exist', async () => {
    const [tenant, other] = tenants;
    const tx = await transaction(tenant!);
    const merchant = await account(tenant!, 'merchant_balance');
    for (const foreign of [await account(other!, 'provider_receivable'), await account(tenant!, 'provider_receivable', 'USD'), 2_000_000_000]) {
      await expect(insertLines(tx, [[foreign, 'EUR', 700], [merchant, 'EUR', -700]])).rejects.toMatchObject({ code: '23503' });
    }
    expect(await linesOf(tx)).toBe(0);
  });

  it('is refused for good on a frozen account, which postTransaction reports as a ledger refusal', async () => {
    const tenant = await insertTenant(sql, 'ledger_frozen');
    await account(tenant, 'provider_receivable');
    await sql`UPDATE ledger_accounts SET frozen = true WHERE id = ${await account(tenant, 'merchant_balance')}`;
    const posting = sql.begin((tx) => postTransaction(tx, { tenantId: tenant, eventKey: `frozen:${randomBytes(4).toString('hex')}`, description: 'frozen', lines: captureLines('EUR', 100) }));
    const error = await posting.then(() => null, (e: unknown) => e);
    expect(isLedgerRefusal(error)).toBe(true);
  });
});

describe('rows the ledger points at', () => {
  it('tenants and ledger accounts are never deleted', async () => {
    const [tenant] = tenants;
    const receivable = await account(tenant!, 'provider_receivable');
    await expect(sql`DELETE FROM ledger_accounts WHERE id = ${receivable}`).rejects.toThrow(/never deleted/);
    await expect(sql`DELETE FROM tenants WHERE id = ${tenant!}`).rejects.toThrow(/never deleted/);
    expect(await sql`SELECT 1 FROM tenants WHERE id = ${tenant!}`).toHaveLength(1);
  });
});
