import { randomBytes } from 'node:crypto';
import { MockActivityEnvironment } from '@temporalio/testing';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createSql, type Sql } from '../../db/connect';
import { takeCall, type CallLimit } from '../../db/routing';
import { callLimitedProvider, callLimitedRegistry, ProviderCallDeferredError } from '../../lib/provider-limits';
import { providerRegistry } from '../../provider/registry';
import type { PaymentProvider, ProviderCharge } from '../../provider/types';
import { fileDatabaseUrl } from '../helpers/database';

/**
 * The rate limit's wrapper (lib/provider-limits.ts) over a fake PSP that records when each call
 * reached it, taking its tokens from the shared bucket in real PostgreSQL (db/routing.ts
 * takeCall): in a regular activity it waits (heartbeating), in a local one it waits a short
 * time and then defers the call, outside an activity (the API) it waits.
 */

let sql: Sql;
beforeAll(async () => {
  sql = createSql(await fileDatabaseUrl(), { max: 10 });
});
afterAll(async () => sql?.end());

const name = () => `psp-${randomBytes(4).toString('hex')}`;

function fakePsp() {
  const calls: { call: string; at: number }[] = [];
  const charge = { id: 'ch_1', status: 'succeeded' } as ProviderCharge;
  const record = (call: string) => async () => (calls.push({ call, at: Date.now() }), charge);
  const provider = {
    createCharge: record('createCharge'),
    findChargeByIdempotencyKey: record('findChargeByIdempotencyKey'),
    retrieveCharge: record('retrieveCharge'),
    verifyWebhook: () => ({ id: 'evt_1' }),
    disputes: { retrieveDispute: record('retrieveDispute') },
  } as unknown as PaymentProvider;
  return { provider, calls };
}

const request = { idempotencyKey: 'k', amountMinor: 100, currency: 'EUR', paymentMethod: 'pm_card_visa', capture: true, reference: 'pay_1' };

describe('callLimitedProvider', () => {
  it('in a regular activity, calls over the limit wait for their tokens, heartbeating, and all go through', async () => {
    const psp = name();
    const limit: CallLimit = { perSecond: 5, burst: 2 };
    const { provider, calls } = fakePsp();
    const limited = callLimitedProvider(provider, psp, (p) => takeCall(sql, p, limit));
    const env = new MockActivityEnvironment({ isLocal: false });
    let beats = 0;
    env.on('heartbeat', () => (beats += 1));
    const started = Date.now();
    const answers: ProviderCharge[] = await env.run(() => Promise.all(Array.from({ length: 8 }, () => limited.createCharge(request))));
    expect(answers.map((a) => a.id)).toEqual(Array(8).fill('ch_1'));
    expect(calls).toHaveLength(8);
    const times = calls.map((c) => c.at - started).sort((a, b) => a - b);
    // The burst at once, then one every 200 ms: the 8th no sooner than 6 tokens × 200 ms.
    expect(times[1]!).toBeLessThan(500);
    expect(times[7]!).toBeGreaterThanOrEqual(1100);
    // No 1 s window held more than burst + rate calls.
    for (const start of times) expect(times.filter((t) => t >= start && t < start + 1000).length).toBeLessThanOrEqual(limit.burst + limit.perSecond);
    expect(beats).toBeGreaterThanOrEqual(6);
  });

  it('in a local activity, a call that would wait past the bound is deferred, nothing sent', async () => {
    const psp = name();
    const limit: CallLimit = { perSecond: 0.5, burst: 1 };
    const { provider, calls } = fakePsp();
    const limited = callLimitedProvider(provider, psp, (p) => takeCall(sql, p, limit), { localWaitMs: 300 });
    const local = new MockActivityEnvironment({ isLocal: true });
    const first: ProviderCharge = await local.run(() => limited.createCharge(request));
    expect(first.id).toBe('ch_1');
    // The next token comes in 2 s: past the local bound.
    const deferred = await local.run(() => limited.createCharge(request)).catch((error: unknown) => error);
    expect(deferred).toBeInstanceOf(ProviderCallDeferredError);
    expect(calls).toHaveLength(1);
  });

  it('limits lookups and dispute calls too, and never the local verification of a webhook', async () => {
    const psp = name();
    const { provider, calls } = fakePsp();
    const taken: string[] = [];
    const limited = callLimitedProvider(provider, psp, async (p) => (taken.push(p), { allowed: true }));
    await limited.findChargeByIdempotencyKey('k');
    await limited.retrieveCharge('ch_1');
    await limited.disputes!.retrieveDispute('dp_1');
    limited.verifyWebhook('{}', {});
    expect(calls.map((c) => c.call)).toEqual(['findChargeByIdempotencyKey', 'retrieveCharge', 'retrieveDispute']);
    expect(taken).toEqual([psp, psp, psp]);
  });

  it('outside an activity (the API) waits for its token', async () => {
    const psp = name();
    const limit: CallLimit = { perSecond: 10, burst: 1 };
    const { provider, calls } = fakePsp();
    const limited = callLimitedProvider(provider, psp, (p) => takeCall(sql, p, limit));
    const started = Date.now();
    await Promise.all([limited.retrieveCharge('ch_1'), limited.retrieveCharge('ch_1'), limited.retrieveCharge('ch_1')]);
    expect(calls).toHaveLength(3);
    expect(Math.max(...calls.map((c) => c.at)) - started).toBeGreaterThanOrEqual(180);
  });
});

describe('callLimitedRegistry', () => {
  it('wraps only the PSPs PROVIDER_RATE_LIMITS names; the others take no token', async () => {
    const a = fakePsp();
    const b = fakePsp();
    const taken: string[] = [];
    const registry = callLimitedRegistry(providerRegistry({ 'psp-a': a.provider, 'psp-b': b.provider }), ['psp-a'], async (p) => (taken.push(p), { allowed: true }));
    expect(registry.names).toEqual(['psp-a', 'psp-b']);
    expect(registry.get('psp-b')).toBe(b.provider);
    await registry.get('psp-a').retrieveCharge('ch_1');
    await registry.get('psp-b').retrieveCharge('ch_1');
    expect(taken).toEqual(['psp-a']);
    const unlimited = providerRegistry({ 'psp-a': a.provider });
    expect(callLimitedRegistry(unlimited, [], async () => ({ allowed: true }))).toBe(unlimited);
  });
});
