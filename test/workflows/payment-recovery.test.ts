import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { recoveryPolicy } from '../../domain/recovery';
import type { ChargeAttemptResult } from '../../activities/provider-steps';
import { bodyOf, charge, chargeIdOf, paymentInput, startWorkflowBench, type Fakes, type ResolvedAttempt, type WorkflowBench } from '../helpers/workflow-worker';

/**
 * A recovering payment's run (workflows/payments.ts PaymentRun.recover, docs/recovery.md) with
 * fake steps: the card's budget, a retry's hard decline, and a worker stopped between two
 * retries. An hour is 0.36 s: the schedule's first retry comes 4.3 s after the first decline.
 */

const SCALE = 0.0001;
let bench: WorkflowBench;
beforeAll(async () => {
  bench = await startWorkflowBench();
});
afterAll(async () => bench?.stop());

const recovering = () =>
  paymentInput({ offSession: true, recovery: { windowMs: 14 * 24 * 3_600_000 * SCALE, policy: recoveryPolicy(SCALE), paymentMethodId: 'pm_unit' } });

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
});
