import { describe, expect, it } from 'vitest';
import { cardNetworkOf, hasTestPaymentMethodShape, listedTestPaymentMethod, paymentMethodFacts, TEST_PAYMENT_METHODS } from '../../domain/payment-methods';
import { knownPaymentMethods, testCard } from '../../sandbox/payment-methods';

/** The orchestrator's view of a payment's method (domain/payment-methods.ts), held to the sandbox's own list of its test cards. */

describe('our test payment methods are the sandbox\'s', () => {
  it('the same names: a method added to the sandbox is added here too', () => {
    expect(Object.keys(TEST_PAYMENT_METHODS).sort()).toEqual([...knownPaymentMethods].sort());
  });

  it('each with the network of the sandbox\'s card (its brand), and no network for a method that is no card', () => {
    for (const [name, facts] of Object.entries(TEST_PAYMENT_METHODS)) {
      const card = testCard(name);
      expect({ name, network: facts.network, type: facts.type }).toEqual({ name, network: card?.brand ?? null, type: card ? 'card' : 'sepa_debit' });
    }
  });
});

describe('a payment method described', () => {
  it('a test payment method, or a variant of one, by the listed name', () => {
    expect(paymentMethodFacts({ paymentMethod: 'pm_card_mastercard' })).toEqual({ type: 'card', network: 'mastercard', testMethod: 'pm_card_mastercard' });
    expect(paymentMethodFacts({ paymentMethod: 'pm_card_visa__ab12' })).toEqual({ type: 'card', network: 'visa', testMethod: 'pm_card_visa' });
    expect(paymentMethodFacts({ paymentMethod: 'pm_sepa_debit' })).toEqual({ type: 'sepa_debit', network: 'unknown', testMethod: 'pm_sepa_debit' });
    expect(listedTestPaymentMethod('pm_card_mastercard_adviceNeverRetry__x9')).toBe('pm_card_mastercard_adviceNeverRetry');
  });

  it('a saved method: a card of its brand, whatever its id', () => {
    expect(paymentMethodFacts({ paymentMethod: 'pm_01jd0000000000000000000000', savedCard: { brand: 'MasterCard' } })).toEqual({ type: 'card', network: 'mastercard', testMethod: null });
    expect(paymentMethodFacts({ paymentMethod: 'pm_01jd0000000000000000000000', savedCard: { brand: 'maestro' } })).toEqual({ type: 'card', network: 'unknown', testMethod: null });
  });

  it('anything else says nothing: a PSP\'s token, an unknown test method, a variant of nothing', () => {
    for (const paymentMethod of ['pm_1QmerchantsOwnToken', 'pm_card_amex', 'pm_card_nothing__ab12', 'pm_card_visa__', 'pm_card_visa__a-b']) {
      expect(paymentMethodFacts({ paymentMethod })).toEqual({ type: 'unknown', network: 'unknown', testMethod: null });
    }
  });

  it('brands as PSPs write them map to one closed set of networks', () => {
    expect(['visa', 'Visa', 'VISA'].map(cardNetworkOf)).toEqual(['visa', 'visa', 'visa']);
    expect(['mc', 'mastercard', 'Master Card'].map(cardNetworkOf)).toEqual(['mastercard', 'mastercard', 'mastercard']);
    expect(['American Express', 'amex', 'diners_club', 'cup', 'jcb'].map(cardNetworkOf)).toEqual(['amex', 'amex', 'diners', 'unionpay', 'jcb']);
    expect(['cartebancaire', '', null, undefined].map(cardNetworkOf)).toEqual(['unknown', 'unknown', 'unknown', 'unknown']);
  });

  it('the shape of a test payment method is pm_<word>_…; our saved ids and PSP tokens do not have it', () => {
    expect(['pm_card_visa', 'pm_sepa_debit', 'pm_card_captureFailed', 'pm_card_amex'].every(hasTestPaymentMethodShape)).toBe(true);
    expect(['pm_01jd0000000000000000000000', 'pm_1QmerchantsOwnToken', 'card_123', 'pm_'].some(hasTestPaymentMethodShape)).toBe(false);
  });
});
