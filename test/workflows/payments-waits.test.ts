import { WorkflowUpdateFailedError, type WorkflowHandle } from '@temporalio/client';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { paymentWorkflow } from '../../workflows';
import { FailureType } from '../../shared/definitions';
import { cancelUpdate, captureUpdate, chargeReportSignal, paymentStatusQuery, type PaymentWorkflowInput } from '../../shared/payments';
import type { ProviderCharge } from '../../provider/types';
import { bodyOf, charge, chargeIdOf, gate, paymentInput, providerRefuses, response, scopedKey, startWorkflowBench, type Steps, type WorkflowBench } from '../helpers/workflow-worker';
import { recordedSteps } from '../helpers/recorded-steps';

/**
 * The payment workflow's waits, with fake activities: the customer's 3-D Secure
 * challenge (requires_action) and an asynchronous method's settlement (processing). Each test
 * forces one path: webhook, poll, deadline, command, late or repeated reports.
 */

let bench: WorkflowBench;
beforeAll(async () => {
  bench = await startWorkflowBench();
});
afterAll(async () => {
  await bench?.stop();
});

/** A short poll, so a lost webhook is made up for within the test. */
const fastPoll = { firstMs: 200, maxMs: 400 };
/** Polls that come only after the test is over: only webhooks (signals) can decide the payment. */
const noPoll = { firstMs: 60 * 60_000, maxMs: 60 * 60_000 };

const challenge = (paymentId: string, fields: Partial<ProviderCharge> = {}) =>
  charge(paymentId, { status: 'requires_action', nextAction: { type: 'redirect_to_url', url: 'http://127.0.0.1:1/challenge', returnUrl: null }, ...fields });
const pending = (paymentId: string) => charge(paymentId, { status: 'processing' });

function threeDS(overrides: Partial<PaymentWorkflowInput> = {}) {
  return paymentInput({ paymentMethod: 'pm_card_threeDSecureRequired', statusPoll: noPoll, authenticationWindowMs: 10 * 60_000, ...overrides });
}

/**
 * Waits until the run waits in `status`: its memo says it waits (a payment is `processing` from
 * its first moment, so the status alone would not tell the wait has begun).
 */
async function waitsIn(run: { handle: WorkflowHandle<typeof paymentWorkflow> }, status: string): Promise<void> {
  await expect.poll(() => run.handle.query(paymentStatusQuery), { timeout: 10_000, interval: 50 }).toBe(status);
  if (status !== 'requires_capture') {
    await expect.poll(async () => (await run.handle.describe()).memo?.waiting_for !== undefined, { timeout: 10_000, interval: 50 }).toBe(true);
  }
}

const webhook = (handle: WorkflowHandle<typeof paymentWorkflow>, charged: ProviderCharge, eventId = `evt_${Math.random().toString(36).slice(2)}`) =>
  handle.signal(chargeReportSignal, { source: 'webhook', eventId, charge: charged });

