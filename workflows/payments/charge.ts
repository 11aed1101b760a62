/**
 * Charging along the route: the PSPs of the tenant's route, tried in order, attempt 1 deciding
 * the route; and how the payment ends when no PSP charges it (refused everywhere, the saved card
 * held, the order taken). A phase over the run's state (state.ts).
 */
import { ApplicationFailure, log } from '@temporalio/workflow';
import type { AttemptMemo, RoutePlan } from '../../domain/payments-attempts';
import type { ChargeAttemptInput, ChargeAttemptResult } from '../../activities/provider-steps';
import type { OffSessionRefusal } from '../../domain/recovery';
import { FailureType } from '../../shared/definitions';
import { firstCharge, providerSteps, records } from '../activities';
import { failureOfType } from '../saga';
import { setStatus, showAttempts, type PhaseResult, type RunState } from './state';

/** Why the payment left a PSP for the next one, in an operator's words (the run's memo). */
function movedOnBecause(provider: string, outcome: string, code: string | null): string {
  switch (outcome) {
    case 'rejected':
      return `${provider} refused the request (${code ?? 'no code'}): nothing was charged there`;
    case 'not_sent':
      return `${provider} could not be reached (connection refused): nothing was sent`;
    case 'not_charged':
      return `${provider}'s answers were lost; its lookup by our key found no charge`;
    default:
      return `${provider} declined with ${code ?? 'no code'}, which another PSP may accept`;
  }
}

/**
 * The PSPs of the route, tried in order. Attempt 1 decides the route (activities/routing.ts
 * createFirstAttemptPlanner; it persists the intent again if a start in doubt left the run
 * without it). Each attempt charges under its own sub-key; the payment moves to the next PSP
 * only when this one certainly took no money (refused, unreachable before anything was sent,
 * its lookup after lost answers found no charge) or declined with a code another PSP may
 * accept. While this one's outcome is unknown, chargeAttempt keeps retrying HERE.
 */
export async function chargeAlongTheRoute(run: RunState): Promise<PhaseResult> {
  const { input } = run;
  const request = chargeRequest(run);
  const route = { paymentId: input.paymentId, tenantId: input.tenantId, amountMinor: input.amountMinor, currency: input.currency, paymentMethod: input.paymentMethod, intent: input };
  let plan: RoutePlan | undefined;
  const attempts: AttemptMemo[] = [];
  for (let attempt = 1; ; attempt++) {
    let result: ChargeAttemptResult;
    try {
      result = await chargeAttempt(plan ? { ...request, attempt, provider: plan.providers[attempt - 1]!, canFailOver: attempt < plan.providers.length } : { ...request, attempt, route });
    } catch (error) {
      const taken = failureOfType(error, FailureType.OrderTaken);
      if (taken) return orderTaken(run, String(taken.details?.[0] ?? ''));
      const held = failureOfType(error, FailureType.OffSessionRefused);
      if (held) return offSessionRefused(run, held.details?.[0] as OffSessionRefusal);
      const refused = failureOfType(error, FailureType.ProviderRejected);
      if (!refused || !plan) throw error;
      // The last PSP refused the request itself: nothing was charged anywhere.
      return refusedEverywhere(run, plan, attempts, attempt, String(refused.details?.[0] ?? 'provider_rejected'), refused.message);
    }
    plan ??= result.plan!;
    run.routePlan = plan;
    const provider = plan.providers[attempt - 1]!;
    const next = plan.providers[attempt];
    run.chargingAttempt = { provider, attempt };
    // A recovering payment's decline is never tried at once at the next PSP: that would be a
    // retry outside the recovery's rules (an advice wait, the card's budget); recover() retries it.
    const movesOn =
      result.kind === 'not_charged' ||
      (!input.recovery && result.charge.status === 'declined' && result.charge.declineCode !== null && (plan.retryableDeclineCodes ?? []).includes(result.charge.declineCode));
    if (movesOn && next !== undefined) {
      await moveOn(run, plan, attempts, attempt, result, next);
      continue;
    }
    if (result.kind === 'not_charged') {
      // The last PSP: only a refusal of the request is answered (without a next PSP the step keeps asking this one).
      if (result.outcome !== 'rejected') throw ApplicationFailure.nonRetryable(`chargeAttempt answered ${result.outcome} at the last provider ${provider}`);
      return refusedEverywhere(run, plan, attempts, attempt, result.errorCode, result.message);
    }
    attempts.push({ attempt, provider, outcome: result.charge.status, error_code: result.charge.declineCode });
    // Shown with the charge (showCharge, right after this): no memo command of its own.
    run.routeMemo = { provider, attempts: [...attempts], route: plan.providers, route_reason: plan.reason };
    return { kind: 'charge', charge: result.charge };
  }
}

