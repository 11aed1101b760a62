/**
 * A payment's method as routing sees it: its type (`card`, `sepa_debit`), its card network, and
 * whether it is one of our test payment methods. Pure: no I/O.
 *
 * A payment names its method as a string (`payment_method`): one of our test payment methods
 * (the sandbox's names, `pm_card_visa`…, each knowing its type and network here), a saved method
 * of ours (`pm_…`, charged with the card the API found: it carries the card's brand), or a token
 * a PSP gave the merchant (such as `pm_1Q…`), of which nothing is known here.
 */

/** The types of payment method, as the PSPs name them (a payment method's `type`). */
export const PAYMENT_METHOD_TYPES = ['card', 'sepa_debit'] as const;
export type PaymentMethodType = (typeof PAYMENT_METHOD_TYPES)[number];

/**
 * The card networks routing counts outcomes by; any other brand (and a method that is no card, or
 * says nothing) is `unknown`. A closed set, so a segment is a bounded label.
 */
export const CARD_NETWORKS = ['visa', 'mastercard', 'amex', 'discover', 'jcb', 'diners', 'unionpay'] as const;
export type CardNetwork = (typeof CARD_NETWORKS)[number];

/** What one of our test payment methods is. `network` null: no card (a bank debit). */
export interface TestPaymentMethod {
  type: PaymentMethodType;
  network: CardNetwork | null;
}

const visa: TestPaymentMethod = { type: 'card', network: 'visa' };
const mastercard: TestPaymentMethod = { type: 'card', network: 'mastercard' };
const sepaDebit: TestPaymentMethod = { type: 'sepa_debit', network: null };

/**
 * Our test payment methods, the names of sandbox/payment-methods.ts (docs/CONTRACT.md §7), each
 * with its type and network (the sandbox's card brand: a `pm_card_mastercard…` name is a
 * Mastercard, every other card a Visa). test/unit/payment-methods.test.ts holds the two lists to
 * each other.
 */
export const TEST_PAYMENT_METHODS: Readonly<Record<string, TestPaymentMethod>> = {
  pm_card_visa: visa,
  pm_card_mastercard: mastercard,
  pm_card_declined: visa,
  pm_card_insufficient_funds: visa,
  pm_card_slow: visa,
  pm_card_timeout_after_charge: visa,
  pm_card_flaky: visa,
  pm_card_refund_fails: visa,
  pm_card_threeDSecureRequired: visa,
  pm_card_threeDSecureRequired_declined: visa,
  pm_card_authenticationRequired: visa,
  pm_sepa_debit: sepaDebit,
  pm_sepa_debit_fails: sepaDebit,
  pm_card_createDispute: visa,
  pm_card_createDisputeInquiry: visa,
  pm_card_recoverAfter2: visa,
  pm_card_alwaysInsufficientFunds: visa,
  pm_card_stolen: visa,
  pm_card_mastercard_adviceRetryLater: mastercard,
  pm_card_mastercard_adviceNeverRetry: mastercard,
};

/**
 * The listed test payment method a name stands for: the name itself, or, for a variant
 * `<listed>__<letters and digits>` (another card that behaves as the listed one, as the sandbox
 * reads it), the listed name; null for any other name.
 */
export function listedTestPaymentMethod(paymentMethod: string): string | null {
  if (Object.hasOwn(TEST_PAYMENT_METHODS, paymentMethod)) return paymentMethod;
  const variant = /^(pm_[A-Za-z0-9_]+?)__[A-Za-z0-9]{1,40}$/.exec(paymentMethod);
  return variant && Object.hasOwn(TEST_PAYMENT_METHODS, variant[1]!) ? variant[1]! : null;
}

/**
 * Whether a name has the shape of a test payment method, `pm_<word>_…` (`pm_card_visa`,
 * `pm_sepa_debit`, a kind's own such as `pm_card_captureFailed`), listed or not. Our saved
 * methods' ids (`pm_` and 26 letters and digits) and the PSPs' tokens (`pm_1Q…`) have no second
 * `_` after a lowercase word.
 */
export function hasTestPaymentMethodShape(paymentMethod: string): boolean {
  return /^pm_[a-z]+_[A-Za-z0-9_]+$/.test(paymentMethod);
}

/** A brand as a PSP writes it (`Visa`, `mc`, `American Express`…), as one of CARD_NETWORKS, or `unknown`. */
export function cardNetworkOf(brand: string | null | undefined): CardNetwork | 'unknown' {
  const name = (brand ?? '').toLowerCase().replace(/[^a-z]/g, '');
  const aliases: Readonly<Record<string, CardNetwork>> = {
    mc: 'mastercard',
    americanexpress: 'amex',
    dinersclub: 'diners',
    cup: 'unionpay',
    chinaunionpay: 'unionpay',
  };
  if ((CARD_NETWORKS as readonly string[]).includes(name)) return name as CardNetwork;
  return aliases[name] ?? 'unknown';
}

/** What a payment says of its method: the method it names, and the card of the saved method it charges (none: not a saved method). */
export interface PaymentMethodRef {
  paymentMethod: string;
  savedCard?: { brand: string } | null;
}

/** A payment's method, described: its type and network (`unknown` where it does not say), and the listed test method it is, if any. */
export interface PaymentMethodFacts {
  type: PaymentMethodType | 'unknown';
  network: CardNetwork | 'unknown';
  /** The listed test payment method (TEST_PAYMENT_METHODS) it is, or is a variant of; null for none. */
  testMethod: string | null;
}

/**
 * A payment's method described: a saved method is a card of its brand; one of our test payment
 * methods (or a variant) is what TEST_PAYMENT_METHODS says; anything else says nothing.
 */
export function paymentMethodFacts(method: PaymentMethodRef): PaymentMethodFacts {
  if (method.savedCard) return { type: 'card', network: cardNetworkOf(method.savedCard.brand), testMethod: null };
  const listed = listedTestPaymentMethod(method.paymentMethod);
  if (listed === null) return { type: 'unknown', network: 'unknown', testMethod: null };
  const facts = TEST_PAYMENT_METHODS[listed]!;
  return { type: facts.type, network: facts.network ?? 'unknown', testMethod: listed };
}
