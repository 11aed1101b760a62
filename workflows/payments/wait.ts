/**
 * Waiting for the customer (3-D Secure) or the bank (an asynchronous method): the charge is
 * decided by a webhook, the run's own poll or the customer's return from the challenge; the
 * merchant's cancel voids it; the window's end is decided by the PSP's clock, asked within the
 * decision grace, or the payment expires. A phase over the run's state (state.ts).
 */
import { ApplicationFailure, allHandlersFinished, condition, log, upsertMemo } from '@temporalio/workflow';
import { deadlineOf } from '../../domain/payments';
import type { ProviderCharge } from '../../provider/types';
import { FailureType } from '../../shared/definitions';
import { WAIT_DEFAULTS, type CancelRequest, type ChallengeReturn, type ChallengeReturnOutcome, type PaymentCarried } from '../../shared/payments';
import { providerSteps, providerStepsWithin, records } from '../activities';
import { serveRequest } from '../interceptors';
import { failureOfType } from '../saga';
import { listenForCommands } from './commands';
import { compensate, giveBack, pushCompensation } from './compensation';
import { continueRunAsNew, continuing, decidedBy, noteReport, setStatus, showCharge, waitForOutcome, type Continue, type Failure, type PhaseResult, type PspOutcome, type RunState, type StatusPoll } from './state';

/**
 * How long the details call of a customer back from a challenge is retried while the PSP does not
 * answer: past it the return changes nothing (the PSP's notification, or the window's end, decides).
 */
const CHALLENGE_RETURN_WITHIN_MS = 60_000;

/**
 * When the PSP says the charge took money (succeeded) or was authorized (requires_capture), by
 * its own clock; null when it says neither, or does not say when.
 */
function moneyMovedAt(charge: ProviderCharge): number | null {
  const at = charge.status === 'succeeded' ? charge.succeededAt : charge.status === 'requires_capture' ? charge.authorizedAt : null;
  if (at === null || at === undefined) return null;
  const ms = Date.parse(at);
  return Number.isNaN(ms) ? null : ms;
}

/**
 * The charge waits at the PSP. Webhooks arrive as `chargeReport` signals and the run polls the
 * PSP itself; whichever decides the charge first is recorded. A cancel voids the challenge;
 * the window's end is decided by the PSP's clock (decideAtDeadline).
 */
export async function awaitPsp(run: RunState, waiting: ProviderCharge, resumed?: Pick<PaymentCarried, 'deadline' | 'pollIntervalMs'>): Promise<PhaseResult> {
  const { input } = run;
  const customer = deadlineOf(run.status) === 'authentication';
  const windowMs = customer ? (input.authenticationWindowMs ?? WAIT_DEFAULTS.authenticationWindowMs) : (input.settlementWindowMs ?? WAIT_DEFAULTS.settlementWindowMs);
  const pollConfig = input.statusPoll ?? WAIT_DEFAULTS.statusPoll;
  const deadline = resumed?.deadline ?? Date.now() + windowMs;
  // The Web UI shows why the run waits and until when (Memo tab), next to the timer in its history.
  upsertMemo({ waiting_for: customer ? 'customer authentication (3-D Secure)' : 'the PSP to settle an asynchronous payment', waiting_until: new Date(deadline).toISOString() });
  listenForCommands(run);
  run.accepting = true;
  // '' until the PSP names the charge (noteReport): what decides it is then matched by that name.
  run.waitingChargeId = waiting.id;
  const poll: StatusPoll = { intervalMs: resumed?.pollIntervalMs ?? pollConfig.firstMs, maxMs: pollConfig.maxMs, run: async () => noteReport(run, await retrieve(run, run.waitingChargeId!)) };
  const outcome = await waitForOutcome<PspOutcome | Continue>(() => run.command ?? decidedBy(run, run.waitingChargeId!) ?? continuing(run), deadline - Date.now(), poll);
  if (outcome?.kind === 'continue') return continueRunAsNew(run, { wait: 'psp', charge: { ...waiting, id: run.waitingChargeId! }, deadline, pollIntervalMs: poll.intervalMs });
  const chargeId = run.waitingChargeId;
  run.accepting = false;
  run.waitingChargeId = undefined;
  upsertMemo({ waiting_for: null, waiting_until: null });
  if (outcome?.kind === 'decided') return recordWaitOutcome(run, outcome.charge);
  if (outcome?.kind === 'cancel') return cancelWhileWaiting(run, chargeId, outcome.request);
  return decideAtDeadline(run, { ...waiting, id: chargeId }, deadline);
}

