/**
 * The payment run's state, under every phase (docs/ARCHITECTURE.md, "The payment workflow"):
 * one object (RunState) that the phases' functions share, what others see of it (status, memo,
 * the PSP's reports), the one wait every phase waits through (waitForOutcome), and continuing
 * as new. It imports no phase: the phases (charge, wait, capture, recovery, run) sit above it.
 */
import { type ApplicationFailure, allHandlersFinished, condition, continueAsNew, log, upsertMemo, upsertSearchAttributes, workflowInfo } from '@temporalio/workflow';
import { applyChargeReport, isChargeState, isOutcomePending } from '../../domain/payments';
import type { ProviderCharge } from '../../provider/types';
import type { AttemptMemo, RoutePlan } from '../../domain/payments-attempts';
import type { FinalResponse } from '../../shared/definitions';
import { CANCEL_FAILED, type CaptureAsked, PAYMENT_CONTINUE_AFTER, type PaymentCarried, PaymentStatusKey, type CancelRequest, type CaptureRequest, type PaymentStatus, type PaymentWorkflowInput } from '../../shared/payments';
import { Compensations } from '../saga';

export type Command = { kind: 'capture'; request: CaptureRequest } | { kind: 'cancel'; request: CancelRequest };
/** How a wait for the PSP ends: a command (cancel), or the charge decided as the PSP reported it. */
export type PspOutcome = Command | { kind: 'decided'; charge: ProviderCharge };
/** A wait ended because the run is to continue as new (its room for updates or history runs out). */
export type Continue = { kind: 'continue' };
/** What a phase hands on: the charge, to the next phase; or the payment's final answer. */
export type PhaseResult = { kind: 'charge'; charge: ProviderCharge } | Final;
export type Final = { kind: 'final'; response: FinalResponse };
/** A reason the payment failed or expired, recorded on it. */
export type Failure = { code: string; message: string };

/** Reports kept while waiting: a flood of webhooks cannot grow the run's state without bound. */
const MAX_KEPT_REPORTS = 20;

/** One payment's run: what its phases read and change. */
export interface RunState {
  readonly input: PaymentWorkflowInput;
  status: PaymentStatus;
  /** The charge attempt under way, and its PSP: once the charge is made, every provider step goes there. */
  chargingAttempt: { provider?: string; attempt?: number };
  /** The memo's view of the route: which PSP each attempt went to, and why it moved on. */
  routeMemo: { provider?: string; attempts?: AttemptMemo[]; route?: string[]; route_reason?: string };
  readonly compensations: Compensations;
  /** When the authorization window ends (workflow time), once the wait for capture began: how long a void waits for its confirmation. */
  authorizationWindowEnd: number | undefined;
  /** The route the first attempt decided: where a retry of a recovering payment goes when a PSP took no money. */
  routePlan: RoutePlan | undefined;
  /** What the PSP reported about the charge (webhooks, polls), oldest first; kept from the start. */
  readonly reports: ProviderCharge[];
  // The merchant's command (capture, cancel) and its answer.
  command: Command | undefined;
  accepting: boolean;
  listening: boolean;
  commandResponse: FinalResponse | undefined;
  commandRefused: ApplicationFailure | undefined;
  /**
   * The create request's first answer, once known: recorded with the charge's outcome (202 while
   * the outcome is waited for), or the run's result when it ended before (firstAnswerUpdate).
   */
  firstAnswer: FinalResponse | undefined;
  /** The charge waiting at the PSP for its customer or bank (awaitPsp), while it waits. */
  waitingChargeId: string | undefined;
  /** A customer's return from the challenge is being completed by the PSP's details call. */
  returning: boolean;
  /** The updates this run has taken (accepted): past input.continueAfterUpdates it continues as new at its next quiet moment in a wait. */
  updatesTaken: number;
  /** The capture asked of the PSP (captureAskedQuery): what its report of the capture must agree with. */
  captureAsked: CaptureAsked | null;
}

/** A new run's state: processing, nothing charged, nothing reported, no command. */
export function newRunState(input: PaymentWorkflowInput): RunState {
  return {
    input,
    status: 'processing',
    chargingAttempt: {},
    routeMemo: {},
    compensations: new Compensations(),
    authorizationWindowEnd: undefined,
    routePlan: undefined,
    reports: [],
    command: undefined,
    accepting: false,
    listening: false,
    commandResponse: undefined,
    commandRefused: undefined,
    firstAnswer: undefined,
    waitingChargeId: undefined,
    returning: false,
    updatesTaken: 0,
    captureAsked: null,
  };
}

