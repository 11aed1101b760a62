import { describe, expect, it } from 'vitest';
import { MockActivityEnvironment } from '@temporalio/testing';
import { ApplicationFailure } from '@temporalio/common';
import { createProviderSteps, type ChargeAttemptInput } from '../../activities/provider-steps';
import { knownProviderKinds, providerKind, providerRegistry } from '../../provider/registry';
import { databaseRefusalInterceptor } from '../../worker/database-refusals';
import { FailureType } from '../../shared/definitions';
import { providerSubKey } from '../../shared/keys';
import { ProviderRejectedError, ProviderUnavailableError, type PaymentProvider, type ProviderCharge, type ProviderRefund } from '../../provider/types';
import { charge as chargeOf, paymentInput } from '../helpers/workflow-worker';

/**
 * The provider steps' unknown-outcome paths, in milliseconds: each step runs in a
 * MockActivityEnvironment (attempt 1, or a retry) against a provider that records every call,
 * so the order "look up under the sub-key, then act" and the mapping of refusals are seen
 * call by call. The same paths against the real sandbox: test/faults/lost-response.test.ts.
 */

const paymentId = 'pay_01unknownoutcome00000000000';
const charge = (status: ProviderCharge['status']): ProviderCharge =>
  chargeOf(paymentId, { status, amountMinor: 1000, amountCapturedMinor: status === 'succeeded' ? 1000 : 0 });
const refund: ProviderRefund = { id: 're_p1', chargeId: 'ch_1', status: 'succeeded', amountMinor: 400, failureCode: null, failureMessage: null };

/** A provider that answers from `held` (what it already holds under a key) and records every call. */
function recordingProvider(held: { charge?: ProviderCharge; refund?: ProviderRefund } = {}, fail?: Error) {
  const calls: string[] = [];
  const answer = <T>(call: string, value: T): Promise<T> => {
    calls.push(call);
    return fail ? Promise.reject(fail) : Promise.resolve(value);
  };
  const provider = {
    findChargeByIdempotencyKey: async (key: string) => (calls.push(`find charge ${key}`), held.charge ?? null),
    findRefundByIdempotencyKey: async (key: string) => (calls.push(`find refund ${key}`), held.refund ?? null),
    createCharge: (request: { idempotencyKey: string }) => answer(`create charge ${request.idempotencyKey}`, charge('succeeded')),
    captureCharge: (request: { idempotencyKey: string }) => answer(`capture ${request.idempotencyKey}`, charge('succeeded')),
    voidCharge: (request: { idempotencyKey: string }) => answer(`void ${request.idempotencyKey}`, charge('canceled')),
    createRefund: (request: { idempotencyKey: string; currency?: string }) => answer(`refund ${request.idempotencyKey}${request.currency ? ` ${request.currency}` : ''}`, refund),
  } as unknown as PaymentProvider;
  return { provider, calls };
}

const chargeInput = { paymentId, amountMinor: 1000, currency: 'EUR', paymentMethod: 'pm_card_visa', capture: true, description: null };
/** Attempt 1 at the one configured PSP: nothing to fail over to. */
const attemptAtOnlyPsp = { ...chargeInput, attempt: 1, provider: 'sandbox', canFailOver: false };
const run = <A extends unknown[], R>(attempt: number, step: (...args: A) => Promise<R>, ...args: A) =>
  new MockActivityEnvironment({ attempt }).run(step, ...args) as Promise<R>;

describe('chargeAttempt at the only PSP: one charge under the attempt\'s sub-key, whatever the retries', () => {
  it('attempt 1 charges at once, under the charge sub-key', async () => {
    const { provider, calls } = recordingProvider();
    await run(1, createProviderSteps(provider).chargeAttempt, attemptAtOnlyPsp);
    expect(calls).toEqual([`create charge ${providerSubKey.charge(paymentId, 1)}`]);
  });

  it('a retry looks the charge up first and returns the one the lost answer made, charging nothing', async () => {
    const { provider, calls } = recordingProvider({ charge: charge('requires_capture') });
    const found = await run(2, createProviderSteps(provider).chargeAttempt, attemptAtOnlyPsp);
    expect(found).toMatchObject({ kind: 'charge', charge: { status: 'requires_capture' } });
    expect(calls).toEqual([`find charge ${providerSubKey.charge(paymentId, 1)}`]);
  });

  it('a retry that finds nothing charges under the same sub-key', async () => {
    const { provider, calls } = recordingProvider();
    await run(3, createProviderSteps(provider).chargeAttempt, attemptAtOnlyPsp);
    expect(calls).toEqual([`find charge ${providerSubKey.charge(paymentId, 1)}`, `create charge ${providerSubKey.charge(paymentId, 1)}`]);
  });
});

