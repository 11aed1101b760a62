import { describe, expect, it } from 'vitest';
import { paymentSegment } from '../../domain/routing-segment';

/** A payment's segment for success-rate routing (domain/routing-segment.ts), and the coarser ones it falls back to. */

describe('a payment\'s segment', () => {
  it('a test card: its network, the currency, card', () => {
    expect(paymentSegment({ paymentMethod: 'pm_card_visa', currency: 'EUR' }).segment).toEqual({ network: 'visa', currency: 'EUR', methodType: 'card' });
    expect(paymentSegment({ paymentMethod: 'pm_card_mastercard', currency: 'usd' }).segment).toEqual({ network: 'mastercard', currency: 'USD', methodType: 'card' });
    expect(paymentSegment({ paymentMethod: 'pm_card_mastercard_adviceRetryLater__r1', currency: 'GBP' }).segment).toEqual({ network: 'mastercard', currency: 'GBP', methodType: 'card' });
  });

  it('a saved card: the network of its brand, however the PSP wrote it', () => {
    expect(paymentSegment({ paymentMethod: 'pm_01jd0000000000000000000000', savedCard: { brand: 'mc' }, currency: 'EUR' }).segment).toEqual({ network: 'mastercard', currency: 'EUR', methodType: 'card' });
  });

  it('a bank debit has no network; a PSP\'s token says neither network nor type', () => {
    expect(paymentSegment({ paymentMethod: 'pm_sepa_debit', currency: 'EUR' }).segment).toEqual({ network: 'unknown', currency: 'EUR', methodType: 'sepa_debit' });
    expect(paymentSegment({ paymentMethod: 'pm_1QmerchantsOwnToken', currency: 'EUR' }).segment).toEqual({ network: 'unknown', currency: 'EUR', methodType: 'unknown' });
  });

  it('falls back from network + currency + type to network + type, to type, to everything', () => {
    expect(paymentSegment({ paymentMethod: 'pm_card_visa', currency: 'EUR' }).levels).toEqual(['visa:EUR:card', 'visa:*:card', '*:*:card', '*:*:*']);
    expect(paymentSegment({ paymentMethod: 'pm_sepa_debit', currency: 'EUR' }).levels).toEqual(['unknown:EUR:sepa_debit', 'unknown:*:sepa_debit', '*:*:sepa_debit', '*:*:*']);
  });

  it('two payments of one card and currency share every level; another network shares only the coarse ones', () => {
    const a = paymentSegment({ paymentMethod: 'pm_card_visa', currency: 'EUR' }).levels;
    const b = paymentSegment({ paymentMethod: 'pm_01jd0000000000000000000000', savedCard: { brand: 'Visa' }, currency: 'EUR' }).levels;
    const c = paymentSegment({ paymentMethod: 'pm_card_mastercard', currency: 'EUR' }).levels;
    expect(b).toEqual(a);
    expect(c.filter((level) => a.includes(level))).toEqual(['*:*:card', '*:*:*']);
  });
});
