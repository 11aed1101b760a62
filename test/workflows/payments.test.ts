import { WorkflowUpdateFailedError, type WorkflowHandle } from '@temporalio/client';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ApplicationFailure } from '@temporalio/common';
import { providerSubKey } from '../../shared/keys';
import { eventually } from '../helpers/eventually';
import type { paymentWorkflow } from '../../workflows';
import { FailureType } from '../../shared/definitions';
import { cancelUpdate, captureUpdate, chargeReportSignal, paymentStatusQuery, type CaptureRequest } from '../../shared/payments';
import type { ProviderCharge } from '../../provider/types';
import {
  bodyOf,
  charge,
  chargeIdOf,
  failedRefund,
  gate,
  ledgerRefuses,
  paymentInput,
  providerRefuses,
  response,
  scopedKey,
  startWorkflowBench,
  type Fakes,
  type WorkflowBench,
} from '../helpers/workflow-worker';

/**
 * The payment workflow's decisions, with fake activities: which steps run, in which order,
 * with what, and what the run answers. The steps themselves (SQL, provider calls) are tested
 * against PostgreSQL and the sandbox in test/integration.
 */

let bench: WorkflowBench;
beforeAll(async () => {
  bench = await startWorkflowBench();
});
afterAll(async () => {
  await bench?.stop();
});

const manual = () => paymentInput({ captureMethod: 'manual' });
const capture = (amountMinor: number | null = null): CaptureRequest => ({ amountMinor, idempotency: scopedKey('POST /v1/payments/{id}/capture'), requestId: 'req_capture' });
const cancel = () => ({ idempotency: scopedKey('POST /v1/payments/{id}/cancel'), requestId: 'req_cancel' });

/** A provider capture that hangs until the test releases it: the command stays in progress. */
function heldCapture() {
  const held = gate();
  const fakes: Fakes = {
    captureCharge: async ({ paymentId, amountMinor }) => {
      await held.opened;
      return charge(paymentId, { status: 'succeeded', amountCapturedMinor: amountMinor });
    },
  };
  return { fakes, release: () => held.open() };
}

/** The failure type an update was refused with (its validator's ApplicationFailure). */
async function refusalOf(update: Promise<unknown>): Promise<string | undefined> {
  const error = await update.then(
    () => undefined,
    (failure: unknown) => failure,
  );
  expect(error).toBeInstanceOf(WorkflowUpdateFailedError);
  return ((error as WorkflowUpdateFailedError).cause as { type?: string } | undefined)?.type;
}

/**
 * Waits until the run awaits a command: the update handlers are registered from then on
 * (an update that reaches the run before that is refused for want of a handler).
 */
async function awaitingCapture(run: { handle: WorkflowHandle<typeof paymentWorkflow> }): Promise<void> {
  await expect.poll(() => run.handle.query(paymentStatusQuery), { timeout: 10_000, interval: 50 }).toBe('requires_capture');
}

/** A protobuf Timestamp or Duration in milliseconds. */
const protoMs = (t: { seconds?: unknown; nanos?: number | null } | null | undefined) => Number(t?.seconds ?? 0) * 1000 + Math.floor((t?.nanos ?? 0) / 1e6);

/** The run's timers of `windowMs`: when the server started each (its deadline) and how each ended. */
async function windowTimers(handle: WorkflowHandle<typeof paymentWorkflow>, windowMs: number) {
  const events = (await handle.fetchHistory()).events!;
  return events
    .filter((e) => e.timerStartedEventAttributes && protoMs(e.timerStartedEventAttributes.startToFireTimeout) === windowMs)
    .map((started) => {
      const id = started.timerStartedEventAttributes!.timerId;
      return {
        endsAt: protoMs(started.eventTime) + windowMs,
        fired: events.some((e) => e.timerFiredEventAttributes?.timerId === id),
        canceled: events.some((e) => e.timerCanceledEventAttributes?.timerId === id),
      };
    });
}

/** The data of the run's patch markers (each names its patch id). */
async function patchesOf(handle: WorkflowHandle<typeof paymentWorkflow>): Promise<string[]> {
  return (await handle.fetchHistory()).events!
    .filter((e) => e.markerRecordedEventAttributes?.markerName === 'core_patch')
    .flatMap((e) => Object.values(e.markerRecordedEventAttributes!.details ?? {}).flatMap((p) => p.payloads ?? []))
    .map((p) => (JSON.parse(Buffer.from(p.data ?? new Uint8Array()).toString('utf8')) as { id: string }).id);
}

