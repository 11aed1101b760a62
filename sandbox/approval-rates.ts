import { createHash } from 'node:crypto';
import { z } from 'zod';
import type { Sql } from '../db/connect';

/**
 * How the issuers behind one sandbox answer its plain test cards (POST /_sandbox/approval_rates,
 * docs/sandbox.md "Approval rates"): a charge of `pm_card_visa` or `pm_card_mastercard` (a variant
 * or a saved card of one included) is approved with the probability of the most specific rule
 * that matches its card network and currency, and otherwise declined `do_not_honor`. The draw is a
 * hash of the charge's idempotency key, so the same request gets the same answer however often
 * it comes, at any sandbox given the same rates. No rule matching: approved, as without rates.
 */

export type ApprovalNetwork = 'visa' | 'mastercard' | '*';

export interface ApprovalRate {
  network: ApprovalNetwork;
  /** A three-letter code (upper case) or `*`. */
  currency: string;
  /** The probability of an approval, 0 to 1. */
  rate: number;
}

/** At most this many rules: one per network and currency is all a sandbox needs. */
const MAX_RULES = 200;

const approvalRate = z.strictObject({
  network: z.enum(['visa', 'mastercard', '*']),
  currency: z.union([
    z.literal('*'),
    z
      .string()
      .regex(/^[A-Za-z]{3}$/, 'must be a three-letter ISO 4217 code or "*"')
      .transform((code) => code.toUpperCase()),
  ]),
  rate: z.number().min(0, 'must be between 0 and 1').max(1, 'must be between 0 and 1'),
});

/** The body of POST /_sandbox/approval_rates: the whole set of rules, replacing the previous one (`[]` clears it). */
export const approvalRatesBody = z.strictObject({
  rates: z
    .array(approvalRate)
    .max(MAX_RULES, `at most ${MAX_RULES} rules`)
    .superRefine((rates, ctx) => {
      const seen = new Map<string, number>();
      rates.forEach((rule, index) => {
        const name = `${rule.network}/${rule.currency}`;
        const first = seen.get(name);
        if (first === undefined) seen.set(name, index);
        else ctx.addIssue({ code: 'custom', path: [index], message: `the rule for network "${rule.network}" and currency "${rule.currency}" is given twice (at ${first} and ${index})` });
      });
    }),
});

/**
 * How specific a rule is: network and currency named, then the network alone, then the currency
 * alone, then neither. The most specific rule that matches a charge decides it.
 */
export function specificity(rule: Pick<ApprovalRate, 'network' | 'currency'>): number {
  return (rule.network === '*' ? 0 : 2) + (rule.currency === '*' ? 0 : 1);
}

/** The rate of the most specific rule matching the card network and currency; null when none matches. */
export function approvalRateFor(rates: readonly ApprovalRate[], network: string, currency: string): number | null {
  let best: ApprovalRate | null = null;
  for (const rule of rates) {
    if (rule.network !== '*' && rule.network !== network) continue;
    if (rule.currency !== '*' && rule.currency !== currency) continue;
    if (best === null || specificity(rule) > specificity(best)) best = rule;
  }
  return best?.rate ?? null;
}

/**
 * The charge's draw, uniform in [0, 1): the first 52 bits of SHA-256 of its idempotency key.
 * Approved when below the rate, so a rate of 0 declines every charge and 1 approves every one.
 */
export function approvalDraw(idempotencyKey: string): number {
  const digest = createHash('sha256').update(`approval:${idempotencyKey}`).digest();
  return (digest.readUIntBE(0, 6) * 2 ** 4 + (digest[6]! >> 4)) / 2 ** 52;
}

/** Whether the issuer approves a plain card's charge under these rules. */
export function issuerApproves(rates: readonly ApprovalRate[], charge: { network: string; currency: string; idempotencyKey: string }): boolean {
  const rate = approvalRateFor(rates, charge.network, charge.currency);
  return rate === null || approvalDraw(charge.idempotencyKey) < rate;
}

/** The decline of a charge the issuer did not approve: a soft one (the card may be approved later). */
export const issuerDecline = { kind: 'decline', code: 'do_not_honor', message: 'The issuer declined the card (do not honor).' } as const;

/** The rules of one sandbox (`sandbox`: its URL), most specific first. */
export async function readApprovalRates(sql: Sql, sandbox: string): Promise<ApprovalRate[]> {
  const rows = await sql<ApprovalRate[]>`
    SELECT network, currency, rate FROM sandbox.approval_rates WHERE sandbox = ${sandbox}`;
  return rows
    .map((r) => ({ network: r.network, currency: r.currency, rate: r.rate }))
    .sort((a, b) => specificity(b) - specificity(a) || a.network.localeCompare(b.network) || a.currency.localeCompare(b.currency));
}

/** Replaces one sandbox's rules with these, in one transaction. */
export async function replaceApprovalRates(sql: Sql, sandbox: string, rates: readonly ApprovalRate[]): Promise<void> {
  await sql.begin(async (tx) => {
    await tx`DELETE FROM sandbox.approval_rates WHERE sandbox = ${sandbox}`;
    if (rates.length === 0) return;
    await tx`
      INSERT INTO sandbox.approval_rates ${tx(rates.map((r) => ({ sandbox, network: r.network, currency: r.currency, rate: r.rate })), 'sandbox', 'network', 'currency', 'rate')}`;
  });
}