describe('a recovery retry whose step runs at or after the recovery’s end (sendBefore) sends nothing', () => {
  const past = () => Date.now() - 1;
  it('attempt 1 of the step: not_sent recovery_window_elapsed, no call at the PSP', async () => {
    const { provider, calls } = recordingProvider();
    const answer = await run(1, createProviderSteps(provider).chargeAttempt, { ...attemptAtOnlyPsp, sendBefore: past() });
    expect(answer).toMatchObject({ kind: 'not_charged', outcome: 'not_sent', errorCode: 'recovery_window_elapsed' });
    expect(calls).toEqual([]);
  });

  it('a retry of the step looks first: a charge the earlier try made is the answer; none found, nothing is sent', async () => {
    const held = recordingProvider({ charge: charge('succeeded') });
    expect(await run(2, createProviderSteps(held.provider).chargeAttempt, { ...attemptAtOnlyPsp, sendBefore: past() })).toMatchObject({ kind: 'charge', charge: { status: 'succeeded' } });
    const none = recordingProvider();
    expect(await run(2, createProviderSteps(none.provider).chargeAttempt, { ...attemptAtOnlyPsp, sendBefore: past() })).toMatchObject({ kind: 'not_charged', outcome: 'not_sent' });
    expect(none.calls).toEqual([`find charge ${providerSubKey.charge(paymentId, 1)}`]);
  });

  it('before the end, the step charges as any other', async () => {
    const { provider, calls } = recordingProvider();
    await run(1, createProviderSteps(provider).chargeAttempt, { ...attemptAtOnlyPsp, sendBefore: Date.now() + 60_000 });
    expect(calls).toEqual([`create charge ${providerSubKey.charge(paymentId, 1)}`]);
  });
});

describe('capture, void and refund retries act only if the lookup says it is not done', () => {
  it('capture: a succeeded charge is the answer; an authorization is captured under the capture sub-key', async () => {
    const done = recordingProvider({ charge: charge('succeeded') });
    await run(2, createProviderSteps(done.provider).captureCharge, { paymentId, chargeId: 'ch_1', amountMinor: 1000 });
    expect(done.calls).toEqual([`find charge ${providerSubKey.charge(paymentId)}`]);
    const open = recordingProvider({ charge: charge('requires_capture') });
    await run(2, createProviderSteps(open.provider).captureCharge, { paymentId, chargeId: 'ch_1', amountMinor: 1000 });
    expect(open.calls).toEqual([`find charge ${providerSubKey.charge(paymentId)}`, `capture ${providerSubKey.capture(paymentId)}`]);
  });

  it('void: a canceled charge is the answer; attempt 1 voids under the void sub-key without looking', async () => {
    const done = recordingProvider({ charge: charge('canceled') });
    expect((await run(2, createProviderSteps(done.provider).voidCharge, { paymentId, chargeId: 'ch_1' })).status).toBe('canceled');
    expect(done.calls).toEqual([`find charge ${providerSubKey.charge(paymentId)}`]);
    const first = recordingProvider({ charge: charge('requires_capture') });
    await run(1, createProviderSteps(first.provider).voidCharge, { paymentId, chargeId: 'ch_1' });
    expect(first.calls).toEqual([`void ${providerSubKey.void(paymentId)}`]);
  });

  it('refund: a retry returns the refund its sub-key already made', async () => {
    const subKey = providerSubKey.compensation(paymentId);
    const { provider, calls } = recordingProvider({ refund });
    expect(await run(2, createProviderSteps(provider).refundCharge, { subKey, chargeId: 'ch_1', amountMinor: 400, reference: paymentId })).toEqual(refund);
    expect(calls).toEqual([`find refund ${subKey}`]);
  });

  it('refund: names the currency of the refund (or payment) its reference is, as a PSP whose refunds name their amount in full needs', async () => {
    const subKey = providerSubKey.refund('re_1');
    const { provider, calls } = recordingProvider({ refund });
    const asked: string[] = [];
    const steps = createProviderSteps(provider, undefined, async (reference) => (asked.push(reference), reference === 're_1' ? 'JPY' : null));
    await run(1, steps.refundCharge, { subKey, chargeId: 'ch_1', amountMinor: 400, reference: 're_1' });
    expect(asked).toEqual(['re_1']);
    expect(calls).toEqual([`refund ${subKey} JPY`]);
  });
});

