import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { providerSubKey } from '../../shared/keys';
import { refundReportSignal, type RefundReport } from '../../shared/refunds';
import { eventually } from '../helpers/eventually';
import { bodyOf, chargeIdOf, failedRefund, providerRefuses, refundInput, response, startWorkflowBench, type WorkflowBench } from '../helpers/workflow-worker';

/**
 * The refund workflow's decisions, with fake activities. The reservation under the
 * payment's row lock and the ledger reversal are tested against PostgreSQL in test/integration.
 */

let bench: WorkflowBench;
beforeAll(async () => {
  bench = await startWorkflowBench();
});
afterAll(async () => {
  await bench?.stop();
});

describe('refund workflow', () => {
  it('refunds the reserved charge under the refund sub-key and records the outcome once (rules out refunding the wrong charge or twice)', async () => {
    const input = refundInput({ amountMinor: 1500 });
    const run = await bench.startRefund(input);
    const final = await run.handle.result();

    expect(run.steps()).toEqual(['beginRefund', 'refundCharge', 'recordRefundOutcome']);
    expect(run.inputsOf('refundCharge')[0]).toEqual({
      subKey: providerSubKey.refund(input.refundId),
      chargeId: chargeIdOf(input.paymentId),
      amountMinor: 1500,
      reference: input.refundId,
    });
    expect(run.inputsOf('recordRefundOutcome')[0]!.request).toEqual(input);
    expect(bodyOf(final)).toMatchObject({ id: input.refundId, status: 'succeeded' });
  });

  it('stops when the reservation is refused, without calling the provider (rules out refunding more than was captured)', async () => {
    const refusal = response(409, { error: { type: 'refund_exceeds_captured', message: 'too much' } });
    const run = await bench.startRefund(refundInput(), { beginRefund: async () => ({ kind: 'rejected', response: refusal }) });

    expect(await run.handle.result()).toEqual(refusal);
    expect(run.steps()).toEqual(['beginRefund']);
  });

  it('records a refund the provider answers "failed" as failed (rules out booking a reversal for money that never went back)', async () => {
    const input = refundInput();
    const run = await bench.startRefund(input, { refundCharge: async ({ chargeId, amountMinor }) => failedRefund(chargeId, amountMinor, 'card closed') });
    const final = await run.handle.result();

    expect(run.steps()).toEqual(['beginRefund', 'refundCharge', 'recordRefundOutcome']);
    expect(run.inputsOf('recordRefundOutcome')[0]!.refund).toMatchObject({ status: 'failed', failureMessage: 'card closed' });
    expect(bodyOf(final).status).toBe('failed');
  });

  it('records a refund the provider refuses outright as failed with provider_rejected, so the reservation is released (rules out a reservation held forever)', async () => {
    const input = refundInput();
    const run = await bench.startRefund(input, { refundCharge: async () => Promise.reject(providerRefuses('charge already refunded')) });
    await run.handle.result();

    expect(run.inputsOf('recordRefundOutcome')[0]!.refund).toEqual({
      id: '',
      chargeId: chargeIdOf(input.paymentId),
      status: 'failed',
      amountMinor: input.amountMinor,
      failureCode: 'provider_rejected',
      failureMessage: 'charge already refunded',
    });
  });

  it('retries a refund whose outcome is unknown and records it once (rules out failing a refund on a transient provider error)', async () => {
    let attempts = 0;
    const run = await bench.startRefund(refundInput(), {
      refundCharge: async ({ subKey, chargeId, amountMinor }) => {
        if (++attempts === 1) throw new Error('ECONNRESET');
        return { id: `re_${subKey}`, chargeId, status: 'succeeded', amountMinor, failureCode: null, failureMessage: null };
      },
    });
    const final = await run.handle.result();

    expect(run.calls.filter((call) => call.step === 'refundCharge').map((call) => call.attempt)).toEqual([1, 2]);
    expect(run.inputsOf('recordRefundOutcome')).toHaveLength(1);
    expect(bodyOf(final).status).toBe('succeeded');
  });
});

describe('refund workflow at a PSP that confirms refunds by notification (answered pending)', () => {
  const received = (chargeId: string, amountMinor: number): RefundReport => ({ id: 'psp_refund_1', chargeId, status: 'pending', amountMinor, failureCode: null, failureMessage: null });
  const pendingAtPsp = { refundCharge: async ({ chargeId, amountMinor }: { chargeId: string; amountMinor: number }) => received(chargeId, amountMinor) };

  it('records nothing until the REFUND report, then records it succeeded (rules out a refund shown succeeded before the PSP confirms it)', async () => {
    const input = refundInput({ amountMinor: 700 });
    const run = await bench.startRefund(input, pendingAtPsp);
    await eventually(() => run.steps().includes('refundCharge'));
    // A report that only says "received" settles nothing, nor does another refund's settlement (another PSP id).
    await run.handle.signal(refundReportSignal, received(chargeIdOf(input.paymentId), 700));
    await run.handle.signal(refundReportSignal, { ...received(chargeIdOf(input.paymentId), 700), status: 'failed', id: 'psp_refund_other', failureCode: 'refund_failed', failureMessage: 'not ours' });
    await run.handle.signal(refundReportSignal, { ...received(chargeIdOf(input.paymentId), 700), status: 'succeeded', id: 'psp_refund_1' });
    const final = await run.handle.result();

    expect(run.steps()).toEqual(['beginRefund', 'refundCharge', 'recordRefundOutcome']);
    expect(run.inputsOf('recordRefundOutcome')[0]!.refund).toMatchObject({ id: 'psp_refund_1', status: 'succeeded', chargeId: chargeIdOf(input.paymentId) });
    expect(bodyOf(final).status).toBe('succeeded');
  });

  it('a REFUND_FAILED report records the refund failed with its reason (rules out keeping a reservation the PSP refused)', async () => {
    const input = refundInput();
    const run = await bench.startRefund(input, pendingAtPsp);
    await eventually(() => run.steps().includes('refundCharge'));
    await run.handle.signal(refundReportSignal, { ...received(chargeIdOf(input.paymentId), input.amountMinor), status: 'failed', failureCode: 'refund_failed', failureMessage: 'Insufficient balance' });
    await run.handle.result();

    expect(run.inputsOf('recordRefundOutcome')[0]!.refund).toMatchObject({ status: 'failed', failureCode: 'refund_failed', failureMessage: 'Insufficient balance' });
  });

  it('no report within the confirmation window: the refund is left pending for an operator, never recorded as an outcome', async () => {
    const input = refundInput({ confirmationWindowSeconds: 2 });
    const run = await bench.startRefund(input, pendingAtPsp);
    const final = await run.handle.result();

    expect(run.steps()).toEqual(['beginRefund', 'refundCharge', 'recordRefundUnconfirmed']);
    expect(final.status).toBe(202);
  });
});
