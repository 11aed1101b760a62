import { randomBytes } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { SandboxProvider } from '../../provider/sandbox/client';
import {
  ProviderRejectedError,
  ProviderUnavailableError,
  type CreateChargeRequest,
} from '../../provider/types';
import { startSandbox, type RunningSandbox } from '../../sandbox/server';
import { chargeRequest, unique } from '../helpers/charge-request';
import { fileDatabaseUrl } from '../helpers/database';
import { eventually } from '../helpers/stack';

/**
 * The provider sandbox as the orchestrator sees it (through SandboxProvider) and as a
 * test counts it (raw HTTP). Every test uses its own reference and keys: the database is
 * shared by the whole run.
 */

const slowMs = 300;
const flakyFailures = 2;

let sandbox: RunningSandbox;
let provider: SandboxProvider;

beforeAll(async () => {
  sandbox = await startSandbox({ databaseUrl: await fileDatabaseUrl(), port: 0, slowMs, flakyFailures });
  provider = new SandboxProvider({ baseUrl: sandbox.url, timeoutMs: 5_000 });
});

afterAll(async () => {
  await sandbox?.close();
});



interface RawResponse {
  status: number;
  text: string;
  json: any;
}

async function raw(
  method: 'GET' | 'POST',
  path: string,
  options: { body?: unknown; rawBody?: string; key?: string; baseUrl?: string } = {},
): Promise<RawResponse> {
  const headers: Record<string, string> = { 'Content-Type': 'application/json' };
  if (options.key !== undefined) headers['Idempotency-Key'] = options.key;
  const response = await fetch(`${options.baseUrl ?? sandbox.url}${path}`, {
    method,
    headers,
    body: options.rawBody ?? (options.body === undefined ? undefined : JSON.stringify(options.body)),
  });
  const text = await response.text();
  return { status: response.status, text, json: JSON.parse(text) };
}

function rawChargeBody(request: CreateChargeRequest) {
  return {
    amount_minor: request.amountMinor,
    currency: request.currency,
    payment_method: request.paymentMethod,
    capture: request.capture,
    reference: request.reference,
  };
}

/** Every charge the sandbox ever committed for one payment, declined ones included. */
async function chargesFor(reference: string, baseUrl?: string): Promise<any[]> {
  const response = await raw('GET', `/v1/charges?reference=${encodeURIComponent(reference)}`, { baseUrl });
  expect(response.status).toBe(200);
  expect(response.json.object).toBe('list');
  return response.json.data;
}

async function rejection(promise: Promise<unknown>): Promise<unknown> {
  return promise.then(
    () => {
      throw new Error('expected the call to fail');
    },
    (error: unknown) => error,
  );
}

async function expectRejected(promise: Promise<unknown>, status: number, code: string) {
  const error = await rejection(promise);
  expect(error).toBeInstanceOf(ProviderRejectedError);
  expect(error).toMatchObject({ status, code });
}

async function expectUnavailable(promise: Promise<unknown>, status?: number) {
  const error = await rejection(promise);
  expect(error).toBeInstanceOf(ProviderUnavailableError);
  if (status !== undefined) expect((error as ProviderUnavailableError).status).toBe(status);
}

