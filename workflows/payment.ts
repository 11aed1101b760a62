import { ApplicationFailure, allHandlersFinished, condition, log, patched, setHandler, upsertMemo, upsertSearchAttributes } from '@temporalio/workflow';
import { accepts, applyChargeReport, commandRefusal, isChargeState, isOutcomePending } from '../domain/payment-lifecycle';
import type { ProviderCharge } from '../provider/types';
import type { AttemptMemo, RoutePlan } from '../domain/attempts';
import {
  cancelUpdate,
  captureUpdate,
  chargeReportSignal,
  FailureType,
  WAIT_DEFAULTS,
  paymentStatusQuery,
  PaymentStatusKey,
  type CancelRequest,
  type CaptureRequest,
  type FinalResponse,
  type PaymentStatus,
  type PaymentWorkflowInput,
  type ScopedKey,
} from '../shared/definitions';
import { providerSubKey } from '../shared/keys';
import { providerSteps, records } from './activities';
import { serveRequest } from './interceptors';
import { Compensations, failureOfType } from './saga';

type Command = { kind: 'capture'; request: CaptureRequest } | { kind: 'cancel'; request: CancelRequest };
/** How a wait for the PSP ends: a command (cancel), or the charge settled as the PSP reported it. */
type PspOutcome = Command | { kind: 'settled'; charge: ProviderCharge };

/** Reports kept while waiting: a flood of webhooks cannot grow the run's state without bound. */
const MAX_KEPT_REPORTS = 20;

/**
 * The one wait of every phase: until `outcome()` has a value (a merchant's command, or an
 * external report), or the window ends (undefined). With `poll`, the wait also asks the PSP
 * itself on a growing backoff (first after `firstMs`, doubling up to `maxMs`), so a lost
 * webhook delays nothing beyond the next poll; the poll feeds the same reports a webhook does.
 * Without `poll` it is exactly one condition with the window as its timeout (the commands the
 * manual-capture wait has always made, so its recorded histories replay).
 */
async function waitForOutcome<T>(
  outcome: () => T | undefined,
  windowMs: number,
  poll?: { firstMs: number; maxMs: number; run: () => Promise<void> },
): Promise<T | undefined> {
  if (!poll) {
    await condition(() => outcome() !== undefined, windowMs);
    return outcome();
  }
  const deadline = Date.now() + windowMs; // workflow time: deterministic on replay
  let interval = poll.firstMs;
  for (;;) {
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
    interval = Math.min(interval * 2, poll.maxMs);
  }
}

/**
 * patched() ids. Each guards a change that adds, removes or reorders commands, so runs begun
 * by the code before it still replay (test/histories/README.md). An id is never reused.
 */
const Patch = {
  /** The memo shows the provider's charge id and status, for an operator in the Web UI. */
  chargeMemo: 'charge-memo',
  /** Phase "await customer": the PSP asked for 3-D Secure (requires_action); wait for the customer. */
  awaitCustomer: 'await-customer',
  /** Phase "await settlement": an asynchronous method's outcome is pending at the PSP (processing). */
  awaitSettlement: 'await-settlement',
  /** A command's activities carry the command's request id in their header (workflows/interceptors.ts). */
  commandRequestId: 'command-request-id',
  /** The API persisted the intent with the key's claim (input.intentPersisted): no first step. */
  intentInClaim: 'intent-in-claim',
  /**
   * Issue 22: the PSPs to try come from planRoute, each attempt charges under its own sub-key
   * (chargeAttempt), is recorded (recordAttempt), and the payment moves to the next PSP only
   * when the last one certainly took no money. Decided first thing in the run.
   */
  routeAttempts: 'route-attempts',
  /**
   * Issue 24: the route is decided in the first chargeAttempt (input `route`), not by a
   * planRoute step before it: a routed payment is two steps again (charge, record).
   */
  planInCharge: 'plan-in-charge',
} as const;

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
 * One payment, from intent to its final state. Its id is derived from the scoped
 * idempotency key, so every delivery of the same request lands on this one run.
 *
 * Phases (each wait is `waitForOutcome`; the lifecycle is domain/payment-lifecycle.ts):
 * 1. Authorize: persist the intent unless the API did with the key's claim (the order guard
 *    may refuse it: 409, recorded), charge the
 *    provider under the payment's charge sub-key (lookup first on retries), and record the
 *    outcome in one transaction: payment state, ledger, outbox event and the operation's
 *    first answer for the idempotency store (202 when the outcome must be waited for).
 * 2. Await customer (requires_action) or await settlement (processing): PSP webhooks arrive as
 *    `chargeReport` signals and the workflow polls the PSP itself; whichever settles the charge
 *    first is recorded. The window's end expires the payment (a late success is given back).
 * 3. Await capture (manual capture): a capture or cancel update, or void when the window ends.
 * Money that moved but cannot be booked is given back (compensation) and the reason recorded.
 */
