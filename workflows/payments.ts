import { ApplicationFailure, allHandlersFinished, condition, continueAsNew, log, setHandler, upsertMemo, upsertSearchAttributes, workflowInfo } from '@temporalio/workflow';
import { accepts, applyChargeReport, commandRefusal, deadlineOf, isChargeState, isOutcomePending, statusForCharge } from '../domain/payments';
import type { ProviderCharge } from '../provider/types';
import type { AttemptMemo, RoutePlan } from '../domain/payments-attempts';
import type { ChargeAttemptInput, ChargeAttemptResult } from '../activities/provider-steps';
import { afterBudgetFullAt, afterRetryDeclined, beginRecovery, classifyDecline, declineOfCharge, recoveryEnded, recoveryView, stopAt, stoppedBefore, type DeclineSignal, type OffSessionRefusal, type RecoveryProgress, type RecoveryStop } from '../domain/recovery';
import { FailureType, type FinalResponse, type ScopedKey } from '../shared/definitions';
import { CANCEL_FAILED, cancelUpdate, captureAskedQuery, captureUpdate, challengeReturnUpdate, type CaptureAsked, chargeReportSignal, firstAnswerUpdate, type ChallengeReturn, type ChallengeReturnOutcome, PAYMENT_CONTINUE_AFTER, type PaymentCarried, WAIT_DEFAULTS, paymentStatusQuery, PaymentStatusKey, type CancelRequest, type CaptureRequest, type PaymentStatus, type PaymentWorkflowInput } from '../shared/payments';
import { providerSubKey } from '../shared/keys';
import { firstCharge, providerSteps, providerStepsWithin, records } from './activities';
import { serveRequest } from './interceptors';
import { Compensations, failureOfType } from './saga';

type Command = { kind: 'capture'; request: CaptureRequest } | { kind: 'cancel'; request: CancelRequest };
/** How a wait for the PSP ends: a command (cancel), or the charge decided as the PSP reported it. */
type PspOutcome = Command | { kind: 'decided'; charge: ProviderCharge };
/** A wait ended because the run is to continue as new (its room for updates or history runs out). */
type Continue = { kind: 'continue' };
/** What a phase hands on: the charge, to the next phase; or the payment's final answer. */
type PhaseResult = { kind: 'charge'; charge: ProviderCharge } | Final;
type Final = { kind: 'final'; response: FinalResponse };
/** A reason the payment failed or expired, recorded on it. */
type Failure = { code: string; message: string };

/**
 * How long the details call of a customer back from a challenge is retried while the PSP does not
 * answer: past it the return changes nothing (the PSP's notification, or the window's end, decides).
 */
const CHALLENGE_RETURN_WITHIN_MS = 60_000;

/** Reports kept while waiting: a flood of webhooks cannot grow the run's state without bound. */
const MAX_KEPT_REPORTS = 20;

/** The status poll of a wait: its next interval (doubling up to `maxMs`, kept here so a run that continues as new goes on with it), and the poll itself. */
interface StatusPoll {
  intervalMs: number;
  maxMs: number;
  run: () => Promise<void>;
}

/**
 * The one wait of every phase: until `outcome()` has a value (a merchant's command, or an
 * external report), or the window ends (undefined; at once when none is left). With `poll`, the
 * wait also asks the PSP itself on a growing backoff (first after `intervalMs`, doubling up to
 * `maxMs`), so a lost webhook delays nothing beyond the next poll; the poll feeds the same
 * reports a webhook does.
 */
async function waitForOutcome<T>(outcome: () => T | undefined, windowMs: number, poll?: StatusPoll): Promise<T | undefined> {
  if (!poll) {
    // condition() with a timeout of 0 would wait without one.
    if (windowMs > 0) await condition(() => outcome() !== undefined, windowMs);
    return outcome();
  }
  const deadline = Date.now() + windowMs; // workflow time: deterministic on replay
  for (;;) {
    const interval = poll.intervalMs;
    const remaining = deadline - Date.now();
    if (remaining <= 0 || outcome() !== undefined) return outcome();
    if (await condition(() => outcome() !== undefined, Math.min(interval, remaining))) return outcome();
    if (deadline - Date.now() <= 0) return outcome();
    // A poll held up by a PSP outage (its activity retries) must not hold up a webhook or a
    // command that arrives meanwhile: whichever comes first. (A condition without a timeout adds
    // no command; a poll left behind ends with the run.)
    // A poll the PSP refuses outright is logged, not fatal: the wait goes on until its deadline.
    const polled = poll.run().catch((error: unknown) => log.warn('status poll failed; waiting on', { error: String(error) }));
    await Promise.race([polled, condition(() => outcome() !== undefined)]);
    poll.intervalMs = Math.min(interval * 2, poll.maxMs);
  }
}

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
 * When the PSP says the charge took money (succeeded) or was authorized (requires_capture), by
 * its own clock; null when it says neither, or does not say when.
 */
function moneyMovedAt(charge: ProviderCharge): number | null {
  const at = charge.status === 'succeeded' ? charge.succeededAt : charge.status === 'requires_capture' ? charge.authorizedAt : null;
  if (at === null || at === undefined) return null;
  const ms = Date.parse(at);
  return Number.isNaN(ms) ? null : ms;
}

function refusalType(command: Pick<Command, 'kind'>): string {
  return command.kind === 'capture' ? FailureType.PaymentNotCapturable : FailureType.PaymentNotCancelable;
}

/**
 * One payment, from intent to its final state. Its id is derived from the scoped idempotency
 * key, so every delivery of the same request lands on this one run. The run is a PaymentRun:
 * its state in one object, its phases as methods (docs/ARCHITECTURE.md, "The payment workflow").
 */
export async function paymentWorkflow(input: PaymentWorkflowInput): Promise<FinalResponse> {
  const run = new PaymentRun(input);
  const response = await run.run();
  // The first answer of a run that ended before it recorded a charge's outcome (compensated,
  // refused everywhere, order taken) is its result; a waiting firstAnswer update gets it.
  run.answered(response);
  await condition(allHandlersFinished);
  return response;
}

/**
 * The phases of a payment, each over the one wait (waitForOutcome):
 * 1. authorize: charge along the route (the first attempt decides it) and record the outcome;
 * 2. awaitPsp: the customer's 3-D Secure (requires_action) or the bank (processing), decided at
 *    the window's end by the PSP's own record of when the charge changed state (decideAtDeadline);
 * 3. awaitCapture: a manual capture's capture or cancel, or a void when its window ends;
 * 4. recordWaitOutcome: a waiting charge's outcome recorded;
 * 5. compensate: money that moved but cannot be booked is given back, and the reason recorded.
 * The lifecycle (statuses, commands, windows) is domain/payments.ts.
 */
