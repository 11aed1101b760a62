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

/** The currency's number of minor-unit digits (EUR 2, JPY 0, KWD 3), as ICU knows it. */
export function minorUnitDigits(currency: string): number {
  let digits = minorDigits.get(currency);
  if (digits === undefined) {
    digits = new Intl.NumberFormat('en', { style: 'currency', currency }).resolvedOptions().maximumFractionDigits ?? 2;
    if (currencies.has(currency)) minorDigits.set(currency, digits);
  }
  return digits;
}

/** `4999, 'EUR'` → `49.99`: a decimal in major units with the currency's own digits, no float arithmetic. */
export function decimalAmount(amountMinor: number, currency: string): string {
  const digits = minorUnitDigits(currency);
  const text = String(Math.abs(amountMinor)).padStart(digits + 1, '0');
  const major = digits ? `${text.slice(0, -digits)}.${text.slice(-digits)}` : text;
  return `${amountMinor < 0 ? '-' : ''}${major}`;
}

/** `4999, 'EUR'` → `49.99 EUR`. */
export function formatAmount(amountMinor: number, currency: string): string {
  return `${decimalAmount(amountMinor, currency)} ${currency}`;
}

/**
 * `'49.99', 'EUR'` → `4999`: a non-negative decimal in major units (as PSPs' reports write them:
 * `5.00`, `7.5`, `12`) as an integer of minor units, read digit by digit (never through a float).
 * Throws for anything else: a sign, an exponent, a thousands separator, more decimals than the
 * currency has, an unknown currency, or an amount beyond MAX_SAFE_INTEGER.
 */
export function minorFromDecimal(text: string, currency: string): number {
  if (!isCurrency(currency)) throw new RangeError(`"${currency}" is not an ISO 4217 currency`);
  const digits = minorUnitDigits(currency);
  const match = /^(\d{1,15})(?:\.(\d+))?$/.exec(text);
  if (!match) throw new RangeError(`"${text}" is not a decimal amount`);
  const decimals = match[2] ?? '';
  if (decimals.length > digits) throw new RangeError(`"${text}" has more decimals than ${currency} has (${digits})`);
  const minor = Number(match[1]! + decimals.padEnd(digits, '0'));
  if (!Number.isSafeInteger(minor)) throw new RangeError(`"${text}" is too large`);
  return minor;
}