/** The status poll of a wait: its next interval (doubling up to `maxMs`, kept here so a run that continues as new goes on with it), and the poll itself. */
export interface StatusPoll {
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
export async function waitForOutcome<T>(outcome: () => T | undefined, windowMs: number, poll?: StatusPoll): Promise<T | undefined> {
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

/** The create request's first answer, once: the first one known stays. */
export function answered(run: RunState, response: FinalResponse): void {
  run.firstAnswer ??= response;
}

// ── Continue as new: a run never runs out of room for a merchant's command ──────────────

/**
 * The run continues as new (within a wait, when no command is pending and no handler runs)
 * once it has taken input.continueAfterUpdates updates, or its history has grown past
 * input.continueAfterEvents events or PAYMENT_CONTINUE_AFTER.bytes, or Temporal suggests it:
 * well before the server's limits (2 000 updates, 51 200 events or 50 MB), past which a
 * merchant's capture or cancel could no longer reach it.
 */
export function continuing(run: RunState): Continue | undefined {
  const info = workflowInfo();
  const full =
    run.updatesTaken >= (run.input.continueAfterUpdates ?? PAYMENT_CONTINUE_AFTER.updates) ||
    info.continueAsNewSuggested ||
    info.historyLength >= (run.input.continueAfterEvents ?? PAYMENT_CONTINUE_AFTER.events) ||
    info.historySize >= PAYMENT_CONTINUE_AFTER.bytes;
  return full && allHandlersFinished() ? { kind: 'continue' } : undefined;
}

/** Continues as new, carrying the wait (its charge and deadline) and what the run knows; the memo and search attributes go with it. */
export async function continueRunAsNew(run: RunState, wait: Pick<PaymentCarried, 'wait' | 'charge' | 'deadline' | 'pollIntervalMs'>): Promise<never> {
  const continued: PaymentCarried = {
    ...wait,
    status: run.status,
    firstAnswer: run.firstAnswer!,
    chargingAttempt: run.chargingAttempt,
    routeMemo: run.routeMemo,
    ...(run.routePlan ? { routePlan: run.routePlan } : {}),
    reports: [...run.reports],
  };
  const info = workflowInfo();
  log.info('the payment run continues as new', { payment_id: run.input.paymentId, wait: wait.wait, history_length: info.historyLength, updates_taken: run.updatesTaken });
  const { continued: _previous, ...input } = run.input;
  // The same workflow type (paymentWorkflow), with the same input but what it carries.
  return continueAsNew<(input: PaymentWorkflowInput) => Promise<FinalResponse>>({ ...input, continued });
}

// ── The run's state as others see it: status, memo, reports ──────────────────────────────

export function setStatus(run: RunState, next: PaymentStatus | 'rejected'): void {
  if (next !== 'rejected') run.status = next;
  upsertSearchAttributes([{ key: PaymentStatusKey, value: next }]);
}

/** Keeps the memo's view of the provider's charge current, for an operator in the Web UI. */
export function showCharge(run: RunState, charge: ProviderCharge): void {
  upsertMemo({ provider_charge_id: charge.id, charge_status: charge.status, ...run.routeMemo });
}

export function showAttempts(run: RunState, plan: RoutePlan, attempts: AttemptMemo[], current: AttemptMemo | null): void {
  run.routeMemo = { provider: current?.provider ?? attempts[attempts.length - 1]!.provider, attempts: current ? [...attempts, current] : [...attempts] };
  upsertMemo({ route: plan.providers, route_reason: plan.reason, ...run.routeMemo });
}

/** `from`: the PSP that reported it (by default the one the run asked: a poll's, the details call's). */
export function noteReport(run: RunState, charge: ProviderCharge, from: string | null = run.chargingAttempt.provider ?? null): void {
  // A charge state (the lifecycle table's); anything else (e.g. a refund's event) is not about the charge's outcome.
  if (!isChargeState(charge.status)) return;
  // The charge waited on, not named by its PSP yet (a redirect answered without the
  // charge's id), is named by that PSP's first report of a charge under our reference: no
  // other charge of this payment is there (a route names each PSP once).
  if (run.waitingChargeId === '' && charge.id !== '' && from !== null && from === run.chargingAttempt.provider && charge.reference === run.input.paymentId) run.waitingChargeId = charge.id;
  if (run.reports.length >= MAX_KEPT_REPORTS) run.reports.shift();
  run.reports.push(charge);
}

/**
 * The PSP's report of a capture asked for (one that came after `before`): the charge
 * `succeeded`, or still `requires_capture` with a decline code (the capture failed).
 */
export function captureReport(run: RunState, chargeId: string, before: ReadonlySet<ProviderCharge>): ProviderCharge | undefined {
  return run.reports.find(
    (r) => !before.has(r) && r.id === chargeId && (r.status === 'succeeded' || (r.status === 'requires_capture' && r.declineCode !== null && r.declineCode !== CANCEL_FAILED)),
  );
}

/** The PSP's report of a void asked for (one that came after `before`): the charge `canceled`, or still `requires_capture` with `cancel_failed` (refused). */
export function cancelReport(run: RunState, chargeId: string, before: ReadonlySet<ProviderCharge>): ProviderCharge | undefined {
  return run.reports.find((r) => !before.has(r) && r.id === chargeId && (r.status === 'canceled' || (r.status === 'requires_capture' && r.declineCode === CANCEL_FAILED)));
}

/**
 * The first report about our charge that decides it from the status the payment waits in
 * (domain/payments.ts applyChargeReport): a wait reported late, a duplicate, or
 * anything that would leave a final status changes nothing.
 */
export function decidedBy(run: RunState, chargeId: string): PspOutcome | undefined {
  const charge = run.reports.find((report) => {
    if (report.id !== chargeId || chargeId === '') return false;
    const next = applyChargeReport(run.status, report.status);
    return next !== null && !isOutcomePending(next);
  });
  return charge ? { kind: 'decided', charge } : undefined;
}