describe('what an error means for the retries', () => {
  it("the provider's refusal fails the step for good as ProviderRejected, with its code", async () => {
    const { provider } = recordingProvider({}, new ProviderRejectedError('No such payment method', 400, 'invalid_payment_method'));
    const failure = await run(1, createProviderSteps(provider).chargeAttempt, attemptAtOnlyPsp).catch((e: unknown) => e);
    expect(failure).toBeInstanceOf(ApplicationFailure);
    expect(failure).toMatchObject({ type: FailureType.ProviderRejected, nonRetryable: true, details: ['invalid_payment_method'] });
  });

  it('anything else (a timeout, a reset) is an unknown outcome: thrown as is, so the step is retried, lookup first', async () => {
    const timeout = Object.assign(new Error('The operation was aborted due to timeout'), { name: 'TimeoutError' });
    const { provider } = recordingProvider({}, timeout);
    expect(await run(1, createProviderSteps(provider).chargeAttempt, attemptAtOnlyPsp).catch((e: unknown) => e)).toBe(timeout);
  });

  it('PostgreSQL refusals no retry cures fail the step as DatabaseRefused; races and outages stay retryable', async () => {
    const execute = databaseRefusalInterceptor({} as never).inbound!.execute!;
    const postgresError = (code: string) => Object.assign(new Error(`refused ${code}`), { name: 'PostgresError', code });
    const outcome = (code: string) =>
      execute({ args: [], headers: {} }, () => Promise.reject(postgresError(code))).catch((e: unknown) => e);
    for (const code of ['22P05', '23502', '42P01']) {
      expect(await outcome(code), code).toMatchObject({ type: FailureType.DatabaseRefused, nonRetryable: true });
    }
    for (const code of ['23505', '08006', '57P01']) {
      const error = await outcome(code);
      expect(error, code).not.toBeInstanceOf(ApplicationFailure);
      expect((error as { code: string }).code, code).toBe(code);
    }
  });
});

