import { WorkflowUpdateFailedError, type WorkflowHandle } from '@temporalio/client';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { paymentWorkflow } from '../../workflows';
import { FailureType } from '../../shared/definitions';
import { captureUpdate, cancelUpdate, chargeReportSignal, challengeReturnUpdate, paymentStatusQuery, type PaymentWorkflowInput } from '../../shared/payments';
import { bodyOf, charge, paymentInput, providerRefuses, response, scopedKey, startWorkflowBench, type WorkflowBench } from '../helpers/workflow-worker';

/**
 * A payment's run continues as new during its waits before it runs out of room for updates
 * (Temporal's 2 000 per run) or history: with fake activities and a bound of a few updates
 * (input.continueAfterUpdates), each run taking returns the PSP refuses hands its wait on to the
 * next one, to the same deadline; the genuine return, the capture and the cancel then work.
 */

let bench: WorkflowBench;
beforeAll(async () => {
  bench = await startWorkflowBench();
});
afterAll(async () => {
  await bench?.stop();
});

/** Polls that come only after the test is over. */
const noPoll = { firstMs: 60 * 60_000, maxMs: 60 * 60_000 };
const challenge = (paymentId: string) => charge(paymentId, { status: 'requires_action', nextAction: { type: 'redirect_to_url', url: 'http://127.0.0.1:1/challenge', returnUrl: null } });

function threeDS(overrides: Partial<PaymentWorkflowInput> = {}) {
  return paymentInput({ paymentMethod: 'pm_card_threeDSecureRequired', captureMethod: 'manual', statusPoll: noPoll, authenticationWindowMs: 10 * 60_000, continueAfterUpdates: 3, ...overrides });
}

type Handle = WorkflowHandle<typeof paymentWorkflow>;

/** The runs of the payment's workflow id, oldest first, and how each closed. */
async function runsOf(handle: Handle): Promise<string[]> {
  const statuses: string[] = [];
  for await (const execution of bench.env.client.workflow.list({ query: `WorkflowId = '${handle.workflowId}'` })) statuses.push(execution.status.name);
  return statuses;
}

async function waitsForCustomer(handle: Handle): Promise<void> {
  await expect.poll(() => handle.query(paymentStatusQuery), { timeout: 10_000, interval: 50 }).toBe('requires_action');
  await expect.poll(async () => (await handle.describe()).memo?.waiting_for !== undefined, { timeout: 10_000, interval: 50 }).toBe(true);
}

/** A return the PSP refuses (unknown redirectResult), one after the other: each reaches the run before the next is sent. */
async function refusedReturns(handle: Handle, count: number, tag: string): Promise<void> {
  for (let i = 0; i < count; i++) {
    const error = await handle.executeUpdate(challengeReturnUpdate, { updateId: `${tag}-${i}`, args: [{ redirectResult: `junk${tag}${i}`, requestId: 'req_junk' }] }).then(
      () => null,
      (e: unknown) => e,
    );
    expect(error).toBeInstanceOf(WorkflowUpdateFailedError);
    expect(((error as WorkflowUpdateFailedError).cause as { type?: string }).type).toBe(FailureType.ChallengeReturnRefused);
  }
}

