import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { CompletionWaiter, parseCompletion } from '../../api/completions';
import { claimRecord, completeRecord } from '../../db/idempotency-records';
import { captureLines, LedgerAccounts, postTransaction } from '../../db/ledger';
import { startStack, uniqueKey, type TestStack, type Tenant } from '../helpers/stack';

/** What the hot path saves (bench/NOTES.md) must not change what is answered or booked. */

let stack: TestStack;
let tenant: Tenant;

beforeAll(async () => {
  stack = await startStack();
  tenant = await stack.createTenant();
});
afterAll(async () => {
  await stack?.stop();
});

describe('the completion NOTIFY carries the stored answer', () => {
  it('parses the topic alone, and the topic with status, location and a body holding newlines', () => {
    expect(parseCompletion('t|POST /v1/payments|k')).toEqual({ topic: 't|POST /v1/payments|k', response: null });
    expect(parseCompletion('t|op|k\n201\n/v1/payments/p\n{"a":"x\ny"}')).toEqual({
      topic: 't|op|k',
      response: { status: 201, location: '/v1/payments/p', body: '{"a":"x\ny"}' },
    });
    expect(parseCompletion('t|op|k\n409\n\n{}')).toEqual({ topic: 't|op|k', response: { status: 409, location: null, body: '{}' } });
    expect(parseCompletion('t|op|k\nnot-a-status\n\n{}').response).toBeNull();
  });

  it('wakes a waiting request with exactly the stored response; one too large for a NOTIFY wakes it without', async () => {
    const waiter = new CompletionWaiter(stack.sql, stack.logger);
    await waiter.start();
    try {
      const small = JSON.stringify({ id: 'pay_x', note: 'ünïcødé ✓\nsecond line' });
      const large = JSON.stringify({ id: 'pay_y', padding: 'x'.repeat(9000) });
      for (const [body, carried] of [[small, true], [large, false]] as const) {
        const scope = { tenantId: tenant.id, operation: 'POST /v1/payments', key: uniqueKey(), fingerprint: 'f'.repeat(64), retentionSeconds: 3600 };
        const owner = { workflowId: `hot-path-${scope.key}`, resourceId: `pay_${scope.key}` };
        expect(await claimRecord(stack.sql, scope, owner)).not.toBeNull();
        const expectation = waiter.expect(scope.tenantId, scope.operation, scope.key);
        try {
          const woken = expectation.wait(20_000);
          const stored = await completeRecord(stack.sql, scope, owner, { status: 201, body, location: `/v1/payments/${owner.resourceId}` });
          const completion = await woken;
          if (carried) expect(completion).toEqual(stored);
          else expect(completion).toBe(true);
        } finally {
          expectation.dispose();
        }
      }
    } finally {
      await waiter.stop();
    }
  });
});

describe('ledger account ids are remembered', () => {
  const balances = async (tenantId: string) =>
    stack.sql<{ code: string; net: string }[]>`
      SELECT a.code, coalesce(sum(e.amount_minor), 0)::text AS net
      FROM ledger_accounts a LEFT JOIN ledger_entries e ON e.account_id = a.id
      WHERE a.tenant_id = ${tenantId} GROUP BY a.code ORDER BY a.code`;

  it('posts to the same accounts with and without the cache, and a wrong remembered id costs one refused posting, not every later one', async () => {
    const owner = await stack.createTenant();
    const accounts = new LedgerAccounts();
    const post = (n: number) =>
      stack.sql.begin((tx) => postTransaction(tx, { tenantId: owner.id, eventKey: `hot-path:${uniqueKey()}`, description: `posting ${n}`, lines: captureLines('EUR', 100) }, accounts));
    expect(await post(1)).toBe(true); // creates the accounts (not remembered: not read back)
    expect(await post(2)).toBe(true); // reads them back: remembered
    const receivable = accounts.get(owner.id, 'provider_receivable', 'EUR');
    const [row] = await stack.sql<{ id: number }[]>`SELECT id FROM ledger_accounts WHERE tenant_id = ${owner.id} AND code = 'provider_receivable' AND currency = 'EUR'`;
    expect(receivable).toBe(row!.id);
    expect(await post(3)).toBe(true); // from the cache
    expect(await balances(owner.id)).toEqual([
      { code: 'merchant_balance', net: '-300' },
      { code: 'provider_receivable', net: '300' },
    ]);

    // An id that does not exist (as one read inside a transaction that then rolled back would be).
    accounts.remember(owner.id, 'provider_receivable', 'EUR', 2_000_000_000);
    await expect(post(4)).rejects.toThrow();
    expect(accounts.get(owner.id, 'provider_receivable', 'EUR')).toBeUndefined();
    expect(await post(5)).toBe(true);
    expect(await balances(owner.id)).toEqual([
      { code: 'merchant_balance', net: '-400' },
      { code: 'provider_receivable', net: '400' },
    ]);
  });
});
