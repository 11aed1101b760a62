import { z } from '@hono/zod-openapi';
import { isCurrency, MAX_AMOUNT_MINOR } from './money';
import { storable, unstorableText } from './text';
import { feeSchemas } from './routing-fees';

/**
 * A tenant's routing across the deployment's PSPs (docs/CONTRACT.md §3.7).
 * Pure: no I/O, no clock, no randomness. The same payment and the same configuration always
 * give the same candidates, so a retried or replayed decision is the decision made first.
 *
 *   {"fallback":["sandbox-a","sandbox-b"],
 *    "split":[{"provider":"sandbox-a","weight":70},{"provider":"sandbox-b","weight":30}],
 *    "rules":[{"when":{"currency":["EUR"],"payment_method_prefix":"pm_sepa","amount_minor":{"gte":0,"lt":100000}},
 *              "fallback":["sandbox-b"]}]}
 *
 * Decision (routeCandidates):
 * 1. The first rule whose conditions all hold wins: its `fallback` list is the candidates,
 *    exactly (a rule says where such payments may go, e.g. the one PSP that offers a method).
 * 2. Otherwise, with a `split`, the first candidate is drawn by weight from a hash of the
 *    payment id; the others follow in the order of `fallback` (or, without `fallback`, of the
 *    split's list). Providers named nowhere are not candidates: a tenant's routing lists the
 *    PSPs its payments may go to.
 * 3. Otherwise `fallback`, in its order.
 * 4. No routing (or none of the above applies): the configured providers, in their
 *    configured order (PROVIDERS): the first configured PSP first.
 * A provider no longer configured (PROVIDERS changed since the routing was set) is skipped;
 * if that leaves nothing, the configured order applies, and the reason says so.
 */

/** The longest list of providers, of rules and of currencies in one rule (a configuration, not a database). */
export const ROUTING_LIMITS = { providers: 16, rules: 50, currencies: 50, declineCodes: 20 } as const;

/**
 * Declines about the card or the customer: the same card would fail at any PSP, and trying
 * another could charge a customer the issuer meant to refuse. A routing may not make them
 * retryable elsewhere.
 */
export const NEVER_RETRY_ELSEWHERE_DECLINE_CODES: readonly string[] = [
  'card_declined',
  'insufficient_funds',
  'fraudulent',
  'stolen_card',
  'lost_card',
  'pickup_card',
  'do_not_honor',
  'expired_card',
  'incorrect_cvc',
  'incorrect_number',
  'authentication_failed',
  // The issuer asks the customer to authenticate an off-session payment: another PSP reaches the same issuer.
  'authentication_required',
  'card_velocity_exceeded',
];

function withoutDuplicates<T>(values: readonly T[], ctx: z.RefinementCtx, what: string, key: (value: T) => string = String, path: (string | number)[] = []) {
  const seen = new Map<string, number>();
  values.forEach((value, index) => {
    const name = key(value);
    const first = seen.get(name);
    if (first === undefined) seen.set(name, index);
    else ctx.addIssue({ code: 'custom', path: [...path, index], message: `${what} "${name}" is listed twice (at ${first} and ${index})` });
  });
}

/**
 * The routing schemas, built from the zod namespace given (default: @hono/zod-openapi's, so
 * they carry `.openapi()` whichever module loads first); the API documents its own copy.
 */