class PaymentRun {
  private status: PaymentStatus = 'processing';
  /** The charge attempt under way, and its PSP: once the charge is made, every provider step goes there. */
  private chargingAttempt: { provider?: string; attempt?: number } = {};
  /** The memo's view of the route: which PSP each attempt went to, and why it moved on. */
  private routeMemo: { provider?: string; attempts?: AttemptMemo[]; route?: string[]; route_reason?: string } = {};
  private readonly compensations = new Compensations();
  /** When the authorization window ends (workflow time), once the wait for capture began: how long a void waits for its confirmation. */
  private authorizationWindowEnd: number | undefined;
  /** The route the first attempt decided: where a retry of a recovering payment goes when a PSP took no money. */
  private routePlan: RoutePlan | undefined;
  /** What the PSP reported about the charge (webhooks, polls), oldest first; kept from the start. */
  private readonly reports: ProviderCharge[] = [];
  // The merchant's command (capture, cancel) and its answer.
  private command: Command | undefined;
  private accepting = false;
  private listening = false;
  private commandResponse: FinalResponse | undefined;
  private commandRefused: ApplicationFailure | undefined;
  /**
   * The create request's first answer, once known: recorded with the charge's outcome (202 while
   * the outcome is waited for), or the run's result when it ended before (firstAnswerUpdate).
   */
  private firstAnswer: FinalResponse | undefined;
  /** The charge waiting at the PSP for its customer or bank (awaitPsp), while it waits. */
  private waitingChargeId: string | undefined;
  /** A customer's return from the challenge is being completed by the PSP's details call. */
  private returning = false;
  /** The updates this run has taken (accepted): past input.continueAfterUpdates it continues as new at its next quiet moment in a wait. */
  private updatesTaken = 0;
  /** The capture asked of the PSP (captureAskedQuery): what its report of the capture must agree with. */
  private captureAsked: CaptureAsked | null = null;

  constructor(private readonly input: PaymentWorkflowInput) {
    // A run that continued another takes up its state before any handler is set: an update that
    // Temporal handed on to this run is judged (validator) as soon as its handler is set, by the
    // wait it resumes.
    if (input.continued) this.restore(input.continued);
    setHandler(paymentStatusQuery, () => this.status);
    setHandler(captureAskedQuery, () => this.captureAsked);
    setHandler(firstAnswerUpdate, async () => {
      this.updatesTaken++;
      await condition(() => this.firstAnswer !== undefined);
      return this.firstAnswer!;
    });
    setHandler(challengeReturnUpdate, (request) => this.completeChallenge(request), { validator: (_request) => this.refuseUnlessChallengeOpen() });
    setHandler(chargeReportSignal, (report) => {
      log.info('charge report', { payment_id: input.paymentId, source: report.source, event_id: report.eventId, charge_status: report.charge.status });
      // A webhook's report names the PSP it came from; one that does not names no charge.
      this.noteReport(report.charge, report.provider ?? null);
    });
    if (input.continued) this.listenForCommands();
  }

  answered(response: FinalResponse): void {
    this.firstAnswer ??= response;
  }

  async run(): Promise<FinalResponse> {
    // A run that continued another resumes its wait, to the same deadline.
    const carried = this.input.continued;
    let charge: ProviderCharge;
    if (carried) {
      charge = carried.charge;
    } else {
      const authorized = await this.authorize();
      if (authorized.kind === 'final') return authorized.response;
      charge = authorized.charge;
      this.setStatus(statusForCharge(charge.status));
    }
    if (carried?.wait !== 'capture' && isOutcomePending(this.status)) {
      const waited = await this.awaitPsp(charge, carried);
      if (waited.kind === 'final') return waited.response;
      charge = waited.charge;
    }
    if (charge.status === 'requires_capture') await this.awaitCapture(charge, carried?.wait === 'capture' ? carried.deadline : undefined);
    return this.firstAnswer!;
  }

  // ── Continue as new: a run never runs out of room for a merchant's command ──────────────

  /**
   * The run continues as new (within a wait, when no command is pending and no handler runs)
   * once it has taken input.continueAfterUpdates updates, or its history has grown past
   * input.continueAfterEvents events or PAYMENT_CONTINUE_AFTER.bytes, or Temporal suggests it:
   * well before the server's limits (2 000 updates, 51 200 events or 50 MB), past which a
   * merchant's capture or cancel could no longer reach it.
   */
  private continuing(): Continue | undefined {
    const info = workflowInfo();
    const full =
      this.updatesTaken >= (this.input.continueAfterUpdates ?? PAYMENT_CONTINUE_AFTER.updates) ||
      info.continueAsNewSuggested ||
      info.historyLength >= (this.input.continueAfterEvents ?? PAYMENT_CONTINUE_AFTER.events) ||
      info.historySize >= PAYMENT_CONTINUE_AFTER.bytes;
    return full && allHandlersFinished() ? { kind: 'continue' } : undefined;
  }

  /** Continues as new, carrying the wait (its charge and deadline) and what the run knows; the memo and search attributes go with it. */
  private async continueAsNew(wait: Pick<PaymentCarried, 'wait' | 'charge' | 'deadline' | 'pollIntervalMs'>): Promise<never> {
    const continued: PaymentCarried = {
      ...wait,
      status: this.status,
      firstAnswer: this.firstAnswer!,
      chargingAttempt: this.chargingAttempt,
      routeMemo: this.routeMemo,
      ...(this.routePlan ? { routePlan: this.routePlan } : {}),
      reports: [...this.reports],
    };
    const info = workflowInfo();
    log.info('the payment run continues as new', { payment_id: this.input.paymentId, wait: wait.wait, history_length: info.historyLength, updates_taken: this.updatesTaken });
    const { continued: _previous, ...input } = this.input;
    return continueAsNew<typeof paymentWorkflow>({ ...input, continued });
  }

  /** The state a run that continued as new carried: the wait it resumes is open from the start. */
  private restore(carried: PaymentCarried): void {
    this.status = carried.status;
    this.firstAnswer = carried.firstAnswer;
    this.chargingAttempt = carried.chargingAttempt;
    this.routeMemo = carried.routeMemo;
    this.routePlan = carried.routePlan;
    this.reports.push(...carried.reports);
    // The compensation of an authorization (its void), as authorize or the wait's outcome pushed it.
    this.pushCompensation(carried.charge);
    this.accepting = true;
    if (carried.wait === 'psp') this.waitingChargeId = carried.charge.id;
  }

