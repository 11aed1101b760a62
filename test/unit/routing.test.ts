import { describe, expect, it } from 'vitest';
import { describeRefusals, pickBySplit, routeCandidates, validateRouting, type Routing } from '../../domain/routing';

const configured = ['sandbox-a', 'sandbox-b'] as const;

/** The example, verbatim. */
const example = {
  fallback: ['sandbox-a', 'sandbox-b'],
  split: [
    { provider: 'sandbox-a', weight: 70 },
    { provider: 'sandbox-b', weight: 30 },
  ],
  rules: [{ when: { currency: ['EUR'], payment_method_prefix: 'pm_sepa', amount_minor: { gte: 0, lt: 100000 } }, fallback: ['sandbox-b'] }],
};

function valid(input: unknown, names: readonly string[] = configured): Routing {
  const result = validateRouting(input, names);
  if (!result.ok) throw new Error(describeRefusals(result.refusals));
  return result.routing;
}

function refusal(input: unknown, names: readonly string[] = configured): string {
  const result = validateRouting(input, names);
  if (result.ok) throw new Error(`accepted: ${JSON.stringify(input)}`);
  return describeRefusals(result.refusals);
}

const payment = (overrides: Partial<{ paymentId: string; currency: string; amountMinor: number; paymentMethod: string }> = {}) => ({
  paymentId: 'pay_01jd6w8b3m4x0c2q7yk5h9t1ve',
  currency: 'USD',
  amountMinor: 4999,
  paymentMethod: 'pm_card_visa',
  ...overrides,
});

describe('routing configuration: accepted', () => {
  it("accepts the issue's example as it is", () => {
    expect(valid(example)).toEqual(example);
  });

  it('accepts each part alone', () => {
    expect(valid({ fallback: ['sandbox-b'] })).toEqual({ fallback: ['sandbox-b'] });
    expect(valid({ split: [{ provider: 'sandbox-a', weight: 1 }] })).toBeTruthy();
    expect(valid({ rules: [{ when: { currency: ['EUR'] }, fallback: ['sandbox-b'] }] })).toBeTruthy();
    expect(valid({ split: [{ provider: 'sandbox-a', weight: 0 }, { provider: 'sandbox-b', weight: 5 }] })).toBeTruthy();
    expect(valid({ rules: [{ when: { amount_minor: { lt: 10 } }, fallback: ['sandbox-b'] }] })).toBeTruthy();
    expect(valid({ retryable_decline_codes: ['processing_error', 'issuer_unavailable', 'acquirer_timeout'] })).toBeTruthy();
    expect(valid({ fallback: ['sandbox-a'], retryable_decline_codes: [] })).toBeTruthy(); // none: no decline moves on
  });

  it('accepts success-rate routing with its scope, objective, exploration and fees, and the strategy alone', () => {
    const routing = {
      strategy: 'success_rate',
      fallback: ['sandbox-a', 'sandbox-b'],
      scope: 'tenant',
      objective: 'net',
      exploration: 0.05,
      fees: { 'sandbox-a': { EUR: { approval: { bps: 140, fixed_minor: 25 } }, '*': { approval: { bps: 290, fixed_minor: 0 }, attempt: { bps: 0, fixed_minor: 2 } } } },
    };
    expect(valid(routing)).toEqual(routing);
    expect(valid({ strategy: 'success_rate' })).toEqual({ strategy: 'success_rate' });
    expect(valid({ strategy: 'static', fallback: ['sandbox-b'] })).toBeTruthy();
  });
});

