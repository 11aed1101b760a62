import { ApplicationFailure, condition, log, setHandler, sleep } from '@temporalio/workflow';
import type { LateChargeOutcome, LateChargeStanding } from '../activities';
import type { ProviderCharge } from '../provider/types';
import { FailureType } from '../shared/definitions';
import { CANCEL_FAILED, chargeReportSignal, type LateChargeInput, type LateChargeResult, type LateChargeWorkflow } from '../shared/payments';
import { providerSubKey } from '../shared/keys';
import { REFUND_CONFIRMATION_WINDOW_SECONDS, refundReportSignal, type RefundReport } from '../shared/refunds';
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
/** How long a void confirmed by notification (its notification of the cancel) is waited for; none by then needs an operator. */
const VOID_CONFIRMATION_MS = 3_600_000;
/** Reports kept: a flood of webhooks cannot grow the run's state without bound. */
const MAX_REPORTS = 20;
/**
 * While a void or refund waits for its notification, the stored notifications are read too: at
 * once, then after 30 s, doubling to an hour. A notification stored before this run asked (its
 * modification made first by the payment's own run, under the same key) is never signalled here.
 */
const STORED_LOOK_FIRST_MS = 30_000;
const STORED_LOOK_MAX_MS = 3_600_000;

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
 *    failed), whose charge this is and whose own run did not give it back (a compensation, a
 *    cancel refused or unconfirmed: domain/payments.ts chargeGivenBackByItsRun) has money to give back. A payment that still waits in
 *    `processing` is looked at again later: its run may have taken its last look at the PSP
 *    just before the debit succeeded, and then expire it and close without seeing this.
 * 2. Look the charge up at the PSP (the webhook's word is not enough; at a kind that has no
 *    retrieval, modifications `notified`, the signed notification's charge in the input is the
 *    PSP's word): succeeded with money not yet refunded → refund it under the payment's
 *    compensation sub-key (the same key the payment's own run uses when it finds a late success
 *    itself, so the PSP makes one refund whoever asks first); authorized → void it under the
 *    payment's void sub-key. A void the PSP answers with the charge still authorized (its
 *    cancels are notified) is done when its CANCELLATION comes (passed here as a chargeReport by
 *    the charge event step), within VOID_CONFIRMATION_MS; refused or unconfirmed, the payment is
 *    flagged `needs_operator`. A refund answered `pending` is done when its REFUND comes (passed
 *    here by the refund event's workflow), within REFUND_CONFIRMATION_WINDOW_SECONDS; REFUND_FAILED, or
 *    none by then, is `refund_failed`, flagged `needs_operator`. The void and the refund are
 *    asked under the payment's own keys, so one the payment's run made first is answered again
 *    `received`, its notification delivered before this run asked: the stored notifications are
 *    read as well as the signals (awaitReport). A notified charge whose stored cancel notification says
 *    it was canceled holds nothing: its notification came after a later one (a PSP's are not
 *    ordered), and nothing is voided again.
 * 3. Record it on the payment (failure code and message; payment.late_success_refunded).
 */
export const lateChargeWorkflow: LateChargeWorkflow = async function lateChargeWorkflow(input: LateChargeInput): Promise<LateChargeResult> {
  const { paymentId, chargeId } = input;
  const late = listenForReports(input);
  const standing = await awaitStanding(input);
  if (standing.decision !== 'act') {
    log.info('late charge: nothing to give back', { payment_id: paymentId, charge_id: chargeId, reason: standing.reason });
    return { action: 'nothing', reason: standing.reason, refundId: null };
  }
  return giveBackInRounds(late, standing);
};

/** One late charge's run: its input, and the PSP's reports of what it asked (signals). */
interface LateCharge {
  readonly input: LateChargeInput;
  /** The PSP's reports of a void this run asked for at a kind whose cancels are notified (CANCELLATION). */
  readonly reports: ProviderCharge[];
  /** And of a refund it asked for (REFUND, REFUND_FAILED), passed on by the refund event's workflow (refundEventWorkflow). */
  readonly refundReports: RefundReport[];
}

/** The run's signals: the PSP's reports about this charge, kept up to MAX_REPORTS each. */
function listenForReports(input: LateChargeInput): LateCharge {
  const late: LateCharge = { input, reports: [], refundReports: [] };
  setHandler(chargeReportSignal, (report) => {
    if (report.charge.id === input.chargeId && late.reports.length < MAX_REPORTS) late.reports.push(report.charge);
  });
  setHandler(refundReportSignal, (report) => {
    if (report.chargeId === input.chargeId && late.refundReports.length < MAX_REPORTS) late.refundReports.push(report);
  });
  return late;
}

/** The payment's standing, looked at again while it still waits (at most MAX_LOOKS looks): act or skip. */
async function awaitStanding(input: LateChargeInput): Promise<LateChargeStanding> {
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
  return standing;
}

/** The charge looked at and its money given back, again (up to MAX_ROUNDS) when the PSP refused because the charge moved on; then recorded on the payment. */
async function giveBackInRounds(late: LateCharge, standing: LateChargeStanding): Promise<LateChargeResult> {
  const { input } = late;
  const { paymentId, chargeId, provider } = input;
  for (let round = 1; ; round++) {
    // A kind without retrieval: the signed notification's charge is the PSP's word.
    const charge = input.charge ?? (await providerSteps.retrieveCharge({ paymentId, chargeId, provider }));
    let outcome: LateChargeOutcome | null;
    try {
      outcome = await giveBack(late, charge);
    } catch (error) {
      // The PSP refused the void or refund because the charge moved on meanwhile: look again
      // (where the PSP can be asked). A refusal that persists ends the run failed (non-retryable), visible in the Web UI.
      if (!failureOfType(error, FailureType.ProviderRejected) || round >= MAX_ROUNDS || input.charge) throw error;
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
}

/** Gives the charge's money back, or null when it holds none (already refunded, declined, canceled). */
async function giveBack(late: LateCharge, charge: ProviderCharge): Promise<LateChargeOutcome | null> {
  if (charge.status === 'requires_capture') return voidAuthorization(late);
  const kept = charge.amountCapturedMinor - charge.amountRefundedMinor;
  if (charge.status !== 'succeeded' || kept <= 0) return null;
  return refundKept(late, charge, kept);
}

/** The PSP's report of the void: canceled, or refused (still authorized, `cancel_failed`). */
function cancelReport(late: LateCharge): ProviderCharge | undefined {
  return late.reports.find((r) => r.status === 'canceled' || (r.status === 'requires_capture' && r.declineCode === CANCEL_FAILED));
}

/** Voids the authorization, or null when the PSP has canceled it since (the payment's own void). */
async function voidAuthorization(late: LateCharge): Promise<LateChargeOutcome | null> {
  const { input } = late;
  const { paymentId, chargeId, provider } = input;
  const stored = () => records.storedCancellation({ provider, paymentId, chargeId });
  // A notified authorization the PSP has canceled since (the payment's own void): nothing is held.
  if (input.charge && (await stored())?.status === 'canceled') return null;
  const answered = await providerSteps.voidCharge({ paymentId, chargeId, provider });
  if (answered.status !== 'requires_capture') return { kind: 'voided' };
  // Confirmed by notification (modifications `notified`): the PSP's CANCELLATION decides.
  const signalled = () => {
    const report = cancelReport(late);
    return report && { status: report.status === 'canceled' ? ('canceled' as const) : ('cancel_failed' as const), message: report.declineMessage };
  };
  const storedReport = async () => {
    const found = await stored();
    return found && { ...found, message: null };
  };
  const report = await awaitReport(signalled, storedReport, VOID_CONFIRMATION_MS);
  if (report?.status === 'canceled') return { kind: 'voided' };
  const message = report
    ? `the PSP refused the void: ${report.message ?? 'the cancel failed'}`
    : `the PSP did not confirm the void within ${VOID_CONFIRMATION_MS / 60_000} min`;
  log.error('late charge: the void was not confirmed; needs an operator', { payment_id: paymentId, charge_id: chargeId, message });
  return { kind: 'void_failed', message };
}

/** Refunds the money the charge kept, under the payment's compensation sub-key. */
async function refundKept(late: LateCharge, charge: ProviderCharge, kept: number): Promise<LateChargeOutcome> {
  const { paymentId, chargeId, provider } = late.input;
  let refund = await providerSteps.refundCharge({ subKey: providerSubKey.compensation(paymentId), chargeId, amountMinor: kept, reference: paymentId, provider });
  if (refund.status === 'pending') {
    // Confirmed by notification (modifications `notified`): the PSP's REFUND (or REFUND_FAILED) decides.
    const refundId = refund.id;
    const settled = () => late.refundReports.find((r) => r.id === refundId && r.status !== 'pending');
    const stored = async (): Promise<RefundReport | null> => {
      const found = await records.storedRefundSettlement({ provider, refundId });
      return found && { id: refundId, chargeId, status: found.status, amountMinor: kept, failureCode: found.status === 'failed' ? 'refund_failed' : null, failureMessage: null };
    };
    const report = await awaitReport(settled, stored, REFUND_CONFIRMATION_WINDOW_SECONDS * 1000);
    if (!report) {
      log.error('late charge: the refund was not confirmed; needs an operator', { payment_id: paymentId, charge_id: chargeId, refund_id: refund.id });
      return { kind: 'refund_failed', message: `the PSP did not confirm refund ${refund.id} within ${REFUND_CONFIRMATION_WINDOW_SECONDS / 86_400} days` };
    }
    refund = { ...refund, status: report.status, failureCode: report.failureCode, failureMessage: report.failureMessage };
  }
  if (refund.status === 'failed') {
    log.error('late charge: the PSP refused its refund; needs an operator', { payment_id: paymentId, charge_id: chargeId, refund_id: refund.id });
    return { kind: 'refund_failed', message: refund.failureMessage ?? refund.failureCode ?? 'no reason given' };
  }
  return { kind: 'refunded', refundId: refund.id, amountMinor: refund.amountMinor, currency: charge.currency };
}

/**
 * A notified modification's outcome: signalled to this run, or stored before it asked (read at
 * once, then at growing intervals); undefined when neither came within `withinMs`.
 */
async function awaitReport<T>(signalled: () => T | undefined, stored: () => Promise<T | null>, withinMs: number): Promise<T | undefined> {
  const deadline = Date.now() + withinMs;
  for (let lookMs = STORED_LOOK_FIRST_MS; ; lookMs = Math.min(lookMs * 2, STORED_LOOK_MAX_MS)) {
    const found = signalled() ?? (await stored()) ?? undefined;
    if (found !== undefined) return found;
    const left = deadline - Date.now();
    if (left <= 0) return undefined;
    if (await condition(() => signalled() !== undefined, Math.min(lookMs, left))) return signalled();
  }
}