/** The merchant gives up on the customer's challenge: void it at the PSP, unless the customer finished first. */
async function cancelWhileWaiting(run: RunState, chargeId: string, request: CancelRequest): Promise<PhaseResult> {
  const voided = await voidOrLookUp(run, chargeId);
  // A void the PSP only received (its cancels are confirmed by notification) ends the challenge
  // there: an authorization that slipped in before it is cancelled with it.
  if (voided.status === 'canceled' || voided.received === true) {
    showCharge(run, voided);
    run.commandResponse = (await records.recordCancel({ paymentId: run.input.paymentId, request }))!;
    setStatus(run, 'canceled');
    await condition(allHandlersFinished);
    return { kind: 'final', response: run.firstAnswer! };
  }
  // The customer finished first: the charge's own outcome stands, and the cancel is refused.
  run.commandRefused = ApplicationFailure.create({
    type: FailureType.PaymentNotCancelable,
    message: `payment ${run.input.paymentId} was ${voided.status} at the provider before it could be canceled`,
    nonRetryable: true,
  });
  run.command = undefined;
  const result = await recordWaitOutcome(run, voided);
  await condition(allHandlersFinished);
  run.commandRefused = undefined;
  return result;
}

/**
 * The window ended without an outcome the run saw. What decides is the PSP's record of when the
 * charge took money or was authorized, not when the run learned of it (a webhook may be lost):
 * the run asks the PSP, for up to the decision grace if it is unreachable. A challenge still
 * open is voided first, so no success can slip in afterwards; a success the void finds, inside
 * the window by the PSP's clock, still wins. Only a success after the window is given back.
 */
async function decideAtDeadline(run: RunState, waiting: ProviderCharge, deadline: number): Promise<PhaseResult> {
  const customer = deadlineOf(run.status) === 'authentication';
  log.info('waiting window ended; asking the PSP', { payment_id: run.input.paymentId, waiting: waiting.status });
  let last = await lookWithinGrace(run, waiting.id);
  // Unanswered within the grace, a challenge is voided all the same (the void waits for the PSP);
  // a bank debit cannot be voided, so it expires and a later success is given back (late charge).
  if (customer && (last === null || last.status === 'requires_action')) last = await voidOrLookUp(run, waiting.id);
  // A void the PSP only received (confirmed by its notification) ended the challenge there.
  if (last === null || last.received === true) return expire(run, customer, waiting.id);
  showCharge(run, last);
  const movedAt = moneyMovedAt(last);
  if (last.status === 'declined' || (movedAt !== null && movedAt <= deadline)) return recordWaitOutcome(run, last);
  if (last.status === 'succeeded') {
    const refund = await giveBack(run, last.id, last.amountCapturedMinor);
    return recordExpiry(run, { code: 'late_success_refunded', message: `The payment succeeded at the provider after its window ended; refund ${refund.id} gave the money back.` });
  }
  if (last.status === 'requires_capture') {
    const voided = await providerSteps.voidCharge({ paymentId: run.input.paymentId, chargeId: last.id, ...run.chargingAttempt });
    return recordExpiry(run, { code: 'late_authorization_voided', message: `The payment was authorized at the provider after its window ended; the authorization was voided (${voided.status}).` });
  }
  return expire(run, customer, last.id);
}

/** The charge as the PSP holds it, asked for up to the decision grace; null if it never answered. */
async function lookWithinGrace(run: RunState, chargeId: string): Promise<ProviderCharge | null> {
  const graceMs = run.input.decisionGraceMs ?? WAIT_DEFAULTS.decisionGraceMs;
  try {
    return await providerStepsWithin(graceMs).retrieveCharge({ paymentId: run.input.paymentId, chargeId, ...run.chargingAttempt });
  } catch (error) {
    log.warn('the PSP did not answer within the decision grace', { payment_id: run.input.paymentId, error: String(error) });
    return null;
  }
}

/** No outcome within the window: the payment expires (the challenge was voided, or the bank gave none). */
async function expire(run: RunState, customer: boolean, chargeId: string): Promise<PhaseResult> {
  log.info('waiting window ended; expiring', { payment_id: run.input.paymentId, charge_id: chargeId });
  return recordExpiry(
    run,
    customer
      ? { code: 'authentication_expired', message: 'The customer did not authenticate in time; the challenge was voided at the provider.' }
      : { code: 'settlement_expired', message: 'The provider gave no outcome within the settlement window.' },
  );
}

