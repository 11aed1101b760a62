import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { recoveryPolicy } from '../../domain/recovery';
import type { ChargeAttemptResult } from '../../activities/provider-steps';
import { cancelUpdate } from '../../shared/payments';
import { FailureType } from '../../shared/definitions';
import { bodyOf, charge, chargeIdOf, gate, paymentInput, scopedKey, startWorkflowBench, type Fakes, type ResolvedAttempt, type WorkflowBench } from '../helpers/workflow-worker';

/**
 * A recovering payment's run (workflows/payments/recovery.ts recover, docs/recovery.md) with
 * fake steps: the card's budget, a retry's hard decline, and a worker stopped between two
 * retries. An hour is 0.36 s: the schedule's first retry comes 4.3 s after the first decline.
 */

const SCALE = 0.0001;
let bench: WorkflowBench;
beforeAll(async () => {
  bench = await startWorkflowBench();
});
afterAll(async () => bench?.stop());

const recovering = (windowMs = 14 * 24 * 3_600_000 * SCALE) => paymentInput({ offSession: true, recovery: { windowMs, policy: recoveryPolicy(SCALE), paymentMethodId: 'pm_unit' } });
/** A window that ends 1.5 s after the schedule's first retry (12 hours: 4.3 s after the first decline). */
const SHORT_WINDOW_MS = 12 * 3_600_000 * SCALE + 1500;
const cancelRequest = () => ({ idempotency: scopedKey('POST /v1/payments/{id}/cancel'), requestId: 'req_cancel' });

const declined = (paymentId: string, attempt: number, code = 'insufficient_funds'): ChargeAttemptResult => ({
  kind: 'charge',
  charge: charge(paymentId, { id: `${chargeIdOf(paymentId)}_${attempt}`, status: 'declined', declineCode: code, declineSignal: { networkCode: code === 'stolen_card' ? '43' : '51', category: code === 'stolen_card' ? 1 : 2, adviceCode: null } }),
});
const paid = (paymentId: string, attempt: number): ChargeAttemptResult => ({
  kind: 'charge',
  charge: charge(paymentId, { id: `${chargeIdOf(paymentId)}_${attempt}`, status: 'succeeded', amountCapturedMinor: 4200 }),
});

/** A PSP that answers each attempt from the script (by attempt number). */
const psp = (script: (paymentId: string, attempt: number) => ChargeAttemptResult): Fakes => ({
  chargeAttempt: async (input: ResolvedAttempt) => script(input.paymentId, input.attempt),
});