describe('automatic capture', () => {
  it('charges once and records the outcome once (rules out a second charge or a lost booking)', async () => {
    const input = paymentInput();
    const run = await bench.startPayment(input);
    const final = await run.handle.result();

    expect(run.steps()).toEqual(['chargeAttempt', 'recordChargeOutcome']);
    expect(run.inputsOf('chargeAttempt')[0]).toMatchObject({ paymentId: input.paymentId, amountMinor: 4200, currency: 'EUR', capture: true });
    expect(run.inputsOf('recordChargeOutcome')[0]!.charge.status).toBe('succeeded');
    expect(bodyOf(final)).toEqual({ id: input.paymentId, status: 'succeeded' });
    expect(await run.handle.query(paymentStatusQuery)).toBe('succeeded');
  });

  it('is one workflow task of two local steps: no intent step, the first attempt plans the route and carries the intent (rules out a step per payment spent on either, or a run that cannot persist a missing intent)', async () => {
    const input = paymentInput();
    const routes: unknown[] = [];
    const run = await bench.startPayment(input, {
      plan: async (request) => {
        routes.push(request);
        return { providers: ['sandbox'], reason: 'default', retryableDeclineCodes: [] };
      },
    });
    const final = await run.handle.result();

    expect(run.steps()).toEqual(['chargeAttempt', 'recordChargeOutcome']);
    expect(routes).toMatchObject([{ paymentId: input.paymentId, tenantId: input.tenantId, intent: { paymentId: input.paymentId, orderId: input.orderId } }]);
    // Even the only PSP may answer "not charged" after its tries: the route may start again (within the charge budget).
    expect(run.inputsOf('chargeAttempt')[0]).toMatchObject({ attempt: 1, provider: 'sandbox', canFailOver: true });
    expect(run.inputsOf('recordChargeOutcome')[0]).toMatchObject({ attempt: { attempt: 1, provider: 'sandbox' } });
    expect(bodyOf(final)).toEqual({ id: input.paymentId, status: 'succeeded' });
    // Both steps ran as local activities, and the whole payment was one workflow task.
    expect(run.calls.map((call) => call.local)).toEqual([true, true]);
    const events = (await run.handle.fetchHistory()).events!;
    expect(events.filter((e) => e.workflowTaskCompletedEventAttributes).length).toBe(1);
    expect(events.filter((e) => e.activityTaskScheduledEventAttributes).length).toBe(0);
    // A pinned workflow type carries no patches (docs/versioning.md): the run records no patch marker.
    expect(await patchesOf(run.handle)).toEqual([]);
  });

  it('records a decline as the outcome and gives nothing back (rules out refunding or voiding money that never moved)', async () => {
    const input = paymentInput();
    const run = await bench.startPayment(input, {
      chargeAnswer: async () => charge(input.paymentId, { status: 'declined', declineCode: 'card_declined', declineMessage: 'Your card was declined.' }),
    });
    const final = await run.handle.result();

    expect(run.steps()).toEqual(['chargeAttempt', 'recordChargeOutcome']);
    expect(run.inputsOf('recordChargeOutcome')[0]!.charge).toMatchObject({ status: 'declined', declineCode: 'card_declined' });
    expect(bodyOf(final).status).toBe('declined');
    expect(await run.handle.query(paymentStatusQuery)).toBe('declined');
  });

  it('records a provider refusal as a failure without compensation (rules out treating "nothing happened" as money to give back)', async () => {
    const input = paymentInput();
    const run = await bench.startPayment(input, {
      chargeAnswer: async () => {
        throw providerRefuses('No such payment_method: pm_bogus');
      },
    });
    const final = await run.handle.result();

    expect(run.steps()).toEqual(['chargeAttempt', 'recordAttempt', 'recordPaymentFailure']);
    expect(run.inputsOf('recordPaymentFailure')[0]).toMatchObject({
      failure: { code: 'provider_rejected', message: 'No such payment_method: pm_bogus' },
      idempotency: input.idempotency,
    });
    expect(bodyOf(final).status).toBe('failed');
  });

  it('retries a charge whose outcome is unknown and books it once (rules out failing a payment on a transient provider error)', async () => {
    const input = paymentInput();
    let attempts = 0;
    const run = await bench.startPayment(input, {
      chargeAnswer: async (step) => {
        if (++attempts === 1) throw new Error('socket hang up');
        return charge(step.paymentId, { status: 'succeeded', amountCapturedMinor: step.amountMinor });
      },
    });
    await run.handle.result();

    // The local try in the first workflow task, then the regular activity (which asks the PSP first).
    expect(run.calls.filter((call) => call.step === 'chargeAttempt').map((call) => [call.local, call.attempt])).toEqual([
      [true, 1],
      [false, 1],
    ]);
    expect(run.steps().filter((step) => step === 'recordChargeOutcome')).toHaveLength(1);
    expect(await run.handle.query(paymentStatusQuery)).toBe('succeeded');
  });

  it('stops at the order guard the first attempt meets, without a charge, and answers 409 (rules out charging an order that is already paid)', async () => {
    const input = paymentInput();
    const run = await bench.startPayment(input, {
      chargeAttempt: async () => {
        throw ApplicationFailure.create({ type: FailureType.OrderTaken, message: 'order taken', nonRetryable: true, details: ['pay_holder'] });
      },
    });

    const final = await run.handle.result();
    expect(final.status).toBe(409);
    expect(run.steps()).toEqual(['chargeAttempt', 'recordOrderTaken']);
    expect(run.inputsOf('recordOrderTaken')[0]).toMatchObject({ payment: { paymentId: input.paymentId }, holderPaymentId: 'pay_holder' });
  });
});