describe('charges: deterministic payment methods', () => {
  it('pm_card_visa with capture succeeds and is fully captured', async () => {
    const request = chargeRequest({ amountMinor: 1_999 });
    const charge = await provider.createCharge(request);
    expect(charge).toMatchObject({
      status: 'succeeded',
      amountMinor: 1_999,
      amountCapturedMinor: 1_999,
      amountRefundedMinor: 0,
      currency: 'EUR',
      declineCode: null,
    });
    expect(charge.id).toMatch(/^ch_/);
    expect((await chargesFor(request.reference)).map((c) => c.id)).toEqual([charge.id]);
  });

  it('pm_card_visa without capture is only authorized', async () => {
    const charge = await provider.createCharge(chargeRequest({ capture: false }));
    expect(charge).toMatchObject({ status: 'requires_capture', amountMinor: 2_500, amountCapturedMinor: 0 });
  });

  it('declines are results with their codes, answered 402 and recorded like any charge', async () => {
    const reference = unique('pay');
    const declined = await provider.createCharge(chargeRequest({ reference, paymentMethod: 'pm_card_declined' }));
    expect(declined).toMatchObject({ status: 'declined', declineCode: 'card_declined', amountCapturedMinor: 0 });
    expect(declined.declineMessage).toEqual(expect.any(String));

    const insufficient = await provider.createCharge(
      chargeRequest({ reference, paymentMethod: 'pm_card_insufficient_funds' }),
    );
    expect(insufficient).toMatchObject({ status: 'declined', declineCode: 'insufficient_funds' });

    const rawDecline = await raw('POST', '/v1/charges', {
      key: unique('key'),
      body: rawChargeBody(chargeRequest({ reference, paymentMethod: 'pm_card_declined' })),
    });
    expect(rawDecline.status).toBe(402);
    expect(rawDecline.json.error).toMatchObject({
      type: 'card_error',
      code: 'card_declined',
      message: expect.any(String),
      charge: { object: 'charge', status: 'declined', failure_code: 'card_declined', reference },
    });

    const counted = await chargesFor(reference);
    expect(counted.map((c) => c.status)).toEqual(['declined', 'declined', 'declined']);
  });

  it('an unknown pm_ method is refused and commits nothing', async () => {
    const request = chargeRequest({ paymentMethod: 'pm_card_unheard_of' });
    await expectRejected(provider.createCharge(request), 400, 'invalid_payment_method');
    expect(await chargesFor(request.reference)).toEqual([]);
  });

  it('pm_card_slow answers after the configured delay with a normal charge', async () => {
    const started = Date.now();
    const charge = await provider.createCharge(chargeRequest({ paymentMethod: 'pm_card_slow' }));
    expect(charge.status).toBe('succeeded');
    expect(Date.now() - started).toBeGreaterThanOrEqual(slowMs - 20);
  });

  it('a client that gives up on pm_card_slow still finds the charge committed, and the retry replays it', async () => {
    const impatient = new SandboxProvider({ baseUrl: sandbox.url, timeoutMs: 50 });
    const request = chargeRequest({ paymentMethod: 'pm_card_slow' });
    await expectUnavailable(impatient.createCharge(request));
    await expect.poll(() => provider.findChargeByIdempotencyKey(request.idempotencyKey), { timeout: 5_000 }).not.toBeNull();
    const found = await provider.findChargeByIdempotencyKey(request.idempotencyKey);
    const retried = await provider.createCharge(request);
    expect(retried.id).toBe(found!.id);
    expect(await chargesFor(request.reference)).toHaveLength(1);
  });
});

describe('idempotency: one key, one effect', () => {
  it('the same key twice returns the same charge, byte for byte, and charges once', async () => {
    const request = chargeRequest();
    const first = await provider.createCharge(request);
    const second = await provider.createCharge(request);
    expect(second).toEqual(first);

    const rawFirst = await raw('POST', '/v1/charges', { key: request.idempotencyKey, body: rawChargeBody(request) });
    // Same parameters in another key order and spacing are the same request.
    const rawSecond = await raw('POST', '/v1/charges', {
      key: request.idempotencyKey,
      rawBody: `{ "reference": "${request.reference}", "capture": true, "payment_method": "pm_card_visa", "currency": "EUR", "amount_minor": 2500 }`,
    });
    expect(rawFirst.status).toBe(200);
    expect(rawSecond.status).toBe(200);
    expect(rawSecond.text).toBe(rawFirst.text);
    expect(rawFirst.json.id).toBe(first.id);
    expect(await chargesFor(request.reference)).toHaveLength(1);
  });

  it('a replayed decline is the same 402 with the same declined charge', async () => {
    const request = chargeRequest({ paymentMethod: 'pm_card_insufficient_funds' });
    const first = await raw('POST', '/v1/charges', { key: request.idempotencyKey, body: rawChargeBody(request) });
    const second = await raw('POST', '/v1/charges', { key: request.idempotencyKey, body: rawChargeBody(request) });
    expect(first.status).toBe(402);
    expect(second.status).toBe(402);
    expect(second.text).toBe(first.text);
    expect(await chargesFor(request.reference)).toHaveLength(1);
  });

  it('the same key with different parameters is refused and charges nothing more', async () => {
    const request = chargeRequest();
    const first = await provider.createCharge(request);
    await expectRejected(provider.createCharge({ ...request, amountMinor: request.amountMinor + 1 }), 400, 'idempotency_key_reused');

    const rawReuse = await raw('POST', '/v1/charges', {
      key: request.idempotencyKey,
      body: { ...rawChargeBody(request), capture: false },
    });
    expect(rawReuse.status).toBe(400);
    expect(rawReuse.json.error).toMatchObject({ type: 'idempotency_error', code: 'idempotency_key_reused' });
    expect((await chargesFor(request.reference)).map((c) => c.id)).toEqual([first.id]);
  });

  it('20 concurrent creates with one key make exactly one charge and all see it', async () => {
    // pm_card_slow holds every request past the stored-response check for slowMs, so all
    // 20 reach the claim together and the unique key alone must arbitrate.
    const request = chargeRequest({ paymentMethod: 'pm_card_slow' });
    const results = await Promise.all(Array.from({ length: 20 }, () => provider.createCharge(request)));
    const ids = new Set(results.map((charge) => charge.id));
    expect(ids.size).toBe(1);
    expect(await chargesFor(request.reference)).toHaveLength(1);
  });

  it('20 concurrent raw creates with one key all get the identical response', async () => {
    const request = chargeRequest({ paymentMethod: 'pm_card_declined' });
    const responses = await Promise.all(
      Array.from({ length: 20 }, () => raw('POST', '/v1/charges', { key: request.idempotencyKey, body: rawChargeBody(request) })),
    );
    expect(new Set(responses.map((r) => `${r.status} ${r.text}`)).size).toBe(1);
    expect(responses[0]!.status).toBe(402);
    expect(await chargesFor(request.reference)).toHaveLength(1);
  });

  it('keys are scoped per endpoint: a capture key may equal the charge key', async () => {
    const request = chargeRequest({ capture: false });
    const charge = await provider.createCharge(request);
    const captured = await provider.captureCharge({ idempotencyKey: request.idempotencyKey, chargeId: charge.id });
    expect(captured.status).toBe('succeeded');
  });
});

