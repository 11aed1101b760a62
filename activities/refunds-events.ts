import { log } from '@temporalio/activity';
import type { Client } from '@temporalio/client';
import type { Sql } from '../db/connect';
import { flagCompensationRefused } from '../db/payments';
import { pendingRefundsReported } from '../db/refunds';
import { lateChargeWorkflowId } from '../domain/ids';
import { refundReportSignal, type RefundEventInput, type RefundEventResult } from '../shared/refunds';
import { signalIfOpen, temporalOf } from './workflow-signals';

/**
 * What a PSP's report of a refund (its confirmation or refusal, at a kind whose refunds are
 * confirmed by notification) does, decided in one place
 * (refundEventWorkflow, workflows/refunds.ts; the webhook route only verifies, stores and hands
 * over). Each part is safe to repeat: a signal is taken only once by the run it reaches (the
 * first confirmation of the refund the PSP answered it), the flag is set once.
 */
export function createRefundEventSteps(deps: { sql: Sql; temporal?: Client }) {
  return {
    /**
     * The report goes to the runs of the pending refunds it may name (db/refunds.ts
     * pendingRefundsReported: by our refund id, or by the payment's reference and the amount, of
     * a payment at this PSP with that charge): `forward`. Else a refusal of the refund a payment's
     * own run made to give its charge back (a compensation, its reference the payment's, counted
     * given back when the PSP received it) fails that payment `compensation_failed`:
     * `held_for_operator`, the customer's money may still be at the PSP. Else the late-charge run
     * of the charge, if one waits for it (it refunded late money at a PSP that confirms refunds
     * by notification): `forward`. Else `ignored`: a refund already confirmed, a compensation's that
     * succeeded, another's, or one whose run has ended (left pending for an operator).
     */
    async actOnRefundEvent(input: RefundEventInput): Promise<RefundEventResult> {
      const { provider, refund } = input;
      if (refund.status === 'pending' || !refund.reference) return { disposition: 'ignored' };
      const temporal = temporalOf(deps, 'refund events');
      const pending = await pendingRefundsReported(deps.sql, { provider, reference: refund.reference, chargeId: refund.chargeId, amountMinor: refund.amountMinor });
      let passed = false;
      for (const run of pending) {
        if (await signalIfOpen(temporal, run.workflow_id, refundReportSignal, refund)) passed = true;
        else log.warn('provider webhook for a pending refund whose run has ended; left for an operator', { refund_id: run.id, event_id: input.eventId });
      }
      if (passed) return { disposition: 'forward' };
      const { reference: paymentId, chargeId } = refund;
      if (refund.status === 'failed' && chargeId) {
        const message =
          `Compensation FAILED, needs an operator: ${provider} refused the refund ${refund.id} of charge ${chargeId} ` +
          `(${refund.failureMessage ?? refund.failureCode ?? 'refused'}); the customer's money may still be at the PSP.`;
        const flagged = await deps.sql.begin((tx) => flagCompensationRefused(tx, { provider, paymentId, chargeId, message }));
        if (flagged) {
          log.error("the PSP refused the refund of a payment's compensation; flagged compensation_failed for an operator", { payment_id: flagged.id, refund_id: refund.id });
          return { disposition: 'held_for_operator' };
        }
      }
      if (chargeId && (await signalIfOpen(temporal, lateChargeWorkflowId(provider, chargeId), refundReportSignal, refund))) return { disposition: 'forward' };
      return { disposition: 'ignored' };
    },
  };
}

export type RefundEventSteps = ReturnType<typeof createRefundEventSteps>;
