import { randomBytes } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createSql, type Sql } from '../../db/connect';
import { HEALTH_DEFAULTS, listOutcomes, POOLED_SCOPE, readEstimates, recordOutcome, takeCall, takeProbe } from '../../db/routing';
import { countsAfterOutcome, decideSuccessRate, segmentLevels, SUCCESS_RATE_DEFAULTS, type OutcomeCounts, type RoutingSegment } from '../../domain/routing-success-rate';
import { fileDatabaseUrl } from '../helpers/database';
import { holdFor } from '../helpers/eventually';
import { seeded } from '../../bench/routing-sim/sim';

/**
 * Success-rate routing's shared state (db/routing.ts, migration 028) on real PostgreSQL: the
 * counts the store keeps are the ones the pure decision models, the health every worker reads,
 * and the token bucket that holds a PSP's calls per second across connections.
 */

let sql: Sql;

beforeAll(async () => {
  sql = createSql(await fileDatabaseUrl(), { max: 20 });
});
afterAll(async () => sql?.end());

const psp = (label: string) => `${label}-${randomBytes(4).toString('hex')}`;
const visaEur: RoutingSegment = { network: 'visa', currency: 'EUR', methodType: 'card' };
const mcUsd: RoutingSegment = { network: 'mastercard', currency: 'USD', methodType: 'card' };

function expectSameCounts(actual: OutcomeCounts | undefined, expected: OutcomeCounts) {
  expect(actual).toBeDefined();
  for (const key of ['approvals', 'declines', 'recentApprovals', 'recentDeclines'] as const) expect(actual![key]).toBeCloseTo(expected[key], 9);
}