describe('lost response: pm_card_timeout_after_charge', () => {
  it('commits the charge but never answers; the retry hangs too; the lookup finds the charge', async () => {
    const timeoutMs = 300;
    const impatient = new SandboxProvider({ baseUrl: sandbox.url, timeoutMs });
    const request = chargeRequest({ paymentMethod: 'pm_card_timeout_after_charge' });

    const started = Date.now();
    await expectUnavailable(impatient.createCharge(request));
    expect(Date.now() - started).toBeGreaterThanOrEqual(timeoutMs - 20);

    await expectUnavailable(impatient.createCharge(request));

    const found = await provider.findChargeByIdempotencyKey(request.idempotencyKey);
    expect(found).toMatchObject({ status: 'succeeded', amountMinor: request.amountMinor, amountCapturedMinor: request.amountMinor });
    const counted = await chargesFor(request.reference);
    expect(counted.map((c) => c.id)).toEqual([found!.id]);
  });

  it("the caller's own abort signal ends the wait as well", async () => {
    const request = chargeRequest({ paymentMethod: 'pm_card_timeout_after_charge' });
    // 1 s: long enough for the request to reach the sandbox on a loaded machine (100 ms once aborted it before).
    await expectUnavailable(provider.createCharge(request, { signal: AbortSignal.timeout(1000) }));
    expect(await eventually(() => provider.findChargeByIdempotencyKey(request.idempotencyKey), 10_000)).not.toBeNull();
  });

  it('a lookup of a key that never committed is null', async () => {
    expect(await provider.findChargeByIdempotencyKey(unique('never'))).toBeNull();
    expect(await provider.findRefundByIdempotencyKey(unique('never'))).toBeNull();
  });
});

describe('fault injection: pm_card_flaky', () => {
  it('fails the first attempts of a key with 503, then charges once', async () => {
    const request = chargeRequest({ paymentMethod: 'pm_card_flaky' });
    for (let attempt = 1; attempt <= flakyFailures; attempt++) {
      await expectUnavailable(provider.createCharge(request), 503);
      expect(await provider.findChargeByIdempotencyKey(request.idempotencyKey)).toBeNull();
    }
    const charge = await provider.createCharge(request);
    expect(charge.status).toBe('succeeded');
    // Replays are answered from the stored response, never flaky again.
    expect((await provider.createCharge(request)).id).toBe(charge.id);
    expect(await chargesFor(request.reference)).toHaveLength(1);
  });

  it('counts attempts per key: a fresh key starts failing again', async () => {
    const reference = unique('pay');
    await expectUnavailable(provider.createCharge(chargeRequest({ reference, paymentMethod: 'pm_card_flaky' })), 503);
    await expectUnavailable(provider.createCharge(chargeRequest({ reference, paymentMethod: 'pm_card_flaky' })), 503);
    expect(await chargesFor(reference)).toEqual([]);
  });
});

