import { z } from '@hono/zod-openapi';
import { isCurrency } from './money';
import { netValueOf } from './routing-success-rate';

/**
 * What each PSP charges, and a payment's expected net under it (docs/CONTRACT.md §3.7,
 * `routing.objective: "net"`). Pure.
 *
 * A schedule names, per PSP and per currency (or `*` for any other currency), a fee charged on
 * each approval and, where the PSP charges attempts, one charged on every attempt (approved or
 * not): each a percentage in basis points of the amount plus a fixed part in the payment's
 * minor units. The deployment's schedule is PROVIDER_FEES (lib/config.ts); a tenant's
 * `routing.fees` replaces a PSP's entry for its payments.
 *
 *   {"sandbox-a":{"EUR":{"approval":{"bps":140,"fixed_minor":25}},
 *                 "*":{"approval":{"bps":290,"fixed_minor":0},"attempt":{"bps":0,"fixed_minor":2}}}}
 */

export function feeSchemas(zod: typeof z = z) {
  const Fee = zod.strictObject({
    /** Basis points of the amount (100 bps = 1 %). */
    bps: zod.number().min(0, 'bps is not negative').max(10_000, 'bps is at most 10000 (100 %)'),
    /** A fixed part, in the payment's minor units. */
    fixed_minor: zod.number().int('fixed_minor is an integer number of minor units').min(0, 'fixed_minor is not negative').max(1_000_000_00, 'fixed_minor is at most 100000000'),
  });
  const CurrencyFees = zod.strictObject({
    /** Charged on each approval. */
    approval: Fee.optional(),
    /** Charged on every attempt, approved or not (PSPs that charge attempts). */
    attempt: Fee.optional(),
  });
  /** A record whose keys are checked one by one, each refusal at its key's path with its own reason. */
  const keyed = <T extends z.ZodType>(value: T, max: number, what: string, check: (key: string) => string | null) =>
    zod.record(zod.string(), value).superRefine((record, ctx) => {
      const keys = Object.keys(record);
      if (keys.length > max) ctx.addIssue({ code: 'custom', message: `at most ${max} ${what}` });
      for (const key of keys) {
        const reason = check(key);
        if (reason) ctx.addIssue({ code: 'custom', path: [key], message: reason });
      }
    });
  const ProviderFees = keyed(CurrencyFees, 200, 'currencies per provider', (code) => (code === '*' || isCurrency(code) ? null : 'a currency key is an ISO 4217 code (upper case, e.g. "EUR") or "*"'));
  const FeeSchedule = keyed(ProviderFees, 16, 'providers', (name) => (/^[\x21-\x7e]{1,64}$/.test(name) ? null : 'a provider name is 1 to 64 printable ASCII characters without spaces (a name from PROVIDERS)'));
  return { Fee, CurrencyFees, ProviderFees, FeeSchedule };
}

export const { Fee, CurrencyFees, ProviderFees, FeeSchedule } = feeSchemas();
export type Fee = z.output<typeof Fee>;
export type FeeSchedule = z.output<typeof FeeSchedule>;

/** One fee on an amount, in minor units (fractions kept: an expectation, not a charge). */
export function feeOn(fee: Fee | undefined, amountMinor: number): number {
  return fee ? (amountMinor * fee.bps) / 10_000 + fee.fixed_minor : 0;
}

/**
 * A PSP's fees for one payment, in minor units: the tenant's entry for the PSP if it has one,
 * else the deployment's; within it, the payment's currency, else `*`, else nothing.
 */
export function feesFor(input: { provider: string; currency: string; amountMinor: number; deployment: FeeSchedule | null; tenant?: FeeSchedule | null }): { approval: number; attempt: number } {
  const entry = input.tenant?.[input.provider] ?? input.deployment?.[input.provider];
  const fees = entry?.[input.currency.toUpperCase()] ?? entry?.['*'];
  return { approval: feeOn(fees?.approval, input.amountMinor), attempt: feeOn(fees?.attempt, input.amountMinor) };
}

/** A payment's expected net at a PSP, in minor units: p times the amount, less the expected fees. */
export function expectedNet(approval: number, amountMinor: number, fees: { approval: number; attempt: number }): number {
  const { scale, offset } = netValueOf(amountMinor, fees);
  return approval * scale - offset;
}