describe('compensation', () => {
  it('refunds a captured charge the ledger refuses, under the compensation sub-key, and says so (rules out keeping money that was never booked)', async () => {
    const input = paymentInput();
    const run = await bench.startPayment(input, { recordChargeOutcome: async () => Promise.reject(ledgerRefuses('account frozen')) });
    await run.handle.result();

    expect(run.steps()).toEqual(['chargeAttempt', 'recordChargeOutcome', 'refundCharge', 'recordPaymentFailure']);
    expect(run.inputsOf('refundCharge')[0]).toEqual({
      subKey: providerSubKey.compensation(input.paymentId),
      chargeId: chargeIdOf(input.paymentId),
      amountMinor: 4200,
      reference: input.paymentId,
      // At the PSP holding the charge: the route's one PSP, attempt 1.
      provider: 'sandbox',
      attempt: 1,
    });
    const { failure } = run.inputsOf('recordPaymentFailure')[0]!;
    expect(failure.code).toBe('ledger_rejected');
    expect(failure.message).toContain('account frozen');
    expect(failure.message).toContain(`Compensated: refunded 4200 EUR of charge ${chargeIdOf(input.paymentId)}.`);
    expect(await run.handle.query(paymentStatusQuery)).toBe('failed');
  });

  it('voids an authorization the ledger refuses (rules out refunding money that was only held)', async () => {
    const input = manual();
    const run = await bench.startPayment(input, { recordChargeOutcome: async () => Promise.reject(ledgerRefuses('account frozen')) });
    await run.handle.result();

    expect(run.steps()).toEqual(['chargeAttempt', 'recordChargeOutcome', 'voidCharge', 'recordPaymentFailure']);
    expect(run.inputsOf('recordPaymentFailure')[0]!.failure.message).toContain(`Compensated: voided authorization ${chargeIdOf(input.paymentId)}.`);
  });

  it('records a compensating refund the provider answers "failed" as compensation_failed (rules out "Compensated" while the money stayed with us)', async () => {
    const input = paymentInput();
    const run = await bench.startPayment(input, {
      recordChargeOutcome: async () => Promise.reject(ledgerRefuses('account frozen')),
      refundCharge: async ({ chargeId, amountMinor }) => failedRefund(chargeId, amountMinor, 'card closed'),
    });
    await run.handle.result();

    const { failure } = run.inputsOf('recordPaymentFailure')[0]!;
    expect(failure.code).toBe('compensation_failed');
    expect(failure.message).toContain('Compensation FAILED, needs an operator');
    expect(failure.message).toContain('card closed');
    expect(failure.message).not.toContain('Compensated:');
    expect(await run.handle.query(paymentStatusQuery)).toBe('failed');
  });

  it('records a compensating refund the provider refuses outright as compensation_failed, and still closes (rules out a run stuck or silent after a failed undo)', async () => {
    const input = paymentInput();
    const run = await bench.startPayment(input, {
      recordChargeOutcome: async () => Promise.reject(ledgerRefuses('account frozen')),
      refundCharge: async () => Promise.reject(providerRefuses('charge already disputed')),
    });
    const final = await run.handle.result();

    expect(run.inputsOf('refundCharge')).toHaveLength(1);
    expect(run.inputsOf('recordPaymentFailure')[0]!.failure).toMatchObject({ code: 'compensation_failed' });
    expect(run.inputsOf('recordPaymentFailure')[0]!.failure.message).toContain('charge already disputed');
    expect(bodyOf(final).status).toBe('failed');
  });

  it('refunds (does not void) a captured authorization whose capture the ledger refuses, and answers the capture with the failure (rules out voiding a captured charge)', async () => {
    const input = manual();
    const run = await bench.startPayment(input, { recordCapture: async () => Promise.reject(ledgerRefuses('account frozen')) });
    await awaitingCapture(run);
    const request = capture(3000);
    const answer = await run.handle.executeUpdate(captureUpdate, { args: [request] });
    await run.handle.result();

    expect(run.steps()).toEqual(['chargeAttempt', 'recordChargeOutcome', 'captureCharge', 'recordCapture', 'refundCharge', 'recordPaymentFailure']);
    expect(run.inputsOf('refundCharge')[0]).toMatchObject({ subKey: providerSubKey.compensation(input.paymentId), amountMinor: 3000 });
    const failure = run.inputsOf('recordPaymentFailure')[0]!;
    expect(failure.idempotency).toEqual(request.idempotency);
    expect(failure.failure.code).toBe('ledger_rejected');
    expect(bodyOf(answer).status).toBe('failed');
  });
});