describe('routing configuration: refused, each with its reason', () => {
  const cases: [string, unknown, RegExp][] = [
    ['an unknown provider in fallback', { fallback: ['sandbox-a', 'stripe'] }, /routing\.fallback\.1: unknown provider "stripe": the configured providers are "sandbox-a", "sandbox-b"/],
    ['an unknown provider in the split', { split: [{ provider: 'sandbox-c', weight: 1 }] }, /routing\.split\.0\.provider: unknown provider "sandbox-c"/],
    ['an unknown provider in a rule', { rules: [{ when: { currency: ['EUR'] }, fallback: ['nope'] }] }, /routing\.rules\.0\.fallback\.0: unknown provider "nope"/],
    ['a duplicate in fallback', { fallback: ['sandbox-a', 'sandbox-a'] }, /routing\.fallback\.1: provider "sandbox-a" is listed twice \(at 0 and 1\)/],
    ['a duplicate in the split', { split: [{ provider: 'sandbox-a', weight: 1 }, { provider: 'sandbox-a', weight: 2 }] }, /routing\.split\.1: provider "sandbox-a" is listed twice/],
    ['a duplicate in a rule', { rules: [{ when: { currency: ['EUR'] }, fallback: ['sandbox-b', 'sandbox-b'] }] }, /routing\.rules\.0\.fallback\.1: provider "sandbox-b" is listed twice/],
    ['a duplicate currency', { rules: [{ when: { currency: ['EUR', 'EUR'] }, fallback: ['sandbox-b'] }] }, /routing\.rules\.0\.when\.currency\.1: currency "EUR" is listed twice/],
    ['a negative weight', { split: [{ provider: 'sandbox-a', weight: -1 }] }, /routing\.split\.0\.weight: a weight is not negative/],
    ['a fractional weight', { split: [{ provider: 'sandbox-a', weight: 0.5 }] }, /routing\.split\.0\.weight: a weight is an integer/],
    ['a weight as a string', { split: [{ provider: 'sandbox-a', weight: '70' }] }, /routing\.split\.0\.weight: /],
    ['all weights zero', { split: [{ provider: 'sandbox-a', weight: 0 }, { provider: 'sandbox-b', weight: 0 }] }, /routing\.split: split weights are all zero/],
    ['an empty fallback', { fallback: [] }, /routing\.fallback: fallback lists at least one provider/],
    ['an empty split', { split: [] }, /routing\.split: split lists at least one provider/],
    ['an empty rule list', { rules: [{ when: { currency: ['EUR'] }, fallback: [] }] }, /routing\.rules\.0\.fallback: a rule's fallback lists at least one provider/],
    ['an empty currency list', { rules: [{ when: { currency: [] }, fallback: ['sandbox-b'] }] }, /routing\.rules\.0\.when\.currency: currency lists at least one currency/],
    ['a lower-case currency', { rules: [{ when: { currency: ['eur'] }, fallback: ['sandbox-b'] }] }, /routing\.rules\.0\.when\.currency\.0: not an ISO 4217 currency code/],
    ['gte equal to lt', { rules: [{ when: { amount_minor: { gte: 100, lt: 100 } }, fallback: ['sandbox-b'] }] }, /routing\.rules\.0\.when\.amount_minor: amount_minor is empty: gte \(100\) must be below lt \(100\)/],
    ['gte above lt', { rules: [{ when: { amount_minor: { gte: 500, lt: 100 } }, fallback: ['sandbox-b'] }] }, /gte \(500\) must be below lt \(100\)/],
    ['a range without bounds', { rules: [{ when: { amount_minor: {} }, fallback: ['sandbox-b'] }] }, /amount_minor needs gte, lt or both/],
    ['a negative bound', { rules: [{ when: { amount_minor: { gte: -1 } }, fallback: ['sandbox-b'] }] }, /routing\.rules\.0\.when\.amount_minor\.gte: an amount bound is not negative/],
    ['a rule without conditions', { rules: [{ when: {}, fallback: ['sandbox-b'] }] }, /routing\.rules\.0\.when: a rule needs at least one condition/],
    ['an unknown key at the top', { fallback: ['sandbox-a'], weights: {} }, /routing: Unrecognized key: "weights"/],
    ['an unknown key in a condition', { rules: [{ when: { country: ['DE'] }, fallback: ['sandbox-b'] }] }, /routing\.rules\.0\.when: Unrecognized key: "country"/],
    ['an unknown key in a split entry', { split: [{ provider: 'sandbox-a', weight: 1, share: 2 }] }, /routing\.split\.0: Unrecognized key: "share"/],
    ['an empty configuration', {}, /routing: routing needs fallback, split, rules, retryable_decline_codes or strategy \(null clears/],
    ['an unknown strategy', { strategy: 'cheapest' }, /routing\.strategy: /],
    ['an unknown scope', { strategy: 'success_rate', scope: 'global' }, /routing\.scope: /],
    ['an unknown objective', { strategy: 'success_rate', objective: 'cost' }, /routing\.objective: /],
    ['exploration above 0.5', { strategy: 'success_rate', exploration: 0.8 }, /routing\.exploration: exploration is at most 0\.5/],
    ['negative exploration', { strategy: 'success_rate', exploration: -0.1 }, /routing\.exploration: exploration is not negative/],
    ['fees of an unknown provider', { strategy: 'success_rate', fees: { stripe: { EUR: { approval: { bps: 100, fixed_minor: 0 } } } } }, /routing\.fees\.stripe: unknown provider "stripe"/],
    ['fees in a lower-case currency', { strategy: 'success_rate', fees: { 'sandbox-a': { eur: { approval: { bps: 100, fixed_minor: 0 } } } } }, /routing\.fees\.sandbox-a\.eur: a currency key is an ISO 4217 code/],
    ['negative basis points', { strategy: 'success_rate', fees: { 'sandbox-a': { EUR: { approval: { bps: -1, fixed_minor: 0 } } } } }, /routing\.fees\.sandbox-a\.EUR\.approval\.bps: bps is not negative/],
    ['a fractional fixed fee', { strategy: 'success_rate', fees: { 'sandbox-a': { EUR: { attempt: { bps: 0, fixed_minor: 1.5 } } } } }, /routing\.fees\.sandbox-a\.EUR\.attempt\.fixed_minor: fixed_minor is an integer/],
    ['an unknown key in a fee', { strategy: 'success_rate', fees: { 'sandbox-a': { EUR: { approval: { bps: 1, fixed_minor: 0, cap: 5 } } } } }, /routing\.fees\.sandbox-a\.EUR\.approval: Unrecognized key: "cap"/],
    ['a card decline made retryable elsewhere', { retryable_decline_codes: ['processing_error', 'card_declined'] }, /routing\.retryable_decline_codes\.1: is about the card or the customer: never retried at another PSP/],
    ['insufficient funds made retryable elsewhere', { retryable_decline_codes: ['insufficient_funds'] }, /routing\.retryable_decline_codes\.0: is about the card/],
    ['a duplicate decline code', { retryable_decline_codes: ['processing_error', 'processing_error'] }, /routing\.retryable_decline_codes\.1: decline code "processing_error" is listed twice/],
    ['an odd decline code', { retryable_decline_codes: ['Processing Error'] }, /routing\.retryable_decline_codes\.0: a decline code is lowercase/],
    ['not an object', ['sandbox-a'], /routing: /],
  ];
  for (const [what, input, reason] of cases) {
    it(`refuses ${what}`, () => {
      expect(refusal(input)).toMatch(reason);
    });
  }

  it('names every refusal, not only the first', () => {
    const result = validateRouting({ fallback: ['x', 'y'] }, configured);
    expect(result.ok).toBe(false);
    expect(!result.ok && result.refusals.map((r) => r.path)).toEqual(['routing.fallback.0', 'routing.fallback.1']);
  });
});

describe('routeCandidates', () => {
  it('without routing: the configured order, first configured first', () => {
    expect(routeCandidates(null, payment(), configured)).toEqual({ providers: ['sandbox-a', 'sandbox-b'], reason: 'no routing: the configured order (sandbox-a, sandbox-b)' });
    expect(routeCandidates(null, payment(), ['sandbox-b', 'sandbox-a']).providers).toEqual(['sandbox-b', 'sandbox-a']);
  });

  it("the issue's rule: a SEPA payment in EUR under 1000.00 goes to sandbox-b only", () => {
    const decision = routeCandidates(valid(example), payment({ currency: 'EUR', paymentMethod: 'pm_sepa_debit', amountMinor: 5000 }), configured);
    expect(decision.providers).toEqual(['sandbox-b']);
    expect(decision.reason).toBe('rule 1 matched (currency in EUR, payment method starts with pm_sepa, amount_minor in [0, 100000))');
  });

  it('a rule matches only when every condition holds (currency, method prefix, amount bounds)', () => {
    const routing = valid(example);
    const sepa = { currency: 'EUR', paymentMethod: 'pm_sepa_debit', amountMinor: 5000 };
    const matched = (p: Partial<typeof sepa>) => routeCandidates(routing, payment({ ...sepa, ...p }), configured).reason.startsWith('rule 1');
    expect(matched({})).toBe(true);
    expect(matched({ currency: 'USD' })).toBe(false); // currency
    expect(matched({ paymentMethod: 'pm_card_visa' })).toBe(false); // prefix
    expect(matched({ paymentMethod: 'xpm_sepa' })).toBe(false); // a prefix, not a substring
    expect(matched({ amountMinor: 0 })).toBe(true); // gte is inclusive
    expect(matched({ amountMinor: 99_999 })).toBe(true);
    expect(matched({ amountMinor: 100_000 })).toBe(false); // lt is exclusive
  });

  it('the first matching rule wins', () => {
    const routing = valid({
      rules: [
        { when: { currency: ['GBP'] }, fallback: ['sandbox-a'] },
        { when: { amount_minor: { gte: 1000 } }, fallback: ['sandbox-b', 'sandbox-a'] },
        { when: { amount_minor: { gte: 500 } }, fallback: ['sandbox-a'] },
      ],
    });
    expect(routeCandidates(routing, payment({ amountMinor: 2000 }), configured).providers).toEqual(['sandbox-b', 'sandbox-a']);
    expect(routeCandidates(routing, payment({ amountMinor: 2000, currency: 'GBP' }), configured).providers).toEqual(['sandbox-a']);
    expect(routeCandidates(routing, payment({ amountMinor: 700 }), configured)).toEqual({ providers: ['sandbox-a'], reason: 'rule 3 matched (amount_minor in [500, ∞))' });
    // No rule, no split, no fallback: the configured order.
    expect(routeCandidates(routing, payment({ amountMinor: 100 }), configured).providers).toEqual(['sandbox-a', 'sandbox-b']);
  });

  it('no rule matched: the split picks the first provider, the fallback orders the rest', () => {
    const routing = valid({ ...example, fallback: ['sandbox-b', 'sandbox-a'] });
    const seen = new Set<string>();
    for (let i = 0; i < 50; i++) {
      const decision = routeCandidates(routing, payment({ paymentId: `pay_${i}` }), configured);
      expect(new Set(decision.providers)).toEqual(new Set(configured));
      expect(decision.providers[0]).toBe(pickBySplit(routing.split!, `pay_${i}`));
      expect(decision.reason).toMatch(/^split picked sandbox-[ab] \(weight (70|30) of 100\), then the fallback order$/);
      seen.add(decision.providers[0]!);
    }
    expect(seen).toEqual(new Set(configured));
  });

  it('the same payment gets the same decision every time (a retried or replayed decision)', () => {
    const routing = valid(example);
    for (let i = 0; i < 20; i++) {
      const p = payment({ paymentId: `pay_replay_${i}` });
      expect(routeCandidates(routing, p, configured)).toEqual(routeCandidates(structuredClone(routing), { ...p }, [...configured]));
    }
  });

  it('a thousand routed decisions over distinct payment ids fall within the 70/30 split (±5 points)', () => {
    const routing = valid(example);
    let first = 0;
    const n = 1000;
    for (let i = 0; i < n; i++) {
      const id = `pay_${i.toString(36).padStart(6, '0')}${(i * 7919).toString(16)}`;
      if (routeCandidates(routing, payment({ paymentId: id }), configured).providers[0] === 'sandbox-a') first++;
    }
    // Binomial(1000, 0.7): sd ≈ 14.5, so ±50 is beyond 3 sd.
    expect(first).toBeGreaterThanOrEqual(650);
    expect(first).toBeLessThanOrEqual(750);
  });

  it('so do a thousand ULID-like payment ids, on a 50/50 and a 90/10 split', () => {
    const alphabet = '0123456789abcdefghjkmnpqrstvwxyz';
    let seed = 42;
    const random = () => ((seed = (Math.imul(seed, 1103515245) + 12345) >>> 0) / 2 ** 32);
    const ids = Array.from({ length: 1000 }, () => `pay_01jd${Array.from({ length: 22 }, () => alphabet[Math.floor(random() * 32)]).join('')}`);
    for (const [a, b] of [[50, 50], [90, 10]] as const) {
      const routing = valid({ split: [{ provider: 'sandbox-a', weight: a }, { provider: 'sandbox-b', weight: b }] });
      const first = ids.filter((id) => routeCandidates(routing, payment({ paymentId: id }), configured).providers[0] === 'sandbox-a').length;
      expect(Math.abs(first - a * 10)).toBeLessThanOrEqual(50);
    }
  });

  it("a split without fallback orders the rest by the split's list; weight 0 is never first", () => {
    const routing = valid({ split: [{ provider: 'sandbox-a', weight: 0 }, { provider: 'sandbox-b', weight: 1 }] });
    for (let i = 0; i < 20; i++) expect(routeCandidates(routing, payment({ paymentId: `pay_${i}` }), configured).providers).toEqual(['sandbox-b', 'sandbox-a']);
  });

  it('providers named nowhere in the routing are not candidates', () => {
    const three = ['sandbox-a', 'sandbox-b', 'stripe'];
    expect(routeCandidates(valid({ fallback: ['stripe', 'sandbox-a'] }, three), payment(), three).providers).toEqual(['stripe', 'sandbox-a']);
  });

  it('a provider no longer configured is skipped; none left: the configured order, said in the reason', () => {
    const routing = valid({ fallback: ['sandbox-b', 'sandbox-a'] });
    expect(routeCandidates(routing, payment(), ['sandbox-a'])).toEqual({ providers: ['sandbox-a'], reason: 'the fallback order (sandbox-b not configured, skipped)' });
    const onlyB = valid({ fallback: ['sandbox-b'] });
    expect(routeCandidates(onlyB, payment(), ['sandbox-a', 'stripe'])).toEqual({
      providers: ['sandbox-a', 'stripe'],
      reason: 'the fallback order, but none of sandbox-b is configured: the configured order (sandbox-a, stripe)',
    });
    // The split's pick among what is still configured.
    const split = valid(example);
    for (let i = 0; i < 20; i++) expect(routeCandidates(split, payment({ paymentId: `pay_${i}` }), ['sandbox-b']).providers).toEqual(['sandbox-b']);
  });

  it("carries the routing's retryable decline codes, whatever decides the order", () => {
    const routing = valid({ ...example, retryable_decline_codes: ['processing_error', 'acquirer_timeout'] });
    expect(routeCandidates(routing, payment(), configured).retryableDeclineCodes).toEqual(['processing_error', 'acquirer_timeout']);
    expect(routeCandidates(routing, payment({ currency: 'EUR', paymentMethod: 'pm_sepa_debit' }), configured).retryableDeclineCodes).toEqual(['processing_error', 'acquirer_timeout']);
    expect(routeCandidates(valid(example), payment(), configured)).not.toHaveProperty('retryableDeclineCodes');
    const onlyCodes = routeCandidates(valid({ retryable_decline_codes: [] }), payment(), configured);
    expect(onlyCodes).toEqual({ providers: ['sandbox-a', 'sandbox-b'], reason: 'no split, fallback or rule: the configured order (sandbox-a, sandbox-b)', retryableDeclineCodes: [] });
  });
});
