/**
 * Money that moved and cannot be booked is given back: each charge that moved money pushes its
 * compensation (a refund, or the authorization's void), and compensate runs them newest first
 * and records why the payment failed (workflows/saga.ts). Part of the run's state (state.ts),
 * under the phases.
 */
import { ApplicationFailure } from '@temporalio/workflow';
import type { ProviderCharge } from '../../provider/types';
import type { ScopedKey } from '../../shared/definitions';
import { CANCEL_FAILED, WAIT_DEFAULTS } from '../../shared/payments';
import { providerSubKey } from '../../shared/keys';
import { providerSteps, records } from '../activities';
import { cancelReport, setStatus, waitForOutcome, type Failure, type Final, type RunState } from './state';

/** Gives back money that moved, newest step first, then records why the payment failed. */
export async function compensate(run: RunState, reason: Failure, idempotency: ScopedKey): Promise<Final> {
  const { undone, failed } = await run.compensations.run();
  const message = [
    reason.message,
    undone.length ? `Compensated: ${undone.join('; ')}.` : '',
    failed.length ? `Compensation FAILED, needs an operator: ${failed.join('; ')}.` : '',
  ].filter(Boolean).join(' ');
  const response = await records.recordPaymentFailure({ paymentId: run.input.paymentId, failure: { code: failed.length ? 'compensation_failed' : reason.code, message }, idempotency });
  setStatus(run, 'failed');
  return { kind: 'final', response };
}

/** Money that moved gets its compensation, newest first. */
export function pushCompensation(run: RunState, charge: ProviderCharge): void {
  const chargeId = charge.id;
  if (charge.status === 'succeeded') {
    const amountMinor = charge.amountCapturedMinor;
    run.compensations.push(`refunded ${amountMinor} ${run.input.currency} of charge ${chargeId}`, () => giveBack(run, chargeId, amountMinor));
  } else if (charge.status === 'requires_capture') {
    run.compensations.push(`voided authorization ${chargeId}`, async () => {
      const voided = await voidConfirmed(run, chargeId, run.authorizationWindowEnd);
      // Refused or unconfirmed by the PSP: a failed compensation, for an operator, never "Compensated".
      if ('failure' in voided) throw ApplicationFailure.nonRetryable(voided.failure.message, voided.failure.code);
      return voided.charge;
    });
  }
}

/**
 * Voids the authorization (the void's sub-key is the payment's: one void per payment, which
 * the PSP answers once; a retry of the call replays that answer). A PSP whose cancels are
 * confirmed by notification (modifications `notified`) answers with the charge unchanged,
 * still `requires_capture`: the void is done only when the PSP's report of it comes (its
 * CANCELLATION, a `chargeReport`): `canceled`, or still `requires_capture` with the decline
 * code `cancel_failed` (refused). It is waited for until the authorization window ends, and at
 * least the decision grace (PROVIDER_DECISION_GRACE_SECONDS): a void at or after the window's
 * end waits that long. A refusal is `cancel_failed`, no report in time `cancel_unconfirmed`.
 * A PSP whose void is final in its answer is not waited for (no command is added).
 */
export async function voidConfirmed(run: RunState, chargeId: string, windowEnd: number | undefined): Promise<{ charge: ProviderCharge } | { failure: Failure }> {
  const before = new Set(run.reports);
  const answered = await providerSteps.voidCharge({ paymentId: run.input.paymentId, chargeId, ...run.chargingAttempt });
  if (answered.status !== 'requires_capture') return { charge: answered };
  const graceMs = run.input.decisionGraceMs ?? WAIT_DEFAULTS.decisionGraceMs;
  const waitMs = Math.max(graceMs, (windowEnd ?? 0) - Date.now());
  const report = await waitForOutcome(() => cancelReport(run, chargeId, before), waitMs);
  if (report?.status === 'canceled') return { charge: report };
  return {
    failure: report
      ? { code: CANCEL_FAILED, message: `The PSP refused the cancel: ${report.declineMessage ?? 'the cancel failed'}. The authorization may still hold the customer's money at the PSP: an operator must check it.` }
      : { code: 'cancel_unconfirmed', message: `The PSP did not confirm the cancel within ${Math.round(waitMs / 1000)} s. The authorization may still hold the customer's money at the PSP: an operator must check it.` },
  };
}

/**
 * A compensating refund. The provider answers a refund it cannot send with a failed refund
 * (no money moved), not an error: that must count as a failed compensation, or the payment
 * would say "Compensated" while the customer's money stayed with us.
 */
export async function giveBack(run: RunState, chargeId: string, amountMinor: number) {
  const { paymentId } = run.input;
  const refund = await providerSteps.refundCharge({ subKey: providerSubKey.compensation(paymentId), chargeId, amountMinor, reference: paymentId, ...run.chargingAttempt });
  if (refund.status === 'failed') {
    throw ApplicationFailure.nonRetryable(`the provider refused refund ${refund.id}: ${refund.failureMessage ?? refund.failureCode ?? 'no reason given'}`);
  }
  return refund;
}