describe('manual capture', () => {
  it('captures the amount asked for, answers the update with the capture and the run with the authorization (rules out capturing the wrong amount)', async () => {
    const input = manual();
    const run = await bench.startPayment(input);
    await awaitingCapture(run);
    expect(await run.handle.query(paymentStatusQuery)).toBe('requires_capture');

    const answer = await run.handle.executeUpdate(captureUpdate, { args: [capture(2500)] });
    const final = await run.handle.result();

    expect(run.inputsOf('captureCharge')).toEqual([{ paymentId: input.paymentId, chargeId: chargeIdOf(input.paymentId), amountMinor: 2500, currency: input.currency, provider: 'sandbox', attempt: 1 }]);
    expect(bodyOf(answer)).toMatchObject({ status: 'succeeded', amount_captured_minor: 2500 });
    expect(bodyOf(final).status).toBe('requires_capture');
    expect(run.steps()).not.toContain('voidCharge');
    expect(await run.handle.query(paymentStatusQuery)).toBe('succeeded');
  });

  it('captures the whole authorization when no amount is given (rules out a capture of 0 or null)', async () => {
    const run = await bench.startPayment(manual());
    await awaitingCapture(run);
    await run.handle.executeUpdate(captureUpdate, { args: [capture(null)] });
    expect(run.inputsOf('captureCharge')[0]!.amountMinor).toBe(4200);
  });

  it('refuses a capture above the authorized amount and keeps waiting (rules out overcapture, and a refused update ending the authorization)', async () => {
    const run = await bench.startPayment(manual());
    await awaitingCapture(run);
    expect(await refusalOf(run.handle.executeUpdate(captureUpdate, { args: [capture(4201)] }))).toBe(FailureType.CaptureExceedsAuthorized);
    expect(await run.handle.query(paymentStatusQuery)).toBe('requires_capture');

    await run.handle.executeUpdate(cancelUpdate, { args: [cancel()] });
    await run.handle.result();
    expect(run.steps()).not.toContain('captureCharge');
    expect(run.steps()).toContain('voidCharge');
  });

  it('voids on cancel and records the cancel with its request (rules out a cancel that leaves the hold on the card)', async () => {
    const input = manual();
    const run = await bench.startPayment(input);
    await awaitingCapture(run);
    const request = cancel();
    const answer = await run.handle.executeUpdate(cancelUpdate, { args: [request] });
    await run.handle.result();

    expect(run.steps().slice(-2)).toEqual(['voidCharge', 'recordCancel']);
    expect(run.inputsOf('recordCancel')[0]).toEqual({ paymentId: input.paymentId, request });
    expect(bodyOf(answer).status).toBe('canceled');
    expect(await run.handle.query(paymentStatusQuery)).toBe('canceled');
  });
});

describe('authorization expiry (a short window)', () => {
  it('voids the authorization when its window ends, records the cancel without a request, and refuses a late capture (rules out a hold that never ends)', async () => {
    const input = paymentInput({ captureMethod: 'manual', authorizationWindowMs: 1500 });
    const run = await bench.startPayment(input);
    const final = await run.handle.result();

    expect(run.steps()).toEqual(['chargeAttempt', 'recordChargeOutcome', 'voidCharge', 'recordCancel']);
    expect(run.inputsOf('recordCancel')[0]).toEqual({ paymentId: input.paymentId, request: null });
    expect(bodyOf(final).status).toBe('requires_capture');
    expect(await run.handle.query(paymentStatusQuery)).toBe('canceled');
    await expect(run.handle.executeUpdate(captureUpdate, { args: [capture()] })).rejects.toThrow();
  });

  it('lets a capture accepted inside the window finish even when the provider is slower than the window (rules out the timer voiding a charge being captured)', async () => {
    const captured = heldCapture();
    const input = paymentInput({ captureMethod: 'manual', authorizationWindowMs: 1000 });
    const run = await bench.startPayment(input, captured.fakes);
    await awaitingCapture(run);
    const answer = run.handle.executeUpdate(captureUpdate, { args: [capture()] });
    await eventually(() => run.steps().includes('captureCharge'), 10_000, 20, 'the run reached captureCharge');
    // The accepted capture cancels the window's timer, so no event marks the window's end: wait
    // for the deadline the server gave that timer, with the capture still held at the provider.
    const [timer] = await windowTimers(run.handle, 1000);
    await eventually(() => Date.now() > timer!.endsAt, 10_000, 20, 'past the window');
    captured.release();

    expect(bodyOf(await answer).status).toBe('succeeded');
    await run.handle.result();
    expect(run.steps()).not.toContain('voidCharge');
    expect(run.steps()).not.toContain('recordCancel');
    // The window's one timer was canceled by the capture, never fired.
    expect(await windowTimers(run.handle, 1000)).toEqual([{ endsAt: timer!.endsAt, fired: false, canceled: true }]);
  });
});