describe('chargeAttempt: "nothing was charged here" only when certain', () => {
  const attemptInput = { ...chargeInput, tenantId: 'ten_1', provider: 'sandbox', attempt: 2, canFailOver: true };
  const key = providerSubKey.charge(paymentId, 2);
  const runAttempt = (attempt: number, provider: PaymentProvider, input: ChargeAttemptInput = attemptInput, heartbeatDetails?: unknown) =>
    new MockActivityEnvironment({ attempt, heartbeatDetails }).run(createProviderSteps(provider).chargeAttempt, input);

  it('attempt n charges under its own sub-key <payment>:charge:<n>; attempt 1 keeps <payment>:charge', async () => {
    const { provider, calls } = recordingProvider();
    expect(await runAttempt(1, provider)).toMatchObject({ kind: 'charge' });
    expect(calls).toEqual([`create charge ${key}`]);
    expect(providerSubKey.charge(paymentId, 1)).toBe(providerSubKey.charge(paymentId));
  });

  it('a refusal (4xx) is not_charged "rejected" when another PSP follows, and fails the step at the last one', async () => {
    const refused = new ProviderRejectedError('nope', 400, 'invalid_request');
    expect(await runAttempt(1, recordingProvider({}, refused).provider)).toMatchObject({ kind: 'not_charged', outcome: 'rejected', errorCode: 'invalid_request' });
    const last = await runAttempt(1, recordingProvider({}, refused).provider, { ...attemptInput, canFailOver: false }).catch((e: unknown) => e);
    expect(last).toMatchObject({ type: FailureType.ProviderRejected });
  });

  it('connection refused is tried here again (ProviderNotReached, retryable) until the PSP had its 3 tries, then not_sent; any other network error is unknown (retried here)', async () => {
    const refusedConnection = new ProviderUnavailableError('connection refused', undefined, { notSent: true });
    const first = await runAttempt(1, recordingProvider({}, refusedConnection).provider).catch((e: unknown) => e);
    expect(first).toMatchObject({ type: FailureType.ProviderNotReached, nonRetryable: false });
    // The 2nd try's lookup is refused too: nothing was ever sent (the heartbeat carries it), still a try short.
    const second = recordingProvider({}, refusedConnection);
    second.provider.findChargeByIdempotencyKey = async () => Promise.reject(refusedConnection);
    expect(await runAttempt(2, second.provider, attemptInput, { noneFound: 0, clean: true }).catch((e: unknown) => e)).toMatchObject({ type: FailureType.ProviderNotReached });
    expect(await runAttempt(3, second.provider, attemptInput, { noneFound: 0, clean: true })).toMatchObject({ kind: 'not_charged', outcome: 'not_sent', errorCode: 'connection_refused' });
    // A try before it may have sent the charge (no heartbeat saying otherwise): a refused lookup proves nothing.
    expect(await runAttempt(3, second.provider, attemptInput, { noneFound: 0 }).catch((e: unknown) => e)).toBe(refusedConnection);
    const reset = new ProviderUnavailableError('socket hang up');
    expect(await runAttempt(1, recordingProvider({}, reset).provider).catch((e: unknown) => e)).toBe(reset);
  });

  it('PROVIDER_TRANSIENT_TRIES 1: the first refused connection is not_sent at once', async () => {
    const refusedConnection = new ProviderUnavailableError('connection refused', undefined, { notSent: true });
    const steps = createProviderSteps(recordingProvider({}, refusedConnection).provider, undefined, undefined, undefined, undefined, 1);
    expect(await new MockActivityEnvironment({ attempt: 1 }).run(steps.chargeAttempt, attemptInput)).toMatchObject({ kind: 'not_charged', outcome: 'not_sent' });
  });

  it('after lost answers: the PSP gets 3 tries (a lookup finding none charges again under the same key), then 2 lookups finding none are not_charged', async () => {
    const second = recordingProvider();
    expect(await runAttempt(2, second.provider)).toMatchObject({ kind: 'charge' });
    expect(second.calls).toEqual([`find charge ${key}`, `create charge ${key}`]);
    const third = recordingProvider();
    expect(await runAttempt(3, third.provider, attemptInput, { noneFound: 1 })).toMatchObject({ kind: 'charge' });
    expect(third.calls).toEqual([`find charge ${key}`, `create charge ${key}`]);
    const fourth = recordingProvider();
    expect(await runAttempt(4, fourth.provider, attemptInput, { noneFound: 2 })).toMatchObject({ kind: 'not_charged', outcome: 'not_charged', errorCode: 'outcome_unknown_none_found' });
    expect(fourth.calls).toEqual([`find charge ${key}`]);
    // Tries used up but only one lookup found none so far (a count lost): nothing is sent, the lookup is asked again.
    const counted = recordingProvider();
    expect(await runAttempt(4, counted.provider, attemptInput, { noneFound: 0 }).catch((e: unknown) => e)).toBeInstanceOf(Error);
    expect(counted.calls).toEqual([`find charge ${key}`]);
    // The run's local first try counts: the regular activity's 3rd try is the PSP's 4th.
    const afterLocal = recordingProvider();
    expect(await runAttempt(3, afterLocal.provider, { ...attemptInput, localTry: 'unknown' as const }, { noneFound: 2 })).toMatchObject({ kind: 'not_charged', outcome: 'not_charged' });
    // Without a way on (no next PSP, no route starting again) it never says so: it charges here again under the same key.
    const last = recordingProvider();
    expect(await runAttempt(5, last.provider, { ...attemptInput, canFailOver: false }, { noneFound: 5 })).toMatchObject({ kind: 'charge' });
  });

  it("the last PSP of a pass (lookupMayEnd false) ends its attempt by lookups only after sends it answered with an error: a request it never answered may still be running there", async () => {
    const lastOfPass = { ...attemptInput, canFailOver: true, lookupMayEnd: false };
    // Sends never answered (timeouts): the lookups finding none do not end it; it charges again under the same key.
    const unanswered = recordingProvider();
    expect(await runAttempt(4, unanswered.provider, lastOfPass, { noneFound: 2, clean: false })).toMatchObject({ kind: 'charge' });
    expect(unanswered.calls).toEqual([`find charge ${key}`, `create charge ${key}`]);
    // Sends answered 503: that request is over at the PSP, and two lookups finding none are certain.
    const answered = recordingProvider();
    expect(await runAttempt(4, answered.provider, lastOfPass, { noneFound: 2, clean: false, answeredFailure: true })).toMatchObject({ kind: 'not_charged', outcome: 'not_charged', errorCode: 'psp_error_none_found' });
    expect(answered.calls).toEqual([`find charge ${key}`]);
    // The try that meets the 503 remembers it for the next one (in its heartbeat).
    const failing = recordingProvider({}, new ProviderUnavailableError('503', 503));
    const env = new MockActivityEnvironment({ attempt: 2, heartbeatDetails: { noneFound: 0 } });
    const beats: unknown[] = [];
    env.on('heartbeat', (details: unknown) => beats.push(details));
    await env.run(createProviderSteps(failing.provider).chargeAttempt, lastOfPass).catch(() => undefined);
    expect(beats.at(-1)).toMatchObject({ answeredFailure: true });
  });

  it("only a kind whose lookup proves moves on after lost answers: a lagging lookup's none found charges here again, a replaying kind sends the request again", async () => {
    const lagging = recordingProvider();
    Object.assign(lagging.provider, { kind: 'stripe' });
    expect(await runAttempt(4, lagging.provider, attemptInput, { noneFound: 3 })).toMatchObject({ kind: 'charge' });
    expect(lagging.calls).toEqual([`find charge ${key}`, `create charge ${key}`]);
    // A replaying kind (Adyen) has no lookup: the same request goes again under the same key, and it never moves on.
    const replaying = recordingProvider();
    Object.assign(replaying.provider, { kind: 'adyen' });
    expect(await runAttempt(4, replaying.provider, attemptInput, { noneFound: 5 })).toMatchObject({ kind: 'charge' });
    expect(replaying.calls).toEqual([`create charge ${key}`]);
  });

  it('a lookup that finds the charge returns it; one that fails leaves the outcome unknown (no move)', async () => {
    const found = recordingProvider({ charge: charge('succeeded') });
    expect(await runAttempt(3, found.provider, attemptInput, { noneFound: 1 })).toMatchObject({ kind: 'charge', charge: { status: 'succeeded' } });
    const down = { findChargeByIdempotencyKey: async () => Promise.reject(new ProviderUnavailableError('503', 503)) } as unknown as PaymentProvider;
    expect(await runAttempt(3, down, attemptInput, { noneFound: 1 }).catch((e: unknown) => e)).toBeInstanceOf(ProviderUnavailableError);
  });
});

