import { randomBytes } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { LateChargeInput } from '../../shared/payments';
import { providerSubKey } from '../../shared/keys';
import { charge, chargeIdOf, failedRefund, providerRefuses, startWorkflowBench, type WorkflowBench } from '../helpers/workflow-worker';

/**
 * lateChargeWorkflow's decisions, with fake activities: money the PSP reports after its payment
 * ended without money is given back once. End to end (webhook after expiry, duplicates):
 * test/integration/waiting-races.test.ts.
 */

let bench: WorkflowBench;
beforeAll(async () => {
  bench = await startWorkflowBench();
});
afterAll(async () => {
  await bench?.stop();
});

function lateInput(): LateChargeInput {
  const paymentId = `pay_${randomBytes(6).toString('hex')}`;
  return { provider: 'sandbox', chargeId: chargeIdOf(paymentId), paymentId, eventId: 'evt_late' };
}

describe('late charge workflow', () => {
  it('refunds what the PSP kept under the payment’s compensation sub-key and records it (the sub-key the payment’s own run uses: one refund, whoever asks)', async () => {
    const input = lateInput();
    const run = await bench.startLateCharge(input, {
      retrieveCharge: async ({ paymentId }) => charge(paymentId, { status: 'succeeded', amountMinor: 4200, amountCapturedMinor: 4200 }),
    });
    expect(await run.handle.result()).toEqual({ action: 'refunded', reason: 'the payment is expired', refundId: `re_${providerSubKey.compensation(input.paymentId)}` });
    expect(run.steps()).toEqual(['lateChargeStanding', 'retrieveCharge', 'refundCharge', 'recordLateCharge']);
    expect(run.inputsOf('refundCharge')[0]).toEqual({ subKey: providerSubKey.compensation(input.paymentId), chargeId: input.chargeId, amountMinor: 4200, reference: input.paymentId, provider: 'sandbox' });
    expect(run.inputsOf('recordLateCharge')[0]!.outcome).toEqual({ kind: 'refunded', refundId: `re_${providerSubKey.compensation(input.paymentId)}`, amountMinor: 4200, currency: 'EUR' });
  });

  it('gives nothing back when the PSP holds nothing (already refunded: the payment’s run gave it back first)', async () => {
    const run = await bench.startLateCharge(lateInput(), {
      retrieveCharge: async ({ paymentId }) => charge(paymentId, { status: 'succeeded', amountCapturedMinor: 4200, amountRefundedMinor: 4200 }),
    });
    expect(await run.handle.result()).toMatchObject({ action: 'nothing' });
    expect(run.steps()).toEqual(['lateChargeStanding', 'retrieveCharge']);
  });

  it('gives nothing back for a payment whose money is its own (succeeded), without asking the PSP', async () => {
    const run = await bench.startLateCharge(lateInput(), {
      lateChargeStanding: async () => ({ decision: 'skip', status: 'succeeded', reason: 'the payment is succeeded' }),
    });
    expect(await run.handle.result()).toEqual({ action: 'nothing', reason: 'the payment is succeeded', refundId: null });
    expect(run.steps()).toEqual(['lateChargeStanding']);
  });

  it('voids a late authorization', async () => {
    const run = await bench.startLateCharge(lateInput(), { retrieveCharge: async ({ paymentId }) => charge(paymentId, { status: 'requires_capture' }) });
    expect(await run.handle.result()).toMatchObject({ action: 'voided' });
    expect(run.steps()).toEqual(['lateChargeStanding', 'retrieveCharge', 'voidCharge', 'recordLateCharge']);
  });

  it('a refund the PSP refuses is recorded for an operator (needs_operator), not reported as given back', async () => {
    const run = await bench.startLateCharge(lateInput(), {
      retrieveCharge: async ({ paymentId }) => charge(paymentId, { status: 'succeeded', amountCapturedMinor: 4200 }),
      refundCharge: async ({ chargeId, amountMinor }) => failedRefund(chargeId, amountMinor, 'refunds disabled'),
    });
    expect(await run.handle.result()).toMatchObject({ action: 'refund_failed' });
    expect(run.inputsOf('recordLateCharge')[0]!.outcome).toEqual({ kind: 'refund_failed', message: 'refunds disabled' });
  });

  it('looks again when the charge moved on (void refused, then captured): the capture is refunded', async () => {
    let looks = 0;
    const run = await bench.startLateCharge(lateInput(), {
      retrieveCharge: async ({ paymentId }) =>
        ++looks === 1 ? charge(paymentId, { status: 'requires_capture' }) : charge(paymentId, { status: 'succeeded', amountCapturedMinor: 4200 }),
      voidCharge: async () => {
        throw providerRefuses('charge is succeeded');
      },
    });
    expect(await run.handle.result()).toMatchObject({ action: 'refunded' });
    expect(run.steps()).toEqual(['lateChargeStanding', 'retrieveCharge', 'voidCharge', 'retrieveCharge', 'refundCharge', 'recordLateCharge']);
  });

  describe('at a kind whose modifications are notified (the signed notification is the charge)', () => {
    /** The run as the charge events step starts it there: the notification's charge in its input, no retrieval. */
    function notifiedInput(fields: Parameters<typeof charge>[1]): LateChargeInput {
      const input = { ...lateInput(), provider: 'adyen-test' };
      return { ...input, charge: charge(input.paymentId, fields) };
    }

    it('an authorization whose stored CANCELLATION says the PSP canceled it (the payment’s own void, notified first) holds nothing: no void is asked', async () => {
      const run = await bench.startLateCharge(notifiedInput({ status: 'requires_capture' }), {
        storedCancellation: async () => ({ status: 'canceled' }),
      });
      expect(await run.handle.result()).toMatchObject({ action: 'nothing' });
      expect(run.steps()).toEqual(['lateChargeStanding', 'storedCancellation']);
    });

    it('a void answered `received` again under the payment’s key is decided by the CANCELLATION stored before the run asked (here refused: needs an operator), with no signal', async () => {
      let looks = 0;
      const run = await bench.startLateCharge(notifiedInput({ status: 'requires_capture' }), {
        voidCharge: async ({ paymentId }) => charge(paymentId, { status: 'requires_capture' }),
        storedCancellation: async () => (++looks === 1 ? null : { status: 'cancel_failed' }),
      });
      expect(await run.handle.result()).toMatchObject({ action: 'void_failed' });
      expect(run.steps()).toEqual(['lateChargeStanding', 'storedCancellation', 'voidCharge', 'storedCancellation', 'recordLateCharge']);
      expect(run.inputsOf('recordLateCharge')[0]!.outcome).toEqual({ kind: 'void_failed', message: 'the PSP refused the void: the cancel failed' });
    });

    it('a refund answered `pending` again under the compensation key is decided by the REFUND stored before the run asked, with no signal', async () => {
      const input = notifiedInput({ status: 'succeeded', amountCapturedMinor: 4200 });
      const run = await bench.startLateCharge(input, {
        refundCharge: async ({ subKey, chargeId, amountMinor }) => ({ id: `re_${subKey}`, chargeId, status: 'pending', amountMinor, failureCode: null, failureMessage: null }),
        storedRefundSettlement: async () => ({ status: 'succeeded' }),
      });
      expect(await run.handle.result()).toMatchObject({ action: 'refunded' });
      expect(run.steps()).toEqual(['lateChargeStanding', 'refundCharge', 'storedRefundSettlement', 'recordLateCharge']);
      expect(run.inputsOf('storedRefundSettlement')[0]).toEqual({ provider: 'adyen-test', refundId: `re_${providerSubKey.compensation(input.paymentId)}` });
    });
  });

  it('waits while the payment still waits, then decides on where it ended (here: succeeded, nothing given back)', async () => {
    let looks = 0;
    const run = await bench.startLateCharge(lateInput(), {
      lateChargeStanding: async () =>
        ++looks === 1
          ? { decision: 'wait', status: 'processing', reason: 'the payment is processing' }
          : { decision: 'skip', status: 'succeeded', reason: 'the payment is succeeded' },
    });
    expect(await run.handle.result()).toMatchObject({ action: 'nothing', reason: 'the payment is succeeded' });
    expect(run.steps()).toEqual(['lateChargeStanding', 'lateChargeStanding']);
  });
});