describe('capture and cancel racing, and a second update on the run', () => {
  it('accepts exactly one of a capture and a cancel sent together (rules out capturing and voiding the same authorization)', async () => {
    const run = await bench.startPayment(manual());
    await awaitingCapture(run);
    const outcomes = await Promise.allSettled([
      run.handle.executeUpdate(captureUpdate, { args: [capture()] }),
      run.handle.executeUpdate(cancelUpdate, { args: [cancel()] }),
    ]);
    await run.handle.result();

    expect(outcomes.filter((outcome) => outcome.status === 'fulfilled')).toHaveLength(1);
    const refused = outcomes.find((outcome) => outcome.status === 'rejected') as PromiseRejectedResult;
    expect(refused.reason).toBeInstanceOf(WorkflowUpdateFailedError);
    const providerCommands = run.steps().filter((step) => step === 'captureCharge' || step === 'voidCharge');
    expect(providerCommands).toHaveLength(1);
  });

  it('refuses a second command while the first is in progress, naming it (rules out two provider commands on one authorization)', async () => {
    const captured = heldCapture();
    const input = manual();
    const run = await bench.startPayment(input, captured.fakes);
    await awaitingCapture(run);
    const first = run.handle.executeUpdate(captureUpdate, { args: [capture()] });
    await eventually(() => run.steps().includes('captureCharge'), 10_000, 20, 'the run reached captureCharge');

    const second = await run.handle.executeUpdate(captureUpdate, { args: [capture(100)] }).catch((error: WorkflowUpdateFailedError) => error);
    expect(second).toBeInstanceOf(WorkflowUpdateFailedError);
    expect(((second as WorkflowUpdateFailedError).cause as { type?: string }).type).toBe(FailureType.PaymentNotCapturable);
    expect((second as WorkflowUpdateFailedError).cause?.message).toContain('already has a capture in progress');
    expect(await refusalOf(run.handle.executeUpdate(cancelUpdate, { args: [cancel()] }))).toBe(FailureType.PaymentNotCancelable);

    captured.release();
    expect(bodyOf(await first).status).toBe('succeeded');
    await run.handle.result();
    expect(run.inputsOf('captureCharge')).toHaveLength(1);
    expect(run.steps()).not.toContain('voidCharge');
  });

  it('answers a repeated delivery of the same update (same update id) with the one result (rules out a retried request capturing twice)', async () => {
    const captured = heldCapture();
    const run = await bench.startPayment(manual(), captured.fakes);
    await awaitingCapture(run);
    const request = capture(1200);
    const first = run.handle.executeUpdate(captureUpdate, { args: [request], updateId: 'capture-once' });
    await eventually(() => run.steps().includes('captureCharge'), 10_000, 20, 'the run reached captureCharge');
    const again = run.handle.executeUpdate(captureUpdate, { args: [request], updateId: 'capture-once' });
    captured.release();

    const [one, two] = await Promise.all([first, again]);
    expect(two).toEqual(one);
    expect(bodyOf(one).amount_captured_minor).toBe(1200);
    await run.handle.result();
    expect(run.inputsOf('captureCharge')).toHaveLength(1);
    expect(run.inputsOf('recordCapture')).toHaveLength(1);
  });
});

