/**
 * Charging along the route: the PSPs of the tenant's route, tried in order, attempt 1 deciding
 * the route, the route started again after its last PSP's transient failure within the
 * payment's charge budget; and how the payment ends when no PSP charges it (refused everywhere,
 * unreachable past the budget, no PSP for its method, the saved card held, the order taken). A
 * phase over the run's state (state.ts).
 */
import { log, workflowInfo } from '@temporalio/workflow';
import type { AttemptMemo, RoutePlan } from '../../domain/payments-attempts';
import { DEFAULT_CHARGE_BUDGET_MS, PSP_ERROR_NONE_FOUND } from '../../shared/payments';
import type { ChargeAttemptInput, ChargeAttemptResult } from '../../activities/provider-steps';
import type { OffSessionRefusal } from '../../domain/recovery';
import { FailureType } from '../../shared/definitions';
import { firstCharge, providerSteps, records } from '../activities';
import { failureOfType } from '../saga';
import { setStatus, showAttempts, type Failure, type PhaseResult, type RunState } from './state';

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

/** One pass along the route: its PSPs, the one tried now, and those whose attempt in this pass ended by a transient failure. */
interface Pass {
  providers: string[];
  index: number;
  transient: string[];
}

/**
 * The PSPs of the route, tried in order. Attempt 1 decides the route (activities/routing.ts
 * createFirstAttemptPlanner; it persists the intent again if a start in doubt left the run
 * without it). Each attempt charges under its own sub-key; the step tries its PSP again on a
 * transient failure (PROVIDER_TRANSIENT_TRIES) and the payment moves to the next PSP only when
 * this one certainly took no money (refused, unreachable before anything was sent, its lookup
 * after lost answers found no charge) or declined with a code another PSP may accept. While
 * this one's outcome is unknown, chargeAttempt keeps asking HERE. After the last PSP's
 * transient failure the route starts again, under new attempts, at the PSPs of this pass that
 * failed transiently, until the charge budget ends (then `psp_unavailable`).
 */
export async function chargeAlongTheRoute(run: RunState): Promise<PhaseResult> {
  const { input } = run;
  const request = chargeRequest(run);
  const route = { paymentId: input.paymentId, tenantId: input.tenantId, amountMinor: input.amountMinor, currency: input.currency, paymentMethod: input.paymentMethod, intent: input };
  let plan: RoutePlan | undefined;
  let pass: Pass = { providers: [], index: 0, transient: [] };
  const attempts: AttemptMemo[] = [];
  for (let attempt = 1; ; attempt++) {
    // Every PSP may answer "not charged", the last one too: the route may start again. The last
    // one of a pass only once nothing can still be running there (lookupMayEnd: see its input).
    const lookupMayEnd = pass.index + 1 < pass.providers.length;
    const tried = await attemptOrEnd(run, plan ? { ...request, attempt, provider: pass.providers[pass.index]!, canFailOver: true, lookupMayEnd } : { ...request, attempt, route, canFailOver: true });
    if ('ended' in tried) return tried.ended;
    const { result } = tried;
    if (!plan) pass = { providers: (plan = run.routePlan = result.plan!).providers, index: 0, transient: [] };
    const provider = pass.providers[pass.index]!;
    const next = pass.providers[pass.index + 1];
    run.chargingAttempt = { provider, attempt };
    // Started again only where nothing can still be running: nothing was sent, or the PSP
    // answered its sends with errors and its lookups found no charge (not after sends it never answered).
    const transient = result.kind === 'not_charged' && (result.outcome === 'not_sent' || result.errorCode === PSP_ERROR_NONE_FOUND);
    if (transient) pass.transient.push(provider);
    // A recovering payment's decline is never tried at once at the next PSP: that would be a
    // retry outside the recovery's rules (an advice wait, the card's budget); recover() retries it.
    const movesOn =
      result.kind === 'not_charged' ||
      (!input.recovery && result.charge.status === 'declined' && result.charge.declineCode !== null && (plan.retryableDeclineCodes ?? []).includes(result.charge.declineCode));
    if (movesOn && next !== undefined) {
      await moveOn(run, plan, attempts, { attempt, provider }, result, next);
      pass.index += 1;
      continue;
    }
    if (transient) {
      // The last PSP's transient failure: nothing was charged anywhere on this pass's way.
      if (Date.now() >= chargeBudgetEnd(plan)) return endWithoutCharge(run, plan, attempts, { attempt, provider }, result, pspUnavailable(plan));
      pass = { providers: pass.transient, index: 0, transient: [] };
      await moveOn(run, plan, attempts, { attempt, provider }, result, pass.providers[0]!, true);
      continue;
    }
    if (result.kind === 'not_charged') return endWithoutCharge(run, plan, attempts, { attempt, provider }, result, { code: 'provider_rejected', message: result.message });
    attempts.push({ attempt, provider, outcome: result.charge.status, error_code: result.charge.declineCode });
    // Shown with the charge (showCharge, right after this): no memo command of its own.
    run.routeMemo = { provider, attempts: [...attempts], route: plan.providers, route_reason: plan.reason };
    return { kind: 'charge', charge: result.charge };
  }
}

/**
 * When the payment's charge budget ends, in workflow time: the run's start plus the budget its
 * plan carries (the planning worker's PAYMENT_CHARGE_BUDGET_SECONDS). Both are in the run's
 * history (the run's start event, the first charge step's result), and the workflow's clock is
 * each task's recorded time, so a replay decides exactly as the run did.
 */