describe('await customer (3-D Secure)', () => {
  it('answers 202 requires_action first, then is decided by the webhook (rules out a payment stuck waiting after the customer approved)', async () => {
    const input = threeDS();
    const first = response(202, { id: input.paymentId, status: 'requires_action' });
    const run = await bench.startPayment(input, {
      chargeAnswer: async () => challenge(input.paymentId),
      recordChargeOutcome: async () => first,
    });
    await waitsIn(run, 'requires_action');
    await webhook(run.handle, charge(input.paymentId, { status: 'succeeded', amountCapturedMinor: 4200 }));

    expect(await run.handle.result()).toEqual(first);
    expect(run.steps()).toEqual(['chargeAttempt', 'recordChargeOutcome', 'recordSettlement']);
    expect(run.inputsOf('recordSettlement')[0]!.charge.status).toBe('succeeded');
    expect(await run.handle.query(paymentStatusQuery)).toBe('succeeded');
  });

  it('records a denied challenge as declined (rules out a failed authentication counted as paid)', async () => {
    const input = threeDS();
    const run = await bench.startPayment(input, { chargeAnswer: async () => challenge(input.paymentId) });
    await waitsIn(run, 'requires_action');
    await webhook(run.handle, charge(input.paymentId, { status: 'declined', declineCode: 'authentication_failed' }));
    await run.handle.result();
    expect(run.inputsOf('recordSettlement')[0]!.charge).toMatchObject({ status: 'declined', declineCode: 'authentication_failed' });
    expect(await run.handle.query(paymentStatusQuery)).toBe('declined');
  });

  it('is decided by its own poll when the webhook is lost (rules out a lost webhook leaving the payment waiting)', async () => {
    const input = threeDS({ statusPoll: fastPoll });
    let polls = 0;
    const run = await bench.startPayment(input, {
      chargeAnswer: async () => challenge(input.paymentId),
      retrieveCharge: async () => (++polls < 3 ? challenge(input.paymentId) : charge(input.paymentId, { status: 'succeeded', amountCapturedMinor: 4200 })),
    });
    await run.handle.result();
    expect(polls).toBe(3);
    expect(run.steps().filter((s) => s === 'recordSettlement')).toHaveLength(1);
    expect(await run.handle.query(paymentStatusQuery)).toBe('succeeded');
  });

  it('applies duplicated and reordered webhooks once: a stale wait changes nothing, the second success nothing (rules out a double booking or a final state left)', async () => {
    const input = threeDS();
    const run = await bench.startPayment(input, { chargeAnswer: async () => challenge(input.paymentId) });
    await waitsIn(run, 'requires_action');
    const success = charge(input.paymentId, { status: 'succeeded', amountCapturedMinor: 4200 });
    await webhook(run.handle, challenge(input.paymentId), 'evt_1');
    await webhook(run.handle, pending(input.paymentId), 'evt_stale');
    await webhook(run.handle, charge('someone_else', { status: 'succeeded' }), 'evt_other_charge');
    // Two copies at once: the run may close on either, and a signal to a closed run is refused
    // (the inbound route acknowledges that: test/integration/waiting-payments.test.ts). One lands.
    const sent = await Promise.allSettled([webhook(run.handle, success, 'evt_2'), webhook(run.handle, success, 'evt_2')]);
    expect(sent.some((s) => s.status === 'fulfilled')).toBe(true);
    await run.handle.result();
    // The run records the outcome once, with the success (its history: a call may repeat when the second copy
    // arrives while the first one's task completes, test/helpers/recorded-steps.ts).
    expect((await recordedSteps(run.handle)).filter((s) => s === 'recordSettlement')).toHaveLength(1);
    expect(new Set(run.inputsOf('recordSettlement').map((i) => i.charge.status))).toEqual(new Set(['succeeded']));
    expect(await run.handle.query(paymentStatusQuery)).toBe('succeeded');
  });

  it('a webhook decides it while a poll hangs on a PSP outage (rules out the poll holding up the outcome)', async () => {
    const input = threeDS({ statusPoll: { firstMs: 200, maxMs: 200 } });
    const outage = gate();
    const run = await bench.startPayment(input, {
      chargeAnswer: async () => challenge(input.paymentId),
      retrieveCharge: async ({ paymentId }) => {
        await outage.opened;
        return challenge(paymentId);
      },
    });
    await expect.poll(() => run.steps().includes('retrieveCharge'), { timeout: 10_000, interval: 50 }).toBe(true);
    await webhook(run.handle, charge(input.paymentId, { status: 'succeeded', amountCapturedMinor: 4200 }));
    await run.handle.result();
    expect(await run.handle.query(paymentStatusQuery)).toBe('succeeded');
    outage.open();
  });

  it('a challenge its PSP did not name (Adyen answers a redirect without its pspReference) is named by that PSP’s report under our reference; another PSP’s report under it names nothing (rules out a wait no report can decide, and a stale charge deciding it)', async () => {
    const input = threeDS();
    const run = await bench.startPayment(input, { chargeAnswer: async () => challenge(input.paymentId, { id: '' }) });
    await waitsIn(run, 'requires_action');
    // An earlier charge at another PSP, declined under the same reference: not the charge waited on.
    await run.handle.signal(chargeReportSignal, { source: 'webhook', eventId: 'evt_elsewhere', charge: charge(input.paymentId, { id: 'ch_elsewhere', status: 'declined', declineCode: 'processing_error' }), provider: 'sandbox-b' });
    // A report of the PSP under another reference names nothing either.
    await run.handle.signal(chargeReportSignal, { source: 'webhook', eventId: 'evt_other', charge: charge('pay_other', { id: 'PSPOTHER', status: 'declined', declineCode: 'card_declined' }), provider: 'sandbox' });
    // Nor a report that does not say which PSP it came from.
    await webhook(run.handle, charge(input.paymentId, { id: 'PSPUNSAID', status: 'declined', declineCode: 'card_declined' }), 'evt_unsaid');
    expect(await run.handle.query(paymentStatusQuery)).toBe('requires_action');
    await run.handle.signal(chargeReportSignal, { source: 'webhook', eventId: 'evt_named', charge: charge(input.paymentId, { id: 'PSPREF', status: 'succeeded', amountCapturedMinor: 4200 }), provider: 'sandbox' });
    await run.handle.result();
    expect(run.inputsOf('recordSettlement').map((i) => `${i.charge.id} ${i.charge.status}`)).toEqual(['PSPREF succeeded']);
    expect(await run.handle.query(paymentStatusQuery)).toBe('succeeded');
  });

  it('an abandoned challenge its PSP never named is voided by our reference: the void names no charge (rules out a void of a charge id the PSP never gave)', async () => {
    const input = threeDS({ authenticationWindowMs: 1500 });
    const run = await bench.startPayment(input, { chargeAnswer: async () => challenge(input.paymentId, { id: '' }) });
    await run.handle.result();
    expect(run.steps().slice(-2)).toEqual(['voidCharge', 'recordExpiry']);
    expect(run.inputsOf('voidCharge').map((i) => i.chargeId)).toEqual(['']);
    expect(await run.handle.query(paymentStatusQuery)).toBe('expired');
  });

  it('expires an abandoned challenge when its window ends, voiding it at the PSP (rules out a payment that waits forever)', async () => {
    const input = threeDS({ authenticationWindowMs: 1500, statusPoll: { firstMs: 500, maxMs: 500 } });
    const run = await bench.startPayment(input, { chargeAnswer: async () => challenge(input.paymentId) });
    await run.handle.result();
    expect(run.steps()).toContain('retrieveCharge');
    expect(run.steps().slice(-2)).toEqual(['voidCharge', 'recordExpiry']);
    expect(run.inputsOf('recordExpiry')[0]!.failure.code).toBe('authentication_expired');
    expect(await run.handle.query(paymentStatusQuery)).toBe('expired');
  });

  it('gives a success the PSP timestamped after the window back and says why (rules out keeping money of a payment the merchant sees as expired)', async () => {
    const input = threeDS({ authenticationWindowMs: 800 });
    const run = await bench.startPayment(input, {
      chargeAnswer: async () => challenge(input.paymentId),
      retrieveCharge: async () => charge(input.paymentId, { status: 'succeeded', amountCapturedMinor: 4200, succeededAt: new Date(Date.now() + 60_000).toISOString() }),
    });
    await run.handle.result();
    expect(run.steps().slice(-3)).toEqual(['retrieveCharge', 'refundCharge', 'recordExpiry']);
    expect(run.inputsOf('refundCharge')[0]).toMatchObject({ chargeId: chargeIdOf(input.paymentId), amountMinor: 4200 });
    expect(run.inputsOf('recordExpiry')[0]!.failure.code).toBe('late_success_refunded');
  });

  it('goes on to await capture after a challenge (manual capture: requires_action → requires_capture → succeeded)', async () => {
    const input = threeDS({ captureMethod: 'manual' });
    const run = await bench.startPayment(input, { chargeAnswer: async () => challenge(input.paymentId) });
    await waitsIn(run, 'requires_action');
    await webhook(run.handle, charge(input.paymentId, { status: 'requires_capture' }));
    await waitsIn(run, 'requires_capture');
    const captured = await run.handle.executeUpdate(captureUpdate, {
      args: [{ amountMinor: null, idempotency: scopedKey('POST /v1/payments/{id}/capture'), requestId: 'req_capture' }],
    });
    await run.handle.result();
    expect(bodyOf(captured).status).toBe('succeeded');
    expect(run.steps()).toEqual(['chargeAttempt', 'recordChargeOutcome', 'recordSettlement', 'captureCharge', 'recordCapture']);
  });

  it('refuses capture while the customer authenticates, and cancels by voiding the challenge (the table’s commands for requires_action)', async () => {
    const input = threeDS({ captureMethod: 'manual' });
    const run = await bench.startPayment(input, { chargeAnswer: async () => challenge(input.paymentId) });
    await waitsIn(run, 'requires_action');
    const refused = await run.handle
      .executeUpdate(captureUpdate, { args: [{ amountMinor: null, idempotency: scopedKey('POST /v1/payments/{id}/capture'), requestId: 'r' }] })
      .then(() => undefined, (error: unknown) => error);
    expect(refused).toBeInstanceOf(WorkflowUpdateFailedError);
    expect(((refused as WorkflowUpdateFailedError).cause as { type?: string }).type).toBe(FailureType.PaymentNotCapturable);
    expect((refused as WorkflowUpdateFailedError).cause?.message).toMatch(/requires_action; capture is accepted only while it is requires_capture/);

    const canceled = await run.handle.executeUpdate(cancelUpdate, { args: [{ idempotency: scopedKey('POST /v1/payments/{id}/cancel'), requestId: 'r' }] });
    await run.handle.result();
    expect(bodyOf(canceled).status).toBe('canceled');
    expect(run.steps().slice(-2)).toEqual(['voidCharge', 'recordCancel']);
    expect(await run.handle.query(paymentStatusQuery)).toBe('canceled');
  });

  it('shows why and until when it waits in the memo, and its search attribute reads requires_action', async () => {
    const input = threeDS();
    const run = await bench.startPayment(input, { chargeAnswer: async () => challenge(input.paymentId) });
    await waitsIn(run, 'requires_action');
    await expect
      .poll(async () => (await run.handle.describe()).memo?.waiting_for, { timeout: 10_000, interval: 100 })
      .toBe('customer authentication (3-D Secure)');
    const description = await run.handle.describe();
    expect(Date.parse(String(description.memo?.waiting_until))).toBeGreaterThan(Date.now());
    expect(description.searchAttributes?.PaymentStatus).toEqual(['requires_action']);
    await webhook(run.handle, charge(input.paymentId, { status: 'declined' }));
    await run.handle.result();
    expect((await run.handle.describe()).memo?.waiting_for).toBeUndefined(); // upsertMemo(null) removes it
  });
});

