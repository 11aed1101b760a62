import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createSql } from '../../db/connect';
import { siblingDatabaseUrl } from '../../db/migrate';
import { startStack, type TestStack } from '../helpers/stack';

/** The test stack's second sandbox PSP: its own process state and its own database. */
describe('a stack with two sandbox PSPs', () => {
  let stack: TestStack;
  beforeAll(async () => {
    stack = await startStack({ worker: false, secondSandbox: {} });
  }, 60_000);
  afterAll(async () => {
    await stack?.stop();
  });

  it('runs sandbox-b apart from the first sandbox: a charge at one is unknown to the other', async () => {
    const second = stack.secondSandbox!;
    expect(second.name).toBe('sandbox-b');
    expect(second.url).not.toBe(stack.sandboxUrl);
    expect(second.databaseUrl).toBe(siblingDatabaseUrl(stack.databaseUrl, 'sandbox_b'));
    const charge = await second.provider.createCharge({ idempotencyKey: 'two-sandboxes:charge:1', amountMinor: 1234, currency: 'EUR', paymentMethod: 'pm_card_visa', capture: true, reference: 'pay_two_sandboxes' });
    expect(charge.status).toBe('succeeded');
    expect((await second.provider.findChargeByIdempotencyKey('two-sandboxes:charge:1'))?.id).toBe(charge.id);
    expect(await stack.provider.findChargeByIdempotencyKey('two-sandboxes:charge:1')).toBeNull();
    const sql = createSql(second.databaseUrl, { max: 1 });
    try {
      const [row] = await sql<{ count: string }[]>`SELECT count(*) FROM sandbox.charges WHERE reference = 'pay_two_sandboxes'`;
      expect(Number(row!.count)).toBe(1);
    } finally {
      await sql.end();
    }
    const [row] = await stack.sql<{ count: string }[]>`SELECT count(*) FROM sandbox.charges WHERE reference = 'pay_two_sandboxes'`;
    expect(Number(row!.count)).toBe(0);
  });
});