describe('capture and void', () => {
  it('captures the whole authorization, once', async () => {
    const charge = await provider.createCharge(chargeRequest({ capture: false, amountMinor: 5_000 }));
    const key = unique('cap');
    const captured = await provider.captureCharge({ idempotencyKey: key, chargeId: charge.id });
    expect(captured).toMatchObject({ id: charge.id, status: 'succeeded', amountMinor: 5_000, amountCapturedMinor: 5_000 });
    expect(await provider.captureCharge({ idempotencyKey: key, chargeId: charge.id })).toEqual(captured);
    await expectRejected(provider.captureCharge({ idempotencyKey: unique('cap'), chargeId: charge.id }), 400, 'invalid_state');
  });

  it('a partial capture releases the rest of the authorization', async () => {
    const charge = await provider.createCharge(chargeRequest({ capture: false, amountMinor: 5_000 }));
    const captured = await provider.captureCharge({ idempotencyKey: unique('cap'), chargeId: charge.id, amountMinor: 3_000 });
    expect(captured).toMatchObject({ status: 'succeeded', amountMinor: 5_000, amountCapturedMinor: 3_000 });
    await expectRejected(
      provider.captureCharge({ idempotencyKey: unique('cap'), chargeId: charge.id, amountMinor: 2_000 }),
      400,
      'invalid_state',
    );
    await expectRejected(
      provider.createRefund({ idempotencyKey: unique('ref'), chargeId: charge.id, amountMinor: 3_001, reference: unique('refund') }),
      400,
      'amount_too_large',
    );
  });

  it('cannot capture more than was authorized', async () => {
    const charge = await provider.createCharge(chargeRequest({ capture: false, amountMinor: 5_000 }));
    await expectRejected(
      provider.captureCharge({ idempotencyKey: unique('cap'), chargeId: charge.id, amountMinor: 5_001 }),
      400,
      'amount_too_large',
    );
    expect((await raw('GET', `/v1/charges/${charge.id}`)).json.status).toBe('requires_capture');
  });

  it('voids only an uncaptured authorization', async () => {
    const authorized = await provider.createCharge(chargeRequest({ capture: false }));
    const key = unique('void');
    const voided = await provider.voidCharge({ idempotencyKey: key, chargeId: authorized.id });
    expect(voided).toMatchObject({ id: authorized.id, status: 'canceled', amountCapturedMinor: 0 });
    expect(await provider.voidCharge({ idempotencyKey: key, chargeId: authorized.id })).toEqual(voided);
    await expectRejected(provider.captureCharge({ idempotencyKey: unique('cap'), chargeId: authorized.id }), 400, 'invalid_state');

    const captured = await provider.createCharge(chargeRequest({ capture: true }));
    await expectRejected(provider.voidCharge({ idempotencyKey: unique('void'), chargeId: captured.id }), 400, 'invalid_state');
    const declined = await provider.createCharge(chargeRequest({ paymentMethod: 'pm_card_declined' }));
    await expectRejected(provider.voidCharge({ idempotencyKey: unique('void'), chargeId: declined.id }), 400, 'invalid_state');
  });

  it('an unknown charge is a 404', async () => {
    await expectRejected(provider.captureCharge({ idempotencyKey: unique('cap'), chargeId: 'ch_missing' }), 404, 'resource_missing');
    await expectRejected(provider.voidCharge({ idempotencyKey: unique('void'), chargeId: 'ch_missing' }), 404, 'resource_missing');
  });
});

