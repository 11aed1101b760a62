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

/** Minor-unit digits by currency, asked of ICU once per currency (a NumberFormat is costly to build). */
const minorDigits = new Map<string, number>();

/** `4999, 'EUR'` → `49.99 EUR`: the currency's own number of minor-unit digits, no float arithmetic. */
export function formatAmount(amountMinor: number, currency: string): string {
  let digits = minorDigits.get(currency);
  if (digits === undefined) {
    digits = new Intl.NumberFormat('en', { style: 'currency', currency }).resolvedOptions().maximumFractionDigits ?? 2;
    if (currencies.has(currency)) minorDigits.set(currency, digits);
  }
  const text = String(Math.abs(amountMinor)).padStart(digits + 1, '0');
  const major = digits ? `${text.slice(0, -digits)}.${text.slice(-digits)}` : text;
  return `${amountMinor < 0 ? '-' : ''}${major} ${currency}`;
}
