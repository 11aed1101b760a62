import { describe, expect, it } from 'vitest';
import { approvalDraw, approvalRateFor, issuerApproves, type ApprovalRate } from '../../sandbox/approval-rates';

/** The sandbox's approval rates as pure functions (sandbox/approval-rates.ts); the HTTP side is test/integration/sandbox-approval-rates.test.ts. */

describe('the draw of a key', () => {
  const keys = Array.from({ length: 10_000 }, (_, i) => `draw-key-${i}`);

  it('is the same number every time for one key, in [0, 1)', () => {
    for (const key of keys.slice(0, 100)) {
      const draw = approvalDraw(key);
      expect(draw).toBeGreaterThanOrEqual(0);
      expect(draw).toBeLessThan(1);
      expect(approvalDraw(key)).toBe(draw);
    }
  });

  it('is spread evenly: a rate of 0.3 approves about 30 % of 10 000 keys (within 5 standard errors)', () => {
    const approved = keys.filter((key) => approvalDraw(key) < 0.3).length / keys.length;
    expect(Math.abs(approved - 0.3)).toBeLessThan(5 * Math.sqrt((0.3 * 0.7) / keys.length));
  });
});

describe('the most specific rule decides', () => {
  const rates: ApprovalRate[] = [
    { network: '*', currency: '*', rate: 0.1 },
    { network: '*', currency: 'USD', rate: 0.2 },
    { network: 'visa', currency: '*', rate: 0.3 },
    { network: 'visa', currency: 'EUR', rate: 0.4 },
  ];

  it('network and currency, then network, then currency, then neither', () => {
    expect(approvalRateFor(rates, 'visa', 'EUR')).toBe(0.4);
    expect(approvalRateFor(rates, 'visa', 'USD')).toBe(0.3);
    expect(approvalRateFor(rates, 'mastercard', 'USD')).toBe(0.2);
    expect(approvalRateFor(rates, 'mastercard', 'GBP')).toBe(0.1);
    expect(approvalRateFor([...rates].reverse(), 'visa', 'USD')).toBe(0.3);
  });

  it('no rule matching: no rate, and the issuer approves', () => {
    expect(approvalRateFor([{ network: 'visa', currency: 'EUR', rate: 0 }], 'mastercard', 'EUR')).toBeNull();
    expect(issuerApproves([{ network: 'visa', currency: 'EUR', rate: 0 }], { network: 'mastercard', currency: 'EUR', idempotencyKey: 'k' })).toBe(true);
  });

  it('0 declines and 1 approves whatever the key', () => {
    for (let i = 0; i < 200; i++) {
      expect(issuerApproves([{ network: '*', currency: '*', rate: 0 }], { network: 'visa', currency: 'EUR', idempotencyKey: `k${i}` })).toBe(false);
      expect(issuerApproves([{ network: '*', currency: '*', rate: 1 }], { network: 'visa', currency: 'EUR', idempotencyKey: `k${i}` })).toBe(true);
    }
  });
});
