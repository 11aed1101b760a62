import { randomBytes } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest';
import { SandboxProvider } from '../../provider/sandbox/client';
import type { CreateChargeRequest } from '../../provider/types';
import { startSandbox, type RunningSandbox } from '../../sandbox/server';
import { eventually } from '../helpers/eventually';

/**
 * SANDBOX_IDEMPOTENCY_KEY_TTL_SECONDS: the sandbox forgets a key after N seconds, as Stripe
 * does after 24 hours, so that an orchestrator retrying without looking the operation up
 * first would charge twice (the chaos run relies on it). Without the setting it never forgets.
 */

const ttlSeconds = 1;
let forgetful: RunningSandbox;
let remembering: RunningSandbox;

beforeAll(async () => {
  forgetful = await startSandbox({ databaseUrl: inject('databaseUrl'), port: 0, idempotencyKeyTtlSeconds: ttlSeconds });
  remembering = await startSandbox({ databaseUrl: inject('databaseUrl'), port: 0 });
});
afterAll(async () => {
  await forgetful?.close();
  await remembering?.close();
});

const unique = (prefix: string) => `${prefix}_${randomBytes(6).toString('hex')}`;

/**
 * Sends `send` again until its answer is no longer the replay of `first` (the sandbox reports
 * the key expired by charging or refunding anew), and returns that new object. Until then each
 * try is a replay, which changes nothing.
 */
const untilForgotten = <T extends { id: string }>(first: T, send: () => Promise<T>) =>
  eventually(async () => {
    const answer = await send();
    return answer.id !== first.id && answer;
  }, 10_000, 100, 'the key reported expired');

function chargeRequest(): CreateChargeRequest {
  return { idempotencyKey: unique('key'), amountMinor: 5_000, currency: 'EUR', paymentMethod: 'pm_card_visa', capture: true, reference: unique('pay'), description: null };
}

async function listed(baseUrl: string, query: string): Promise<{ id: string }[]> {
  const response = await fetch(`${baseUrl}${query}`);
  expect(response.status).toBe(200);
  return ((await response.json()) as { data: { id: string }[] }).data;
}

describe('sandbox idempotency key expiry', () => {
  it('replays a charge while its key lives, charges again once it expired; the lookup by key finds the first charge', async () => {
    const provider = new SandboxProvider({ baseUrl: forgetful.url, timeoutMs: 5_000 });
    const request = chargeRequest();
    const sent = Date.now();
    const first = await provider.createCharge(request);
    expect((await provider.createCharge(request)).id).toBe(first.id);

    const second = await untilForgotten(first, () => provider.createCharge(request));
    // Both charges stay listed under the key and the reference: a double charge is visible.
    expect((await listed(forgetful.url, `/v1/charges?idempotency_key=${request.idempotencyKey}`)).map((c) => c.id)).toEqual([first.id, second.id]);
    // Not forgotten before the TTL: the key was made after `sent`, the second charge before now.
    expect(Date.now() - sent).toBeGreaterThanOrEqual(ttlSeconds * 1000);
    expect(await listed(forgetful.url, `/v1/charges?reference=${request.reference}`)).toHaveLength(2);
    expect((await provider.findChargeByIdempotencyKey(request.idempotencyKey))?.id).toBe(first.id);
  });

  it('refunds again under an expired key; a live key still replays the refund', async () => {
    const provider = new SandboxProvider({ baseUrl: forgetful.url, timeoutMs: 5_000 });
    const charge = await provider.createCharge(chargeRequest());
    const refund = { idempotencyKey: unique('rkey'), chargeId: charge.id, amountMinor: 1_000, reference: unique('re') };
    const sent = Date.now();
    const first = await provider.createRefund(refund);
    expect((await provider.createRefund(refund)).id).toBe(first.id);
    const second = await untilForgotten(first, () => provider.createRefund(refund));
    expect((await provider.findRefundByIdempotencyKey(refund.idempotencyKey))?.id).toBe(first.id);
    expect(Date.now() - sent).toBeGreaterThanOrEqual(ttlSeconds * 1000);
    expect((await listed(forgetful.url, `/v1/refunds?charge=${charge.id}`)).map((r) => r.id).sort()).toEqual([first.id, second.id].sort());
  });

  it('without the setting, a key is remembered past that time', async () => {
    const provider = new SandboxProvider({ baseUrl: remembering.url, timeoutMs: 5_000 });
    const request = chargeRequest();
    const first = await provider.createCharge(request);
    // A key made just after it at the forgetful sandbox (same database, same clock) expiring
    // there shows the TTL has passed for this one too.
    const forgetfulProvider = new SandboxProvider({ baseUrl: forgetful.url, timeoutMs: 5_000 });
    const witness = chargeRequest();
    await untilForgotten(await forgetfulProvider.createCharge(witness), () => forgetfulProvider.createCharge(witness));
    expect((await provider.createCharge(request)).id).toBe(first.id);
    expect(await listed(remembering.url, `/v1/charges?reference=${request.reference}`)).toHaveLength(1);
  });
});