  // ── Phase 1: authorize ───────────────────────────────────────────────────────────────

  /**
   * Charges along the route and records the outcome in one transaction: payment state, ledger,
   * outbox event and the operation's first answer (202 when the outcome must be waited for).
   */
  private async authorize(): Promise<PhaseResult> {
    const budgetFull = this.input.recovery ? await this.reserveFirstAttempt() : null;
    if (budgetFull) return budgetFull;
    const charged = await this.chargeAlongTheRoute();
    if (charged.kind === 'final') return charged;
    const charge = charged.charge;
    if (this.recovers(charge)) return this.recover(charge);
    this.showCharge(charge);
    this.pushCompensation(charge);
    try {
      this.answered(
        await records.recordChargeOutcome({
          payment: this.input,
          charge,
          attempt: { attempt: this.chargingAttempt.attempt!, provider: this.chargingAttempt.provider! },
        }),
      );
    } catch (error) {
      const refused = failureOfType(error, FailureType.LedgerRejected);
      if (!refused) throw error;
      return this.compensate({ code: 'ledger_rejected', message: `The ledger refused the payment: ${refused.message}.` }, this.input.idempotency);
    }
    return { kind: 'charge', charge };
  }

  /**
   * The PSPs of the route, tried in order. Attempt 1 decides the route (activities/routing.ts
   * createFirstAttemptPlanner; it persists the intent again if a start in doubt left the run
   * without it). Each attempt charges under its own sub-key; the payment moves to the next PSP
   * only when this one certainly took no money (refused, unreachable before anything was sent,
   * its lookup after lost answers found no charge) or declined with a code another PSP may
   * accept. While this one's outcome is unknown, chargeAttempt keeps retrying HERE.
   */
  private async chargeAlongTheRoute(): Promise<PhaseResult> {
    const { input } = this;
    const request = this.chargeRequest();
    const route = { paymentId: input.paymentId, tenantId: input.tenantId, amountMinor: input.amountMinor, currency: input.currency, paymentMethod: input.paymentMethod, intent: input };
    let plan: RoutePlan | undefined;
    const attempts: AttemptMemo[] = [];
    for (let attempt = 1; ; attempt++) {
      let result: ChargeAttemptResult;
      try {
        result = await this.chargeAttempt(plan ? { ...request, attempt, provider: plan.providers[attempt - 1]!, canFailOver: attempt < plan.providers.length } : { ...request, attempt, route });
      } catch (error) {
        const taken = failureOfType(error, FailureType.OrderTaken);
        if (taken) return this.orderTaken(String(taken.details?.[0] ?? ''));
        const held = failureOfType(error, FailureType.OffSessionRefused);
        if (held) return this.offSessionRefused(held.details?.[0] as OffSessionRefusal);
        const refused = failureOfType(error, FailureType.ProviderRejected);
        if (!refused || !plan) throw error;
        // The last PSP refused the request itself: nothing was charged anywhere.
        return this.refusedEverywhere(plan, attempts, attempt, String(refused.details?.[0] ?? 'provider_rejected'), refused.message);
      }
      plan ??= result.plan!;
      this.routePlan = plan;
      const provider = plan.providers[attempt - 1]!;
      const next = plan.providers[attempt];
      this.chargingAttempt = { provider, attempt };
      // A recovering payment's decline is never tried at once at the next PSP: that would be a
      // retry outside the recovery's rules (an advice wait, the card's budget); recover() retries it.
      const movesOn =
        result.kind === 'not_charged' ||
        (!input.recovery && result.charge.status === 'declined' && result.charge.declineCode !== null && (plan.retryableDeclineCodes ?? []).includes(result.charge.declineCode));
      if (movesOn && next !== undefined) {
        await this.moveOn(plan, attempts, attempt, result, next);
        continue;
      }
      if (result.kind === 'not_charged') {
        // The last PSP: only a refusal of the request is answered (without a next PSP the step keeps asking this one).
        if (result.outcome !== 'rejected') throw ApplicationFailure.nonRetryable(`chargeAttempt answered ${result.outcome} at the last provider ${provider}`);
        return this.refusedEverywhere(plan, attempts, attempt, result.errorCode, result.message);
      }
      attempts.push({ attempt, provider, outcome: result.charge.status, error_code: result.charge.declineCode });
      // Shown with the charge (showCharge, right after this): no memo command of its own.
      this.routeMemo = { provider, attempts: [...attempts], route: plan.providers, route_reason: plan.reason };
      return { kind: 'charge', charge: result.charge };
    }
  }