export async function paymentWorkflow(input: PaymentWorkflowInput): Promise<FinalResponse> {
  // First, before any other command: runs begun before routing charge the one provider.
  const routed = patched(Patch.routeAttempts);
  // Decided here too, before any step: a patch marker recorded behind a local activity's marker
  // (beginPayment) does not replay (see the waits' patches below).
  const planInCharge = routed && patched(Patch.planInCharge);
  /**
   * Where the charge is: the PSP and the attempt whose sub-key made it. Empty in runs begun
   * before routing (their steps' inputs stay as they were: the default provider, attempt 1).
   */
  let holder: { provider?: string; attempt?: number } = {};
  /** The memo's attempts (routed runs): which PSP each attempt went to, and why it moved on. */
  let routeMemo: { provider?: string; attempts?: AttemptMemo[]; route?: string[]; route_reason?: string } = {};
  let status: PaymentStatus = 'processing';
  const setStatus = (next: PaymentStatus | 'rejected') => {
    if (next !== 'rejected') status = next;
    upsertSearchAttributes([{ key: PaymentStatusKey, value: next }]);
  };
  setHandler(paymentStatusQuery, () => status);
  const compensations = new Compensations();
  /** Keeps the memo's view of the provider's charge current (a new command: patched). */
  const showCharge = (charge: ProviderCharge) => {
    if (patched(Patch.chargeMemo)) upsertMemo({ provider_charge_id: charge.id, charge_status: charge.status, ...routeMemo });
  };

  /**
   * What the PSP reported about the charge (webhooks via the API, and the workflow's own polls),
   * oldest first. Kept from the start of the run: a webhook may arrive before the charge's answer.
   * A handler sets no command, so registering it changes no recorded history.
   */
  const reports: ProviderCharge[] = [];
  const noteReport = (charge: ProviderCharge) => {
    // A charge state (domain/payment-lifecycle.ts); anything else (e.g. a refund's event) is not about the charge's outcome.
    if (!isChargeState(charge.status)) return;
    if (reports.length >= MAX_KEPT_REPORTS) reports.shift();
    reports.push(charge);
  };
  setHandler(chargeReportSignal, (report) => {
    log.info('charge report', { payment_id: input.paymentId, source: report.source, event_id: report.eventId, charge_status: report.charge.status });
    noteReport(report.charge);
  });
  /**
   * The first report about our charge that settles it from the status the payment waits in
   * (domain/payment-lifecycle.ts applyChargeReport): a wait reported late, a duplicate, or
   * anything that would leave a final status changes nothing.
   */
  const settlingReport = (chargeId: string): ProviderCharge | undefined =>
    reports.find((charge) => {
      if (charge.id !== chargeId) return false;
      const next = applyChargeReport(status, charge.status);
      return next !== null && !isOutcomePending(next);
    });

  /**
   * A compensating refund. The provider answers a refund it cannot send with a failed refund
   * (no money moved), not an error: that must count as a failed compensation, or the payment
   * would say "Compensated" while the customer's money stayed with us.
   */
  const giveBack = async (chargeId: string, amountMinor: number) => {
    const refund = await providerSteps.refundCharge({ subKey: providerSubKey.compensation(input.paymentId), chargeId, amountMinor, reference: input.paymentId, ...atHolder() });
    if (refund.status === 'failed') {
      throw ApplicationFailure.nonRetryable(`the provider refused refund ${refund.id}: ${refund.failureMessage ?? refund.failureCode ?? 'no reason given'}`);
    }
    return refund;
  };
  /** Money that moved gets its compensation, newest first. */
  const pushCompensation = (charge: ProviderCharge) => {
    if (charge.status === 'succeeded') {
      const chargeId = charge.id;
      const amountMinor = charge.amountCapturedMinor;
      compensations.push(`refunded ${amountMinor} ${input.currency} of charge ${chargeId}`, () => giveBack(chargeId, amountMinor));
    } else if (charge.status === 'requires_capture') {
      const chargeId = charge.id;
      compensations.push(`voided authorization ${chargeId}`, () => providerSteps.voidCharge({ paymentId: input.paymentId, chargeId, ...atHolder() }));
    }
  };

  /** Gives back money that moved, newest step first, then records why the payment failed. */
  async function failAfterMoneyMoved(reason: { code: string; message: string }, idempotency: ScopedKey): Promise<FinalResponse> {
    const { undone, failed } = await compensations.run();
    const message = [
      reason.message,
      undone.length ? `Compensated: ${undone.join('; ')}.` : '',
      failed.length ? `Compensation FAILED, needs an operator: ${failed.join('; ')}.` : '',
    ].filter(Boolean).join(' ');
    const response = await records.recordPaymentFailure({
      paymentId: input.paymentId,
      failure: { code: failed.length ? 'compensation_failed' : reason.code, message },
      idempotency,
    });
    setStatus('failed');
    return response;
  }

  // Commands (capture, cancel): accepted while a wait is on and the lifecycle table says the
  // status accepts them. Registered when the first wait begins.
  let command: Command | undefined;
  let accepting = false;
  let commandResponse: FinalResponse | undefined;
  let commandRefused: ApplicationFailure | undefined;
  let listening = false;
  const listenForCommands = () => {
    if (listening) return;
    listening = true;
    const acceptCommand = async (next: Command): Promise<FinalResponse> => {
      if (command) {
        // The validator admits one command; this only guards against two in one activation.
        throw ApplicationFailure.create({ type: refusalType(next), message: `payment ${input.paymentId} already has a ${command.kind} in progress`, nonRetryable: true });
      }
      command = next;
      if (patched(Patch.commandRequestId)) serveRequest(next.request.requestId);
      await condition(() => commandResponse !== undefined || commandRefused !== undefined);
      if (commandRefused) throw commandRefused;
      return commandResponse!;
    };
    const refuseUnlessAccepted = (kind: Command['kind']) => {
      if (!accepting || command || !accepts(status, kind)) {
        const message = command ? `payment ${input.paymentId} already has a ${command.kind} in progress` : commandRefusal(input.paymentId, status, kind);
        throw ApplicationFailure.create({ type: refusalType({ kind }), message, nonRetryable: true });
      }
    };
    setHandler(captureUpdate, (request) => acceptCommand({ kind: 'capture', request }), {
      validator: (request) => {
        refuseUnlessAccepted('capture');
        if (request.amountMinor !== null && request.amountMinor > input.amountMinor) {
          throw ApplicationFailure.create({
            type: FailureType.CaptureExceedsAuthorized,
            message: `capture of ${request.amountMinor} exceeds the authorized ${input.amountMinor}`,
            nonRetryable: true,
          });
        }
      },
    });
    setHandler(cancelUpdate, (request) => acceptCommand({ kind: 'cancel', request }), {
      validator: (_request) => refuseUnlessAccepted('cancel'),
    });
  };

  // ── Phase 1: authorize ────────────────────────────────────────────────────────────────
  // The intent is usually persisted by the API with the key's claim (the order guard's 409 is
  // answered there); runs begun before that, or started by a retry, persist it here.
  const begun = input.intentPersisted === true && patched(Patch.intentInClaim) ? ({ kind: 'created' } as const) : await records.beginPayment(input);
  if (begun.kind === 'rejected') {
    setStatus('rejected');
    return begun.response;
  }

  /** What the PSP is asked to charge (each attempt's sub-key comes from the payment id). */
  const chargeRequest = {
    paymentId: input.paymentId,
    amountMinor: input.amountMinor,
    currency: input.currency,
    paymentMethod: input.paymentMethod,
    capture: input.captureMethod === 'automatic',
    description: input.description,
    ...(input.returnUrl ? { returnUrl: input.returnUrl } : {}),
  };
  let charge: ProviderCharge;
  if (routed) {
    const routedCharge = await chargeAlongTheRoute();
    if (routedCharge.kind === 'final') return routedCharge.response;
    charge = routedCharge.charge;
  } else {
    try {
      charge = await providerSteps.chargePayment(chargeRequest);
    } catch (error) {
      const refused = failureOfType(error, FailureType.ProviderRejected);
      if (!refused) throw error;
      // The provider refused the request itself: no charge exists under our key.
      const response = await records.recordPaymentFailure({
        paymentId: input.paymentId,
        failure: { code: 'provider_rejected', message: refused.message },
        idempotency: input.idempotency,
      });
      setStatus('failed');
      return response;
    }
  }
  showCharge(charge);
  pushCompensation(charge);
  // The waits' patches are decided here, right after the charge's answer (where charge-memo's is),
  // not after the local activity below: a patch marker recorded behind a local activity's marker
  // was seen not to replay (a query's full replay met the marker with no patched() call).
  const waits = charge.status === 'requires_action' ? patched(Patch.awaitCustomer) : charge.status === 'processing' ? patched(Patch.awaitSettlement) : false;

  let firstResponse: FinalResponse;
  try {
    firstResponse = await records.recordChargeOutcome({
      payment: input,
      charge,
      ...(holder.provider !== undefined ? { attempt: { attempt: holder.attempt ?? 1, provider: holder.provider } } : {}),
    });
  } catch (error) {
    const refused = failureOfType(error, FailureType.LedgerRejected);
    if (!refused) throw error;
    return failAfterMoneyMoved({ code: 'ledger_rejected', message: `The ledger refused the payment: ${refused.message}.` }, input.idempotency);
  }

  // ── Phase 2: await customer (3-D Secure) or await settlement (asynchronous method) ──────
  if (charge.status === 'requires_action' || charge.status === 'processing') {
    const customer = charge.status === 'requires_action';
    // Guarded like every new phase; runs recorded before it never got here (their PSP had no waits).
    if (waits) {
      setStatus(charge.status);
      const settled = await awaitPsp(charge, customer);
      if (settled.kind !== 'settled') return settled.response;
      charge = settled.charge;
    }
  } else {
    setStatus(charge.status === 'requires_capture' ? 'requires_capture' : charge.status === 'succeeded' ? 'succeeded' : 'declined');
  }
  if (charge.status !== 'requires_capture') return firstResponse;

  // ── Phase 3: await capture (manual capture) ───────────────────────────────────────────
  const chargeId = charge.id;
  listenForCommands();
  accepting = true;
  const decided = await waitForOutcome(() => command, input.authorizationWindowMs);
  accepting = false; // from here on validators refuse, so no update can wait forever

  if (decided === undefined) {
    log.info('authorization window ended uncaptured; voiding', { paymentId: input.paymentId });
    showCharge(await providerSteps.voidCharge({ paymentId: input.paymentId, chargeId, ...atHolder() }));
    await records.recordCancel({ paymentId: input.paymentId, request: null });
    setStatus('canceled');
  } else if (decided.kind === 'cancel') {
    showCharge(await providerSteps.voidCharge({ paymentId: input.paymentId, chargeId, ...atHolder() }));
    commandResponse = (await records.recordCancel({ paymentId: input.paymentId, request: decided.request }))!;
    setStatus('canceled');
  } else {
    const amountMinor = decided.request.amountMinor ?? input.amountMinor;
    const captured = await providerSteps.captureCharge({ paymentId: input.paymentId, chargeId, amountMinor, ...atHolder() });
    showCharge(captured);
    // Once captured, giving the money back means a refund, no longer a void.
    compensations.replace(`refunded ${captured.amountCapturedMinor} ${input.currency} of charge ${chargeId}`, () =>
      giveBack(chargeId, captured.amountCapturedMinor),
    );
    try {
      commandResponse = await records.recordCapture({ paymentId: input.paymentId, charge: captured, request: decided.request });
      setStatus('succeeded');
    } catch (error) {
      const refused = failureOfType(error, FailureType.LedgerRejected);
      if (!refused) throw error;
      commandResponse = await failAfterMoneyMoved(
        { code: 'ledger_rejected', message: `The ledger refused the capture: ${refused.message}.` },
        decided.request.idempotency,
      );
    }
  }
  // Let the update that carried the command return its response before the run closes.
  await condition(allHandlersFinished);
  return firstResponse;

  /**
   * Phase 2: the charge waits at the PSP, for the customer's challenge (requires_action) or for
   * the bank (processing). Ends with the charge settled (recorded here, then back to the main
   * flow: requires_capture goes on to phase 3), or with the payment final: canceled on the
   * merchant's request, expired when the window ends, failed if the ledger refuses.
   */
  async function awaitPsp(
    waiting: ProviderCharge,
    customer: boolean,
  ): Promise<{ kind: 'settled'; charge: ProviderCharge } | { kind: 'final'; response: FinalResponse }> {
    const chargeId = waiting.id;
    const windowMs = customer ? (input.authenticationWindowMs ?? WAIT_DEFAULTS.authenticationWindowMs) : (input.settlementWindowMs ?? WAIT_DEFAULTS.settlementWindowMs);
    const poll = input.statusPoll ?? WAIT_DEFAULTS.statusPoll;
    const pollCharge = async () => noteReport(await providerSteps.retrieveCharge({ paymentId: input.paymentId, chargeId, ...atHolder() }));
    // The Web UI shows why the run waits and until when (Memo tab), next to the timer in its history.
    upsertMemo({
      waiting_for: customer ? 'customer authentication (3-D Secure)' : 'the PSP to settle an asynchronous payment',
      waiting_until: new Date(Date.now() + windowMs).toISOString(),
    });
    listenForCommands();
    accepting = true;
    const outcome = await waitForOutcome<PspOutcome>(
      () => command ?? (() => {
        const charge = settlingReport(chargeId);
        return charge ? { kind: 'settled', charge } : undefined;
      })(),
      windowMs,
      { firstMs: poll.firstMs, maxMs: poll.maxMs, run: pollCharge },
    );
    accepting = false;
    upsertMemo({ waiting_for: null, waiting_until: null });

    if (outcome?.kind === 'settled') return settle(outcome.charge);
    if (outcome?.kind === 'cancel') {
      // The merchant gives up on the customer's challenge: void it at the PSP.
      const voided = await voidOrLookUp(chargeId);
      if (voided.status === 'canceled') {
        showCharge(voided);
        commandResponse = (await records.recordCancel({ paymentId: input.paymentId, request: outcome.request }))!;
        setStatus('canceled');
        await condition(allHandlersFinished);
        return { kind: 'final', response: firstResponse };
      }
      // The customer finished first: the charge's own outcome stands, and the cancel is refused.
      commandRefused = ApplicationFailure.create({
        type: FailureType.PaymentNotCancelable,
        message: `payment ${input.paymentId} was ${voided.status} at the provider before it could be canceled`,
        nonRetryable: true,
      });
      command = undefined;
      const result = await settle(voided);
      await condition(allHandlersFinished);
      commandRefused = undefined;
      return result;
    }

    // The window ended without an outcome: no money may be kept for a payment the merchant
    // now sees as expired. A challenge is voided; a bank debit cannot be, so the PSP is asked once more.
    log.info('waiting window ended; expiring', { payment_id: input.paymentId, waiting: waiting.status });
    const last = customer ? await voidOrLookUp(chargeId) : await providerSteps.retrieveCharge({ paymentId: input.paymentId, chargeId, ...atHolder() });
    showCharge(last);
    let failure: { code: string; message: string };
    if (last.status === 'canceled' || last.status === 'requires_action' || last.status === 'processing') {
      failure = customer
        ? { code: 'authentication_expired', message: 'The customer did not authenticate in time; the challenge was voided at the provider.' }
        : { code: 'settlement_expired', message: 'The provider gave no outcome within the settlement window.' };
    } else if (last.status === 'declined') {
      return settle(last);
    } else if (last.status === 'succeeded') {
      // A late success: the money is given back and the payment says so.
      const refund = await giveBack(chargeId, last.amountCapturedMinor);
      failure = { code: 'late_success_refunded', message: `The payment succeeded at the provider after its window ended; refund ${refund.id} gave the money back.` };
    } else {
      // requires_capture: authorized after the window; the void below releases it.
      const voided = await providerSteps.voidCharge({ paymentId: input.paymentId, chargeId, ...atHolder() });
      failure = { code: 'late_authorization_voided', message: `The payment was authorized at the provider after its window ended; the authorization was voided (${voided.status}).` };
    }
    await records.recordExpiry({ paymentId: input.paymentId, failure });
    setStatus('expired');
    return { kind: 'final', response: firstResponse };
  }

  /** The PSP and attempt holding the charge, for the steps' inputs (nothing in runs begun before routing). */
  function atHolder(): { provider?: string; attempt?: number } {
    return holder;
  }

  /**
   * Phase 1 of a routed run: the PSPs planRoute names, tried in order. Each attempt charges
   * under its own sub-key and is recorded; the payment moves to the next PSP only when this one
   * certainly took no money (it refused the request, it was unreachable before anything was
   * sent, its lookup after lost answers found no charge) or declined with a code another PSP
   * may accept. While this one's outcome is unknown, chargeAttempt keeps retrying HERE (the
   * activity never answers "unknown"): the next PSP is never asked while this one may hold money.
   */
  async function chargeAlongTheRoute(): Promise<{ kind: 'charge'; charge: ProviderCharge } | { kind: 'final'; response: FinalResponse }> {
    // With the intent, so the plan can persist it again if a start in doubt left the run without it.
    const routeRequest = {
      paymentId: input.paymentId,
      tenantId: input.tenantId,
      amountMinor: input.amountMinor,
      currency: input.currency,
      paymentMethod: input.paymentMethod,
      ...(input.intentPersisted === true ? { intent: input } : {}),
    };
    // Runs begun since 'plan-in-charge' learn the plan from their first attempt's answer.
    let plan: RoutePlan | undefined = planInCharge ? undefined : await records.planRoute(routeRequest);
    const attempts: AttemptMemo[] = [];
    const showAttempts = (route: RoutePlan, current: AttemptMemo | null) => {
      routeMemo = { provider: current?.provider ?? attempts[attempts.length - 1]!.provider, attempts: current ? [...attempts, current] : [...attempts] };
      upsertMemo({ route: route.providers, route_reason: route.reason, ...routeMemo });
    };
    if (plan) showAttempts(plan, { attempt: 1, provider: plan.providers[0]!, outcome: 'pending', error_code: null });
    for (let attempt = 1; ; attempt++) {
      const charge = { ...chargeRequest, attempt };
      let result: Awaited<ReturnType<typeof providerSteps.chargeAttempt>>;
      try {
        result = await providerSteps.chargeAttempt(
          plan ? { ...charge, provider: plan.providers[attempt - 1]!, canFailOver: attempt < plan.providers.length } : { ...charge, route: routeRequest },
        );
      } catch (error) {
        const refused = failureOfType(error, FailureType.ProviderRejected);
        if (!refused || !plan) throw error;
        // The last PSP refused the request itself: nothing was charged anywhere.
        return { kind: 'final', response: await refusedEverywhere(plan, attempt, String(refused.details?.[0] ?? 'provider_rejected'), refused.message) };
      }
      plan ??= result.plan!;
      const route = plan;
      const provider = route.providers[attempt - 1]!;
      const next = route.providers[attempt];
      holder = { provider, attempt };
      const nextAttempt = next !== undefined ? { attempt: attempt + 1, provider: next } : null;
      const movesOn =
        result.kind === 'not_charged' ||
        (result.charge.status === 'declined' && result.charge.declineCode !== null && (route.retryableDeclineCodes ?? []).includes(result.charge.declineCode));
      if (movesOn && nextAttempt) {
        const outcome = result.kind === 'not_charged' ? result.outcome : 'declined';
        const errorCode = result.kind === 'not_charged' ? result.errorCode : result.charge.declineCode;
        attempts.push({ attempt, provider, outcome, error_code: errorCode, moved_on_because: movedOnBecause(provider, outcome, errorCode) });
        await records.recordAttempt({
          paymentId: input.paymentId,
          attempt,
          provider,
          outcome,
          providerChargeId: result.kind === 'charge' ? result.charge.id : null,
          errorCode,
          next: nextAttempt,
        });
        showAttempts(route, { attempt: nextAttempt.attempt, provider: nextAttempt.provider, outcome: 'pending', error_code: null });
        continue;
      }
      if (result.kind === 'not_charged') {
        // The last PSP: only a refusal of the request is answered (a step deciding its route, or
        // one that did otherwise, is a bug: without a next PSP the step keeps asking this one).
        if (result.outcome !== 'rejected' || result.plan === undefined) throw ApplicationFailure.nonRetryable(`chargeAttempt answered ${result.outcome} at the last provider ${provider}`);
        return { kind: 'final', response: await refusedEverywhere(route, attempt, result.errorCode, result.message) };
      }
      attempts.push({ attempt, provider, outcome: result.charge.status, error_code: result.charge.declineCode });
      // Shown with the charge (showCharge, right after this): no memo command of its own.
      // (Runs that decided their route in the charge show the route here too: no memo before it.)
      routeMemo = { provider, attempts: [...attempts], ...(result.plan ? { route: result.plan.providers, route_reason: result.plan.reason } : {}) };
      return { kind: 'charge', charge: result.charge };
    }

    /** Records that the last PSP refused the request and fails the payment (nothing charged anywhere). */
    async function refusedEverywhere(route: RoutePlan, attempt: number, code: string, message: string): Promise<FinalResponse> {
      const provider = route.providers[attempt - 1]!;
      holder = { provider, attempt };
      attempts.push({ attempt, provider, outcome: 'rejected', error_code: code });
      await records.recordAttempt({ paymentId: input.paymentId, attempt, provider, outcome: 'rejected', providerChargeId: null, errorCode: code, next: null });
      showAttempts(route, null);
      const response = await records.recordPaymentFailure({
        paymentId: input.paymentId,
        failure: { code: 'provider_rejected', message },
        idempotency: input.idempotency,
      });
      setStatus('failed');
      return response;
    }
  }

  /** Voids a waiting charge; if the PSP refuses (it settled meanwhile), the charge as it is now. */
  async function voidOrLookUp(chargeId: string): Promise<ProviderCharge> {
    try {
      return await providerSteps.voidCharge({ paymentId: input.paymentId, chargeId, ...atHolder() });
    } catch (error) {
      if (!failureOfType(error, FailureType.ProviderRejected)) throw error;
      return providerSteps.retrieveCharge({ paymentId: input.paymentId, chargeId, ...atHolder() });
    }
  }

  /** Records a waiting charge's outcome (ledger and event with it); a ledger refusal gives the money back. */
  async function settle(settled: ProviderCharge): Promise<{ kind: 'settled'; charge: ProviderCharge } | { kind: 'final'; response: FinalResponse }> {
    showCharge(settled);
    pushCompensation(settled);
    try {
      setStatus(await records.recordSettlement({ paymentId: input.paymentId, charge: settled }));
    } catch (error) {
      const refused = failureOfType(error, FailureType.LedgerRejected);
      if (!refused) throw error;
      await failAfterMoneyMoved({ code: 'ledger_rejected', message: `The ledger refused the payment: ${refused.message}.` }, input.idempotency);
      return { kind: 'final', response: firstResponse };
    }
    return { kind: 'settled', charge: settled };
  }
}

function refusalType(command: Pick<Command, 'kind'>): string {
  return command.kind === 'capture' ? FailureType.PaymentNotCapturable : FailureType.PaymentNotCancelable;
}
