import { describe, expect, it } from 'vitest';
import { loadConfig } from '../../lib/config';
import { expectedNet, feesFor, type FeeSchedule } from '../../domain/routing-fees';
import { countsAfterOutcome, decideSuccessRate, winProbabilities, type OutcomeCounts, type RoutingSegment } from '../../domain/routing-success-rate';

const visaEur: RoutingSegment = { network: 'visa', currency: 'EUR', methodType: 'card' };

const deployment: FeeSchedule = {
  'psp-a': { EUR: { approval: { bps: 100, fixed_minor: 20 } }, '*': { approval: { bps: 300, fixed_minor: 0 } } },
  'psp-b': { EUR: { approval: { bps: 50, fixed_minor: 10 }, attempt: { bps: 0, fixed_minor: 5 } } },
};

/** One PSP's counts after `approvals` of `total` outcomes in the segment. */
function countsOf(approvals: number, total: number): Record<string, OutcomeCounts> {
  let counts: Record<string, OutcomeCounts> | undefined;
  for (let i = 0; i < total; i++) counts = countsAfterOutcome(counts, visaEur, Math.floor(((i + 1) * approvals) / total) > Math.floor((i * approvals) / total), { decay: 1, recentDecay: 0.96, fallingZ: 3, minOutcomes: 20, prior: { approvals: 1, declines: 1 } });
  return counts ?? {};
}

describe('fees', () => {
  it("takes the payment's currency, else *, else nothing; a tenant's entry replaces the deployment's", () => {
    expect(feesFor({ provider: 'psp-a', currency: 'EUR', amountMinor: 10_000, deployment })).toEqual({ approval: 120, attempt: 0 });
    expect(feesFor({ provider: 'psp-a', currency: 'usd', amountMinor: 10_000, deployment })).toEqual({ approval: 300, attempt: 0 });
    expect(feesFor({ provider: 'psp-b', currency: 'EUR', amountMinor: 10_000, deployment })).toEqual({ approval: 60, attempt: 5 });
    expect(feesFor({ provider: 'psp-b', currency: 'USD', amountMinor: 10_000, deployment })).toEqual({ approval: 0, attempt: 0 });
    expect(feesFor({ provider: 'psp-c', currency: 'EUR', amountMinor: 10_000, deployment: null })).toEqual({ approval: 0, attempt: 0 });
    const tenant: FeeSchedule = { 'psp-a': { EUR: { approval: { bps: 0, fixed_minor: 1 } } } };
    expect(feesFor({ provider: 'psp-a', currency: 'EUR', amountMinor: 10_000, deployment, tenant })).toEqual({ approval: 1, attempt: 0 });
    // The tenant's entry replaces the PSP's whole entry: no fallback to the deployment's `*`.
    expect(feesFor({ provider: 'psp-a', currency: 'USD', amountMinor: 10_000, deployment, tenant })).toEqual({ approval: 0, attempt: 0 });
  });

  it('expects the approval fee with the approval, the attempt fee always', () => {
    expect(expectedNet(0.9, 10_000, { approval: 120, attempt: 5 })).toBeCloseTo(0.9 * 10_000 - 0.9 * 120 - 5, 9);
    expect(expectedNet(0, 10_000, { approval: 120, attempt: 5 })).toBe(-5);
  });
});