export function routingSchemas(zod: typeof z = z) {
  const providerName = zod
    .string()
    .min(1, 'a provider name is not empty')
    .max(64, 'a provider name is at most 64 characters')
    .regex(/^[\x21-\x7e]+$/, 'a provider name is printable ASCII without spaces (a name from PROVIDERS)');

  const providerList = (what: string) =>
    zod
      .array(providerName)
      .min(1, `${what} lists at least one provider`)
      .max(ROUTING_LIMITS.providers, `${what} lists at most ${ROUTING_LIMITS.providers} providers`)
      .superRefine((list, ctx) => withoutDuplicates(list, ctx, 'provider'));

  const amountBound = zod.number().int('an amount bound is an integer number of minor units').min(0, 'an amount bound is not negative').max(MAX_AMOUNT_MINOR + 1);

  const RoutingCondition = zod
    .strictObject({
      /** The payment's currency is one of these (ISO 4217, upper case). */
      currency: zod
        .array(zod.string().refine(isCurrency, 'not an ISO 4217 currency code (upper case, e.g. "EUR")'))
        .min(1, 'currency lists at least one currency')
        .max(ROUTING_LIMITS.currencies)
        .superRefine((list, ctx) => withoutDuplicates(list, ctx, 'currency'))
        .optional(),
      /** The payment method starts with this (e.g. "pm_sepa"). */
      payment_method_prefix: zod
        .string()
        .min(1, 'payment_method_prefix is not empty')
        .max(200)
        .refine((prefix) => !unstorableText.test(prefix), storable)
        .optional(),
      /** The amount, in minor units, is within [gte, lt): either bound may be left out, not both. */
      amount_minor: zod
        .strictObject({ gte: amountBound.optional(), lt: amountBound.optional() })
        .superRefine((range, ctx) => {
          if (range.gte === undefined && range.lt === undefined) ctx.addIssue({ code: 'custom', message: 'amount_minor needs gte, lt or both' });
          else if (range.gte !== undefined && range.lt !== undefined && range.gte >= range.lt) {
            ctx.addIssue({ code: 'custom', message: `amount_minor is empty: gte (${range.gte}) must be below lt (${range.lt})` });
          }
        })
        .optional(),
    })
    .superRefine((when, ctx) => {
      if (when.currency === undefined && when.payment_method_prefix === undefined && when.amount_minor === undefined) {
        ctx.addIssue({ code: 'custom', message: 'a rule needs at least one condition (currency, payment_method_prefix, amount_minor); a catch-all is the routing\'s fallback' });
      }
    });

  const RoutingRule = zod.strictObject({
    when: RoutingCondition,
    /** The candidates, in order, of a payment the rule matches. */
    fallback: providerList('a rule\'s fallback'),
  });

  const SplitEntry = zod.strictObject({
    provider: providerName,
    /** Relative share of the payments this provider is tried first for; 0: never first by the split. */
    weight: zod.number().int('a weight is an integer').min(0, 'a weight is not negative').max(1_000_000, 'a weight is at most 1000000'),
  });

  const Routing = zod
    .strictObject({
      /** The order providers are tried in (after the split's pick, if any). */
      fallback: providerList('fallback').optional(),
      /** Which provider is tried first, by weight, per payment. */
      split: zod
        .array(SplitEntry)
        .min(1, 'split lists at least one provider')
        .max(ROUTING_LIMITS.providers)
        .superRefine((split, ctx) => {
          withoutDuplicates(split, ctx, 'provider', (entry) => entry.provider);
          if (split.length > 0 && split.every((entry) => entry.weight === 0)) ctx.addIssue({ code: 'custom', message: 'split weights are all zero: at least one must be positive' });
        })
        .optional(),
      /** Tried in order; the first that matches decides. */
      rules: zod.array(RoutingRule).max(ROUTING_LIMITS.rules, `at most ${ROUTING_LIMITS.rules} rules`).optional(),
      /**
       * The PSP decline codes that move a payment to the next PSP (the PSP failed, not the card);
       * default: processing_error, issuer_unavailable, try_again_later. Replaces the default.
       */
      retryable_decline_codes: zod
        .array(
          zod
            .string()
            .regex(/^[a-z0-9_]{1,64}$/, 'a decline code is lowercase letters, digits and "_" (e.g. "processing_error")')
            .refine((code) => !NEVER_RETRY_ELSEWHERE_DECLINE_CODES.includes(code), {
              message: 'is about the card or the customer: never retried at another PSP',
            }),
        )
        .max(ROUTING_LIMITS.declineCodes, `at most ${ROUTING_LIMITS.declineCodes} decline codes`)
        .superRefine((list, ctx) => withoutDuplicates(list, ctx, 'decline code'))
        .optional(),
      /**
       * How the candidates (a rule's list, else the split's pick and `fallback`, else every
       * configured PSP) are ordered: `static` (default) as listed; `success_rate` by how the
       * issuers answer at each PSP (domain/routing-success-rate.ts).
       */
      strategy: zod.enum(['static', 'success_rate']).optional(),
      /** Whose outcomes success-rate routing learns from: every tenant's (`pooled`, default) or this tenant's own. */
      scope: zod.enum(['pooled', 'tenant']).optional(),
      /** What success-rate routing maximizes: the probability of approval (default), or the expected net after fees. */
      objective: zod.enum(['approvals', 'net']).optional(),
      /** The floor of exploration: this share of payments is spread evenly over the candidates (default 0.05). */
      exploration: zod.number().min(0, 'exploration is not negative').max(0.5, 'exploration is at most 0.5').optional(),
      /** Fees per PSP and currency, replacing the deployment's (PROVIDER_FEES) for the PSPs named (domain/routing-fees.ts). */
      fees: feeSchemas(zod).FeeSchedule.optional(),
    })
    .superRefine((routing, ctx) => {
      if (
        routing.fallback === undefined &&
        routing.split === undefined &&
        (routing.rules === undefined || routing.rules.length === 0) &&
        routing.retryable_decline_codes === undefined &&
        routing.strategy === undefined
      ) {
        ctx.addIssue({ code: 'custom', message: 'routing needs fallback, split, rules, retryable_decline_codes or strategy (null clears a tenant\'s routing)' });
      }
    });
  return { RoutingCondition, RoutingRule, SplitEntry, Routing };
}

