/**
 * The routing simulation's harness: one seeded run of the scenario per strategy. No Temporal, no
 * PostgreSQL: our strategy is the decision code the product calls (domain/routing-success-rate.ts)
 * over counts kept in memory, updated as the product updates them.
 *
 * Every strategy of a seed meets the same payments: the same segments in the same order, the same
 * uniform number for its choice and, for each PSP, the same issuer's answer. Regret is expected
 * regret: for each payment, the best PSP's approval rate at that moment minus the chosen PSP's
 * (approvals lost against always choosing the best PSP at that moment, without the noise of the
 * issuers' draws).
 */
import { countsAfterOutcome, decideSuccessRate, segmentLevels, SUCCESS_RATE_DEFAULTS, type OutcomeCounts, type SuccessRateSettings } from '../../domain/routing-success-rate';
import type { SimScenario, SimSegment } from './scenario';

/** mulberry32: a small seeded generator, uniform in [0, 1). */
export function seeded(seed: number): () => number {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

/** One payment as every strategy meets it. */
interface SimPayment {
  segment: number;
  /** The uniform number its choice is drawn with, and a second one for the baseline's hedging. */
  choice: number;
  hedge: number;
  /** Per PSP (scenario order): the issuer's draw; approved when below that PSP's rate. */
  issuer: number[];
}

/** A strategy: picks a PSP for a payment, then learns its issuer's answer. */
export interface SimStrategy {
  name: string;
  choose(payment: SimPayment, segment: SimSegment, index: number): string;
  learn(provider: string, segment: SimSegment, approved: boolean): void;
  /** The probability it would choose `provider` now for `segment`, where it records one. */
  probabilityOf?(provider: string, segment: SimSegment): number;
}

/** Our strategy: the product's decision over pooled, recency-weighted counts. */
export function successRateStrategy(providers: readonly string[], settings: SuccessRateSettings = SUCCESS_RATE_DEFAULTS): SimStrategy {
  const counts: Record<string, Record<string, OutcomeCounts>> = {};
  return {
    name: 'success_rate (ours)',
    choose: (payment, segment) => decideSuccessRate({ candidates: providers, segment, counts, uniform: payment.choice, settings }).chosen,
    learn: (provider, segment, approved) => {
      counts[provider] = countsAfterOutcome(counts[provider], segment, approved, settings);
    },
    probabilityOf: (provider, segment) =>
      decideSuccessRate({ candidates: providers, segment, counts, uniform: 0, settings }).candidates.find((c) => c.provider === provider)!.selectionProbability,
  };
}

/** A static list: always the PSP with the best approval rate on average over the scenario's mix. */
export function staticBestStrategy(scenario: SimScenario): SimStrategy {
  const average = (provider: string) => scenario.mix.reduce((sum, m) => sum + m.share * (m.rates[provider] ?? 0), 0);
  const best = [...scenario.providers].sort((a, b) => average(b) - average(a))[0]!;
  return { name: `static (${best}, best on average)`, choose: () => best, learn: () => {} };
}

/**
 * The baseline: the decision engine's published defaults, implemented in this harness. Per PSP and
 * segment, the success rate over a sliding bucket of its last 50 outcomes (an empty bucket scores
 * 1, so a PSP is tried until it has outcomes); 5 % of payments hedged (explored) evenly over the
 * PSPs other than the best; otherwise the best score (ties: the scenario's order).
 */
export function decisionEngineBaseline(providers: readonly string[], bucket = 50, hedging = 0.05): SimStrategy {
  const buckets = new Map<string, boolean[]>();
  const score = (provider: string, key: string) => {
    const outcomes = buckets.get(`${provider}|${key}`);
    if (!outcomes || outcomes.length === 0) return 1;
    return outcomes.filter(Boolean).length / outcomes.length;
  };
  return {
    name: `baseline (bucket ${bucket}, hedging ${hedging * 100} %)`,
    choose: (payment, segment) => {
      const key = segmentLevels(segment)[0]!;
      let best = providers[0]!;
      for (const p of providers) if (score(p, key) > score(best, key)) best = p;
      if (payment.hedge < hedging && providers.length > 1) {
        const others = providers.filter((p) => p !== best);
        return others[Math.min(others.length - 1, Math.floor((payment.hedge / hedging) * others.length))]!;
      }
      return best;
    },
    learn: (provider, segment, approved) => {
      const key = `${provider}|${segmentLevels(segment)[0]!}`;
      const outcomes = buckets.get(key) ?? [];
      outcomes.push(approved);
      if (outcomes.length > bucket) outcomes.shift();
      buckets.set(key, outcomes);
    },
  };
}

export interface SimRun {
  strategy: string;
  seed: number;
  payments: number;
  approvals: number;
  /** Σ (best rate now − chosen rate now): approvals lost against the best PSP at each moment. */
  regret: number;
  /** Our strategy only: the falling PSP's selection probability for its segment at the 1st … Nth payment of that segment after the change. */
  fallingProbabilities?: number[];
}

function sameSegment(a: SimSegment, b: SimSegment): boolean {
  return a.network === b.network && a.currency === b.currency && a.methodType === b.methodType;
}

/** The payments of one seed, the same for every strategy. */
function paymentsOf(scenario: SimScenario, seed: number): SimPayment[] {
  const random = seeded(seed);
  const cumulative: number[] = [];
  scenario.mix.reduce((sum, m) => (cumulative.push(sum + m.share), sum + m.share), 0);
  return Array.from({ length: scenario.payments }, () => {
    const u = random();
    const segment = Math.max(0, cumulative.findIndex((c) => u < c));
    return { segment: segment === -1 ? scenario.mix.length - 1 : segment, choice: random(), hedge: random(), issuer: scenario.providers.map(() => random()) };
  });
}

/** One run of one strategy over one seed's payments; `follow` payments of the changed segment after the change have the falling PSP's probability recorded. */
export function runStrategy(scenario: SimScenario, seed: number, strategy: SimStrategy, follow = 300): SimRun {
  const payments = paymentsOf(scenario, seed);
  const { change } = scenario;
  let approvals = 0;
  let regret = 0;
  const falling: number[] = [];
  payments.forEach((payment, index) => {
    const mix = scenario.mix[payment.segment]!;
    const changed = index >= change.atPayment && sameSegment(mix.segment, change.segment);
    const rateOf = (provider: string) => (changed && provider === change.provider ? change.rate : (mix.rates[provider] ?? 0));
    if (changed && strategy.probabilityOf && falling.length < follow) falling.push(strategy.probabilityOf(change.provider, mix.segment));
    const chosen = strategy.choose(payment, mix.segment, index);
    const approved = payment.issuer[scenario.providers.indexOf(chosen)]! < rateOf(chosen);
    if (approved) approvals++;
    regret += Math.max(...scenario.providers.map(rateOf)) - rateOf(chosen);
    strategy.learn(chosen, mix.segment, approved);
  });
  return { strategy: strategy.name, seed, payments: payments.length, approvals, regret, ...(strategy.probabilityOf ? { fallingProbabilities: falling } : {}) };
}