describe('the decision with the net objective, eliminations and probes', () => {
  const equal = { 'psp-a': countsOf(180, 200), 'psp-b': countsOf(180, 200) };

  it('at equal approval rates, prefers the PSP that keeps more of the amount', () => {
    // psp-a takes 15 % on approval, psp-b 1 % and 5 per attempt.
    const schedule: FeeSchedule = { 'psp-a': { EUR: { approval: { bps: 1500, fixed_minor: 0 } } }, 'psp-b': { EUR: { approval: { bps: 100, fixed_minor: 0 }, attempt: { bps: 0, fixed_minor: 5 } } } };
    const fees = { 'psp-a': feesFor({ provider: 'psp-a', currency: 'EUR', amountMinor: 10_000, deployment: schedule }), 'psp-b': feesFor({ provider: 'psp-b', currency: 'EUR', amountMinor: 10_000, deployment: schedule }) };
    const byApprovals = decideSuccessRate({ candidates: ['psp-a', 'psp-b'], segment: visaEur, counts: equal, uniform: 0.5 });
    expect(byApprovals.candidates[0]!.selectionProbability).toBeCloseTo(0.5, 1);
    const byNet = decideSuccessRate({ candidates: ['psp-a', 'psp-b'], segment: visaEur, counts: equal, uniform: 0.5, objective: { amountMinor: 10_000, fees } });
    const b = byNet.candidates.find((c) => c.provider === 'psp-b')!;
    expect(b.selectionProbability).toBeGreaterThan(0.9);
    expect(b.expectedNet).toBeCloseTo(expectedNet(b.approvalEstimate, 10_000, fees['psp-b']), 6);
    expect(byNet.order).toEqual(['psp-b', 'psp-a']);
    expect(byNet.reason).toMatch(/highest expected net/);
  });

  it('still prefers the PSP that approves far more when the fees are small beside the amount', () => {
    const counts = { 'psp-a': countsOf(190, 200), 'psp-b': countsOf(120, 200) };
    const fees = { 'psp-a': { approval: 150, attempt: 0 }, 'psp-b': { approval: 10, attempt: 0 } };
    const decision = decideSuccessRate({ candidates: ['psp-a', 'psp-b'], segment: visaEur, counts, uniform: 0.1, objective: { amountMinor: 10_000, fees } });
    expect(decision.chosen).toBe('psp-a');
  });

  it('gives an eliminated PSP no probability and puts it last, unless every candidate is eliminated', () => {
    const counts = { 'psp-a': countsOf(190, 200), 'psp-b': countsOf(120, 200), 'psp-c': countsOf(100, 200) };
    const decision = decideSuccessRate({ candidates: ['psp-a', 'psp-b', 'psp-c'], segment: visaEur, counts, uniform: 0.01, eliminated: { 'psp-a': '5 errors in its last 6 calls' } });
    expect(decision.candidates.find((c) => c.provider === 'psp-a')).toMatchObject({ selectionProbability: 0, eliminated: '5 errors in its last 6 calls' });
    expect(decision.candidates.reduce((sum, c) => sum + c.selectionProbability, 0)).toBeCloseTo(1, 9);
    expect(decision.chosen).toBe('psp-b');
    expect(decision.order.at(-1)).toBe('psp-a');
    expect(decision.reason).toMatch(/psp-a eliminated: 5 errors/);
    const all = decideSuccessRate({ candidates: ['psp-a', 'psp-b'], segment: visaEur, counts, uniform: 0.01, eliminated: { 'psp-a': 'x', 'psp-b': 'y' } });
    expect(all.chosen).toBe('psp-a');
    expect(all.candidates.every((c) => c.eliminated === undefined)).toBe(true);
  });

  it('sends a probe first, with probability 1', () => {
    const counts = { 'psp-a': countsOf(190, 200), 'psp-b': countsOf(120, 200) };
    const decision = decideSuccessRate({ candidates: ['psp-a', 'psp-b'], segment: visaEur, counts, uniform: 0.01, probe: 'psp-b' });
    expect(decision.chosen).toBe('psp-b');
    expect(decision.candidates.map((c) => c.selectionProbability)).toEqual([0, 1]);
    expect(decision.reason).toMatch(/^probing psp-b after its elimination/);
  });

  it('ranks by value under an affine transform of the rate as the rate itself would rank (identity unchanged)', () => {
    const posteriors = [
      { alpha: 91, beta: 11, level: 'x', outcomes: 100 },
      { alpha: 85, beta: 17, level: 'x', outcomes: 100 },
    ];
    expect(winProbabilities(posteriors, [{ scale: 1, offset: 0 }, { scale: 1, offset: 0 }])).toEqual(winProbabilities(posteriors));
    const scaled = winProbabilities(posteriors, [{ scale: 5000, offset: 10 }, { scale: 5000, offset: 10 }]);
    expect(scaled[0]).toBeCloseTo(winProbabilities(posteriors)[0]!, 2);
    // A fee that eats the amount leaves a constant value: a PSP worth more for sure wins always.
    expect(winProbabilities(posteriors, [{ scale: -5, offset: 100 }, { scale: 1000, offset: 0 }])[1]).toBeCloseTo(1, 6);
  });
});

describe('PROVIDER_FEES and PROVIDER_RATE_LIMITS', () => {
  const base = { PROVIDERS: 'psp-a=sandbox:http://127.0.0.1:4010,psp-b=sandbox:http://127.0.0.1:4011' };

  it('parses both, a limit without a burst taking one second of calls', () => {
    const config = loadConfig({ ...base, PROVIDER_FEES: JSON.stringify(deployment), PROVIDER_RATE_LIMITS: '{"psp-a":{"calls_per_second":2.5},"psp-b":{"calls_per_second":50,"burst":100}}' });
    expect(config.PROVIDER_FEES).toEqual(deployment);
    expect(config.PROVIDER_RATE_LIMITS).toEqual({ 'psp-a': { perSecond: 2.5, burst: 3 }, 'psp-b': { perSecond: 50, burst: 100 } });
    expect(loadConfig(base)).toMatchObject({ PROVIDER_FEES: null, PROVIDER_RATE_LIMITS: null });
  });

  it('refuses malformed JSON, a bad fee and an unknown PSP, naming where', () => {
    expect(() => loadConfig({ ...base, PROVIDER_FEES: '{' })).toThrow(/PROVIDER_FEES: not JSON/);
    expect(() => loadConfig({ ...base, PROVIDER_FEES: '{"psp-a":{"EUR":{"approval":{"bps":-1,"fixed_minor":0}}}}' })).toThrow(/PROVIDER_FEES\.psp-a\.EUR\.approval\.bps: bps is not negative/);
    expect(() => loadConfig({ ...base, PROVIDER_FEES: '{"stripe":{}}' })).toThrow(/PROVIDER_FEES: unknown provider "stripe"/);
    expect(() => loadConfig({ ...base, PROVIDER_RATE_LIMITS: '{"psp-a":{"calls_per_second":0}}' })).toThrow(/PROVIDER_RATE_LIMITS\.psp-a\.calls_per_second: calls_per_second is positive/);
    expect(() => loadConfig({ ...base, PROVIDER_RATE_LIMITS: '{"psp-z":{"calls_per_second":1}}' })).toThrow(/PROVIDER_RATE_LIMITS: unknown provider "psp-z"/);
  });
});