export const { RoutingCondition, RoutingRule, SplitEntry, Routing } = routingSchemas();

export type Routing = z.output<typeof Routing>;
export type RoutingRule = z.output<typeof RoutingRule>;

/** A refusal: where (a path like `routing.rules.0.fallback.1`) and why. */
export interface RoutingRefusal {
  path: string;
  reason: string;
}

/**
 * Parses a routing configuration and checks every provider it names against the configured
 * ones. Refusals name the place and the reason: the admin API answers 400 with them.
 */
export function validateRouting(input: unknown, configured: readonly string[]): { ok: true; routing: Routing } | { ok: false; refusals: RoutingRefusal[] } {
  const parsed = Routing.safeParse(input);
  if (!parsed.success) {
    return { ok: false, refusals: parsed.error.issues.map((issue) => ({ path: ['routing', ...issue.path].join('.'), reason: issue.message })) };
  }
  const refusals = unknownProviders(parsed.data, configured);
  return refusals.length ? { ok: false, refusals } : { ok: true, routing: parsed.data };
}

/** Every provider a (well-formed) routing names that is not configured. */
export function unknownProviders(routing: Routing, configured: readonly string[]): RoutingRefusal[] {
  const known = new Set(configured);
  const refusals: RoutingRefusal[] = [];
  const check = (name: string, path: string) => {
    if (!known.has(name)) refusals.push({ path, reason: `unknown provider "${name}": the configured providers are ${configured.map((c) => `"${c}"`).join(', ') || 'none'}` });
  };
  routing.fallback?.forEach((name, index) => check(name, `routing.fallback.${index}`));
  routing.split?.forEach((entry, index) => check(entry.provider, `routing.split.${index}.provider`));
  routing.rules?.forEach((rule, r) => rule.fallback.forEach((name, index) => check(name, `routing.rules.${r}.fallback.${index}`)));
  Object.keys(routing.fees ?? {}).forEach((name) => check(name, `routing.fees.${name}`));
  return refusals;
}

/** A refusal as one sentence: `routing.split.1.provider: unknown provider "x": …`. */
export function describeRefusals(refusals: readonly RoutingRefusal[]): string {
  return refusals.map((refusal) => `${refusal.path}: ${refusal.reason}`).join('; ');
}

export interface RoutedPayment {
  paymentId: string;
  currency: string;
  amountMinor: number;
  paymentMethod: string;
}

export interface RouteDecision {
  /** The providers to try, in order; never empty when any provider is configured. */
  providers: string[];
  /** Why, in words (logged, and shown with the attempts). */
  reason: string;
  /** The routing's decline codes that move a payment on (absent: the default list). */
  retryableDeclineCodes?: string[];
}

/** Whether a rule's conditions all hold for the payment. */
export function ruleMatches(rule: RoutingRule, payment: RoutedPayment): boolean {
  const when = rule.when;
  if (when.currency && !when.currency.includes(payment.currency.toUpperCase())) return false;
  if (when.payment_method_prefix !== undefined && !payment.paymentMethod.startsWith(when.payment_method_prefix)) return false;
  if (when.amount_minor) {
    const { gte, lt } = when.amount_minor;
    if (gte !== undefined && payment.amountMinor < gte) return false;
    if (lt !== undefined && payment.amountMinor >= lt) return false;
  }
  return true;
}