describe('refunds', () => {
  it('partial refunds add up to the captured amount and never beyond', async () => {
    const charge = await provider.createCharge(chargeRequest({ amountMinor: 10_000 }));
    const refund = (amountMinor: number, idempotencyKey = unique('ref')) =>
      provider.createRefund({ idempotencyKey, chargeId: charge.id, amountMinor, reference: `refund_${idempotencyKey}` });

    const keyA = unique('ref');
    const first = await refund(3_000, keyA);
    expect(first).toMatchObject({ chargeId: charge.id, status: 'succeeded', amountMinor: 3_000, failureCode: null });
    expect(first.id).toMatch(/^re_/);
    expect(await refund(3_000, keyA)).toEqual(first);

    await refund(5_000);
    await expectRejected(refund(2_001), 400, 'amount_too_large');
    await refund(2_000);
    await expectRejected(refund(1), 400, 'amount_too_large');

    const after = await raw('GET', `/v1/charges/${charge.id}`);
    expect(after.json).toMatchObject({ amount_captured_minor: 10_000, amount_refunded_minor: 10_000 });
    const listed = await raw('GET', `/v1/refunds?charge=${charge.id}`);
    expect(listed.json.data.map((r: any) => r.amount_minor)).toEqual([3_000, 5_000, 2_000]);
    expect(await provider.findRefundByIdempotencyKey(keyA)).toEqual(first);
  });

  it('concurrent refunds racing for the same balance never over-refund', async () => {
    const charge = await provider.createCharge(chargeRequest({ amountMinor: 10_000 }));
    const outcomes = await Promise.allSettled(
      Array.from({ length: 10 }, () =>
        provider.createRefund({ idempotencyKey: unique('ref'), chargeId: charge.id, amountMinor: 1_500, reference: unique('refund') }),
      ),
    );
    expect(outcomes.filter((o) => o.status === 'fulfilled')).toHaveLength(6);
    for (const o of outcomes.filter((o) => o.status === 'rejected')) {
      expect((o as PromiseRejectedResult).reason).toMatchObject({ code: 'amount_too_large' });
    }
    expect((await raw('GET', `/v1/charges/${charge.id}`)).json.amount_refunded_minor).toBe(9_000);
  });

  it('refuses to refund an uncaptured or declined charge', async () => {
    const authorized = await provider.createCharge(chargeRequest({ capture: false }));
    const declined = await provider.createCharge(chargeRequest({ paymentMethod: 'pm_card_declined' }));
    for (const charge of [authorized, declined]) {
      await expectRejected(
        provider.createRefund({ idempotencyKey: unique('ref'), chargeId: charge.id, amountMinor: 100, reference: unique('refund') }),
        400,
        'invalid_state',
      );
    }
    await expectRejected(
      provider.createRefund({ idempotencyKey: unique('ref'), chargeId: 'ch_missing', amountMinor: 100, reference: unique('refund') }),
      404,
      'resource_missing',
    );
  });

  it('a refund the provider cannot send is a failed result that moves no money', async () => {
    const charge = await provider.createCharge(chargeRequest({ paymentMethod: 'pm_card_refund_fails' }));
    const refund = await provider.createRefund({
      idempotencyKey: unique('ref'),
      chargeId: charge.id,
      amountMinor: 1_000,
      reference: unique('refund'),
    });
    expect(refund).toMatchObject({ status: 'failed', failureCode: 'expired_or_canceled_card' });
    expect((await raw('GET', `/v1/charges/${charge.id}`)).json.amount_refunded_minor).toBe(0);
  });
});

describe('durability: state survives a sandbox restart', () => {
  it('a new sandbox process on the same database still has the charge and replays its response', async () => {
    const databaseUrl = await fileDatabaseUrl();
    const first = await startSandbox({ databaseUrl, port: 0, slowMs, flakyFailures });
    const request = chargeRequest({ capture: false });
    const flakyRequest = chargeRequest({ paymentMethod: 'pm_card_flaky' });
    let original: RawResponse;
    try {
      original = await raw('POST', '/v1/charges', { baseUrl: first.url, key: request.idempotencyKey, body: rawChargeBody(request) });
      expect(original.status).toBe(200);
      const flaky = await raw('POST', '/v1/charges', { baseUrl: first.url, key: flakyRequest.idempotencyKey, body: rawChargeBody(flakyRequest) });
      expect(flaky.status).toBe(503);
    } finally {
      await first.close();
    }

    const second = await startSandbox({ databaseUrl, port: 0, slowMs, flakyFailures });
    try {
      expect(second.url).not.toBe(first.url);
      const fetched = await raw('GET', `/v1/charges/${original.json.id}`, { baseUrl: second.url });
      expect(fetched.json).toEqual(original.json);
      const replay = await raw('POST', '/v1/charges', { baseUrl: second.url, key: request.idempotencyKey, body: rawChargeBody(request) });
      expect(replay.status).toBe(200);
      expect(replay.text).toBe(original.text);
      expect(await chargesFor(request.reference, second.url)).toHaveLength(1);

      // The flaky attempt made before the restart still counts: one more 503, then success.
      const again = await raw('POST', '/v1/charges', { baseUrl: second.url, key: flakyRequest.idempotencyKey, body: rawChargeBody(flakyRequest) });
      expect(again.status).toBe(503);
      const through = await raw('POST', '/v1/charges', { baseUrl: second.url, key: flakyRequest.idempotencyKey, body: rawChargeBody(flakyRequest) });
      expect(through.status).toBe(200);
    } finally {
      await second.close();
    }
  });
});

