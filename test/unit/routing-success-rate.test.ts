import { describe, expect, it } from 'vitest';
import {
  countsAfterOutcome,
  decideSuccessRate,
  hasFallen,
  posteriorOf,
  segmentLevels,
  SUCCESS_RATE_DEFAULTS,
  winProbabilities,
  type OutcomeCounts,
  type RoutingSegment,
} from '../../domain/routing-success-rate';

const visaEur: RoutingSegment = { network: 'visa', currency: 'EUR', methodType: 'card' };
const settings = SUCCESS_RATE_DEFAULTS;

/** Counts of one PSP after `approvals` approvals and `declines` declines in `segment`, interleaved. */
function countsAfter(segment: RoutingSegment, approvals: number, declines: number, start?: Record<string, OutcomeCounts>): Record<string, OutcomeCounts> {
  let counts = start;
  const total = approvals + declines;
  let given = 0;
  for (let i = 0; i < total; i++) {
    const approve = given < Math.round(((i + 1) * approvals) / total);
    if (approve) given++;
    counts = countsAfterOutcome(counts, segment, approve, settings);
  }
  return counts ?? {};
}

describe('success-rate routing: the decision', () => {
  it('gives every candidate at least the exploration floor, and the probabilities add up to 1', () => {
    const counts = { 'psp-a': countsAfter(visaEur, 180, 20), 'psp-b': countsAfter(visaEur, 120, 80), 'psp-c': countsAfter(visaEur, 100, 100) };
    const decision = decideSuccessRate({ candidates: ['psp-a', 'psp-b', 'psp-c'], segment: visaEur, counts, uniform: 0.5 });
    const sum = decision.candidates.reduce((a, c) => a + c.selectionProbability, 0);
    expect(sum).toBeCloseTo(1, 9);
    for (const c of decision.candidates) expect(c.selectionProbability).toBeGreaterThanOrEqual(settings.exploration / 3 - 1e-12);
    expect(decision.chosen).toBe('psp-a');
    expect(decision.explored).toBe(false);
    expect(decision.order).toEqual(['psp-a', 'psp-b', 'psp-c']);
    expect(decision.candidates[0]!.selectionProbability).toBeGreaterThan(0.9);
  });

  it('decides the same from the same inputs, and the uniform number picks by the probabilities', () => {
    const counts = { 'psp-a': countsAfter(visaEur, 50, 10), 'psp-b': countsAfter(visaEur, 48, 12) };
    const input = { candidates: ['psp-a', 'psp-b'], segment: visaEur, counts };
    const first = decideSuccessRate({ ...input, uniform: 0.3 });
    expect(decideSuccessRate({ ...input, uniform: 0.3 })).toEqual(first);
    const pA = first.candidates[0]!.selectionProbability;
    expect(decideSuccessRate({ ...input, uniform: pA - 1e-9 }).chosen).toBe('psp-a');
    const other = decideSuccessRate({ ...input, uniform: pA + 1e-9 });
    expect(other.chosen).toBe('psp-b');
    expect(other.explored).toBe(true);
    expect(other.order).toEqual(['psp-b', 'psp-a']);
    expect(other.reason).toMatch(/^explored psp-b/);
  });

  it('splits evenly between equal posteriors and computes what sampling them would choose', () => {
    const equal = { alpha: 30, beta: 10, level: 'x', outcomes: 38 };
    const [a, b] = winProbabilities([equal, equal]);
    expect(a).toBeCloseTo(0.5, 6);
    expect(b).toBeCloseTo(0.5, 6);
    // Beta(9, 3) against Beta(3, 9): P(X > Y) computed by sampling order statistics of uniforms.
    const high = { alpha: 9, beta: 3, level: 'x', outcomes: 10 };
    const low = { alpha: 3, beta: 9, level: 'x', outcomes: 10 };
    let state = 7;
    const random = () => ((state = (state * 48271) % 2147483647) / 2147483647);
    const betaDraw = (k: number, n: number) => Array.from({ length: n }, random).sort((x, y) => x - y)[k - 1]!;
    let wins = 0;
    const draws = 20_000;
    for (let i = 0; i < draws; i++) if (betaDraw(9, 11) > betaDraw(3, 11)) wins++;
    expect(winProbabilities([high, low])[0]).toBeCloseTo(wins / draws, 2);
  });

  it('reads the finest segment level with enough outcomes, a coarser one before that, and the prior without any', () => {
    const usd: RoutingSegment = { ...visaEur, currency: 'USD' };
    expect(posteriorOf(undefined, visaEur, settings)).toMatchObject({ level: 'prior', alpha: 1, beta: 1 });
    const coarse = countsAfter(usd, 90, 10);
    const fewFine = countsAfter(visaEur, 3, 2, coarse);
    expect(posteriorOf(fewFine, visaEur, settings).level).toBe(segmentLevels(visaEur)[1]);
    const enoughFine = countsAfter(visaEur, 15, 10, coarse);
    expect(posteriorOf(enoughFine, visaEur, settings).level).toBe(segmentLevels(visaEur)[0]);
  });

  it('keeps its counts bounded by the decay', () => {
    const counts = countsAfter(visaEur, 9_000, 1_000)[segmentLevels(visaEur)[0]!]!;
    expect(counts.approvals + counts.declines).toBeLessThanOrEqual(1 / (1 - settings.decay) + 1e-6);
  });

  it('takes a PSP whose approvals fall sharply out of first place within a few dozen of its outcomes', () => {
    const steady = countsAfter(visaEur, 460, 40); // 92 %
    const other = countsAfter(visaEur, 430, 70); // 86 %
    let falling: Record<string, OutcomeCounts> = steady;
    let fellAfter: number | undefined;
    for (let i = 1; i <= 60 && fellAfter === undefined; i++) {
      falling = countsAfterOutcome(falling, visaEur, i % 5 < 3, settings); // 60 %
      const decision = decideSuccessRate({ candidates: ['psp-a', 'psp-b'], segment: visaEur, counts: { 'psp-a': falling, 'psp-b': other }, uniform: 0 });
      if (decision.candidates[0]!.selectionProbability < 0.1) fellAfter = i;
    }
    expect(fellAfter).toBeDefined();
    expect(fellAfter!).toBeLessThanOrEqual(40);
    // The long memory started again from the short one: the fall is remembered, not averaged away.
    expect(posteriorOf(falling, visaEur, settings).alpha / (posteriorOf(falling, visaEur, settings).alpha + posteriorOf(falling, visaEur, settings).beta)).toBeLessThan(0.8);
  });

  it('does not call noise a fall', () => {
    let counts: Record<string, OutcomeCounts> | undefined;
    let falls = 0;
    let state = 11;
    const random = () => ((state = (state * 48271) % 2147483647) / 2147483647);
    for (let i = 0; i < 5_000; i++) {
      counts = countsAfterOutcome(counts, visaEur, random() < 0.9, settings);
      if (hasFallen(counts[segmentLevels(visaEur)[0]!]!, settings)) falls++;
    }
    // A steady 90 %: a restart is rare (each costs the long memory, not the decision's correctness).
    expect(falls).toBeLessThan(10);
  });
});
