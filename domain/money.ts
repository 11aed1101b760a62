/**
 * ISO 4217 currencies as known to the runtime's ICU data (no hand-kept list), and the
 * largest amount accepted in one payment: eight digits of minor units, like the big PSPs.
 * Every amount is an integer count of minor units; nothing here is ever a float.
 */
const currencies = new Set(Intl.supportedValuesOf('currency'));

export const MAX_AMOUNT_MINOR = 99_999_999;

export function isCurrency(code: string): boolean {
  return /^[A-Z]{3}$/.test(code) && currencies.has(code);
}
