import { ApplicationFailure, log, sleep } from '@temporalio/workflow';
import type { LateChargeOutcome } from '../activities';
import type { ProviderCharge } from '../provider/types';
import { FailureType } from '../shared/definitions';
import type { LateChargeInput, LateChargeResult, LateChargeWorkflow } from '../shared/payments';
import { providerSubKey } from '../shared/keys';
import { providerSteps, records } from './activities';
import { failureOfType } from './saga';

/** Rounds of "look at the charge, act on it": a void or refund refused because the charge moved on is looked at again. */
const MAX_ROUNDS = 3;
/**
 * While the payment still waits, its own run decides (it records the payment's outcome, or expires
 * it and closes): the payment is looked at again after 5 s, doubling to 10 min, for at most 20 looks
 * (about 2 h 20 min; the run decides it within moments of the webhook unless its worker is
 * gone). A payment still waiting then ends the run failed: the abandoned-run sweep ends the
 * payment's wait, and a later webhook or reconciliation run may start this workflow again.
 */
const WAIT_FIRST_MS = 5_000;
const WAIT_MAX_MS = 600_000;
const MAX_LOOKS = 20;

/**
 * Money the PSP reports after its payment ended without money: a SEPA debit that
 * succeeded after the payment expired, an authorization that came after the payment was
 * canceled. The payment's own run has closed, so nothing else would give it back.
 *
 * Started by a PSP charge event (workflows/payments-charge-events.ts), or by a reconciliation run when that webhook
 * was lost (lib/late-charge.ts), under lateChargeWorkflowId(provider, charge id) with conflict
 * policy USE_EXISTING and reuse policy ALLOW_DUPLICATE_FAILED_ONLY: every delivery of the webhook
 * (duplicates, the PSP's retries, a redelivery) and every run that finds it land on this one
 * run, unless it failed (then on a new run, which looks at the PSP before acting).
 *
 * 1. Read the payment: only a payment that ended without money (expired, canceled, declined,
 *    failed) and whose charge this is has money to give back. A payment that still waits in
 *    `processing` is looked at again later: its run may have taken its last look at the PSP
 *    just before the debit succeeded, and then expire it and close without seeing this.
 * 2. Look the charge up at the PSP (the webhook's word is not enough): succeeded with money not
 *    yet refunded → refund it under the payment's compensation sub-key (the same key the
 *    payment's own run uses when it finds a late success itself, so the PSP makes one refund
 *    whoever asks first); authorized → void it under the payment's void sub-key.
 * 3. Record it on the payment (failure code and message; payment.late_success_refunded).
 */
export const lateChargeWorkflow: LateChargeWorkflow = async function lateChargeWorkflow(input: LateChargeInput): Promise<LateChargeResult> {
  const { paymentId, chargeId, provider } = input;
  let standing = await records.lateChargeStanding({ paymentId, chargeId, provider });
  for (let look = 1, waitMs = WAIT_FIRST_MS; standing.decision === 'wait' && look < MAX_LOOKS; look++, waitMs = Math.min(waitMs * 2, WAIT_MAX_MS)) {
    await sleep(waitMs);
    standing = await records.lateChargeStanding({ paymentId, chargeId, provider });
  }
  if (standing.decision === 'wait') {
    // Failed, not completed: a later webhook or reconciliation run may start it again.
    throw ApplicationFailure.nonRetryable(`payment ${paymentId} still ${standing.status} after ${MAX_LOOKS} looks; nothing decided`, 'LateChargeUndecided');
  }
  if (standing.decision !== 'act') {
    log.info('late charge: nothing to give back', { payment_id: paymentId, charge_id: chargeId, reason: standing.reason });
    return { action: 'nothing', reason: standing.reason, refundId: null };
  }

  for (let round = 1; ; round++) {
    const charge = await providerSteps.retrieveCharge({ paymentId, chargeId, provider });
    let outcome: LateChargeOutcome | null;
    try {
      outcome = await giveBack(charge);
    } catch (error) {
      // The PSP refused the void or refund because the charge moved on meanwhile: look again.
      // A refusal that persists ends the run failed (non-retryable), visible in the Web UI.
      if (!failureOfType(error, FailureType.ProviderRejected) || round >= MAX_ROUNDS) throw error;
      continue;
    }
    if (!outcome) {
      const reason = `the charge is ${charge.status} with ${charge.amountCapturedMinor - charge.amountRefundedMinor} ${charge.currency} kept`;
      log.info('late charge: nothing to give back', { payment_id: paymentId, charge_id: chargeId, reason });
      return { action: 'nothing', reason, refundId: null };
    }
    await records.recordLateCharge({ paymentId, chargeId, eventId: input.eventId, outcome });
    return {
      action: outcome.kind,
      reason: standing.reason,
      refundId: outcome.kind === 'refunded' ? outcome.refundId : null,
    };
  }

  /** Gives the charge's money back, or null when it holds none (already refunded, declined, canceled). */
  async function giveBack(charge: ProviderCharge): Promise<LateChargeOutcome | null> {
    if (charge.status === 'requires_capture') {
      await providerSteps.voidCharge({ paymentId, chargeId, provider });
      return { kind: 'voided' };
    }
    const kept = charge.amountCapturedMinor - charge.amountRefundedMinor;
    if (charge.status !== 'succeeded' || kept <= 0) return null;
    const refund = await providerSteps.refundCharge({ subKey: providerSubKey.compensation(paymentId), chargeId, amountMinor: kept, reference: paymentId, provider });
    if (refund.status === 'failed') {
      log.error('late charge: the PSP refused its refund; needs an operator', { payment_id: paymentId, charge_id: chargeId, refund_id: refund.id });
      return { kind: 'refund_failed', message: refund.failureMessage ?? refund.failureCode ?? 'no reason given' };
    }
    return { kind: 'refunded', refundId: refund.id, amountMinor: refund.amountMinor, currency: charge.currency };
  }
};