describe('the window ends: the PSP\'s clock decides, asked within the decision grace', () => {
  /** A charge's fields as the PSP reports a success at `at` (its own clock). */
  const succeededAt = (paymentId: string, at: Date) => charge(paymentId, { status: 'succeeded', amountCapturedMinor: 4200, succeededAt: at.toISOString(), authorizedAt: at.toISOString() });
  const inWindow = () => new Date(Date.now() - 100);

  it('a success timestamped inside the window, its webhook lost and no poll yet, succeeds at the window\'s end: nothing refunded (rules out turning away a customer who approved in time)', async () => {
    const input = threeDS({ authenticationWindowMs: 1000 });
    let approvedAt = new Date();
    const run = await bench.startPayment(input, {
      chargeAnswer: async () => {
        approvedAt = inWindow();
        return challenge(input.paymentId);
      },
      retrieveCharge: async () => succeededAt(input.paymentId, approvedAt),
    });
    await run.handle.result();
    expect(run.steps()).toEqual(['chargeAttempt', 'recordChargeOutcome', 'retrieveCharge', 'recordSettlement']);
    expect(await run.handle.query(paymentStatusQuery)).toBe('succeeded');
  });

  it('a success without the PSP\'s timestamp is treated as late: given back (rules out keeping money on a guess)', async () => {
    const input = threeDS({ authenticationWindowMs: 800 });
    const run = await bench.startPayment(input, {
      chargeAnswer: async () => challenge(input.paymentId),
      retrieveCharge: async () => charge(input.paymentId, { status: 'succeeded', amountCapturedMinor: 4200 }),
    });
    await run.handle.result();
    expect(run.inputsOf('recordExpiry')[0]!.failure.code).toBe('late_success_refunded');
  });

  it('the PSP unreachable at the window\'s end: the run keeps asking, and the in-window success wins once it answers (rules out expiring on an outage)', async () => {
    const input = threeDS({ authenticationWindowMs: 800, decisionGraceMs: 30_000 });
    let approvedAt = new Date();
    let refusals = 0;
    const run = await bench.startPayment(input, {
      chargeAnswer: async () => {
        approvedAt = inWindow();
        return challenge(input.paymentId);
      },
      retrieveCharge: async () => {
        if (++refusals <= 3) throw new Error('connect ECONNREFUSED');
        return succeededAt(input.paymentId, approvedAt);
      },
    });
    await run.handle.result();
    expect(run.calls.filter((c) => c.step === 'retrieveCharge').map((c) => c.attempt)).toEqual([1, 2, 3, 4]);
    expect(run.steps()).not.toContain('voidCharge');
    expect(await run.handle.query(paymentStatusQuery)).toBe('succeeded');
  });

  it('the PSP still unreachable after the grace: the challenge is voided all the same, then expired (rules out a run that waits on the PSP forever)', async () => {
    const input = threeDS({ authenticationWindowMs: 800, decisionGraceMs: 1500 });
    const run = await bench.startPayment(input, {
      chargeAnswer: async () => challenge(input.paymentId),
      retrieveCharge: async () => {
        throw new Error('connect ECONNREFUSED');
      },
    });
    await run.handle.result();
    expect(run.steps().slice(-2)).toEqual(['voidCharge', 'recordExpiry']);
    expect(run.inputsOf('recordExpiry')[0]!.failure.code).toBe('authentication_expired');
  });

  it('a challenge still open is voided first; a success the void finds, timestamped inside the window, wins (rules out a success slipping in after the decision)', async () => {
    const input = threeDS({ authenticationWindowMs: 800 });
    let approvedAt = new Date();
    let looks = 0;
    const run = await bench.startPayment(input, {
      chargeAnswer: async () => {
        approvedAt = inWindow();
        return challenge(input.paymentId);
      },
      retrieveCharge: async () => (++looks === 1 ? challenge(input.paymentId) : succeededAt(input.paymentId, approvedAt)),
      voidCharge: async () => {
        throw providerRefuses('charge already succeeded');
      },
    });
    await run.handle.result();
    expect(run.steps().slice(-4)).toEqual(['retrieveCharge', 'voidCharge', 'retrieveCharge', 'recordSettlement']);
    expect(await run.handle.query(paymentStatusQuery)).toBe('succeeded');
  });

  it('a bank debit: a success timestamped inside the settlement window succeeds; one after it is given back', async () => {
    const inTime = paymentInput({ paymentMethod: 'pm_sepa_debit', statusPoll: noPoll, settlementWindowMs: 800 });
    let settledAt = new Date();
    const settled = await bench.startPayment(inTime, {
      chargeAnswer: async () => {
        settledAt = inWindow();
        return pending(inTime.paymentId);
      },
      retrieveCharge: async () => succeededAt(inTime.paymentId, settledAt),
    });
    await settled.handle.result();
    expect(await settled.handle.query(paymentStatusQuery)).toBe('succeeded');
    expect(settled.steps()).not.toContain('refundCharge');

    const late = paymentInput({ paymentMethod: 'pm_sepa_debit', statusPoll: noPoll, settlementWindowMs: 800 });
    const expired = await bench.startPayment(late, {
      chargeAnswer: async () => pending(late.paymentId),
      retrieveCharge: async () => succeededAt(late.paymentId, new Date(Date.now() + 60_000)),
    });
    await expired.handle.result();
    expect(expired.inputsOf('recordExpiry')[0]!.failure.code).toBe('late_success_refunded');
    expect(expired.steps()).not.toContain('voidCharge');
  });
});