describe('chargeAttempt deciding its route (attempt 1)', () => {
  const route = { paymentId, tenantId: 'ten_1', amountMinor: 1000, currency: 'EUR', paymentMethod: 'pm_card_visa', intent: paymentInput({ paymentId, tenantId: 'ten_1' }) };
  const routeInput = { ...chargeInput, attempt: 1, route };
  const plan = (...providers: string[]) => ({ providers, reason: 'test plan', retryableDeclineCodes: ['processing_error'] });
  const runRouted = (psps: Record<string, PaymentProvider>, planned: ReturnType<typeof plan>, attempt = 1, triedBefore = false) => {
    const asked: unknown[] = [];
    const steps = createProviderSteps(providerRegistry(psps), async (request) => (asked.push(request), { plan: planned, triedBefore }));
    return { asked, result: new MockActivityEnvironment({ attempt }).run(steps.chargeAttempt, routeInput) };
  };

  it('charges at the plan\'s first PSP under attempt 1\'s sub-key and answers the plan with the charge', async () => {
    const a = recordingProvider();
    const b = recordingProvider();
    const { asked, result } = runRouted({ 'psp-a': a.provider, 'psp-b': b.provider }, plan('psp-b', 'psp-a'));
    expect(await result).toMatchObject({ kind: 'charge', plan: { providers: ['psp-b', 'psp-a'], reason: 'test plan' } });
    expect(asked).toEqual([route]);
    expect(b.calls).toEqual([`create charge ${providerSubKey.charge(paymentId, 1)}`]);
    expect(a.calls).toEqual([]);
  });

  it('attempt 1 that an earlier try recorded (a worker died mid-charge, a local try lost its answer) asks the PSP first, even on its first activity attempt', async () => {
    const held = charge('succeeded');
    const a = recordingProvider({ charge: held });
    const found = runRouted({ 'psp-a': a.provider }, plan('psp-a'), 1, true);
    expect(await found.result).toMatchObject({ kind: 'charge', charge: { id: held.id } });
    expect(a.calls).toEqual([`find charge ${providerSubKey.charge(paymentId, 1)}`]);
    // Nothing there: it charges, under the same sub-key.
    const empty = recordingProvider();
    const none = runRouted({ 'psp-a': empty.provider }, plan('psp-a'), 1, true);
    expect(await none.result).toMatchObject({ kind: 'charge' });
    expect(empty.calls).toEqual([`find charge ${providerSubKey.charge(paymentId, 1)}`, `create charge ${providerSubKey.charge(paymentId, 1)}`]);
  });

  it('a refusal is answered, with the plan, whether or not another PSP follows (the run records it: no throw at the last one)', async () => {
    const refused = new ProviderRejectedError('nope', 400, 'invalid_request');
    for (const planned of [plan('psp-a', 'psp-b'), plan('psp-a')]) {
      const { result } = runRouted({ 'psp-a': recordingProvider({}, refused).provider, 'psp-b': recordingProvider().provider }, planned);
      expect(await result).toMatchObject({ kind: 'not_charged', outcome: 'rejected', errorCode: 'invalid_request', plan: planned });
    }
  });

  it('an unknown outcome stays unknown (retried there); a refused connection on the first try is ProviderNotReached, tried there again', async () => {
    const reset = new ProviderUnavailableError('socket hang up');
    const only = runRouted({ 'psp-a': recordingProvider({}, reset).provider }, plan('psp-a'));
    expect(await only.result.catch((e: unknown) => e)).toBe(reset);
    const refusedConnection = new ProviderUnavailableError('connection refused', undefined, { notSent: true });
    const two = runRouted({ 'psp-a': recordingProvider({}, refusedConnection).provider, 'psp-b': recordingProvider().provider }, plan('psp-a', 'psp-b'));
    expect(await two.result.catch((e: unknown) => e)).toMatchObject({ type: FailureType.ProviderNotReached, nonRetryable: false });
  });

  it('a worker without a planner refuses the input for good (never guesses a PSP)', async () => {
    const steps = createProviderSteps(recordingProvider().provider);
    const refused = await new MockActivityEnvironment().run(steps.chargeAttempt, routeInput).catch((e: unknown) => e);
    expect(refused).toBeInstanceOf(ApplicationFailure);
    expect((refused as ApplicationFailure).nonRetryable).toBe(true);
  });
});