describe('the payment run continues as new before it runs out of room', () => {
  it("in the customer's wait: a flood of refused returns moves the wait on to new runs, to the same deadline; the genuine return and then the capture work (rules out a payment whose capture fails once its run's updates are used up)", async () => {
    const input = threeDS();
    const first = response(202, { id: input.paymentId, status: 'requires_action' });
    let genuine = false;
    const run = await bench.startPayment(input, {
      chargeAnswer: async () => challenge(input.paymentId),
      recordChargeOutcome: async () => first,
      completeChallenge: async () => {
        if (!genuine) throw providerRefuses('unknown redirectResult');
        return charge(input.paymentId, { status: 'requires_capture', authorizedAt: new Date().toISOString() });
      },
    });
    await waitsForCustomer(run.handle);
    const before = await run.handle.describe();
    await refusedReturns(run.handle, 7, 'a');
    // Two runs continued as new (after 3 and 6 updates); the one now running waits to the same deadline.
    await expect.poll(() => runsOf(run.handle), { timeout: 10_000, interval: 100 }).toEqual(expect.arrayContaining(['CONTINUED_AS_NEW', 'CONTINUED_AS_NEW', 'RUNNING']));
    const now = await run.handle.describe();
    expect(now.runId).not.toBe(before.runId);
    expect(now.memo?.waiting_until).toBe(before.memo?.waiting_until);
    expect(await run.handle.query(paymentStatusQuery)).toBe('requires_action');

    genuine = true;
    const returned = await run.handle.executeUpdate(challengeReturnUpdate, { updateId: 'genuine', args: [{ redirectResult: 'genuine', requestId: 'req_back' }] });
    expect(returned.status).toBe('requires_capture');
    const captured = await run.handle.executeUpdate(captureUpdate, { args: [{ amountMinor: null, idempotency: scopedKey('POST /v1/payments/{id}/capture'), requestId: 'req_capture' }] });
    expect(bodyOf(captured).status).toBe('succeeded');
    // The run's result is still the create request's first answer.
    expect(await run.handle.result()).toEqual(first);
    expect(run.steps().filter((s) => s === 'completeChallenge')).toHaveLength(8);
    expect(run.steps().filter((s) => s === 'chargeAttempt')).toHaveLength(1);
  });

  it('in the wait for capture: updates past the bound move the wait on, carrying the authorization and its window; the cancel then voids it', async () => {
    const input = threeDS({ paymentMethod: 'pm_card_visa', continueAfterUpdates: 2 });
    const first = response(201, { id: input.paymentId, status: 'requires_capture' });
    const run = await bench.startPayment(input, {
      chargeAnswer: async () => charge(input.paymentId, { status: 'requires_capture' }),
      recordChargeOutcome: async () => first,
    });
    await expect.poll(() => run.handle.query(paymentStatusQuery), { timeout: 10_000, interval: 50 }).toBe('requires_capture');
    // Captures refused by their validator take no room; the run's other updates do (the create request's firstAnswer).
    for (let i = 0; i < 5; i++) await run.handle.executeUpdate('firstAnswer', { updateId: `first-${i}`, args: [] });
    await expect.poll(async () => (await runsOf(run.handle)).filter((s) => s === 'CONTINUED_AS_NEW').length, { timeout: 10_000, interval: 100 }).toBeGreaterThanOrEqual(2);
    const canceled = await run.handle.executeUpdate(cancelUpdate, { args: [{ idempotency: scopedKey('POST /v1/payments/{id}/cancel'), requestId: 'req_cancel' }] });
    expect(canceled).toBeDefined();
    expect(await run.handle.result()).toEqual(first);
    expect(run.steps().filter((s) => s === 'voidCharge')).toHaveLength(1);
    expect(await run.handle.query(paymentStatusQuery)).toBe('canceled');
  });

  it('the new run takes the PSP\'s report as the old one would: a webhook after it continued decides the payment', async () => {
    const input = threeDS({ captureMethod: 'automatic', continueAfterUpdates: 1 });
    const run = await bench.startPayment(input, {
      chargeAnswer: async () => challenge(input.paymentId),
      completeChallenge: async () => {
        throw providerRefuses('unknown redirectResult');
      },
    });
    await waitsForCustomer(run.handle);
    await refusedReturns(run.handle, 1, 'b');
    await expect.poll(async () => (await runsOf(run.handle)).includes('CONTINUED_AS_NEW'), { timeout: 10_000, interval: 100 }).toBe(true);
    await run.handle.signal(chargeReportSignal, { source: 'webhook', eventId: 'evt_ok', charge: charge(input.paymentId, { status: 'succeeded', amountCapturedMinor: 4200 }), provider: 'sandbox' });
    await run.handle.result();
    expect(await run.handle.query(paymentStatusQuery)).toBe('succeeded');
    expect(run.inputsOf('recordSettlement')[0]!.charge.status).toBe('succeeded');
  });
});
