import { describe, expect, it } from 'vitest';
import { hasTestPaymentMethodShape, TEST_PAYMENT_METHODS } from '../../domain/payment-methods';
import { adyenTestCards } from '../../provider/adyen/test-cards';
import { knownProviderKinds, providerKind, supportsMethod } from '../../provider/registry';
import { stripeTestPaymentMethods } from '../../provider/stripe/test-payment-methods';

/**
 * The payment methods each kind declares (ProviderKind.paymentMethods) and supportsMethod, which
 * routing asks whether a PSP is a candidate for a payment's method (issue 58 item 6: a PSP whose
 * kind does not support the payment method is no candidate; an unknown test method counts as
 * unsupported).
 */

const ours = Object.keys(TEST_PAYMENT_METHODS);
const savedVisa = { paymentMethod: 'pm_01jd0000000000000000000000', savedCard: { brand: 'visa' } };

describe('every kind declares its payment methods', () => {
  it('each named test method is ours or has a test method\'s shape (never read as a PSP\'s token)', () => {
    for (const kind of knownProviderKinds) {
      const { testMethods, types } = providerKind(kind).paymentMethods;
      expect(types.length, kind).toBeGreaterThan(0);
      if (testMethods === 'all') continue;
      for (const name of testMethods) expect(ours.includes(name) || hasTestPaymentMethodShape(name), `${kind}: ${name}`).toBe(true);
    }
  });

  it('a kind with a table of our names has the methods of its table (stripe), the Adyen kind its test cards', () => {
    expect(providerKind('stripe').paymentMethods.testMethods).toEqual(Object.keys(stripeTestPaymentMethods));
    expect(providerKind('adyen').paymentMethods.testMethods).toEqual(Object.keys(adyenTestCards));
  });
});

describe('supportsMethod', () => {
  it('the sandbox has every test method of ours, variants included', () => {
    for (const name of ours) expect(supportsMethod('sandbox', name), name).toBe(true);
    expect(supportsMethod('sandbox', 'pm_card_stolen__ab12')).toBe(true);
  });

  it('a kind with a list has exactly its names: pm_card_mastercard at stripe and adyen; a bank debit, a variant and the sandbox\'s faults nowhere else', () => {
    for (const kind of ['stripe', 'adyen']) {
      expect(supportsMethod(kind, 'pm_card_visa'), kind).toBe(true);
      expect(supportsMethod(kind, 'pm_card_mastercard'), kind).toBe(true);
      for (const name of ['pm_sepa_debit', 'pm_card_flaky', 'pm_card_timeout_after_charge', 'pm_card_visa__ab12']) expect(supportsMethod(kind, name), `${kind}: ${name}`).toBe(false);
    }
    expect(supportsMethod('stripe', 'pm_card_createDisputeInquiry')).toBe(true);
    expect(supportsMethod('adyen', 'pm_card_createDisputeInquiry')).toBe(false);
  });

  it('a kind\'s own test names are its alone', () => {
    expect(supportsMethod('adyen', 'pm_card_captureFailed')).toBe(true);
    expect(supportsMethod('sandbox', 'pm_card_captureFailed')).toBe(false);
    expect(supportsMethod('stripe', 'pm_card_captureFailed')).toBe(false);
  });

  it('an unknown test method is supported by no kind', () => {
    for (const kind of knownProviderKinds) {
      for (const name of ['pm_card_amex', 'pm_sepa_debit_later', 'pm_card_nothing__ab12']) expect(supportsMethod(kind, name), `${kind}: ${name}`).toBe(false);
    }
  });

  it('a saved method is a card: every kind that charges cards', () => {
    for (const kind of knownProviderKinds) expect(supportsMethod(kind, savedVisa), kind).toBe(true);
    expect(supportsMethod({ paymentMethods: { types: ['sepa_debit'], testMethods: 'all', pspTokens: false } }, savedVisa)).toBe(false);
  });

  it('a PSP\'s own token goes only to a kind that takes tokens as given (stripe)', () => {
    expect(supportsMethod('stripe', 'pm_1QmerchantsOwnToken')).toBe(true);
    expect(supportsMethod('sandbox', 'pm_1QmerchantsOwnToken')).toBe(false);
    expect(supportsMethod('adyen', 'pm_1QmerchantsOwnToken')).toBe(false);
  });

  it('a test method of a type the kind does not charge is unsupported even where it is named', () => {
    const cardsOnly = { paymentMethods: { types: ['card'] as const, testMethods: 'all' as const, pspTokens: false } };
    expect(supportsMethod(cardsOnly, 'pm_sepa_debit')).toBe(false);
    expect(supportsMethod(cardsOnly, 'pm_card_visa')).toBe(true);
  });

  it('takes the method as a string or as the payment gives it', () => {
    expect(supportsMethod('adyen', { paymentMethod: 'pm_card_visa' })).toBe(supportsMethod('adyen', 'pm_card_visa'));
  });

  it('throws for a kind this build does not know', () => {
    expect(() => supportsMethod('nope', 'pm_card_visa')).toThrow(/unknown kind/);
  });
});