async function recordExpiry(run: RunState, failure: Failure): Promise<PhaseResult> {
  await records.recordExpiry({ paymentId: run.input.paymentId, failure });
  setStatus(run, 'expired');
  return { kind: 'final', response: run.firstAnswer! };
}

/**
 * Records a waiting charge's outcome (ledger and event with it); a ledger refusal gives the
 * money back. Its step is `recordSettlement`, a recorded activity name, kept.
 */
async function recordWaitOutcome(run: RunState, decided: ProviderCharge): Promise<PhaseResult> {
  showCharge(run, decided);
  pushCompensation(run, decided);
  try {
    setStatus(run, await records.recordSettlement({ paymentId: run.input.paymentId, charge: decided }));
  } catch (error) {
    const refused = failureOfType(error, FailureType.LedgerRejected);
    if (!refused) throw error;
    await compensate(run, { code: 'ledger_rejected', message: `The ledger refused the payment: ${refused.message}.` }, run.input.idempotency);
    return { kind: 'final', response: run.firstAnswer! };
  }
  return { kind: 'charge', charge: decided };
}

function retrieve(run: RunState, chargeId: string): Promise<ProviderCharge> {
  return providerSteps.retrieveCharge({ paymentId: run.input.paymentId, chargeId, ...run.chargingAttempt });
}

/** Voids a waiting charge; if the PSP refuses (it was decided meanwhile), the charge as it is now. */
async function voidOrLookUp(run: RunState, chargeId: string): Promise<ProviderCharge> {
  try {
    return await providerSteps.voidCharge({ paymentId: run.input.paymentId, chargeId, ...run.chargingAttempt });
  } catch (error) {
    if (!failureOfType(error, FailureType.ProviderRejected)) throw error;
    return retrieve(run, chargeId);
  }
}

// ── The customer back from the challenge (the return route's update) ──────────────────────

/** The return route's update is taken only while the payment waits for its customer's challenge, one return at a time. */
export function refuseUnlessChallengeOpen(run: RunState): void {
  if (!run.accepting || run.returning || run.command || run.waitingChargeId === undefined || deadlineOf(run.status) !== 'authentication') {
    throw ApplicationFailure.create({ type: FailureType.ChallengeNotOpen, message: `payment ${run.input.paymentId} is not waiting for its customer's challenge (${run.status})`, nonRetryable: true });
  }
}

/**
 * The customer is back from the challenge (the return route): the PSP's details call answers
 * the charge, which is applied as a webhook's report is (the wait records it); the update
 * answers once it was applied. A result the PSP refuses changes nothing (the update fails
 * ChallengeReturnRefused, and another return may come); a PSP that does not answer within
 * CHALLENGE_RETURN_WITHIN_MS leaves the decision to its notification or the window's end.
 */
export async function completeChallenge(run: RunState, request: ChallengeReturn): Promise<ChallengeReturnOutcome> {
  run.updatesTaken++;
  run.returning = true;
  serveRequest(request.requestId);
  const { input } = run;
  const chargeId = run.waitingChargeId!;
  try {
    const charge = await providerStepsWithin(CHALLENGE_RETURN_WITHIN_MS).completeChallenge({
      paymentId: input.paymentId,
      chargeId,
      redirectResult: request.redirectResult,
      amountMinor: input.amountMinor,
      currency: input.currency,
      capture: input.captureMethod === 'automatic',
      ...run.chargingAttempt,
    });
    noteReport(run, charge);
    // Answered once the wait has applied it: the status left the challenge, or the report decides nothing.
    const named = run.waitingChargeId ?? chargeId;
    await condition(() => run.status !== 'requires_action' || decidedBy(run, named) === undefined);
  } catch (error) {
    if (failureOfType(error, FailureType.ProviderRejected)) {
      throw ApplicationFailure.create({ type: FailureType.ChallengeReturnRefused, message: `the PSP refused the details call of payment ${input.paymentId}; nothing changed`, nonRetryable: true });
    }
    log.warn('the details call got no answer; the notification or the window decides', { payment_id: input.paymentId, error: String(error) });
  } finally {
    run.returning = false;
  }
  return { status: run.status };
}
