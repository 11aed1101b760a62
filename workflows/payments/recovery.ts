/**
 * Recovery of a soft decline (docs/recovery.md): the first attempt reserved in the card's
 * budget, then the retries, each a durable timer in the run, until paid, declined for good,
 * stopped by the rules or canceled by the merchant. A phase over the run's state (state.ts); its
 * retries charge as the charge phase does (charge.ts).
 */
import { ApplicationFailure, allHandlersFinished, condition, upsertMemo } from '@temporalio/workflow';
import { statusForCharge } from '../../domain/payments';
import type { ProviderCharge } from '../../provider/types';
import type { ChargeAttemptResult } from '../../activities/provider-steps';
import { afterBudgetFullAt, afterRetryDeclined, attemptsEndAt, beginRecovery, classifyDecline, declineOfCharge, recoveryEnded, recoveryView, stopAt, stoppedBefore, type DeclineSignal, type RecoveryProgress, type RecoveryStop } from '../../domain/recovery';
import { FailureType } from '../../shared/definitions';
import type { CancelRequest, PaymentStatus } from '../../shared/payments';
import { providerSteps, records } from '../activities';
import { failureOfType } from '../saga';
import { chargeRequest, orderTaken } from './charge';
import { listenForCommands } from './commands';
import { compensate, pushCompensation } from './compensation';
import { answered, setStatus, showCharge, waitForOutcome, type PhaseResult, type RunState } from './state';

/**
 * A recovering payment's first attempt is reserved in its card's budget before any charge, as
 * every retry is: concurrent payments of one card cannot overrun it together. A full budget
 * fails the payment with nothing charged (`card_attempt_limit`); null: reserved, charge on.
 */
export async function reserveFirstAttempt(run: RunState): Promise<PhaseResult | null> {
  const recovery = run.input.recovery!;
  let reservation: { reserved: boolean; atMs: number };
  try {
    reservation = await records.reserveCardAttempt({ paymentMethodId: recovery.paymentMethodId, paymentId: run.input.paymentId, attempt: 1, limits: recovery.policy, intent: run.input });
  } catch (error) {
    const taken = failureOfType(error, FailureType.OrderTaken);
    if (taken) return orderTaken(run, String(taken.details?.[0] ?? ''));
    throw error;
  }
  if (reservation.reserved) return null;
  const { perDay, perMonth } = recovery.policy;
  const message = `The card has had its ${perDay} attempts in 24 hours or ${perMonth} in 30 days (the card networks' limits, or the tenant's): no charge was made. Its next attempt is possible from ${new Date(reservation.atMs).toISOString()}.`;
  const response = await records.recordPaymentFailure({ paymentId: run.input.paymentId, failure: { code: 'card_attempt_limit', message }, idempotency: run.input.idempotency });
  setStatus(run, 'failed');
  return { kind: 'final', response };
}

/** A payment that asked for recovery, declined by its first attempt with a decline the rules let it retry. */
export function recovers(run: RunState, charge: ProviderCharge): boolean {
  const recovery = run.input.recovery;
  return !!recovery && charge.status === 'declined' && classifyDecline(declineOfCharge(charge), recovery.policy.scale).kind === 'soft';
}

/**
 * The retries of a soft decline, each a durable timer in this run: until the next attempt's
 * time (RecoveryProgress, from workflow time) or the merchant's cancel; then the card's budget
 * (one reservation per attempt, at the database) and the attempt itself, under its own sub-key
 * at the PSP of the first attempt. Every decision is the progress's, from workflow time and
 * the steps' answers, so a replay decides the same and a restart neither loses nor adds one.
 *
 * Every stop (the merchant's cancel, the window's end, the schedule's span) is checked again in
 * the workflow task that makes the attempt, at its workflow time, not only when the timer was
 * set: a timer that fired while no worker was up is acted on later, maybe after the window.
 * A cancel is taken throughout, an attempt in flight included: that attempt's outcome decides
 * it (a decline: canceled; money moved: the cancel is refused once that is recorded).
 */