describe('bad input: 400 with the error shape, never a 500, and the key stays free', () => {
  const good = () => rawChargeBody(chargeRequest());
  const cases: { name: string; path: string; rawBody: string; code: string }[] = [
    { name: 'not JSON', path: '/v1/charges', rawBody: '{"amount_minor": ', code: 'invalid_json' },
    { name: 'a JSON array', path: '/v1/charges', rawBody: '[]', code: 'parameter_invalid' },
    { name: 'missing fields', path: '/v1/charges', rawBody: '{"amount_minor": 100}', code: 'parameter_invalid' },
    { name: 'amount as a string', path: '/v1/charges', rawBody: JSON.stringify({ ...good(), amount_minor: '100' }), code: 'parameter_invalid' },
    { name: 'a fractional amount', path: '/v1/charges', rawBody: JSON.stringify({ ...good(), amount_minor: 10.5 }), code: 'parameter_invalid' },
    { name: 'a negative amount', path: '/v1/charges', rawBody: JSON.stringify({ ...good(), amount_minor: -1 }), code: 'parameter_invalid' },
    { name: 'a four-letter currency', path: '/v1/charges', rawBody: JSON.stringify({ ...good(), currency: 'EURO' }), code: 'parameter_invalid' },
    { name: 'capture not a boolean', path: '/v1/charges', rawBody: JSON.stringify({ ...good(), capture: 'yes' }), code: 'parameter_invalid' },
    { name: 'an unknown parameter', path: '/v1/charges', rawBody: JSON.stringify({ ...good(), tip: 1 }), code: 'parameter_invalid' },
    { name: 'a zero capture amount', path: '/v1/charges/ch_x/capture', rawBody: '{"amount_minor": 0}', code: 'parameter_invalid' },
    { name: 'a void with parameters', path: '/v1/charges/ch_x/void', rawBody: '{"amount_minor": 1}', code: 'parameter_invalid' },
    { name: 'a refund without a charge', path: '/v1/refunds', rawBody: '{"amount_minor": 1, "reference": "r"}', code: 'parameter_invalid' },
  ];

  for (const { name, path, rawBody, code } of cases) {
    it(`POST ${path} with ${name}`, async () => {
      const response = await raw('POST', path, { key: unique('key'), rawBody });
      expect(response.status).toBe(400);
      expect(response.json).toEqual({
        error: { type: 'invalid_request_error', code, message: expect.any(String) },
      });
    });
  }

  it('a missing or malformed Idempotency-Key is refused', async () => {
    const missing = await raw('POST', '/v1/charges', { body: good() });
    expect(missing.status).toBe(400);
    expect(missing.json.error).toMatchObject({ type: 'invalid_request_error', code: 'idempotency_key_missing' });
    const spaced = await raw('POST', '/v1/charges', { key: 'has a space', body: good() });
    expect(spaced.status).toBe(400);
    expect(spaced.json.error).toMatchObject({ code: 'idempotency_key_invalid' });
    for (const path of ['/v1/charges/ch_x/capture', '/v1/charges/ch_x/void', '/v1/refunds']) {
      const response = await raw('POST', path, { body: {} });
      expect(response.json.error.code).toBe('idempotency_key_missing');
    }
  });

  it('a list without exactly one filter, and an unknown route, are errors too', async () => {
    for (const path of ['/v1/charges', '/v1/charges?reference=a&idempotency_key=b', '/v1/refunds']) {
      const response = await raw('GET', path);
      expect(response.status).toBe(400);
      expect(response.json.error).toMatchObject({ type: 'invalid_request_error', code: 'parameter_invalid' });
    }
    const unknown = await raw('GET', '/v2/nothing');
    expect(unknown.status).toBe(404);
    expect(unknown.json.error).toMatchObject({ type: 'invalid_request_error', code: 'route_not_found' });
  });

  it('a refused request does not claim its key: the corrected request goes through', async () => {
    const request = chargeRequest();
    const bad = await raw('POST', '/v1/charges', { key: request.idempotencyKey, body: { ...rawChargeBody(request), amount_minor: 0 } });
    expect(bad.status).toBe(400);
    const charge = await provider.createCharge(request);
    expect(charge.status).toBe('succeeded');
  });

  it('the health check answers', async () => {
    const response = await raw('GET', '/healthz');
    expect(response.status).toBe(200);
  });
});