describe('a recovering payment’s run', () => {
  it('a full card budget holds the retry until the slot it frees, then retries once (rules out a retry past the budget)', async () => {
    const input = recovering();
    let reservations = 0;
    let freeAt = 0;
    const run = await bench.startPayment(input, {
      ...psp((id, attempt) => (attempt === 1 ? declined(id, 1) : paid(id, attempt))),
      reserveCardAttempt: async () => {
        reservations++;
        // The first attempt's reservation (before any charge) finds room; the first retry's does not.
        if (reservations === 2) {
          freeAt = Date.now() + 1500;
          return { reserved: false, atMs: freeAt };
        }
        return { reserved: true, atMs: Date.now() };
      },
    });
    const final = await run.handle.result();
    expect(bodyOf(final)).toEqual({ id: input.paymentId, status: 'recovering' });
    expect(run.steps().filter((s) => s === 'reserveCardAttempt' || s === 'chargeAttempt')).toEqual(['reserveCardAttempt', 'chargeAttempt', 'reserveCardAttempt', 'reserveCardAttempt', 'chargeAttempt']);
    const [firstReservation, , second] = run.calls.filter((c) => c.step === 'reserveCardAttempt');
    expect(firstReservation!.input).toMatchObject({ attempt: 1, paymentMethodId: 'pm_unit', intent: { paymentId: input.paymentId } });
    expect(second!.input).toMatchObject({ attempt: 2, paymentMethodId: 'pm_unit' });
    const ended = run.inputsOf('recordRecoveryEnd');
    expect(ended).toHaveLength(1);
    expect(ended[0]).toMatchObject({ charge: { status: 'succeeded' }, attempt: { attempt: 2 }, recovery: { attempts: 2, next_attempt_at: null } });
  });

  it("a full card budget at the first attempt fails the payment with nothing charged: card_attempt_limit, no charge attempt", async () => {
    const input = recovering();
    const run = await bench.startPayment(input, {
      ...psp((id, attempt) => paid(id, attempt)),
      reserveCardAttempt: async () => ({ reserved: false, atMs: Date.now() + 60_000 }),
    });
    const final = await run.handle.result();
    expect(bodyOf(final)).toMatchObject({ id: input.paymentId, status: 'failed', failure: { code: 'card_attempt_limit' } });
    expect(run.inputsOf('chargeAttempt')).toEqual([]);
    expect(run.inputsOf('reserveCardAttempt').map((r) => r.attempt)).toEqual([1]);
    expect(run.inputsOf('recordPaymentFailure')[0]).toMatchObject({ failure: { code: 'card_attempt_limit' } });
  });

  it('a soft decline the route would move on with (try_again_later, advice 24) is not tried at once at the next PSP: the recovery retries it after the advice wait', async () => {
    const input = recovering();
    const run = await bench.startPayment(input, {
      plan: async () => ({ providers: ['psp-a', 'psp-b'], reason: 'test: a then b', retryableDeclineCodes: ['try_again_later'] }),
      chargeAttempt: async (step: ResolvedAttempt) =>
        step.attempt === 1
          ? { kind: 'charge', charge: charge(step.paymentId, { id: `${chargeIdOf(step.paymentId)}_1`, status: 'declined', declineCode: 'try_again_later', declineSignal: { networkCode: '05', category: null, adviceCode: '24' } }) }
          : paid(step.paymentId, step.attempt),
    });
    await run.handle.result();
    expect(run.inputsOf('recordAttempt')).toEqual([]);
    expect(run.inputsOf('chargeAttempt').map((a) => a.attempt)).toEqual([1, 2]);
    expect(run.inputsOf('recordRecovering')).toHaveLength(1);
    expect(run.inputsOf('recordRecoveryEnd')[0]).toMatchObject({ charge: { status: 'succeeded' }, attempt: { attempt: 2 }, recovery: { attempts: 2 } });
  });

  it('a hard decline on a retry stops the recovery: declined with stopped_because hard_decline, no attempt after it', async () => {
    const input = recovering();
    const run = await bench.startPayment(input, psp((id, attempt) => (attempt === 1 ? declined(id, 1) : declined(id, attempt, 'stolen_card'))));
    await run.handle.result();
    expect(run.inputsOf('chargeAttempt').map((a) => a.attempt)).toEqual([1, 2]);
    expect(run.inputsOf('recordRecoveryAttempt')).toEqual([]);
    expect(run.inputsOf('recordRecoveryEnd')[0]).toMatchObject({ charge: { declineCode: 'stolen_card' }, attempt: { attempt: 2 }, recovery: { stopped_because: 'hard_decline', attempts: 2 } });
  });

  it('a worker stopped between two retries: the next worker makes each retry once, none lost and none added', async () => {
    const first = await startWorkflowBench();
    const input = recovering();
    const run = await first.startPayment(input, psp((id, attempt) => (attempt < 3 ? declined(id, attempt) : paid(id, attempt))));
    // Stopped while the run waits for its first retry (the 202 is recorded).
    await expect.poll(() => run.steps().includes('recordRecovering'), { timeout: 10_000 }).toBe(true);
    await first.stop();
    const second = await startWorkflowBench({ taskQueue: first.taskQueue });
    try {
      // The first bench's client closed with it: the second one's waits for the result.
      await second.env.client.workflow.getHandle(run.handle.workflowId).result();
    } finally {
      await second.stop();
    }
    expect(run.inputsOf('chargeAttempt').map((a) => a.attempt)).toEqual([1, 2, 3]);
    expect(run.inputsOf('reserveCardAttempt').map((r) => r.attempt)).toEqual([1, 2, 3]);
    expect(run.inputsOf('recordRecoveryAttempt').map((r) => r.attempt)).toEqual([2]);
    expect(run.inputsOf('recordRecoveryEnd')[0]).toMatchObject({ charge: { status: 'succeeded' }, recovery: { attempts: 3 } });
  });

  it('a retry timer that fired while no worker was up, acted on after the window’s end: no attempt, declined window_elapsed (the window is checked in the task that makes the attempt)', async () => {
    const first = await startWorkflowBench();
    const input = recovering(SHORT_WINDOW_MS);
    const run = await first.startPayment(input, psp((id, attempt) => (attempt === 1 ? declined(id, 1) : paid(id, attempt))));
    await expect.poll(() => run.steps().includes('recordRecovering'), { timeout: 10_000 }).toBe(true);
    await first.stop();
    // The first retry's timer fires (before the window's end) into a run no worker serves.
    const windowEndsAt = Date.parse(run.inputsOf('recordRecovering')[0]!.recovery.window_ends_at);
    await expect.poll(() => Date.now() > windowEndsAt + 200, { timeout: 20_000, interval: 100 }).toBe(true);
    const second = await startWorkflowBench({ taskQueue: first.taskQueue });
    try {
      await second.env.client.workflow.getHandle(run.handle.workflowId).result();
    } finally {
      await second.stop();
    }
    expect(run.inputsOf('chargeAttempt').map((a) => a.attempt)).toEqual([1]);
    expect(run.inputsOf('reserveCardAttempt').map((r) => r.attempt)).toEqual([1]);
    const [end] = run.inputsOf('recordRecoveryEnd');
    expect(end).toMatchObject({ charge: { status: 'declined' }, attempt: null, recovery: { attempts: 1, next_attempt_at: null, stopped_because: 'window_elapsed' } });
    expect(end!.unusedReservation).toBeUndefined();
  });

  it('a reservation answered after the window’s end: no attempt, and the reservation is given back with the end (checked again in the task that makes the attempt)', async () => {
    const input = recovering(SHORT_WINDOW_MS);
    let windowEndsAt = 0;
    const run = await bench.startPayment(input, {
      ...psp((id, attempt) => (attempt === 1 ? declined(id, 1) : paid(id, attempt))),
      recordRecovering: async ({ payment, recovery }) => {
        windowEndsAt = Date.parse(recovery.window_ends_at);
        return { status: 202, body: JSON.stringify({ id: payment.paymentId, status: 'recovering' }), location: null };
      },
      reserveCardAttempt: async ({ attempt }) => {
        // The retry's reservation answers past the window's end, and past the workflow task's
        // heartbeat (a local activity keeps its task open; the next task's time is later).
        if (attempt === 2) await new Promise((resolve) => setTimeout(resolve, Math.max(0, windowEndsAt - Date.now()) + 9_000));
        return { reserved: true, atMs: Date.now() };
      },
    });
    await run.handle.result();
    expect(run.inputsOf('reserveCardAttempt').map((r) => r.attempt)).toEqual([1, 2]);
    expect(run.inputsOf('chargeAttempt').map((a) => a.attempt)).toEqual([1]);
    expect(run.inputsOf('recordRecoveryEnd')[0]).toMatchObject({ charge: { status: 'declined' }, attempt: null, unusedReservation: 2, recovery: { stopped_because: 'window_elapsed', next_attempt_at: null } });
  }, 40_000);

  describe('a cancel that comes while a retry is under way is taken, and that retry’s outcome decides it', () => {
    async function cancelDuringRetry(retry: (paymentId: string) => ChargeAttemptResult) {
      const input = recovering();
      const held = gate();
      const underWay = gate();
      const run = await bench.startPayment(input, {
        chargeAttempt: async (step: ResolvedAttempt) => {
          if (step.attempt === 1) return declined(step.paymentId, 1);
          underWay.open();
          await held.opened;
          return retry(step.paymentId);
        },
      });
      await underWay.opened;
      const request = cancelRequest();
      // Accepted while the retry is under way (the validator takes it), answered only once it ends.
      const update = await run.handle.startUpdate(cancelUpdate, { args: [request], waitForStage: 'ACCEPTED' });
      held.open();
      const answer = await update.result().then((response) => ({ response }), (error: unknown) => ({ error }));
      await run.handle.result();
      return { run, request, answer, input };
    }

    it('the retry is declined: the payment is canceled (the attempt recorded first), no attempt after it', async () => {
      const { run, answer, input } = await cancelDuringRetry((id) => declined(id, 2));
      expect('response' in answer && bodyOf(answer.response)).toMatchObject({ id: input.paymentId, status: 'canceled' });
      expect(run.inputsOf('chargeAttempt').map((a) => a.attempt)).toEqual([1, 2]);
      expect(run.inputsOf('recordRecoveryAttempt').map((r) => r.attempt)).toEqual([2]);
      expect(run.inputsOf('recordRecoveryAttempt')[0]!.recovery).toMatchObject({ attempts: 2, next_attempt_at: null });
      expect(run.inputsOf('recordCancel')).toHaveLength(1);
      expect(run.inputsOf('recordRecoveryEnd')).toEqual([]);
    });

    it('the retry is paid: the payment succeeds, and only then is the cancel refused, saying so, stored with the end', async () => {
      const { run, request, answer, input } = await cancelDuringRetry((id) => paid(id, 2));
      expect('error' in answer).toBe(true);
      const cause = (answer as { error: { cause?: { type?: string; message?: string } } }).error.cause;
      expect(cause?.type).toBe(FailureType.PaymentNotCancelable);
      expect(cause?.message).toBe(`payment ${input.paymentId} is succeeded: the recovery attempt under way when the cancel came was paid, so there is nothing to cancel (a refund gives the money back)`);
      expect(run.inputsOf('recordCancel')).toEqual([]);
      const [end] = run.inputsOf('recordRecoveryEnd');
      expect(end).toMatchObject({ charge: { status: 'succeeded' }, attempt: { attempt: 2 }, refusedCancel: { idempotency: request.idempotency, message: cause?.message } });
    });
  });
});