describe('await settlement (asynchronous methods)', () => {
  const sepa = (overrides: Partial<PaymentWorkflowInput> = {}) =>
    paymentInput({ paymentMethod: 'pm_sepa_debit', statusPoll: noPoll, settlementWindowMs: 10 * 60_000, ...overrides });

  it('waits in processing and settles on the webhook (SEPA succeeded)', async () => {
    const input = sepa();
    const run = await bench.startPayment(input, { chargeAnswer: async () => pending(input.paymentId) });
    await waitsIn(run, 'processing');
    await webhook(run.handle, charge(input.paymentId, { status: 'succeeded', amountCapturedMinor: 4200 }));
    await run.handle.result();
    expect(run.steps()).toEqual(['chargeAttempt', 'recordChargeOutcome', 'recordSettlement']);
    expect(await run.handle.query(paymentStatusQuery)).toBe('succeeded');
  });

  it('records a failed debit found by the poll as declined (SEPA failed, webhook lost)', async () => {
    const input = sepa({ statusPoll: fastPoll });
    const run = await bench.startPayment(input, {
      chargeAnswer: async () => pending(input.paymentId),
      retrieveCharge: async () => charge(input.paymentId, { status: 'declined', declineCode: 'debit_failed' }),
    });
    await run.handle.result();
    expect(run.inputsOf('recordSettlement')[0]!.charge.declineCode).toBe('debit_failed');
  });

  it('refuses cancel while processing (the table: processing accepts no command)', async () => {
    const input = sepa();
    const run = await bench.startPayment(input, { chargeAnswer: async () => pending(input.paymentId) });
    await waitsIn(run, 'processing');
    const refused = await run.handle
      .executeUpdate(cancelUpdate, { args: [{ idempotency: scopedKey('POST /v1/payments/{id}/cancel'), requestId: 'r' }] })
      .then(() => undefined, (error: unknown) => error);
    expect(((refused as WorkflowUpdateFailedError).cause as { type?: string }).type).toBe(FailureType.PaymentNotCancelable);
    await webhook(run.handle, charge(input.paymentId, { status: 'succeeded', amountCapturedMinor: 4200 }));
    await run.handle.result();
  });

  it('expires when the PSP gives no outcome within the settlement window, without voiding (a debit cannot be voided)', async () => {
    const input = sepa({ settlementWindowMs: 1000, statusPoll: { firstMs: 300, maxMs: 300 } });
    const run = await bench.startPayment(input, {
      chargeAnswer: async () => pending(input.paymentId),
      retrieveCharge: async () => pending(input.paymentId),
    });
    await run.handle.result();
    expect(run.steps()).not.toContain('voidCharge');
    expect(run.inputsOf('recordExpiry')[0]!.failure.code).toBe('settlement_expired');
    expect(await run.handle.query(paymentStatusQuery)).toBe('expired');
  });
});