describe('routing and failover', () => {
  const twoPsps: Fakes = {
    plan: async () => ({ providers: ['psp-a', 'psp-b'], reason: 'test: a then b', retryableDeclineCodes: ['processing_error'] }),
  };
  const at = (provider: string, attempt: number, paymentId: string, fields: Parameters<typeof charge>[1]) =>
    charge(paymentId, { id: `ch_${provider}_${attempt}`, ...fields });

  it('moves to the next PSP when the first certainly took no money; capture goes to the PSP holding the charge', async () => {
    const input = manual();
    const run = await bench.startPayment(input, {
      ...twoPsps,
      chargeAttempt: async (step) =>
        step.provider === 'psp-a'
          ? { kind: 'not_charged', outcome: 'not_charged', errorCode: 'outcome_unknown_none_found', message: 'none found' }
          : { kind: 'charge', charge: at(step.provider, step.attempt, step.paymentId, { status: 'requires_capture', amountMinor: step.amountMinor }) },
    });
    await awaitingCapture(run);
    await run.handle.executeUpdate(captureUpdate, { args: [capture()] });
    await run.handle.result();

    expect(run.steps()).toEqual(['chargeAttempt', 'recordAttempt', 'chargeAttempt', 'recordChargeOutcome', 'captureCharge', 'recordCapture']);
    expect(run.inputsOf('chargeAttempt')).toMatchObject([
      { provider: 'psp-a', attempt: 1, canFailOver: true },
      // The last PSP may answer "not charged" too: the route may start again (within the charge budget).
      { provider: 'psp-b', attempt: 2, canFailOver: true },
    ]);
    expect(run.inputsOf('recordAttempt')[0]).toMatchObject({ attempt: 1, provider: 'psp-a', outcome: 'not_charged', next: { attempt: 2, provider: 'psp-b' } });
    expect(run.inputsOf('recordChargeOutcome')[0]).toMatchObject({ attempt: { attempt: 2, provider: 'psp-b' } });
    expect(run.inputsOf('captureCharge')[0]).toMatchObject({ chargeId: 'ch_psp-b_2', provider: 'psp-b', attempt: 2 });
    const memo = (await run.handle.describe()).memo as Record<string, unknown>;
    expect(memo).toMatchObject({ route: ['psp-a', 'psp-b'], route_reason: 'test: a then b', provider: 'psp-b' });
    expect(memo.attempts).toMatchObject([
      { attempt: 1, provider: 'psp-a', outcome: 'not_charged', moved_on_because: expect.stringContaining('psp-a') },
      { attempt: 2, provider: 'psp-b', outcome: 'requires_capture' },
    ]);
  });

  const savedMethod = { id: 'pm_saved', tokens: { 'psp-a': 'card_a' }, networkTransactionId: 'ntx_first', card: { brand: 'visa', last4: '4242', expMonth: 12, expYear: 2034 } };

  it('an off-session saved method: every attempt carries it and off_session, so each PSP charges its token or the network transaction id', async () => {
    const input = paymentInput({ customerId: 'cus_1', savedMethod, offSession: true });
    const run = await bench.startPayment(input, {
      ...twoPsps,
      chargeAttempt: async (step) =>
        step.provider === 'psp-a'
          ? { kind: 'not_charged', outcome: 'not_charged', errorCode: 'outcome_unknown_none_found', message: 'none found' }
          : { kind: 'charge', charge: at(step.provider, step.attempt, step.paymentId, { status: 'succeeded', amountCapturedMinor: step.amountMinor }) },
    });
    await run.handle.result();
    expect(run.inputsOf('chargeAttempt')).toMatchObject([
      { provider: 'psp-a', savedMethod, offSession: true },
      { provider: 'psp-b', savedMethod, offSession: true },
    ]);
  });

  it('an off-session charge the PSP declines with authentication_required is recorded at once: no wait, no next PSP', async () => {
    const input = paymentInput({ customerId: 'cus_1', savedMethod, offSession: true });
    const run = await bench.startPayment(input, {
      ...twoPsps,
      chargeAttempt: async (step) => ({ kind: 'charge', charge: at(step.provider, step.attempt, step.paymentId, { status: 'declined', declineCode: 'authentication_required' }) }),
    });
    await run.handle.result();
    expect(run.steps()).toEqual(['chargeAttempt', 'recordChargeOutcome']);
    expect(run.inputsOf('recordChargeOutcome')[0]!.charge).toMatchObject({ status: 'declined', declineCode: 'authentication_required' });
  });

  it('a decline the route marks retryable elsewhere moves on; a card decline does not', async () => {
    const retryable = paymentInput();
    const moved = await bench.startPayment(retryable, {
      ...twoPsps,
      chargeAttempt: async (step) => ({
        kind: 'charge',
        charge:
          step.provider === 'psp-a'
            ? at('psp-a', 1, step.paymentId, { status: 'declined', declineCode: 'processing_error', declineMessage: 'processor down' })
            : at('psp-b', 2, step.paymentId, { status: 'succeeded', amountCapturedMinor: step.amountMinor }),
      }),
    });
    await moved.handle.result();
    expect(moved.inputsOf('chargeAttempt').map((i) => i.provider)).toEqual(['psp-a', 'psp-b']);
    expect(moved.inputsOf('recordAttempt')[0]).toMatchObject({ outcome: 'declined', errorCode: 'processing_error', providerChargeId: 'ch_psp-a_1' });

    const card = paymentInput();
    const stayed = await bench.startPayment(card, {
      ...twoPsps,
      chargeAttempt: async (step) => ({ kind: 'charge', charge: at(step.provider, step.attempt, step.paymentId, { status: 'declined', declineCode: 'card_declined' }) }),
    });
    await stayed.handle.result();
    expect(stayed.steps()).toEqual(['chargeAttempt', 'recordChargeOutcome']);
    expect(await stayed.handle.query(paymentStatusQuery)).toBe('declined');
  });

  it('an unknown outcome at the first PSP is retried THERE, never at the next (rules out a second charge elsewhere)', async () => {
    const input = paymentInput();
    let tries = 0;
    const run = await bench.startPayment(input, {
      ...twoPsps,
      chargeAttempt: async (step) => {
        if (step.provider === 'psp-a' && ++tries < 3) throw new Error('socket hang up');
        return { kind: 'charge', charge: at(step.provider, step.attempt, step.paymentId, { status: 'succeeded', amountCapturedMinor: step.amountMinor }) };
      },
    });
    await run.handle.result();
    expect(run.calls.filter((c) => c.step === 'chargeAttempt').map((c) => [(c.input as { provider: string }).provider, c.local, c.attempt])).toEqual([
      ['psp-a', true, 1],
      ['psp-a', false, 1],
      ['psp-a', false, 2],
    ]);
    expect(run.inputsOf('recordAttempt')).toEqual([]);
  });

  it('the last PSP refusing fails the payment, with every attempt recorded', async () => {
    const input = paymentInput();
    const run = await bench.startPayment(input, {
      ...twoPsps,
      chargeAttempt: async (step) => {
        if (step.provider === 'psp-a') return { kind: 'not_charged', outcome: 'rejected', errorCode: 'invalid_request', message: 'refused' };
        throw Object.assign(providerRefuses('refused too'), { details: ['invalid_payment_method'] });
      },
    });
    const final = await run.handle.result();
    expect(run.steps()).toEqual(['chargeAttempt', 'recordAttempt', 'chargeAttempt', 'recordAttempt', 'recordPaymentFailure']);
    expect(run.inputsOf('recordAttempt').map((i) => [i.provider, i.outcome, i.next?.provider ?? null])).toEqual([
      ['psp-a', 'rejected', 'psp-b'],
      ['psp-b', 'rejected', null],
    ]);
    expect(bodyOf(final).status).toBe('failed');
  });

  const threePsps = (chargeBudgetMs?: number): Fakes['plan'] =>
    async () => ({ providers: ['psp-a', 'psp-b', 'psp-c'], reason: 'test: a, b, c', retryableDeclineCodes: ['processing_error'], ...(chargeBudgetMs ? { chargeBudgetMs } : {}) });
  const unreachable = { kind: 'not_charged', outcome: 'not_sent', errorCode: 'connection_refused', message: 'refused' } as const;

  it("after the last PSP's transient failure the route starts again, under new attempts, only at the PSPs that failed transiently", async () => {
    const input = paymentInput();
    const run = await bench.startPayment(input, {
      plan: threePsps(),
      chargeAttempt: async (step) => {
        if (step.provider === 'psp-b') return { kind: 'charge', charge: at(step.provider, step.attempt, step.paymentId, { status: 'declined', declineCode: 'processing_error' }) };
        if (step.attempt === 1) return unreachable;
        // psp-c answered its sends with errors and its lookups found nothing: certain, so tried again.
        if (step.provider === 'psp-c') return { kind: 'not_charged', outcome: 'not_charged', errorCode: 'psp_error_none_found', message: 'none found' };
        return { kind: 'charge', charge: at(step.provider, step.attempt, step.paymentId, { status: 'succeeded', amountCapturedMinor: step.amountMinor }) };
      },
    });
    const final = await run.handle.result();
    expect(bodyOf(final)).toMatchObject({ status: 'succeeded' });
    // The last PSP of a pass may not end its attempt by lookups after sends it never answered.
    expect(run.inputsOf('chargeAttempt').slice(1).map((i) => [i.provider, (i as { lookupMayEnd?: boolean }).lookupMayEnd])).toEqual([
      ['psp-b', true],
      ['psp-c', false],
      ['psp-a', true],
    ]);
    // psp-b declined (a decline is an answer: never tried again); psp-a and psp-c took no money: tried again under attempts 4 and 5's keys.
    expect(run.inputsOf('chargeAttempt').map((i) => [i.provider, i.attempt, i.canFailOver])).toEqual([
      ['psp-a', 1, true],
      ['psp-b', 2, true],
      ['psp-c', 3, true],
      ['psp-a', 4, true],
    ]);
    expect(run.inputsOf('recordAttempt').map((i) => [i.attempt, i.provider, i.outcome, i.next])).toEqual([
      [1, 'psp-a', 'not_sent', { attempt: 2, provider: 'psp-b' }],
      [2, 'psp-b', 'declined', { attempt: 3, provider: 'psp-c' }],
      [3, 'psp-c', 'not_charged', { attempt: 4, provider: 'psp-a' }],
    ]);
  });

  it('past the charge budget (workflow time from the run\'s start) the last transient failure fails the payment psp_unavailable, every attempt recorded', async () => {
    const input = paymentInput();
    const run = await bench.startPayment(input, { plan: threePsps(1), chargeAttempt: async () => unreachable });
    const final = await run.handle.result();
    expect(run.steps()).toEqual(['chargeAttempt', 'recordAttempt', 'chargeAttempt', 'recordAttempt', 'chargeAttempt', 'recordAttempt', 'recordPaymentFailure']);
    expect(run.inputsOf('recordAttempt').map((i) => [i.attempt, i.provider, i.next?.provider ?? null])).toEqual([
      [1, 'psp-a', 'psp-b'],
      [2, 'psp-b', 'psp-c'],
      [3, 'psp-c', null],
    ]);
    expect(run.inputsOf('recordPaymentFailure')[0]!.failure).toMatchObject({ code: 'psp_unavailable', message: expect.stringContaining('charge budget') });
    expect(bodyOf(final).status).toBe('failed');
  });

  it('an outcome that stays unknown never fails for time: past the budget the step keeps asking that PSP', async () => {
    let tries = 0;
    const run = await bench.startPayment(paymentInput(), {
      plan: threePsps(1),
      chargeAttempt: async (step) => {
        if (++tries < 4) throw new Error('socket hang up');
        return { kind: 'charge', charge: at(step.provider, step.attempt, step.paymentId, { status: 'succeeded', amountCapturedMinor: step.amountMinor }) };
      },
    });
    expect(bodyOf(await run.handle.result()).status).toBe('succeeded');
    expect(run.inputsOf('chargeAttempt').map((i) => [i.provider, i.attempt])).toEqual([['psp-a', 1], ['psp-a', 1], ['psp-a', 1], ['psp-a', 1]]);
    expect(run.steps()).not.toContain('recordPaymentFailure');
  });

  it('the local first try refused (ProviderNotReached): the regular step is told nothing was sent; any other failure: unknown', async () => {
    for (const [thrown, told] of [[ApplicationFailure.create({ type: FailureType.ProviderNotReached, message: 'refused' }), 'not_sent'], [new Error('socket hang up'), 'unknown']] as const) {
      const run = await bench.startPayment(paymentInput(), {
        ...twoPsps,
        chargeAttempt: async (step) => {
          if (step.localTry === undefined) throw thrown;
          return { kind: 'charge', charge: at(step.provider, step.attempt, step.paymentId, { status: 'succeeded', amountCapturedMinor: step.amountMinor }) };
        },
      });
      await run.handle.result();
      expect(run.calls.filter((c) => c.step === 'chargeAttempt').map((c) => [c.local, (c.input as { localTry?: string }).localTry ?? null])).toEqual([
        [true, null],
        [false, told],
      ]);
    }
  });

  it('no PSP of the route charges the method (the plan refuses it): failed payment_method_unsupported before any PSP call', async () => {
    const message = 'No PSP on this payment\'s route charges payment method pm_card_flaky: psp-a do not support it; nothing was charged.';
    const run = await bench.startPayment(paymentInput(), {
      plan: async () => Promise.reject(ApplicationFailure.create({ type: FailureType.PaymentMethodUnsupported, message, nonRetryable: true })),
    });
    const final = await run.handle.result();
    expect(run.steps()).toEqual(['chargeAttempt', 'recordPaymentFailure']);
    expect(run.inputsOf('recordPaymentFailure')[0]!.failure).toEqual({ code: 'payment_method_unsupported', message });
    expect(bodyOf(final).status).toBe('failed');
  });
});