/** What every charge attempt of this payment asks the PSP for. */
export function chargeRequest(run: RunState) {
  const { input } = run;
  return {
    paymentId: input.paymentId,
    amountMinor: input.amountMinor,
    currency: input.currency,
    paymentMethod: input.paymentMethod,
    capture: input.captureMethod === 'automatic',
    description: input.description,
    returnUrl: input.returnUrl ?? null,
    // A saved card: what each PSP needs to charge it, and whether the customer is there.
    ...(input.savedMethod ? { savedMethod: input.savedMethod, offSession: input.offSession === true } : {}),
    ...(input.setupFutureUsage ? { setupFutureUsage: input.setupFutureUsage } : {}),
  };
}

/**
 * One charge attempt. Attempt 1 (which decides the route) runs as a local activity in the
 * run's first workflow task, so a payment the PSP answers at once records its outcome and
 * completes in that one task. Its unknown outcome (the local try failed: a timeout, a 5xx, a
 * database away) goes to the regular activity, which asks the PSP first and retries; so do
 * later attempts.
 */
async function chargeAttempt(input: ChargeAttemptInput): Promise<ChargeAttemptResult> {
  if (input.route) {
    try {
      return await firstCharge.chargeAttempt(input);
    } catch (error) {
      if (failureOfType(error, FailureType.OrderTaken) || failureOfType(error, FailureType.OffSessionRefused)) throw error;
      log.warn('the first charge attempt did not answer in the workflow task; asking the PSP from the regular activity', { payment_id: input.paymentId, error: String(error) });
    }
  }
  return providerSteps.chargeAttempt(input);
}

/** Records how an attempt ended without the payment's outcome, and that the next one began at the next PSP. */
async function moveOn(run: RunState, plan: RoutePlan, attempts: AttemptMemo[], attempt: number, result: ChargeAttemptResult, nextProvider: string): Promise<void> {
  const provider = plan.providers[attempt - 1]!;
  const outcome = result.kind === 'not_charged' ? result.outcome : 'declined';
  const errorCode = result.kind === 'not_charged' ? result.errorCode : result.charge.declineCode;
  const next = { attempt: attempt + 1, provider: nextProvider };
  attempts.push({ attempt, provider, outcome, error_code: errorCode, moved_on_because: movedOnBecause(provider, outcome, errorCode) });
  const providerChargeId = result.kind === 'charge' ? result.charge.id : null;
  await records.recordAttempt({ paymentId: run.input.paymentId, attempt, provider, outcome, providerChargeId, errorCode, next });
  showAttempts(run, plan, attempts, { attempt: next.attempt, provider: next.provider, outcome: 'pending', error_code: null });
}

/** Records that the last PSP refused the request and fails the payment (nothing charged anywhere). */
async function refusedEverywhere(run: RunState, plan: RoutePlan, attempts: AttemptMemo[], attempt: number, code: string, message: string): Promise<PhaseResult> {
  const provider = plan.providers[attempt - 1]!;
  run.chargingAttempt = { provider, attempt };
  attempts.push({ attempt, provider, outcome: 'rejected', error_code: code });
  await records.recordAttempt({ paymentId: run.input.paymentId, attempt, provider, outcome: 'rejected', providerChargeId: null, errorCode: code, next: null });
  showAttempts(run, plan, attempts, null);
  const response = await records.recordPaymentFailure({ paymentId: run.input.paymentId, failure: { code: 'provider_rejected', message }, idempotency: run.input.idempotency });
  setStatus(run, 'failed');
  return { kind: 'final', response };
}

/** The saved card is held by a hard decline (docs/recovery.md): the payment ends as that decline would, nothing charged. */
async function offSessionRefused(run: RunState, refusal: OffSessionRefusal): Promise<PhaseResult> {
  const response = await records.recordOffSessionRefusal({ paymentId: run.input.paymentId, refusal, idempotency: run.input.idempotency });
  setStatus(run, refusal.status);
  return { kind: 'final', response };
}

/** The order guard refused the intent the first attempt persisted again: 409, nothing charged. */
export async function orderTaken(run: RunState, holderPaymentId: string): Promise<PhaseResult> {
  const response = await records.recordOrderTaken({ payment: run.input, holderPaymentId });
  setStatus(run, 'rejected');
  return { kind: 'final', response };
}
