import { condition, setHandler } from '@temporalio/workflow';
import type { ProviderRefund } from '../provider/types';
import { FailureType, type FinalResponse } from '../shared/definitions';
import { REFUND_CONFIRMATION_WINDOW_SECONDS, refundReportSignal, type RefundEventInput, type RefundEventResult, type RefundReport, type RefundWorkflowInput } from '../shared/refunds';
import { providerSubKey } from '../shared/keys';
import { providerSteps, records, refundEvents } from './activities';
import { failureOfType } from './saga';

/** Confirmations kept while one is awaited: a PSP sends one per refund, so this bounds only a misbehaving sender. */
const MAX_KEPT_REPORTS = 50;

/**
 * One refund of a captured payment, under its own scoped idempotency key.
 * 1. Reserve the amount under the payment's row lock (or refuse: 409, recorded).
 * 2. Refund at the provider holding the charge (payments.provider), under the refund's sub-key (lookup first on retries).
 * 3. A PSP whose refunds are confirmed by notification answers `pending`: wait for its report
 *    (the refundReport signal of its REFUND or REFUND_FAILED) within the confirmation window.
 *    Meanwhile the refund is `pending`, its amount reserved, nothing posted to the ledger.
 * 4. Record the outcome: reversing ledger transaction and refund.succeeded, or release of
 *    the reservation and refund.failed; and the first final response. A pending refund that
 *    no report confirms it within the window stays pending, its amount still reserved, for an operator.
 */
export async function refundWorkflow(input: RefundWorkflowInput): Promise<FinalResponse> {
  // The PSP's confirmations passed to this run (it may be passed another pending refund's of the
  // same payment and amount): only the one of the refund the PSP answered counts, the first.
  const reports: RefundReport[] = [];
  setHandler(refundReportSignal, (reported) => {
    if (reported.status !== 'pending' && reports.length < MAX_KEPT_REPORTS) reports.push(reported);
  });
  const begun = await records.beginRefund(input);
  if (begun.kind === 'rejected') return begun.response;

  let refund: ProviderRefund;
  try {
    refund = await providerSteps.refundCharge({
      subKey: providerSubKey.refund(input.refundId),
      chargeId: begun.chargeId,
      amountMinor: input.amountMinor,
      reference: input.refundId,
      // At the PSP holding the charge; a payment that records none is at the default provider.
      ...(begun.provider !== undefined ? { provider: begun.provider } : {}),
    });
  } catch (error) {
    const refused = failureOfType(error, FailureType.ProviderRejected);
    if (!refused) throw error;
    // The provider refused the request itself: no refund exists under our key.
    refund = { id: '', chargeId: begun.chargeId, status: 'failed', amountMinor: input.amountMinor, failureCode: 'provider_rejected', failureMessage: refused.message };
  }
  if (refund.status === 'pending') {
    const received = refund;
    const ours = () => reports.find((r) => r.id === received.id);
    const windowMs = (input.confirmationWindowSeconds ?? REFUND_CONFIRMATION_WINDOW_SECONDS) * 1000;
    if (!(await condition(() => ours() !== undefined, windowMs))) return records.recordRefundUnconfirmed({ request: input, refund });
    refund = { ...ours()!, chargeId: begun.chargeId };
  }
  return records.recordRefundOutcome({ request: input, refund });
}

/**
 * One PSP report of a refund (its confirmation or refusal), handed over by the webhook route
 * (api/routes/provider-webhooks.ts) once it verified and stored it, under
 * refundEventWorkflowId(provider, event id): every delivery of the report lands on this one run.
 * Its one step decides what the report does: passed to the refund run that waits for it (or the
 * late-charge run of its charge), or a compensation's refusal held for an operator
 * (activities/refunds-events.ts).
 */
export async function refundEventWorkflow(input: RefundEventInput): Promise<RefundEventResult> {
  return refundEvents.actOnRefundEvent(input);
}