describe('a capture the PSP confirms by notification (modifications `notified`): its answer is the charge still requires_capture', () => {
  const unconfirmed: Fakes = { captureCharge: async ({ paymentId }) => charge(paymentId, { status: 'requires_capture' }) };
  const report = (run: { handle: WorkflowHandle<typeof paymentWorkflow> }, reported: ProviderCharge) =>
    run.handle.signal(chargeReportSignal, { source: 'webhook', eventId: `evt_${reported.status}_${reported.declineCode}`, charge: reported });

  it.each([
    { notification: 'CAPTURE', reported: { status: 'succeeded' as const, amountCapturedMinor: 4200 }, status: 'succeeded', voided: false, code: undefined },
    { notification: 'CAPTURE_FAILED', reported: { status: 'requires_capture' as const, declineCode: 'capture_failed', declineMessage: 'refused by the acquirer' }, status: 'failed', voided: true, code: 'capture_failed' },
  ])('$notification: not $status before it comes (an authorization report changes nothing), $status once it does', async ({ reported, status, voided, code }) => {
    const input = manual();
    const run = await bench.startPayment(input, unconfirmed);
    await awaitingCapture(run);
    const answer = run.handle.executeUpdate(captureUpdate, { args: [capture(null)] });
    await eventually(() => run.inputsOf('captureCharge').length === 1);
    // The authorization's own report (requires_capture, no decline) confirms nothing.
    await report(run, charge(input.paymentId, { status: 'requires_capture' }));
    expect(await run.handle.query(paymentStatusQuery)).toBe('requires_capture');
    expect(run.steps()).not.toContain('recordCapture');
    await report(run, charge(input.paymentId, reported));
    const body = bodyOf(await answer);
    expect(await run.handle.query(paymentStatusQuery)).toBe(status);
    expect(run.steps().includes('voidCharge')).toBe(voided);
    expect(run.steps().includes('recordCapture')).toBe(!voided);
    if (code) expect(run.inputsOf('recordPaymentFailure')[0]!.failure.code).toBe(code);
    else expect(body).toMatchObject({ status: 'succeeded', amount_captured_minor: 4200 });
  });

  it('no confirmation by the authorization window’s end: voided, failed capture_unconfirmed, never succeeded', async () => {
    const input = paymentInput({ captureMethod: 'manual', authorizationWindowMs: 1500 });
    const run = await bench.startPayment(input, unconfirmed);
    await awaitingCapture(run);
    await run.handle.executeUpdate(captureUpdate, { args: [capture(null)] });
    expect(run.steps()).toContain('voidCharge');
    expect(run.steps()).not.toContain('recordCapture');
    expect(run.inputsOf('recordPaymentFailure')[0]!.failure.code).toBe('capture_unconfirmed');
    expect(await run.handle.query(paymentStatusQuery)).toBe('failed');
  });
});