describe('routing store: the counts', () => {
  it('keeps exactly the counts the pure model computes, fall resets included, at every level', async () => {
    const provider = psp('parity');
    const random = seeded(58);
    let model: Record<string, OutcomeCounts> | undefined;
    let falls = 0;
    // 150 outcomes at 90 %, then 150 at 30 %: the fall detector must reset the long memory on the way.
    for (let i = 0; i < 300; i++) {
      const approved = random() < (i < 150 ? 0.9 : 0.3);
      const result = await recordOutcome(sql, { provider, segment: visaEur, outcome: approved ? 'approved' : 'declined', firstAttempt: true });
      const before = model;
      model = countsAfterOutcome(model, visaEur, approved, SUCCESS_RATE_DEFAULTS);
      const finest = segmentLevels(visaEur)[0]!;
      const fellInModel = before?.[finest] !== undefined && model[finest]!.approvals === model[finest]!.recentApprovals && model[finest]!.declines === model[finest]!.recentDeclines;
      if (result.fell) falls++;
      if (fellInModel) expect(result.fell).toBe(true);
    }
    expect(falls).toBeGreaterThan(0);
    const { counts } = await readEstimates(sql, { scope: POOLED_SCOPE, providers: [provider], segment: visaEur });
    for (const level of segmentLevels(visaEur)) expectSameCounts(counts[provider]?.[level], model![level]!);
    const rows = (await listOutcomes(sql, POOLED_SCOPE)).filter((r) => r.provider === provider);
    expect(rows).toHaveLength(4);
    expect(rows.every((r) => r.approvalsTotal + r.declinesTotal === 300)).toBe(true);
  });

  it("with asyncCommit, counts the same and leaves the session's synchronous commit as it was", async () => {
    const provider = psp('async');
    const one = createSql(await fileDatabaseUrl(), { max: 1 });
    const setting = async () => (await one<{ synchronous_commit: string }[]>`SHOW synchronous_commit`)[0]!.synchronous_commit;
    try {
      await one`SET synchronous_commit = on`;
      await recordOutcome(one, { provider, segment: visaEur, outcome: 'approved', firstAttempt: true, asyncCommit: true });
      await recordOutcome(one, { provider, segment: visaEur, outcome: 'error', firstAttempt: true, asyncCommit: true });
      expect(await setting()).toBe('on');
      const rows = (await listOutcomes(one, POOLED_SCOPE)).filter((r) => r.provider === provider);
      expect(rows.map((r) => [r.approvalsTotal, r.errorsTotal])).toEqual([[1, 1], [1, 1], [1, 1], [1, 1]]);
    } finally {
      await one.end();
    }
  });

  it("every attempt's error feeds the PSP's health; only first attempts count toward approvals", async () => {
    const provider = psp('later');
    let eliminated: Date | null = null;
    let errors = 0;
    for (; errors < 20 && eliminated === null; errors++) ({ eliminatedUntil: eliminated } = await recordOutcome(sql, { provider, segment: visaEur, outcome: 'error', firstAttempt: false }));
    // From none to all errors: out at the 7th, when its weighted calls (decay 0.9 per call) reach minCalls (5).
    expect(errors).toBe(7);
    expect(eliminated).toBeInstanceOf(Date);
    // A later attempt's answer (and an answer that is not the issuer's) counts no approval or decline.
    await recordOutcome(sql, { provider, segment: visaEur, outcome: 'approved', firstAttempt: false });
    await recordOutcome(sql, { provider, segment: visaEur, outcome: 'answered', firstAttempt: true });
    expect((await listOutcomes(sql, POOLED_SCOPE)).filter((row) => row.provider === provider)).toEqual([]);
  });

  it('a PSP meeting only errors for failingMs is out at its next error, however few its calls; an answer between starts it over', async () => {
    const provider = psp('sparse');
    const health = { ...HEALTH_DEFAULTS, failingMs: 300 };
    const error = () => recordOutcome(sql, { provider, segment: visaEur, outcome: 'error', firstAttempt: true, health });
    expect((await error()).eliminatedUntil).toBeNull();
    await holdFor(400, 'its errors last longer than failingMs');
    // An answer between: its errors start over.
    await recordOutcome(sql, { provider, segment: visaEur, outcome: 'answered', firstAttempt: true, health });
    expect((await error()).eliminatedUntil).toBeNull();
    await holdFor(400, 'its errors last longer than failingMs');
    // The third call, the second error in a row, failingMs after the first: out.
    expect((await error()).eliminatedUntil).toBeInstanceOf(Date);
    const [row] = await sql<{ reason: string }[]>`SELECT eliminated_reason AS reason FROM routing_health WHERE provider = ${provider}`;
    expect(row!.reason).toMatch(/^only errors for \d+ s$/);
  });

  it('counts only first attempts, keeps one row per key, and a tenant scope apart from the pool', async () => {
    const provider = psp('scope');
    const tenant = `ten_${randomBytes(4).toString('hex')}`;
    expect(await recordOutcome(sql, { provider, segment: mcUsd, outcome: 'approved', firstAttempt: false })).toEqual({ recorded: false, fell: false, eliminatedUntil: null });
    for (let i = 0; i < 5; i++) await recordOutcome(sql, { provider, segment: mcUsd, outcome: 'approved', firstAttempt: true, tenantScope: tenant });
    await recordOutcome(sql, { provider, segment: visaEur, outcome: 'declined', firstAttempt: true });
    const pooled = await readEstimates(sql, { scope: POOLED_SCOPE, providers: [provider], segment: mcUsd });
    const own = await readEstimates(sql, { scope: tenant, providers: [provider], segment: mcUsd });
    // The pool has the tenant's five approvals and the other payment's decline (at *:*:card and *:*:*).
    expect(pooled.counts[provider]!['mastercard:USD:card']!.approvals).toBeCloseTo(5 * 0.992, 1);
    expect(pooled.counts[provider]!['*:*:*']!.declines).toBeCloseTo(1, 9);
    expect(own.counts[provider]!['*:*:*']!.declines).toBe(0);
    const [{ n } = { n: 0 }] = await sql<{ n: number }[]>`SELECT count(*)::int AS n FROM routing_outcomes WHERE provider = ${provider}`;
    // Pooled: mastercard:USD:card, mastercard:*:card, visa:EUR:card, visa:*:card, *:*:card, *:*:*; the tenant's: four.
    expect(n).toBe(10);
  });

  it('feeds the decision: a PSP that approves more is chosen first for that segment', async () => {
    const good = psp('good');
    const poor = psp('poor');
    for (let i = 0; i < 60; i++) {
      await recordOutcome(sql, { provider: good, segment: visaEur, outcome: i % 10 === 0 ? 'declined' : 'approved', firstAttempt: true });
      await recordOutcome(sql, { provider: poor, segment: visaEur, outcome: i % 2 === 0 ? 'declined' : 'approved', firstAttempt: true });
    }
    const estimates = await readEstimates(sql, { scope: POOLED_SCOPE, providers: [poor, good], segment: visaEur });
    const decision = decideSuccessRate({ candidates: [poor, good], segment: visaEur, counts: estimates.counts, uniform: 0.5 });
    expect(decision.chosen).toBe(good);
    expect(decision.candidates.find((c) => c.provider === good)!.level).toBe('visa:EUR:card');
  });
});