export async function recover(run: RunState, first: ProviderCharge): Promise<PhaseResult> {
  const recovery = run.input.recovery!;
  const { policy } = recovery;
  let provider = run.chargingAttempt.provider!;
  let attempt = run.chargingAttempt.attempt!;
  let progress = beginRecovery(declineOfCharge(first), Date.now(), recovery.windowMs, policy);
  let last = first;
  showCharge(run, first);
  answered(run, await records.recordRecovering({ payment: run.input, charge: first, attempt: { attempt, provider }, recovery: recoveryView(progress) }));
  setStatus(run, 'recovering');
  listenForCommands(run);
  run.accepting = true;
  /** What stops the attempt about to be made, at this task's workflow time: a cancel, or a stop of the rules. */
  const stopNow = (): CancelRequest | RecoveryStop | null => (run.command?.kind === 'cancel' ? run.command.request : stopAt(progress, Date.now(), policy));
  for (;;) {
    if (progress.nextAttemptAt === null) return run.command?.kind === 'cancel' ? cancelRecovery(run, run.command.request) : endRecovery(run, last, null, progress);
    upsertMemo({ waiting_for: 'the next recovery attempt', waiting_until: new Date(progress.nextAttemptAt).toISOString() });
    const remaining = progress.nextAttemptAt - Date.now();
    if (remaining > 0) await waitForOutcome(() => run.command, remaining);
    upsertMemo({ waiting_for: null, waiting_until: null });
    const before = stopNow();
    if (before !== null) return typeof before === 'string' ? endRecovery(run, last, null, stoppedBefore(progress, before)) : cancelRecovery(run, before);
    const reservation = await records.reserveCardAttempt({ paymentMethodId: recovery.paymentMethodId, paymentId: run.input.paymentId, attempt: attempt + 1, limits: policy });
    if (!reservation.reserved) {
      progress = afterBudgetFullAt(progress, reservation.atMs, policy);
      continue;
    }
    // The reservation's step took its time (a worker may have died meanwhile): asked again in
    // the task that makes the attempt. A stop here gives the unused reservation back.
    const reserved = stopNow();
    if (reserved !== null) {
      return typeof reserved === 'string' ? endRecovery(run, last, null, stoppedBefore(progress, reserved), attempt + 1) : cancelRecovery(run, reserved, attempt + 1);
    }
    attempt++;
    const retried = await retryAlongTheRoute(run, provider, attempt, () => stopNow() !== null, attemptsEndAt(progress, policy));
    ({ provider, attempt } = retried);
    const { result } = retried;
    run.chargingAttempt = { provider, attempt };
    if (result.kind === 'charge' && result.charge.status !== 'declined') return endRecovery(run, result.charge, { attempt, provider }, recoveryEnded(progress, true));
    const decline: DeclineSignal = result.kind === 'charge' ? declineOfCharge(result.charge) : { code: result.errorCode };
    progress = afterRetryDeclined(progress, decline, Date.now(), policy);
    // A cancel taken while the attempt was under way: it took no money, so the payment is canceled.
    const canceled = run.command?.kind === 'cancel' ? run.command.request : null;
    if (canceled) progress = recoveryEnded(progress, false);
    if (result.kind === 'charge' && progress.nextAttemptAt === null && !canceled) return endRecovery(run, result.charge, { attempt, provider }, progress);
    if (result.kind === 'charge') last = result.charge;
    await records.recordRecoveryAttempt({
      paymentId: run.input.paymentId,
      attempt,
      provider,
      outcome: result.kind === 'charge' ? 'declined' : result.outcome,
      providerChargeId: result.kind === 'charge' ? result.charge.id : null,
      errorCode: decline.code,
      recovery: recoveryView(progress),
    });
    if (canceled) return cancelRecovery(run, canceled);
  }
}

