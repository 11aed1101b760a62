import type { ProviderRefund } from '../provider/types';
import { FailureType, type FinalResponse } from '../shared/definitions';
import type { RefundWorkflowInput } from '../shared/refunds';
import { providerSubKey } from '../shared/keys';
import { providerSteps, records } from './activities';
import { failureOfType } from './saga';

/**
 * One refund of a captured payment, under its own scoped idempotency key.
 * 1. Reserve the amount under the payment's row lock (or refuse: 409, recorded).
 * 2. Refund at the provider holding the charge (payments.provider), under the refund's sub-key (lookup first on retries).
 * 3. Record the outcome: reversing ledger transaction and refund.succeeded, or release of
 *    the reservation and refund.failed; and the first final response.
 */
export async function refundWorkflow(input: RefundWorkflowInput): Promise<FinalResponse> {
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
  return records.recordRefundOutcome({ request: input, refund });
}