describe('test payment methods: the charge step sends each kind its own test instrument', () => {
  /** A PSP of this kind (none: a kindless fake) that records the payment method each charge is sent. */
  function sentTo(kind: string | undefined) {
    const sent: string[] = [];
    const provider = {
      ...(kind !== undefined ? { kind } : {}),
      createCharge: async (request: { paymentMethod: string }) => (sent.push(request.paymentMethod), charge('succeeded')),
    } as unknown as PaymentProvider;
    return { provider, sent };
  }
  const kindsWithTables = knownProviderKinds.filter((kind) => providerKind(kind).testPaymentMethods !== undefined);

  it('some kind has a table (stripe)', () => {
    expect(kindsWithTables).toContain('stripe');
  });

  for (const kind of kindsWithTables) {
    it(`${kind}: each of our names goes as the kind's own; another method (a merchant's own token) as given`, async () => {
      const table = providerKind(kind).testPaymentMethods!;
      for (const [ours, theirs] of Object.entries(table)) {
        const { provider, sent } = sentTo(kind);
        await run(1, createProviderSteps(provider).chargeAttempt, { ...attemptAtOnlyPsp, paymentMethod: ours });
        expect(sent).toEqual([theirs]);
      }
      const { provider, sent } = sentTo(kind);
      await run(1, createProviderSteps(provider).chargeAttempt, { ...attemptAtOnlyPsp, paymentMethod: 'pm_1QmerchantsOwnToken' });
      expect(sent).toEqual(['pm_1QmerchantsOwnToken']);
    });
  }

  it('a kind without a table (the sandbox) and a kindless fake are sent our names as they are', async () => {
    for (const kind of ['sandbox', undefined]) {
      const { provider, sent } = sentTo(kind);
      await run(1, createProviderSteps(provider).chargeAttempt, { ...attemptAtOnlyPsp, paymentMethod: 'pm_card_declined' });
      expect(sent).toEqual(['pm_card_declined']);
    }
  });
});