describe('routing store: shared health', () => {
  it('puts a PSP whose errors rise out of first place within 7 of its payments, then lets one payment probe it back', async () => {
    const provider = psp('failing');
    for (let i = 0; i < 30; i++) await recordOutcome(sql, { provider, segment: visaEur, outcome: 'approved', firstAttempt: true });
    let outAfter = 0;
    for (let i = 1; i <= 20 && outAfter === 0; i++) {
      const result = await recordOutcome(sql, { provider, segment: visaEur, outcome: 'error', firstAttempt: true });
      if (result.eliminatedUntil) outAfter = i;
    }
    expect(outAfter).toBeGreaterThan(0);
    expect(outAfter).toBeLessThanOrEqual(7);
    // Another connection (another worker) sees it at once.
    const other = createSql(await fileDatabaseUrl(), { max: 1 });
    try {
      const seen = await readEstimates(other, { scope: POOLED_SCOPE, providers: [provider], segment: visaEur });
      expect(seen.health[provider]).toMatchObject({ state: 'open', probing: false });
      expect(seen.health[provider]!.reason).toMatch(/errors in its last/);
    } finally {
      await other.end();
    }
    expect(await takeProbe(sql, provider)).toBe(false); // open: no probe yet
    // The elimination's time passes (moved back rather than waited for).
    await sql`UPDATE routing_health SET eliminated_until = now() - interval '1 second' WHERE provider = ${provider}`;
    expect((await readEstimates(sql, { scope: POOLED_SCOPE, providers: [provider], segment: visaEur })).health[provider]!.state).toBe('half_open');
    expect(await takeProbe(sql, provider)).toBe(true);
    expect(await takeProbe(sql, provider)).toBe(false); // one probe at a time
    // The probe fails: out again.
    expect((await recordOutcome(sql, { provider, segment: visaEur, outcome: 'error', firstAttempt: true })).eliminatedUntil).not.toBeNull();
    await sql`UPDATE routing_health SET eliminated_until = now() - interval '1 second' WHERE provider = ${provider}`;
    expect(await takeProbe(sql, provider)).toBe(true);
    // The probe succeeds: back in.
    expect((await recordOutcome(sql, { provider, segment: visaEur, outcome: 'approved', firstAttempt: true })).eliminatedUntil).toBeNull();
    expect((await readEstimates(sql, { scope: POOLED_SCOPE, providers: [provider], segment: visaEur })).health[provider]).toMatchObject({ state: 'closed', reason: null });
  });

  it('never eliminates for declines, which are the PSP working', async () => {
    const provider = psp('declining');
    for (let i = 0; i < 40; i++) expect((await recordOutcome(sql, { provider, segment: visaEur, outcome: 'declined', firstAttempt: true })).eliminatedUntil).toBeNull();
  });

  it('names a PSP whose approvals fell in the segment for the elimination time', async () => {
    const provider = psp('falling');
    const random = seeded(7);
    let fellAt = -1;
    for (let i = 0; i < 400 && fellAt < 0; i++) {
      const approved = random() < (i < 300 ? 0.92 : 0.3);
      if ((await recordOutcome(sql, { provider, segment: visaEur, outcome: approved ? 'approved' : 'declined', firstAttempt: true })).fell) fellAt = i;
    }
    expect(fellAt).toBeGreaterThanOrEqual(300);
    expect(fellAt - 300).toBeLessThan(20 * 2);
    const estimates = await readEstimates(sql, { scope: POOLED_SCOPE, providers: [provider], segment: visaEur });
    expect(estimates.fell[provider]).toBeDefined();
    const later = await readEstimates(sql, { scope: POOLED_SCOPE, providers: [provider], segment: visaEur, health: { ...HEALTH_DEFAULTS, eliminateMs: 0 } });
    expect(later.fell[provider]).toBeUndefined();
  });
});

describe('routing store: the shared call limit', () => {
  it('holds a PSP to its calls per second across many connections at once', async () => {
    const provider = psp('limited');
    const limit = { perSecond: 5, burst: 10 };
    const url = await fileDatabaseUrl();
    const clients = Array.from({ length: 8 }, () => createSql(url, { max: 1 }));
    try {
      const started = await sql<{ t: Date }[]>`SELECT clock_timestamp() AS t`;
      // 8 connections, 25 calls each, as fast as they can.
      const permits = await Promise.all(clients.map(async (client) => {
        const got = [];
        for (let i = 0; i < 25; i++) got.push(await takeCall(client, provider, limit));
        return got;
      }));
      const ended = await sql<{ t: Date }[]>`SELECT clock_timestamp() AS t`;
      const seconds = (ended[0]!.t.getTime() - started[0]!.t.getTime()) / 1000;
      const allowed = permits.flat().filter((p) => p.allowed).length;
      // The burst, plus what refilled while they ran; never more.
      expect(allowed).toBeLessThanOrEqual(limit.burst + Math.ceil(seconds * limit.perSecond));
      expect(allowed).toBeGreaterThanOrEqual(limit.burst);
      const refused = permits.flat().filter((p) => !p.allowed);
      expect(refused.length).toBe(200 - allowed);
      for (const p of refused) expect(p.allowed === false && p.waitMs > 0 && p.waitMs <= 200).toBe(true);
    } finally {
      await Promise.all(clients.map((c) => c.end()));
    }
  });
});