function chargeBudgetEnd(plan: RoutePlan): number {
  return workflowInfo().runStartTime.getTime() + (plan.chargeBudgetMs ?? DEFAULT_CHARGE_BUDGET_MS);
}

/** The failure of a payment no PSP could be reached for within its charge budget. */
function pspUnavailable(plan: RoutePlan): Failure {
  const seconds = Math.round((plan.chargeBudgetMs ?? DEFAULT_CHARGE_BUDGET_MS) / 1000);
  return { code: 'psp_unavailable', message: `No PSP of the payment's route could take it within its charge budget of ${seconds} s: each attempt ended with nothing charged.` };
}

/**
 * One charge attempt, or how the payment ends when the attempt cannot be made: the order taken
 * (409), the saved card held, or no PSP of the route charging the payment's method (nothing was
 * sent anywhere). A refusal of the request at a named PSP is its `rejected` answer, thrown or not.
 */
async function attemptOrEnd(run: RunState, input: ChargeAttemptInput): Promise<{ result: ChargeAttemptResult } | { ended: PhaseResult }> {
  try {
    return { result: await chargeAttempt(input) };
  } catch (error) {
    const taken = failureOfType(error, FailureType.OrderTaken);
    if (taken) return { ended: await orderTaken(run, String(taken.details?.[0] ?? '')) };
    const held = failureOfType(error, FailureType.OffSessionRefused);
    if (held) return { ended: await offSessionRefused(run, held.details?.[0] as OffSessionRefusal) };
    const unsupported = failureOfType(error, FailureType.PaymentMethodUnsupported);
    if (unsupported) return { ended: await failPayment(run, { code: 'payment_method_unsupported', message: unsupported.message }) };
    // A refusal of the request thrown by a step at a named PSP is what it answers otherwise: nothing charged there.
    const refused = failureOfType(error, FailureType.ProviderRejected);
    if (!refused || input.provider === undefined) throw error;
    return { result: { kind: 'not_charged', outcome: 'rejected', errorCode: String(refused.details?.[0] ?? 'provider_rejected'), message: refused.message } };
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
  if (!input.route) return providerSteps.chargeAttempt(input);
  try {
    return await firstCharge.chargeAttempt(input);
  } catch (error) {
    if ([FailureType.OrderTaken, FailureType.OffSessionRefused, FailureType.PaymentMethodUnsupported].some((type) => failureOfType(error, type))) throw error;
    log.warn('the first charge attempt did not answer in the workflow task; asking the PSP from the regular activity', { payment_id: input.paymentId, error: String(error) });
    // The local try counts among the PSP's tries; a refused connection sent nothing.
    return providerSteps.chargeAttempt({ ...input, localTry: failureOfType(error, FailureType.ProviderNotReached) ? 'not_sent' : 'unknown' });
  }
}

/** Records how an attempt ended without the payment's outcome, and that the next one began at the next PSP (`again`: the route starts again there). */
async function moveOn(run: RunState, plan: RoutePlan, attempts: AttemptMemo[], at: { attempt: number; provider: string }, result: ChargeAttemptResult, nextProvider: string, again = false): Promise<void> {
  const { attempt, provider } = at;
  const outcome = result.kind === 'not_charged' ? result.outcome : 'declined';
  const errorCode = result.kind === 'not_charged' ? result.errorCode : result.charge.declineCode;
  const next = { attempt: attempt + 1, provider: nextProvider };
  const because = movedOnBecause(provider, outcome, errorCode) + (again ? `; the last PSP of the route: it starts again at ${nextProvider} within the charge budget` : '');
  attempts.push({ attempt, provider, outcome, error_code: errorCode, moved_on_because: because });
  const providerChargeId = result.kind === 'charge' ? result.charge.id : null;
  await records.recordAttempt({ paymentId: run.input.paymentId, attempt, provider, outcome, providerChargeId, errorCode, next });
  showAttempts(run, plan, attempts, { attempt: next.attempt, provider: next.provider, outcome: 'pending', error_code: null });
}

/**
 * Records how the last attempt ended with nothing charged (refused, or unreachable past the
 * charge budget) and fails the payment with `failure` (nothing charged anywhere).
 */
async function endWithoutCharge(run: RunState, plan: RoutePlan, attempts: AttemptMemo[], at: { attempt: number; provider: string }, result: ChargeAttemptResult & { kind: 'not_charged' }, failure: Failure): Promise<PhaseResult> {
  const { attempt, provider } = at;
  run.chargingAttempt = { provider, attempt };
  attempts.push({ attempt, provider, outcome: result.outcome, error_code: result.errorCode });
  await records.recordAttempt({ paymentId: run.input.paymentId, attempt, provider, outcome: result.outcome, providerChargeId: null, errorCode: result.errorCode, next: null });
  showAttempts(run, plan, attempts, null);
  return failPayment(run, failure);
}

/** Fails the payment with `failure`: nothing was charged (402 payment_failed with the payment). */
async function failPayment(run: RunState, failure: Failure): Promise<PhaseResult> {
  const response = await records.recordPaymentFailure({ paymentId: run.input.paymentId, failure, idempotency: run.input.idempotency });
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