function describeCondition(rule: RoutingRule): string {
  const parts: string[] = [];
  if (rule.when.currency) parts.push(`currency in ${rule.when.currency.join('/')}`);
  if (rule.when.payment_method_prefix !== undefined) parts.push(`payment method starts with ${rule.when.payment_method_prefix}`);
  if (rule.when.amount_minor) parts.push(`amount_minor in [${rule.when.amount_minor.gte ?? 0}, ${rule.when.amount_minor.lt ?? '∞'})`);
  return parts.join(', ');
}

/**
 * A number in [0, 1) from the payment id: 32-bit FNV-1a, then murmur3's finaliser so every bit
 * of the id moves the high bits the draw reads. Stable across processes, versions and replays.
 */
export function splitDraw(paymentId: string): number {
  let hash = 0x811c9dc5;
  for (let i = 0; i < paymentId.length; i++) {
    hash ^= paymentId.charCodeAt(i);
    hash = Math.imul(hash, 0x01000193);
  }
  hash ^= hash >>> 16;
  hash = Math.imul(hash, 0x85ebca6b);
  hash ^= hash >>> 13;
  hash = Math.imul(hash, 0xc2b2ae35);
  hash ^= hash >>> 16;
  return (hash >>> 0) / 0x1_0000_0000;
}

/** The split's pick for this payment: provider i with probability weight_i / total. */
export function pickBySplit(split: readonly { provider: string; weight: number }[], paymentId: string): string {
  const total = split.reduce((sum, entry) => sum + entry.weight, 0);
  let point = splitDraw(paymentId) * total;
  for (const entry of split) {
    if (point < entry.weight) return entry.provider;
    point -= entry.weight;
  }
  // Floating-point rounding at the very top: the last provider with a weight.
  return [...split].reverse().find((entry) => entry.weight > 0)!.provider;
}

/**
 * The providers to try for a payment, in order, and why (see the module's comment). `routing`
 * is a tenant's stored configuration (validated when it was set); `configured` the
 * deployment's provider names in PROVIDERS order.
 */
export function routeCandidates(routing: Routing | null, payment: RoutedPayment, configured: readonly string[]): RouteDecision {
  const decision = candidates(routing, payment, configured);
  return routing?.retryable_decline_codes ? { ...decision, retryableDeclineCodes: [...routing.retryable_decline_codes] } : decision;
}

function candidates(routing: Routing | null, payment: RoutedPayment, configured: readonly string[]): RouteDecision {
  const known = new Set(configured);
  const configuredOrder = (why: string): RouteDecision => ({ providers: [...configured], reason: `${why}: the configured order (${configured.join(', ') || 'none configured'})` });
  if (!routing) return configuredOrder('no routing');

  const usable = (list: readonly string[], reason: string): RouteDecision => {
    const providers = list.filter((name) => known.has(name));
    const dropped = list.filter((name) => !known.has(name));
    if (providers.length === 0) return configuredOrder(`${reason}, but none of ${list.join(', ')} is configured`);
    return { providers, reason: dropped.length ? `${reason} (${dropped.join(', ')} not configured, skipped)` : reason };
  };

  const rules = routing.rules ?? [];
  for (let index = 0; index < rules.length; index++) {
    const rule = rules[index]!;
    if (ruleMatches(rule, payment)) return usable(rule.fallback, `rule ${index + 1} matched (${describeCondition(rule)})`);
  }
  if (routing.split) {
    const split = routing.split.filter((entry) => known.has(entry.provider) && entry.weight > 0);
    const order = routing.fallback ?? routing.split.map((entry) => entry.provider);
    if (split.length > 0) {
      const first = pickBySplit(split, payment.paymentId);
      const total = split.reduce((sum, entry) => sum + entry.weight, 0);
      const weight = split.find((entry) => entry.provider === first)!.weight;
      return usable([first, ...order.filter((name) => name !== first)], `split picked ${first} (weight ${weight} of ${total}), then ${routing.fallback ? 'the fallback order' : "the split's order"}`);
    }
    return usable(order, `no configured provider of the split has a weight; ${routing.fallback ? 'the fallback order' : "the split's order"}`);
  }
  if (routing.fallback) return usable(routing.fallback, rules.length ? 'no rule matched: the fallback order' : 'the fallback order');
  return configuredOrder(rules.length ? 'no rule matched and no split or fallback' : 'no split, fallback or rule');
}

/** A PSP's shared health (db/routing.ts routing_health): in, half-open (probed back), out of first place. */
export type CircuitState = 'closed' | 'half_open' | 'open';