  /** What every charge attempt of this payment asks the PSP for. */
  private chargeRequest() {
    const { input } = this;
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
  private async chargeAttempt(input: ChargeAttemptInput): Promise<ChargeAttemptResult> {
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
  private async moveOn(
    plan: RoutePlan,
    attempts: AttemptMemo[],
    attempt: number,
    result: ChargeAttemptResult,
    nextProvider: string,
  ): Promise<void> {
    const provider = plan.providers[attempt - 1]!;
    const outcome = result.kind === 'not_charged' ? result.outcome : 'declined';
    const errorCode = result.kind === 'not_charged' ? result.errorCode : result.charge.declineCode;
    const next = { attempt: attempt + 1, provider: nextProvider };
    attempts.push({ attempt, provider, outcome, error_code: errorCode, moved_on_because: movedOnBecause(provider, outcome, errorCode) });
    const providerChargeId = result.kind === 'charge' ? result.charge.id : null;
    await records.recordAttempt({ paymentId: this.input.paymentId, attempt, provider, outcome, providerChargeId, errorCode, next });
    this.showAttempts(plan, attempts, { attempt: next.attempt, provider: next.provider, outcome: 'pending', error_code: null });
  }

  /** Records that the last PSP refused the request and fails the payment (nothing charged anywhere). */
  private async refusedEverywhere(plan: RoutePlan, attempts: AttemptMemo[], attempt: number, code: string, message: string): Promise<PhaseResult> {
    const provider = plan.providers[attempt - 1]!;
    this.chargingAttempt = { provider, attempt };
    attempts.push({ attempt, provider, outcome: 'rejected', error_code: code });
    await records.recordAttempt({ paymentId: this.input.paymentId, attempt, provider, outcome: 'rejected', providerChargeId: null, errorCode: code, next: null });
    this.showAttempts(plan, attempts, null);
    const response = await records.recordPaymentFailure({ paymentId: this.input.paymentId, failure: { code: 'provider_rejected', message }, idempotency: this.input.idempotency });
    this.setStatus('failed');
    return { kind: 'final', response };
  }

  /** The saved card is held by a hard decline (docs/recovery.md): the payment ends as that decline would, nothing charged. */
  private async offSessionRefused(refusal: OffSessionRefusal): Promise<PhaseResult> {
    const response = await records.recordOffSessionRefusal({ paymentId: this.input.paymentId, refusal, idempotency: this.input.idempotency });
    this.setStatus(refusal.status);
    return { kind: 'final', response };
  }

  /** The order guard refused the intent the first attempt persisted again: 409, nothing charged. */
  private async orderTaken(holderPaymentId: string): Promise<PhaseResult> {
    const response = await records.recordOrderTaken({ payment: this.input, holderPaymentId });
    this.setStatus('rejected');
    return { kind: 'final', response };
  }

  // ── Phase 1b: recover a soft decline (docs/recovery.md) ─────────────────────────────────

  /**
   * A recovering payment's first attempt is reserved in its card's budget before any charge, as
   * every retry is: concurrent payments of one card cannot overrun it together. A full budget
   * fails the payment with nothing charged (`card_attempt_limit`); null: reserved, charge on.
   */
  private async reserveFirstAttempt(): Promise<PhaseResult | null> {
    const recovery = this.input.recovery!;
    let reservation: { reserved: boolean; atMs: number };
    try {
      reservation = await records.reserveCardAttempt({ paymentMethodId: recovery.paymentMethodId, paymentId: this.input.paymentId, attempt: 1, limits: recovery.policy, intent: this.input });
    } catch (error) {
      const taken = failureOfType(error, FailureType.OrderTaken);
      if (taken) return this.orderTaken(String(taken.details?.[0] ?? ''));
      throw error;
    }
    if (reservation.reserved) return null;
    const { perDay, perMonth } = recovery.policy;
    const message = `The card has had its ${perDay} attempts in 24 hours or ${perMonth} in 30 days (the card networks' limits, or the tenant's): no charge was made. Its next attempt is possible from ${new Date(reservation.atMs).toISOString()}.`;
    const response = await records.recordPaymentFailure({ paymentId: this.input.paymentId, failure: { code: 'card_attempt_limit', message }, idempotency: this.input.idempotency });
    this.setStatus('failed');
    return { kind: 'final', response };
  }

  /** A payment that asked for recovery, declined by its first attempt with a decline the rules let it retry. */
  private recovers(charge: ProviderCharge): boolean {
    const recovery = this.input.recovery;
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
  private async recover(first: ProviderCharge): Promise<PhaseResult> {
    const recovery = this.input.recovery!;
    const { policy } = recovery;
    let provider = this.chargingAttempt.provider!;
    let attempt = this.chargingAttempt.attempt!;
    let progress = beginRecovery(declineOfCharge(first), Date.now(), recovery.windowMs, policy);
    let last = first;
    this.showCharge(first);
    this.answered(await records.recordRecovering({ payment: this.input, charge: first, attempt: { attempt, provider }, recovery: recoveryView(progress) }));
    this.setStatus('recovering');
    this.listenForCommands();
    this.accepting = true;
    /** What stops the attempt about to be made, at this task's workflow time: a cancel, or a stop of the rules. */
    const stopNow = (): CancelRequest | RecoveryStop | null => (this.command?.kind === 'cancel' ? this.command.request : stopAt(progress, Date.now(), policy));
    for (;;) {
      if (progress.nextAttemptAt === null) return this.command?.kind === 'cancel' ? this.cancelRecovery(this.command.request) : this.endRecovery(last, null, progress);
      upsertMemo({ waiting_for: 'the next recovery attempt', waiting_until: new Date(progress.nextAttemptAt).toISOString() });
      const remaining = progress.nextAttemptAt - Date.now();
      if (remaining > 0) await waitForOutcome(() => this.command, remaining);
      upsertMemo({ waiting_for: null, waiting_until: null });
      const before = stopNow();
      if (before !== null) return typeof before === 'string' ? this.endRecovery(last, null, stoppedBefore(progress, before)) : this.cancelRecovery(before);
      const reservation = await records.reserveCardAttempt({ paymentMethodId: recovery.paymentMethodId, paymentId: this.input.paymentId, attempt: attempt + 1, limits: policy });
      if (!reservation.reserved) {
        progress = afterBudgetFullAt(progress, reservation.atMs, policy);
        continue;
      }
      // The reservation's step took its time (a worker may have died meanwhile): asked again in
      // the task that makes the attempt. A stop here gives the unused reservation back.
      const reserved = stopNow();
      if (reserved !== null) {
        return typeof reserved === 'string' ? this.endRecovery(last, null, stoppedBefore(progress, reserved), attempt + 1) : this.cancelRecovery(reserved, attempt + 1);
      }
      attempt++;
      const retried = await this.retryAlongTheRoute(provider, attempt, () => stopNow() !== null);
      ({ provider, attempt } = retried);
      const { result } = retried;
      this.chargingAttempt = { provider, attempt };
      if (result.kind === 'charge' && result.charge.status !== 'declined') return this.endRecovery(result.charge, { attempt, provider }, recoveryEnded(progress, true));
      const decline: DeclineSignal = result.kind === 'charge' ? declineOfCharge(result.charge) : { code: result.errorCode };
      progress = afterRetryDeclined(progress, decline, Date.now(), policy);
      // A cancel taken while the attempt was under way: it took no money, so the payment is canceled.
      const canceled = this.command?.kind === 'cancel' ? this.command.request : null;
      if (canceled) progress = recoveryEnded(progress, false);
      if (result.kind === 'charge' && progress.nextAttemptAt === null && !canceled) return this.endRecovery(result.charge, { attempt, provider }, progress);
      if (result.kind === 'charge') last = result.charge;
      await records.recordRecoveryAttempt({
        paymentId: this.input.paymentId,
        attempt,
        provider,
        outcome: result.kind === 'charge' ? 'declined' : result.outcome,
        providerChargeId: result.kind === 'charge' ? result.charge.id : null,
        errorCode: decline.code,
        recovery: recoveryView(progress),
      });
      if (canceled) return this.cancelRecovery(canceled);
    }
  }

  /**
   * One retry, at the PSP of the last decline; when that PSP certainly took no money (down before
   * anything was sent, refused, or its lookup after lost answers found none), on along the
   * tenant's route to the next PSP, by the card's network transaction id, unless `stopped()`
   * (a cancel, the window's end) says no attempt may be made any more. While an attempt's
   * outcome is unknown its step keeps asking that PSP (§3.8): never two charges of one retry.
   */
  private async retryAlongTheRoute(from: string, firstAttempt: number, stopped: () => boolean): Promise<{ provider: string; attempt: number; result: ChargeAttemptResult }> {
    const route = this.routePlan?.providers ?? [from];
    const after = (provider: string) => route[route.indexOf(provider) + 1];
    let provider = from;
    let attempt = firstAttempt;
    for (;;) {
      const next = after(provider);
      const result = await providerSteps.chargeAttempt({ ...this.chargeRequest(), attempt, provider, canFailOver: next !== undefined });
      if (result.kind !== 'not_charged' || next === undefined || stopped()) return { provider, attempt, result };
      await records.recordAttempt({ paymentId: this.input.paymentId, attempt, provider, outcome: result.outcome, providerChargeId: null, errorCode: result.errorCode, next: { attempt: attempt + 1, provider: next } });
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
  private async endRecovery(charge: ProviderCharge, attempt: { attempt: number; provider: string } | null, progress: RecoveryProgress, unused?: number): Promise<PhaseResult> {
    this.showCharge(charge);
    this.pushCompensation(charge);
    const taken = this.command?.kind === 'cancel' ? this.command.request : null;
    const tooLate = (status: PaymentStatus) =>
      status === 'succeeded'
        ? `payment ${this.input.paymentId} is succeeded: the recovery attempt under way when the cancel came was paid, so there is nothing to cancel (a refund gives the money back)`
        : `payment ${this.input.paymentId} is ${status}: its recovery ended before the cancel could stop it`;
    let result: PhaseResult;
    try {
      const refusedCancel = taken ? { idempotency: taken.idempotency, message: tooLate(statusForCharge(charge.status)) } : undefined;
      this.setStatus(await records.recordRecoveryEnd({ paymentId: this.input.paymentId, charge, attempt, recovery: recoveryView(progress), ...(unused !== undefined ? { unusedReservation: unused } : {}), ...(refusedCancel ? { refusedCancel } : {}) }));
      result = { kind: 'final', response: this.firstAnswer! };
    } catch (error) {
      const refused = failureOfType(error, FailureType.LedgerRejected);
      if (!refused) throw error;
      result = await this.compensate({ code: 'ledger_rejected', message: `The ledger refused the payment: ${refused.message}.` }, this.input.idempotency);
    }
    this.accepting = false;
    // A cancel taken before (or while) the outcome was recorded is refused now, saying why.
    if (this.command?.kind === 'cancel') {
      this.commandRefused = ApplicationFailure.create({ type: FailureType.PaymentNotCancelable, message: tooLate(this.status), nonRetryable: true });
      this.command = undefined;
      await condition(allHandlersFinished);
    }
    return result;
  }

  /** The merchant's cancel between two attempts, or during one that was declined: no attempt after it. `unused`: as endRecovery's. */
  private async cancelRecovery(request: CancelRequest, unused?: number): Promise<PhaseResult> {
    this.commandResponse = (await records.recordCancel({ paymentId: this.input.paymentId, request, ...(unused !== undefined ? { unusedReservation: unused } : {}) }))!;
    this.setStatus('canceled');
    this.accepting = false;
    await condition(allHandlersFinished);
    return { kind: 'final', response: this.firstAnswer! };
  }

  // ── Phase 2: wait for the customer (3-D Secure) or the bank (asynchronous method) ─────────

  /**
   * The charge waits at the PSP. Webhooks arrive as `chargeReport` signals and the run polls the
   * PSP itself; whichever decides the charge first is recorded. A cancel voids the challenge;
   * the window's end is decided by the PSP's clock (decideAtDeadline).
   */
  private async awaitPsp(waiting: ProviderCharge, resumed?: Pick<PaymentCarried, 'deadline' | 'pollIntervalMs'>): Promise<PhaseResult> {
    const { input } = this;
    const customer = deadlineOf(this.status) === 'authentication';
    const windowMs = customer ? (input.authenticationWindowMs ?? WAIT_DEFAULTS.authenticationWindowMs) : (input.settlementWindowMs ?? WAIT_DEFAULTS.settlementWindowMs);
    const pollConfig = input.statusPoll ?? WAIT_DEFAULTS.statusPoll;
    const deadline = resumed?.deadline ?? Date.now() + windowMs;
    // The Web UI shows why the run waits and until when (Memo tab), next to the timer in its history.
    upsertMemo({ waiting_for: customer ? 'customer authentication (3-D Secure)' : 'the PSP to settle an asynchronous payment', waiting_until: new Date(deadline).toISOString() });
    this.listenForCommands();
    this.accepting = true;
    // '' until the PSP names the charge (noteReport): what decides it is then matched by that name.
    this.waitingChargeId = waiting.id;
    const poll: StatusPoll = { intervalMs: resumed?.pollIntervalMs ?? pollConfig.firstMs, maxMs: pollConfig.maxMs, run: async () => this.noteReport(await this.retrieve(this.waitingChargeId!)) };
    const outcome = await waitForOutcome<PspOutcome | Continue>(() => this.command ?? this.decidedBy(this.waitingChargeId!) ?? this.continuing(), deadline - Date.now(), poll);
    if (outcome?.kind === 'continue') return this.continueAsNew({ wait: 'psp', charge: { ...waiting, id: this.waitingChargeId! }, deadline, pollIntervalMs: poll.intervalMs });
    const chargeId = this.waitingChargeId;
    this.accepting = false;
    this.waitingChargeId = undefined;
    upsertMemo({ waiting_for: null, waiting_until: null });
    if (outcome?.kind === 'decided') return this.recordWaitOutcome(outcome.charge);
    if (outcome?.kind === 'cancel') return this.cancelWhileWaiting(chargeId, outcome.request);
    return this.decideAtDeadline({ ...waiting, id: chargeId }, deadline);
  }

  /** The merchant gives up on the customer's challenge: void it at the PSP, unless the customer finished first. */
  private async cancelWhileWaiting(chargeId: string, request: CancelRequest): Promise<PhaseResult> {
    const voided = await this.voidOrLookUp(chargeId);
    // A void the PSP only received (its cancels are confirmed by notification) ends the challenge
    // there: an authorization that slipped in before it is cancelled with it.
    if (voided.status === 'canceled' || voided.received === true) {
      this.showCharge(voided);
      this.commandResponse = (await records.recordCancel({ paymentId: this.input.paymentId, request }))!;
      this.setStatus('canceled');
      await condition(allHandlersFinished);
      return { kind: 'final', response: this.firstAnswer! };
    }
    // The customer finished first: the charge's own outcome stands, and the cancel is refused.
    this.commandRefused = ApplicationFailure.create({
      type: FailureType.PaymentNotCancelable,
      message: `payment ${this.input.paymentId} was ${voided.status} at the provider before it could be canceled`,
      nonRetryable: true,
    });
    this.command = undefined;
    const result = await this.recordWaitOutcome(voided);
    await condition(allHandlersFinished);
    this.commandRefused = undefined;
    return result;
  }

  /**
   * The window ended without an outcome the run saw. What decides is the PSP's record of when the
   * charge took money or was authorized, not when the run learned of it (a webhook may be lost):
   * the run asks the PSP, for up to the decision grace if it is unreachable. A challenge still
   * open is voided first, so no success can slip in afterwards; a success the void finds, inside
   * the window by the PSP's clock, still wins. Only a success after the window is given back.
   */
  private async decideAtDeadline(waiting: ProviderCharge, deadline: number): Promise<PhaseResult> {
    const customer = deadlineOf(this.status) === 'authentication';
    log.info('waiting window ended; asking the PSP', { payment_id: this.input.paymentId, waiting: waiting.status });
    let last = await this.lookWithinGrace(waiting.id);
    // Unanswered within the grace, a challenge is voided all the same (the void waits for the PSP);
    // a bank debit cannot be voided, so it expires and a later success is given back (late charge).
    if (customer && (last === null || last.status === 'requires_action')) last = await this.voidOrLookUp(waiting.id);
    // A void the PSP only received (confirmed by its notification) ended the challenge there.
    if (last === null || last.received === true) return this.expire(customer, waiting.id);
    this.showCharge(last);
    const movedAt = moneyMovedAt(last);
    if (last.status === 'declined' || (movedAt !== null && movedAt <= deadline)) return this.recordWaitOutcome(last);
    if (last.status === 'succeeded') {
      const refund = await this.giveBack(last.id, last.amountCapturedMinor);
      return this.recordExpiry({ code: 'late_success_refunded', message: `The payment succeeded at the provider after its window ended; refund ${refund.id} gave the money back.` });
    }
    if (last.status === 'requires_capture') {
      const voided = await providerSteps.voidCharge({ paymentId: this.input.paymentId, chargeId: last.id, ...this.chargingAttempt });
      return this.recordExpiry({ code: 'late_authorization_voided', message: `The payment was authorized at the provider after its window ended; the authorization was voided (${voided.status}).` });
    }
    return this.expire(customer, last.id);
  }

  /** The charge as the PSP holds it, asked for up to the decision grace; null if it never answered. */
  private async lookWithinGrace(chargeId: string): Promise<ProviderCharge | null> {
    const graceMs = this.input.decisionGraceMs ?? WAIT_DEFAULTS.decisionGraceMs;
    try {
      return await providerStepsWithin(graceMs).retrieveCharge({ paymentId: this.input.paymentId, chargeId, ...this.chargingAttempt });
    } catch (error) {
      log.warn('the PSP did not answer within the decision grace', { payment_id: this.input.paymentId, error: String(error) });
      return null;
    }
  }

  /** No outcome within the window: the payment expires (the challenge was voided, or the bank gave none). */
  private async expire(customer: boolean, chargeId: string): Promise<PhaseResult> {
    log.info('waiting window ended; expiring', { payment_id: this.input.paymentId, charge_id: chargeId });
    return this.recordExpiry(
      customer
        ? { code: 'authentication_expired', message: 'The customer did not authenticate in time; the challenge was voided at the provider.' }
        : { code: 'settlement_expired', message: 'The provider gave no outcome within the settlement window.' },
    );
  }

  private async recordExpiry(failure: Failure): Promise<PhaseResult> {
    await records.recordExpiry({ paymentId: this.input.paymentId, failure });
    this.setStatus('expired');
    return { kind: 'final', response: this.firstAnswer! };
  }

  // ── Phase 3: wait for capture (manual capture) ──────────────────────────────────────────

  /** A capture or cancel update, or a void when the authorization window ends (`resumedWindowEnd`: a run that continued another resumes its window). */
  private async awaitCapture(authorization: ProviderCharge, resumedWindowEnd?: number): Promise<void> {
    const { input } = this;
    const chargeId = authorization.id;
    this.listenForCommands();
    this.accepting = true;
    const windowEnd = resumedWindowEnd ?? Date.now() + input.authorizationWindowMs; // workflow time: deterministic on replay
    this.authorizationWindowEnd = windowEnd;
    const waited = await waitForOutcome<Command | Continue>(() => this.command ?? this.continuing(), windowEnd - Date.now());
    if (waited?.kind === 'continue') return this.continueAsNew({ wait: 'capture', charge: authorization, deadline: windowEnd });
    const decided = waited;
    this.accepting = false; // from here on validators refuse, so no update can wait forever
    if (decided === undefined || decided.kind === 'cancel') {
      if (decided === undefined) log.info('authorization window ended uncaptured; voiding', { payment_id: input.paymentId });
      const voided = await this.voidConfirmed(chargeId, windowEnd);
      if ('failure' in voided) {
        // Refused or unconfirmed: the authorization may still hold the customer's money at the PSP.
        log.error('void not confirmed by the PSP; needs an operator', { payment_id: input.paymentId, code: voided.failure.code });
        const failed = await records.recordPaymentFailure({ paymentId: input.paymentId, failure: voided.failure, idempotency: decided?.request.idempotency ?? input.idempotency });
        this.setStatus('failed');
        if (decided) this.commandResponse = failed;
      } else {
        this.showCharge(voided.charge);
        const answer = await records.recordCancel({ paymentId: input.paymentId, request: decided?.request ?? null });
        if (decided) this.commandResponse = answer!;
        this.setStatus('canceled');
      }
    } else {
      await this.capture(chargeId, decided.request, windowEnd);
    }
    // Let the update that carried the command return its response before the run closes.
    await condition(allHandlersFinished);
  }

  /**
   * Captures the charge. A PSP whose captures are confirmed by notification (modifications
   * `notified`) answers the capture with the charge still `requires_capture`: the payment is not
   * shown `succeeded` until the PSP's report of the capture comes (its CAPTURE notification, a
   * `chargeReport`), within what is left of the authorization window. A report that the capture
   * failed (still `requires_capture`, with a decline code), or none by the window's end, voids
   * the authorization and fails the payment (`capture_failed`, `capture_unconfirmed`).
   */
  private async capture(chargeId: string, request: CaptureRequest, windowEnd: number): Promise<void> {
    const { input } = this;
    const before = new Set(this.reports);
    this.captureAsked = { chargeId, amountMinor: request.amountMinor ?? input.amountMinor, currency: input.currency };
    const answered = await providerSteps.captureCharge({ paymentId: input.paymentId, ...this.captureAsked, ...this.chargingAttempt });
    const captured = answered.status === 'requires_capture' ? await waitForOutcome(() => this.captureReport(chargeId, before), Math.max(0, windowEnd - Date.now())) : answered;
    if (captured?.status !== 'succeeded') {
      const failure: Failure = captured
        ? { code: 'capture_failed', message: `The PSP refused the capture: ${captured.declineMessage ?? 'the capture failed'}.` }
        : { code: 'capture_unconfirmed', message: 'The PSP did not confirm the capture within the authorization window.' };
      log.warn('capture not confirmed by the PSP; voiding', { payment_id: input.paymentId, code: failure.code });
      this.commandResponse = (await this.compensate(failure, request.idempotency)).response;
      return;
    }
    this.showCharge(captured);
    // Once captured, giving the money back means a refund, no longer a void.
    this.compensations.replace(`refunded ${captured.amountCapturedMinor} ${input.currency} of charge ${chargeId}`, () => this.giveBack(chargeId, captured.amountCapturedMinor));
    try {
      this.commandResponse = await records.recordCapture({ paymentId: input.paymentId, charge: captured, request });
      this.setStatus('succeeded');
    } catch (error) {
      const refused = failureOfType(error, FailureType.LedgerRejected);
      if (!refused) throw error;
      const failed = await this.compensate({ code: 'ledger_rejected', message: `The ledger refused the capture: ${refused.message}.` }, request.idempotency);
      this.commandResponse = failed.response;
    }
  }

  // ── Phase 4: record the outcome of the wait ─────────────────────────────────────────────

  /**
   * Records a waiting charge's outcome (ledger and event with it); a ledger refusal gives the
   * money back. Its step is `recordSettlement`, a recorded activity name, kept.
   */
  private async recordWaitOutcome(decided: ProviderCharge): Promise<PhaseResult> {
    this.showCharge(decided);
    this.pushCompensation(decided);
    try {
      this.setStatus(await records.recordSettlement({ paymentId: this.input.paymentId, charge: decided }));
    } catch (error) {
      const refused = failureOfType(error, FailureType.LedgerRejected);
      if (!refused) throw error;
      await this.compensate({ code: 'ledger_rejected', message: `The ledger refused the payment: ${refused.message}.` }, this.input.idempotency);
      return { kind: 'final', response: this.firstAnswer! };
    }
    return { kind: 'charge', charge: decided };
  }

  // ── Phase 5: compensate ────────────────────────────────────────────────────────────────

  /** Gives back money that moved, newest step first, then records why the payment failed. */
  private async compensate(reason: Failure, idempotency: ScopedKey): Promise<Final> {
    const { undone, failed } = await this.compensations.run();
    const message = [
      reason.message,
      undone.length ? `Compensated: ${undone.join('; ')}.` : '',
      failed.length ? `Compensation FAILED, needs an operator: ${failed.join('; ')}.` : '',
    ].filter(Boolean).join(' ');
    const response = await records.recordPaymentFailure({ paymentId: this.input.paymentId, failure: { code: failed.length ? 'compensation_failed' : reason.code, message }, idempotency });
    this.setStatus('failed');
    return { kind: 'final', response };
  }

  /** Money that moved gets its compensation, newest first. */
  private pushCompensation(charge: ProviderCharge): void {
    const chargeId = charge.id;
    if (charge.status === 'succeeded') {
      const amountMinor = charge.amountCapturedMinor;
      this.compensations.push(`refunded ${amountMinor} ${this.input.currency} of charge ${chargeId}`, () => this.giveBack(chargeId, amountMinor));
    } else if (charge.status === 'requires_capture') {
      this.compensations.push(`voided authorization ${chargeId}`, async () => {
        const voided = await this.voidConfirmed(chargeId, this.authorizationWindowEnd);
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
  private async voidConfirmed(chargeId: string, windowEnd: number | undefined): Promise<{ charge: ProviderCharge } | { failure: Failure }> {
    const before = new Set(this.reports);
    const answered = await providerSteps.voidCharge({ paymentId: this.input.paymentId, chargeId, ...this.chargingAttempt });
    if (answered.status !== 'requires_capture') return { charge: answered };
    const graceMs = this.input.decisionGraceMs ?? WAIT_DEFAULTS.decisionGraceMs;
    const waitMs = Math.max(graceMs, (windowEnd ?? 0) - Date.now());
    const report = await waitForOutcome(() => this.cancelReport(chargeId, before), waitMs);
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
  private async giveBack(chargeId: string, amountMinor: number) {
    const { paymentId } = this.input;
    const refund = await providerSteps.refundCharge({ subKey: providerSubKey.compensation(paymentId), chargeId, amountMinor, reference: paymentId, ...this.chargingAttempt });
    if (refund.status === 'failed') {
      throw ApplicationFailure.nonRetryable(`the provider refused refund ${refund.id}: ${refund.failureMessage ?? refund.failureCode ?? 'no reason given'}`);
    }
    return refund;
  }

  // ── The run's state as others see it: status, memo, reports, commands ──────────────────

  private setStatus(next: PaymentStatus | 'rejected'): void {
    if (next !== 'rejected') this.status = next;
    upsertSearchAttributes([{ key: PaymentStatusKey, value: next }]);
  }

  /** Keeps the memo's view of the provider's charge current, for an operator in the Web UI. */
  private showCharge(charge: ProviderCharge): void {
    upsertMemo({ provider_charge_id: charge.id, charge_status: charge.status, ...this.routeMemo });
  }

  private showAttempts(plan: RoutePlan, attempts: AttemptMemo[], current: AttemptMemo | null): void {
    this.routeMemo = { provider: current?.provider ?? attempts[attempts.length - 1]!.provider, attempts: current ? [...attempts, current] : [...attempts] };
    upsertMemo({ route: plan.providers, route_reason: plan.reason, ...this.routeMemo });
  }

  /** `from`: the PSP that reported it (by default the one the run asked: a poll's, the details call's). */
  private noteReport(charge: ProviderCharge, from: string | null = this.chargingAttempt.provider ?? null): void {
    // A charge state (the lifecycle table's); anything else (e.g. a refund's event) is not about the charge's outcome.
    if (!isChargeState(charge.status)) return;
    // The charge waited on, not named by its PSP yet (Adyen's redirect answered without its
    // pspReference), is named by that PSP's first report of a charge under our reference: no
    // other charge of this payment is there (a route names each PSP once).
    if (this.waitingChargeId === '' && charge.id !== '' && from !== null && from === this.chargingAttempt.provider && charge.reference === this.input.paymentId) this.waitingChargeId = charge.id;
    if (this.reports.length >= MAX_KEPT_REPORTS) this.reports.shift();
    this.reports.push(charge);
  }

  /**
   * The PSP's report of a capture asked for (one that came after `before`): the charge
   * `succeeded`, or still `requires_capture` with a decline code (the capture failed).
   */
  private captureReport(chargeId: string, before: ReadonlySet<ProviderCharge>): ProviderCharge | undefined {
    return this.reports.find(
      (r) => !before.has(r) && r.id === chargeId && (r.status === 'succeeded' || (r.status === 'requires_capture' && r.declineCode !== null && r.declineCode !== CANCEL_FAILED)),
    );
  }

  /** The PSP's report of a void asked for (one that came after `before`): the charge `canceled`, or still `requires_capture` with `cancel_failed` (refused). */
  private cancelReport(chargeId: string, before: ReadonlySet<ProviderCharge>): ProviderCharge | undefined {
    return this.reports.find((r) => !before.has(r) && r.id === chargeId && (r.status === 'canceled' || (r.status === 'requires_capture' && r.declineCode === CANCEL_FAILED)));
  }

  /**
   * The first report about our charge that decides it from the status the payment waits in
   * (domain/payments.ts applyChargeReport): a wait reported late, a duplicate, or
   * anything that would leave a final status changes nothing.
   */
  private decidedBy(chargeId: string): PspOutcome | undefined {
    const charge = this.reports.find((report) => {
      if (report.id !== chargeId || chargeId === '') return false;
      const next = applyChargeReport(this.status, report.status);
      return next !== null && !isOutcomePending(next);
    });
    return charge ? { kind: 'decided', charge } : undefined;
  }

  /** The return route's update is taken only while the payment waits for its customer's challenge, one return at a time. */
  private refuseUnlessChallengeOpen(): void {
    if (!this.accepting || this.returning || this.command || this.waitingChargeId === undefined || deadlineOf(this.status) !== 'authentication') {
      throw ApplicationFailure.create({ type: FailureType.ChallengeNotOpen, message: `payment ${this.input.paymentId} is not waiting for its customer's challenge (${this.status})`, nonRetryable: true });
    }
  }

  /**
   * The customer is back from the challenge (the return route): the PSP's details call answers
   * the charge, which is applied as a webhook's report is (the wait records it); the update
   * answers once it was applied. A result the PSP refuses changes nothing (the update fails
   * ChallengeReturnRefused, and another return may come); a PSP that does not answer within
   * CHALLENGE_RETURN_WITHIN_MS leaves the decision to its notification or the window's end.
   */
  private async completeChallenge(request: ChallengeReturn): Promise<ChallengeReturnOutcome> {
    this.updatesTaken++;
    this.returning = true;
    serveRequest(request.requestId);
    const { input } = this;
    const chargeId = this.waitingChargeId!;
    try {
      const charge = await providerStepsWithin(CHALLENGE_RETURN_WITHIN_MS).completeChallenge({
        paymentId: input.paymentId,
        chargeId,
        redirectResult: request.redirectResult,
        amountMinor: input.amountMinor,
        currency: input.currency,
        capture: input.captureMethod === 'automatic',
        ...this.chargingAttempt,
      });
      this.noteReport(charge);
      // Answered once the wait has applied it: the status left the challenge, or the report decides nothing.
      const named = this.waitingChargeId ?? chargeId;
      await condition(() => this.status !== 'requires_action' || this.decidedBy(named) === undefined);
    } catch (error) {
      if (failureOfType(error, FailureType.ProviderRejected)) {
        throw ApplicationFailure.create({ type: FailureType.ChallengeReturnRefused, message: `the PSP refused the details call of payment ${input.paymentId}; nothing changed`, nonRetryable: true });
      }
      log.warn('the details call got no answer; the notification or the window decides', { payment_id: input.paymentId, error: String(error) });
    } finally {
      this.returning = false;
    }
    return { status: this.status };
  }

  private retrieve(chargeId: string): Promise<ProviderCharge> {
    return providerSteps.retrieveCharge({ paymentId: this.input.paymentId, chargeId, ...this.chargingAttempt });
  }

  /** Voids a waiting charge; if the PSP refuses (it was decided meanwhile), the charge as it is now. */
  private async voidOrLookUp(chargeId: string): Promise<ProviderCharge> {
    try {
      return await providerSteps.voidCharge({ paymentId: this.input.paymentId, chargeId, ...this.chargingAttempt });
    } catch (error) {
      if (!failureOfType(error, FailureType.ProviderRejected)) throw error;
      return this.retrieve(chargeId);
    }
  }

  /**
   * Commands (capture, cancel): accepted while a wait is on and the lifecycle table says the
   * status accepts them. Registered when the first wait begins.
   */
  private listenForCommands(): void {
    if (this.listening) return;
    this.listening = true;
    setHandler(captureUpdate, (request) => this.acceptCommand({ kind: 'capture', request }), {
      validator: (request) => {
        this.refuseUnlessAccepted('capture');
        if (request.amountMinor !== null && request.amountMinor > this.input.amountMinor) {
          throw ApplicationFailure.create({
            type: FailureType.CaptureExceedsAuthorized,
            message: `capture of ${request.amountMinor} exceeds the authorized ${this.input.amountMinor}`,
            nonRetryable: true,
          });
        }
      },
    });
    setHandler(cancelUpdate, (request) => this.acceptCommand({ kind: 'cancel', request }), {
      validator: (_request) => this.refuseUnlessAccepted('cancel'),
    });
  }

  private async acceptCommand(next: Command): Promise<FinalResponse> {
    this.updatesTaken++;
    if (this.command) {
      // The validator admits one command; this only guards against two in one activation.
      throw ApplicationFailure.create({ type: refusalType(next), message: `payment ${this.input.paymentId} already has a ${this.command.kind} in progress`, nonRetryable: true });
    }
    this.command = next;
    serveRequest(next.request.requestId);
    await condition(() => this.commandResponse !== undefined || this.commandRefused !== undefined);
    if (this.commandRefused) throw this.commandRefused;
    return this.commandResponse!;
  }

  private refuseUnlessAccepted(kind: Command['kind']): void {
    if (!this.accepting || this.command || !accepts(this.status, kind)) {
      const message = this.command ? `payment ${this.input.paymentId} already has a ${this.command.kind} in progress` : commandRefusal(this.input.paymentId, this.status, kind);
      throw ApplicationFailure.create({ type: refusalType({ kind }), message, nonRetryable: true });
    }
  }
}