/**
 * One retry, at the PSP of the last decline; when that PSP certainly took no money (down before
 * anything was sent, refused, or its lookup after lost answers found none), on along the
 * tenant's route to the next PSP, by the card's network transaction id, unless `stopped()`
 * (a cancel, the window's end) says no attempt may be made any more. While an attempt's
 * outcome is unknown its step keeps asking that PSP (§3.8): never two charges of one retry.
 */
async function retryAlongTheRoute(run: RunState, from: string, firstAttempt: number, stopped: () => boolean, sendBefore: number): Promise<{ provider: string; attempt: number; result: ChargeAttemptResult }> {
  const route = run.routePlan?.providers ?? [from];
  const after = (provider: string) => route[route.indexOf(provider) + 1];
  let provider = from;
  let attempt = firstAttempt;
  for (;;) {
    const next = after(provider);
    const result = await providerSteps.chargeAttempt({ ...chargeRequest(run), attempt, provider, canFailOver: next !== undefined, sendBefore });
    if (result.kind !== 'not_charged' || next === undefined || stopped()) return { provider, attempt, result };
    await records.recordAttempt({ paymentId: run.input.paymentId, attempt, provider, outcome: result.outcome, providerChargeId: null, errorCode: result.errorCode, next: { attempt: attempt + 1, provider: next } });
    provider = next;
    attempt++;
  }
}

/**
 * The recovery's end as `charge` decides it: paid (its ledger posting; given back if the ledger
 * refuses), or declined for good. `unused`: an attempt reserved in the card's budget that a stop
 * then kept from being made, given back in the same transaction. A cancel taken while the last
 * attempt was under way is refused once the outcome is recorded, with why (under its key).
 */
async function endRecovery(run: RunState, charge: ProviderCharge, attempt: { attempt: number; provider: string } | null, progress: RecoveryProgress, unused?: number): Promise<PhaseResult> {
  showCharge(run, charge);
  pushCompensation(run, charge);
  const taken = run.command?.kind === 'cancel' ? run.command.request : null;
  const tooLate = (status: PaymentStatus) =>
    status === 'succeeded'
      ? `payment ${run.input.paymentId} is succeeded: the recovery attempt under way when the cancel came was paid, so there is nothing to cancel (a refund gives the money back)`
      : `payment ${run.input.paymentId} is ${status}: its recovery ended before the cancel could stop it`;
  let result: PhaseResult;
  try {
    const refusedCancel = taken ? { idempotency: taken.idempotency, message: tooLate(statusForCharge(charge.status)) } : undefined;
    setStatus(run, await records.recordRecoveryEnd({ paymentId: run.input.paymentId, charge, attempt, recovery: recoveryView(progress), ...(unused !== undefined ? { unusedReservation: unused } : {}), ...(refusedCancel ? { refusedCancel } : {}) }));
    result = { kind: 'final', response: run.firstAnswer! };
  } catch (error) {
    const refused = failureOfType(error, FailureType.LedgerRejected);
    if (!refused) throw error;
    result = await compensate(run, { code: 'ledger_rejected', message: `The ledger refused the payment: ${refused.message}.` }, run.input.idempotency);
  }
  run.accepting = false;
  // A cancel taken before (or while) the outcome was recorded is refused now, saying why.
  if (run.command?.kind === 'cancel') {
    run.commandRefused = ApplicationFailure.create({ type: FailureType.PaymentNotCancelable, message: tooLate(run.status), nonRetryable: true });
    run.command = undefined;
    await condition(allHandlersFinished);
  }
  return result;
}

/** The merchant's cancel between two attempts, or during one that was declined: no attempt after it. `unused`: as endRecovery's. */
async function cancelRecovery(run: RunState, request: CancelRequest, unused?: number): Promise<PhaseResult> {
  run.commandResponse = (await records.recordCancel({ paymentId: run.input.paymentId, request, ...(unused !== undefined ? { unusedReservation: unused } : {}) }))!;
  setStatus(run, 'canceled');
  run.accepting = false;
  await condition(allHandlersFinished);
  return { kind: 'final', response: run.firstAnswer! };
}
